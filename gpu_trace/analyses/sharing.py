"""GPU sharing and fragmentation (openb, PAI).

- :func:`request_mix`: shares of CPU-only, fractional (< 1 GPU), whole-GPU and multi-GPU
  requests, and the histogram of fractional shares.
- :func:`constraints`: GPU-type constraints (``V100M16|V100M32``) parsed into allowed
  types.
- :func:`fragmentation`: FGD's fragmentation measure (Weng et al., ATC'23): for each node
  and each task class of the workload, the node's free GPU capacity that the task could
  not use — all of it if the task cannot be placed on the node at all (too few GPUs, a
  type it may not use), else the partially free GPUs whose free share is below the
  task's per-GPU request. Weighted by the task classes' popularity, this is the expected
  unallocatable capacity given the request mix.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from gpu_trace.analyses.definitions import exact_sum
from gpu_trace.analyses.occupancy import INVENTORY_SOURCES
from gpu_trace.errors import GpuTraceError
from gpu_trace.plugins import AnalysisPlugin, option
from gpu_trace.values import choose


def request_mix(jobs: pl.LazyFrame, base: Sequence[str] = ("source", "cluster")) -> pl.LazyFrame:
    """Share of jobs by request kind."""
    g = pl.col("gpus")
    kind = (
        pl.when(g.is_null())
        .then(pl.lit("unknown"))
        .when(g == 0)
        .then(pl.lit("cpu-only"))
        .when(g < 1)
        .then(pl.lit("fractional (<1 GPU)"))
        .when(g == 1)
        .then(pl.lit("1 GPU"))
        .when(g == g.floor())
        .then(pl.lit("multi-GPU"))
        .otherwise(pl.lit("fractional (>1 GPU)"))
        .alias("request")
    )
    return (
        jobs.with_columns(kind)
        .group_by([*base, "request"])
        .agg(pl.len().alias("jobs"), g.sum().alias("gpus"))
        .with_columns(
            (pl.col("jobs") / pl.col("jobs").sum().over(list(base))).alias("job_share"),
            (pl.col("gpus") / pl.col("gpus").sum().over(list(base))).alias("gpu_share"),
        )
        .sort([*base, "request"])
    )


def share_histogram(
    jobs: pl.LazyFrame, base: Sequence[str] = ("source", "cluster")
) -> pl.LazyFrame:
    """Fractional requests by their share of one GPU (exact values, e.g. 0.81)."""
    return (
        jobs.filter((pl.col("gpus") > 0) & (pl.col("gpus") < 1))
        .group_by([*base, "gpus"])
        .agg(pl.len().alias("jobs"))
        .sort([*base, "gpus"])
    )


def constraints(jobs: pl.LazyFrame, base: Sequence[str] = ("source", "cluster")) -> pl.LazyFrame:
    """GPU jobs by allowed GPU type: a constraint ``A|B`` counts once for A and once for
    B; ``constrained_share`` is the share of GPU jobs carrying any constraint.
    """
    gpu_jobs = jobs.filter(pl.col("gpus") > 0)
    totals = gpu_jobs.group_by(list(base)).agg(
        pl.len().alias("gpu_jobs"), pl.col("gpu_type").is_not_null().sum().alias("constrained")
    )
    per_type = (
        gpu_jobs.filter(pl.col("gpu_type").is_not_null())
        .with_columns(
            pl.col("gpu_type").str.split("|").list.len().alias("alternatives"),
            pl.col("gpu_type").str.split("|").alias("allowed"),
        )
        .explode("allowed")
        .group_by([*base, "allowed"])
        .agg(pl.len().alias("jobs"), (pl.col("alternatives") > 1).sum().alias("with_alternatives"))
    )
    return (
        totals.join(per_type, on=list(base), how="left")
        .with_columns((pl.col("constrained") / pl.col("gpu_jobs")).alias("constrained_share"))
        .sort([*base, "allowed"], nulls_last=True)
    )


def task_classes(jobs: pl.LazyFrame) -> pl.LazyFrame:
    """The workload's GPU request classes with their popularity: per (GPUs per task,
    per-GPU share, allowed types), the share of GPU jobs.
    """
    lf = jobs.filter(pl.col("gpus") > 0).with_columns(
        pl.col("gpus").ceil().cast(pl.Int32).alias("task_gpus"),
        pl.when(pl.col("gpus") < 1).then(pl.col("gpus")).otherwise(1.0).alias("per_gpu"),
    )
    return (
        lf.group_by("task_gpus", "per_gpu", "gpu_type")
        .agg(pl.len().alias("jobs"))
        .with_columns((pl.col("jobs") / pl.col("jobs").sum()).alias("popularity"))
        .sort("task_gpus", "per_gpu", "gpu_type", nulls_last=True)
    )


def fragmentation(
    machines: pl.LazyFrame, classes: pl.LazyFrame, free: pl.LazyFrame | None = None
) -> pl.LazyFrame:
    """Expected fragmented GPU capacity per machine (FGD), given task ``classes`` from
    :func:`task_classes` and the machines' free GPU shares.

    ``free``: one row per (machine_id, gpu_index) with ``free`` in [0, 1]; by default every
    GPU is wholly free (an empty cluster), where only tasks that cannot fit a node at all
    fragment it. Columns: ``machine_id, gpu_type, gpus, free_gpus, fragmented_gpus``.
    """
    nodes = machines.filter(pl.col("gpus") > 0).select("machine_id", "gpu_type", "gpus")
    if free is None:
        free = (
            nodes.select("machine_id", pl.int_ranges(0, pl.col("gpus")).alias("gpu_index"))
            .explode("gpu_index")
            .with_columns(pl.lit(1.0).alias("free"))
        )
    per_node = free.group_by("machine_id").agg(
        exact_sum(pl.col("free"), 1e9).alias("free_gpus"),
        (pl.col("free") >= 1.0 - 1e-9).sum().alias("whole_free"),
    )
    cls = classes.with_columns(pl.col("gpu_type").str.split("|").alias("allowed"))
    pairs = nodes.join(per_node, on="machine_id").join(cls, how="cross")
    type_ok = pl.col("allowed").is_null() | pl.col("allowed").list.contains(pl.col("gpu_type"))
    # can the class be placed? multi-GPU / whole-GPU tasks need that many wholly free GPUs;
    # a fractional task needs one GPU with at least its share free (checked below)
    fits_whole = pl.col("whole_free") >= pl.col("task_gpus")
    pairs = pairs.with_columns(type_ok.alias("type_ok"), fits_whole.alias("fits_whole"))
    gpu_level = (
        free.join(
            pairs.select(
                "machine_id",
                "task_gpus",
                "per_gpu",
                "allowed",
                "popularity",
                "type_ok",
                "fits_whole",
                "free_gpus",
            ),
            on="machine_id",
        )
        .with_columns((pl.col("free") + 1e-9 >= pl.col("per_gpu")).alias("gpu_fits"))
        .group_by(
            "machine_id",
            "task_gpus",
            "per_gpu",
            "allowed",
            "popularity",
            "type_ok",
            "fits_whole",
            "free_gpus",
        )
        .agg(
            pl.col("gpu_fits").any().alias("any_gpu_fits"),
            exact_sum(pl.col("free").filter(~pl.col("gpu_fits")), 1e9).alias("unusable_free"),
        )
    )
    placeable = pl.col("type_ok") & pl.when(pl.col("task_gpus") > 1).then(
        pl.col("fits_whole")
    ).otherwise(pl.col("any_gpu_fits"))
    frag = pl.when(placeable).then(pl.col("unusable_free")).otherwise(pl.col("free_gpus"))
    per_machine = gpu_level.group_by("machine_id").agg(
        exact_sum(pl.col("popularity") * frag, 1e9).alias("fragmented_gpus")
    )
    return (
        nodes.join(per_node, on="machine_id")
        .join(per_machine, on="machine_id", how="left")
        .select(
            "machine_id", "gpu_type", "gpus", "free_gpus", pl.col("fragmented_gpus").fill_null(0.0)
        )
        .sort("machine_id")
    )


def fragmentation_by_type(frag: pl.LazyFrame) -> pl.LazyFrame:
    """Totals of :func:`fragmentation` per GPU type plus the cluster total."""
    per = frag.group_by("gpu_type").agg(
        pl.len().alias("machines"),
        pl.col("gpus").sum(),
        exact_sum(pl.col("free_gpus"), 1e9),
        exact_sum(pl.col("fragmented_gpus"), 1e9),
    )
    total = frag.select(
        pl.lit("(all)").alias("gpu_type"),
        pl.len().alias("machines"),
        pl.col("gpus").sum(),
        exact_sum(pl.col("free_gpus"), 1e9),
        exact_sum(pl.col("fragmented_gpus"), 1e9),
    )
    return pl.concat(
        [per.sort("gpu_type", nulls_last=True), total], how="vertical_relaxed"
    ).with_columns((100 * pl.col("fragmented_gpus") / pl.col("free_gpus")).alias("fragmented_pct"))


def lend_inventories(jobs: pl.LazyFrame, machines: pl.LazyFrame) -> pl.LazyFrame:
    """``machines`` with the inventories of inventory-only sources (``ingest nodes-csv``,
    :data:`~gpu_trace.analyses.occupancy.INVENTORY_SOURCES`) lent to every jobs source
    that has a cluster of the same name and no GPU machines of its own (a Slurm export
    beside a nodes CSV of its cluster), under that source's name.
    """
    lender = pl.col("source").is_in(INVENTORY_SOURCES)
    own = machines.filter(~lender & (pl.col("gpus") > 0)).select("source").unique()
    borrowers = (
        jobs.select("source", "cluster").unique().join(own, on="source", how="anti")
    ).filter(~lender)
    lent = borrowers.join(machines.filter(lender).drop("source"), on="cluster", how="inner")
    names = machines.collect_schema().names()
    return pl.concat([machines.filter(~lender), lent.select(names)])


def fragmentation_per_source(
    jobs: pl.LazyFrame, machines: pl.LazyFrame, inventory: str | None = None
) -> pl.DataFrame:
    """:func:`fragmentation_by_type` for each source with GPU machines, on its own
    inventory (``inventory``, else its largest) and its own jobs' request mix, with
    ``source`` and ``inventory`` columns: one source's machines are never scored with
    another source's tasks (an inventory-only source's are lent by cluster name:
    :func:`lend_inventories`).
    """
    gpu_machines = lend_inventories(jobs, machines).filter(pl.col("gpus") > 0)
    if inventory is not None:
        gpu_machines = gpu_machines.filter(pl.col("dataset") == inventory)
    sizes = (
        gpu_machines.group_by("source", "dataset")
        .agg(pl.col("gpus").sum())
        .sort(["source", "gpus", "dataset"], descending=[False, True, False])
        .collect()
    )
    parts = []
    for source, dataset in (
        sizes.unique("source", keep="first", maintain_order=True)
        .select("source", "dataset")
        .iter_rows()
    ):
        classes = task_classes(jobs.filter(pl.col("source") == source)).collect()
        if not classes.height:
            continue  # no request mix (a source with machines but no jobs): nothing to score
        nodes = gpu_machines.filter((pl.col("source") == source) & (pl.col("dataset") == dataset))
        parts.append(
            fragmentation_by_type(fragmentation(nodes, classes.lazy()))
            .collect()
            .select(pl.lit(source).alias("source"), pl.lit(dataset).alias("inventory"), pl.all())
        )
    if not parts:
        return pl.DataFrame(
            schema={"source": pl.String, "inventory": pl.String, "gpu_type": pl.String}
        )
    return pl.concat(parts, how="vertical_relaxed")


def qos_phase_mix(jobs: pl.LazyFrame, base: Sequence[str] = ("source", "cluster")) -> pl.LazyFrame:
    """Jobs by QoS class and by the source's own status (openb pod phase)."""
    return (
        jobs.group_by([*base, "qos", "raw_status"])
        .agg(pl.len().alias("jobs"))
        .with_columns((pl.col("jobs") / pl.col("jobs").sum().over(list(base))).alias("share"))
        .sort([*base, "qos", "raw_status"], nulls_last=True)
    )


def inventory(machines: pl.LazyFrame) -> pl.LazyFrame:
    """Machines and GPUs per inventory and GPU type (GPU-less machines as type null)."""
    return (
        machines.group_by("source", "cluster", "dataset", "gpu_type")
        .agg(pl.len().alias("machines"), pl.col("gpus").sum().cast(pl.Int64).alias("gpus"))
        .sort(["source", "cluster", "dataset", "gpus"], descending=[False, False, False, True])
    )


#: ``analyze sharing --view`` value -> the analysis it shows.
VIEWS = {
    "requests": lambda inp: request_mix(inp.jobs),
    "shares": lambda inp: share_histogram(inp.jobs),
    "constraints": lambda inp: constraints(inp.jobs),
    "qos": lambda inp: qos_phase_mix(inp.jobs),
    "inventory": lambda inp: inventory(inp.machines),
}


@dataclass(frozen=True)
class SharingOptions:
    """`gpu-trace analyze sharing` options."""

    view: str = option(
        "requests",
        "requests (mix), shares (fractional histogram), constraints, qos, inventory.",
    )


def _sharing(inputs: Any, options: SharingOptions) -> pl.LazyFrame:
    choose("--view value", options.view, VIEWS)
    frame: pl.LazyFrame = VIEWS[options.view](inputs)
    return frame


@dataclass(frozen=True)
class FragmentationOptions:
    """`gpu-trace analyze fragmentation` options."""

    inventory: str | None = option(
        None, "Machine inventory (dataset) to use; default: each source's largest."
    )


def _fragmentation(inputs: Any, options: FragmentationOptions) -> pl.DataFrame:
    table = fragmentation_per_source(inputs.jobs, inputs.machines, options.inventory)
    if table.height == 0:
        what = f"inventory {options.inventory!r}" if options.inventory else "machine inventory"
        msg = f"no {what} with GPUs in the store"
        raise GpuTraceError(msg)
    return table


SHARING = AnalysisPlugin(
    name="sharing",
    help="GPU sharing: request mix, fractional shares, GPU-type constraints, QoS/phase "
    "mix, machine inventory.",
    run=_sharing,
    options=SharingOptions,
    title="GPU sharing and fragmentation",
    rank=80,
)


FRAGMENTATION = AnalysisPlugin(
    name="fragmentation",
    help="Expected unallocatable GPUs on an empty cluster given the request mix (FGD "
    "measure), per source (its own inventory and its own jobs; `source` and `inventory` "
    "columns).",
    run=_fragmentation,
    options=FragmentationOptions,
    title="Fragmentation",
    rank=90,
)


PLUGINS = (SHARING, FRAGMENTATION)
