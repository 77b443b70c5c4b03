"""What every serving analysis shares: the trace key, time bases and the caveats that
say when a number cannot be trusted.

A serving trace's ``requests`` rows carry their own time basis (:mod:`gpu_trace.schemas.
requests`): Azure's arrivals are absolute; Mooncake's, BurstGPT's and GenTD26's are
offsets from the trace's start (1970-01-01Z + offset). Differences (inter-arrival times,
rates, think times) are exact on every basis; clock and calendar (hour of day, day of
week) are not, except BurstGPT's hour of day, which counts from local midnight of its
first day. Each output row says so in a ``caveat`` column instead of printing a profile
that reads like a measured one.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from gpu_trace.analyses.definitions import freq_to_polars

TRACE = ("source", "dataset")
"""A serving trace: one dataset of one source (the analyses' default grouping)."""

MIN_FIT = 50
"""Samples below which a distribution fit, a correlation or a percentile tail is
flagged as not to be trusted (a KS test on fewer has little power)."""

MIN_WINDOWS = 10
"""Windows below which an index of dispersion is flagged (a variance of a handful of
counts)."""

COMMON_GLOSSARY: dict[str, tuple[str, str]] = {
    "requests": ("requests", "Serving requests counted in the row."),
    "caveat": ("caveat", "Why the row's numbers may not be trusted (null: no known reason)."),
}
"""Columns every serving analysis writes, with one meaning (the report's headers are
one flat glossary)."""

CLOCK_LOCAL = "local time"
CLOCK_DAY_ONE = "local time of day (day 1 = first day)"
CLOCK_SINCE_START = "since trace start"

RELATIVE_TIME = "relative time: bin start is 1970-01-01 + the offset from the trace's start"

NO_CLOCK = "no absolute time, diurnal profile not meaningful"
NO_CALENDAR = "no calendar date, weekly profile not meaningful"


def clock() -> pl.Expr:
    """What a request's hour / weekday mean: ``local time`` (absolute arrivals, read in
    ``source_tz``), ``local time of day`` (BurstGPT: seconds since 0:00 local of the
    first day, so the hour is real, the weekday is not) or ``since trace start``.
    """
    return (
        pl.when(pl.col("time_basis") != "relative")
        .then(pl.lit(CLOCK_LOCAL))
        .when(pl.col("arrival_raw_unit") == "s_since_start")
        .then(pl.lit(CLOCK_DAY_ONE))
        .otherwise(pl.lit(CLOCK_SINCE_START))
        .alias("clock")
    )


def local_arrival(tz_by_trace: dict[str, str | None]) -> pl.Expr:
    """``arrival_time`` as a naive local datetime in each source's recorded zone (the
    UTC wall time where none: relative traces).
    """
    expr: pl.Expr = pl.col("arrival_time").dt.replace_time_zone(None)
    for source, tz in tz_by_trace.items():
        if tz:
            local = pl.col("arrival_time").dt.convert_time_zone(tz).dt.replace_time_zone(None)
            expr = pl.when(pl.col("source") == source).then(local).otherwise(expr)
    return expr.alias("local_arrival")


def zones(requests: pl.LazyFrame) -> dict[str, str | None]:
    """Each source's recorded time zone (null for relative-time traces)."""
    rows = requests.group_by("source").agg(pl.col("source_tz").drop_nulls().first()).collect()
    return dict(zip(rows["source"].to_list(), rows["source_tz"].to_list(), strict=True))


def parse_resolutions(text: str) -> tuple[str, ...]:
    """A comma list of bin widths (``1min,10min,1h``), each checked."""
    out = tuple(p.strip() for p in text.split(",") if p.strip())
    if not out:
        msg = "give at least one width, e.g. 1min,10min,1h"
        raise ValueError(msg)
    for part in out:
        freq_to_polars(part)  # raises ValueError with the accepted forms
    return out


def seconds(width: str) -> int:
    """A width (``10min``) in seconds."""
    return freq_to_polars(width)[1]


def binned(
    requests: pl.LazyFrame, width_s: int, aggs: Sequence[pl.Expr], by: Sequence[str] = TRACE
) -> pl.LazyFrame:
    """Requests counted in bins of ``width_s`` seconds from each trace's first arrival,
    every bin of its span present (an empty bin is 0 requests, not a missing row):
    ``bin`` (0-based), ``time`` (the bin's start), ``requests`` and ``aggs``.
    """
    width_us = width_s * 1_000_000
    t = pl.col("arrival_time")
    lf = requests.with_columns(
        ((t - t.min().over(list(by))).dt.total_microseconds() // width_us).alias("bin"),
        t.min().over(list(by)).alias("_start"),
    )
    counted = lf.group_by([*by, "bin"]).agg(pl.len().alias("requests"), *aggs)
    spans = (
        lf.group_by(list(by))
        .agg(pl.col("_start").first(), pl.int_range(0, pl.col("bin").max() + 1).alias("bin"))
        .explode("bin")
    )
    return (
        spans.join(counted, on=[*by, "bin"], how="left")
        .with_columns(
            pl.col("requests").fill_null(0),
            (pl.col("_start") + pl.duration(microseconds=pl.col("bin") * width_us)).alias("time"),
        )
        .drop("_start")
    )
