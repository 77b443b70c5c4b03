"""The ``gpu-trace`` command line: a thin typer skin over the library.

Data goes to stdout, progress and logs to stderr; user errors are one line with exit
code 1, usage errors exit 2 (see ``_boundary``).
"""

from __future__ import annotations

from typing import Annotated

import typer

from gpu_trace import __version__
from gpu_trace.cli import analyze as analyze_cli
from gpu_trace.cli import datasets as datasets_cli
from gpu_trace.cli import ingest as ingest_cli
from gpu_trace.cli import replay as replay_cli
from gpu_trace.cli import telemetry as telemetry_cli
from gpu_trace.cli.report import report
from gpu_trace.cli.schema import schema
from gpu_trace.cli.sql import sql
from gpu_trace.cli.synth import synth

app = typer.Typer(
    name="gpu-trace",
    help="Load, query, analyse and replay GPU-cluster traces and GPU telemetry.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    add_completion=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"gpu-trace {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """gpu-trace: one data model for Philly, Helios, Alibaba PAI 2020, openb and live GPUs."""


def _group(help_text: str) -> typer.Typer:
    return typer.Typer(help=help_text, no_args_is_help=True)


app.add_typer(ingest_cli.app, name="ingest")
app.command("sql")(sql)
app.command("schema")(schema)
app.command("report")(report)
app.add_typer(datasets_cli.app, name="datasets")
app.add_typer(telemetry_cli.app, name="telemetry")
app.add_typer(analyze_cli.app, name="analyze")
app.add_typer(replay_cli.app, name="replay")
app.command("synth")(synth)


def main() -> None:
    """Console-script entry point."""
    app()
