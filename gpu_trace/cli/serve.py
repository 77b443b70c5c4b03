"""``gpu-trace serve ...``: replay a serving trace on an emulated inference cluster.

``run``, ``compare`` and ``plan`` take the fields of
:class:`~gpu_trace.serve.config.ServeConfig` as flags, generated from its declarations
(:mod:`gpu_trace.cli.generated`, as ``replay``'s are from ``ReplayConfig``), so a field
added there is a flag here with nothing else to change. A summary table goes to stdout
(``--json`` / ``--format json``: every summary column), sanity notes to stderr as
``note:`` lines that ``--quiet`` does not hide.
"""

from __future__ import annotations

import importlib.util
import inspect
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any

import polars as pl
import typer

from gpu_trace.cli._boundary import alert, domain_errors, info
from gpu_trace.cli.generated import option_parameters, option_values
from gpu_trace.cli.options import (
    RayAddressOpt,
    ReadStoreOpt,
    SweepOutOpt,
    SweepResumeOpt,
    SweepWorkersOpt,
    number,
)
from gpu_trace.cli.output import Format, FormatOpt, emit
from gpu_trace.errors import GpuTraceError, UsageError
from gpu_trace.plugins import option_specs
from gpu_trace.serve.config import ServeConfig, parse_disaggregate
from gpu_trace.settings import resolve_store
from gpu_trace.values import split_list

app = typer.Typer(
    help="Replay a serving trace on an emulated LLM inference cluster: latency, SLO "
    "attainment, goodput, GPUs, energy and cost.",
    no_args_is_help=True,
)

SUMMARY_COLUMNS = [
    "run_id",
    "router",
    "batching",
    "disaggregate",
    "tp",
    "replicas",
    "gpus",
    "requests",
    "requests_dropped",
    "ttft_p50_s",
    "ttft_p90_s",
    "ttft_p99_s",
    "tpot_p50_ms",
    "tpot_p90_ms",
    "e2e_p90_s",
    "slo_attainment_ratio",
    "goodput_rps",
    "tokens_per_second",
    "prefix_hit_ratio",
    "preemptions",
    "gpu_seconds",
    "energy_kwh",
    "cost_per_mtok_usd",
]
"""The table ``run`` and ``compare`` print (``--json``: every ``serve_runs`` column).
TPOT in milliseconds here: tens of milliseconds would read ``0.0 s`` as a duration."""

PLAN_COLUMNS = [
    "tp",
    "replicas",
    "gpus",
    "slo_attainment_ratio",
    "meets",
    "goodput_rps",
    "ttft_p90_s",
    "tpot_p90_ms",
    "requests_dropped",
]
"""The table of tried points ``plan`` prints."""

OutOpt = Annotated[
    Path | None,
    typer.Option("--out", help="Run directory: config.json and the three tables as Parquet."),
]
JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print JSON (every summary column): --format json.")
]

EventsOpt = Annotated[
    Path | None,
    typer.Option(
        "--events",
        help="Write the run as a Chrome trace-event JSON file (open it in ui.perfetto.dev "
        "or chrome://tracing): every iteration on each replica, each request's queue, "
        "prefill, decode and KV transfer, the replicas' counters. Several runs (compare): "
        "one file each, FILE's stem + run id.",
        show_default=False,
    ),
]

_FIELDS = [s.name for s in option_specs(ServeConfig)]


def serve_command(
    name: str, exclude: Sequence[str] = ()
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Register ``serve NAME``: the function's own parameters, then every
    :class:`ServeConfig` field not in ``exclude`` (generated from its declaration). The
    function gets its own parameters and ``fields``: the config fields given (a
    ``parse`` field left out is missing, so the dataclass default holds).
    """
    names = [n for n in _FIELDS if n not in exclude]

    def register(fn: Callable[..., None]) -> Callable[..., None]:
        own = {
            k: p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
            for k, p in inspect.signature(fn, eval_str=True).parameters.items()
            if k != "fields"
        }
        generated = option_parameters(ServeConfig, names)

        def command(**values: Any) -> None:
            fields = option_values(ServeConfig, values, names)
            fn(fields=fields, **{k: values[k] for k in own})

        command.__signature__ = inspect.Signature([*generated, *own.values()])  # type: ignore[attr-defined]
        command.__doc__ = fn.__doc__
        command.__name__ = fn.__name__
        app.command(name)(domain_errors(command))
        return fn

    return register


def _fmt(fmt: Format, as_json: bool) -> Format:
    return Format.json if as_json else fmt


def _config(fields: dict[str, Any], **override: Any) -> ServeConfig:
    config = ServeConfig(**{**fields, **override})
    if config.run_id is not None:
        from gpu_trace.store.parquet import slug

        if slug(config.run_id) != config.run_id:
            msg = f"--run-id {config.run_id!r}: use lower-case letters, digits, '_', '.', '-'"
            raise UsageError(msg)
    return config


def _notes(runs: list[Any]) -> None:
    """Every run's sanity notes on stderr, never hidden by --quiet."""
    for run in runs:
        for text in run.notes:
            alert.print(f"note: {run.run_id}: {text}", markup=False, highlight=False)


def _table(rows: pl.DataFrame) -> pl.DataFrame:
    """The summary table's columns of ``serve_runs`` rows (TPOT in ms)."""
    ms = [
        (pl.col(c.replace("_ms", "_s")) * 1000).alias(c)
        for c in SUMMARY_COLUMNS
        if c.endswith("_ms")
    ]
    return rows.with_columns(ms).select(SUMMARY_COLUMNS)


def _emit_runs(runs: list[Any], fmt: Format) -> None:
    rows = pl.concat([r.row() for r in runs], how="diagonal_relaxed")
    if fmt is Format.table:
        emit(_table(rows), fmt)
    else:
        emit(rows.drop("config_json", "created_at"), fmt)
    _notes(runs)


@serve_command("run")
def run_cmd(
    fields: dict[str, Any],
    store: ReadStoreOpt = None,
    out: OutOpt = None,
    fmt: FormatOpt = Format.table,
    as_json: JsonOpt = False,
    events: EventsOpt = None,
) -> None:
    """Replay one source on one layout; the run goes to the store (serve_runs,
    serve_requests, serve_timeseries) and --out.
    """
    from gpu_trace.serve import runs

    config = _config(fields)
    done = runs.run_all(
        resolve_store(store),
        [config],
        out=out,
        events=None if events is None else (lambda _run_id: events),
    )
    _emit_runs(done, _fmt(fmt, as_json))


def _list(values: list[str] | None, default: str, flag: str) -> list[str]:
    items = split_list(values) or [default]
    if len(set(items)) != len(items):
        msg = f"{flag}: a value is given twice"
        raise UsageError(msg)
    return items


@serve_command("compare", exclude=("router", "batching", "disaggregate", "run_id"))
def compare(
    fields: dict[str, Any],
    routers: Annotated[
        list[str] | None,
        typer.Option(help="Routers (a,b or repeated).", show_default="round-robin"),
    ] = None,
    batchings: Annotated[
        list[str] | None,
        typer.Option(help="Replica schedulers (a,b or repeated).", show_default="vllm"),
    ] = None,
    disaggregate: Annotated[
        list[str] | None,
        typer.Option(
            "--disaggregate",
            help="Prefill:decode pools to compare (0,2:6 or repeated); 0 = not split.",
            show_default="0",
        ),
    ] = None,
    store: ReadStoreOpt = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="Run directories: OUT/<run id> per run.")
    ] = None,
    fmt: FormatOpt = Format.table,
    as_json: JsonOpt = False,
    events: EventsOpt = None,
) -> None:
    """Replay one source under every router x replica scheduler x disaggregation, one
    run each (the same requests), all published in one store commit; one summary row
    per run.
    """
    from gpu_trace.serve import runs

    splits = _list(disaggregate, "0", "--disaggregate")
    for text in splits:
        parse_disaggregate(text)
    configs = [
        _config(fields, router=r, batching=b, disaggregate=d)
        for r in _list(routers, "round-robin", "--routers")
        for b in _list(batchings, "vllm", "--batchings")
        for d in splits
    ]
    done = runs.run_all(
        resolve_store(store),
        configs,
        out=out,
        per_run_dirs=True,
        on_run=lambda r: info(f"{r.run_id}: done"),
        events=None if events is None else _per_run(events),
    )
    _emit_runs(done, _fmt(fmt, as_json))


def _per_run(base: Path) -> Callable[[str], Path]:
    """``--events`` of one run of a comparison: FILE's stem + run id (as ``replay
    compare`` names them); FILE itself is checked first, as ``replay compare`` does (a
    folder is refused, not turned into ``FOLDER.<run id>.json`` beside it).
    """
    from gpu_trace.replay.events import check_target, target

    check_target(base)
    return lambda run_id: target(base, run_id)


def _ms(seconds: Any) -> float | None:
    return None if seconds is None else float(seconds) * 1000


def _tps(values: list[str] | None) -> list[int]:
    out = []
    for text in split_list(values) or ["1"]:
        try:
            tp = int(text)
        except ValueError:
            tp = 0
        if tp < 1:
            msg = f"--tp {text!r} is not a whole number >= 1"
            raise UsageError(msg)
        out.append(tp)
    return sorted(set(out))


@serve_command("plan", exclude=("tp", "replicas", "disaggregate", "autoscale", "run_id"))
def plan_cmd(
    fields: dict[str, Any],
    attainment: Annotated[
        float,
        typer.Option(
            callback=number(gt=0, le=1),
            help="SLO attainment to reach: share of requests meeting --slo.",
        ),
    ] = 0.9,
    tp: Annotated[
        list[str] | None,
        typer.Option(
            "--tp", help="Tensor-parallel widths to search (1,2,4 or repeated).", show_default="1"
        ),
    ] = None,
    max_replicas: Annotated[
        int, typer.Option(callback=number(ge=1), help="Most replicas tried per width.")
    ] = 64,
    store: ReadStoreOpt = None,
    fmt: FormatOpt = Format.table,
    as_json: JsonOpt = False,
) -> None:
    """The fewest GPUs meeting --attainment of --slo: a search on replicas (doubling,
    then bisection; attainment does not fall as replicas are added) for each --tp. Prints
    every point tried; nothing is written to the store (run the answer with serve run).
    """
    from gpu_trace.serve import plan

    base = _config(fields)
    tried = plan.search(
        resolve_store(store),
        base,
        _tps(tp),
        attainment,
        max_replicas,
        on_point=lambda p: info(
            f"tp {p.tp} x {p.replicas} replicas: attainment {p.attainment:.3f}"
        ),
    )
    frame = pl.DataFrame(
        [
            {
                "tp": p.tp,
                "replicas": p.replicas,
                "gpus": p.gpus,
                "meets": p.attainment >= attainment,
                **{k: p.summary.get(k) for k in PLAN_COLUMNS if k in p.summary},
                "tpot_p90_ms": _ms(p.summary.get("tpot_p90_s")),
            }
            for p in tried
        ],
        infer_schema_length=None,
    ).select(PLAN_COLUMNS)
    emit(frame, _fmt(fmt, as_json))
    chosen = plan.best(tried, attainment)
    if chosen is None:
        alert.print(
            f"note: no layout tried meets attainment {attainment:g} with up to "
            f"{max_replicas} replicas per width",
            markup=False,
        )
    else:
        info(
            f"fewest GPUs: {chosen.gpus} (tp {chosen.tp} x {chosen.replicas} replicas), "
            f"attainment {chosen.attainment:.3f}"
        )


def _grid_doc(
    source: str | None, grid: list[str] | None, fixed: list[str] | None
) -> dict[str, Any] | None:
    """The flags as a sweep-file document (the same parser and checks); None if none."""
    doc: dict[str, dict[str, str]] = {"grid": {}, "fixed": {}}
    for items, section, flag in ((grid, "grid", "--grid"), (fixed, "fixed", "--set")):
        for item in items or []:
            key, sep, value = item.partition("=")
            key = key.strip()
            if not sep or not key:
                msg = f"{flag} {item!r} is not FIELD=VALUES"
                raise UsageError(msg)
            if key in doc["grid"] or key in doc["fixed"]:
                msg = f"{flag} {key} is given twice"
                raise UsageError(msg)
            doc[section][key] = value
    if source is None and not doc["grid"] and not doc["fixed"]:
        return None
    return {"source": source, **doc}


@app.command("sweep")
@domain_errors
def sweep_cmd(
    out: SweepOutOpt,
    sweep_file: Annotated[
        Path | None,
        typer.Argument(help="Sweep file (TOML: source, [fixed] and [grid] over serve fields)."),
    ] = None,
    source: Annotated[str | None, typer.Option("--source", help="Source.")] = None,
    grid: Annotated[
        list[str] | None,
        typer.Option(
            "--grid",
            help="Sweep a serve field: FIELD=VALUES (router=round-robin,least-tokens; "
            "replicas=4-8; repeatable).",
        ),
    ] = None,
    fixed: Annotated[
        list[str] | None,
        typer.Option("--set", help="Hold a serve field: FIELD=VALUE (repeatable)."),
    ] = None,
    address: RayAddressOpt = None,
    workers: SweepWorkersOpt = None,
    resume: SweepResumeOpt = False,
    store: ReadStoreOpt = None,
    fmt: FormatOpt = Format.table,
    as_json: JsonOpt = False,
) -> None:
    """Replay every point of a grid over the serve fields with replay sweep's grid,
    folder and backends: in parallel on Ray, or in process with --workers 1; each run
    goes to the store as it finishes, --resume skips the finished ones.
    """
    from gpu_trace.serve import sweep as ssw

    doc = _grid_doc(source, grid, fixed)
    if sweep_file is not None and doc is not None:
        msg = "give a sweep file or grid flags (--source, --grid, --set), not both"
        raise UsageError(msg)
    if sweep_file is not None:
        spec = ssw.load(sweep_file)
    elif doc is not None:
        spec = ssw.parse(doc, "command line")
    elif resume:
        spec = ssw.spec_from_manifest(out)
    else:
        msg = "give a sweep file, grid flags (--source, --grid), or --resume"
        raise UsageError(msg)
    if workers is None and address is None and importlib.util.find_spec("ray") is None:
        alert.print(
            "Ray is not installed (pip install 'gpu-trace[ray]'): running in process",
            markup=False,
        )
        workers = 1
    outcome = ssw.run_sweep(
        resolve_store(store),
        spec,
        out,
        workers=workers,
        address=address,
        resume=resume,
        on_run=lambda run_id, status, done, total: info(f"{done}/{total} {run_id}: {status}"),
    )
    if outcome.rows:
        rows = pl.concat(outcome.rows, how="diagonal_relaxed")
        fmt = _fmt(fmt, as_json)
        if fmt is Format.table:
            emit(_table(rows), fmt)
        else:
            emit(rows.drop("config_json", "created_at"), fmt)
    info(outcome.line())
    if outcome.failed:
        run_id, why = outcome.failed[0]
        msg = (
            f"{len(outcome.failed)} of {outcome.total} runs failed (first: {run_id}: {why}); "
            "fix the cause and rerun with --resume"
        )
        raise GpuTraceError(msg)


@app.command("models")
@domain_errors
def models(fmt: FormatOpt = Format.table, as_json: JsonOpt = False) -> None:
    """List the GPU table and the model table the latency models read (sources cited in
    the tables' files).
    """
    from gpu_trace.serve.runs import part

    hardware = part("hardware")

    fmt = _fmt(fmt, as_json)
    gpus = pl.DataFrame(hardware.gpu_rows(), infer_schema_length=None)
    models_ = pl.DataFrame(hardware.model_rows(), infer_schema_length=None)
    if fmt is Format.json:
        emit(
            pl.concat(
                [
                    gpus.select(pl.lit("gpu").alias("table"), pl.all()),
                    models_.select(pl.lit("model").alias("table"), pl.all()),
                ],
                how="diagonal_relaxed",
            ),
            fmt,
        )
        return
    # GB/s columns end in "_s": declared, so the table does not show them as durations
    rates = {c: "GB/s" for c in gpus.columns if c.endswith("_gb_s")}
    emit(gpus, fmt, units=rates)
    emit(models_, fmt)


@app.command("profile")
@domain_errors
def profile(
    model: Annotated[str, typer.Option(help="Model (the model table).")] = "llama-2-7b",
    tp: Annotated[int, typer.Option(callback=number(ge=1), help="Tensor-parallel width.")] = 1,
    out: Annotated[
        Path, typer.Option("--out", help="Profile directory (vidur's CSV layout).")
    ] = Path("profile"),
) -> None:
    """Measure a profile table on this machine's GPU with PyTorch on random weights
    (for --latency profile). Needs a CUDA GPU; refused without one.
    """
    if not _cuda():
        msg = (
            "serve profile needs a CUDA GPU and PyTorch; none is usable here "
            "(use --latency roofline, or a profile measured elsewhere)"
        )
        raise GpuTraceError(msg)
    from gpu_trace.serve.runs import part

    spec = part("hardware").model(model)
    written = part("measure").measure_profile(spec, out, tp=tp)
    info(f"profile written: {', '.join(str(p) for p in written)}")


def _cuda() -> bool:
    """Whether PyTorch is installed and sees a CUDA device."""
    try:
        import torch  # type: ignore[import-not-found]
    except ImportError:
        return False
    return bool(torch.cuda.is_available())
