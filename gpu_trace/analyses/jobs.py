"""Job durations and sizes: duration CDFs (GPU vs CPU jobs, by size bucket, by GPU
type) evaluated at powers of two as Helios and Acme do, percentiles, and the job-share vs
GPU-time-share curve by job size.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import polars as pl

from gpu_trace.analyses.definitions import GPU_JOB, gpu_time_s, size_bucket, size_rank
from gpu_trace.plugins import AnalysisPlugin, option
from gpu_trace.values import choose

POW2_EDGES = tuple(2.0**i for i in range(22))
"""CDF evaluation points: 1 s ... 2^21 s (~24 days)."""

QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99)


def with_job_class(jobs: pl.LazyFrame) -> pl.LazyFrame:
    """``jobs`` with ``job_class`` (gpu / cpu) and ``size_bucket``, the keys durations
    are split by.
    """
    return jobs.with_columns(
        pl.when(GPU_JOB.fill_null(False))
        .then(pl.lit("gpu"))
        .otherwise(pl.lit("cpu"))
        .alias("job_class"),
        size_bucket(),
    )


def duration_cdf(
    jobs: pl.LazyFrame,
    by: Sequence[str] = ("source", "cluster", "job_class"),
    column: str = "run_s",
    edges: Sequence[float] = POW2_EDGES,
) -> pl.LazyFrame:
    """``P(column <= x)`` at each edge x, per group: columns ``*by, x_s, jobs, cdf``.

    Jobs with a null ``column`` are left out (their count is the group's ``jobs`` minus
    the CDF's denominator, reported as ``n``).
    """
    base = with_job_class(jobs).filter(pl.col(column).is_not_null())
    edge_series = pl.Series("x_s", list(edges), dtype=pl.Float64)
    # index of the first edge >= value: the job counts for that edge and every later one
    first = pl.lit(edge_series).search_sorted(pl.col(column).cast(pl.Float64), side="left")
    counts = base.group_by(list(by)).agg(pl.len().alias("n"))
    per_edge = (
        base.with_columns(first.cast(pl.Int64).alias("k"))
        .group_by([*by, "k"])
        .agg(pl.len().alias("c"))
    )
    grid = pl.LazyFrame({"k": list(range(len(edges))), "x_s": list(edges)})
    return (
        counts.join(grid, how="cross")
        .join(per_edge, on=[*by, "k"], how="left")
        .with_columns(pl.col("c").fill_null(0))
        .sort([*by, "k"])
        .with_columns((pl.col("c").cum_sum().over(list(by)) / pl.col("n")).alias("cdf"))
        .select(*by, "x_s", "n", "cdf")
    )


def duration_quantiles(
    jobs: pl.LazyFrame,
    by: Sequence[str] = ("source", "cluster", "job_class"),
    column: str = "run_s",
) -> pl.LazyFrame:
    """Count, mean, max and quantiles (linear interpolation) of ``column`` per group."""
    base = with_job_class(jobs).filter(pl.col(column).is_not_null())
    c = pl.col(column)
    return (
        base.group_by(list(by))
        .agg(
            pl.len().alias("n"),
            c.mean().alias("mean"),
            c.max().alias("max"),
            *(c.quantile(q, interpolation="linear").alias(f"p{round(q * 100)}") for q in QUANTILES),
        )
        .sort(list(by))
    )


def size_shares(jobs: pl.LazyFrame, by: Sequence[str] = ("source", "cluster")) -> pl.LazyFrame:
    """Per size bucket: share of GPU jobs and share of GPU time, plus the cumulative
    shares in bucket order (Helios Fig. 6).
    """
    base = with_job_class(jobs).filter(GPU_JOB.fill_null(False)).with_columns(gpu_time_s())
    per = (
        base.group_by([*by, "size_bucket"])
        .agg(pl.len().alias("jobs"), pl.col("gpu_time_s").sum())
        .with_columns(
            (pl.col("jobs") / pl.col("jobs").sum().over(list(by))).alias("job_share"),
            (pl.col("gpu_time_s") / pl.col("gpu_time_s").sum().over(list(by))).alias(
                "gpu_time_share"
            ),
            size_rank().alias("_order"),
        )
        .sort([*by, "_order"])
    )
    return per.with_columns(
        pl.col("job_share").cum_sum().over(list(by)).alias("cum_job_share"),
        pl.col("gpu_time_share").cum_sum().over(list(by)).alias("cum_gpu_time_share"),
    ).drop("_order")


class JobsView(StrEnum):
    """What ``analyze jobs`` shows."""

    quantiles = "quantiles"
    cdf = "cdf"
    sizes = "sizes"


#: ``--by`` value -> the column the durations are split by.
BY_KEYS = {"job_class": "job_class", "size": "size_bucket", "gpu_type": "gpu_type"}


@dataclass(frozen=True)
class JobsOptions:
    """`gpu-trace analyze jobs` options."""

    view: JobsView = option(
        JobsView.quantiles, "quantiles of run time, cdf at 2^i s, or sizes (job vs GPU-time share)."
    )
    by: str = option("job_class", "Split durations by job_class (GPU/CPU), size or gpu_type.")


def _run(inputs: Any, options: JobsOptions) -> pl.LazyFrame:
    choose("--by value", options.by, BY_KEYS)
    group = ("source", "cluster", BY_KEYS[options.by])
    if options.view is JobsView.sizes:
        return size_shares(inputs.jobs)
    if options.view is JobsView.cdf:
        return duration_cdf(inputs.jobs, by=group)
    return duration_quantiles(inputs.jobs, by=group)


PLUGIN = AnalysisPlugin(
    name="jobs",
    help="Job durations (GPU vs CPU jobs, by size or GPU type) and sizes.",
    run=_run,
    options=JobsOptions,
    title="Jobs",
    rank=60,
)
