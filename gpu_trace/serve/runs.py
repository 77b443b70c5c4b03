"""One serving replay run, end to end: read the window's requests from the store, build
the latency model, run the engine (:func:`gpu_trace.serve.engine.simulate`), score it
(:mod:`gpu_trace.serve.metrics`, :mod:`gpu_trace.serve.sanity`) and write it.

Writes go through the store's one writer, as the job replay's do
(:func:`gpu_trace.replay.simulate.stage_run`): the run's three tables are staged in a
:class:`~gpu_trace.store.parquet.StoreTransaction` and published as ONE generation, so
a reader sees all of a run (or of a comparison) or none of it, and an error half-way
leaves the previous generation as it was. Keys: source = the replayed source, dataset
= the run id.

The engine, the latency models and the hardware tables are imported when a run needs
them, so the command line (``--help``, usage errors) never loads the simulator.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from gpu_trace.errors import GpuTraceError, UsageError
from gpu_trace.replay import policy
from gpu_trace.serve import metrics, sanity
from gpu_trace.serve.autoscale import parse_autoscale
from gpu_trace.serve.config import ServeConfig, parse_disaggregate
from gpu_trace.serve.result import ServeResult
from gpu_trace.serve.workload import RequestSet, from_frames
from gpu_trace.store.parquet import StoreTransaction
from gpu_trace.store.scan import scan

TABLES = ("serve_runs", "serve_requests", "serve_timeseries")


@dataclass
class ServeRun:
    """A finished run: its config and id, the engine's result, the summary row and the
    sanity notes.
    """

    config: ServeConfig
    run_id: str
    result: ServeResult
    summary: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    trace_dataset: str = ""
    """The replayed dataset of the source."""
    engine: Any = None
    """The traced engine (``--events``) until its trace is written; None otherwise."""

    def row(self) -> pl.DataFrame:
        """The ``serve_runs`` row (without the store keys)."""
        c = self.config
        prefill, decode = parse_disaggregate(c.disaggregate)
        start = prefill + decode if prefill else _start_replicas(c)
        return pl.DataFrame(
            [
                {
                    "run_id": self.run_id,
                    "trace_dataset": self.trace_dataset,
                    "config_json": c.to_json(),
                    "model": c.model,
                    "gpu": c.gpu,
                    "tp": c.tp,
                    "replicas": start,
                    "replicas_max": max(start, self.result.replicas.height),
                    "batching": c.batching,
                    "router": c.router,
                    "latency_model": c.latency,
                    "disaggregate": c.disaggregate,
                    "gpus": start * c.tp,
                    **self.summary,
                    "notes": "\n".join(self.notes) or None,
                    "created_at": datetime.now(UTC),
                }
            ],
            infer_schema_length=None,
        )


def _start_replicas(config: ServeConfig) -> int:
    """Replicas serving at time 0: the autoscaler's ``min`` when it has one, else
    ``--replicas`` (/work/notes/serve_spec.md, Autoscaling).
    """
    scaling = parse_autoscale(config.autoscale, config.replicas)
    if scaling is not None:
        return scaling.min
    return config.replicas


# -- the workload ------------------------------------------------------------------------


def request_sources(store: Path) -> dict[str, list[str]]:
    """Source -> its datasets, for every source with rows in the store's ``requests``."""
    found = scan(store, "requests").select("source", "dataset").unique().collect()
    out: dict[str, list[str]] = {}
    for source, dataset in found.sort("source", "dataset").iter_rows():
        out.setdefault(source, []).append(dataset)
    return out


def _listing(have: dict[str, list[str]]) -> str:
    return "; ".join(f"{s} ({', '.join(d)})" for s, d in have.items()) or "none"


def check_source(store: Path, source: str, dataset: str | None) -> None:
    """A usage error (exit 2) naming the sources (and datasets) the store's requests
    hold when ``source`` / ``dataset`` is not among them.
    """
    have = request_sources(store)
    if not source:
        msg = f"give --source: the store's requests hold {_listing(have)}"
        raise UsageError(msg)
    if source not in have:
        msg = (
            f"the store {store} has no requests for source {source!r}; "
            f"sources with requests: {_listing(have)}"
        )
        raise UsageError(msg)
    if dataset is not None and dataset not in have[source]:
        msg = (
            f"source {source!r} has no dataset {dataset!r} in the store's requests; "
            f"it has: {', '.join(have[source])}"
        )
        raise UsageError(msg)


@dataclass(frozen=True)
class Window:
    """The requests a run replays and the window's rows it cannot (no token count)."""

    requests: RequestSet
    skipped: int = 0

    def notes(self) -> list[str]:
        """The note every run of this window carries about the rows it left out."""
        if not self.skipped:
            return []
        return [
            f"{self.skipped} requests of the window have no token counts: not replayed "
            f"(of {self.skipped + len(self.requests)})"
        ]


def load_requests(
    store: Path, source: str, dataset: str | None, start_s: float, duration_s: float | None
) -> Window:
    """The requests of the window ``[first arrival + start_s, + duration_s)`` of one
    source and dataset of the store's current generation, arrival times from the
    window's first request. The window is cut here, once: the engine replays the
    :class:`RequestSet` it is given. Without ``dataset`` the source must hold one:
    request ids and arrival clocks are per dataset, so two are not one workload.
    Requests without token counts (a diffusion trace's) are counted, not replayed; a
    window left empty is an error naming the trace's span.
    """
    from gpu_trace.store.generations import snapshot_root

    root = snapshot_root(store)  # both tables from one generation
    req = scan(root, "requests", [source])
    blk = scan(root, "request_blocks", [source])
    if dataset is None:
        have = request_sources(root).get(source, [])
        if len(have) > 1:
            msg = f"source {source!r} holds several datasets ({', '.join(have)}): give --dataset"
            raise UsageError(msg)
        dataset = have[0] if have else None
    if dataset is not None:
        req = req.filter(pl.col("dataset") == dataset)
        blk = blk.filter(pl.col("dataset") == dataset)
    cols = ["request_id", "arrival_time", "input_tokens", "output_tokens", "session_id"]
    req = req.select(cols)
    span = req.select(
        pl.col("arrival_time").min().alias("lo"), pl.col("arrival_time").max().alias("hi")
    )
    if start_s > 0 or duration_s is not None:
        first = pl.col("arrival_time").min()
        lo = first + pl.duration(microseconds=round(start_s * 1e6))
        keep = pl.col("arrival_time") >= lo
        if duration_s is not None:
            hi = lo + pl.duration(microseconds=round(duration_s * 1e6))
            keep = keep & (pl.col("arrival_time") < hi)
        req = req.filter(keep)
    frame = req.collect()
    usable = pl.col("input_tokens").is_not_null() & pl.col("output_tokens").is_not_null()
    kept = frame.filter(usable)
    if not kept.height:
        lo_t, hi_t = span.collect().row(0)
        trace = f"{(hi_t - lo_t).total_seconds():.0f} s" if lo_t is not None else "no requests"
        msg = (
            f"the window (--start {start_s:g} s, --duration "
            f"{'all' if duration_s is None else f'{duration_s:g} s'}) of {source}"
            f"{'/' + dataset if dataset else ''} holds no request with token counts "
            f"({frame.height} without; the trace spans {trace})"
        )
        raise GpuTraceError(msg)
    blocks = (
        blk.select("request_id", "position", "block_hash", "block_tokens")
        .join(kept.select("request_id").lazy(), on="request_id", how="semi")
        .collect()
    )
    requests = from_frames(kept, blocks, source=source, dataset=dataset or "")
    return Window(requests, frame.height - kept.height)


# -- the parts owned by the engine and the latency models --------------------------------


def part(name: str) -> Any:
    """``gpu_trace.serve.<name>``, imported when a run needs it (the engine, the
    latency models, the hardware tables, the energy helpers): the command line loads
    none of them for ``--help`` or a usage error.
    """
    return importlib.import_module(f"gpu_trace.serve.{name}")


def check_names(config: ServeConfig) -> None:
    """Usage errors (exit 2, "did you mean") for an unknown replica scheduler, router or
    latency model, before anything runs.
    """
    policy.get("batching", config.batching)
    policy.get("router", config.router)
    policy.get("latency", config.latency)


def build_latency(config: ServeConfig) -> Any:
    """The config's latency model for its model, GPU kind and tensor-parallel width
    (:func:`gpu_trace.serve.latency.select.build_latency`); an unknown model or GPU is
    the hardware tables' usage error, with "did you mean".
    """
    select = part("latency.select")
    return select.build_latency(
        config.latency, config.model, config.gpu, config.tp, profile=config.profile
    )


def engine_simulate(requests: RequestSet, config: ServeConfig, latency: Any) -> ServeResult:
    """:func:`gpu_trace.serve.engine.simulate` (imported at call time)."""
    result: ServeResult = part("engine").simulate(requests, config, latency)
    return result


def energy_cost(result: ServeResult, config: ServeConfig, latency: Any) -> Any:
    """GPU time, energy and cost of a run (:func:`gpu_trace.serve.energy.energy_cost`,
    the price from :func:`gpu_trace.serve.hardware.price`: ``--price`` or the shipped
    table).
    """
    energy = part("energy")
    return energy.energy_cost(
        result.replicas,
        latency.gpu,
        tokens=energy.served_tokens(result.requests),
        price_usd_per_gpu_hour=part("hardware").price(config.gpu, config.price),
    )


# -- running -----------------------------------------------------------------------------


def execute(
    window: Window, config: ServeConfig, latency: Any = None, *, record_events: bool = False
) -> ServeRun:
    """Replay the window's requests under ``config`` and score it (nothing written);
    ``latency`` is the config's latency model when already built. ``record_events``:
    the engine that recorded the event trace is kept in ``ServeRun.engine``.
    """
    run_id = config.resolved_run_id()
    if latency is None:
        latency = build_latency(config)
    # the window is cut by load_requests: the engine gets it whole
    engine_config = dataclasses.replace(config, start_s=0.0, duration_s=None)
    engine = None
    if record_events:
        result, engine = part("events").simulate_traced(window.requests, engine_config, latency)
    else:
        result = engine_simulate(window.requests, engine_config, latency)
    summary = metrics.summary(
        result,
        metrics.Slo.parse(config.slo),
        energy=energy_cost(result, config, latency),
    )
    context = sanity.beyond_context(window.requests, latency.model)
    notes = sanity.notes(summary, config.latency, [*window.notes(), *context, *result.notes])
    return ServeRun(config, run_id, result, summary, notes, window.requests.dataset, engine)


def tagged(run: ServeRun, source: str) -> dict[str, pl.DataFrame]:
    """A run's three tables keyed as the store keeps them (source = the replayed
    source, dataset = the run id).
    """
    keys = {"source": source, "dataset": run.run_id, "cluster": source, "run_id": run.run_id}
    requests = run.result.requests.with_columns(pl.lit(run.trace_dataset).alias("trace_dataset"))
    frames = {
        "serve_runs": run.row(),
        "serve_requests": requests,
        "serve_timeseries": run.result.timeseries,
    }
    return {
        k: v.with_columns(*(pl.lit(x).alias(c) for c, x in keys.items())) for k, v in frames.items()
    }


def stage(tx: StoreTransaction, run: ServeRun, source: str) -> None:
    """Stage one run's tables in ``tx`` (published by its commit)."""
    for table, frame in tagged(run, source).items():
        tx.write(table, frame, source=source, dataset=run.run_id, metadata={"run_id": run.run_id})


def write_dir(run: ServeRun, out: Path, source: str) -> None:
    """The run directory: ``config.json`` (the config and run id) and the three tables
    as Parquet, as they are in the store.
    """
    out.mkdir(parents=True, exist_ok=True)
    config = {**dataclasses.asdict(run.config), "run_id": run.run_id}
    (out / "config.json").write_text(
        json.dumps(config, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8"
    )
    for table, frame in tagged(run, source).items():
        frame.write_parquet(out / f"{table}.parquet", compression="zstd")


def run_all(
    store: Path,
    configs: Iterable[ServeConfig],
    *,
    out: Path | None = None,
    write_store: bool = True,
    per_run_dirs: bool = False,
    on_run: Callable[[ServeRun], None] | None = None,
    events: Callable[[str], Path] | None = None,
) -> list[ServeRun]:
    """Run every config (one source and dataset, the window read once) and publish all
    of them in ONE store generation at the end; ``out`` gets the run directory (or
    ``out/<run id>`` per run with ``per_run_dirs``). An error in any run publishes none.
    ``events`` (run id -> file) writes each run's event trace as the run ends
    (:mod:`gpu_trace.serve.events`), its paths checked before anything runs.
    """
    configs = list(configs)
    if not configs:
        return []
    first = configs[0]
    if any((c.source, c.dataset, c.start_s, c.duration_s) != window_of(first) for c in configs):
        msg = "the runs of one comparison must replay the same source, dataset and window"
        raise GpuTraceError(msg)
    ids = [c.resolved_run_id() for c in configs]
    if len(set(ids)) != len(ids):
        msg = "two runs of the comparison resolve to the same run id"
        raise UsageError(msg)
    check_source(store, first.source, first.dataset)
    for c in configs:
        check_names(c)
    check_traces(events, ids)
    # model, GPU, width and profile checked before the trace is read
    latencies = [build_latency(c) for c in configs]
    window = load_requests(store, first.source, first.dataset, first.start_s, first.duration_s)
    runs: list[ServeRun] = []
    with StoreTransaction(store) as tx:
        for config, latency in zip(configs, latencies, strict=True):
            run = execute(window, config, latency, record_events=events is not None)
            write_trace(run, events)
            if write_store:
                stage(tx, run, first.source)
            if out is not None:
                write_dir(run, out / run.run_id if per_run_dirs else out, first.source)
            runs.append(run)
            if on_run is not None:
                on_run(run)
    return runs


def check_traces(events: Callable[[str], Path] | None, run_ids: list[str]) -> None:
    """Refuse, before anything runs, an ``--events`` file of any run whose folder does
    not exist or that is a folder.
    """
    from gpu_trace.replay import events as trace_file

    if events is None:
        return
    for run_id in run_ids:
        trace_file.check_target(events(run_id))


def write_trace(run: ServeRun, events: Callable[[str], Path] | None) -> None:
    """Write a traced run's event trace to ``events(run id)`` (one stderr line says
    where) and let go of its engine; nothing without ``events``.
    """
    from gpu_trace.replay import events as trace_file

    if events is None or run.engine is None:
        return
    path = events(run.run_id)
    trace = part("events").ServeTrace(run.engine, run.run_id)
    trace_file.report(path, trace_file.write_events(trace, path))
    run.engine = None


def window_of(c: ServeConfig) -> tuple[str, str | None, float, float | None]:
    """What selects a run's requests: runs replaying one set share it."""
    return (c.source, c.dataset, c.start_s, c.duration_s)
