"""``gpu-trace replay validate RUN``: a live run against the simulation of the same jobs,
cluster and policies, job by job.

The simulated twin is rebuilt from what the live run saved (``input_jobs.parquet``, the
resolved ``replay`` config, the device cluster as a simulator spec) unless ``RUN/sim``
already holds it. Injected failures are part of the plan, so the twin gives a job that
was planned to fail at fraction f of its work a duration of f x run_s: the simulator
then frees its devices at the same point of the schedule. Crashed (externally killed)
and interrupted jobs cannot be predicted; they are listed but not compared.

Errors are live - simulated, in trace seconds. Summary: mean absolute start / finish /
JCT / queueing differences, and the relative error of the average JCT,
|mean JCT_live - mean JCT_sim| / mean JCT_sim (the figure simulator papers report).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from gpu_trace.errors import GpuTraceError
from gpu_trace.replay.cluster import parse_spec
from gpu_trace.replay.config import ReplayConfig
from gpu_trace.replay.score import RunResult
from gpu_trace.replay.simulate import replay, write
from gpu_trace.store.parquet import StoreTransaction

ENDED = ("finished", "failed")
"""Live outcomes whose end time is planned (a completion or an injected failure)."""


@dataclass
class Validation:
    """A validation's result: the live run, its simulated twin, the per-job
    comparison (``replay_validation`` rows) and the summary error metrics.
    """

    run_id: str
    sim_run_id: str
    jobs: pl.DataFrame
    """``replay_validation`` rows."""
    summary: dict[str, Any]


def _config(run_dir: Path) -> dict[str, Any]:
    path = run_dir / "config.resolved.json"
    if not path.is_file():
        msg = f"{run_dir} is not a live run directory (no config.resolved.json)"
        raise GpuTraceError(msg)
    resolved: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    if resolved.get("mode") != "live":
        msg = f"{run_dir} holds a simulated run; validate needs a live run"
        raise GpuTraceError(msg)
    return resolved


def simulate_twin(run_dir: Path, store: Path | None = None) -> pl.DataFrame:
    """The simulated run's ``replay_jobs`` for a live run (computed once, kept in
    ``RUN/sim``).
    """
    sim_dir = run_dir / "sim"
    cached = sim_dir / "replay_jobs.parquet"
    if cached.is_file():
        return pl.read_parquet(cached)
    resolved = _config(run_dir)
    cfg = dict(resolved["replay"])
    cfg["run_id"] = f"{resolved['run_id']}-sim"
    config = ReplayConfig(**cfg)
    jobs = pl.read_parquet(run_dir / "input_jobs.parquet")
    twin = jobs.with_columns(
        pl.when(pl.col("fail_at").is_not_null())
        .then(pl.col("run_s") * pl.col("fail_at"))
        .otherwise(pl.col("run_s"))
        .alias("run_s")
    ).drop("fail_at")
    result = replay(twin, parse_spec(config.cluster), config)
    result = dataclasses.replace(
        result,
        jobs=result.jobs.with_columns(pl.lit("sim").alias("mode")),
        runs=result.runs.with_columns(pl.lit("sim").alias("mode")),
    )
    _write_sim(result, store, sim_dir)
    return result.jobs.with_columns(
        pl.lit(config.source).alias("source"), pl.lit(result.run_id).alias("run_id")
    )


def _write_sim(result: RunResult, store: Path | None, sim_dir: Path) -> None:
    write(result, store, sim_dir)


def _with_key(frame: pl.DataFrame) -> pl.DataFrame:
    """Join key robust to repeated job ids: (job_id, occurrence in run order)."""
    return frame.with_columns(pl.int_range(pl.len()).over("job_id").alias("_k"))


def validate(run_dir: Path, store: Path | None = None) -> Validation:
    """Compare ``run_dir`` (a live run) with its simulated twin; write the table."""
    resolved = _config(run_dir)
    run_id = str(resolved["run_id"])
    source = str(resolved["replay"]["source"])
    live = pl.read_parquet(run_dir / "replay_jobs.parquet").filter(pl.col("outcome") != "skipped")
    sim = simulate_twin(run_dir, store).filter(pl.col("outcome") != "skipped")
    sim_run_id = f"{run_id}-sim"
    cols = ["job_id", "_k", "outcome", "start_time_s", "queue_s"]
    lv = _with_key(live).select(
        *cols,
        "arrival_time_s",
        pl.coalesce("end_time_s", "finish_time_s").alias("finish_s"),
    )
    sm = _with_key(sim).select(*cols, pl.col("finish_time_s").alias("finish_s"))
    both = lv.join(sm, on=["job_id", "_k"], how="full", coalesce=True, suffix="_sim")
    ended = pl.col("outcome").is_in(ENDED) & (pl.col("outcome_sim") == "finished")
    table = both.select(
        pl.lit(source).alias("source"),
        pl.lit(run_id).alias("dataset"),
        pl.lit(source).alias("cluster"),
        pl.lit(run_id).alias("run_id"),
        pl.lit(sim_run_id).alias("sim_run_id"),
        "job_id",
        pl.col("outcome").alias("outcome_live"),
        pl.col("outcome_sim"),
        ended.fill_null(False).alias("compared"),
        "arrival_time_s",
        pl.col("start_time_s").alias("start_live_s"),
        pl.col("start_time_s_sim").alias("start_sim_s"),
        (pl.col("start_time_s") - pl.col("start_time_s_sim")).alias("start_diff_s"),
        pl.col("finish_s").alias("finish_live_s"),
        pl.col("finish_s_sim").alias("finish_sim_s"),
        (pl.col("finish_s") - pl.col("finish_s_sim")).alias("finish_diff_s"),
        (pl.col("finish_s") - pl.col("arrival_time_s")).alias("jct_live_s"),
        (pl.col("finish_s_sim") - pl.col("arrival_time_s")).alias("jct_sim_s"),
        (pl.col("finish_s") - pl.col("finish_s_sim")).alias("jct_diff_s"),
        pl.col("queue_s").alias("queue_live_s"),
        pl.col("queue_s_sim").alias("queue_sim_s"),
        (pl.col("queue_s") - pl.col("queue_s_sim")).alias("queue_diff_s"),
    )
    summary = summarize(table)
    summary.update({"run_id": run_id, "sim_run_id": sim_run_id})
    table.write_parquet(run_dir / "replay_validation.parquet")
    (run_dir / "validation_summary.json").write_text(
        json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )
    if store is not None:
        with StoreTransaction(store) as tx:
            tx.write(
                "replay_validation",
                table,
                source=source,
                dataset=run_id,
                metadata={"run_id": run_id, "sim_run_id": sim_run_id},
            )
    return Validation(run_id, sim_run_id, table, summary)


def summarize(table: pl.DataFrame) -> dict[str, Any]:
    """Error metrics over the compared jobs (see the module docstring)."""
    c = table.filter(pl.col("compared"))
    n = c.height

    def mean(expr: pl.Expr) -> float | None:
        if not n:
            return None
        v = c.select(expr.mean()).item()
        return None if v is None else float(v)

    jct_live = mean(pl.col("jct_live_s"))
    jct_sim = mean(pl.col("jct_sim_s"))
    rel = None
    if jct_live is not None and jct_sim:
        rel = abs(jct_live - jct_sim) / jct_sim
    within = mean((pl.col("jct_diff_s").abs() <= 0.05 * pl.col("jct_sim_s").abs()).cast(pl.Float64))
    return {
        "jobs": table.height,
        "jobs_compared": n,
        "jobs_not_compared": table.height - n,
        "jct_mean_live_s": jct_live,
        "jct_mean_sim_s": jct_sim,
        "jct_mean_rel_error": rel,
        "jct_mae_s": mean(pl.col("jct_diff_s").abs()),
        "queue_mean_live_s": mean(pl.col("queue_live_s")),
        "queue_mean_sim_s": mean(pl.col("queue_sim_s")),
        "queue_mae_s": mean(pl.col("queue_diff_s").abs()),
        "start_mae_s": mean(pl.col("start_diff_s").abs()),
        "finish_mae_s": mean(pl.col("finish_diff_s").abs()),
        "jobs_jct_within_5pct_ratio": within,
    }
