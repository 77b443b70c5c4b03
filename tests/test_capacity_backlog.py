"""Capacity for every source and the backlog (issue #26), on a hand-written Slurm store.

Fixtures are written as the tools print them, from Slurm's own documentation:

- ``sacct -a -X -P`` (``--parsable2``, ``doc/man/man1/sacct.1``: fields separated by
  ``|``, no trailing ``|``; a header line of the field names). ``Submit`` / ``Start`` /
  ``End`` are ``YYYY-MM-DDTHH:MM:SS`` local times; a job that has not started prints
  ``Unknown`` for ``Start`` and ``End`` (``slurm_make_time_str`` of a zero time), one
  cancelled while queued its ``End`` and no start (``None`` in current releases);
  ``State`` is ``PENDING``, ``COMPLETED``, ``CANCELLED by <uid>``; ``AllocTRES`` is
  empty and ``NodeList`` ``None assigned`` until resources are allocated; ``ReqTRES`` /
  ``AllocTRES`` are ``billing=..,cpu=..,gres/gpu=N,mem=..,node=..``.
- ``sinfo -N --noconvert -o "%N|%P|%T|%c|%m|%G"`` (``doc/man/man1/sinfo.1``: one line
  per node and partition under ``-N``; ``%P`` ends the default partition with ``*``;
  ``%T`` the extended state, lower case; ``%G`` the GRES ``gpu:a100:4(S:0-1)``,
  ``(null)`` for none).

Times are UTC (``--tz UTC``). Every expected figure is worked by hand below.

The jobs (``gpus`` from ``AllocTRES``, else ``ReqTRES``; partition = ``vc``):

====  =======  =====  ====  ==========  =================  =================
job   part.    user   GPUs  submit      start              end
====  =======  =====  ====  ==========  =================  =================
101   gpu      alice  4     08:00       08:00              10:00
102   gpu      bob    2     08:30       09:00              09:30
103   gpu      carol  8     09:00       (pending)          -
104   gpu      alice  1     10:00       (pending)          -
105   gpu      bob    2     09:15       (never: cancelled) 09:45
107   debug    erin   1     10:30       11:00              12:00
108   cpu      alice  0     11:00       11:00              11:30
109   cpu      dave   0     11:30       (pending)          -
====  =======  =====  ====  ==========  =================  =================

The latest recorded time is 12:00 (107's end): the as-of instant.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpu_trace.cli import app

runner = CliRunner()
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

SACCT = """\
JobID|JobName|Partition|Account|User|State|Submit|Start|End|Elapsed|NNodes|NCPUS|ReqTRES|AllocTRES|NodeList
101|train|gpu|vision|alice|COMPLETED|2026-03-01T08:00:00|2026-03-01T08:00:00|2026-03-01T10:00:00|02:00:00|1|32|billing=32,cpu=32,gres/gpu=4,mem=64G,node=1|billing=32,cpu=32,gres/gpu:a100=4,gres/gpu=4,mem=64G,node=1|gpu01
102|eval|gpu|vision|bob|COMPLETED|2026-03-01T08:30:00|2026-03-01T09:00:00|2026-03-01T09:30:00|00:30:00|1|16|billing=16,cpu=16,gres/gpu=2,mem=32G,node=1|billing=16,cpu=16,gres/gpu:a100=2,gres/gpu=2,mem=32G,node=1|gpu02
103|big|gpu|nlp|carol|PENDING|2026-03-01T09:00:00|Unknown|Unknown|00:00:00|2|64|billing=64,cpu=64,gres/gpu=8,mem=128G,node=2||None assigned
104|small|gpu|vision|alice|PENDING|2026-03-01T10:00:00|Unknown|Unknown|00:00:00|1|8|billing=8,cpu=8,gres/gpu=1,mem=16G,node=1||None assigned
105|sweep|gpu|nlp|bob|CANCELLED by 1001|2026-03-01T09:15:00|None|2026-03-01T09:45:00|00:00:00|1|16|billing=16,cpu=16,gres/gpu=2,mem=32G,node=1||None assigned
107|debug|debug|nlp|erin|COMPLETED|2026-03-01T10:30:00|2026-03-01T11:00:00|2026-03-01T12:00:00|01:00:00|1|8|billing=8,cpu=8,gres/gpu=1,mem=16G,node=1|billing=8,cpu=8,gres/gpu:a100=1,gres/gpu=1,mem=16G,node=1|gpu02
108|prep|cpu|vision|alice|COMPLETED|2026-03-01T11:00:00|2026-03-01T11:00:00|2026-03-01T11:30:00|00:30:00|1|4|billing=4,cpu=4,mem=8G,node=1|billing=4,cpu=4,mem=8G,node=1|cpu01
109|etl|cpu|vision|dave|PENDING|2026-03-01T11:30:00|Unknown|Unknown|00:00:00|1|4|billing=4,cpu=4,mem=8G,node=1||None assigned
"""

SINFO_HEADER = "NODELIST|PARTITION|STATE|CPUS|MEMORY|GRES"
SINFO_NOW = [
    "gpu01|gpu*|mixed|64|515000|gpu:a100:4(S:0-1)",
    "gpu02|gpu*|idle|64|515000|gpu:a100:4(S:0-1)",
    "gpu02|debug|idle|64|515000|gpu:a100:4(S:0-1)",
    "gpu03|gpu*|drained|64|515000|gpu:a100:4(S:0-1)",
    "cpu01|cpu|idle|32|257000|(null)",
]
"""Taken the next day (after every job): gpu01 + gpu02 = 8 GPUs (gpu03 drained is not
counted); partitions gpu 8, debug 4 (gpu02), cpu 0."""


def run(*args: str | Path) -> Any:
    return runner.invoke(app, [str(a) for a in args])


def _sinfo(folder: Path, name: str, rows: list[str]) -> None:
    folder.mkdir(exist_ok=True)
    (folder / name).write_text("\n".join([SINFO_HEADER, *rows]) + "\n")


def slurm_store(tmp_path: Path, snapshots: dict[str, list[str]] | None = None) -> Path:
    """The jobs above, plus ``sinfo`` snapshots (file name -> lines), if any."""
    store = tmp_path / "store"
    (tmp_path / "sacct.psv").write_text(SACCT)
    r = run("ingest", "slurm", tmp_path / "sacct.psv", "--cluster", "tiny", "--tz", "UTC",
            "--store", store)  # fmt: skip
    assert r.exit_code == 0, r.output
    if snapshots:
        for name, rows in snapshots.items():
            _sinfo(tmp_path / "inv", name, rows)
        r = run("ingest", "sinfo", tmp_path / "inv", "--cluster", "tiny", "--store", store)
        assert r.exit_code == 0, r.output
    return store


def analyze(store: Path, *args: str) -> list[dict[str, Any]]:
    r = run("analyze", *args, "--store", store, "--format", "json")
    assert r.exit_code == 0, r.output
    rows: list[dict[str, Any]] = json.loads(r.stdout)
    return rows


def hours(rows: list[dict[str, Any]], col: str) -> dict[str, Any]:
    return {x["time"][11:13]: x[col] for x in rows}


# --------------------------------------------------------------------------- capacity

# GPUs held (time-weighted per hour; jobs with a start and an end, CPU job 108 is not
# a GPU job):
#   08:00-09:00  101 (4)                               = 4
#   09:00-10:00  101 (4) + 102 (2 GPUs x 30 of 60 min)  = 5
#   10:00-11:00  nothing (101 ended at 10:00, 107 starts at 11:00) = 0
#   11:00-12:00  107 (1)                               = 1
#   12:00        the last end; the bin holds nothing     = 0
ALLOCATED = {"08": 4.0, "09": 5.0, "10": 0.0, "11": 1.0, "12": 0.0}


def test_inventory_taken_after_the_jobs_is_the_denominator(tmp_path: Path) -> None:
    """The defect: an operator exports ``sinfo`` after the ``sacct`` window, so every
    bin came before the first snapshot and had no capacity (allocation % null, the
    report's charts empty). Bins before the first snapshot take it: 8 GPUs."""
    store = slurm_store(tmp_path, {"sinfo-2026-03-02T0000Z.txt": SINFO_NOW})
    rows = analyze(store, "utilization", "--source", "slurm")
    assert hours(rows, "allocated_gpus") == pytest.approx(ALLOCATED)
    assert set(hours(rows, "capacity_gpus").values()) == {8}
    assert set(hours(rows, "capacity_basis").values()) == {"inventory"}
    # 4/8, 5/8, 0/8, 1/8, 0/8
    assert hours(rows, "allocation_pct") == pytest.approx(
        {"08": 50.0, "09": 62.5, "10": 0.0, "11": 12.5, "12": 0.0}
    )


NODES_CSV = """\
node,gpus,gpu_type,cpus,mem,partition,available,time
gpu01,4,a100,64,512G,gpu,true,2026-03-02T00:00:00Z
gpu02,4,a100,64,512G,gpu;debug,true,2026-03-02T00:00:00Z
gpu03,4,a100,64,512G,gpu,false,2026-03-02T00:00:00Z
cpu01,0,,32,256G,cpu,true,2026-03-02T00:00:00Z
"""
"""The same nodes as a hand-kept CSV (the ``nodes-csv`` loader's documented columns):
gpu03 unavailable, so 8 GPUs."""


@pytest.mark.parametrize("sources", [(), ("--source", "slurm")])
def test_nodes_csv_inventory_is_the_denominator_of_slurm_jobs(
    tmp_path: Path, sources: tuple[str, ...]
) -> None:
    """``ingest nodes-csv`` writes source ``nodes-csv``; its cluster ``tiny`` is the
    denominator of the Slurm jobs of cluster ``tiny`` (was: inferred / none), also when
    the analysis is restricted to ``--source slurm``. Same figures as the sinfo case."""
    store = slurm_store(tmp_path)
    (tmp_path / "nodes.csv").write_text(NODES_CSV)
    r = run("ingest", "nodes-csv", tmp_path / "nodes.csv", "--cluster", "tiny", "--store", store)
    assert r.exit_code == 0, r.output
    rows = [x for x in analyze(store, "utilization", *sources) if x["source"] == "slurm"]
    assert set(hours(rows, "capacity_gpus").values()) == {8}
    assert set(hours(rows, "capacity_basis").values()) == {"inventory"}
    assert hours(rows, "allocation_pct") == pytest.approx(
        {"08": 50.0, "09": 62.5, "10": 0.0, "11": 12.5, "12": 0.0}
    )


@pytest.mark.parametrize("sources", [(), ("--source", "slurm")])
def test_nodes_csv_inventory_scores_fragmentation_of_slurm_jobs(
    tmp_path: Path, sources: tuple[str, ...]
) -> None:
    """``analyze fragmentation`` on a Slurm export + a nodes CSV of its cluster scored
    nothing ("no machine inventory with GPUs in the store", exit 1): the CSV's nodes are
    stored under source ``nodes-csv``, which has no jobs. They are lent to the Slurm
    jobs of cluster ``tiny``: the three GPU nodes of the CSV, 4 + 4 + 4 = 12 GPUs
    (fragmentation scores installed nodes, the unavailable gpu03 included)."""
    store = slurm_store(tmp_path)
    (tmp_path / "nodes.csv").write_text(NODES_CSV)
    r = run("ingest", "nodes-csv", tmp_path / "nodes.csv", "--cluster", "tiny", "--store", store)
    assert r.exit_code == 0, r.output
    rows = analyze(store, "fragmentation", *sources)
    (total,) = [x for x in rows if x["gpu_type"] == "(all)"]
    assert total["source"] == "slurm" and total["inventory"].startswith("tiny-inventory")
    assert total["machines"] == 3 and total["gpus"] == 12


def test_capacity_is_a_step_function_of_the_snapshots(tmp_path: Path) -> None:
    """Snapshots at 09:00 (gpu03 still idle: 4 + 4 + 4 = 12 GPUs) and 11:00 (gpu03
    drained: 8). 08:00 is before the first snapshot (takes it: 12); 09:00 and 10:00
    hold the 09:00 snapshot (12); 11:00 and 12:00 the 11:00 one (8)."""
    before = [line.replace("drained", "idle") for line in SINFO_NOW]
    store = slurm_store(
        tmp_path,
        {"sinfo-2026-03-01T0900Z.txt": before, "sinfo-2026-03-01T1100Z.txt": SINFO_NOW},
    )
    rows = analyze(store, "utilization", "--source", "slurm")
    assert hours(rows, "capacity_gpus") == {"08": 12, "09": 12, "10": 12, "11": 8, "12": 8}
    # 4/12, 5/12, 0, 1/8, 0
    assert hours(rows, "allocation_pct") == pytest.approx(
        {"08": 100 / 3, "09": 500 / 12, "10": 0.0, "11": 12.5, "12": 0.0}
    )


def test_gpu_type_capacity_follows_the_snapshots(tmp_path: Path) -> None:
    """``--by gpu_type``: the a100 GPUs (jobs 101, 102, 107 hold ``gres/gpu:a100``) are
    12 at 09:00 and 8 from 11:00 (gpu03 drained), per snapshot as for the cluster (was:
    the largest snapshot, 12, at all times). 08 4/12, 09 5/12, 10 0, 11 1/8, 12 0."""
    before = [line.replace("drained", "idle") for line in SINFO_NOW]
    store = slurm_store(
        tmp_path,
        {"sinfo-2026-03-01T0900Z.txt": before, "sinfo-2026-03-01T1100Z.txt": SINFO_NOW},
    )
    rows = analyze(store, "utilization", "--by", "gpu_type", "--source", "slurm")
    assert {x["gpu_type"] for x in rows} == {"a100"}
    assert hours(rows, "capacity_gpus") == {"08": 12, "09": 12, "10": 12, "11": 8, "12": 8}
    assert hours(rows, "allocation_pct") == pytest.approx(
        {"08": 100 / 3, "09": 500 / 12, "10": 0.0, "11": 12.5, "12": 0.0}
    )


def test_partition_capacity(tmp_path: Path) -> None:
    """``--by vc``: partition gpu (101, 102) over its 8 GPUs, debug (107) over gpu02's 4."""
    store = slurm_store(tmp_path, {"sinfo-2026-03-02T0000Z.txt": SINFO_NOW})
    rows = analyze(store, "utilization", "--by", "vc", "--source", "slurm")
    gpu = [x for x in rows if x["vc"] == "gpu"]
    debug = [x for x in rows if x["vc"] == "debug"]
    # gpu: 08 4/8, 09 5/8, 10 0 (its last end); debug: 11 1/4, 12 0 (its last end)
    assert hours(gpu, "allocation_pct") == pytest.approx({"08": 50.0, "09": 62.5, "10": 0.0})
    assert hours(debug, "allocation_pct") == pytest.approx({"11": 25.0, "12": 0.0})
    assert {x["capacity_basis"] for x in rows} == {"inventory"}


def test_without_inventory_capacity_is_inferred_and_labelled(tmp_path: Path) -> None:
    """No inventory: the denominator is the peak of GPUs held at once, 6 (09:00-09:30,
    101's 4 + 102's 2), labelled ``inferred``."""
    store = slurm_store(tmp_path)
    rows = analyze(store, "utilization", "--source", "slurm")
    assert set(hours(rows, "capacity_gpus").values()) == {6}
    assert set(hours(rows, "capacity_basis").values()) == {"inferred"}
    # 4/6, 5/6, 0, 1/6, 0
    assert hours(rows, "allocation_pct") == pytest.approx(
        {"08": 200 / 3, "09": 250 / 3, "10": 0.0, "11": 100 / 6, "12": 0.0}
    )


def numbers(cells: list[str]) -> list[Any]:
    """Table cells with numbers read back (to the 0.05 the page shows at least)."""
    out: list[Any] = []
    for c in cells:
        try:
            out.append(pytest.approx(float(c.replace(",", "")), abs=0.05))
        except ValueError:
            out.append(c)
    return out


def _utilization_html(page: str) -> str:
    start = page.index("<h2>Utilization (allocation)</h2>")
    return page[start : page.index("</section>", start)]


def test_report_shows_mean_allocation_from_the_inventory(tmp_path: Path) -> None:
    """The report's utilization table (was blank). The report bins by the minute over
    this 4-hour span: 241 bins 08:00 ... 12:00, GPUs held 4 (60 bins), 6 (09:00-09:29,
    30), 4 (30), 0 (60), 1 (60), 0 (12:00). Over 8 GPUs: mean (60 x 50 + 30 x 75 + 30 x
    50 + 60 x 12.5) / 241 = 7500 / 241 = 31.12; median: 61 zeros, then 60 bins at 12.5,
    so the 121st is 12.50; peak 6."""
    store = slurm_store(tmp_path, {"sinfo-2026-03-02T0000Z.txt": SINFO_NOW})
    r = run("report", "--store", store, "--out", tmp_path / "site")
    assert r.exit_code == 0, r.output
    cells = re.findall(
        r"<td>([^<]*)</td>", _utilization_html((tmp_path / "site/slurm.html").read_text())
    )
    assert numbers(cells[:7]) == ["slurm", "tiny", 31.12, 12.5, 6, 8, "inventory"]


def test_report_says_when_capacity_is_inferred(tmp_path: Path) -> None:
    """Without inventory, the table, the text and the chart's subtitle say ``inferred``;
    over 6 GPUs (minute bins as above): mean (60 x 400/6 + 30 x 100 + 30 x 400/6 + 60 x
    100/6) / 241 = 10000 / 241 = 41.49; median 100/6 = 16.67."""
    store = slurm_store(tmp_path)
    r = run("report", "--store", store, "--out", tmp_path / "site")
    assert r.exit_code == 0, r.output
    page = (tmp_path / "site/slurm.html").read_text()
    section = _utilization_html(page)
    cells = re.findall(r"<td>([^<]*)</td>", section)
    assert numbers(cells[:7]) == ["slurm", "tiny", 41.49, 16.67, 6, 6, "inferred"]
    assert "slurm/tiny: capacity inferred (no inventory)" in section
    assert "allocation shares use the peak of GPUs held at once (inferred)" in page
    # both charts of the section (allocation over time, diurnal profile) say so
    assert page.count('"subtitle": "slurm/tiny: capacity inferred (no inventory)') == 2


def test_report_without_capacity_draws_no_empty_allocation_chart(tmp_path: Path) -> None:
    """Every GPU node drained in the only snapshot: capacity 0, no share in any bin.
    The section says so and draws no (empty) allocation chart; GPUs held (peak 6) stay
    in the table."""
    drained = [
        line.replace("mixed", "drained").replace("idle", "drained") if "gpu" in line else line
        for line in SINFO_NOW
    ]
    store = slurm_store(tmp_path, {"sinfo-2026-03-02T0000Z.txt": drained})
    rows = analyze(store, "utilization", "--source", "slurm")
    assert {x["allocation_pct"] for x in rows} == {None}
    assert set(hours(rows, "capacity_gpus").values()) == {0}
    r = run("report", "--store", store, "--out", tmp_path / "site")
    assert r.exit_code == 0, r.output
    section = _utilization_html((tmp_path / "site/slurm.html").read_text())
    assert "No allocation share to chart" in section
    assert 'class="chart"' not in section
    cells = re.findall(r"<td>([^<]*)</td>", section)
    assert numbers(cells[4:6]) == [6, 0]


# --------------------------------------------------------------------------- backlog

# Pending intervals of GPU jobs, submit -> start, or -> end when cancelled in the
# queue, or -> as-of (12:00) when still pending (CPU jobs 108, 109 are not counted;
# 101 started as submitted: no interval):
#   102 [08:30, 09:00) 2 GPUs    103 [09:00, 12:00) 8 (still pending)
#   105 [09:15, 09:45) 2         104 [10:00, 12:00) 1 (still pending)
#   107 [10:30, 11:00) 1
# Step series (jobs, GPUs) from each change:
SERIES = [
    ("08:30", 1, 2.0),  # +102
    ("09:00", 1, 8.0),  # +103, -102
    ("09:15", 2, 10.0),  # +105
    ("09:45", 1, 8.0),  # -105
    ("10:00", 2, 9.0),  # +104
    ("10:30", 3, 10.0),  # +107
    ("11:00", 2, 9.0),  # -107
    ("12:00", 2, 9.0),  # as of: 103 and 104
]


def test_backlog_series_steps(tmp_path: Path) -> None:
    store = slurm_store(tmp_path)
    rows = analyze(store, "backlog", "--view", "series")
    got = [(x["time"][11:16], x["pending_jobs"], x["pending_gpus"]) for x in rows]
    assert got == SERIES


def test_backlog_series_binned(tmp_path: Path) -> None:
    """Hourly time-weighted means of the steps above:
    08:00  GPUs 2 x 30/60 = 1; jobs 1 x 30/60 = 0.5
    09:00  GPUs 8x15 + 10x30 + 8x15 = 540 /60 = 9; jobs 1x15 + 2x30 + 1x15 = 90/60 = 1.5
    10:00  GPUs 9x30 + 10x30 = 570/60 = 9.5; jobs 2x30 + 3x30 = 150/60 = 2.5
    11:00  GPUs 9; jobs 2.  12:00: the closing bin, nothing after it: 0."""
    store = slurm_store(tmp_path)
    rows = analyze(store, "backlog", "--view", "series", "--freq", "1h")
    assert hours(rows, "pending_gpus") == pytest.approx(
        {"08": 1.0, "09": 9.0, "10": 9.5, "11": 9.0, "12": 0.0}
    )
    assert hours(rows, "pending_jobs") == pytest.approx(
        {"08": 0.5, "09": 1.5, "10": 2.5, "11": 2.0, "12": 0.0}
    )


def test_backlog_now_by_group(tmp_path: Path) -> None:
    """At 12:00: 103 (carol, 8 GPUs, waiting 3 h) and 104 (alice, 1 GPU, 2 h)."""
    store = slurm_store(tmp_path)
    (total,) = analyze(store, "backlog")
    assert total["as_of"].startswith("2026-03-01T12:00:00")
    assert (total["pending_jobs"], total["pending_gpus"]) == (2, 9.0)
    assert (total["longest_wait_s"], total["median_wait_s"]) == (10800.0, 9000.0)
    by_user = {x["user"]: x for x in analyze(store, "backlog", "--by", "user")}
    assert {u: (x["pending_jobs"], x["pending_gpus"]) for u, x in by_user.items()} == {
        "alice": (1, 1.0),
        "carol": (1, 8.0),
    }
    sizes = analyze(store, "backlog", "--by", "gpus")
    assert [(x["size_bucket"], x["pending_gpus"]) for x in sizes] == [("1", 1.0), ("5-8", 8.0)]
    (part,) = analyze(store, "backlog", "--by", "partition")
    assert (part["partition"], part["pending_jobs"]) == ("gpu", 2)


def test_backlog_python_api(tmp_path: Path) -> None:
    """``gt.open(store).backlog(...)``: the same table as the command (12:00: carol 8
    GPUs, alice 1; at 09:30: 103 and 105, 10 GPUs)."""
    import datetime as dt

    import gpu_trace as gt

    s = gt.open(slurm_store(tmp_path))
    users = s.backlog(by="user").sort("user")
    assert users["user"].to_list() == ["alice", "carol"]
    assert users["pending_gpus"].to_list() == [1.0, 8.0]
    early = s.backlog(as_of=dt.datetime(2026, 3, 1, 9, 30, tzinfo=dt.UTC))
    assert early["pending_gpus"].to_list() == [10.0]
    with pytest.raises(ValueError, match="by must be one of"):
        s.backlog(by="queue")


def test_backlog_as_of_option(tmp_path: Path) -> None:
    """At 09:30: 103 (submitted 09:00, 8 GPUs, 1800 s) and 105 (09:15, 2 GPUs, 900 s,
    cancelled only at 09:45) wait; 104 and 107 are not submitted yet."""
    store = slurm_store(tmp_path)
    (total,) = analyze(store, "backlog", "--as-of", "2026-03-01T09:30:00Z")
    assert (total["pending_jobs"], total["pending_gpus"]) == (2, 10.0)
    longest = analyze(store, "backlog", "--view", "longest", "--as-of", "2026-03-01T09:30:00Z")
    assert [(x["job_id"], x["wait_s"]) for x in longest] == [("103", 1800.0), ("105", 900.0)]
    # At 10:00, the instant 104 is submitted: it waits (0 s) with 103 (8 GPUs, 3600 s);
    # 105 left the queue at 09:45.
    longest = analyze(store, "backlog", "--view", "longest", "--as-of", "2026-03-01T10:00:00Z")
    assert [(x["job_id"], x["wait_s"]) for x in longest] == [("103", 3600.0), ("104", 0.0)]
    (total,) = analyze(store, "backlog", "--as-of", "2026-03-01T10:00:00Z")
    assert (total["pending_jobs"], total["pending_gpus"]) == (2, 9.0)
    series = analyze(store, "backlog", "--view", "series", "--as-of", "2026-03-01T09:30:00Z")
    assert [(x["time"][11:16], x["pending_gpus"]) for x in series] == [
        ("08:30", 2.0),
        ("09:00", 8.0),
        ("09:15", 10.0),
        ("09:30", 10.0),
    ]


def test_backlog_bad_options_are_one_line(tmp_path: Path) -> None:
    store = slurm_store(tmp_path)
    for args, text in (
        (["--as-of", "yesterday"], "--as-of 'yesterday' is not a date or time"),
        (["--by", "queue"], "queue"),
        (["--top", "0"], "--top 0"),
        (["--view", "series", "--freq", "fortnight"], "--freq"),
        (["--freq", "1h"], "--freq bins the series: give it with --view series"),
    ):
        r = run("analyze", "backlog", *args, "--store", store)
        assert r.exit_code == 2, (args, r.output)
        assert "Traceback" not in r.output and text in r.output, (args, r.output)


def test_report_backlog_section(tmp_path: Path) -> None:
    store = slurm_store(tmp_path)
    r = run("report", "--store", store, "--out", tmp_path / "site")
    assert r.exit_code == 0, r.output
    page = (tmp_path / "site/slurm.html").read_text()
    start = page.index("<h2>Backlog</h2>")
    section = page[start : page.index("</section>", start)]
    cells = re.findall(r"<td>([^<]*)</td>", section)
    # by partition: gpu, 2 jobs, 9 GPUs; then the longest waits: 103 then 104
    assert cells[:5] == ["slurm", "tiny", "gpu", cells[3], "2"]
    assert cells.index("103") < cells.index("104")
    assert section.count('class="chart"') == 2


# --------------------------------------------------------------------------- chromium


def _marks_per_chart(dom: str) -> dict[str, int]:
    """Drawn data marks per chart container of a rendered page. Vega's SVG renderer puts
    each mark set in ``<g class="mark-<type> role-mark <name>">``, one element per datum
    (one path per line), each with ``role="graphics-symbol"`` and an ``aria-label`` of its
    data; a mark is drawn when it has geometry: a ``path`` with a non-empty ``d`` (a
    line whose every y is null is a ``path`` without one: the empty frame of the
    defect), or a ``text``. Axes, legends and titles have other roles; a selection brush
    (``..._brush``, ``..._brush_bg``) is a ``role-mark`` rect with no data, not counted."""
    ids = re.findall(r'<div class="chart[^"]*" id="(chart-[0-9-]+)"', dom)
    counts = {}
    for i, cid in enumerate(ids):
        start = dom.index(f'id="{cid}"')
        end = dom.index(f'id="{ids[i + 1]}"') if i + 1 < len(ids) else len(dom)
        groups = re.findall(
            r'<g class="mark-(?!group)\w+ role-mark ([^"]*)"[^>]*>(.*?)</g>',
            dom[start:end],
            flags=re.S,
        )
        drawn = 0
        for name, body in groups:
            if "brush" in name:
                continue
            for tag, attrs in re.findall(r"<(path|text|image)\b([^>]*)>", body):
                if 'role="graphics-symbol"' in attrs and (
                    tag != "path" or re.search(r'\sd="[^"]+"', attrs)
                ):
                    drawn += 1
        counts[cid] = drawn
    return counts


@pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("CI"), reason="chromium not installed (CI installs it)"
)
@pytest.mark.parametrize("inventory", [True, False], ids=["sinfo", "no-inventory"])
def test_every_chart_of_a_slurm_only_report_has_marks(tmp_path: Path, inventory: bool) -> None:
    """A Slurm-only store (the sacct export, with the sinfo inventory above or none)
    gives a report whose every chart draws marks in a real browser (the allocation
    charts were empty frames: no capacity, so no allocation %)."""
    from tests.test_report import chromium_render

    assert CHROMIUM, "CI must install chromium (.ci/run does)"
    store = slurm_store(tmp_path, {"sinfo-2026-03-02T0000Z.txt": SINFO_NOW} if inventory else None)
    r = run("report", "--store", store, "--out", tmp_path / "site")
    assert r.exit_code == 0, r.output
    for name in ("index.html", "slurm.html"):
        dom, _ = chromium_render(tmp_path / "site" / name, tmp_path / name)
        counts = _marks_per_chart(dom)
        assert counts, f"{name}: no charts rendered"
        # every chart container the page holds was rendered and counted
        page = (tmp_path / "site" / name).read_text()
        assert len(counts) == page.count('<div class="chart"'), (name, counts)
        empty = [cid for cid, n in counts.items() if n == 0]
        assert not empty, f"{name}: charts without marks: {empty} of {counts}"


# --------------------------------------------------------------------------- kubernetes


def _k8s_pod(name: str, node: str, gpus: str, start: str, end: str) -> dict[str, Any]:
    """A finished Pod as ``kubectl get pods -o json`` prints it (Kubernetes API reference,
    Pod v1: ``spec.nodeName``, ``spec.containers[].resources.requests``,
    ``status.phase``, ``status.conditions[]`` with ``type`` / ``status`` /
    ``lastTransitionTime``, ``status.containerStatuses[].state.terminated`` with
    ``startedAt`` / ``finishedAt``; RFC 3339 UTC times)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml", "creationTimestamp": start},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "main", "resources": {"requests": {"nvidia.com/gpu": gpus}}}],
        },
        "status": {
            "phase": "Succeeded",
            "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": start}],
            "containerStatuses": [
                {
                    "name": "main",
                    "state": {"terminated": {"exitCode": 0, "startedAt": start, "finishedAt": end}},
                }
            ],
        },
    }


def _k8s_node(name: str, ready: str) -> dict[str, Any]:
    """A Node (Node v1: ``status.capacity`` / ``allocatable`` quantities, the ``Ready``
    condition ``True`` / ``False``)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.product": "NVIDIA-A100"}},
        "spec": {},
        "status": {
            "capacity": {"nvidia.com/gpu": "8", "cpu": "64", "memory": "512Gi"},
            "allocatable": {"nvidia.com/gpu": "8", "cpu": "63", "memory": "500Gi"},
            "conditions": [{"type": "Ready", "status": ready}],
        },
    }


def test_kubernetes_nodes_are_the_denominator(tmp_path: Path) -> None:
    """Kubernetes is a source like any: nodes n1, n2 Ready (8 GPUs each), n3 NotReady (not counted, as a drained Slurm
    node is not): 16 GPUs (was 24). Pods: a on n1, 4 GPUs 10:00-12:00; b on n2, 8 GPUs
    11:00-12:00. Hourly: 10:00 4/16 = 25 %, 11:00 12/16 = 75 %, 12:00 (the last end) 0."""
    pods = [
        _k8s_pod("a", "n1", "4", "2026-03-01T10:00:00Z", "2026-03-01T12:00:00Z"),
        _k8s_pod("b", "n2", "8", "2026-03-01T11:00:00Z", "2026-03-01T12:00:00Z"),
    ]
    # a pod still Pending (unscheduled: no nodeName, no PodScheduled=True condition)
    pods.append(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "c",
                "namespace": "ml",
                "creationTimestamp": "2026-03-01T11:30:00Z",
            },
            "spec": {
                "containers": [{"name": "main", "resources": {"requests": {"nvidia.com/gpu": "2"}}}]
            },
            "status": {
                "phase": "Pending",
                "conditions": [
                    {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
                ],
            },
        }
    )
    nodes = [_k8s_node("n1", "True"), _k8s_node("n2", "True"), _k8s_node("n3", "False")]
    (tmp_path / "pods.json").write_text(json.dumps({"kind": "List", "items": pods}))
    (tmp_path / "nodes.json").write_text(json.dumps({"kind": "List", "items": nodes}))
    store = tmp_path / "store"
    r = run("ingest", "kubernetes", tmp_path / "pods.json", tmp_path / "nodes.json",
            "--cluster", "prod", "--store", store)  # fmt: skip
    assert r.exit_code == 0, r.output
    rows = analyze(store, "utilization", "--source", "kubernetes")
    assert set(hours(rows, "capacity_gpus").values()) == {16}
    assert set(hours(rows, "capacity_basis").values()) == {"inventory"}
    assert hours(rows, "allocation_pct") == pytest.approx({"10": 25.0, "11": 75.0, "12": 0.0})
    # the backlog at 12:00 (the last pod end): pod c, 2 GPUs, waiting since 11:30
    (now,) = analyze(store, "backlog", "--by", "vc")
    assert (now["vc"], now["pending_jobs"], now["pending_gpus"]) == ("ml", 1, 2.0)
    assert now["longest_wait_s"] == 1800.0
