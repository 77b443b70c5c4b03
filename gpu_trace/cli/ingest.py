"""``gpu-trace ingest <source> PATH``: raw trace files into the store.

One command per declared loader (:mod:`gpu_trace.plugins`), generated from its
declaration: PATH, ``--store`` and the loader's options. ``kubernetes`` (several paths)
and ``philly`` (a repeatable option) are written out by hand below."""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from gpu_trace import plugins
from gpu_trace.cli._boundary import domain_errors, err
from gpu_trace.cli.generated import add_command, command_names
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


@app.command("kubernetes")
@domain_errors
def ingest_kubernetes(
    paths: Annotated[
        list[Path],
        typer.Argument(
            help="kubectl get pods -A -o json / kubectl get nodes -o json output (a List or "
            "JSON lines; one file may hold both kinds)."
        ),
    ],
    store: StoreOpt = None,
    cluster: Annotated[
        str, typer.Option(help="Cluster name: the datasets' name (re-ingesting replaces it).")
    ] = "kubernetes",
    user_key: Annotated[
        list[str] | None,
        typer.Option(
            "--user-key",
            help="Pod label or annotation naming the user (repeatable, first found wins; "
            "default: user).",
        ),
    ] = None,
) -> None:
    """Kubernetes: pods -> placements and jobs (one per owner), nodes -> machines
    (capacity, and allocatable as <cluster>-allocatable)."""
    run_ingest(
        "kubernetes",
        paths[0],
        store,
        more=tuple(paths[1:]),
        cluster=cluster,
        user_keys=tuple(user_key or ("user",)),
    )


PHILLY_BASES = ("machine_list", "inferred_jobs", "inferred_util")


def _philly_bases(values: list[str] | None) -> list[str]:
    for value in values or []:
        if value not in PHILLY_BASES:
            raise typer.BadParameter(f"{value!r} is not one of {', '.join(PHILLY_BASES)}")
    return values or list(PHILLY_BASES)


@app.command("philly")
@domain_errors
def ingest_philly(
    path: PathArg,
    store: StoreOpt = None,
    capacity: Annotated[
        list[str] | None,
        typer.Option(
            "--capacity",
            callback=_philly_bases,
            help="Inventory to write a capacity row for (repeatable): machine_list, "
            "inferred_jobs, inferred_util. Default: all three. Analyses should use "
            "inferred_util: the shipped machine list is wrong (philly-traces#8).",
        ),
    ] = None,
) -> None:
    """Microsoft Philly: cluster_job_log -> jobs, placements; cluster_machine_list and
    inferred inventories -> machines, capacity; cluster_{gpu,cpu,mem}_util -> samples.

    PATH: the unpacked trace-data/ folder (or a folder holding it, or one of its files)."""
    run_ingest("philly", path, store, capacity=tuple(capacity or PHILLY_BASES))


def _generate() -> None:
    """Add an ``ingest NAME`` command for every declared loader without a hand-written one."""
    fixed = [
        inspect.Parameter("path", inspect.Parameter.KEYWORD_ONLY, annotation=PathArg),
        inspect.Parameter(
            "store", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=StoreOpt
        ),
    ]
    written = command_names(app)
    for plugin in plugins.loaders():
        if plugin.name in written:
            continue

        def body(
            given: dict[str, Any], options: Any, plugin: plugins.LoaderPlugin = plugin
        ) -> None:
            run_ingest(plugin.name, given["path"], given["store"], **plugin.loader_kwargs(options))

        path = fixed[0].replace(annotation=Annotated[Path, typer.Argument(help=plugin.path_help)])
        add_command(app, plugin.name, plugin.help, [path, fixed[1]], plugin.options, body)


_generate()
