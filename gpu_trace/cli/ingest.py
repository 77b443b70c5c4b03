"""``gpu-trace ingest <source> PATH``: raw trace files into the store."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from gpu_trace.cli._boundary import domain_errors, err
from gpu_trace.cli.options import StoreOpt
from gpu_trace.loaders import LOADERS, Batch, IngestReport, ingest
from gpu_trace.settings import resolve_store

app = typer.Typer(
    help="Read raw trace or telemetry files into the store (re-ingesting replaces).",
    no_args_is_help=True,
)

PathArg = Annotated[Path, typer.Argument(help="Folder or file with the raw input.")]


def run_ingest(source: str, path: Path, store: Path | None, **options: Any) -> IngestReport:
    """Run one loader with a progress display on stderr and print the reconciliation
    (rows read = written + quarantined) on stdout."""
    root = resolve_store(store)
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    ) as progress:
        task = progress.add_task(f"ingest {source}", total=None)

        def on_batch(batch: Batch) -> None:
            progress.update(task, description=f"{batch.file.path.name} -> {batch.table}")

        report = ingest(LOADERS[source], path, root, on_batch=on_batch, **options)
    print_report(report)
    return report


def print_report(report: IngestReport) -> None:
    header = ("file", "table", "dataset", "read", "written", "quarantined")
    rows = [
        (r.file, r.table, r.dataset, str(r.rows_read), str(r.rows_written), str(r.rows_quarantined))
        for r in report.lines
    ]
    read, written, quarantined = report.totals
    rows.append(("total", "", "", str(read), str(written), str(quarantined)))
    widths = [max(len(x[i]) for x in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        sys.stdout.write(
            "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() + "\n"
        )
    err.print(
        f"{report.source}: read {read} = written {written} + quarantined {quarantined}; "
        f"store {report.store}"
    )


@app.command("openb")
@domain_errors
def ingest_openb(
    path: PathArg,
    store: StoreOpt = None,
    variant: Annotated[
        str,
        typer.Option(help="Pod list to read from a folder: default, gpushare40, ... or all."),
    ] = "default",
) -> None:
    """Alibaba 2023 openb: pod lists -> jobs, node lists -> machines."""
    run_ingest("openb", path, store, variant=variant)
