"""Accounting (issue 26): ``--by account|qos|partition|user|vc``, GPU-weighted queue
hours, time-limit accuracy and ``seff``-style efficiency, on ``sacct -P`` exports.

The exports are written as sacct prints them, per the sacct man page (Slurm
doc/man/man1/sacct.1): ``-P`` separates fields with ``|``; ``TotalCPU`` is "the sum of
the SystemCPU and UserCPU time", in the ``Elapsed`` format, which sacct's
``_elapsed_time`` (src/sacct/print.c) prints as ``D-HH:MM:SS``, ``HH:MM:SS`` or
``MM:SS.mmm`` (below an hour, with milliseconds); ``MaxRSS`` is printed on step lines
with a K/M/G suffix (``convert_num_unit``); ``Timelimit`` is ``[D-]HH:MM:SS`` or
``UNLIMITED``. The allocation line's ``TotalCPU`` is the sum over its steps (sacct
aggregates them, src/sacct/options.c), and under ``-X`` no step is fetched, so it
prints ``00:00:00``. Efficiency follows Slurm's contribs/seff/seff: CPU efficiency =
TotalCPU / (Elapsed x AllocCPUS), memory efficiency = memory used / allocated memory.

Every expected figure is worked by hand in the comment beside it.
"""

from __future__ import annotations

import json
import statistics
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from gpu_trace.analyses import accounting as acc
from gpu_trace.cli import app
from gpu_trace.loaders import LOADERS, ingest
from gpu_trace.loaders import slurm_values as sv
from gpu_trace.store.scan import scan
from tests.conftest import OPENB

runner = CliRunner()
GIB = 1024**3

HEADER = (
    "JobID|JobName|User|Account|Partition|QOS|State|ExitCode|Submit|Start|End|Elapsed|"
    "Timelimit|NCPUS|AllocTRES|NodeList|TotalCPU|MaxRSS|ReqTRES"
)
EXPORT = "\n".join(
    [
        HEADER,
        # 201 alice/vision/gpu/normal: 8 GPUs, submit 08:00, start 09:00 (waits 1 h),
        # end 11:00 (runs 2 h = 7200 s); limit 1 day = 86400 s -> used 7200/86400 =
        # 0.0833; 16 CPUs, 64 GiB. TotalCPU 16:00:00 = 57600 s = the steps' 04:00:00 +
        # 00:00.010 + 11:59:59.990 (sacct's sum; printed 11:59:59, since _elapsed_time
        # drops milliseconds once there are hours); core-walltime 7200 x 16 = 115200 s ->
        # CPU efficiency 0.5. MaxRSS: batch 1024M = 1 GiB, extern 0, step 0 16G ->
        # peak 16 GiB of 64 -> memory efficiency 0.25.
        "201|train|alice|vision|gpu|normal|COMPLETED|0:0|2026-01-05T08:00:00|"
        "2026-01-05T09:00:00|2026-01-05T11:00:00|02:00:00|1-00:00:00|16|"
        "billing=16,cpu=16,gres/gpu=8,mem=64G,node=1|g01|16:00:00||cpu=16,gres/gpu=8,node=1",
        "201.batch|batch||vision|||COMPLETED|0:0|2026-01-05T09:00:00|"
        "2026-01-05T09:00:00|2026-01-05T11:00:00|02:00:00||16|cpu=16,mem=64G,node=1|g01|"
        "04:00:00|1024M|",
        "201.extern|extern||vision|||COMPLETED|0:0|2026-01-05T09:00:00|"
        "2026-01-05T09:00:00|2026-01-05T11:00:00|02:00:00||16|cpu=16,mem=64G,node=1|g01|"
        "00:00.010|0|",
        "201.0|python||vision|||COMPLETED|0:0|2026-01-05T09:00:00|"
        "2026-01-05T09:00:00|2026-01-05T11:00:00|02:00:00||16|"
        "cpu=16,gres/gpu=8,mem=64G,node=1|g01|11:59:59|16G|",
        # 202 alice/vision/gpu/high: 1 GPU, submit 08:00, start 10:00 (waits 2 h), end
        # 10:30 (runs 1800 s); limit 02:00:00 = 7200 s -> used 0.25; 4 CPUs, 16 GiB.
        # TotalCPU 30:00.000 = 1800 s of 1800 x 4 = 7200 core-s -> 0.25. MaxRSS
        # 4194304K = 4 GiB of 16 -> 0.25.
        "202|eval|alice|vision|gpu|high|COMPLETED|0:0|2026-01-05T08:00:00|"
        "2026-01-05T10:00:00|2026-01-05T10:30:00|00:30:00|02:00:00|4|"
        "billing=4,cpu=4,gres/gpu=1,mem=16G,node=1|g02|30:00.000||cpu=4,gres/gpu=1,node=1",
        "202.batch|batch||vision|||COMPLETED|0:0|2026-01-05T10:00:00|"
        "2026-01-05T10:00:00|2026-01-05T10:30:00|00:30:00||4|cpu=4,mem=16G,node=1|g02|"
        "30:00.000|4194304K|",
        # 203 bob/nlp/debug/normal: CPU only, no wait, runs 12:00-12:06 = 360 s; limit
        # 01:00:00 -> used 0.1 (not under 10 %, under 50 %); 2 CPUs, 4 GiB. TotalCPU
        # 03:00.000 = 180 s of 720 core-s -> 0.25; MaxRSS 512M of 4 GiB -> 0.125.
        "203|prep|bob|nlp|debug|normal|COMPLETED|0:0|2026-01-05T12:00:00|"
        "2026-01-05T12:00:00|2026-01-05T12:06:00|00:06:00|01:00:00|2|"
        "billing=2,cpu=2,mem=4G,node=1|c01|03:00.000||cpu=2,node=1",
        "203.batch|batch||nlp|||COMPLETED|0:0|2026-01-05T12:00:00|"
        "2026-01-05T12:00:00|2026-01-05T12:06:00|00:06:00||2|cpu=2,mem=4G,node=1|c01|"
        "03:00.000|512M|",
        # 204 bob/nlp/gpu/normal: 4 GPUs requested, still pending (no start, no end, no
        # run time, no limit: UNLIMITED); sacct prints TotalCPU 00:00:00 and no step;
        # empty AllocTRES (nothing allocated), the request in ReqTRES.
        "204|big|bob|nlp|gpu|normal|PENDING|0:0|2026-01-05T13:00:00|Unknown|Unknown|"
        "00:00:00|UNLIMITED|4||None assigned|00:00:00||cpu=4,gres/gpu=4,node=1",
    ]
)


def _export(tmp_path: Path, text: str = EXPORT, name: str = "jobs.psv") -> Path:
    path = tmp_path / name
    path.write_text(text + "\n")
    return path


def _store(tmp_path: Path, text: str = EXPORT) -> Path:
    store = tmp_path / "store"
    report = ingest(LOADERS["slurm"], _export(tmp_path, text), store, tz="UTC")
    read, written, quarantined = report.totals
    assert read == written + quarantined + report.merged
    return store


def analyze(store: Path, *args: str) -> list[dict[str, Any]]:
    result = runner.invoke(app, ["analyze", *args, "--store", str(store), "-f", "json"])
    assert result.exit_code == 0, result.output
    rows: list[dict[str, Any]] = json.loads(result.stdout)
    return rows


def _by(rows: list[dict[str, Any]], key: str) -> dict[Any, dict[str, Any]]:
    return {r[key]: r for r in rows}


# --------------------------------------------------------------------------- loader


def test_totalcpu_and_maxrss_become_job_columns(tmp_path: Path) -> None:
    jobs = scan(_store(tmp_path), "jobs", ["slurm"]).collect().sort("job_id")
    got = dict(
        zip(
            jobs["job_id"],
            zip(jobs["cpu_used_s"], jobs["mem_peak_bytes"], strict=True),
            strict=True,
        )
    )
    assert got == {
        "201": (57600.0, 16 * GIB),  # 16:00:00; max(1 GiB, 0, 16 GiB)
        "202": (1800.0, 4 * GIB),  # 30:00.000; 4194304K = 4194304 x 1024 B
        "203": (180.0, 512 * 1024**2),  # 03:00.000; 512M
        "204": (None, None),  # pending: no step listed, so sacct's 00:00:00 is no datum
    }


def test_totalcpu_of_an_export_without_steps_is_unknown(tmp_path: Path) -> None:
    """sacct -X fetches no step (JOBCOND_FLAG_NO_STEP) and prints TotalCPU 00:00:00 for
    a job that used 2 CPU-hours: that 0 is not stored as the job's CPU time.
    """
    text = "\n".join(line for line in EXPORT.splitlines() if "." not in line.split("|")[0])
    jobs = scan(_store(tmp_path, text), "jobs", ["slurm"]).collect()
    assert jobs.height == 4
    assert jobs["cpu_used_s"].null_count() == 4
    assert jobs["mem_peak_bytes"].null_count() == 4


def test_heterogeneous_components_sum_cpu_and_take_the_largest_peak(tmp_path: Path) -> None:
    text = "\n".join(
        [
            HEADER,
            # 205+0: TotalCPU 01:00:00 = 3600 s; its step 205+0.0 MaxRSS 2G
            "205+0|het|carol|bio|gpu|normal|COMPLETED|0:0|2026-01-05T08:00:00|"
            "2026-01-05T08:00:00|2026-01-05T09:00:00|01:00:00|02:00:00|4|"
            "cpu=4,gres/gpu=1,mem=8G,node=1|g01|01:00:00||",
            "205+0.0|python||bio|||COMPLETED|0:0|2026-01-05T08:00:00|2026-01-05T08:00:00|"
            "2026-01-05T09:00:00|01:00:00||4|cpu=4,mem=8G,node=1|g01|01:00:00|2G|",
            # 205+1: TotalCPU 30:00.500 = 1800.5 s; its step 205+1.0 MaxRSS 3.50G
            "205+1|het|carol|bio|cpu|normal|COMPLETED|0:0|2026-01-05T08:00:00|"
            "2026-01-05T08:00:00|2026-01-05T09:00:00|01:00:00|02:00:00|8|"
            "cpu=8,mem=8G,node=1|c01|30:00.500||",
            "205+1.0|python||bio|||COMPLETED|0:0|2026-01-05T08:00:00|2026-01-05T08:00:00|"
            "2026-01-05T09:00:00|01:00:00||8|cpu=8,mem=8G,node=1|c01|30:00.500|3.50G|",
        ]
    )
    (job,) = scan(_store(tmp_path, text), "jobs", ["slurm"]).collect().iter_rows(named=True)
    assert job["job_id"] == "205"
    assert job["cpu_used_s"] == pytest.approx(3600 + 1800.5)  # the components' sum
    assert job["mem_peak_bytes"] == int(3.5 * GIB)  # max(2 GiB, 3.5 GiB)


def test_malformed_totalcpu_and_maxrss_are_quarantined(tmp_path: Path) -> None:
    lines = EXPORT.splitlines()
    # 1:2:3:4 has four colon fields (sacct prints at most D-HH:MM:SS); 12X is no unit
    lines[1] = lines[1].replace("|16:00:00|", "|1:2:3:4|")
    lines[2] = lines[2].replace("|1024M", "|12X")
    store = _store(tmp_path, "\n".join(lines))
    rows = scan(store, "quarantine", ["slurm"]).collect().sort("locator")
    reasons = dict(zip(rows["table"], rows["reason"], strict=True))
    assert reasons == {
        "jobs": "TotalCPU '1:2:3:4' is not a [D-]HH:MM:SS[.mmm] duration",
        "placements": "MaxRSS '12X' is not a memory amount",
    }


def test_maxrss_without_a_unit_letter_is_bytes() -> None:
    """src/sacct/print.c prints MaxRSS with convert_num_unit(..., UNIT_NONE, ...): the
    value is in bytes; --noconvert leaves it unscaled without a letter, so 1048576 is
    1 MiB (where ReqMem's bare number would be MiB).
    """
    frame = pl.DataFrame({"t": ["1048576", "10452K", "5.02G", "0", None]})
    value, bad = sv.rss_bytes(pl.col("t"))
    out = frame.select(value.alias("v"), bad.alias("b"))
    assert out["v"].to_list() == [1048576, 10452 * 1024, round(5.02 * GIB), 0, None]
    assert out["b"].to_list() == [False, False, False, False, False]


# --------------------------------------------------------------------------- analyses


def test_gpu_queue_hours_are_gpu_weighted(tmp_path: Path) -> None:
    """alice's 8-GPU job waited 1 h and her 1-GPU job 2 h: 8 x 1 + 1 x 2 = 10 GPU-hours
    of queueing (the plain sum of waits, 3 h, was shown before).
    """
    store = _store(tmp_path)
    users = _by(analyze(store, "users", "--per-user"), "user")
    assert users["alice"]["gpu_queue_hours"] == pytest.approx(10.0)
    # bob: 203 is a CPU job, 204 has not started (no queue_s yet): 0
    assert users["bob"]["gpu_queue_hours"] == pytest.approx(0.0)


def test_users_by_account(tmp_path: Path) -> None:
    store = _store(tmp_path)
    rows = _by(analyze(store, "users", "--by", "account", "--per-user"), "account")
    assert set(rows) == {"vision", "nlp"}
    # vision: 201 8 GPUs x 2 h + 202 1 GPU x 0.5 h = 16.5 GPU-hours
    assert rows["vision"]["gpu_hours"] == pytest.approx(16.5)
    assert rows["vision"]["gpu_queue_hours"] == pytest.approx(10.0)
    assert rows["nlp"]["jobs"] == 2 and rows["nlp"]["gpu_hours"] == pytest.approx(0.0)
    (conc,) = analyze(store, "users", "--by", "account")
    # two accounts, vision holds all 16.5 GPU-hours: the top 1 % (1 account) holds 1.0
    assert conc["groups"] == 2 and conc["top1pct_share"] == pytest.approx(1.0)


def test_accounting_usage_by_account_qos_partition(tmp_path: Path) -> None:
    store = _store(tmp_path)
    acct = _by(analyze(store, "accounting", "--by", "account"), "account")
    assert acct["vision"]["jobs"] == 2 and acct["vision"]["gpu_jobs"] == 2
    assert acct["vision"]["gpu_hours"] == pytest.approx(16.5)
    assert acct["vision"]["gpu_queue_hours"] == pytest.approx(10.0)
    # 16 CPUs x 2 h + 4 CPUs x 0.5 h = 34 CPU-hours
    assert acct["vision"]["cpu_hours"] == pytest.approx(34.0)
    assert acct["vision"]["gpu_hours_share"] == pytest.approx(1.0)
    # nlp: 203 2 CPUs x 0.1 h = 0.2 CPU-hours; 204 has not run
    assert acct["nlp"]["cpu_hours"] == pytest.approx(0.2)
    assert acct["nlp"]["gpu_jobs"] == 1 and acct["nlp"]["gpu_hours"] == pytest.approx(0.0)
    qos = _by(analyze(store, "accounting", "--by", "qos"), "qos")
    # normal: 201 (16 GPU-h, 8 GPU-h waited), 203, 204; high: 202 (0.5, 2)
    assert qos["normal"]["jobs"] == 3 and qos["normal"]["gpu_hours"] == pytest.approx(16.0)
    assert qos["high"]["gpu_queue_hours"] == pytest.approx(2.0)
    part = _by(analyze(store, "accounting", "--by", "partition"), "partition")
    assert {k: v["jobs"] for k, v in part.items()} == {"gpu": 3, "debug": 1}


def test_time_limit_accuracy(tmp_path: Path) -> None:
    rows = _by(analyze(_store(tmp_path), "accounting", "--by", "user", "--limits"), "user")
    alice, bob = rows["alice"], rows["bob"]
    # alice: 7200/86400 = 0.0833 and 1800/7200 = 0.25 -> one of two under 10 %, both
    # under 50 %, median (0.0833 + 0.25) / 2 = 0.1667
    assert alice["jobs_with_limit_data"] == 2 and alice["jobs_without_limit_data"] == 0
    assert alice["under_10pct_share"] == pytest.approx(0.5)
    assert alice["under_50pct_share"] == pytest.approx(1.0)
    assert alice["median_limit_used"] == pytest.approx((7200 / 86400 + 0.25) / 2)
    # bob: 203 used 360/3600 = 0.1 (not under 10 %); 204 (UNLIMITED, never ran) lacks data
    assert bob["jobs_with_limit_data"] == 1 and bob["jobs_without_limit_data"] == 1
    assert bob["under_10pct_share"] == pytest.approx(0.0)
    assert bob["under_50pct_share"] == pytest.approx(1.0)
    assert bob["median_limit_used"] == pytest.approx(0.1)


def test_seff_efficiency_per_user(tmp_path: Path) -> None:
    rows = _by(analyze(_store(tmp_path), "accounting", "--by", "user", "--efficiency"), "user")
    alice, bob = rows["alice"], rows["bob"]
    # alice: (57600 + 1800) / (115200 + 7200) = 59400 / 122400; median of 0.5, 0.25
    assert alice["finished_jobs"] == 2 and alice["jobs_with_cpu_data"] == 2
    assert alice["cpu_efficiency"] == pytest.approx(59400 / 122400)
    assert alice["median_cpu_efficiency"] == pytest.approx(0.375)
    # memory: (16 + 4) GiB / (64 + 16) GiB = 0.25; both jobs 0.25
    assert alice["mem_efficiency"] == pytest.approx(0.25)
    assert alice["median_mem_efficiency"] == pytest.approx(0.25)
    # bob: only 203 finished (204 is pending): 180 / 720 = 0.25; 512 MiB / 4 GiB
    assert bob["finished_jobs"] == 1 and bob["jobs_without_cpu_data"] == 0
    assert bob["cpu_efficiency"] == pytest.approx(0.25)
    assert bob["mem_efficiency"] == pytest.approx(0.125)


def test_efficiency_counts_jobs_lacking_the_data(tmp_path: Path) -> None:
    """The same jobs exported with -X (no steps): every finished job lacks both inputs,
    and the table says so instead of showing 0 % efficiency.
    """
    text = "\n".join(line for line in EXPORT.splitlines() if "." not in line.split("|")[0])
    rows = _by(
        analyze(_store(tmp_path, text), "accounting", "--efficiency", "--by", "user"), "user"
    )
    assert rows["alice"]["finished_jobs"] == 2
    assert rows["alice"]["jobs_without_cpu_data"] == 2
    assert rows["alice"]["jobs_without_mem_data"] == 2
    assert rows["alice"]["cpu_efficiency"] is None


def test_queueing_failures_summary_by_account(tmp_path: Path) -> None:
    store = _store(tmp_path)
    queue = _by(analyze(store, "queueing", "--by", "account"), "account")
    # GPU jobs that started: vision 201 (3600 s) and 202 (7200 s); nlp's 204 is still
    # pending: it counts with its wait so far, flagged censored (issue 26 "As of"). The
    # as-of instant is the export's latest time, 204's own submit at 13:00: 0 s so far.
    assert set(queue) == {"vision", "nlp"}
    assert queue["vision"]["jobs"] == 2 and queue["vision"]["max_s"] == pytest.approx(7200)
    assert queue["vision"]["censored_jobs"] == 0
    assert queue["nlp"]["jobs"] == 1 and queue["nlp"]["censored_jobs"] == 1
    assert queue["nlp"]["max_s"] == pytest.approx(0)
    fail = analyze(store, "failures", "--by", "qos")
    assert {(r["qos"], r["status_class"]): r["jobs"] for r in fail} == {
        ("high", "completed"): 1,
        ("normal", "completed"): 2,
        ("normal", "unfinished"): 1,
    }
    summ = _by(analyze(store, "summary", "--by", "account"), "account")
    assert summ["vision"]["jobs"] == 2 and summ["nlp"]["jobs"] == 2
    assert summ["vision"]["gpu_hours"] == pytest.approx(16.5)


@pytest.mark.parametrize(
    "args",
    [
        ("users", "--by", "account"),
        ("accounting", "--by", "account"),
        ("queueing", "--by", "account"),
        ("failures", "--by", "account"),
        ("summary", "--by", "account"),
        ("accounting", "--by", "partition"),
    ],
)
def test_a_source_without_the_column_is_refused_in_one_line(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    """openb's pod lists have no account, QoS or partition column (data/samples/openb):
    grouping the store's openb jobs by them is one error line naming source and column.
    """
    store = _store(tmp_path)
    ingest(LOADERS["openb"], OPENB, store)
    result = runner.invoke(app, ["analyze", *args, "--store", str(store)])
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "openb" in lines[0] and f"no {args[-1]} column" in lines[0]
    assert "Traceback" not in result.output
    # the Slurm jobs alone group fine
    ok = runner.invoke(app, ["analyze", *args, "-s", "slurm", "--store", str(store)])
    assert ok.exit_code == 0, ok.output


def test_accounting_defaults_to_accounts_where_every_source_has_them(tmp_path: Path) -> None:
    """Without --by: accounts for the Slurm export (every job has an Account), users once
    openb (no account column) is in the selection, so the default view never refuses.
    """
    store = _store(tmp_path)
    rows = analyze(store, "accounting")
    assert {r["account"] for r in rows} == {"vision", "nlp"}
    ingest(LOADERS["openb"], OPENB, store)
    rows = analyze(store, "accounting")
    assert "account" not in rows[0] and {"alice", "bob"} <= {r["user"] for r in rows}


def _hms(seconds: int) -> str:
    """A duration as sacct's _elapsed_time prints it with no milliseconds (print.c):
    D-HH:MM:SS from a day, else HH:MM:SS, else 00:MM:SS.
    """
    d, rest = divmod(seconds, 86400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    return f"{d}-{h:02d}:{m:02d}:{s:02d}" if d else f"{h:02d}:{m:02d}:{s:02d}"


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    jobs=st.lists(
        st.tuples(
            st.sampled_from(["a1", "a2", "a3"]),  # Account
            st.integers(0, 16),  # GPUs (0: a CPU job)
            st.integers(0, 3 * 86400),  # wait, s
            st.integers(1, 86400),  # run, s
            st.integers(0, 2 * 86400),  # Timelimit, s (0: 00:00:00, no usable limit)
        ),
        min_size=1,
        max_size=12,
    )
)
def test_accounting_matches_a_plain_python_count(
    tmp_path_factory: pytest.TempPathFactory, jobs: list[tuple[str, int, int, int, int]]
) -> None:
    """Random ended jobs written as sacct -X -P lines; GPU-weighted queue hours, GPU
    hours and time-limit shares per account recomputed here with integers and the
    standard library, from the values the lines were written from.
    """
    start = datetime(2026, 1, 1, tzinfo=UTC)
    lines = ["JobID|Account|State|Submit|Start|End|Timelimit|AllocTRES"]
    for i, (acct, gpus, wait, run, limit) in enumerate(jobs):
        sub = start + timedelta(seconds=i)
        beg, end = sub + timedelta(seconds=wait), sub + timedelta(seconds=wait + run)
        fmt = "%Y-%m-%dT%H:%M:%S"
        lines.append(
            f"{100 + i}|{acct}|COMPLETED|{sub:{fmt}}|{beg:{fmt}}|{end:{fmt}}|{_hms(limit)}|"
            f"cpu=1,gres/gpu={gpus},node=1"
        )
    store = _store(tmp_path_factory.mktemp("acct"), "\n".join(lines))
    usage = _by(analyze(store, "accounting", "--by", "account"), "account")
    limits = _by(analyze(store, "accounting", "--by", "account", "--limits"), "account")
    for acct in {j[0] for j in jobs}:
        mine = [j for j in jobs if j[0] == acct]
        gpu_jobs = [j for j in mine if j[1] > 0]
        assert usage[acct]["gpu_queue_hours"] == pytest.approx(
            sum(g * w for _, g, w, _, _ in gpu_jobs) / 3600
        )
        assert usage[acct]["gpu_hours"] == pytest.approx(
            sum(g * r for _, g, _, r, _ in gpu_jobs) / 3600
        )
        limited = [(r, lim) for _, _, _, r, lim in mine if lim > 0]
        row = limits[acct]
        assert row["jobs_with_limit_data"] == len(limited)
        assert row["jobs_without_limit_data"] == len(mine) - len(limited)
        if limited:
            # r / lim < 0.1  <=>  10 r < lim (integers: no rounding)
            under10 = sum(10 * r < lim for r, lim in limited) / len(limited)
            under50 = sum(2 * r < lim for r, lim in limited) / len(limited)
            assert row["under_10pct_share"] == pytest.approx(under10)
            assert row["under_50pct_share"] == pytest.approx(under50)
            assert row["median_limit_used"] == pytest.approx(
                statistics.median(r / lim for r, lim in limited)
            )
        else:
            assert row["median_limit_used"] is None


def test_efficiency_on_a_store_written_before_jobs_v5(tmp_path: Path) -> None:
    """A jobs table without cpu_used_s / mem_peak_bytes (written by an older gpu-trace):
    the finished jobs are counted as lacking the data, no ColumnNotFoundError.
    """
    store = _store(tmp_path)
    old = scan(store, "jobs", ["slurm"]).drop("cpu_used_s", "mem_peak_bytes")
    rows = _by(acc.efficiency(old, "user").collect().to_dicts(), "user")
    # alice: 201 and 202 ended; bob: 203 ended (204 pending)
    assert (rows["alice"]["finished_jobs"], rows["alice"]["jobs_without_cpu_data"]) == (2, 2)
    assert (rows["bob"]["finished_jobs"], rows["bob"]["jobs_without_mem_data"]) == (1, 1)
    assert rows["alice"]["cpu_efficiency"] is None
