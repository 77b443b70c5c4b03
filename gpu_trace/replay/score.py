"""Scoring a finished run: the engine's per-job arrays and timeline become the
``replay_runs`` / ``replay_jobs`` / ``replay_timeseries`` frames (:class:`RunResult`).

Shared by the simulator (:func:`gpu_trace.replay.simulate.replay`) and the live
executor (:mod:`gpu_trace.replay.live.executor`), which adds what only a live run has.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import polars as pl

from gpu_trace.replay import estimator as est
from gpu_trace.replay import experiment as xp
from gpu_trace.replay import metrics as mt
from gpu_trace.replay.cluster import MILLI, ClusterSpec
from gpu_trace.replay.config import ReplayConfig
from gpu_trace.replay.kernel.engine import Engine
from gpu_trace.replay.workload import Workload


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


def _experiment(
    config: ReplayConfig,
    spec: ClusterSpec,
    w: Workload,
    cut: datetime | None,
    extra: dict[str, Any] | None,
) -> dict[str, Any]:
    """The resolved experiment (everything but the policies) of one run."""
    replayed = pl.DataFrame(
        {
            "job_id": w.frame["job_id"],
            "arrival_s": w.arrival_s,
            "duration_s": w.duration_s,
            "gpus": w.gpus,
        }
    )
    return {
        "source": config.source,
        "cluster": spec.describe(),
        "load": config.load,
        "seed": config.seed,
        "window": [config.window_start, config.window_end],
        "training_split": None
        if cut is None
        else {"cut": cut.isoformat(), "train_fraction": config.train_fraction},
        "estimator": config.estimator,
        "restore_s": config.restore_s,
        "multinode_slowdown": config.multinode_slowdown,
        "departures": config.departures,
        "inflate_to": config.inflate_to,
        "jobs_digest": xp.jobs_digest(replayed, w.skipped),
        **({} if config.departures else {"inflate_mode": config.inflate_mode}),
        **({"resample": config.resample} if config.resample else {}),
        **(extra or {}),
    }


def score(
    config: ReplayConfig,
    spec: ClusterSpec,
    w: Workload,
    engine: Engine,
    estimate: Any,
    accuracy: est.Accuracy | None,
    wall: float,
    *,
    training_cut: datetime | None = None,
    experiment: dict[str, Any] | None = None,
) -> RunResult:
    """Frames of a finished run; ``experiment`` adds fields to its experiment (live)."""
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
        pl.Series("speed", res["speed"]),
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
        pl.when(pl.col("start_time_s").is_null())
        .then(None)
        .otherwise(pl.col("speed"))
        .alias("speed"),
    )
    jobs = jobs.with_columns(
        pl.when(pl.col("jct_s").is_null()).then(None).otherwise(pl.col("bsld")).alias("bsld")
    )
    skipped = w.skipped.with_columns(pl.lit("skipped").alias("outcome"))
    all_jobs = pl.concat([jobs, skipped], how="diagonal_relaxed")
    headline = mt.job_metrics(jobs, spec.gpus)
    headline["throughput_mean"] = _effective_throughput(jobs)
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
    description = _experiment(config, spec, w, training_cut, experiment)
    runs = pl.DataFrame(
        {
            "run_id": [run_id],
            "experiment_id": [xp.experiment_id(description)],
            "experiment_json": [json.dumps(description, sort_keys=True, default=str)],
            "jobs_skipped_reasons": [json.dumps(xp.skipped_reasons(w.skipped), sort_keys=True)],
            "scheduler": [config.label()],
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
        },
        schema_overrides={
            "jain_slowdown": pl.Float64,
            "ftf_max_ratio": pl.Float64,
            "throughput_mean": pl.Float64,
        },
    )
    extra: dict[str, Any] = {}
    if not config.departures:
        extra["packing"] = (
            packing_curve(engine, config.packing_points)
            if config.packing_points
            else packing_curve(engine)
        )
    return RunResult(config, run_id, runs, all_jobs, ts, accuracy, engine, extra)


def _effective_throughput(jobs: pl.DataFrame) -> float | None:
    """GPU-work-weighted speed of the started jobs: sum(d x g) / sum(d x g / speed), 1.0
    when every model runs at the reference speed (null: nothing started).
    """
    started = jobs.filter(pl.col("speed").is_not_null() & (pl.col("duration_s") > 0))
    work = started["duration_s"] * started["gpus"]
    denom = float((work / started["speed"]).sum())
    return float(work.sum()) / denom if denom > 0 else None


def packing_curve(
    engine: Engine, points: tuple[float, ...] = (0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3)
) -> pl.DataFrame:
    """Arrival-only packing KPI (FGD): allocated GPUs / capacity when the arrived GPU
    demand first reaches each share of capacity.
    """
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
