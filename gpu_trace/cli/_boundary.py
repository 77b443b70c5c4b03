"""The CLI's contract with its users: data on stdout, everything else on stderr, and
user errors as one line with exit code 1 (usage errors keep click's exit code 2).

Bugs are not hidden: only :class:`GpuTraceError` and OS errors about the user's files are
turned into one-line messages; anything else still raises.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import typer
from rich.console import Console

from gpu_trace.errors import GpuTraceError

P = ParamSpec("P")
R = TypeVar("R")

err = Console(stderr=True, highlight=False, soft_wrap=True)
"""Console for progress, logs and errors (stderr)."""


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print ``error: message`` on one line to stderr and return the exit to raise."""
    err.print(f"[bold red]error:[/] {message}", markup=True, highlight=False)
    return typer.Exit(code)


def domain_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Decorate a command so user errors end it with one line and exit code 1."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except GpuTraceError as exc:
            raise fail(_escape(str(exc))) from None
        except OSError as exc:
            where = f"{exc.filename}: " if exc.filename else ""
            raise fail(_escape(f"{where}{exc.strerror or exc}")) from None

    return wrapper


def _escape(text: str) -> str:
    return text.replace("[", "\\[").splitlines()[0] if text else text
