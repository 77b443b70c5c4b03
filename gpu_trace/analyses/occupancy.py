"""GPU allocation over time ("occupancy"), from an interval sweep.

The published reference (HeliosArtifact ``parse_sequence``) walks every job over a
per-minute frame and "may take hours". Here each job contributes two events (+gpus at
start, -gpus at end); bin edges are added as zero events, a cumulative sum gives the
allocated GPUs between consecutive events, and each bin's value is the **time-weighted
mean** of that step function. Cost: O((jobs + bins) log) in polars, no Python loops.

Definition note: Helios counts a job in every minute with start <= t <= end (both
floored to the minute), which slightly over-counts short jobs; the time-weighted mean is
exact and equals Helios' figure for jobs spanning whole minutes.

Capacity comes from the ``capacity`` table (vc null = the cluster total; preferred
basis: published, then inferred_util, inferred_jobs, machine_list) as of each bin, else
from the largest ``machines`` inventory of the cluster.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from gpu_trace.analyses.arrivals import clock, weekday_of
from gpu_trace.analyses.definitions import freq_to_polars

BASIS_PREFERENCE = (
    "published",
    "inventory",
    "inferred_util",
    "inferred_jobs",
    "machine_list",
)
"""Capacity bases, most trusted first: a trace's own totals, then an operator's node
inventory snapshots (sinfo / scontrol / nodes CSV), then inferred ones."""
DEFAULT_BY = ("source", "cluster")


def allocation(
    jobs: pl.LazyFrame, *, freq: str = "1h", by: Sequence[str] = DEFAULT_BY
) -> pl.LazyFrame:
    """Time-weighted mean GPUs allocated per bin: columns ``*by, time, allocated_gpus``.

    Only GPU jobs with both a start and an end count; a bin is reported from the first
    start to the last end of its group.
    """
    every, seconds = freq_to_polars(freq)
    keys = list(by)
    iv = jobs.filter(
        (pl.col("gpus") > 0)
        & pl.col("start_time").is_not_null()
        & pl.col("end_time").is_not_null()
        & (pl.col("end_time") > pl.col("start_time"))
    ).select(*keys, "start_time", "end_time", "gpus")
    events = pl.concat(
        [
            iv.select(*keys, pl.col("start_time").alias("t"), pl.col("gpus").alias("d")),
            iv.select(*keys, pl.col("end_time").alias("t"), (-pl.col("gpus")).alias("d")),
        ]
    )
    edges = (
        iv.group_by(keys)
        .agg(
            pl.col("start_time").min().dt.truncate(every).alias("lo"),
            pl.col("end_time").max().alias("hi"),
        )
        .select(
            *keys, pl.datetime_ranges("lo", "hi", every, time_unit="us", time_zone="UTC").alias("t")
        )
        .explode("t")
        .with_columns(pl.lit(0.0).alias("d"))
    )
    steps = (
        pl.concat([events, edges])
        .group_by([*keys, "t"])
        .agg(pl.col("d").sum())
        .sort([*keys, "t"])
        .with_columns(
            pl.col("d").cum_sum().over(keys).alias("level"),
            pl.col("t").shift(-1).over(keys).alias("next_t"),
        )
        .with_columns(
            (pl.col("next_t") - pl.col("t")).dt.total_microseconds().truediv(1e6).alias("dur_s"),
            pl.col("t").dt.truncate(every).alias("time"),
        )
    )
    return (
        steps.group_by([*keys, "time"])
        .agg((pl.col("level").clip(lower_bound=0) * pl.col("dur_s")).sum().alias("gpu_seconds"))
        .with_columns((pl.col("gpu_seconds") / seconds).alias("allocated_gpus"))
        .drop("gpu_seconds")
        .sort([*keys, "time"])
    )


def cluster_capacity(capacity: pl.LazyFrame, machines: pl.LazyFrame) -> pl.LazyFrame:
    """Cluster GPU totals over time: ``source, cluster, vc, time, capacity_gpus``.

    Per (source, cluster) the capacity rows of the most preferred basis are used; for
    clusters with no capacity rows, the largest machine inventory is used as a constant
    (time null = valid at all times).
    """
    rank = pl.col("basis").replace_strict(
        {b: i for i, b in enumerate(BASIS_PREFERENCE)},
        default=len(BASIS_PREFERENCE),
        return_dtype=pl.Int32,
    )
    cap = (
        capacity.with_columns(rank.alias("rank"))
        .filter(pl.col("rank") == pl.col("rank").min().over(["source", "cluster"]))
        .select(
            "source",
            "cluster",
            "vc",
            "time",
            pl.col("gpus").cast(pl.Float64).alias("capacity_gpus"),
        )
    )
    inv = (
        machines.group_by("source", "cluster", "dataset")
        .agg(pl.col("gpus").sum().cast(pl.Float64).alias("capacity_gpus"))
        .group_by("source", "cluster")
        .agg(pl.col("capacity_gpus").max())
        .join(cap.select("source", "cluster").unique(), on=["source", "cluster"], how="anti")
        .select(
            "source",
            "cluster",
            pl.lit(None, dtype=pl.String).alias("vc"),
            pl.lit(None, dtype=pl.Datetime("us", "UTC")).alias("time"),
            "capacity_gpus",
        )
    )
    return pl.concat([cap, inv])


OCCUPANCY_BY = ("cluster", "vc", "gpu_type")


def occupancy(
    jobs: pl.LazyFrame,
    capacity: pl.LazyFrame,
    machines: pl.LazyFrame,
    *,
    freq: str = "1h",
    by: str = "cluster",
) -> pl.LazyFrame:
    """Allocation with capacity: ``source, cluster, [vc | gpu_type,] time,
    allocated_gpus, capacity_gpus, allocation_pct`` (null where capacity is unknown).

    ``by='vc'`` uses the per-VC capacity rows (Helios publishes them daily);
    ``by='gpu_type'`` groups jobs by the GPU type they requested and capacity by the GPU
    type installed (largest inventory of the cluster).
    """
    if by not in OCCUPANCY_BY:
        msg = f"by must be one of {OCCUPANCY_BY}"
        raise ValueError(msg)
    keys = ["source", "cluster", *([by] if by != "cluster" else [])]
    alloc = allocation(jobs, freq=freq, by=keys)
    if by == "gpu_type":
        caps = _capacity_by_type(machines)
        return (
            alloc.join(caps, on=keys, how="left")
            .with_columns(
                (100 * pl.col("allocated_gpus") / pl.col("capacity_gpus")).alias("allocation_pct")
            )
            .sort([*keys, "time"])
        )
    caps = cluster_capacity(capacity, machines)
    caps = (
        caps.filter(pl.col("vc").is_not_null())
        if by == "vc"
        else caps.filter(pl.col("vc").is_null()).drop("vc")
    )
    dated = caps.filter(pl.col("time").is_not_null()).sort([*keys, "time"])
    constant = caps.filter(pl.col("time").is_null()).drop("time")
    with_dated = alloc.sort([*keys, "time"]).join_asof(
        dated, on="time", by=keys, strategy="backward", check_sortedness=False
    )
    out = with_dated.join(constant, on=keys, how="left", suffix="_const").with_columns(
        pl.coalesce("capacity_gpus", "capacity_gpus_const").alias("capacity_gpus")
    )
    return (
        out.drop("capacity_gpus_const")
        .with_columns(
            (100 * pl.col("allocated_gpus") / pl.col("capacity_gpus")).alias("allocation_pct")
        )
        .sort([*keys, "time"])
    )


def _capacity_by_type(machines: pl.LazyFrame) -> pl.LazyFrame:
    """GPUs per (source, cluster, gpu_type) in each cluster's largest inventory."""
    per_inv = machines.group_by("source", "cluster", "dataset").agg(
        pl.col("gpus").sum().alias("total")
    )
    best = (
        per_inv.filter(pl.col("total") == pl.col("total").max().over("source", "cluster"))
        .group_by("source", "cluster")
        .agg(pl.col("dataset").min())
    )
    return (
        machines.join(best, on=["source", "cluster", "dataset"])
        .group_by("source", "cluster", "gpu_type")
        .agg(pl.col("gpus").sum().cast(pl.Float64).alias("capacity_gpus"))
    )


def local_time(tz_by_source: dict[str, str | None]) -> pl.Expr:
    """The ``time`` column in each source's own time zone, as a naive local datetime
    (UTC where the source has relative times or no zone).
    """
    expr: pl.Expr = pl.col("time").dt.replace_time_zone(None)
    for source, tz in tz_by_source.items():
        if tz:
            local = pl.col("time").dt.convert_time_zone(tz).dt.replace_time_zone(None)
            expr = pl.when(pl.col("source") == source).then(local).otherwise(expr)
    return expr.alias("local_time")


def profiles(series: pl.LazyFrame, tz_by_source: dict[str, str | None]) -> pl.LazyFrame:
    """Diurnal x weekday profile of a series: mean ``allocation_pct`` by source, cluster,
    local day of week (1 = Monday) and local hour of day; for relative-time sources
    (``clock`` = since trace start) days and hours since trace start instead.
    """
    return (
        series.with_columns(local_time(tz_by_source))
        .with_columns(
            weekday_of(pl.col("local_time").dt.date(), tz_by_source).alias("weekday"),
            pl.col("local_time").dt.hour().alias("hour"),
            clock(tz_by_source),
        )
        .group_by("source", "cluster", "clock", "weekday", "hour")
        .agg(pl.col("allocation_pct").mean(), pl.col("allocated_gpus").mean())
        .sort("source", "cluster", "weekday", "hour")
    )


def monthly(series: pl.LazyFrame) -> pl.LazyFrame:
    """Monthly mean allocation per source and cluster."""
    return (
        series.with_columns(pl.col("time").dt.truncate("1mo").alias("month"))
        .group_by("source", "cluster", "month")
        .agg(pl.col("allocation_pct").mean(), pl.col("allocated_gpus").mean())
        .sort("source", "cluster", "month")
    )
