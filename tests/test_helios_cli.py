"""helios: CLI tests (the typer app).

The Helios loader and synthetic generator.

Expected values are hand-computed from the fixtures (the three README rows of
HeliosData's README, a ``jobname`` variant, a file of bad rows) or computed
here with the standard library (csv, datetime, zipfile) from the real
``cluster_gpu_number.csv`` files and from the synthetic output, never read back from
our own results.
"""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from gpu_trace.cli import app
from tests.helios_common import DATA

# ---------------------------------------------------------------- CLI


def test_cli_ingest_helios(store: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(
        app, ["ingest", "helios", str(DATA), "--store", str(store), "--cluster", "venus"]
    )
    assert result.exit_code == 0, result.output
    total = [line for line in result.stdout.splitlines() if line.startswith("total")]
    assert total and total[0].split()[1:] == ["11", "11", "0", "0"]
    assert runner.invoke(app, ["ingest", "helios", str(DATA), "--cluster", "mars"]).exit_code == 2
    bad = runner.invoke(app, ["ingest", "helios", str(DATA), "--store", str(store), "--tz", "X/Y"])
    assert bad.exit_code == 2 and "unknown time zone 'X/Y'" in bad.stderr
