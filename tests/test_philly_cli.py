"""philly: CLI tests (the typer app).

The Philly loader: a hand-written ``trace-data/`` fixture with hand-computed values,
the real machine list (checked with stdlib csv), the real marwage job rows converted
back to the raw job-log format (checked with stdlib json + zoneinfo), fuzzing of both
parsers, and the synthetic generator.
"""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from gpu_trace.cli import app
from tests.philly_common import FIXTURE, frame


def test_capacity_option_and_cli(tmp_path: Path) -> None:
    store = tmp_path / "store"
    result = CliRunner().invoke(
        app,
        ["ingest", "philly", str(FIXTURE), "--store", str(store), "--capacity", "inferred_util"],
    )
    assert result.exit_code == 0, result.output
    assert "cluster_job_log" in result.stdout and "gpu_samples" in result.stdout
    assert frame(store, "capacity")["basis"].to_list() == ["inferred_util"]
    bad = CliRunner().invoke(app, ["ingest", "philly", str(tmp_path), "--store", str(store)])
    assert bad.exit_code == 1
    assert "no cluster_job_log" in bad.output
