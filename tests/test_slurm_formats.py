"""Slurm: sacct output forms read as Slurm documents them (issue 25).

Sources, cited per test: the sacct man page (https://slurm.schedmd.com/sacct.html:
``JobID``, ``-D/--duplicates``, ``Elapsed``, JOB STATE CODES), Slurm's job array page
(https://slurm.schedmd.com/job_array.html: ``--array=1-7:2``, the ``%`` throttle,
pending tasks shown as one ``123_[...]`` record), the heterogeneous jobs page
(https://slurm.schedmd.com/heterogeneous_jobs.html: components ``123+0``, ``123+1``).
Every expected figure is worked out in the comment beside it from the test's own
input text.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from gpu_trace.cli import app
from gpu_trace.loaders import LOADERS, ingest
from gpu_trace.loaders import slurm_nodes as nodelist
from gpu_trace.store.scan import scan
from tests.peak_rss import OWN_PEAK_KIB

T0 = "2026-01-05T10:00:00"


def _load(
    tmp_path: Path, text: str, tz: str = "UTC"
) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, str]]:
    """Ingest ``text``; (jobs, placements, quarantine reason by line)."""
    f = tmp_path / "jobs.psv"
    f.write_text(text)
    store = tmp_path / "store"
    report = ingest(LOADERS["slurm"], f, store, tz=tz)
    read, written, quarantined = report.totals
    assert read == written + quarantined + report.merged
    jobs = scan(store, "jobs", ["slurm"]).collect().sort("job_id")
    placements = scan(store, "placements", ["slurm"]).collect()
    placements = placements.sort("job_id", "attempt", "task", "machine_id", nulls_last=True)
    q = scan(store, "quarantine", ["slurm"]).collect()
    return jobs, placements, dict(zip(q["locator"], q["reason"], strict=True))


def _by_id(jobs: pl.DataFrame) -> dict[str, dict[str, object]]:
    return {r["job_id"]: r for r in jobs.iter_rows(named=True)}


# ----------------------------------------------------------------------------- arrays


def test_array_range_with_step_is_read(tmp_path: Path) -> None:
    """job_array.html: ``--array=1-7:2`` is "index values between 1 and 7 with a step
    size of 2 (i.e. 1, 3, 5 and 7)", and Slurm prints pending tasks in that form. The
    line ``123_[1-21:4]`` (and its batch step line) must not be quarantined: tasks 1, 5,
    9, 13, 17, 21 = 6 jobs of 2 GPUs each (12 GPUs)."""
    text = (
        "JobID|State|Submit|Start|End|ReqTRES|AllocTRES|NodeList\n"
        f"123_[1-21:4]|PENDING|{T0}|Unknown|Unknown|cpu=4,gres/gpu=2||None assigned\n"
        f"123_[1-21:4].batch|PENDING|{T0}|Unknown|Unknown|||None assigned\n"
    )
    jobs, _, q = _load(tmp_path, text)
    assert q == {}
    assert sorted(jobs["job_id"]) == sorted(f"123_{i}" for i in (1, 5, 9, 13, 17, 21))
    assert jobs["gpus"].sum() == 12.0


def test_pending_ranges_one_job_per_task(tmp_path: Path) -> None:
    """``sacct --array`` prints one line per task; the compact ``123_[...]`` record is
    that many jobs, each with the row's request. ``%4`` is the throttle ("a maximum
    number of simultaneously running tasks", job_array.html), not a task.
    [13-20%4] = 13..20 (8 jobs); [5-7] = 3; [1,3,5-7] = 1, 3, 5, 6, 7 (5); 16 jobs.
    A task's id is what sacct prints once it starts (``300_13``), so the same job in a
    later export gets the same job_id."""
    text = (
        "JobID|State|Submit|Start|End|ReqTRES|AllocTRES|NodeList\n"
        f"300_[13-20%4]|PENDING|{T0}|Unknown|Unknown|cpu=8,gres/gpu=4||None assigned\n"
        f"301_[5-7]|PENDING|{T0}|Unknown|Unknown|cpu=1,gres/gpu=1||None assigned\n"
        f"302_[1,3,5-7]|PENDING|{T0}|Unknown|Unknown|cpu=1||None assigned\n"
        # 0..100000 is 100,001 tasks, one past the documented cap: quarantined
        f"303_[0-100000]|PENDING|{T0}|Unknown|Unknown|cpu=1||None assigned\n"
    )
    jobs, _, q = _load(tmp_path, text)
    by = _by_id(jobs)
    assert sorted(k for k in by if k.startswith("300_")) == [f"300_{i}" for i in range(13, 21)]
    assert all(
        by[f"300_{i}"]["gpus"] == 4.0 and by[f"300_{i}"]["cpus"] == 8.0 for i in range(13, 21)
    )
    assert sorted(k for k in by if k.startswith("301_")) == ["301_5", "301_6", "301_7"]
    assert sorted(k for k in by if k.startswith("302_")) == [f"302_{i}" for i in (1, 3, 5, 6, 7)]
    assert jobs.height == 16
    assert q == {"line 5": "JobID '303_[0-100000]' names more than 100000 array tasks"}


# ----------------------------------------------------------------------------- times


def test_fall_back_hour_read_with_elapsed(tmp_path: Path) -> None:
    """Europe/Berlin, 2026-10-25: 03:00 CEST becomes 02:00 CET, so 02:00-02:59 happens
    twice (first at UTC+2, then at UTC+1). sacct's Elapsed is the run time, so
    End - Start = Elapsed picks the readings.

    Job 1: Submit 01:50 (only CEST: 23:50Z the day before); Start 02:10 is 00:10Z or
    01:10Z, End 02:40 is 00:40Z or 01:40Z. Elapsed 01:30:00 fits only 00:10Z -> 01:40Z.
    Job 2: the same times with Elapsed 00:30:00: 00:10Z -> 00:40Z and 01:10Z -> 01:40Z
    both fit, so it stays ambiguous and is quarantined with the reason.
    Job 3: 2026-03-29 02:30 does not exist (02:00 -> 03:00): quarantined."""
    text = (
        "JobID|State|Submit|Start|End|Elapsed\n"
        "1|COMPLETED|2026-10-25T01:50:00|2026-10-25T02:10:00|2026-10-25T02:40:00|01:30:00\n"
        "2|COMPLETED|2026-10-25T01:50:00|2026-10-25T02:10:00|2026-10-25T02:40:00|00:30:00\n"
        "3|COMPLETED|2026-03-29T02:30:00|2026-03-29T03:10:00|2026-03-29T03:20:00|00:10:00\n"
    )
    jobs, _, q = _load(tmp_path, text, tz="Europe/Berlin")
    row = _by_id(jobs)["1"]
    assert row["submit_time"] == datetime(2026, 10, 24, 23, 50, tzinfo=UTC)
    assert row["start_time"] == datetime(2026, 10, 25, 0, 10, tzinfo=UTC)
    assert row["end_time"] == datetime(2026, 10, 25, 1, 40, tzinfo=UTC)
    assert row["run_s"] == 5400.0  # 1 h 30 min = Elapsed
    assert jobs.height == 1
    assert q["line 3"] == (
        "Start '2026-10-25T02:10:00', End '2026-10-25T02:40:00' falls in the repeated hour "
        "of a fall-back clock change, and no single reading gives End - Start = Elapsed "
        "with Submit <= Eligible <= Start"
    )
    assert q["line 4"] == "Submit '2026-03-29T02:30:00' does not exist in the time zone"


@pytest.mark.parametrize(
    "stamp", ["2026-1-5T9:0:0", "2026-01-05T09:00:60", "2026-01-05T25:00:00", "2026-02-30T09:00:00"]
)
def test_malformed_times_quarantined(tmp_path: Path, stamp: str) -> None:
    """sacct prints times as YYYY-MM-DDTHH:MM:SS (its default ``standard`` format):
    unpadded fields, second 60, hour 25 or 30 February are damaged fields."""
    text = f"JobID|State|Submit|Start|End\n1|COMPLETED|{stamp}|Unknown|Unknown\n"
    jobs, _, q = _load(tmp_path, text)
    assert jobs.height == 0
    assert q["line 2"].startswith(f"Submit '{stamp}' is not a time")


# ----------------------------------------------------------------------------- states


def test_running_pending_as_of_and_statuses(tmp_path: Path) -> None:
    """A RUNNING job has no End (sacct prints ``Unknown``), so run_s (End - Start) is
    null; Elapsed is the time so far, so the export was printed at Start + Elapsed
    (10:00:30 + 03:00:00 = 13:00:30). A PENDING job never started: as_of_time null.
    JOB STATE CODES: OUT_OF_MEMORY -> oom, PREEMPTED -> preempted, ``CANCELLED by 0``
    -> cancelled by uid 0 (root)."""
    text = (
        "JobID|State|Submit|Start|End|Elapsed|AllocTRES\n"
        f"1|RUNNING|{T0}|2026-01-05T10:00:30|Unknown|03:00:00|gres/gpu=1\n"
        f"2|PENDING|{T0}|Unknown|Unknown|00:00:00|\n"
        f"3|OUT_OF_MEMORY|{T0}|{T0}|2026-01-05T10:10:00|00:10:00|gres/gpu=1\n"
        f"4|PREEMPTED|{T0}|{T0}|2026-01-05T10:10:00|00:10:00|gres/gpu=1\n"
        f"5|CANCELLED by 0|{T0}|{T0}|2026-01-05T10:10:00|00:10:00|gres/gpu=1\n"
        f"6|CANCELLED by 10234|{T0}|Unknown|2026-01-05T10:10:00|00:00:00|\n"
    )
    jobs, _, q = _load(tmp_path, text)
    assert q == {}
    by = _by_id(jobs)
    assert (by["1"]["run_s"], by["1"]["end_time"], by["1"]["status"]) == (None, None, "running")
    assert by["1"]["as_of_time"] == datetime(2026, 1, 5, 13, 0, 30, tzinfo=UTC)
    assert (by["2"]["run_s"], by["2"]["as_of_time"]) == (None, None)
    assert (by["3"]["status"], by["3"]["raw_status"]) == ("oom", "OUT_OF_MEMORY")
    assert (by["4"]["status"], by["4"]["raw_status"]) == ("preempted", "PREEMPTED")
    assert (by["5"]["status"], by["5"]["cancelled_by"], by["5"]["raw_status"]) == (
        "cancelled",
        "0",
        "CANCELLED by 0",
    )
    assert (by["6"]["cancelled_by"], by["4"]["cancelled_by"]) == ("10234", None)


def test_requeued_runs_under_duplicates(tmp_path: Path) -> None:
    """sacct -D/--duplicates prints every run of a requeued job under one JobID (the
    man page: "If a job is requeued the submit time is reset. To obtain the original
    submit time it is necessary to use the -D or --duplicate option"). Three runs:
    preempted and requeued on n1 (10:01-10:31), node failure on n2 (10:40-11:00),
    completed on n3 (11:05-12:05). One job: submit 10:00 (the first), start 10:01,
    end 12:05, queue 60 s, run_s 12:05 - 10:01 = 7440 s, attempts 3, each run a
    placement attempt 0, 1, 2; its steps follow their run."""
    text = (
        "JobID|State|Submit|Start|End|Elapsed|AllocTRES|NodeList\n"
        "7|REQUEUED|2026-01-05T10:00:00|2026-01-05T10:01:00|2026-01-05T10:31:00|00:30:00|"
        "gres/gpu=2|n1\n"
        "7|NODE_FAIL|2026-01-05T10:31:00|2026-01-05T10:40:00|2026-01-05T11:00:00|00:20:00|"
        "gres/gpu=2|n2\n"
        "7|COMPLETED|2026-01-05T11:00:00|2026-01-05T11:05:00|2026-01-05T12:05:00|01:00:00|"
        "gres/gpu=2|n3\n"
        "7.batch|COMPLETED|2026-01-05T11:05:00|2026-01-05T11:05:00|2026-01-05T12:05:00|"
        "01:00:00|gres/gpu=2|n3\n"
    )
    jobs, placements, q = _load(tmp_path, text)
    assert q == {}
    assert jobs.height == 1
    job = jobs.row(0, named=True)
    assert job["submit_time"] == datetime(2026, 1, 5, 10, 0, tzinfo=UTC)
    assert job["start_time"] == datetime(2026, 1, 5, 10, 1, tzinfo=UTC)
    assert job["end_time"] == datetime(2026, 1, 5, 12, 5, tzinfo=UTC)
    assert (job["queue_s"], job["run_s"], job["attempts"]) == (60.0, 7440.0, 3)
    assert (job["status"], job["gpus"]) == ("completed", 2.0)
    runs = placements.select("attempt", "task", "machine_id", "status").rows()
    assert runs == [
        (0, None, "n1", "pending"),
        (1, None, "n2", "node_fail"),
        (2, "batch", "n3", "completed"),
        (2, None, "n3", "completed"),
    ]


def test_heterogeneous_job_is_one_job(tmp_path: Path) -> None:
    """heterogeneous_jobs.html: sacct shows each component as ``<id>+<offset>``. One job
    ``9`` whose components are its tasks: +0 has 4 GPUs and 8 CPUs on n1, +1 has 2 GPUs
    and 4 CPUs on n[2-3] (1 GPU per host): gpus 6, cpus 12, nodes 3."""
    text = (
        "JobID|State|Submit|Start|End|NNodes|NCPUS|AllocTRES|NodeList\n"
        f"9+0|COMPLETED|{T0}|{T0}|2026-01-05T11:00:00|1|8|cpu=8,gres/gpu=4|n1\n"
        f"9+1|COMPLETED|{T0}|{T0}|2026-01-05T11:00:00|2|4|cpu=4,gres/gpu=2|n[2-3]\n"
        f"9+1.0|COMPLETED|{T0}|{T0}|2026-01-05T11:00:00|2|4|cpu=4,gres/gpu=2|n[2-3]\n"
    )
    jobs, placements, q = _load(tmp_path, text)
    assert q == {}
    assert jobs["job_id"].to_list() == ["9"]
    job = jobs.row(0, named=True)
    assert (job["gpus"], job["cpus"], job["nodes"], job["run_s"]) == (6.0, 12.0, 3, 3600.0)
    got = placements.select("job_id", "task", "machine_id", "gpu_count").rows()
    assert got == [
        ("9", "+0", "n1", 4.0),
        ("9", "+1", "n2", 1.0),
        ("9", "+1", "n3", 1.0),
        ("9", "+1.0", "n2", 1.0),
        ("9", "+1.0", "n3", 1.0),
    ]


# ----------------------------------------------------------------------------- resources


def test_old_gres_fields_and_alloccpus(tmp_path: Path) -> None:
    """Exports made with the older fields: ReqGRES / AllocGRES (``gpu:4``,
    ``gpu:a100:8``, ``gpu:tesla:2(IDX:0-1)``: name, optional type, count, then the GPU
    indices) and AllocCPUS (sacct's older name of NCPUS)."""
    text = (
        "JobID|State|Submit|AllocCPUS|ReqGRES|AllocGRES\n"
        f"1|COMPLETED|{T0}|16|gpu:4|gpu:4\n"
        f"2|COMPLETED|{T0}|64|gpu:a100:8|gpu:a100:8\n"
        f"3|COMPLETED|{T0}|8|gpu:2|gpu:tesla:2(IDX:0-1)\n"
        f"4|PENDING|{T0}|2|gpu:a100:1|\n"  # nothing allocated yet: the request
        f"5|COMPLETED|{T0}|2||\n"  # a CPU job: no GRES at all
    )
    jobs, _, q = _load(tmp_path, text)
    assert q == {}
    got = jobs.select("job_id", "gpus", "gpu_type", "cpus").rows()
    assert got == [
        ("1", 4.0, None, 16.0),
        ("2", 8.0, "a100", 64.0),
        ("3", 2.0, "tesla", 8.0),
        ("4", 1.0, "a100", 2.0),
        ("5", 0.0, None, 2.0),
    ]


def test_export_without_gpu_field_warns_once(tmp_path: Path) -> None:
    """No AllocTRES, ReqTRES, AllocGRES or ReqGRES: GPUs are unknown (null), never 0,
    and the user is told in one warning line."""
    f = tmp_path / "jobs.psv"
    f.write_text(f"JobID|State|Submit|NCPUS\n1|COMPLETED|{T0}|4\n2|COMPLETED|{T0}|8\n")
    result = CliRunner().invoke(
        app, ["ingest", "slurm", str(f), "--tz", "UTC", "--store", str(tmp_path / "s")]
    )
    assert result.exit_code == 0, result.output
    warned = [ln for ln in result.stderr.splitlines() if ln.startswith("warning:")]
    assert len(warned) == 1 and "no GPU field" in warned[0]
    jobs = scan(tmp_path / "s", "jobs", ["slurm"]).collect()
    assert jobs["gpus"].to_list() == [None, None]


def test_tres_typed_and_untyped_counted_once_and_hostile_counts(tmp_path: Path) -> None:
    """sacct prints a typed GPU request twice in TRES, ``gres/gpu:a100=2`` and
    ``gres/gpu=2``: one request of 2. Negative counts and counts past int64 are damaged
    and quarantined, in gres/gpu, cpu= and mem=."""
    text = (
        "JobID|State|Submit|AllocTRES\n"
        f"1|COMPLETED|{T0}|cpu=8,gres/gpu:a100=2,gres/gpu=2,mem=64G\n"
        f"2|COMPLETED|{T0}|gres/gpu:a100=-5\n"
        f"3|COMPLETED|{T0}|gres/gpu=4611686018427387904\n"
        f"4|COMPLETED|{T0}|cpu=-1,gres/gpu=1\n"
        f"5|COMPLETED|{T0}|cpu=4611686018427387904,gres/gpu=1\n"
        f"6|COMPLETED|{T0}|gres/gpu=1,mem=4611686018427387904\n"
        f"7|COMPLETED|{T0}|gres/gpu=-1\n"
    )
    jobs, _, q = _load(tmp_path, text)
    assert jobs.select("job_id", "gpus", "gpu_type", "cpus").rows() == [("1", 2.0, "a100", 8.0)]
    assert q == {
        "line 3": "AllocTRES 'gres/gpu:a100=-5' has a gres/gpu:<model> count that is not a "
        "whole number",
        "line 4": "AllocTRES 'gres/gpu=4611686018427387904' names more than 1000000 GPUs",
        "line 5": "AllocTRES 'cpu=-1,gres/gpu=1' has a cpu= count that is not a whole number "
        "from 0 to 2147483647",
        "line 6": "AllocTRES 'cpu=4611686018427387904,gres/gpu=1' has a cpu= count that is "
        "not a whole number from 0 to 2147483647",
        "line 7": "AllocTRES 'gres/gpu=1,mem=4611686018427387904' has a mem= value that is "
        "not a memory amount (number, K/M/G/T/P unit, < 4 EiB)",
        "line 8": "AllocTRES 'gres/gpu=-1' has a gres/gpu count that is not a whole number",
    }


# ----------------------------------------------------------------------------- host lists


def test_host_lists_capped_per_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a budget of 10 + 1 per line (4 lines: 14 hosts), n[1-6] (6), m[1-6] (12 so
    far) and p[1-2] (14) fit; q[1-3] would make 17: that line is quarantined."""
    monkeypatch.setattr(nodelist, "FILE_HOSTS_FLOOR", 10)
    monkeypatch.setattr(nodelist, "FILE_HOSTS_PER_LINE", 1)
    text = (
        "JobID|State|Submit|AllocTRES|NodeList\n"
        f"1|COMPLETED|{T0}|gres/gpu=6|n[1-6]\n"
        f"2|COMPLETED|{T0}|gres/gpu=6|m[1-6]\n"
        f"3|COMPLETED|{T0}|gres/gpu=2|p[1-2]\n"
        f"4|COMPLETED|{T0}|gres/gpu=3|q[1-3]\n"
    )
    jobs, placements, q = _load(tmp_path, text)
    assert jobs["job_id"].to_list() == ["1", "2", "3"]
    assert placements.height == 14
    assert q == {
        "line 5": "NodeList 'q[1-3]' (3 hosts) takes the file past its budget of 14 hosts "
        "over all host lists (a hostile or damaged export)"
    }


def test_hostile_host_lists_bounded_memory(tmp_path: Path) -> None:
    """A 5 KB file of ``node[1-100000]`` lines names 8.5 M hosts (85 lines x 100,000):
    with the default per-file budget the ingest stays far below 1 GB."""
    lines = [f"{i}|COMPLETED|{T0}|gres/gpu=1|node[1-100000]" for i in range(1, 86)]
    f = tmp_path / "jobs.psv"
    f.write_text("JobID|State|Submit|AllocTRES|NodeList\n" + "\n".join(lines) + "\n")
    assert 4500 < f.stat().st_size < 5500
    code = (
        "import json, sys; from pathlib import Path;"
        "from gpu_trace.loaders import LOADERS, ingest;"
        "r = ingest(LOADERS['slurm'], Path(sys.argv[1]), Path(sys.argv[2]), tz='UTC');"
        f"print(json.dumps([r.totals, {OWN_PEAK_KIB}]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(f), str(tmp_path / "s")],
        capture_output=True,
        text=True,
        check=True,
    )
    (read, written, quarantined), rss_kib = json.loads(out.stdout)
    assert read == written + quarantined and quarantined > 0
    assert rss_kib * 1024 < 2**30  # the child's own peak (tests/peak_rss.py), KiB


def test_line_repeated_exactly_is_one_run(tmp_path: Path) -> None:
    """Two overlapping exports pasted into one file repeat a job's lines verbatim: the
    same run printed twice is one run (attempts 1, its hosts once), while a run that
    differs (sacct -D) is another attempt."""
    job = f"5|COMPLETED|{T0}|{T0}|2026-01-05T11:00:00|01:00:00|gres/gpu=2|n[1-2]\n"
    step = f"5.batch|COMPLETED|{T0}|{T0}|2026-01-05T11:00:00|01:00:00|gres/gpu=2|n1\n"
    text = "JobID|State|Submit|Start|End|Elapsed|AllocTRES|NodeList\n" + (job + step) * 2
    jobs, placements, q = _load(tmp_path, text)
    assert q == {}
    assert jobs.select("job_id", "attempts", "run_s").rows() == [("5", 1, 3600.0)]
    # n1, n2 for the job; n1 for its batch step
    assert placements.select("attempt", "task", "machine_id").rows() == [
        (0, "batch", "n1"),
        (0, None, "n1"),
        (0, None, "n2"),
    ]


@pytest.mark.parametrize("completed_first", [False, True])
def test_same_run_printed_at_two_moments_is_one_run(tmp_path: Path, completed_first: bool) -> None:
    """Without -D, sacct prints a job id's latest record (man page, -D/--duplicates:
    "sacct returns the most recent job with that number"), as it stands when sacct
    runs: an export made while job 8 ran prints it RUNNING with End ``Unknown`` and
    Elapsed so far, a later one COMPLETED with the same Submit and Start. Two such
    exports pasted into one file are one run of one job, not a requeue (a requeued run
    starts again: "If a job is requeued the submit time is reset"): attempts 1, the
    completed line's End, its hosts once, its batch step once; in either order the
    finished record wins."""
    running = (
        f"8|RUNNING|{T0}|{T0}|Unknown|00:30:00|gres/gpu=2|n1\n"
        f"8.batch|RUNNING|{T0}|{T0}|Unknown|00:30:00|gres/gpu=2|n1\n"
    )
    done = (
        f"8|COMPLETED|{T0}|{T0}|2026-01-05T11:00:00|01:00:00|gres/gpu=2|n1\n"
        f"8.batch|COMPLETED|{T0}|{T0}|2026-01-05T11:00:00|01:00:00|gres/gpu=2|n1\n"
    )
    head = "JobID|State|Submit|Start|End|Elapsed|AllocTRES|NodeList\n"
    text = head + (done + running if completed_first else running + done)
    jobs, placements, q = _load(tmp_path, text)
    assert q == {}
    assert jobs.select("job_id", "attempts", "status", "run_s", "gpus").rows() == [
        ("8", 1, "completed", 3600.0, 2.0)
    ]
    assert placements.select("attempt", "task", "machine_id", "status", "end_time").rows() == [
        (0, "batch", "n1", "completed", datetime(2026, 1, 5, 11, 0, tzinfo=UTC)),
        (0, None, "n1", "completed", datetime(2026, 1, 5, 11, 0, tzinfo=UTC)),
    ]


def test_gres_names_that_start_with_gpu_are_not_gpus(tmp_path: Path) -> None:
    """A GRES name is matched whole (gres.conf ``Name=``): ``gpumem:16G`` or
    ``gpu_mem:100`` are other resources, not one GPU; ``mps:100,gpu:2`` is 2 GPUs."""
    text = (
        "JobID|State|Submit|AllocCPUS|ReqGRES|AllocGRES\n"
        f"1|COMPLETED|{T0}|4|gpumem:16G|gpumem:16G\n"
        f"2|COMPLETED|{T0}|4|gpu_mem:100,mps:100|gpu_mem:100,mps:100\n"
        f"3|COMPLETED|{T0}|4|mps:100,gpu:2|mps:100,gpu:2\n"
        f"4|COMPLETED|{T0}|4|gpu:a100:4,gpu:v100:2|gpu:a100:4,gpu:v100:2\n"
    )
    jobs, _, q = _load(tmp_path, text)
    assert q == {}
    assert jobs.select("job_id", "gpus").rows() == [("1", 0.0), ("2", 0.0), ("3", 2.0), ("4", 6.0)]


def test_pending_range_with_a_host_list_gets_no_placements(tmp_path: Path) -> None:
    """A pending array range has run nothing: even when a (damaged) export gives it a
    host list, its 3 tasks are 3 jobs and no placements (not tasks x hosts)."""
    text = (
        "JobID|State|Submit|Start|End|ReqTRES|AllocTRES|NodeList\n"
        f"5_[1-3]|PENDING|{T0}|Unknown|Unknown|cpu=1,gres/gpu=1||n[1-2]\n"
        f"6|COMPLETED|{T0}|{T0}|2026-01-05T11:00:00|cpu=1|cpu=1,gres/gpu=1|n[1-2]\n"
    )
    jobs, placements, q = _load(tmp_path, text)
    assert q == {}
    assert sorted(jobs["job_id"]) == ["5_1", "5_2", "5_3", "6"]
    assert placements.select("job_id", "machine_id").rows() == [("6", "n1"), ("6", "n2")]


def test_array_tasks_capped_per_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Array ranges share the file's budget (as host lists do): with a budget of
    10 + 1 x 3 lines = 13 tasks, 5_[1-10] (10) fits, 6_[1-5] would take 15 and is
    quarantined, 7_[1-3] (13) still fits."""
    monkeypatch.setattr(nodelist, "FILE_HOSTS_FLOOR", 10)
    monkeypatch.setattr(nodelist, "FILE_HOSTS_PER_LINE", 1)
    text = (
        "JobID|State|Submit|Start|End|ReqTRES|AllocTRES|NodeList\n"
        f"5_[1-10]|PENDING|{T0}|Unknown|Unknown|cpu=1||None assigned\n"
        f"6_[1-5]|PENDING|{T0}|Unknown|Unknown|cpu=1||None assigned\n"
        f"7_[1-3]|PENDING|{T0}|Unknown|Unknown|cpu=1||None assigned\n"
    )
    jobs, _, q = _load(tmp_path, text)
    assert jobs.height == 13
    assert q == {
        "line 3": "JobID '6_[1-5]' takes the file past its budget of 13 array tasks "
        "(a hostile export)"
    }
