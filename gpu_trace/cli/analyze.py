"""``gpu-trace analyze ...``: the characterization analyses, printed as tables or
written as CSV / JSON / Parquet. Each command is a thin wrapper over a function in
:mod:`gpu_trace.analyses` (usable from Python as LazyFrame -> LazyFrame)."""

from __future__ import annotations

import inspect
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import polars as pl
import typer

from gpu_trace import plugins
from gpu_trace.analyses import energy as en
from gpu_trace.analyses import failures as fail
from gpu_trace.analyses import jobs as jb
from gpu_trace.analyses import occupancy as occ
from gpu_trace.analyses import power as pwr
from gpu_trace.analyses import provisioning as prov
from gpu_trace.analyses import queueing as que
from gpu_trace.analyses import sharing as shr
from gpu_trace.analyses import users as usr
from gpu_trace.analyses import utilization as utl
from gpu_trace.analyses.inputs import Inputs
from gpu_trace.analyses.job_usage import read_jobs
from gpu_trace.analyses.summary import summary as summary_table
from gpu_trace.cli._boundary import domain_errors
from gpu_trace.cli.generated import add_command, command_names
from gpu_trace.cli.options import (
    JobsFileOpt,
    OldJobsFileOpt,
    ReadStoreOpt,
    check_sources,
    deprecated,
    number,
)
from gpu_trace.cli.output import Format, emit
from gpu_trace.errors import GpuTraceError
from gpu_trace.settings import resolve_store
from gpu_trace.values import check_number, choose, parse_duration, split_list

app = typer.Typer(help="Characterization analyses over the store.", no_args_is_help=True)

SourceOpt = Annotated[
    list[str] | None, typer.Option("--source", "-s", help="Only these sources (a,b or repeated).")
]
FormatOpt = Annotated[Format, typer.Option("--format", "-f", help="Output format.")]
OutputOpt = Annotated[Path | None, typer.Option("--output", "-o", help="Write to this file.")]
MaxRowsOpt = Annotated[
    int, typer.Option("--max-rows", callback=number(ge=0), help="Rows shown as a table (0 = all).")
]


def _sources(store: Path | None, source: list[str] | None) -> list[str] | None:
    """``--source`` as a list (a,b or repeated), each checked against the store."""
    return check_sources(resolve_store(store), split_list(source)) or None


def _inputs(store: Path | None, source: list[str] | None) -> Inputs:
    wanted = _sources(store, source)
    inputs = Inputs.from_store(resolve_store(store), wanted)
    if inputs.jobs.select(pl.len()).collect().item() == 0 and wanted:
        raise GpuTraceError(f"no jobs in the store for source(s) {', '.join(wanted)}")
    return inputs


def _run(
    frame: pl.LazyFrame | pl.DataFrame, fmt: Format, output: Path | None, max_rows: int
) -> None:
    emit(frame.lazy().collect(), fmt, output, max_rows)


@app.command()
@domain_errors
def summary(
    store: ReadStoreOpt = None,
    source: SourceOpt = None,
    by_dataset: Annotated[bool, typer.Option(help="One row per dataset, not per cluster.")] = False,
    fmt: FormatOpt = Format.table,
    output: OutputOpt = None,
    max_rows: MaxRowsOpt = 100,
) -> None:
    """Cross-trace summary (Helios/Acme format): counts, run and queue times, GPUs per job,
    status rates, GPU time by status."""
    inp = _inputs(store, source)
    by = ("source", "dataset") if by_dataset else ("source", "cluster")
    _run(summary_table(inp.jobs, by=by), fmt, output, max_rows)


class View(StrEnum):
    series = "series"
    diurnal = "diurnal"
    monthly = "monthly"
    measured = "measured"


@app.command()
@domain_errors
def utilization(
    store: ReadStoreOpt = None,
    source: SourceOpt = None,
    freq: Annotated[str, typer.Option(help="Bin width: 30s, 1min, 10min, 1h, 1d.")] = "1h",
    by: Annotated[str, typer.Option(help="cluster, vc or gpu_type.")] = "cluster",
    view: Annotated[
        View,
        typer.Option(
            help="series (allocation per bin), diurnal (weekday x hour profile), monthly, "
            "or measured (device activity from gpu_samples)."
        ),
    ] = View.series,
    fmt: FormatOpt = Format.table,
    output: OutputOpt = None,
    max_rows: MaxRowsOpt = 100,
) -> None:
    """GPU allocation over time (allocated / installed GPUs) or measured utilization."""
    inp = _inputs(store, source)
    choose("--by value", by, occ.OCCUPANCY_BY)
    if view is View.measured:
        _run(utl.sample_distribution(inp.gpu_samples), fmt, output, max_rows)
        return
    try:
        series = occ.occupancy(inp.jobs, inp.capacity, inp.machines, freq=freq, by=by)
    except ValueError as exc:
        raise GpuTraceError(str(exc)) from None
    if view is View.diurnal:
        series = occ.profiles(series, inp.tz)
    elif view is View.monthly:
        series = occ.monthly(series)
    _run(series, fmt, output, max_rows)


@app.command()
@domain_errors
def queueing(
    store: ReadStoreOpt = None,
    source: SourceOpt = None,
    by: Annotated[str, typer.Option(help="gpus, vc, gpu_type or hour.")] = "gpus",
    requeue: Annotated[bool, typer.Option(help="Per-attempt waits (Philly requeue gaps).")] = False,
    fmt: FormatOpt = Format.table,
    output: OutputOpt = None,
    max_rows: MaxRowsOpt = 100,
) -> None:
    """Queueing delay of GPU jobs by requested GPUs, VC, GPU type or hour of submission."""
    inp = _inputs(store, source)
    choose("--by value", by, que.BY_CHOICES)
    if requeue:
        gaps = que.requeue_gaps(inp.jobs, inp.placements)
        frame = gaps.group_by("source", "cluster", "vc", "kind").agg(
            pl.len().alias("waits"),
            pl.col("wait_s").mean().alias("mean_s"),
            pl.col("wait_s").median().alias("median_s"),
        )
        _run(frame.sort("source", "cluster", "vc", "kind", nulls_last=True), fmt, output, max_rows)
        return
    try:
        frame = que.queue_by(inp.jobs, by, tz_by_source=inp.tz)
    except ValueError as exc:
        raise GpuTraceError(str(exc)) from None
    _run(frame, fmt, output, max_rows)


@app.command()
@domain_errors
def failures(
    store: ReadStoreOpt = None,
    source: SourceOpt = None,
    by: Annotated[str, typer.Option(help="status, cause, size (= gpus), user or vc.")] = "status",
    lost: Annotated[bool, typer.Option(help="GPU hours lost to failed/cancelled jobs.")] = False,
    mtbf: Annotated[
        bool, typer.Option(help="Node-attributed failures, MTBF per node-hour and GPU-hour.")
    ] = False,
    fmt: FormatOpt = Format.table,
    output: OutputOpt = None,
    max_rows: MaxRowsOpt = 100,
) -> None:
    """Final-status mix of jobs and GPU time; with --lost, GPU time lost per group;
    --by cause: lost GPU hours by cause (status, XID / ECC / lost-GPU events, retries);
    --mtbf: failure rates and MTBF (definitions: docs/metrics.md)."""
    choose("--by value", by, ("cause", *fail.BY_CHOICES))
    inp = _inputs(store, source)
    if mtbf:
        _run(fail.mtbf(inp.jobs, inp.events, inp.gpu_samples), fmt, output, max_rows)
        return
    if by == "cause":
        _run(fail.by_cause(inp.jobs, inp.placements, inp.events), fmt, output, max_rows)
        return
    frame = fail.lost_gpu_time(inp.jobs, by) if lost else fail.status_mix(inp.jobs, by)
    _run(frame, fmt, output, max_rows)


class EnergyBy(StrEnum):
    job = "job"
    user = "user"
    vc = "vc"
    gpu = "gpu"


@app.command()
@domain_errors
def energy(
    store: ReadStoreOpt = None,
    source: SourceOpt = None,
    by: Annotated[
        EnergyBy,
        typer.Option(help="job, user, vc, or gpu (each sampled device, no jobs needed)."),
    ] = EnergyBy.job,
    power: Annotated[
        Path | None,
        typer.Option("--power", help="TOML power table overriding the built-in one."),
    ] = None,
    jobs_file: JobsFileOpt = None,
    jobs_old: OldJobsFileOpt = None,
    max_gap_text: Annotated[
        str | None,
        typer.Option(
            "--max-gap",
            help="Gap between power readings (90s, 5m; bare number: seconds) above which "
            "they are not bridged (default: 3 x each GPU's median interval).",
            show_default=False,
        ),
    ] = None,
    fmt: FormatOpt = Format.table,
    output: OutputOpt = None,
    max_rows: MaxRowsOpt = 100,
) -> None:
    """Energy (kWh) per job / user / VC: integrated power_w telemetry over the GPUs and
    times each job held (basis telemetry), else the power model (docs/energy.md)."""
    from gpu_trace.store.catalog import connect  # DuckDB: only when the command runs

    jobs_file = deprecated("--jobs FILE", "--jobs-file FILE", jobs_old, jobs_file)
    max_gap = None
    if max_gap_text is not None:
        max_gap = check_number(parse_duration(max_gap_text, "--max-gap"), "--max-gap", gt=0)
    model = pwr.load(power)
    root = resolve_store(store)
    con = connect(root)
    if by is EnergyBy.gpu:
        _run(en.device_energy(con, max_gap), fmt, output, max_rows)
        return
    inp = Inputs.from_store(root, _sources(store, source))
    jobs = inp.jobs.head(0) if jobs_file is not None else inp.jobs
    if jobs_file is not None or source:
        held = (
            read_jobs(jobs_file).with_columns(
                pl.col("gpu_indices").list.len().cast(pl.Float64).alias("gpu_count")
            )
            if jobs_file is not None
            else inp.placements.collect()
        )
        con.register("_placements", held.to_arrow())
        con.execute("CREATE OR REPLACE VIEW placements AS SELECT * FROM _placements")
    table = en.per_job_energy(jobs, con, model, max_gap)
    _run(table if by is EnergyBy.job else en.energy_by(table, by.value), fmt, output, max_rows)


class JobsView(StrEnum):
    quantiles = "quantiles"
    cdf = "cdf"
    sizes = "sizes"


@app.command()
@domain_errors
def jobs(
    store: ReadStoreOpt = None,
    source: SourceOpt = None,
    view: Annotated[
        JobsView,
        typer.Option(help="quantiles of run time, cdf at 2^i s, or sizes (job vs GPU-time share)."),
    ] = JobsView.quantiles,
    by: Annotated[
        str, typer.Option(help="Split durations by job_class (GPU/CPU), size or gpu_type.")
    ] = "job_class",
    fmt: FormatOpt = Format.table,
    output: OutputOpt = None,
    max_rows: MaxRowsOpt = 100,
) -> None:
    """Job durations (GPU vs CPU jobs, by size or GPU type) and sizes."""
    keys = {"job_class": "job_class", "size": "size_bucket", "gpu_type": "gpu_type"}
    choose("--by value", by, keys)
    inp = _inputs(store, source)
    group = ("source", "cluster", keys[by])
    if view is JobsView.sizes:
        frame = jb.size_shares(inp.jobs)
    elif view is JobsView.cdf:
        frame = jb.duration_cdf(inp.jobs, by=group)
    else:
        frame = jb.duration_quantiles(inp.jobs, by=group)
    _run(frame, fmt, output, max_rows)


@app.command()
@domain_errors
def users(
    store: ReadStoreOpt = None,
    source: SourceOpt = None,
    per_user: Annotated[bool, typer.Option("--per-user", help="One row per user instead.")] = False,
    value: Annotated[str, typer.Option(help="gpu_hours or gpu_queue_hours.")] = "gpu_hours",
    fmt: FormatOpt = Format.table,
    output: OutputOpt = None,
    max_rows: MaxRowsOpt = 100,
) -> None:
    """Concentration of GPU time (or queueing) across users: top-k shares and Gini."""
    choose("--value", value, ("gpu_hours", "gpu_queue_hours"))
    inp = _inputs(store, source)
    table = usr.per_user(inp.jobs)
    _run(table if per_user else usr.concentration(table, value), fmt, output, max_rows)


@app.command()
@domain_errors
def sharing(
    store: ReadStoreOpt = None,
    source: SourceOpt = None,
    view: Annotated[
        str,
        typer.Option(
            help="requests (mix), shares (fractional histogram), constraints, qos, inventory."
        ),
    ] = "requests",
    fmt: FormatOpt = Format.table,
    output: OutputOpt = None,
    max_rows: MaxRowsOpt = 100,
) -> None:
    """GPU sharing: request mix, fractional shares, GPU-type constraints, QoS/phase mix,
    machine inventory."""
    inp = _inputs(store, source)
    views = {
        "requests": lambda: shr.request_mix(inp.jobs),
        "shares": lambda: shr.share_histogram(inp.jobs),
        "constraints": lambda: shr.constraints(inp.jobs),
        "qos": lambda: shr.qos_phase_mix(inp.jobs),
        "inventory": lambda: shr.inventory(inp.machines),
    }
    choose("--view value", view, views)
    _run(views[view](), fmt, output, max_rows)


@app.command()
@domain_errors
def fragmentation(
    store: ReadStoreOpt = None,
    source: SourceOpt = None,
    inventory: Annotated[
        str | None,
        typer.Option(help="Machine inventory (dataset) to use; default: each source's largest."),
    ] = None,
    fmt: FormatOpt = Format.table,
    output: OutputOpt = None,
    max_rows: MaxRowsOpt = 100,
) -> None:
    """Expected unallocatable GPUs on an empty cluster given the request mix (FGD measure),
    per source (its own inventory and its own jobs; `source` and `inventory` columns)."""
    inp = _inputs(store, source)
    table = shr.fragmentation_per_source(inp.jobs, inp.machines, inventory)
    if table.height == 0:
        what = f"inventory {inventory!r}" if inventory else "machine inventory"
        raise GpuTraceError(f"no {what} with GPUs in the store")
    _run(table, fmt, output, max_rows)


@app.command()
@domain_errors
def provisioning(
    store: ReadStoreOpt = None,
    source: SourceOpt = None,
    per_task: Annotated[bool, typer.Option("--per-task", help="One row per task instead.")] = False,
    fmt: FormatOpt = Format.table,
    output: OutputOpt = None,
    max_rows: MaxRowsOpt = 100,
) -> None:
    """Requested vs used CPU, GPU and memory per task (PAI sensor data): share of tasks
    over- and under-provisioned."""
    inp = _inputs(store, source)
    rv = prov.requested_vs_used(inp.tasks, inp.usage)
    _run(rv if per_task else prov.over_provisioning(rv), fmt, output, max_rows)


@app.command("per-job")
@domain_errors
def per_job(
    store: ReadStoreOpt = None,
    metric: Annotated[str, typer.Option(help="gpu_samples metric.")] = "gpu_util_pct",
    fmt: FormatOpt = Format.table,
    output: OutputOpt = None,
    max_rows: MaxRowsOpt = 100,
) -> None:
    """Each job's mean / p50 / p95 of a telemetry metric over the GPUs it held."""
    from gpu_trace.store.catalog import connect  # DuckDB: only when the command runs

    _run(utl.per_job(connect(resolve_store(store)), metric), fmt, output, max_rows)


def _generate() -> None:
    """An ``analyze NAME`` command per declared analysis without a hand-written one:
    ``--store``, ``--source``, the analysis' options, then the output options."""
    kw = inspect.Parameter.KEYWORD_ONLY
    head = [
        inspect.Parameter("store", kw, default=None, annotation=ReadStoreOpt),
        inspect.Parameter("source", kw, default=None, annotation=SourceOpt),
    ]
    tail = [
        inspect.Parameter("fmt", kw, default=Format.table, annotation=FormatOpt),
        inspect.Parameter("output", kw, default=None, annotation=OutputOpt),
        inspect.Parameter("max_rows", kw, default=100, annotation=MaxRowsOpt),
    ]
    written = command_names(app)
    for plugin in plugins.analyses():
        if plugin.name in written:
            continue

        def body(
            given: dict[str, Any], options: Any, plugin: plugins.AnalysisPlugin = plugin
        ) -> None:
            frame = plugin.run(_inputs(given["store"], given["source"]), options)
            _run(frame, given["fmt"], given["output"], given["max_rows"])

        add_command(app, plugin.name, plugin.help, head, plugin.options, body, after=tail)


_generate()
