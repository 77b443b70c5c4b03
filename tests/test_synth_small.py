"""Every synthetic generator works at tiny scale too (tests and fuzz seeds use a
handful of jobs); the Philly one used to need at least ~750 jobs (one user per VC)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpu_trace.cli import app

runner = CliRunner()


@pytest.mark.parametrize("family", ["philly", "helios", "openb", "pai2020"])
def test_tiny_synth_ingests(tmp_path: Path, family: str) -> None:
    jobs = 10
    out = tmp_path / "raw"
    made = runner.invoke(
        app, ["synth", family, "--jobs", str(jobs), "--seed", "3", "--out", str(out)]
    )
    assert made.exit_code == 0, made.output
    store = tmp_path / "store"
    loaded = runner.invoke(app, ["ingest", family, str(out), "--store", str(store)])
    assert loaded.exit_code == 0, loaded.output
    total = [line.split() for line in loaded.stdout.splitlines() if line.startswith("total")]
    read, written, quarantined = (int(x) for x in total[0][1:4])
    assert read == written + quarantined and written >= jobs
