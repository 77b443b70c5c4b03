"""Slurm: integration tests (``sacct -P`` files ingested into a real store).

Every expected figure below is computed in the comment beside it from the raw text of
the test's own input, never read back from our output.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import duckdb
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpu_trace.errors import InputError
from gpu_trace.loaders import LOADERS, ingest
from gpu_trace.store.scan import scan

ISSUE_FIELDS = (
    "JobID|JobIDRaw|JobName|User|Account|Partition|QOS|State|ExitCode|Submit|Eligible|"
    "Start|End|Elapsed|Timelimit|NNodes|NCPUS|ReqTRES|AllocTRES|NodeList"
)


def _write(tmp_path: Path, text: str, name: str = "jobs.psv") -> Path:
    f = tmp_path / name
    f.write_text(text)
    return f


def _ingest(path: Path, store: Path, **options: object) -> tuple[pl.DataFrame, pl.DataFrame]:
    options.setdefault("tz", "UTC")
    report = ingest(LOADERS["slurm"], path, store, **options)
    read, written, quarantined = report.totals
    assert read == written + quarantined + report.merged
    jobs = scan(store, "jobs", ["slurm"]).collect().sort("job_id")
    placements = scan(store, "placements", ["slurm"]).collect().sort("job_id", "machine_id")
    return jobs, placements


def _quarantine(store: Path) -> list[tuple[str, str, str]]:
    rows = scan(store, "quarantine", ["slurm"]).collect().sort("locator")
    return list(zip(rows["table"], rows["locator"], rows["reason"], strict=True))


def test_fields_by_name_any_order_parsable_trailing(tmp_path: Path) -> None:
    """--parsable (trailing |), shuffled field order, a field sacct adds we do not read."""
    text = (
        "State|NodeList|JobID|AllocTRES|Elapsed|Timelimit|Submit|Start|End|NCPUS|NNodes|"
        "ExitCode|Partition|Comment|\n"
        # 1-02:03:04 = 86400 + 2*3600 + 3*60 + 4 = 93784 s; 5 hosts; 40 GPUs / 5 = 8 each
        "CANCELLED by 12|gpu[01-04,07]|7|billing=8,gres/gpu:a100=40,mem=64G,node=5|"
        "1-02:03:04|UNLIMITED|2026-01-05T10:00:00|2026-01-05T10:00:30|"
        "2026-01-06T12:03:34|320|5|0:15|gpu|x|\n"
        # 12:34 = 754 s; node[1-3],gpu5 = node1 node2 node3 gpu5; 4 GPUs / 4 hosts = 1
        "TIMEOUT|node[1-3],gpu5|8|cpu=4,gres/gpu=4,mem=4000M|12:34|Partition_Limit|"
        "2026-01-05T11:00:00|2026-01-05T11:00:00|2026-01-05T11:12:34|4|4|0:1|cpu|y|\n"
    )
    jobs, placements = _ingest(_write(tmp_path, text), tmp_path / "store")
    a, b = jobs.row(0, named=True), jobs.row(1, named=True)
    assert (a["job_id"], a["status"], a["raw_status"]) == ("7", "cancelled", "CANCELLED by 12")
    assert (a["run_s"], a["queue_s"], a["time_limit_s"]) == (93784.0, 30.0, None)
    assert (a["gpus"], a["gpu_type"], a["mem_bytes"]) == (40.0, "a100", 64 * 2**30)
    assert (a["exit_code"], a["exit_signal"], a["nodes"], a["cpus"]) == (0, 15, 5, 320.0)
    assert a["submit_time"] == datetime(2026, 1, 5, 10, 0, tzinfo=UTC)
    assert (b["run_s"], b["time_limit_s"], b["status"]) == (754.0, None, "timeout")
    assert (b["gpus"], b["gpu_type"], b["mem_bytes"]) == (4.0, None, 4000 * 2**20)
    p7 = placements.filter(pl.col("job_id") == "7")
    assert p7["machine_id"].to_list() == ["gpu01", "gpu02", "gpu03", "gpu04", "gpu07"]
    assert p7["gpu_count"].to_list() == [8.0] * 5
    p8 = placements.filter(pl.col("job_id") == "8")
    assert sorted(p8["machine_id"].to_list()) == ["gpu5", "node1", "node2", "node3"]
    assert p8["gpu_count"].to_list() == [1.0] * 4


def test_bundled_sample_issue_format(tmp_path: Path) -> None:
    """The bundled sample: 22 lines after the header, none bad (hand count): 22 lines,
    + 8 for the pending range 41042_[1-9%2] (tasks 1..9, the %2 is a throttle), - 1 for
    the two components 41020+0 / 41020+1 of one heterogeneous job = 29 jobs."""
    sample = Path("data/samples/slurm/jobs.psv")
    assert sample.read_text().splitlines()[0] == ISSUE_FIELDS
    jobs, placements = _ingest(sample, tmp_path / "store", cluster="mycluster", tz="Europe/Berlin")
    assert jobs.height == 29
    assert set(jobs["cluster"]) == {"mycluster"} and set(jobs["source_tz"]) == {"Europe/Berlin"}
    by = {r["job_id"]: r for r in jobs.iter_rows(named=True)}
    # 2026-01-05T09:12:03 in Berlin (CET, UTC+1) is 08:12:03Z; Elapsed 01:30:21 = 5421 s
    assert by["41001"]["submit_time"] == datetime(2026, 1, 5, 8, 12, 3, tzinfo=UTC)
    assert by["41001"]["run_s"] == 5421.0
    tasks = [f"41042_{i}" for i in range(1, 10)]
    assert all(by[t]["status"] == "pending" and by[t]["gpus"] == 1.0 for t in tasks)
    # het job: mem=64G (+0) + mem=187.50G (+1); GPUs 8 + 0; CPUs 8 + 96
    assert by["41020"]["mem_bytes"] == 64 * 2**30 + round(187.5 * 2**30)
    assert (by["41020"]["gpus"], by["41020"]["cpus"]) == (8.0, 104.0)
    assert by["41043"]["start_time"] is None and by["41043"]["eligible_time"] is None
    assert by["41040"]["end_time"] is None and by["41040"]["status"] == "running"
    statuses = {k: by[k]["status"] for k in ("41007", "41008", "41009", "41010", "41011")}
    assert statuses == {
        "41007": "oom",  # OUT_OF_MEMORY
        "41008": "preempted",  # PREEMPTED
        "41009": "pending",  # REQUEUED
        "41010": "node_fail",  # BOOT_FAIL
        "41011": "timeout",  # DEADLINE
    }
    # gpu[01-04,07] = 5 hosts for 41002; pending jobs ("None assigned") have none
    assert placements.filter(pl.col("job_id") == "41002").height == 5
    assert placements.filter(pl.col("job_id") == "41041").height == 0


def test_steps_fold_into_placements(tmp_path: Path) -> None:
    """Without -X: the allocation line is the job, its steps become placements."""
    text = (
        "JobID|State|Submit|Start|End|AllocTRES|NodeList\n"
        "100|COMPLETED|2026-01-01T00:00:00|2026-01-01T00:00:10|2026-01-01T01:00:10|"
        "cpu=16,gres/gpu=8,node=2|gpu[1-2]\n"
        "100.batch|COMPLETED|2026-01-01T00:00:10|2026-01-01T00:00:10|2026-01-01T01:00:10|"
        "cpu=8,gres/gpu=4,node=1|gpu1\n"
        "100.extern|COMPLETED|2026-01-01T00:00:10|2026-01-01T00:00:10|2026-01-01T01:00:10|"
        "cpu=16,gres/gpu=8,node=2|gpu[1-2]\n"
        "100.0|FAILED|2026-01-01T00:01:00|2026-01-01T00:01:00|2026-01-01T00:02:00|"
        "cpu=16,gres/gpu=8,node=2|gpu[1-2]\n"
        "100.x-y|COMPLETED|2026-01-01T00:01:00|2026-01-01T00:01:00|2026-01-01T00:02:00||\n"
    )
    store = tmp_path / "store"
    jobs, placements = _ingest(_write(tmp_path, text), store)
    assert jobs["job_id"].to_list() == ["100"]
    # job: 2 hosts (task null); batch: 1; extern: 2; step 0: 2  -> 7 placements
    assert placements.height == 7
    tasks = placements.group_by("task").len().sort("task", nulls_last=True)
    assert tasks.rows() == [("0", 2), ("batch", 1), ("extern", 2), (None, 2)]
    assert placements.filter(pl.col("task") == "0")["status"].to_list() == ["failed"] * 2
    # the malformed step id goes to quarantine as a placements record (line 6)
    assert _quarantine(store) == [
        (
            "placements",
            "line 6",
            "JobID '100.x-y' is not a Slurm job or step id (123, 123_7, 123_[1-9%2], 123+1, "
            "123.batch)",
        )
    ]
    con = duckdb.connect()
    meta = con.execute(
        "SELECT value FROM parquet_kv_metadata(?) WHERE key = 'gpu_trace.step_lines'",
        [str(next((store / "current" / "jobs" / "source=slurm").glob("*.parquet")))],
    ).fetchone()
    assert meta is not None and meta[0] == b"4"  # lines 3..6 have a dot in JobID


def test_bad_lines_quarantined_line_exact(tmp_path: Path) -> None:
    """Each bad line is quarantined with its own line number and reason."""
    good = "2026-01-01T00:00:00|2026-01-01T00:00:05|2026-01-01T00:00:10"
    text = (
        "JobID|State|Submit|Start|End|Elapsed|NodeList|ExitCode|AllocTRES\n"
        f"1|COMPLETED|{good}|00:00:05|n1|0:0|gres/gpu=1\n"  # line 2: good
        f"2|COMPLETED|{good}|1:75:00|n1|0:0|gres/gpu=1\n"  # 3: minutes 75
        f"abc|COMPLETED|{good}|00:00:05|n1|0:0|gres/gpu=1\n"  # 4: not an id
        f"4|COMPLETED|{good}|00:00:05|n[4-1]|0:0|gres/gpu=1\n"  # 5: backwards range
        f"5|COMPLETED|{good}|00:00:05|n1|0:0\n"  # 6: 8 fields
        f"6|COMPLETED|{good}|00:00:05|n1|x|gres/gpu=1\n"  # 7: exit code
        f"7|COMPLETED|{good}|00:00:05|n1|0:0|gres/gpu=two\n"  # 8: gpu count
        "8|COMPLETED|2026-01-01T00:00:00|2026-01-01T00:00:05|2025-12-31T00:00:00|"
        "00:00:05|n1|0:0|gres/gpu=1\n"  # 9: end before start
        "\n"  # 10: empty
        f"1|FAILED|{good}|00:00:05|n1|0:0|gres/gpu=1\n"  # 11: repeats job 1
    )
    store = tmp_path / "store"
    jobs, _ = _ingest(_write(tmp_path, text), store)
    assert jobs["job_id"].to_list() == ["1"]
    assert jobs["status"].to_list() == ["failed"] and jobs["attempts"].to_list() == [1]
    q = {loc: why for _, loc, why in _quarantine(store)}
    assert q == {
        "line 3": "Elapsed '1:75:00' is not a [D-]HH:MM:SS duration",
        "line 4": "JobID 'abc' is not a Slurm job or step id (123, 123_7, 123_[1-9%2], 123+1, "
        "123.batch)",
        "line 5": "NodeList 'n[4-1]' has a range that runs backwards",
        "line 6": "expected 9 fields, found 8",
        "line 7": "ExitCode 'x' is not status:signal",
        "line 8": "AllocTRES 'gres/gpu=two' has a gres/gpu count that is not a whole number",
        "line 9": "End 2025-12-31T00:00:00 is before Start 2026-01-01T00:00:05",
        "line 10": "empty line",
    }  # lines 2 and 11: job 1 with the same Start twice, i.e. one run printed twice
    # (a requeued run starts anew): one job, attempts 1, the later finished record wins


def test_time_zone_dst_rules(tmp_path: Path) -> None:
    """Europe/Berlin: on 2026-10-25 the clocks go from 03:00 CEST back to 02:00 CET, so
    02:00-02:59 happens twice (first at UTC+2, then at UTC+1); on 2026-03-29 they jump
    from 02:00 to 03:00, so 02:30 does not exist."""
    text = (
        "JobID|State|Submit|Start|End\n"
        # submit 02:50 ambiguous -> earlier reading 00:50Z; start 02:10: the earlier
        # reading 00:10Z is before submit, the later 01:10Z is not -> 01:10Z;
        # end 02:40: earlier 00:40Z is before start, later 01:40Z -> 01:40Z
        "1|COMPLETED|2026-10-25T02:50:00|2026-10-25T02:10:00|2026-10-25T02:40:00\n"
        "2|COMPLETED|2026-03-29T02:30:00|2026-03-29T03:10:00|2026-03-29T03:20:00\n"
    )
    store = tmp_path / "store"
    jobs, _ = _ingest(_write(tmp_path, text), store, tz="Europe/Berlin")
    row = jobs.row(0, named=True)
    assert row["submit_time"] == datetime(2026, 10, 25, 0, 50, tzinfo=UTC)
    assert row["start_time"] == datetime(2026, 10, 25, 1, 10, tzinfo=UTC)
    assert row["end_time"] == datetime(2026, 10, 25, 1, 40, tzinfo=UTC)
    assert (row["queue_s"], row["run_s"]) == (1200.0, 1800.0)  # 20 min, 30 min
    assert _quarantine(store) == [
        ("jobs", "line 3", "Submit '2026-03-29T02:30:00' does not exist in the time zone")
    ]


def test_header_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"line 1: header lacks field\(s\) Submit"):
        ingest(
            LOADERS["slurm"],
            _write(tmp_path, "JobID|State\n1|COMPLETED\n"),
            tmp_path / "s",
            tz="UTC",
        )
    with pytest.raises(InputError, match="duplicate field"):
        ingest(
            LOADERS["slurm"],
            _write(tmp_path, "JobID|State|Submit|State\n", "d.psv"),
            tmp_path / "s",
            tz="UTC",
        )


SAMPLE_LINES = Path("data/samples/slurm/jobs.psv").read_text().splitlines()


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    picks=st.lists(st.integers(1, len(SAMPLE_LINES) - 1), min_size=1, max_size=8),
    edits=st.lists(
        st.tuples(st.integers(0, 7), st.integers(0, 400), st.text(max_size=6)), max_size=6
    ),
    trailing=st.booleans(),
)
def test_fuzzed_lines_reconcile(
    tmp_path_factory: pytest.TempPathFactory,
    picks: list[int],
    edits: list[tuple[int, int, str]],
    trailing: bool,
) -> None:
    """Random splices into sample lines: the ingest either succeeds with every data
    line written or quarantined (jobs read = lines without a dot in JobID, + tasks a
    pending range adds, - lines folded into another line's job) or fails with a
    one-line InputError; never another exception."""
    lines = [SAMPLE_LINES[i] for i in picks]
    for which, at, junk in edits:
        k = which % len(lines)
        lines[k] = lines[k][:at] + junk + lines[k][at + len(junk) :]
    header = SAMPLE_LINES[0] + ("|" if trailing else "")
    body = [line + ("|" if trailing else "") for line in lines]
    text = "\n".join([header, *body]) + "\n"
    if "\r" in text or "\n" in "".join(junk for _, _, junk in edits):
        return  # line breaks inside junk change the line count: covered by bench/fuzz
    tmp = tmp_path_factory.mktemp("fz")
    f = tmp / "jobs.psv"
    f.write_text(text)
    try:
        report = ingest(LOADERS["slurm"], f, tmp / "store", tz="UTC")
    except InputError:
        return
    by = {r.table: r for r in report.lines}
    steps = sum(1 for b in body if "." in b.split("|")[0])
    jobs = by["jobs"]
    assert jobs.rows_read == jobs.rows_written + jobs.rows_quarantined + jobs.rows_merged
    con = duckdb.connect()
    meta = dict(
        con.execute(
            "SELECT key::VARCHAR, value::VARCHAR FROM parquet_kv_metadata(?)",
            [str(next((tmp / "store" / "current" / "jobs" / "source=slurm").glob("*.parquet")))],
        ).fetchall()
    )
    added, folded = int(meta["gpu_trace.array_tasks_added"]), int(meta["gpu_trace.lines_folded"])
    assert int(meta["gpu_trace.job_lines"]) == len(body) - steps
    assert jobs.rows_read == len(body) - steps + added
    assert jobs.rows_merged == folded


def test_synth_round_trip(tmp_path: Path) -> None:
    """gpu-trace synth slurm writes what the loader reads with nothing quarantined."""
    from gpu_trace.synth.slurm import TZ, write

    for name in ("raw", "raw2"):
        (tmp_path / name).mkdir()
    files = write(tmp_path / "raw", jobs=500, seed=3)
    again = write(tmp_path / "raw2", jobs=500, seed=3)
    assert files[0].read_bytes() == again[0].read_bytes()  # same seed, same bytes
    report = ingest(LOADERS["slurm"], files[0], tmp_path / "store", tz=TZ)
    assert report.totals[2] == 0
    jobs = scan(tmp_path / "store", "jobs", ["slurm"]).collect()
    # each pending range 123_[A-B%2] is B - A + 1 jobs (the %2 is a throttle): B - A
    # beyond its line
    ids = [ln.split("|")[0] for ln in files[0].read_text().splitlines()[1:]]
    bounds = [i.split("[")[1].split("%")[0].split("-") for i in ids if "_[" in i]
    extra = sum(int(b) - int(a) for a, b in bounds)
    assert extra > 0 and jobs.height == 500 + extra
    assert {"running", "pending", "completed"} <= set(jobs["status"])


def test_out_of_range_values_quarantined(tmp_path: Path) -> None:
    """Regression (fuzz case 61, seed 0): a 40-digit memory amount overflowed int64 and
    raised; a range naming 10^17 hosts must not wrap the host count."""
    text = (
        "JobID|State|Submit|AllocTRES|NodeList\n"
        f"1|COMPLETED|2026-01-01T00:00:00|gres/gpu=1,mem={'1' * 40}G|n1\n"
        "2|COMPLETED|2026-01-01T00:00:00|gres/gpu=1|n[1-100000000000000000],m[1-9]\n"
        "3|COMPLETED|2026-01-01T00:00:00|gres/gpu=9999999|n1\n"
    )
    store = tmp_path / "store"
    jobs, _ = _ingest(_write(tmp_path, text), store)
    assert jobs.height == 0
    reasons = [why for _, _, why in _quarantine(store)]
    assert reasons[0].endswith(
        "has a mem= value that is not a memory amount (number, K/M/G/T/P unit, < 4 EiB)"
    )
    assert reasons[1] == ("NodeList 'n[1-100000000000000000],m[1-9]' names more than 100000 nodes")
    assert reasons[2] == "AllocTRES 'gres/gpu=9999999' names more than 1000000 GPUs"
