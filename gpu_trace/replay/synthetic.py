"""Synthetic canonical ``jobs`` frames for replay tests and benchmarks, vectorized.

- :func:`pai_like_jobs`: PAI-2020-like marginals (Weng et al., "MLaaS in the Wild",
  NSDI'22, and the trace's README): log-normal durations with median ~480 s and mean
  ~4,800 s, mostly 1-GPU jobs with a tail of 2-16 GPUs.
- :func:`philly_like_jobs`: Philly-like marginals, the ones :mod:`gpu_trace.synth.philly`
  is calibrated to (AcmeTrace's summary of the Philly trace): GPUs per job 1 to 128
  (79 % one GPU, mean about 1.9), run time log-normal with a median of about 874 s
  and a mean of about 18,000 s, capped at the longest published run (4,240,676 s).

Both draw Poisson arrivals at a rate chosen to load the given cluster to
``utilization`` on average.
"""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import polars as pl

GPU_CHOICES = np.array([1.0, 2.0, 4.0, 8.0, 16.0])
GPU_WEIGHTS = np.array([0.70, 0.10, 0.08, 0.10, 0.02])

PHILLY_GPUS = np.array([1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0])
PHILLY_WEIGHTS = np.array([0.792, 0.075, 0.075, 0.045, 0.0085, 0.003, 0.001, 0.0004])
"""GPUs per job and their shares, as :mod:`gpu_trace.synth.philly` (``SIZES``)."""
PHILLY_MEDIAN_S = 874.0
PHILLY_SIGMA = 2.45
"""Log-normal run time: median 874 s, mean 874 x exp(2.45^2 / 2) ~ 17,600 s."""
PHILLY_MAX_RUN_S = 4_240_676


def pai_like_jobs(
    n: int, *, cluster_gpus: int = 6500, utilization: float = 0.95, seed: int = 0, users: int = 500
) -> pl.DataFrame:
    """``n`` canonical job rows (source ``synthetic``) loading ``cluster_gpus``."""
    rng = np.random.default_rng(seed)
    dur = np.rint(np.exp(rng.normal(np.log(480.0), 2.15, size=n))).clip(1, 30 * 86400)
    gpus = rng.choice(GPU_CHOICES, size=n, p=GPU_WEIGHTS)
    return _frame(rng, dur, gpus, cluster_gpus, utilization, users, "pai-like")


def philly_like_jobs(
    n: int, *, cluster_gpus: int = 2000, utilization: float = 0.95, seed: int = 0, users: int = 500
) -> pl.DataFrame:
    """``n`` canonical job rows (source ``synthetic``, dataset ``philly-like``) loading
    ``cluster_gpus``, with Philly's GPU counts and run times (module docstring).
    """
    rng = np.random.default_rng(seed)
    run = rng.normal(np.log(PHILLY_MEDIAN_S), PHILLY_SIGMA, size=n)
    dur = np.rint(np.exp(run)).clip(1, PHILLY_MAX_RUN_S)
    gpus = rng.choice(PHILLY_GPUS, size=n, p=PHILLY_WEIGHTS / PHILLY_WEIGHTS.sum())
    return _frame(rng, dur, gpus, cluster_gpus, utilization, users, "philly-like")


def _frame(
    rng: np.random.Generator,
    dur: np.ndarray,
    gpus: np.ndarray,
    cluster_gpus: int,
    utilization: float,
    users: int,
    dataset: str,
) -> pl.DataFrame:
    """The canonical rows for drawn durations and GPU counts: Poisson arrivals at the
    rate that offers ``utilization`` x ``cluster_gpus`` on average, users, VCs, names.
    """
    n = len(dur)
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
            "dataset": dataset,
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
