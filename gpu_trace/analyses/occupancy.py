"""GPU allocation over time ("occupancy"), from an interval sweep on bin numbers.

Two counting rules (:class:`Rule`):

- ``time-weighted`` (default): each bin's value is the **time-weighted mean** of the
  allocated-GPU step function over the bin (exact: a job holding 2 GPUs for 30 s of a
  minute adds 1.0 to that minute).
- ``helios``: HeliosArtifact ``parse_sequence``'s rule, so its published figures can be
  reproduced: start and end floored to the bin (it floors to the minute), a job counts
  its full GPUs in every bin ``t`` with ``start <= t <= end``, and the total is capped at
  the installed GPUs (:func:`occupancy`). The two agree only in bins where no job starts
  or ends and where the cap does not bind: Helios counts a job that runs 00:00:50 -
  00:01:10 in two whole minutes (we count 20 s of it), and one that starts and ends in
  the same minute as a whole minute.

The sweep never materialises a row per job per bin, nor one per bin per event: each job
contributes two events (+gpus at start, -gpus at end) keyed by the integer bin they fall
in; per bin the events' sum ``W`` and their in-bin weight ``A`` (gpus x seconds left in
the bin) are summed; then over the bins of a group in order ``gpu_seconds = A + bin_s x
(cumulative W before the bin)``, with ``numpy.bincount`` and ``cumsum`` (:func:`allocation`;
peak memory beside HeliosArtifact's in ``bench/occupancy_artifact.py``). Cost: O(jobs +
bins), no sort of events or bins and no Python loop over rows.

Capacity comes from the ``capacity`` table (vc null = the cluster total; preferred
basis: published, then inferred_util, inferred_jobs, machine_list) as of each bin, else
from the largest ``machines`` inventory of the cluster.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

import numpy as np
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


class Rule(StrEnum):
    """How a job counts in a bin (see the module docstring)."""

    time_weighted = "time-weighted"
    helios = "helios"


def allocation(
    jobs: pl.LazyFrame,
    *,
    freq: str = "1h",
    by: Sequence[str] = DEFAULT_BY,
    rule: Rule = Rule.time_weighted,
) -> pl.LazyFrame:
    """GPUs allocated per bin: columns ``*by, time, allocated_gpus``.

    Only GPU jobs with both a start and an end count (``time-weighted``: end after
    start; ``helios``: end not before start, as the artifact keeps them); a bin is
    reported from the first start to the last end of its group. With ``helios`` the
    value is the artifact's count, not yet capped (:func:`occupancy` caps it).

    The jobs' four columns are collected (the only rows read), then the sweep is two
    ``numpy.bincount`` passes over the events into one array of all groups' bins (each
    group its own slice plus one spare slot, so an event past a group's last bin never
    lands in the next group) and a cumulative sum: no sort, no join, no row per event
    and bin. For 300 k jobs at one-minute bins that is ~100 MiB over the interpreter's
    ~100 MiB, where a polars group-by / join / sort sweep took ~175 MiB.
    """
    _, seconds = freq_to_polars(freq)
    step = seconds * 1_000_000  # bins are whole multiples of the epoch, in microseconds
    keys = list(by)
    start = pl.col("start_time").dt.epoch("us")
    end = pl.col("end_time").dt.epoch("us")
    later = end > start if rule is Rule.time_weighted else end >= start
    iv = (
        jobs.filter((pl.col("gpus") > 0) & start.is_not_null() & end.is_not_null() & later)
        .select(*keys, start.alias("s"), end.alias("e"), pl.col("gpus").cast(pl.Float64))
        .collect()
    )
    groups = (
        iv.group_by(keys)
        .agg((pl.col("s").min() // step).alias("lo"), (pl.col("e").max() // step).alias("hi"))
        .sort(keys, nulls_last=True)
        .with_row_index("gid")
    )
    iv = iv.join(groups.select(*keys, "gid"), on=keys, nulls_equal=True).drop(keys)
    return _sweep(iv, groups, step, rule).lazy()


def _sweep(iv: pl.DataFrame, groups: pl.DataFrame, step: int, rule: Rule) -> pl.DataFrame:
    """The bins of every group with their value (see :func:`allocation`)."""
    keys = [c for c in groups.columns if c not in ("gid", "lo", "hi")]
    if groups.height == 0:  # no GPU job with a start and an end: no bins
        return groups.select(
            *keys,
            pl.lit(None, pl.Datetime("us", "UTC")).alias("time"),
            pl.lit(None, pl.Float64).alias("allocated_gpus"),
        )
    n = (groups["hi"] - groups["lo"] + 1).to_numpy()
    slots = n + 1
    first = np.concatenate([[0], np.cumsum(slots)[:-1]]).astype(np.int64)  # group starts
    total = int(slots.sum())
    gid = iv["gid"].to_numpy()
    base = first[gid] - groups["lo"].to_numpy()[gid]
    s, e, g = (iv[c].to_numpy() for c in ("s", "e", "gpus"))
    ks, ke = s // step, e // step
    if rule is Rule.time_weighted:
        w = np.bincount(base + ks, g, total) - np.bincount(base + ke, g, total)
        # each event's weight over the rest of its own bin, in GPU-seconds
        a = np.bincount(base + ks, g * ((ks + 1) * step - s) / 1e6, total)
        a -= np.bincount(base + ke, g * ((ke + 1) * step - e) / 1e6, total)
    else:  # +g in the start's bin, -g in the bin after the end's (a spare slot at worst)
        w = np.bincount(base + ks, g, total) - np.bincount(base + ke + 1, g, total)
    held = np.cumsum(w)
    held -= np.repeat(held[first] - w[first], slots)  # per group, from its first bin
    if rule is Rule.time_weighted:
        seconds = step / 1e6
        value = (a + (held - w) * seconds) / seconds
    else:
        value = held
    keep = np.ones(total, dtype=bool)
    keep[first + n] = False  # the spare slots
    k = np.repeat(groups["lo"].to_numpy() - first, slots) + np.arange(total)
    bins = pl.DataFrame(
        {
            "gid": np.repeat(groups["gid"].to_numpy(), slots)[keep],
            "time": pl.Series(k[keep] * step).cast(pl.Datetime("us", "UTC")),
            "allocated_gpus": np.clip(value[keep], 0.0, None),
        }
    )
    return (
        groups.select(*keys, "gid")
        .join(bins, on="gid", how="right", maintain_order="right")
        .select(*keys, "time", "allocated_gpus")
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
    rule: Rule = Rule.time_weighted,
) -> pl.LazyFrame:
    """Allocation with capacity: ``source, cluster, [vc | gpu_type,] time,
    allocated_gpus, capacity_gpus, allocation_pct`` (null where capacity is unknown).

    ``rule`` (:class:`Rule`): ``helios`` counts as HeliosArtifact does, including its cap
    of the allocated GPUs at the installed ones where capacity is known.

    ``by='vc'`` uses the per-VC capacity rows (Helios publishes them daily);
    ``by='gpu_type'`` groups jobs by the GPU type they requested and capacity by the GPU
    type installed (largest inventory of the cluster).
    """
    if by not in OCCUPANCY_BY:
        msg = f"by must be one of {OCCUPANCY_BY}"
        raise ValueError(msg)
    keys = ["source", "cluster", *([by] if by != "cluster" else [])]
    alloc = allocation(jobs, freq=freq, by=keys, rule=rule)
    if by == "gpu_type":
        caps = _capacity_by_type(machines)
        return _capped(
            alloc.join(caps, on=keys, how="left")
            .with_columns(
                (100 * pl.col("allocated_gpus") / pl.col("capacity_gpus")).alias("allocation_pct")
            )
            .sort([*keys, "time"]),
            rule,
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
    return _capped(
        out.drop("capacity_gpus_const")
        .with_columns(
            (100 * pl.col("allocated_gpus") / pl.col("capacity_gpus")).alias("allocation_pct")
        )
        .sort([*keys, "time"]),
        rule,
    )


def _capped(series: pl.LazyFrame, rule: Rule) -> pl.LazyFrame:
    """HeliosArtifact's ``running_gpu_num.combine(total_gpu_num, min)``: with the
    ``helios`` rule, allocated GPUs (and so the %) never exceed the installed GPUs.
    """
    if rule is not Rule.helios:
        return series
    capped = pl.min_horizontal("allocated_gpus", "capacity_gpus")  # null capacity: kept
    return series.with_columns(capped.alias("allocated_gpus")).with_columns(
        (100 * pl.col("allocated_gpus") / pl.col("capacity_gpus")).alias("allocation_pct")
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
