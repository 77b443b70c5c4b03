"""Submission patterns: jobs (and GPUs requested) per local hour of day and day of week,
in each trace's own time zone (PAI's hidden-epoch times are right in Asia/Shanghai).

Relative-time traces (openb, imported simulator traces: no zone, 1970-01-01 = trace
start) have no clock or calendar: their ``hour`` is hours since trace start mod 24 and
their ``weekday`` days since trace start mod 7 + 1 (1 = the first day), and every output
row says which in its ``clock`` column, so they are never read as local time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from gpu_trace.plugins import AnalysisPlugin, option


def tz_by_source(jobs: pl.LazyFrame) -> dict[str, str | None]:
    """Each source's recorded time zone (null for relative-time sources)."""
    rows = jobs.group_by("source").agg(pl.col("source_tz").drop_nulls().first()).collect()
    return dict(zip(rows["source"].to_list(), rows["source_tz"].to_list(), strict=True))


CLOCK_LOCAL = "local time"
CLOCK_SINCE_START = "since trace start"


def relative_sources(tz_map: dict[str, str | None]) -> list[str]:
    """Sources without a time zone: their times are offsets from the trace start."""
    return sorted(s for s, tz in tz_map.items() if not tz)


def clock(tz_map: dict[str, str | None]) -> pl.Expr:
    """``clock``: what ``hour`` / ``weekday`` mean for the row's source."""
    rel = pl.col("source").is_in(relative_sources(tz_map))
    return (
        pl.when(rel).then(pl.lit(CLOCK_SINCE_START)).otherwise(pl.lit(CLOCK_LOCAL)).alias("clock")
    )


def weekday_of(date: pl.Expr, tz_map: dict[str, str | None]) -> pl.Expr:
    """Local weekday (1 = Monday) of a date; for relative sources, days since trace
    start mod 7 + 1 (1970-01-01 is the start, not a Thursday).
    """
    rel = pl.col("source").is_in(relative_sources(tz_map))
    since = (date.cast(pl.Int64) % 7 + 1).cast(pl.Int8)
    return pl.when(rel).then(since).otherwise(date.dt.weekday().cast(pl.Int8))


def local_submit(tz_map: dict[str, str | None]) -> pl.Expr:
    """``submit_time`` as a naive local datetime in the job's source time zone."""
    expr: pl.Expr = pl.col("submit_time").dt.replace_time_zone(None)
    for source, tz in tz_map.items():
        if tz:
            local = pl.col("submit_time").dt.convert_time_zone(tz).dt.replace_time_zone(None)
            expr = pl.when(pl.col("source") == source).then(local).otherwise(expr)
    return expr.alias("local_submit")


def arrivals(
    jobs: pl.LazyFrame, tz_map: dict[str, str | None], base: Sequence[str] = ("source", "cluster")
) -> pl.LazyFrame:
    """Mean submissions per (local weekday, hour): counts divided by the number of such
    weekdays in each group's span (days without submissions included), plus the share
    of all the group's submissions.
    """
    lf = jobs.filter(pl.col("submit_time").is_not_null()).with_columns(local_submit(tz_map))
    lf = lf.with_columns(
        pl.col("local_submit").dt.hour().alias("hour"),
        pl.col("local_submit").dt.date().alias("date"),
        clock(tz_map),
    ).with_columns(weekday_of(pl.col("date"), tz_map).alias("weekday"))
    # every calendar day of the group's span counts, including days without submissions
    days = (
        lf.group_by(list(base))
        .agg(
            pl.date_ranges(pl.col("date").min(), pl.col("date").max()).first().alias("date"),
            *([] if "source" in base else [pl.col("source").first()]),
        )
        .explode("date")
        .with_columns(weekday_of(pl.col("date"), tz_map).alias("weekday"))
        .group_by([*base, "weekday"])
        .agg(pl.len().alias("days"))
    )
    return (
        lf.group_by([*base, "clock", "weekday", "hour"])
        .agg(pl.len().alias("jobs"), pl.col("gpus").sum().alias("gpus_requested"))
        .join(days, on=[*base, "weekday"])
        .with_columns(
            (pl.col("jobs") / pl.col("days")).alias("jobs_per_hour"),
            (pl.col("jobs") / pl.col("jobs").sum().over(list(base))).alias("share"),
        )
        .sort([*base, "weekday", "hour"])
    )


def hourly_profile(
    jobs: pl.LazyFrame, tz_map: dict[str, str | None], base: Sequence[str] = ("source", "cluster")
) -> pl.LazyFrame:
    """Submissions per local hour of day (all days pooled) and their share; ``clock``
    says whether ``hour`` is local or hours since trace start (relative-time traces).
    """
    lf = jobs.filter(pl.col("submit_time").is_not_null()).with_columns(
        local_submit(tz_map).dt.hour().alias("hour"), clock(tz_map)
    )
    return (
        lf.group_by([*base, "clock", "hour"])
        .agg(pl.len().alias("jobs"))
        .with_columns((pl.col("jobs") / pl.col("jobs").sum().over(list(base))).alias("share"))
        .sort([*base, "hour"])
    )


@dataclass(frozen=True)
class ArrivalsOptions:
    """`gpu-trace analyze arrivals` options."""

    weekly: bool = option(False, "Weekday x hour instead of hour of day.")


def _run(inputs: Any, options: ArrivalsOptions) -> pl.LazyFrame:
    # A job arrives at its submission: in a window, only the jobs submitted in it.
    jobs = inputs.scope.submitted(inputs.jobs)
    if options.weekly:
        return arrivals(jobs, inputs.tz)
    return hourly_profile(jobs, inputs.tz)


# No chart of its own: the report draws the weekly heatmap in its own section.
PLUGIN = AnalysisPlugin(
    name="arrivals",
    help="Submissions per local hour of day (and day of week), in each trace's time zone; "
    "relative-time traces count hours / days since trace start (`clock` column).",
    run=_run,
    options=ArrivalsOptions,
)
