"""``gpu-trace ingest <source> PATH``: raw trace files into the store.

One command per declared loader (:mod:`gpu_trace.plugins`), generated from its
declaration: PATH, ``--store`` and the loader's options. Loaders whose options need parsing beyond a
field (several paths, durations, comma lists, checked names) keep a hand-written
command here, which wins over the generated one."""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from gpu_trace import plugins
from gpu_trace.cli._boundary import detail, domain_errors, err
from gpu_trace.cli.generated import add_command, command_names
from gpu_trace.cli.options import StoreOpt, number, seconds
from gpu_trace.loaders import Batch, IngestReport, ingest
from gpu_trace.loaders import get as get_loader
from gpu_trace.settings import resolve_store
from gpu_trace.values import choose, split_list

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
            detail(f"{batch.file.path} -> {batch.table} (dataset {batch.dataset})")  # -v

        report = ingest(get_loader(source), path, root, on_batch=on_batch, **options)
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


HELIOS_CLUSTERS = ("venus", "earth", "saturn", "uranus", "all")


@app.command("helios")
@domain_errors
def ingest_helios(
    path: PathArg,
    store: StoreOpt = None,
    cluster: Annotated[
        str,
        typer.Option(
            help="Cluster to read: venus, earth, saturn, uranus or all (every one present).",
        ),
    ] = "all",
    tz: Annotated[
        str,
        typer.Option(
            "--tz",
            help="IANA zone of the naive timestamps (undocumented upstream; the datacenter "
            "is in China). Recorded in jobs.source_tz.",
        ),
    ] = "Asia/Shanghai",
) -> None:
    """SenseTime Helios: cluster_log.csv -> jobs, cluster_gpu_number.csv -> capacity.

    PATH: HeliosData folder (holding data/), data/, a cluster folder, one CSV or data.zip."""
    run_ingest(
        "helios", path, store, cluster=choose("Helios cluster", cluster, HELIOS_CLUSTERS), tz=tz
    )


@app.command("pai2020")
@domain_errors
def ingest_pai2020(
    path: PathArg,
    store: StoreOpt = None,
    tables: Annotated[
        list[str] | None,
        typer.Option(
            help="PAI tables to read (a,b or repeated): job, task, instance, sensor, "
            "group_tag, machine_spec, machine_metric, or all (every one present).",
            show_default="all",
        ),
    ] = None,
) -> None:
    """Alibaba PAI 2020: job/task/instance -> jobs, tasks, placements; group_tag -> job_tags
    (and jobs.vc); sensor, machine_metric -> usage; machine_spec -> machines, capacity.

    PATH: folder with the headerless pai_<table>.csv files (.header files beside them or
    in headers/), or one of those CSVs."""
    run_ingest("pai2020", path, store, tables=",".join(split_list(tables)) or "all")


TzOpt = Annotated[
    str,
    typer.Option(help="IANA zone of the tool's local timestamps (recorded as source_tz)."),
]
HostOpt = Annotated[
    str | None,
    typer.Option(help="Host name (default: the hostname field/label, else the file name)."),
]
StartOpt = Annotated[
    str | None,
    typer.Option(
        help="ISO-8601 time of the first tick for outputs without timestamps "
        "(default: the last tick is the file's mtime)."
    ),
]
IntervalOpt = Annotated[
    str,
    typer.Option(
        "--interval", help="Time between ticks (dmon -d / dcgmi -d): 1s, 500ms; bare: seconds."
    ),
]


@app.command("nvidia-smi")
@domain_errors
def ingest_nvidia_smi(
    path: PathArg,
    store: StoreOpt = None,
    tz: TzOpt = "UTC",
    host: HostOpt = None,
    query: Annotated[
        str | None,
        typer.Option(help="The --query-gpu field list, for CSV written with noheader."),
    ] = None,
    start: StartOpt = None,
    interval: IntervalOpt = "1s",
) -> None:
    """nvidia-smi --query-gpu / --query-compute-apps CSV, dmon and pmon -> gpu_samples,
    events, gpu_processes."""
    run_ingest(
        "nvidia-smi",
        path,
        store,
        tz=tz,
        host=host,
        query=query,
        start=start,
        interval_s=seconds(interval, "--interval"),
    )


@app.command("dcgmi")
@domain_errors
def ingest_dcgmi(
    path: PathArg,
    store: StoreOpt = None,
    host: HostOpt = None,
    start: StartOpt = None,
    interval: IntervalOpt = "1s",
) -> None:
    """`dcgmi dmon` text -> gpu_samples (XID/ECC -> events)."""
    run_ingest(
        "dcgmi", path, store, host=host, start=start, interval_s=seconds(interval, "--interval")
    )


PHILLY_BASES = ("machine_list", "inferred_jobs", "inferred_util")


@app.command("philly")
@domain_errors
def ingest_philly(
    path: PathArg,
    store: StoreOpt = None,
    capacity: Annotated[
        list[str] | None,
        typer.Option(
            "--capacity",
            help="Inventory to write a capacity row for (a,b or repeated): machine_list, "
            "inferred_jobs, inferred_util. Default: all three. Analyses should use "
            "inferred_util: the shipped machine list is wrong (philly-traces#8).",
        ),
    ] = None,
) -> None:
    """Microsoft Philly: cluster_job_log -> jobs, placements; cluster_machine_list and
    inferred inventories -> machines, capacity; cluster_{gpu,cpu,mem}_util -> samples.

    PATH: the unpacked trace-data/ folder (or a folder holding it, or one of its files)."""
    bases = [choose("--capacity value", c, PHILLY_BASES) for c in split_list(capacity)]
    run_ingest("philly", path, store, capacity=tuple(bases or PHILLY_BASES))


@app.command("gavel")
@domain_errors
def ingest_gavel(
    path: PathArg,
    store: StoreOpt = None,
    step_s: Annotated[
        float | None,
        typer.Option(
            "--step-s",
            callback=number(gt=0),
            help="Seconds per training step (Gavel counts work in steps).",
        ),
    ] = None,
) -> None:
    """Gavel .trace files (7 or 10 tab-separated fields) -> jobs."""
    run_ingest("gavel", path, store, step_s=step_s)


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
