"""Progress for long commands (``replay compare``, ``replay live``, ``report``).

One helper so every command behaves the same: a transient rich bar on **stderr**
(stdout stays data only), shown only when stderr is a terminal and the user has not
asked for quiet (``GPU_TRACE_QUIET=1``, which ``--quiet`` sets). Library code never
prints: it takes an optional callback (``on_progress(done, total, status)``) and the
CLI passes :func:`task`'s updater.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

QUIET_ENV = "GPU_TRACE_QUIET"
"""Set to anything but empty / ``0`` to silence progress (``--quiet`` sets it to 1)."""

Update = Callable[[int, int | None, str], None]
"""``update(done, total, status)``: ``total`` None keeps the one given before."""


def quiet() -> bool:
    """Whether ``$GPU_TRACE_QUIET`` asks for silence (the environment, so the
    processes a command starts are quiet too).
    """
    return os.environ.get(QUIET_ENV, "").strip() not in ("", "0")


def shown(console: Console) -> bool:
    """Progress is drawn only on a terminal and when not quiet."""
    return console.is_terminal and not quiet()


def _noop(done: int, total: int | None = None, status: str = "") -> None:
    return None


@contextlib.contextmanager
def task(
    description: str, total: int | None = None, console: Console | None = None
) -> Iterator[Update]:
    """A progress bar for the ``with`` block, erased when it ends; yields its updater
    (a no-op when progress is not shown).
    """
    if quiet():  # before rich is imported: a quiet run (scripts, benchmarks) never pays for it
        yield _noop
        return
    from rich.console import Console

    console = console or Console(stderr=True)
    if not shown(console):  # before rich.progress: output to a file or pipe never pays for it
        yield _noop
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=True) as bar:
        tid = bar.add_task(description, total=total, status="")

        def update(done: int, total: int | None = None, status: str = "") -> None:
            if total is not None:
                bar.update(tid, total=total)
            bar.update(tid, completed=done, status=status)

        yield update
