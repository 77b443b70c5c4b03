"""The ``gpu-trace`` command line: a thin typer skin over the library.

Data goes to stdout, progress and logs to stderr; user errors are one line with exit
code 1, usage errors exit 2 (see ``_boundary``).
"""

from __future__ import annotations

import os
import shutil
import sys
from typing import Annotated

import typer

from gpu_trace.cli._boundary import INTERRUPTED, alert, fail, set_verbosity
from gpu_trace.cli.lazy import table_group
from gpu_trace.version import __version__

HELP_WIDTH = (100, 120)
"""Narrowest and widest help (columns): below 100 columns typer's option tables cut
long option names and values (``--multinode-slowd…``); wider lines are hard to read."""

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": HELP_WIDTH[1]}
"""Inherited by every sub-command: ``-h`` works everywhere."""


def _help_width() -> int:
    """The terminal's width (``$COLUMNS``, else the tty; 120 when piped) clamped to
    :data:`HELP_WIDTH`; ``$TERMINAL_WIDTH`` (typer's own setting) wins when set.
    """
    if os.environ.get("TERMINAL_WIDTH", "").isdigit():
        return int(os.environ["TERMINAL_WIDTH"])
    columns = shutil.get_terminal_size(fallback=(HELP_WIDTH[1], 24)).columns
    return max(HELP_WIDTH[0], min(HELP_WIDTH[1], columns))


def _set_help_width() -> None:
    """Hand :func:`_help_width` to typer's rich help. ``typer.rich_utils`` (rich's
    Markdown, tracebacks: ~70 ms) loads only when help or a usage error is printed, and
    reads ``$TERMINAL_WIDTH`` then; a command that runs never pays for it (#25).
    """
    width = _help_width()
    if "typer.rich_utils" in sys.modules:
        sys.modules["typer.rich_utils"].MAX_WIDTH = width  # type: ignore[attr-defined]
    else:
        os.environ["TERMINAL_WIDTH"] = str(width)


_set_help_width()

ROOT_COMMANDS: dict[str, str] = {
    "sql": "gpu_trace.cli.sql:sql",
    "schema": "gpu_trace.cli.schema:schema",
    "report": "gpu_trace.cli.report:report",
    "synth": "gpu_trace.cli.synth:synth",
    "ingest": "gpu_trace.cli.ingest:app",
    "datasets": "gpu_trace.cli.datasets:app",
    "telemetry": "gpu_trace.cli.telemetry:app",
    "analyze": "gpu_trace.cli.analyze:app",
    "replay": "gpu_trace.cli.replay:app",
    "serve": "gpu_trace.cli.serve:app",
}
"""The top-level commands in listing order (typer's: single commands, then groups):
name -> ``module:attribute`` (a ``Typer`` group or a command function). Each module is imported only when its command runs or is
asked for its own help; ``gpu-trace --help`` lists them from :mod:`gpu_trace.command_index`.
"""


def _root_help() -> dict[str, str]:
    from gpu_trace import command_index

    return command_index.ROOT_HELP


app = typer.Typer(
    cls=table_group(lambda: ROOT_COMMANDS, _root_help),
    name="gpu-trace",
    help="Load, query, analyse and replay GPU-cluster traces and GPU telemetry.\n\n"
    "Global options (-q, -v, -V) go before the command: gpu-trace -q ingest openb DIR.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    add_completion=True,
    context_settings=CONTEXT,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"gpu-trace {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", "-V", callback=_version, is_eager=True, help="Print the version."
        ),
    ] = False,
    quiet: Annotated[
        bool,
        typer.Option(
            "--quiet", "-q", help="No progress or log lines on stderr (errors and warnings stay)."
        ),
    ] = False,
    verbose: Annotated[
        int,
        typer.Option(
            "--verbose",
            "-v",
            count=True,
            help="More detail: library log lines; on an error its type and full message "
            "(-vv: the traceback too).",
        ),
    ] = 0,
) -> None:
    """gpu-trace: one data model for Philly, Helios, Alibaba PAI 2020, openb and live GPUs.

    Global options go before the command: gpu-trace -q ingest openb DIR.
    """
    if quiet and verbose:
        msg = "give --quiet or --verbose, not both"
        raise fail(msg, 2)
    set_verbosity(-1 if quiet else verbose)


BLAS_THREADS = "OPENBLAS_NUM_THREADS"
"""One OpenBLAS thread unless the user sets more. No command does BLAS-heavy linear
algebra (data paths are polars and DuckDB, with their own thread pools; the estimator's
gradient boosting is OpenMP, limited to one thread itself), yet numpy's import runs a
dot product as a self-check, which wakes one OpenBLAS thread per core that then spins:
~0.1 CPU-second per command on a 2-core machine, half of numpy's import (measured:
``python -c "import numpy"`` 0.26 vs 0.13 CPU s)."""


def main() -> None:
    """Console-script entry point. Commands turn Ctrl-C into one line and exit 130
    themselves (``_boundary.domain_errors``); this catches it outside any command.
    """
    os.environ.setdefault(BLAS_THREADS, "1")  # before anything imports numpy
    try:
        app()
    except KeyboardInterrupt:
        alert.print("interrupted", markup=False)
        raise SystemExit(INTERRUPTED) from None
