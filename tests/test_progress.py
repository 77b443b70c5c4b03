"""Progress on long commands: drawn on stderr only on a terminal, never with
GPU_TRACE_QUIET=1, never on stdout; ``replay live`` picks or checks its time scale."""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from gpu_trace.cli import app
from gpu_trace.errors import GpuTraceError
from gpu_trace.loaders import LOADERS, ingest
from gpu_trace.progress import QUIET_ENV, task
from gpu_trace.replay.config import ReplayConfig
from gpu_trace.replay.live.budget import choose_scale
from gpu_trace.replay.simulate import compare
from tests.conftest import ROOT, SAMPLES


@pytest.fixture(scope="module")
def helios_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("helios") / "store"
    ingest(LOADERS["helios"], SAMPLES / "helios" / "synthetic", store)
    return store


def _draw(monkeypatch: pytest.MonkeyPatch, quiet: str | None, terminal: bool) -> str:
    if quiet is None:
        monkeypatch.delenv(QUIET_ENV, raising=False)
    else:
        monkeypatch.setenv(QUIET_ENV, quiet)
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=terminal, width=100)
    with task("replay compare: runs", 3, console=console) as update:
        update(2, None, "sjf / consolidate")
    return buf.getvalue()


def test_progress_only_on_a_terminal_and_not_quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    drawn = _draw(monkeypatch, None, terminal=True)
    assert "replay compare: runs" in drawn and "2/3" in drawn and "sjf / consolidate" in drawn
    assert _draw(monkeypatch, "1", terminal=True) == ""
    assert _draw(monkeypatch, None, terminal=False) == ""
    assert "2/3" in _draw(monkeypatch, "0", terminal=True)  # 0 means not quiet


def test_compare_reports_each_run(helios_store: Path) -> None:
    calls: list[tuple[int, int | None, str]] = []
    configs = [ReplayConfig(source="helios", scheduler=s, cluster="16x8") for s in ("fifo", "sjf")]
    compare(helios_store, configs, lambda d, t, s: calls.append((d, t, s)))
    assert calls == [(0, 2, "fifo / consolidate"), (1, 2, "sjf / consolidate"), (2, 2, "done")]


def _compare_in_pty(store: Path, quiet: bool) -> tuple[str, str]:
    """Run the real CLI with stderr on a pseudo-terminal and stdout on a pipe."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "120"}
    env.pop(QUIET_ENV, None)
    if quiet:
        env[QUIET_ENV] = "1"
    main, child = pty.openpty()
    cmd = [sys.executable, "-c", "from gpu_trace.cli import main; main()"]
    cmd += ["replay", "compare", "--source", "helios", "--policies", "fifo,sjf", "--gpus", "16x8"]
    proc = subprocess.Popen(
        [*cmd, "--store", str(store)], stdout=subprocess.PIPE, stderr=child, env=env
    )
    os.close(child)
    chunks = []
    while True:
        try:
            data = os.read(main, 65536)
        except OSError:  # the child closed the pty
            break
        if not data:
            break
        chunks.append(data)
    out = proc.stdout.read().decode() if proc.stdout else ""
    assert proc.wait(timeout=300) == 0
    os.close(main)
    return out, b"".join(chunks).decode(errors="replace")


def test_cli_progress_goes_to_the_terminal_not_stdout(helios_store: Path) -> None:
    out, tty = _compare_in_pty(helios_store, quiet=False)
    assert "replay compare: runs" in tty
    assert "runs" not in out and "\x1b" not in out  # stdout: the table only
    assert out.splitlines()[0].startswith("| run_id")
    _, quiet_tty = _compare_in_pty(helios_store, quiet=True)
    assert "replay compare: runs" not in quiet_tty


def test_live_time_scale_chosen_or_refused() -> None:
    # 20 openb pods span about 9,840 s: 9840 / 120 = 82 < 3600, so the floor 3600 applies
    assert choose_scale(9840.0, None) == 3600.0
    # a span of 10,000,000 s: ceil(1e7 / 120) = 83,334 trace s per wall s (2 min)
    assert choose_scale(1e7, None) == 83334
    assert choose_scale(1e7, 3600.0) == 3600.0  # 1e7 / 3600 = 2,778 s <= 3,600 s
    with pytest.raises(GpuTraceError) as info:  # 2e7 / 3600 = 5,556 s = 1 h 32 min
        choose_scale(2e7, 3600.0)
    assert "at least 1 h 32 min" in str(info.value)
    assert "--time-scale 166667" in str(info.value)  # ceil(2e7 / 120)


def test_live_cli_refuses_a_run_of_hours(openb_store: Path, tmp_path: Path) -> None:
    args = ["replay", "live", "--source", "openb", "--out", str(tmp_path / "run")]
    args += ["--jobs", "20", "--time-scale", "1", "--max-wall-s", "600"]
    result = CliRunner().invoke(app, [*args, "--store", str(openb_store)])
    assert result.exit_code == 1, result.output
    assert "replay live would take at least" in result.output
    assert not (tmp_path / "run").exists()  # refused before anything ran


def test_live_reports_jobs_ended_and_the_trace_clock(tmp_path: Path) -> None:
    """Two 1-GPU jobs of 200 trace s on one emulated slot, scale 1000: FIFO runs them
    back to back (0..200, 200..400), so progress counts 0, 1, 2 ended of 2 and the
    trace clock reaches at least 400 s = 0.11 h."""
    from datetime import UTC, datetime, timedelta

    import polars as pl

    from gpu_trace.replay.live.executor import LiveOptions, run_live

    t0 = datetime(2020, 1, 1, tzinfo=UTC)
    jobs = pl.DataFrame(
        {
            "job_id": ["j0", "j1"],
            "user": ["u0", "u1"],
            "submit_time": [t0, t0 + timedelta(seconds=1)],
            "run_s": [200.0, 200.0],
            "gpus": [1.0, 1.0],
        }
    )
    calls: list[tuple[int, int | None, str]] = []
    run_live(
        jobs,
        ReplayConfig(source="synthetic", scheduler="fifo", run_id="live-progress"),
        LiveOptions(devices="emulated:1", time_scale=1000.0),
        tmp_path / "run",
        on_progress=lambda d, t, s: calls.append((d, t, s)),
    )
    done = [d for d, _, _ in calls]
    assert done == sorted(done) and done[0] == 0 and done[-1] == 2
    assert {t for _, t, _ in calls} == {2}
    hours = float(calls[-1][2].removeprefix("trace clock ").removesuffix(" h"))
    assert hours >= 0.11
