"""GPU allocation over time ("occupancy"), from an interval sweep.

The published reference (HeliosArtifact ``parse_sequence``) walks every job over a
per-minute frame and "may take hours". Here each job contributes two events (+gpus at
start, -gpus at end); bin edges are added as zero events, a cumulative sum gives the
allocated GPUs between consecutive events, and each bin's value is the **time-weighted
mean** of that step function. Cost: O((jobs + bins) log) in polars, no Python loops.

Definition note: Helios counts a job in every minute with start <= t <= end (both
floored to the minute), which slightly over-counts short jobs; the time-weighted mean is
exact and equals Helios' figure for jobs spanning whole minutes.

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
) -> pl.LazyFrame:
    """Allocation with capacity: ``source, cluster, [vc | gpu_type,] time,
    allocated_gpus, capacity_gpus, allocation_pct, capacity_basis`` (the capacity rules:
    module docstring).

    ``by='vc'`` uses the per-VC capacity rows (Helios publishes them daily);
    ``by='gpu_type'`` groups jobs by the GPU type they requested and capacity by the GPU
    type installed (per inventory snapshot, else the largest static inventory).
    """
    if by not in OCCUPANCY_BY:
        msg = f"by must be one of {OCCUPANCY_BY}"
        raise ValueError(msg)
    keys = ["source", "cluster", *([by] if by != "cluster" else [])]
    alloc = allocation(jobs, freq=freq, by=keys)
    if by == "gpu_type":
        caps = _capacity_by_type(machines)
    else:
        caps = _shared_inventories(cluster_capacity(capacity, machines), jobs)
        caps = (
            caps.filter(pl.col("vc").is_not_null())
            if by == "vc"
            else caps.filter(pl.col("vc").is_null()).drop("vc")
        )
    return _with_share(_step_capacity(alloc, caps, keys), jobs, keys, caps.select(keys))


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
