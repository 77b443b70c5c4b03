"""``sreport``-style tables: one row per day, week or month (``--period``).

Slurm's ``sreport cluster utilization`` answers "how much of the cluster was allocated
each day / week / month"; :func:`allocation_by_period` answers it from the allocation
series (:func:`gpu_trace.analyses.occupancy.occupancy`, hourly bins), so the capacity it
divides by is the one every allocation figure uses. :func:`gpu_hours_by_period` splits
each job's run (already clipped to the as-of instant and the window,
:meth:`gpu_trace.analyses.scope.Scope.clip`) at period boundaries, for per-user or
per-account GPU-hours per period (``sreport user topusage``).

Periods are in each source's own time zone (a day is the cluster's local day, as for
sreport); relative-time sources count from the trace start. A week starts on Monday.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from gpu_trace.analyses.occupancy import local_time
from gpu_trace.analyses.scope import PERIOD_EVERY

BIN = "1h"
"""Bin width of the allocation series summed per period: periods start on whole local
hours in every zone with a whole-hour offset."""


def allocation_by_period(
    series: pl.LazyFrame,
    period: str,
    tz_by_source: dict[str, str | None],
    keys: Sequence[str] = ("source", "cluster"),
) -> pl.LazyFrame:
    """Per ``keys`` and period, from an hourly allocation series (``time``,
    ``allocated_gpus``, ``capacity_gpus``): ``period`` (its first local day),
    ``allocated_gpu_hours``, ``capacity_gpu_hours`` (installed GPUs x the whole hours of
    the period the series covers, from the hour of the first job start to as-of or the
    window's end; null where capacity is unknown for any hour of it) and
    ``allocation_pct``.
    """
    every = PERIOD_EVERY[period]
    cap = pl.col("capacity_gpus")
    # The series' last bin starts at its last instant when that falls on a bin edge
    # (an export printed at 12:00:00): a bin of zero length, whose capacity would count
    # a whole hour. Any other last bin holds the jobs that end in it, so it is never 0.
    last = (pl.col("time") == pl.col("time").max().over(list(keys))) & (
        pl.col("allocated_gpus") == 0
    )
    return (
        series.filter(~last)
        .with_columns(local_time(tz_by_source))
        .with_columns(pl.col("local_time").dt.truncate(every).dt.date().alias("period"))
        .group_by([*keys, "period"])
        .agg(
            pl.col("allocated_gpus").sum().alias("allocated_gpu_hours"),
            pl.when(cap.null_count() == 0).then(cap.sum()).alias("capacity_gpu_hours"),
        )
        .with_columns(
            (100 * pl.col("allocated_gpu_hours") / pl.col("capacity_gpu_hours")).alias(
                "allocation_pct"
            )
        )
        .sort([*keys, "period"])
    )


def gpu_hours_by_period(
    jobs: pl.LazyFrame,
    period: str,
    tz_by_source: dict[str, str | None],
    keys: Sequence[str] = ("source", "cluster"),
) -> pl.LazyFrame:
    """GPU-hours per ``keys`` and period: each job's ``[start_time, end_time)`` (clipped
    jobs: a running one ends at as-of) times ``gpus``, split at the local period
    boundaries. Columns ``*keys, period, jobs`` (jobs that ran in it), ``gpu_hours``.
    """
    every = PERIOD_EVERY[period]
    runs = jobs.filter(
        (pl.col("gpus") > 0)
        & pl.col("start_time").is_not_null()
        & pl.col("end_time").is_not_null()
        & (pl.col("end_time") > pl.col("start_time"))
    )
    zoned = {s: tz or "UTC" for s, tz in tz_by_source.items()}
    parts = [
        _split(runs.filter(pl.col("source") == s), every, zone, keys) for s, zone in zoned.items()
    ]
    parts.append(_split(runs.filter(~pl.col("source").is_in(list(zoned))), every, "UTC", keys))
    return (
        pl.concat(parts)
        .group_by([*keys, "period"])
        .agg(pl.col("jobs").sum(), pl.col("gpu_hours").sum())
        .sort([*keys, "period"])
    )


def _split(runs: pl.LazyFrame, every: str, zone: str, keys: Sequence[str]) -> pl.LazyFrame:
    """GPU-hours of ``runs`` per period of the time zone ``zone`` (calendar periods in
    that zone: a day across a clock change is 23 or 25 hours long).
    """
    start = pl.col("start_time").dt.convert_time_zone(zone)
    end = pl.col("end_time").dt.convert_time_zone(zone)
    p = pl.col("_p")
    hours = (
        (pl.min_horizontal(end, p.dt.offset_by(every)) - pl.max_horizontal(start, p))
        .dt.total_microseconds()
        .truediv(3.6e9)
    )
    return (
        runs.with_columns(pl.datetime_ranges(start.dt.truncate(every), end, every).alias("_p"))
        .explode("_p")
        .with_columns(hours.alias("_h"))
        .filter(pl.col("_h") > 0)
        .group_by([*keys, p.dt.date().alias("period")])
        .agg(pl.len().alias("jobs"), (pl.col("_h") * pl.col("gpus")).sum().alias("gpu_hours"))
    )
