"""The CLI's contract with its users: data on stdout, everything else on stderr, user
errors as one line with exit code 1, usage errors (a bad name or value) exit 2, Ctrl-C
exits 130 with one ``interrupted`` line.

Bugs are not hidden: only :class:`GpuTraceError` and OS errors about the user's files are
turned into one-line messages; anything else still raises.

Verbosity (``gpu-trace -q`` / ``-v``, set once by the root callback) is applied here, to
the two consoles every command prints through: :data:`err` carries progress and log
lines and is silenced by ``--quiet``; errors and warnings go through :data:`alert`,
which ``--quiet`` never silences (a user must still learn why a command failed).
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import traceback
import warnings
from collections.abc import Callable
from typing import ParamSpec, TextIO, TypeVar

import typer
from rich.console import Console

from gpu_trace import progress
from gpu_trace.errors import GpuTraceError, InputWarning, UsageError, clip

P = ParamSpec("P")
R = TypeVar("R")

INTERRUPTED = 130
"""Exit code after Ctrl-C (128 + SIGINT), as shells report a process killed by it."""

err = Console(stderr=True, highlight=False, soft_wrap=True)
"""Console for progress and logs (stderr); quiet under ``gpu-trace --quiet``."""

alert = Console(stderr=True, highlight=False, soft_wrap=True)
"""Console for errors and warnings (stderr); never quiet."""

_verbosity = 0
"""-1 quiet, 0 normal, 1 verbose (-v), 2 debug (-vv)."""

_set_quiet_env = False
"""Whether ``-q`` set ``$GPU_TRACE_QUIET`` (so only then it is removed again)."""


def set_verbosity(level: int) -> None:
    """Apply ``--quiet`` (-1) / ``-v`` (1, 2) to every console and the library's loggers.

    Called by the root callback on every invocation (so a test runner calling the app
    twice does not keep the previous run's level).
    """
    global _verbosity, _set_quiet_env
    _verbosity = level
    # gpu_trace.progress reads $GPU_TRACE_QUIET (also for processes it starts): -q sets
    # it, and a later invocation in the same process without -q takes it back.
    if level < 0 and not progress.quiet():
        os.environ[progress.QUIET_ENV] = "1"
        _set_quiet_env = True
    elif level >= 0 and _set_quiet_env:
        os.environ.pop(progress.QUIET_ENV, None)
        _set_quiet_env = False
    err.quiet = level < 0 or progress.quiet()
    logger = logging.getLogger("gpu_trace")
    logger.setLevel(
        logging.ERROR
        if level < 0
        else {0: logging.WARNING, 1: logging.INFO}.get(level, logging.DEBUG)
    )
    if not any(isinstance(h, _StderrHandler) for h in logger.handlers):
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        logger.addHandler(handler)


class _StderrHandler(logging.Handler):
    """Log records to whatever ``sys.stderr`` is when they are emitted (a test runner
    swaps it per invocation; a StreamHandler would keep writing to the first one).
    """

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
        except (OSError, ValueError):
            self.handleError(record)


def verbosity() -> int:
    """The level set by the root options (-1 quiet, 0 normal, 1+ verbose)."""
    return _verbosity


def info(message: str) -> None:
    """A log line on stderr (hidden by ``--quiet``)."""
    err.print(message, markup=False, highlight=False)


def detail(message: str) -> None:
    """A log line shown only with ``-v``."""
    if _verbosity > 0:
        err.print(message, markup=False, highlight=False)


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print ``error: message`` on one line to stderr and return the exit to raise.

    ``message`` is rich markup: escape user text with :func:`escape`.
    """
    alert.print(f"[bold red]error:[/] {message}", markup=True, highlight=False)
    return typer.Exit(code)


def warn(message: str) -> None:
    """Print ``warning: message`` on one line to stderr."""
    alert.print(f"[bold yellow]warning:[/] {escape(message)}", markup=True, highlight=False)


def interrupted(what: str = "interrupted") -> typer.Exit:
    """Print one ``interrupted`` line and return the exit (130) to raise."""
    alert.print(escape(what), markup=True, highlight=False)
    return typer.Exit(INTERRUPTED)


def domain_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Decorate a command so user errors end it with one line (exit 1; a
    :class:`UsageError` exit 2), Ctrl-C with one ``interrupted`` line (exit 130), and
    :class:`InputWarning` s show as one ``warning:`` line each (every distinct message,
    not once per code location as Python's default filter would; the same text twice in
    one command, e.g. a report whose pages each run the analysis that warns, once).
    """

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("always", InputWarning)
                previous = warnings.showwarning
                seen: set[str] = set()

                def show(
                    message: Warning | str,
                    category: type[Warning],
                    filename: str,
                    lineno: int,
                    file: TextIO | None = None,
                    line: str | None = None,
                ) -> None:
                    if issubclass(category, InputWarning):
                        if str(message) not in seen:
                            seen.add(str(message))
                            warn(str(message))
                    else:
                        previous(message, category, filename, lineno, file, line)

                warnings.showwarning = show
                return func(*args, **kwargs)
        except KeyboardInterrupt:
            # Writers abort their transaction on the way out (the store keeps its last
            # generation); nothing else is worth a traceback.
            raise interrupted() from None
        except GpuTraceError as exc:
            _explain(exc)
            raise fail(escape(str(exc)), 2 if isinstance(exc, UsageError) else 1) from None
        except OSError as exc:
            _explain(exc)
            where = f"{exc.filename}: " if exc.filename else ""
            raise fail(escape(f"{where}{exc.strerror or exc}")) from None

    return wrapper


def _explain(exc: BaseException) -> None:
    """With ``-v`` the full message and its type, with ``-vv`` the traceback too, before
    the one-line error (which stays last, so scripts reading the last line still work).
    """
    if _verbosity >= 2:
        alert.print("".join(traceback.format_exception(exc)).rstrip(), markup=False)
    elif _verbosity == 1:
        alert.print(f"{type(exc).__name__}: {exc}", markup=False)


def escape(text: str) -> str:
    """The first line of ``text``, capped (:func:`gpu_trace.errors.clip`), rich markup
    escaped.
    """
    return clip(text.splitlines()[0]).replace("[", "\\[") if text else text
