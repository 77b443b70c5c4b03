"""The CLI's contract with its users: data on stdout, everything else on stderr, and
user errors as one line with exit code 1 (usage errors keep click's exit code 2).

Bugs are not hidden: only :class:`GpuTraceError` and OS errors about the user's files are
turned into one-line messages; anything else still raises.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import ParamSpec, TextIO, TypeVar

import typer
from rich.console import Console

from gpu_trace.errors import GpuTraceError, InputWarning, clip

P = ParamSpec("P")
R = TypeVar("R")

err = Console(stderr=True, highlight=False, soft_wrap=True)
"""Console for progress, logs and errors (stderr)."""


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print ``error: message`` on one line to stderr and return the exit to raise."""
    err.print(f"[bold red]error:[/] {message}", markup=True, highlight=False)
    return typer.Exit(code)


def warn(message: str) -> None:
    """Print ``warning: message`` on one line to stderr."""
    err.print(f"[bold yellow]warning:[/] {_escape(message)}", markup=True, highlight=False)


def domain_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Decorate a command so user errors end it with one line and exit code 1, and
    :class:`InputWarning` s show as one ``warning:`` line each (every time, not once per
    code location as Python's default filter would)."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("always", InputWarning)
                previous = warnings.showwarning

                def show(
                    message: Warning | str,
                    category: type[Warning],
                    filename: str,
                    lineno: int,
                    file: TextIO | None = None,
                    line: str | None = None,
                ) -> None:
                    if issubclass(category, InputWarning):
                        warn(str(message))
                    else:
                        previous(message, category, filename, lineno, file, line)

                warnings.showwarning = show
                return func(*args, **kwargs)
        except GpuTraceError as exc:
            raise fail(_escape(str(exc))) from None
        except OSError as exc:
            where = f"{exc.filename}: " if exc.filename else ""
            raise fail(_escape(f"{where}{exc.strerror or exc}")) from None

    return wrapper


def _escape(text: str) -> str:
    """The first line of ``text``, capped (:func:`gpu_trace.errors.clip`), rich markup
    escaped."""
    return clip(text.splitlines()[0]).replace("[", "\\[") if text else text
