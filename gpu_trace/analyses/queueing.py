"""Queueing delay: by requested GPUs, VC, GPU type and hour of submission; queueing as a
share of completion time; and Philly's per-attempt requeue gaps (every wait before an
attempt counts, as in the Philly paper's Fig. 3).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from gpu_trace.analyses.definitions import GPU_JOB, size_bucket, size_rank
from gpu_trace.analyses.grouping import GROUP_BY, with_group
from gpu_trace.errors import GpuTraceError, InputWarning
from gpu_trace.plugins import AnalysisPlugin, option
from gpu_trace.values import choose

BY_CHOICES = ("gpus", "vc", "gpu_type", "hour", "account", "qos", "partition", "user")


def _stats(col: str) -> list[pl.Expr]:
    c = pl.col(col)
    return [
        pl.len().alias("jobs"),
        c.mean().alias("mean_s"),
        c.median().alias("median_s"),
        c.quantile(0.9, interpolation="linear").alias("p90_s"),
        c.quantile(0.99, interpolation="linear").alias("p99_s"),
        c.max().alias("max_s"),
        (c == 0).mean().alias("zero_wait_share"),
        pl.col("wait_censored").sum().alias("censored_jobs"),
    ]


def _waits(jobs: pl.LazyFrame) -> pl.LazyFrame:
    """Each job's wait as ``queue_s`` and whether it is censored (``wait_censored``).

    Clipped jobs (:meth:`gpu_trace.analyses.scope.Scope.clip`) carry ``wait_s``: the
    wait of a job still pending at the as-of instant so far, a lower bound of its wait
    (censored). Leaving those jobs out would drop exactly the longest waits (a 32-GPU
    job pending for 9 h), so they count, and every row says how many it holds.
    Unclipped jobs have only finished waits.
    """
    names = jobs.collect_schema().names()
    if "wait_s" not in names:
        return jobs.with_columns(pl.lit(False).alias("wait_censored"))
    return jobs.with_columns(
        pl.col("wait_s").alias("queue_s"), pl.col("wait_censored").fill_null(False)
    )


def queue_by(
    jobs: pl.LazyFrame,
    by: str = "gpus",
    *,
    base: Sequence[str] = ("source", "cluster"),
    tz_by_source: dict[str, str | None] | None = None,
    gpu_only: bool = True,
) -> pl.LazyFrame:
    """Queueing-delay statistics per group. ``by``: ``gpus`` (size bucket),
    ``gpu_type``, ``hour`` (local hour of submission, in each source's time zone) or an
    accounting key (``account``, ``qos``, ``partition``, ``user``, ``vc``: a column of
    ``jobs``, see :func:`gpu_trace.analyses.grouping.with_group`).
    """
    if by not in BY_CHOICES:
        msg = f"by must be one of {BY_CHOICES}"
        raise ValueError(msg)
    lf = _waits(jobs).filter(pl.col("queue_s").is_not_null())
    if gpu_only:
        lf = lf.filter(GPU_JOB.fill_null(False))
    if by == "gpus":
        lf, key = lf.with_columns(size_bucket()), "size_bucket"
    elif by == "hour":
        from gpu_trace.analyses.arrivals import local_submit

        lf, key = lf.with_columns(local_submit(tz_by_source or {}).dt.hour().alias("hour")), "hour"
    else:
        key = by
    out = lf.group_by([*base, key]).agg(_stats("queue_s"))
    if key == "size_bucket":
        return out.sort([*base, size_rank()])
    return out.sort([*base, key], nulls_last=True)


def queue_share(jobs: pl.LazyFrame, base: Sequence[str] = ("source", "cluster")) -> pl.LazyFrame:
    """Queueing as a share of completion time, ``queue_s / (queue_s + run_s)``, split at
    the group's median run time into short and long jobs (PAI Fig. 4b).
    """
    lf = jobs.filter(
        GPU_JOB.fill_null(False) & pl.col("queue_s").is_not_null() & pl.col("run_s").is_not_null()
    ).with_columns(
        (pl.col("queue_s") / (pl.col("queue_s") + pl.col("run_s")))
        .fill_nan(0.0)
        .alias("queue_share"),
        pl.when(pl.col("run_s") <= pl.col("run_s").median().over(list(base)))
        .then(pl.lit("short 50%"))
        .otherwise(pl.lit("long 50%"))
        .alias("half"),
    )
    c = pl.col("queue_share")
    return (
        lf.group_by([*base, "half"])
        .agg(pl.len().alias("jobs"), c.mean().alias("mean"), c.median().alias("median"))
        .sort([*base, "half"])
    )


def requeue_gaps(jobs: pl.LazyFrame, placements: pl.LazyFrame) -> pl.LazyFrame:
    """One row per wait before an attempt: the initial wait (submit -> first start) and
    every requeue gap (end of attempt k -> start of attempt k+1). Columns: ``source,
    cluster, vc, job_id, attempt, kind, wait_s``.
    """
    attempts = (
        placements.group_by("source", "cluster", "job_id", "attempt")
        .agg(pl.col("start_time").min(), pl.col("end_time").max())
        .sort("source", "cluster", "job_id", "attempt")
        .with_columns(
            pl.col("end_time").shift(1).over("source", "cluster", "job_id").alias("prev_end")
        )
        .join(
            jobs.select("source", "cluster", "job_id", "vc", "submit_time"),
            on=["source", "cluster", "job_id"],
            how="left",
        )
    )
    prev = pl.when(pl.col("attempt") == pl.col("attempt").min().over("source", "cluster", "job_id"))
    return attempts.select(
        "source",
        "cluster",
        "vc",
        "job_id",
        "attempt",
        prev.then(pl.lit("initial")).otherwise(pl.lit("requeue")).alias("kind"),
        (
            prev.then(pl.col("start_time") - pl.col("submit_time")).otherwise(
                pl.col("start_time") - pl.col("prev_end")
            )
        )
        .dt.total_microseconds()
        .truediv(1e6)
        .alias("wait_s"),
    ).filter(pl.col("wait_s").is_not_null())


@dataclass(frozen=True)
class QueueingOptions:
    """`gpu-trace analyze queueing` options."""

    by: str = option("gpus", "gpus, gpu_type, hour, account, qos, partition, user or vc.")
    requeue: bool = option(False, "Per-attempt waits (Philly requeue gaps).")


def _run(inputs: Any, options: QueueingOptions) -> pl.LazyFrame | pl.DataFrame:
    choose("--by value", options.by, BY_CHOICES)
    if options.requeue:
        gaps = requeue_gaps(inputs.jobs, inputs.placements)
        frame = gaps.group_by("source", "cluster", "vc", "kind").agg(
            pl.len().alias("waits"),
            pl.col("wait_s").mean().alias("mean_s"),
            pl.col("wait_s").median().alias("median_s"),
        )
        return frame.sort("source", "cluster", "vc", "kind", nulls_last=True)
    # pending jobs count with their wait so far (censored), running ones as started
    jobs = inputs.clipped_jobs
    jobs = with_group(jobs, options.by) if options.by in GROUP_BY else jobs
    try:
        table = queue_by(jobs, options.by, tz_by_source=inputs.tz).collect()
    except ValueError as exc:
        raise GpuTraceError(str(exc)) from None
    if note := censored_note(table):
        warnings.warn(note, InputWarning, stacklevel=2)
    return table


def censored_note(table: pl.DataFrame) -> str | None:
    """The note a queueing table needs when its percentiles include censored waits
    (jobs still pending at the as-of instant: their waits so far are lower bounds).
    """
    if "censored_jobs" not in table.columns:
        return None
    censored = int(table["censored_jobs"].sum() or 0)
    if not censored:
        return None
    rows = int((table["censored_jobs"] > 0).sum())
    return (
        f"the waits of {censored} job(s) still pending at the as-of instant are included "
        f"so far (censored: lower bounds) in the statistics of {rows} row(s); "
        "see column censored_jobs"
    )


PLUGIN = AnalysisPlugin(
    name="queueing",
    help="Queueing delay of GPU jobs by requested GPUs, GPU type, hour of submission, or "
    "account / QoS / partition / user / VC.",
    run=_run,
    options=QueueingOptions,
    title="Queueing",
    glossary={
        "censored_jobs": (
            "censored waits",
            "jobs still pending at the as-of instant, counted with their wait so far (a lower "
            "bound: statistics over them are lower bounds too)",
        )
    },
    rank=30,
)
