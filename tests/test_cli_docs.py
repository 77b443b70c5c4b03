"""docs/cli.md is generated from --help (gpu_trace.cli.docs) and must match the code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpu_trace.cli import app
from gpu_trace.cli import docs as cli_docs

DOC = Path(__file__).resolve().parents[1] / "docs" / "cli.md"


def test_committed_cli_reference_matches_help() -> None:
    expected = cli_docs.render()
    current = DOC.read_text(encoding="utf-8") if DOC.exists() else ""
    assert current == expected, (
        "docs/cli.md is out of date with the commands' --help: run `make docs` and commit it"
    )


def test_render_ignores_the_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    baseline = cli_docs.render()
    monkeypatch.setenv("COLUMNS", "40")
    monkeypatch.setenv("TERMINAL_WIDTH", "40")
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert cli_docs.render() == baseline
    assert "\x1b[" not in baseline


def test_reference_lists_each_option_that_help_shows() -> None:
    # `ingest openb --help` (rich panels, as a user sees it) names its options; the
    # generated section for the same command must name the same ones.
    shown = CliRunner().invoke(app, ["ingest", "openb", "--help"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0
    section = cli_docs.render().split("`gpu-trace ingest openb`", 1)[1].split("\n#", 1)[0]
    options = set(re.findall(r"--[a-z][a-z-]+", shown.output))
    assert {"--store", "--variant", "--help"} <= options
    assert options == set(re.findall(r"--[a-z][a-z-]+", section))


def test_check_mode_reports_drift(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stale = tmp_path / "cli.md"
    stale.write_text("# old\n", encoding="utf-8")
    assert cli_docs.main([str(stale), "--check"]) == 1
    assert "run `make docs`" in capsys.readouterr().err
    assert cli_docs.main([str(stale)]) == 0
    assert cli_docs.main([str(stale), "--check"]) == 0
