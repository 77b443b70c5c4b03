"""``gpu-trace ingest <source> PATH``: raw trace files into the store.

One command per declared loader (:mod:`gpu_trace.plugins`), generated from its
declaration: PATH (or PATHS... for a loader that reads several files), ``--store`` and
the loader's options, durations, comma lists and checked names included (``option(parse=)``).
There are no hand-written ingest commands: adding a loader is adding its module.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import Any

import typer
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from gpu_trace import plugins
from gpu_trace.cli._boundary import detail, err
from gpu_trace.cli.generated import add_command, path_parameter
from gpu_trace.cli.options import StoreOpt
from gpu_trace.loaders import Batch, IngestReport, ingest
from gpu_trace.loaders import get as get_loader
from gpu_trace.settings import resolve_store

app = typer.Typer(
    help="Read raw trace or telemetry files into the store (re-ingesting replaces).",
    no_args_is_help=True,
)


def run_ingest(source: str, path: Path, store: Path | None, **options: Any) -> IngestReport:
    """Run one loader with a progress display on stderr and print the reconciliation
    (rows read = written + quarantined + merged) on stdout.
    """
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
            detail(f"{batch.file.path} -> {batch.table} (dataset {batch.dataset})")  # -v

        report = ingest(get_loader(source), path, root, on_batch=on_batch, **options)
    print_report(report)
    return report


def print_report(report: IngestReport) -> None:
    """The reconciliation table (one line per file and table, then the totals) on
    stdout, so scripts can read it, and the one-line summary on stderr.
    """
    header = ("file", "table", "dataset", "read", "written", "quarantined", "merged")
    rows = [
        (
            r.file,
            r.table,
            r.dataset,
            str(r.rows_read),
            str(r.rows_written),
            str(r.rows_quarantined),
            str(r.rows_merged),
        )
        for r in report.lines
    ]
    read, written, quarantined = report.totals
    merged = report.merged
    rows.append(("total", "", "", str(read), str(written), str(quarantined), str(merged)))
    widths = [max(len(x[i]) for x in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        sys.stdout.write(
            "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() + "\n"
        )
    err.print(
        f"{report.source}: read {read} = written {written} + quarantined {quarantined} "
        f"+ merged {merged}; "
        f"store {report.store}"
    )


def _generate() -> None:
    """Add an ``ingest NAME`` command for every declared loader, built-in or installed,
    in name order (so ``ingest --help`` lists them alphabetically).
    """
    store = inspect.Parameter(
        "store", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=StoreOpt
    )
    for plugin in sorted(plugins.loaders(), key=lambda p: p.name):

        def body(
            given: dict[str, Any], options: Any, plugin: plugins.LoaderPlugin = plugin
        ) -> None:
            kwargs = plugin.loader_kwargs(options)
            if plugin.many_paths:
                first, *more = given["paths"]
                run_ingest(plugin.name, first, given["store"], more=tuple(more), **kwargs)
            else:
                run_ingest(plugin.name, given["path"], given["store"], **kwargs)

        path = path_parameter(plugin.path_help, many=plugin.many_paths)
        add_command(app, plugin.name, plugin.help, [path, store], plugin.options, body)


_generate()
