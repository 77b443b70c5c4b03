"""Submission patterns: jobs (and GPUs requested) per local hour of day and day of week,
in each trace's own time zone (PAI's hidden-epoch times are right in Asia/Shanghai;
openb's relative times have no zone, so their "hours" are hours since trace start)."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl


def tz_by_source(jobs: pl.LazyFrame) -> dict[str, str | None]:
    """Each source's recorded time zone (null for relative-time sources)."""
    rows = jobs.group_by("source").agg(pl.col("source_tz").drop_nulls().first()).collect()
    return dict(zip(rows["source"].to_list(), rows["source_tz"].to_list(), strict=True))


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
    of all the group's submissions."""
    lf = jobs.filter(pl.col("submit_time").is_not_null()).with_columns(local_submit(tz_map))
    lf = lf.with_columns(
        pl.col("local_submit").dt.weekday().alias("weekday"),
        pl.col("local_submit").dt.hour().alias("hour"),
        pl.col("local_submit").dt.date().alias("date"),
    )
    # every calendar day of the group's span counts, including days without submissions
    days = (
        lf.group_by(list(base))
        .agg(pl.date_ranges(pl.col("date").min(), pl.col("date").max()).first().alias("date"))
        .explode("date")
        .group_by([*base, pl.col("date").dt.weekday().alias("weekday")])
        .agg(pl.len().alias("days"))
    )
    return (
        lf.group_by([*base, "weekday", "hour"])
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
    """Submissions per local hour of day (all days pooled) and their share."""
    lf = jobs.filter(pl.col("submit_time").is_not_null()).with_columns(
        local_submit(tz_map).dt.hour().alias("hour")
    )
    return (
        lf.group_by([*base, "hour"])
        .agg(pl.len().alias("jobs"))
        .with_columns((pl.col("jobs") / pl.col("jobs").sum().over(list(base))).alias("share"))
        .sort([*base, "hour"])
    )
