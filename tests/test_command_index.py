"""The generated listing index (``gpu_trace/command_index.py``, issue #25) matches the
commands and declarations it stands in for.

``gpu-trace --help``, ``gpu-trace ingest --help`` and shell completion list commands
from the index instead of building them; these tests build the real commands and
compare what a listing reads of each (click's short help at several widths, typer's rich
command-table text, hidden / deprecated), and check the index's record of which module
declares which loader against the modules themselves.
"""

from __future__ import annotations

import importlib
import io
import pkgutil
from pathlib import Path

import pytest
from rich.console import Console
from typer.main import get_command
from typer.rich_utils import _make_command_help

from gpu_trace import command_index
from gpu_trace.cli import ROOT_COMMANDS, app, index_gen
from gpu_trace.plugins import LoaderPlugin

ROOT = Path(__file__).resolve().parents[1]
INDEX = ROOT / "gpu_trace" / "command_index.py"


def test_committed_index_matches_the_commands() -> None:
    assert INDEX.read_text(encoding="utf-8") == index_gen.render(), (
        "gpu_trace/command_index.py is out of date: run `make docs` and commit it"
    )


def _same_listing(group: object, names: list[str]) -> None:
    """Each name's stand-in (what the group lists) reads like the real command."""
    for name in names:
        real = group.commands[name]  # type: ignore[attr-defined]
        listed = group.listed(name)  # type: ignore[attr-defined]
        assert listed.name == real.name == name
        assert (listed.hidden, listed.deprecated) == (real.hidden, real.deprecated)
        assert real.short_help is None and listed.short_help is None
        for limit in (20, 45, 80, 200, 10_000):
            assert listed.get_short_help_str(limit) == real.get_short_help_str(limit), name
        for mode in ("rich", "markdown"):
            ours = _make_command_help(help_text=listed.help, markup_mode=mode)
            theirs = _make_command_help(help_text=real.help, markup_mode=mode)
            assert _shown(ours) == _shown(theirs), (name, mode)


def _shown(renderable: object) -> str:
    """What the terminal gets of a rich renderable (styles included), at a fixed width."""
    console = Console(file=io.StringIO(), width=100, force_terminal=True, color_system="truecolor")
    console.print(renderable)
    return console.file.getvalue()  # type: ignore[attr-defined]


def test_root_listing_reads_like_the_commands() -> None:
    root = get_command(app)
    assert list(root.commands) == list(ROOT_COMMANDS)  # type: ignore[attr-defined]
    assert list(command_index.ROOT_HELP) == list(ROOT_COMMANDS)
    _same_listing(root, list(ROOT_COMMANDS))


def test_ingest_listing_reads_like_the_commands() -> None:
    ingest = get_command(app).commands["ingest"]  # type: ignore[attr-defined]
    names = list(ingest.commands)
    assert names == sorted(names) and set(command_index.INGEST_HELP) <= set(names)
    _same_listing(ingest, list(command_index.INGEST_HELP))


def test_loader_modules_are_the_declaring_modules() -> None:
    """Read from each module of ``gpu_trace.loaders`` itself: its ``PLUGIN`` / ``PLUGINS``."""
    found: dict[str, tuple[str, ...]] = {}
    for info in pkgutil.iter_modules([str(ROOT / "gpu_trace" / "loaders")]):
        module = importlib.import_module(f"gpu_trace.loaders.{info.name}")
        declared = [getattr(module, "PLUGIN", None), *getattr(module, "PLUGINS", ())]
        found[info.name] = tuple(p.name for p in declared if isinstance(p, LoaderPlugin))
    index = dict(command_index.LOADER_MODULES)
    assert index.pop("__init__") == ()
    assert index == found


def test_check_mode_reports_drift(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stale = tmp_path / "command_index.py"
    stale.write_text("ROOT_HELP = {}\n", encoding="utf-8")
    assert index_gen.main([str(stale), "--check"]) == 1
    assert "run `make docs`" in capsys.readouterr().err
    assert index_gen.main([str(stale)]) == 0
    assert index_gen.main([str(stale), "--check"]) == 0
