"""Workload resampling for replicates (``--replicates N``): each replicate replays a
different, seeded draw of the workload, so the spread across replicates measures how
much a result depends on the particular jobs, not only on a placement seed (a
deterministic policy on one fixed trace gives the same schedule for every seed).

Methods (the seed of replicate k is ``--seed`` + k; the same seed gives the same draw):

- ``bootstrap``: the jobs submitted in the replayed window are drawn uniformly with
  replacement, as many as there are; each drawn job keeps its own submit time, run
  time and request (a job drawn twice arrives twice, the copy's id gets ``#boot<k>``).
  Jobs outside the window (history for the estimator) are kept as they are.
- ``jitter=D``: every job in the window keeps its run time and request, and its submit
  time moves by a uniform draw in [-D, +D] seconds (arrival order changes, the job set
  does not).
"""

from __future__ import annotations

from datetime import datetime

import numpy as np
import polars as pl

from gpu_trace.replay.experiment import UsageError

BOOT_TAG = "#boot"
"""Marks the id of a job's second and later copies in a bootstrap draw."""

METHODS = ("bootstrap", "jitter=D")


def parse(text: str) -> tuple[str, float]:
    """``bootstrap`` -> ("bootstrap", 0); ``jitter=10m`` -> ("jitter", 600.0)."""
    from gpu_trace.replay.faults import parse_duration

    name, sep, arg = text.partition("=")
    if name == "bootstrap" and not sep:
        return "bootstrap", 0.0
    if name == "jitter" and sep:
        span = parse_duration(arg, "--resample jitter")
        if span <= 0:
            msg = f"--resample {text!r}: the jitter must be positive"
            raise UsageError(msg)
        return "jitter", span
    msg = f"--resample {text!r}: use bootstrap or jitter=D (e.g. jitter=10m)"
    raise UsageError(msg)


def resample(
    frame: pl.DataFrame, method: str, seed: int, start: datetime | None, end: datetime | None
) -> pl.DataFrame:
    """``frame`` (canonical jobs) with the jobs of ``[start, end)`` redrawn by ``method``
    (seeded by ``seed``); rows outside the window and rows without a submit time are
    kept unchanged.
    """
    name, span = parse(method)
    sub = pl.col("submit_time")
    inside = sub.is_not_null()
    if start is not None:
        inside &= sub >= start
    if end is not None:
        inside &= sub < end
    pool = frame.filter(inside)
    rest = frame.filter(~inside)
    if not pool.height:
        return frame
    rng = np.random.default_rng(seed)
    if name == "bootstrap":
        # sorted draws keep input order among equal submit times
        idx = np.sort(rng.integers(0, pool.height, size=pool.height))
        copy = pl.int_range(pl.len()).over("job_id")
        drawn = pool[idx].with_columns(
            pl.when(copy > 0)
            .then(pl.col("job_id") + pl.lit(BOOT_TAG) + copy.cast(pl.String))
            .otherwise(pl.col("job_id"))
            .alias("job_id")
        )
    else:
        shift_us = np.round(rng.uniform(-span, span, size=pool.height) * 1e6).astype(np.int64)
        drawn = pool.with_columns(
            (sub + pl.Series("_d", shift_us).cast(pl.Duration("us"))).alias("submit_time")
        )
    return pl.concat([rest, drawn], how="vertical_relaxed")
