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

Capacity (the denominator, :func:`occupancy`) comes from, in order:

1. the ``capacity`` table (vc null = the cluster total; the most trusted basis of
   :data:`BASIS_PREFERENCE`), as a step function: each bin takes the last row at or
   before its start, and bins before the first row take the first row (an operator who
   exports ``sinfo`` today to read last month's jobs has no older snapshot; the
   installed GPUs of today are the best known, rather than no denominator at all);
2. else the largest ``machines`` inventory of the cluster (a static node list, e.g.
   a Kubernetes nodes export: its nodes not unavailable, as for snapshots), as a
   constant;
3. else the **peak concurrent GPUs allocated** over the whole series, labelled
   ``inferred``: allocation can then never exceed 100 %, and reads as "share of the
   busiest moment", which the table and the chart say.

``capacity_basis`` names which: ``inventory`` (an operator's node inventory: sinfo,
scontrol, nodes CSV, Kubernetes nodes, or a ``machines`` list), ``trace`` (the trace's own
capacity file: Helios' published totals, Philly / PAI machine lists) or ``inferred``.
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
BASIS_LABEL = {
    "published": "trace",
    "machine_list": "trace",
    "inventory": "inventory",
    "inferred_util": "inferred",
    "inferred_jobs": "inferred",
}
"""``capacity.basis`` -> the ``capacity_basis`` the analyses show (unknown bases: trace)."""
INVENTORY_SOURCES = ("nodes-csv",)
"""Sources that hold only node inventories (``ingest nodes-csv`` writes source
``nodes-csv``): their capacity rows are the denominator of the jobs of any source with a
cluster of the same name and no capacity of its own (``sinfo`` and ``scontrol`` write
under ``slurm``, beside the jobs, so they need no such match)."""
INFERRED = "inferred"
"""``capacity_basis`` of the fallback denominator (peak concurrent GPUs allocated)."""


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
    """Cluster GPU totals over time: ``source, cluster, vc, time, capacity_gpus,
    capacity_basis``.

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
            pl.col("basis")
            .replace_strict(BASIS_LABEL, default="trace", return_dtype=pl.String)
            .alias("capacity_basis"),
        )
    )
    inv = (
        machines.filter(_not_unavailable(machines))
        .group_by("source", "cluster", "dataset")
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
            pl.lit("inventory").alias("capacity_basis"),
        )
    )
    return pl.concat([cap, inv])


def _not_unavailable(machines: pl.LazyFrame) -> pl.Expr:
    """Nodes that count in a static inventory's capacity: ``available`` true or unknown,
    the rule of the snapshots' ``capacity`` rows (:mod:`gpu_trace.loaders.inventory`), so
    a NotReady or cordoned Kubernetes node is left out as a drained Slurm node is.
    """
    if "available" not in machines.collect_schema().names():
        return pl.lit(True)
    return pl.col("available").fill_null(True)


def peak_allocated(jobs: pl.LazyFrame, by: Sequence[str] = DEFAULT_BY) -> pl.LazyFrame:
    """Most GPUs held at once per group (``*by, peak_gpus``): the maximum of the step
    function :func:`allocation` averages (the same jobs: GPU jobs with a start and an end
    after it), not of its bin means, which a short burst would flatten.
    """
    keys = list(by)
    iv = jobs.filter(
        (pl.col("gpus") > 0)
        & pl.col("start_time").is_not_null()
        & pl.col("end_time").is_not_null()
        & (pl.col("end_time") > pl.col("start_time"))
    )
    events = pl.concat(
        [
            iv.select(*keys, pl.col("start_time").alias("t"), pl.col("gpus").alias("d")),
            iv.select(*keys, pl.col("end_time").alias("t"), (-pl.col("gpus")).alias("d")),
        ]
    )
    # ends and starts at one instant are netted first: a job that starts as another
    # ends does not count both
    return (
        events.group_by([*keys, "t"])
        .agg(pl.col("d").sum())
        .sort([*keys, "t"])
        .with_columns(pl.col("d").cum_sum().over(keys).alias("level"))
        .group_by(keys)
        .agg(pl.col("level").max().cast(pl.Float64).alias("peak_gpus"))
    )


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
    allocated_gpus, capacity_gpus, allocation_pct, capacity_basis`` (the capacity rules:
    module docstring).

    ``rule`` (:class:`Rule`): ``helios`` counts as HeliosArtifact does, including its cap
    of the allocated GPUs at the installed ones where capacity is known.

    ``by='vc'`` uses the per-VC capacity rows (Helios publishes them daily);
    ``by='gpu_type'`` groups jobs by the GPU type they requested and capacity by the GPU
    type installed (per inventory snapshot, else the largest static inventory).
    """
    if by not in OCCUPANCY_BY:
        msg = f"by must be one of {OCCUPANCY_BY}"
        raise ValueError(msg)
    keys = ["source", "cluster", *([by] if by != "cluster" else [])]
    alloc = allocation(jobs, freq=freq, by=keys, rule=rule)
    if by == "gpu_type":
        caps = _capacity_by_type(machines)
    else:
        caps = _shared_inventories(cluster_capacity(capacity, machines), jobs)
        caps = (
            caps.filter(pl.col("vc").is_not_null())
            if by == "vc"
            else caps.filter(pl.col("vc").is_null()).drop("vc")
        )
    return _capped(
        _with_share(_step_capacity(alloc, caps, keys), jobs, keys, caps.select(keys)), rule
    )


def _step_capacity(alloc: pl.LazyFrame, caps: pl.LazyFrame, keys: list[str]) -> pl.LazyFrame:
    """``alloc`` with ``capacity_gpus`` and ``capacity_basis`` from ``caps`` (``*keys,
    time, capacity_gpus, capacity_basis``; ``time`` null = valid at all times): the last
    dated row at or before each bin, else the first one after it (bins before the first
    snapshot), else the undated row.
    """
    dated = caps.filter(pl.col("time").is_not_null()).sort([*keys, "time"])
    constant = caps.filter(pl.col("time").is_null()).drop("time")
    alloc = alloc.sort([*keys, "time"])
    before = alloc.join_asof(dated, on="time", by=keys, strategy="backward", check_sortedness=False)
    after = alloc.join_asof(
        dated, on="time", by=keys, strategy="forward", check_sortedness=False
    ).select(
        *keys,
        "time",
        pl.col("capacity_gpus").alias("capacity_gpus_next"),
        pl.col("capacity_basis").alias("capacity_basis_next"),
    )
    return (
        before.join(after, on=[*keys, "time"], how="left", nulls_equal=True)
        .join(constant, on=keys, how="left", suffix="_const", nulls_equal=True)
        .with_columns(
            pl.coalesce("capacity_gpus", "capacity_gpus_next", "capacity_gpus_const"),
            pl.coalesce("capacity_basis", "capacity_basis_next", "capacity_basis_const"),
        )
        .drop("capacity_gpus_next", "capacity_basis_next", "capacity_gpus_const")
        .drop("capacity_basis_const")
    )


def _shared_inventories(caps: pl.LazyFrame, jobs: pl.LazyFrame) -> pl.LazyFrame:
    """``caps`` plus, for each (source, cluster) with jobs and no capacity of its own,
    the rows of an :data:`INVENTORY_SOURCES` inventory of the same cluster under the
    jobs' source. The clusters come from the jobs, not from the allocation series,
    which would then be computed twice.
    """
    own = caps.select("source", "cluster").unique()
    lacking = (
        jobs.select("source", "cluster")
        .unique()
        .join(own, on=["source", "cluster"], how="anti", nulls_equal=True)
    )
    shared = caps.filter(pl.col("source").is_in(INVENTORY_SOURCES)).drop("source")
    borrowed = lacking.join(shared, on="cluster", how="inner", nulls_equal=True)
    return pl.concat([caps, borrowed.select(caps.collect_schema().names())])


def _with_share(
    out: pl.LazyFrame, jobs: pl.LazyFrame, keys: list[str], known: pl.LazyFrame
) -> pl.LazyFrame:
    """``allocation_pct``, with the inferred capacity (peak concurrent GPUs allocated)
    where no capacity is known; null where the capacity is 0 (every node down: a share
    of nothing is no number). ``known``: the groups with some capacity; the peak (a sort
    of every start and end) is computed only for the jobs of the others.
    """
    unknown = jobs.join(known.unique(), on=keys, how="anti", nulls_equal=True)
    peak = peak_allocated(unknown, keys)
    has_cap = pl.col("capacity_gpus").is_not_null()
    cap = pl.col("capacity_gpus")
    return (
        out.join(peak, on=keys, how="left", nulls_equal=True)
        .with_columns(
            pl.when(has_cap).then(cap).otherwise(pl.col("peak_gpus")).alias("capacity_gpus"),
            pl.when(has_cap)
            .then(pl.col("capacity_basis"))
            .otherwise(pl.lit(INFERRED))
            .alias("capacity_basis"),
        )
        .drop("peak_gpus")
        .with_columns(
            pl.when(cap > 0)
            .then(100 * pl.col("allocated_gpus") / cap)
            .otherwise(None)
            .alias("allocation_pct")
        )
        .select(
            *keys, "time", "allocated_gpus", "capacity_gpus", "allocation_pct", "capacity_basis"
        )
        .sort([*keys, "time"])
    )


def _capped(series: pl.LazyFrame, rule: Rule) -> pl.LazyFrame:
    """HeliosArtifact's ``running_gpu_num.combine(total_gpu_num, min)``: with the
    ``helios`` rule, allocated GPUs (and so the %) never exceed the installed GPUs.
    """
    if rule is not Rule.helios:
        return series
    capped = pl.min_horizontal("allocated_gpus", "capacity_gpus")  # null capacity: kept
    cap = pl.col("capacity_gpus")
    return series.with_columns(capped.alias("allocated_gpus")).with_columns(
        pl.when(cap > 0).then(100 * pl.col("allocated_gpus") / cap).alias("allocation_pct")
    )


def _capacity_by_type(machines: pl.LazyFrame) -> pl.LazyFrame:
    """GPUs per (source, cluster, gpu_type) of the nodes not unavailable: per snapshot
    (``time`` = ``snapshot_time``; a type no node of a snapshot has counts 0 there), and
    for static lists (no snapshot time) the cluster's largest inventory (``time`` null).
    """
    machines = machines.filter(_not_unavailable(machines))
    if "snapshot_time" not in machines.collect_schema().names():  # a hand-made frame
        machines = machines.with_columns(
            pl.lit(None, dtype=pl.Datetime("us", "UTC")).alias("snapshot_time")
        )
    keys = ["source", "cluster", "gpu_type"]
    snaps = machines.filter(pl.col("snapshot_time").is_not_null())
    per_snap = snaps.group_by(*keys, pl.col("snapshot_time").alias("time")).agg(
        pl.col("gpus").sum().cast(pl.Float64).alias("capacity_gpus")
    )
    grid = (
        snaps.select("source", "cluster", pl.col("snapshot_time").alias("time"))
        .unique()
        .join(snaps.select(keys).unique(), on=["source", "cluster"], nulls_equal=True)
    )
    dated = grid.join(per_snap, on=[*keys, "time"], how="left", nulls_equal=True).with_columns(
        pl.col("capacity_gpus").fill_null(0.0)
    )
    static = machines.filter(pl.col("snapshot_time").is_null())
    per_inv = static.group_by("source", "cluster", "dataset").agg(
        pl.col("gpus").sum().alias("total")
    )
    best = (
        per_inv.filter(pl.col("total") == pl.col("total").max().over("source", "cluster"))
        .group_by("source", "cluster")
        .agg(pl.col("dataset").min())
    )
    constant = (
        static.join(best, on=["source", "cluster", "dataset"])
        .group_by(keys)
        .agg(pl.col("gpus").sum().cast(pl.Float64).alias("capacity_gpus"))
        .with_columns(pl.lit(None, dtype=pl.Datetime("us", "UTC")).alias("time"))
    )
    return pl.concat(
        [
            dated.select(*keys, "time", "capacity_gpus"),
            constant.select(*keys, "time", "capacity_gpus"),
        ]
    ).with_columns(pl.lit("inventory").alias("capacity_basis"))


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
