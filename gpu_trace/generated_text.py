"""Files generated from the code (``docs/cli.md``, ``gpu_trace/command_index.py``): the
one command-line entry that writes such a file, or with ``--check`` compares it, so
``make docs`` and the drift tests treat every generated file alike.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path


def write_or_check(
    argv: list[str] | None,
    *,
    prog: str,
    description: str,
    default: str,
    render: Callable[[], str],
    stale: str = "",
) -> int:
    """Write ``render()`` to the path in ``argv`` (``default`` if none); with
    ``--check``, only compare and return 1 on drift (``stale`` says from what).
    """
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("target", nargs="?", default=default, type=Path)
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 on drift")
    args = parser.parse_args(argv)
    target: Path = args.target
    text = render()
    if args.check:
        current = target.read_text(encoding="utf-8") if target.exists() else ""
        if current != text:
            sys.stderr.write(f"{target} is out of date{stale}: run `make docs`\n")
            return 1
        return 0
    target.write_text(text, encoding="utf-8")
    sys.stderr.write(f"wrote {target}\n")
    return 0
