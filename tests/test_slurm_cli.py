"""``gpu-trace ingest slurm`` on the bundled sample, then an analysis and a replay on it,
through typer's runner on the real app."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpu_trace.cli import app

runner = CliRunner()
SAMPLE = Path("data/samples/slurm/jobs.psv")


def run(*args: str | Path):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("slurm") / "store"
    result = run(
        "ingest", "slurm", SAMPLE, "--cluster", "mycluster", "--tz", "Europe/Berlin",
        "--store", root,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    # 22 data lines, all allocation lines (sacct -X): + 8 tasks of the pending range
    # 41042_[1-9%2] = 30 records read; the second component of the heterogeneous job
    # 41020 is merged into the first: 29 jobs; 31 hosts over the started jobs
    assert "jobs.psv  jobs        mycluster-jobs  30    29       0            1" in result.stdout
    assert "read 61 = written 60 + quarantined 0 + merged 1" in result.stderr
    return root


def test_ingest_without_tz_warns_once(tmp_path: Path) -> None:
    result = run("ingest", "slurm", SAMPLE, "--store", tmp_path / "s")
    assert result.exit_code == 0
    warnings = [ln for ln in result.stderr.splitlines() if ln.startswith("warning:")]
    assert len(warnings) == 1 and "reading them as UTC" in warnings[0]


def test_bad_input_one_line_error(tmp_path: Path) -> None:
    bad = tmp_path / "jobs.psv"
    bad.write_text("JobName|User\nx|y\n")
    result = run("ingest", "slurm", bad, "--tz", "UTC", "--store", tmp_path / "s")
    assert result.exit_code == 1
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1
    assert lines[0].startswith(f"error: {bad}: line 1: header lacks field(s) JobID, State, Submit")
    result = run("ingest", "slurm", tmp_path / "missing.psv", "--store", tmp_path / "s")
    assert result.exit_code == 1 and "no such file" in result.stderr


def test_queueing_on_slurm(store: Path) -> None:
    """Queue waits by size bucket. Hand count from the sample (queue = Start - Submit):
    the three 16-GPU jobs (41005, 41006, 41040) waited 30, 12 and 30 s."""
    result = run("analyze", "queueing", "--source", "slurm", "--store", store, "--format", "json")
    assert result.exit_code == 0, result.output
    rows = {r["size_bucket"]: r for r in json.loads(result.stdout)}
    assert rows["9-16"]["jobs"] == 3
    assert rows["9-16"]["mean_s"] == pytest.approx((30 + 12 + 30) / 3)
    assert rows["33-64"]["jobs"] == 1 and rows["33-64"]["mean_s"] == 312.0  # 41002


def test_failures_on_slurm(store: Path) -> None:
    """failed = FAILED (41003, 41012_3) + TIMEOUT (41005) + DEADLINE (41011) + NODE_FAIL
    (41006) + BOOT_FAIL (41010) + OUT_OF_MEMORY (41007, status oom: a failure of the job,
    told apart by cause): 7 jobs. PREEMPTED (41008) is the scheduler's doing, its own
    class (the sacct man page's JOB STATE CODES)."""
    result = run("analyze", "failures", "--source", "slurm", "--store", store, "--format", "json")
    assert result.exit_code == 0, result.output
    rows = {r["status_class"]: r for r in json.loads(result.stdout)}
    assert rows["failed"]["jobs"] == 7
    assert rows["preempted"]["jobs"] == 1
    assert rows["cancelled"]["jobs"] == 2  # CANCELLED by 10234, CANCELLED by 0


def test_replay_on_slurm(store: Path, tmp_path: Path) -> None:
    """FIFO on 8 A100 nodes + 2 V100 nodes. Of the 29 jobs, 1 is CPU-only (41007; the
    heterogeneous 41020 holds 8 GPUs in its +0 component), 11 never started (no run_s:
    41041, the 9 tasks 41042_1..9, 41043) and 1 is still RUNNING (41040: no end, so no
    run_s): 16 replayed, every one of them fits (largest: 41002, 40 A100 GPUs <= 64)."""
    result = run(
        "replay", "run", "--source", "slurm", "--gpus", "64x8:a100+16x8:v100",
        "--policy", "fifo", "--store", store, "--out", tmp_path / "run",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    query = (
        "select jobs_finished, jobs_rejected, jobs_skipped from replay_runs where source = 'slurm'"
    )
    result = run("sql", query, "--store", store, "--format", "json")
    assert result.exit_code == 0, result.output
    row = json.loads(result.stdout)[0]
    assert (row["jobs_finished"], row["jobs_rejected"], row["jobs_skipped"]) == (16, 0, 13)


def test_report_has_slurm_page(store: Path, tmp_path: Path) -> None:
    result = run("report", "--store", store, "--out", tmp_path / "site")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "site" / "slurm.html").is_file()


def test_bundled_inventory_is_the_denominator(tmp_path: Path) -> None:
    """The demo's sinfo snapshot (``sinfo -N -o "%N|%P|%T|%c|%m|%G"``: gpu01-08 with GRES
    gpu:a100:8, node1-3 with gpu:v100:2, each listed under two partitions) gives the
    cluster 8 x 8 + 3 x 2 = 70 GPUs. In the hour from 2026-01-05 12:00 UTC only 41002
    runs (40 GPUs, 09:35:12 Berlin = 08:35:12 UTC to the next day; 41001 ended 09:43 UTC,
    41004 10:40 UTC), so allocation is 40 / 70 = 57.14 %."""
    store = tmp_path / "store"
    tz = ("--tz", "Europe/Berlin")
    assert (
        run("ingest", "slurm", SAMPLE, "--cluster", "mycluster", *tz, "--store", store).exit_code
        == 0
    )
    inventory = SAMPLE.parent / "sinfo-2026-01-05T0000Z.txt"
    result = run("ingest", "sinfo", inventory, "--cluster", "mycluster", "--store", store)
    assert result.exit_code == 0, result.output
    assert "22    11       0            11" in result.stdout  # 22 lines, 11 nodes, 11 folded
    result = run("analyze", "utilization", "--source", "slurm", "--store", store, "-f", "json")
    assert result.exit_code == 0, result.output
    rows = {r["time"][:16]: r for r in json.loads(result.stdout)}
    assert {r["capacity_gpus"] for r in rows.values()} == {70}
    noon = rows["2026-01-05T12:00"]
    assert noon["allocated_gpus"] == pytest.approx(40)
    assert noon["allocation_pct"] == pytest.approx(100 * 40 / 70)
