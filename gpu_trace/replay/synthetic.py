"""Synthetic canonical ``jobs`` frames for replay tests and benchmarks, vectorized.

PAI-2020-like marginals (Weng et al., "MLaaS in the Wild", NSDI'22, and the trace's README): log-normal durations with median ~480 s and
mean ~4,800 s, mostly 1-GPU jobs with a tail of 2-16 GPUs, Poisson arrivals at a rate
chosen to load the given cluster to ``utilization`` on average.
"""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import polars as pl

GPU_CHOICES = np.array([1.0, 2.0, 4.0, 8.0, 16.0])
GPU_WEIGHTS = np.array([0.70, 0.10, 0.08, 0.10, 0.02])


def pai_like_jobs(
    n: int, *, cluster_gpus: int = 6500, utilization: float = 0.95, seed: int = 0, users: int = 500
) -> pl.DataFrame:
    """``n`` canonical job rows (source ``synthetic``) loading ``cluster_gpus``."""
    rng = np.random.default_rng(seed)
    dur = np.rint(np.exp(rng.normal(np.log(480.0), 2.15, size=n))).clip(1, 30 * 86400)
    gpus = rng.choice(GPU_CHOICES, size=n, p=GPU_WEIGHTS)
    work = float((dur * gpus).mean())
    rate = utilization * cluster_gpus / work
    gaps = rng.exponential(1.0 / rate, size=n)
    submit = np.rint(np.cumsum(gaps)).astype(np.int64)
    origin = int(datetime(2020, 7, 1, tzinfo=UTC).timestamp())
    user = rng.zipf(1.6, size=n) % users
    ts = pl.from_epoch(pl.Series(submit + origin), time_unit="s").dt.replace_time_zone("UTC")
    return pl.DataFrame(
        {
            "source": "synthetic",
            "dataset": "pai-like",
            "cluster": "synthetic",
            "job_id": pl.int_range(n, eager=True).cast(pl.String),
            "user": pl.Series(user).cast(pl.String).str.pad_start(4, "0"),
            "vc": pl.Series(user % 12).cast(pl.String),
            "name": pl.Series(rng.integers(0, 50, size=n)).cast(pl.String).str.pad_start(2, "0"),
            "submit_time": ts,
            "run_s": dur,
            "gpus": gpus,
            "gpu_type": pl.Series([None] * n, dtype=pl.String),
        }
    ).with_columns(
        ("job" + pl.col("name")).alias("name"),
        pl.col("submit_time").alias("start_time"),
    )
