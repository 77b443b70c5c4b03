"""The backlog: GPU jobs waiting to start, over time and at the as-of instant.

A GPU job (``gpus > 0``) is **pending** from its submission until it first starts; a
job that never started is pending until it ended (cancelled while queued: Slurm prints
its ``End`` and no ``Start``), or, still queued, until the **as-of instant**. So at time
t a job is pending when ``submit_time <= t < coalesce(start_time, end_time)`` (no start
and no end: still pending). Waits of jobs still pending are *censored*: they are the wait
so far, ``as_of - submit_time``, and will only grow.

- :func:`backlog_series`: the step series of pending jobs and GPUs demanded: one row
  per change (a submission, a start, a cancellation while queued), the value holding
  until the next row; the last row is the as-of instant. Binned (``freq``), each bin's
  time-weighted mean, for charts.
- :func:`backlog_now`: per group, the jobs and GPUs pending at the as-of instant and
  their waits so far.
- :func:`longest_waits`: the jobs pending at the as-of instant, longest wait first.

The **as-of instant** is given, or per source and cluster the latest time the jobs
record (``as_of_time`` where the loader wrote it, submit, start and end times): the
moment the export was taken, as far as it says. Jobs submitted after it are not counted.

Groups (``--by``): ``cluster``, ``partition`` (the jobs' ``vc``: Slurm's partition,
Kubernetes' namespace), ``vc`` (the same column, under its own name), ``user``, ``gpus``
(the job-size buckets of :func:`gpu_trace.analyses.definitions.size_bucket`).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import polars as pl

from gpu_trace.analyses.definitions import GPU_JOB, freq_to_polars, size_bucket, size_rank
from gpu_trace.plugins import AnalysisPlugin, option
from gpu_trace.values import choose

BY_CHOICES = ("cluster", "partition", "vc", "user", "gpus")
BASE = ("source", "cluster")
TS = pl.Datetime("us", "UTC")
TOP_N = 10


def _group(by: str) -> tuple[list[pl.Expr], list[str]]:
    """The column(s) ``by`` adds to the source and cluster, as expressions and names."""
    if by not in BY_CHOICES:
        msg = f"by must be one of {', '.join(BY_CHOICES)}"
        raise ValueError(msg)
    if by == "cluster":
        return [], []
    if by == "partition":
        return [pl.col("vc").alias("partition")], ["partition"]
    if by == "gpus":
        return [size_bucket()], ["size_bucket"]
    return [pl.col(by)], [by]


def as_of_instants(jobs: pl.LazyFrame, as_of: dt.datetime | None = None) -> pl.LazyFrame:
    """``source, cluster, as_of``: the given instant, or each cluster's latest recorded
    time (module docstring).
    """
    names = jobs.collect_schema().names()
    times = [c for c in ("as_of_time", "submit_time", "start_time", "end_time") if c in names]
    clusters = jobs.select(*BASE).unique()
    if as_of is not None:
        return clusters.with_columns(pl.lit(as_of).cast(TS).alias("as_of"))
    return jobs.group_by(*BASE).agg(
        pl.max_horizontal([pl.col(c).max() for c in times]).cast(TS).alias("as_of")
    )


def pending_intervals(
    jobs: pl.LazyFrame, as_of: dt.datetime | None = None, by: str = "cluster"
) -> pl.LazyFrame:
    """One row per GPU job pending for some time up to the as-of instant: ``source,
    cluster, [group,] job_id, user, vc, gpus, submit_time, pending_end, as_of,
    still_pending`` (``pending_end`` = when it stopped waiting, or the as-of instant).
    """
    group, _ = _group(by)
    out_of_queue = pl.coalesce("start_time", "end_time")
    return (
        jobs.filter(GPU_JOB.fill_null(False) & pl.col("submit_time").is_not_null())
        .join(as_of_instants(jobs, as_of), on=list(BASE), how="inner", nulls_equal=True)
        .filter(pl.col("submit_time") <= pl.col("as_of"))
        .with_columns(
            (out_of_queue.is_null() | (out_of_queue > pl.col("as_of"))).alias("still_pending"),
        )
        .with_columns(
            pl.when(pl.col("still_pending"))
            .then(pl.col("as_of"))
            .otherwise(out_of_queue)
            .alias("pending_end"),
            *group,
        )
        # a job submitted at the as-of instant itself is pending then (wait 0): the
        # latest submission often *is* the as-of instant
        .filter((pl.col("pending_end") > pl.col("submit_time")) | pl.col("still_pending"))
    )


def backlog_series(
    jobs: pl.LazyFrame,
    by: str = "cluster",
    *,
    as_of: dt.datetime | None = None,
    freq: str | None = None,
) -> pl.LazyFrame:
    """Pending GPU jobs and GPUs demanded over time: ``source, cluster, [group,] time,
    pending_jobs, pending_gpus``.

    Without ``freq``, the exact step series: one row per instant the backlog changes,
    holding until the next row; the last row of each group is its as-of instant (the
    backlog then). With ``freq`` (``1h``, ``10min``, ...), each bin's time-weighted mean
    (:func:`_binned`), for charts of long series.
    """
    _, names = _group(by)
    keys = [*BASE, *names]
    iv = pending_intervals(jobs, as_of, by)
    if freq is not None:
        return _binned(iv, keys, freq)
    ended = iv.filter(~pl.col("still_pending"))
    events = pl.concat(
        [
            iv.select(*keys, pl.col("submit_time").alias("time"), pl.lit(1).alias("dj"), "gpus"),
            ended.select(
                *keys, pl.col("pending_end").alias("time"), pl.lit(-1).alias("dj"), -pl.col("gpus")
            ),
            # the as-of instant closes every group's series
            iv.group_by(keys)
            .agg(pl.col("as_of").first().alias("time"))
            .select(*keys, "time", pl.lit(0).alias("dj"), pl.lit(0.0).alias("gpus")),
        ]
    )
    return (
        events.group_by([*keys, "time"])
        .agg(pl.col("dj").sum(), pl.col("gpus").sum())
        .sort([*keys, "time"], nulls_last=True)
        .with_columns(
            pl.col("dj").cum_sum().over(keys).alias("pending_jobs"),
            # sums of whole and fractional GPU counts, rounded back from float noise
            pl.col("gpus").cum_sum().over(keys).round(6).alias("pending_gpus"),
        )
        .select(*keys, "time", "pending_jobs", "pending_gpus")
    )


def _binned(iv: pl.LazyFrame, keys: list[str], freq: str) -> pl.LazyFrame:
    """Time-weighted mean pending jobs and GPUs per ``freq`` bin, in one sweep of the
    pending intervals (the method of :func:`gpu_trace.analyses.occupancy.allocation`:
    +1 / +gpus at submission, -1 / -gpus when the wait ends, bin edges as zero events,
    each step weighted by its length within the bin). Bins run from the first submission
    to the as-of instant.
    """
    every, seconds = freq_to_polars(freq)
    zero = [pl.lit(0.0).alias("dj"), pl.lit(0.0).alias("dg")]
    events = pl.concat(
        [
            iv.select(*keys, pl.col("submit_time").alias("t"), pl.lit(1.0).alias("dj"),
                      pl.col("gpus").cast(pl.Float64).alias("dg")),
            iv.select(*keys, pl.col("pending_end").alias("t"), pl.lit(-1.0).alias("dj"),
                      (-pl.col("gpus")).cast(pl.Float64).alias("dg")),
            iv.group_by(keys)
            .agg(
                pl.col("submit_time").min().dt.truncate(every).alias("lo"),
                pl.col("pending_end").max().alias("hi"),
            )
            .select(
                *keys,
                pl.datetime_ranges("lo", "hi", every, time_unit="us", time_zone="UTC").alias("t"),
            )
            .explode("t")
            .with_columns(zero),
        ]
    )  # fmt: skip
    steps = (
        events.group_by([*keys, "t"])
        .agg(pl.col("dj").sum(), pl.col("dg").sum())
        .sort([*keys, "t"], nulls_last=True)
        .with_columns(
            pl.col("dj").cum_sum().over(keys).alias("jobs"),
            pl.col("dg").cum_sum().over(keys).alias("gpus"),
            (pl.col("t").shift(-1).over(keys) - pl.col("t"))
            .dt.total_microseconds()
            .truediv(1e6)
            .alias("dur_s"),
            pl.col("t").dt.truncate(every).alias("time"),
        )
    )
    return (
        steps.group_by([*keys, "time"])
        .agg(
            (pl.col("jobs").clip(lower_bound=0) * pl.col("dur_s")).sum().truediv(seconds)
            .alias("pending_jobs"),
            (pl.col("gpus").clip(lower_bound=0) * pl.col("dur_s")).sum().truediv(seconds)
            .alias("pending_gpus"),
        )
        .sort([*keys, "time"], nulls_last=True)
    )  # fmt: skip


def backlog_now(
    jobs: pl.LazyFrame, by: str = "cluster", *, as_of: dt.datetime | None = None
) -> pl.LazyFrame:
    """Per group, the backlog at the as-of instant: ``source, cluster, [group,] as_of,
    pending_jobs, pending_gpus, longest_wait_s, median_wait_s`` (waits so far: censored).
    """
    _, names = _group(by)
    keys = [*BASE, *names]
    wait = (pl.col("as_of") - pl.col("submit_time")).dt.total_microseconds() / 1e6
    out = (
        pending_intervals(jobs, as_of, by)
        .filter(pl.col("still_pending"))
        .with_columns(wait.alias("wait_s"))
        .group_by(keys)
        .agg(
            pl.col("as_of").first(),
            pl.len().alias("pending_jobs"),
            pl.col("gpus").sum().round(6).alias("pending_gpus"),
            pl.col("wait_s").max().alias("longest_wait_s"),
            pl.col("wait_s").median().alias("median_wait_s"),
        )
    )
    if names == ["size_bucket"]:
        return out.sort([*BASE, size_rank()])
    return out.sort(keys, nulls_last=True)


def longest_waits(
    jobs: pl.LazyFrame, *, as_of: dt.datetime | None = None, top: int = TOP_N
) -> pl.LazyFrame:
    """The ``top`` jobs pending at the as-of instant per source and cluster, longest
    wait first: ``source, cluster, job_id, user, vc, gpus, submit_time, as_of, wait_s``.
    """
    wait = (pl.col("as_of") - pl.col("submit_time")).dt.total_microseconds() / 1e6
    return (
        pending_intervals(jobs, as_of)
        .filter(pl.col("still_pending"))
        .with_columns(wait.alias("wait_s"))
        .sort([*BASE, "wait_s", "job_id"], descending=[False, False, True, False])
        .filter(pl.int_range(pl.len()).over(list(BASE)) < top)
        .select(*BASE, "job_id", "user", "vc", "gpus", "submit_time", "as_of", "wait_s")
    )


class View(StrEnum):
    """What ``analyze backlog`` shows."""

    now = "now"
    series = "series"
    longest = "longest"


@dataclass(frozen=True)
class BacklogOptions:
    """`gpu-trace analyze backlog` options."""

    view: View = option(
        View.now,
        "now (pending jobs and GPUs at the as-of instant, per group), series (the step "
        "series over time: one row per change) or longest (the longest current waits).",
    )
    by: str = option("cluster", "cluster, partition, vc, user or gpus (size bucket).")
    freq: str | None = option(
        None, "With --view series: time-weighted mean per bin (1min, 10min, 1h, 1d)."
    )
    top: int = option(TOP_N, "With --view longest: jobs listed per cluster.")


def _run(inputs: Any, options: BacklogOptions) -> pl.LazyFrame:
    from gpu_trace.errors import UsageError

    choose("--by value", options.by, BY_CHOICES)
    if options.top < 1:
        msg = f"--top {options.top}: give a positive number of jobs"
        raise UsageError(msg)
    if options.freq is not None and options.view is not View.series:
        msg = "--freq bins the series: give it with --view series"
        raise UsageError(msg)
    if options.freq is not None:
        try:
            freq_to_polars(options.freq)
        except ValueError as exc:
            msg = f"--freq {exc}"
            raise UsageError(msg) from None
    # --as-of is the scope option every command takes; without it each cluster's
    # latest recorded time (the rule of the scope's as-of instant, per cluster)
    as_of = inputs.scope.as_of
    if options.view is View.series:
        return backlog_series(inputs.jobs, options.by, as_of=as_of, freq=options.freq)
    if options.view is View.longest:
        return longest_waits(inputs.jobs, as_of=as_of, top=options.top)
    return backlog_now(inputs.jobs, options.by, as_of=as_of)


GLOSSARY = {
    "pending_jobs": (
        "pending jobs",
        "GPU jobs submitted and not yet started (nor ended) at the time; binned: mean",
    ),
    "pending_gpus": (
        "GPUs pending",
        "GPUs requested by the pending jobs at the time; binned: time-weighted mean",
    ),
    "as_of": ("as of", "the instant the backlog is read at (given, or latest recorded)"),
    "longest_wait_s": ("longest wait so far", "as_of - submit_time of the oldest pending job"),
    "median_wait_s": ("median wait so far", "median of as_of - submit_time (censored)"),
    "wait_s": ("wait so far", "as_of - submit_time: censored, the job is still waiting"),
    "partition": ("partition", "the jobs' vc column (Slurm partition, namespace)"),
}


PLUGIN = AnalysisPlugin(
    name="backlog",
    help="Pending GPU jobs and GPUs demanded: at the as-of instant by partition, VC, user "
    "or GPU size, over time, and the longest current waits.",
    run=_run,
    options=BacklogOptions,
    title="Backlog",
    glossary=GLOSSARY,
    rank=35,
)
