"""One replay run, end to end: select jobs, build the cluster, estimate durations,
run the engine, score, and write the results (store + run directory).

Outputs are written explicitly at the end of :func:`run` (never from constructors or
exit hooks): the store gets ``replay_runs`` / ``replay_jobs`` / ``replay_timeseries``
through the one writer (source = the replayed source, dataset = the run id), and the
run directory gets ``config.resolved.json`` plus the same three tables as Parquet.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from gpu_trace.errors import GpuTraceError
from gpu_trace.replay import estimator as est
from gpu_trace.replay import metrics as mt
from gpu_trace.replay.cluster import MILLI, ClusterSpec, from_trace, load_file, parse_spec
from gpu_trace.replay.engine import Engine, EngineOptions
from gpu_trace.replay.policies import base
from gpu_trace.replay.workload import Workload
from gpu_trace.store.parquet import StoreTransaction
from gpu_trace.store.scan import scan

ESTIMATED = {"qssf", "backfill"}
"""Schedulers that read duration estimates (others see true durations)."""


@dataclass(frozen=True)
class ReplayConfig:
    """Everything that defines a run; saved as ``config.resolved.json``."""

    source: str
    scheduler: str = "fifo"
    placement: str = "consolidate"
    admission: str = "fits"
    scheduler_options: dict[str, Any] = field(default_factory=dict)
    placement_options: dict[str, Any] = field(default_factory=dict)
    cluster: str = "from-trace"
    load: float = 1.0
    window_start: str | None = None
    window_end: str | None = None
    estimator: str = "model"
    train_fraction: float = 0.25
    seed: int = 0
    restore_s: float = 0.0
    multinode_slowdown: float = 1.0
    departures: bool = True
    inflate_to: float | None = None
    bin_s: float | None = None
    run_id: str | None = None

    def resolved_run_id(self) -> str:
        if self.run_id:
            return self.run_id
        blob = json.dumps(dataclasses.asdict(self), sort_keys=True, default=str).encode()
        return f"{self.scheduler}-{self.placement}-{hashlib.sha256(blob).hexdigest()[:8]}"


@dataclass
class RunResult:
    """Frames of one run (canonical column names) plus the engine for inspection."""

    config: ReplayConfig
    run_id: str
    runs: pl.DataFrame
    jobs: pl.DataFrame
    timeseries: pl.DataFrame
    accuracy: est.Accuracy | None
    engine: Engine
    extra: dict[str, Any] = field(default_factory=dict)


def resolve_cluster(text: str, store: Path | None, source: str) -> ClusterSpec:
    """``from-trace``, a spec (``6500x8``) or a cluster file path."""
    if text == "from-trace":
        if store is None:
            raise GpuTraceError("from-trace needs a store")
        return from_trace(
            scan(store, "machines", [source]), scan(store, "capacity", [source]), source
        )
    path = Path(text)
    if path.suffix.lower() in {".toml", ".json", ".csv"}:
        if not path.exists():
            raise GpuTraceError(f"cluster file {text} does not exist")
        return load_file(path)
    return parse_spec(text)


def _ts(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise GpuTraceError(f"window bound {text!r} is not an ISO date/time") from None
    if parsed.tzinfo is None:
        from datetime import UTC

        parsed = parsed.replace(tzinfo=UTC)
    return parsed


def _inflate(jobs: pl.DataFrame, cluster_gpus: int, target: float, seed: int) -> pl.DataFrame:
    """Arrival-only packing (FGD): clone randomly drawn GPU jobs (seeded) after the
    trace until the arrived GPU demand reaches ``target`` x the cluster's GPUs."""
    gpu = jobs.filter(pl.col("gpus") > 0)
    have = float(gpu["gpus"].sum() or 0.0)
    want = target * cluster_gpus
    if have >= want or not gpu.height:
        return jobs
    rng = np.random.default_rng(seed)
    mean = float(gpu["gpus"].mean())  # type: ignore[arg-type]
    n = int((want - have) / mean * 1.2) + 16
    idx = rng.integers(0, gpu.height, size=n)
    extra = gpu[idx]
    cum = have + np.cumsum(extra["gpus"].to_numpy())
    keep = int(np.searchsorted(cum, want, side="left")) + 1
    extra = extra.head(keep)
    last = jobs["submit_time"].max()
    extra = extra.with_columns(
        (pl.col("job_id") + pl.lit("#clone") + pl.int_range(pl.len()).cast(pl.String)).alias(
            "job_id"
        ),
        (pl.lit(last) + pl.duration(seconds=pl.int_range(1, pl.len() + 1))).alias("submit_time"),
    )
    return pl.concat([jobs, extra.select(jobs.columns)], how="vertical_relaxed")


def replay(
    jobs: pl.DataFrame | pl.LazyFrame,
    spec: ClusterSpec,
    config: ReplayConfig,
    *,
    record_log: bool = False,
) -> RunResult:
    """Replay canonical ``jobs`` rows on ``spec`` (no store needed)."""
    started = time.perf_counter()
    frame = jobs.lazy().collect()
    start, end = _ts(config.window_start), _ts(config.window_end)
    needs_est = config.scheduler in ESTIMATED and config.estimator == "model"
    if needs_est and start is None:
        valid = frame.filter(pl.col("submit_time").is_not_null()).sort("submit_time")
        if valid.height:
            cut = valid["submit_time"][
                min(valid.height - 1, int(valid.height * config.train_fraction))
            ]
            start = cut
    if not config.departures:
        # arrival-only packing: jobs never depart, so a missing run time does not matter
        frame = frame.with_columns(pl.col("run_s").fill_null(0.0))
        if config.inflate_to:
            frame = _inflate(frame, spec.gpus, config.inflate_to, config.seed)
    w = Workload.from_jobs(frame, start=start, end=end, load=config.load)
    estimate = w.duration_s.copy()
    accuracy: est.Accuracy | None = None
    if config.scheduler in ESTIMATED:
        if config.estimator == "model":
            history = frame.filter(pl.col("submit_time") < start) if start else frame.head(0)
            tgt = w.frame.with_columns(pl.Series("run_s", w.duration_s))
            estimate, accuracy = est.estimate(
                history.select("user", "vc", "name", "gpus", "submit_time", "run_s"),
                tgt.select("user", "vc", "name", "gpus", "submit_time", "run_s"),
                seed=config.seed,
            )
        elif config.estimator == "oracle":
            accuracy = est.score(estimate, w.duration_s, "oracle", 0)
        else:
            raise GpuTraceError("estimator must be `model` or `oracle`")
    engine = Engine(
        w,
        spec,
        EngineOptions(
            seed=config.seed,
            restore_s=config.restore_s,
            multinode_slowdown=config.multinode_slowdown,
            departures=config.departures,
            record_log=record_log,
        ),
        estimate_s=np.asarray(estimate, dtype=np.float64),
    )
    sched_cls = base.get("scheduler", config.scheduler)
    place_cls = base.get("placement", config.placement)
    adm_cls = base.get("admission", config.admission)
    engine.bind(
        sched_cls(base.build_config(sched_cls.Config, config.scheduler_options), engine),
        place_cls(base.build_config(place_cls.Config, config.placement_options), engine),
        adm_cls(adm_cls.Config(), engine),
    )
    engine.run()
    wall = time.perf_counter() - started
    return _score(config, spec, w, engine, estimate, accuracy, wall)


def _score(
    config: ReplayConfig,
    spec: ClusterSpec,
    w: Workload,
    engine: Engine,
    estimate: Any,
    accuracy: est.Accuracy | None,
    wall: float,
) -> RunResult:
    run_id = config.resolved_run_id()
    res = engine.result_arrays()
    n = w.n
    outcome = np.full(n, "unfinished", dtype=object)
    outcome[~np.isnan(res["finish"])] = "finished"
    reason = np.full(n, None, dtype=object)
    for j, r in engine.rejected.items():
        outcome[j] = "rejected"
        reason[j] = r
    jobs = w.frame.select("job_id", "user", "vc", "gpus").with_columns(
        pl.Series("outcome", outcome.tolist(), dtype=pl.String),
        pl.Series("reason", reason.tolist(), dtype=pl.String),
        pl.Series("arrival_time_s", w.arrival_s),
        pl.Series("start_time_s", res["start"]).fill_nan(None),
        pl.Series("finish_time_s", res["finish"]).fill_nan(None),
        pl.Series("duration_s", w.duration_s),
        pl.Series("estimate_s", np.asarray(estimate, dtype=np.float64)),
        pl.Series("preemptions", res["preemptions"]),
        pl.Series("nodes", res["nodes"]),
    )
    jobs = jobs.with_columns(
        (pl.col("start_time_s") - pl.col("arrival_time_s")).alias("queue_s"),
        (pl.col("finish_time_s") - pl.col("arrival_time_s")).alias("jct_s"),
    ).with_columns(
        pl.max_horizontal(
            pl.lit(1.0),
            pl.col("jct_s") / pl.col("duration_s").clip(lower_bound=mt.BSLD_THRESHOLD_S),
        ).alias("bsld"),
        pl.when(pl.col("start_time_s").is_null())
        .then(None)
        .otherwise(pl.col("nodes"))
        .alias("nodes"),
    )
    jobs = jobs.with_columns(
        pl.when(pl.col("jct_s").is_null()).then(None).otherwise(pl.col("bsld")).alias("bsld")
    )
    skipped = w.skipped.with_columns(pl.lit("skipped").alias("outcome"))
    all_jobs = pl.concat([jobs, skipped], how="diagonal_relaxed")
    headline = mt.job_metrics(jobs, spec.gpus)
    headline.update(
        mt.cluster_metrics(
            engine.timeline,
            engine.state.capacity_milli,
            float(w.arrival_s[-1]) if n else None,
        )
    )
    ts = mt.timeseries(engine.timeline, engine.state.capacity_milli, config.bin_s)
    counts = {
        "jobs_input": n + w.skipped.height,
        "jobs_skipped": w.skipped.height,
        "jobs_rejected": len(engine.rejected),
        "jobs_finished": int((outcome == "finished").sum()),
        "jobs_unfinished": int((outcome == "unfinished").sum()),
    }
    runs = pl.DataFrame(
        {
            "run_id": [run_id],
            "scheduler": [config.scheduler],
            "placement": [config.placement],
            "admission": [config.admission],
            "config_json": [json.dumps(dataclasses.asdict(config), sort_keys=True, default=str)],
            "seed": [config.seed],
            "load_factor": [config.load],
            "cluster_nodes": [spec.nodes],
            "cluster_gpus": [float(spec.gpus)],
            **{k: [v] for k, v in counts.items()},
            **{k: [v] for k, v in headline.items()},
            "preemptions": [engine.total_preemptions],
            "estimator_mae_s": [accuracy.mae_s if accuracy else None],
            "estimator_within_10_ratio": [accuracy.within_10 if accuracy else None],
            "estimator_within_50_ratio": [accuracy.within_50 if accuracy else None],
            "estimator_within_100_ratio": [accuracy.within_100 if accuracy else None],
            "wall_s": [wall],
        }
    )
    extra: dict[str, Any] = {}
    if not config.departures:
        extra["packing"] = packing_curve(engine)
    return RunResult(config, run_id, runs, all_jobs, ts, accuracy, engine, extra)


def packing_curve(
    engine: Engine, points: tuple[float, ...] = (0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3)
) -> pl.DataFrame:
    """Arrival-only packing KPI (FGD): allocated GPUs / capacity when the arrived GPU
    demand first reaches each share of capacity."""
    tl = engine.timeline
    arrived = np.asarray(tl.arrived_milli, dtype=np.float64)
    used = np.asarray(tl.used_milli, dtype=np.float64)
    cap = float(engine.state.capacity_milli)
    rows = []
    for p in points:
        k = int(np.searchsorted(arrived, p * cap, side="left"))
        if k < arrived.size:
            rows.append((p, used[k] / cap, (cap - used[k]) / MILLI))
    return pl.DataFrame(
        rows, schema=["arrived_ratio", "alloc_ratio", "unallocated_gpus"], orient="row"
    )


def write(result: RunResult, store: Path | None, out_dir: Path | None) -> None:
    """Write a run's three tables to the store and/or a run directory."""
    source = result.config.source
    run_id = result.run_id
    cols = {"source": source, "dataset": run_id, "cluster": source, "run_id": run_id}
    frames = {
        "replay_runs": result.runs,
        "replay_jobs": result.jobs,
        "replay_timeseries": result.timeseries,
    }
    tagged = {
        k: v.with_columns(*(pl.lit(x).alias(c) for c, x in cols.items())) for k, v in frames.items()
    }
    if store is not None:
        with StoreTransaction(store) as tx:
            for table, frame in tagged.items():
                tx.write(table, frame, source=source, dataset=run_id, metadata={"run_id": run_id})
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        resolved = {
            **dataclasses.asdict(result.config),
            "run_id": run_id,
            "cluster_resolved": result.engine.spec.describe(),
            "estimator": result.accuracy.as_dict() if result.accuracy else None,
        }
        (out_dir / "config.resolved.json").write_text(
            json.dumps(resolved, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8"
        )
        for table, frame in tagged.items():
            frame.write_parquet(out_dir / f"{table}.parquet", compression="zstd")
        if "packing" in result.extra:
            result.extra["packing"].write_csv(out_dir / "packing_curve.csv")


def run(
    store: Path, config: ReplayConfig, out_dir: Path | None = None, write_store: bool = True
) -> RunResult:
    """Replay ``config.source`` from the store and write the results."""
    jobs = scan(store, "jobs", [config.source]).collect()
    if not jobs.height:
        raise GpuTraceError(f"no jobs in the store for source {config.source!r}")
    spec = resolve_cluster(config.cluster, store, config.source)
    result = replay(jobs, spec, config)
    write(result, store if write_store else None, out_dir)
    return result
