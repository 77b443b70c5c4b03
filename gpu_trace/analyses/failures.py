"""Failures: final-status mix of jobs and of GPU time, GPU time lost to failed and
cancelled jobs by size / user / VC, attempts (retries) and time to failure."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from gpu_trace.analyses.definitions import GPU_JOB, gpu_time_s, size_bucket, size_rank, status_class

BY_CHOICES = ("gpus", "user", "vc", "status")


def status_mix(
    jobs: pl.LazyFrame, by: str = "status", base: Sequence[str] = ("source", "cluster")
) -> pl.LazyFrame:
    """Per group (and ``by``: size bucket, user or vc) and final-status class: jobs,
    GPU hours, and their shares within the group; ``lost_gpu_hours`` sums the failed and
    cancelled classes."""
    if by not in BY_CHOICES:
        raise ValueError(f"by must be one of {BY_CHOICES}")
    lf = jobs.with_columns(status_class(), gpu_time_s())
    keys = list(base)
    if by == "gpus":
        lf = lf.with_columns(size_bucket())
        keys.append("size_bucket")
    elif by in ("user", "vc"):
        keys.append(by)
    out = (
        lf.group_by([*keys, "status_class"])
        .agg(
            pl.len().alias("jobs"),
            GPU_JOB.fill_null(False).sum().alias("gpu_jobs"),
            (pl.col("gpu_time_s").sum() / 3600).alias("gpu_hours"),
        )
        .with_columns(
            (pl.col("jobs") / pl.col("jobs").sum().over(keys)).alias("job_share"),
            (pl.col("gpu_hours") / pl.col("gpu_hours").sum().over(keys))
            .fill_nan(None)
            .alias("gpu_time_share"),
        )
    )
    if by == "gpus":
        return out.sort([*base, size_rank(), "status_class"])
    return out.sort([*keys, "status_class"], nulls_last=True)


def lost_gpu_time(
    jobs: pl.LazyFrame, by: str = "gpus", base: Sequence[str] = ("source", "cluster")
) -> pl.LazyFrame:
    """GPU hours spent by jobs that ended failed or cancelled, per ``by`` group, with their
    share of all GPU hours of the group."""
    mix = status_mix(jobs, by=by, base=base)
    keys = [c for c in mix.collect_schema().names() if c in (*base, "size_bucket", "user", "vc")]
    return (
        mix.group_by(keys)
        .agg(
            pl.col("gpu_hours")
            .filter(pl.col("status_class") == "failed")
            .sum()
            .alias("failed_gpu_hours"),
            pl.col("gpu_hours")
            .filter(pl.col("status_class") == "cancelled")
            .sum()
            .alias("cancelled_gpu_hours"),
            pl.col("gpu_hours").sum().alias("gpu_hours"),
        )
        .with_columns(
            ((pl.col("failed_gpu_hours") + pl.col("cancelled_gpu_hours")) / pl.col("gpu_hours"))
            .fill_nan(None)
            .alias("lost_share")
        )
        .sort([size_rank() if k == "size_bucket" else pl.col(k) for k in keys])
    )


def attempts(jobs: pl.LazyFrame, base: Sequence[str] = ("source", "cluster")) -> pl.LazyFrame:
    """Jobs by number of attempts and final status class (retries show as attempts > 1)."""
    return (
        jobs.with_columns(status_class())
        .group_by([*base, "attempts", "status_class"])
        .agg(pl.len().alias("jobs"))
        .with_columns((pl.col("jobs") / pl.col("jobs").sum().over(list(base))).alias("share"))
        .sort([*base, "attempts", "status_class"], nulls_last=True)
    )


def time_to_failure(
    jobs: pl.LazyFrame, base: Sequence[str] = ("source", "cluster")
) -> pl.LazyFrame:
    """Run time before failure of failed GPU jobs: quantiles per group and size bucket."""
    lf = jobs.with_columns(status_class(), size_bucket()).filter(
        (pl.col("status_class") == "failed")
        & GPU_JOB.fill_null(False)
        & pl.col("run_s").is_not_null()
    )
    c = pl.col("run_s")
    return (
        lf.group_by([*base, "size_bucket"])
        .agg(
            pl.len().alias("jobs"),
            c.median().alias("median_s"),
            c.quantile(0.9, interpolation="linear").alias("p90_s"),
            c.mean().alias("mean_s"),
        )
        .sort([*base, size_rank()])
    )


def xid_events(events: pl.LazyFrame) -> pl.LazyFrame:
    """XID error counts per source, cluster and code (from telemetry ``events``)."""
    return (
        events.filter(pl.col("kind") == "xid")
        .group_by("source", "cluster", "code")
        .agg(pl.len().alias("events"), pl.col("host").n_unique().alias("hosts"))
        .sort("source", "cluster", "events", descending=[False, False, True])
    )
