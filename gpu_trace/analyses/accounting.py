"""Accounting per group (``sreport``-like): what each account / QoS / partition / user /
VC used and waited, how well its jobs' time limits fit, and ``seff``-style efficiency.

Three tables, one command (``gpu-trace analyze accounting --by KEY``):

- **usage** (default): jobs, GPU jobs, GPU-hours, GPU-weighted queue hours
  (sum of ``gpus x queue_s`` / 3600: an 8-GPU job waiting 1 h is 8 GPU-hours of
  queueing), CPU-hours (``cpus x run_s`` / 3600) and the group's share of GPU-hours.
- **limits** (``--limits``): time-limit accuracy over the jobs that have both a requested
  limit (``time_limit_s`` > 0) and a run time: the share using under 10 % and under 50 %
  of it, and the median of used / requested; ``jobs_without_limit_data`` counts the rest.
- **efficiency** (``--efficiency``): Slurm's ``seff`` (contribs/seff/seff in the Slurm
  source): CPU efficiency = TotalCPU / (Elapsed x allocated CPUs), memory efficiency =
  peak memory / allocated memory, over finished jobs with the inputs
  (``cpu_used_s``, ``cpus``, ``run_s`` > 0; ``mem_peak_bytes``, ``mem_bytes`` > 0).
  Per group: the pooled ratio (sum of used / sum of allocated), the median of the jobs'
  ratios, and how many finished jobs lacked the data. ``seff`` takes a step's memory as
  the sum of its tasks' peaks (``TRESUsageInTot``); sacct's ``MaxRSS`` is the largest
  task's, so for multi-task steps our memory efficiency is a lower bound.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from gpu_trace.analyses.definitions import GPU_JOB, gpu_time_s
from gpu_trace.analyses.grouping import GROUP_BY, with_group
from gpu_trace.errors import UsageError
from gpu_trace.plugins import AnalysisPlugin, option
from gpu_trace.values import choose

BASE = ("source", "cluster")
UNDER = (0.1, 0.5)
"""Used / requested time-limit thresholds reported as shares (under 10 %, under 50 %)."""


def gpu_queue_hours() -> pl.Expr:
    """GPU-weighted queueing of GPU jobs: sum of ``gpus x queue_s`` / 3600 (GPU-hours
    the group's requests spent waiting), not the plain sum of waits.
    """
    gpu = GPU_JOB.fill_null(False)
    return ((pl.col("gpus") * pl.col("queue_s")).filter(gpu).sum() / 3600).alias("gpu_queue_hours")


def usage(jobs: pl.LazyFrame, by: str, base: Sequence[str] = BASE) -> pl.LazyFrame:
    """Per group: jobs, GPU jobs, GPU-hours, GPU-weighted queue hours, CPU-hours and
    the group's share of the cluster's GPU-hours. ``jobs`` must hold a ``by`` column
    (:func:`gpu_trace.analyses.grouping.with_group`).
    """
    keys = [*base, by]
    gpu = GPU_JOB.fill_null(False)
    return (
        jobs.with_columns(gpu_time_s())
        .group_by(keys)
        .agg(
            pl.len().alias("jobs"),
            gpu.sum().alias("gpu_jobs"),
            (pl.col("gpu_time_s").filter(gpu).sum() / 3600).alias("gpu_hours"),
            gpu_queue_hours(),
            ((pl.col("cpus") * pl.col("run_s")).sum() / 3600).alias("cpu_hours"),
        )
        .with_columns(
            (pl.col("gpu_hours") / pl.col("gpu_hours").sum().over(list(base)))
            .fill_nan(None)
            .alias("gpu_hours_share")
        )
        .sort([*base, "gpu_hours", by], descending=[False] * len(base) + [True, False])
    )


def time_limits(jobs: pl.LazyFrame, by: str, base: Sequence[str] = BASE) -> pl.LazyFrame:
    """Per group: how much of the requested time limit jobs used, over the jobs with
    both a limit (> 0) and a run time; the others are counted, not guessed.
    """
    has = (pl.col("time_limit_s") > 0) & pl.col("run_s").is_not_null()
    used = (pl.col("run_s") / pl.col("time_limit_s")).alias("limit_used")
    f = has.fill_null(False)
    u = pl.col("limit_used")
    return (
        jobs.with_columns(used, f.alias("_has"))
        .group_by([*base, by])
        .agg(
            pl.len().alias("jobs"),
            pl.col("_has").sum().alias("jobs_with_limit_data"),
            (~pl.col("_has")).sum().alias("jobs_without_limit_data"),
            *(
                (u.filter(pl.col("_has")) < t).mean().alias(f"under_{round(t * 100)}pct_share")
                for t in UNDER
            ),
            u.filter(pl.col("_has")).median().alias("median_limit_used"),
        )
        .sort([*base, by], nulls_last=True)
    )


USAGE_COLUMNS = {"cpu_used_s": pl.Float64, "mem_peak_bytes": pl.Int64}
"""Jobs columns added in schema v5: a store written before has none, and its first scan
by a reader (which does not rewrite the store's placeholders) lacks them."""


def efficiency(jobs: pl.LazyFrame, by: str, base: Sequence[str] = BASE) -> pl.LazyFrame:
    """``seff`` per group over finished jobs (module docstring): pooled and median CPU
    and memory efficiency, and how many finished jobs lacked each one's inputs (all of
    them in a store written before jobs v5).
    """
    names = jobs.collect_schema().names()
    missing = [pl.lit(None, dtype=t).alias(c) for c, t in USAGE_COLUMNS.items() if c not in names]
    if missing:
        jobs = jobs.with_columns(missing)
    done = pl.col("end_time").is_not_null()
    core_s = pl.col("run_s") * pl.col("cpus")
    cpu_ok = (pl.col("cpu_used_s").is_not_null() & (core_s > 0)).fill_null(False)
    mem_ok = (pl.col("mem_peak_bytes").is_not_null() & (pl.col("mem_bytes") > 0)).fill_null(False)
    lf = jobs.filter(done).with_columns(
        core_s.alias("_core_s"),
        cpu_ok.alias("_cpu_ok"),
        mem_ok.alias("_mem_ok"),
        (pl.col("cpu_used_s") / core_s).alias("_cpu_eff"),
        (pl.col("mem_peak_bytes") / pl.col("mem_bytes")).alias("_mem_eff"),
    )
    c, m = pl.col("_cpu_ok"), pl.col("_mem_ok")
    return (
        lf.group_by([*base, by])
        .agg(
            pl.len().alias("finished_jobs"),
            c.sum().alias("jobs_with_cpu_data"),
            (~c).sum().alias("jobs_without_cpu_data"),
            (pl.col("cpu_used_s").filter(c).sum() / pl.col("_core_s").filter(c).sum()).alias(
                "cpu_efficiency"
            ),
            pl.col("_cpu_eff").filter(c).median().alias("median_cpu_efficiency"),
            m.sum().alias("jobs_with_mem_data"),
            (~m).sum().alias("jobs_without_mem_data"),
            (
                pl.col("mem_peak_bytes").filter(m).cast(pl.Float64).sum()
                / pl.col("mem_bytes").filter(m).cast(pl.Float64).sum()
            ).alias("mem_efficiency"),
            pl.col("_mem_eff").filter(m).median().alias("median_mem_efficiency"),
        )
        .with_columns(pl.col("cpu_efficiency", "mem_efficiency").fill_nan(None))
        .sort([*base, by], nulls_last=True)
    )


@dataclass(frozen=True)
class AccountingOptions:
    """`gpu-trace analyze accounting` options."""

    by: str | None = option(
        None,
        "Group by account, qos, partition, user or vc (default: account where every "
        "selected source records one, else user).",
    )
    limits: bool = option(False, "Time-limit accuracy: requested vs used.", flag="--limits")
    efficiency: bool = option(False, "seff-style CPU and memory efficiency.", flag="--efficiency")


def default_by(jobs: pl.LazyFrame) -> str:
    """``account`` when every source in ``jobs`` records one (sreport's default view),
    else ``user``: the report's section needs a view every source can show.
    """
    has = jobs.group_by("source").agg(pl.col("account").is_not_null().any()).collect()
    return "account" if has.height and has.get_column("account").all() else "user"


def _run(inputs: Any, options: AccountingOptions) -> pl.LazyFrame:
    by = default_by(inputs.jobs) if options.by is None else options.by
    choose("--by value", by, GROUP_BY)
    if options.limits and options.efficiency:
        msg = "--limits and --efficiency are two tables: pass one of them"
        raise UsageError(msg)
    if options.limits or options.efficiency:  # finished jobs' own figures, not clipped
        jobs = with_group(inputs.jobs, by)
        return time_limits(jobs, by) if options.limits else efficiency(jobs, by)
    # GPU hours as summary and users count them: running jobs up to the as-of instant,
    # pending jobs' waits so far, runs cut to the --since / --until window
    return usage(with_group(inputs.clipped_jobs, by), by)


#: Header label and meaning of the columns (docs/metrics.md, "Accounting").
GLOSSARY = {
    "account": ("account", "accounting / charge group (Slurm Account)"),
    "qos": ("QoS", "quality of service (Slurm QOS)"),
    "partition": ("partition", "Slurm partition (stored as vc)"),
    "gpu_queue_hours": (
        "GPU queue hours",
        "sum of gpus x queue_s / 3600 over GPU jobs (GPU-weighted queueing)",
    ),
    "cpu_hours": ("CPU hours", "sum of cpus x run_s / 3600"),
    "gpu_hours_share": ("GPU hours (share)", "the group's share of its cluster's GPU hours"),
    "jobs_with_limit_data": ("jobs with limit", "jobs with a time limit > 0 and a run time"),
    "jobs_without_limit_data": (
        "jobs without limit data",
        "jobs lacking a time limit or a run time (not counted in the shares)",
    ),
    "under_10pct_share": ("used < 10 % of limit", "share of jobs using < 10 % of their limit"),
    "under_50pct_share": ("used < 50 % of limit", "share of jobs using < 50 % of their limit"),
    "median_limit_used": ("median used / limit", "median of run_s / time_limit_s"),
    "finished_jobs": ("finished jobs", "jobs with an end time"),
    "jobs_with_cpu_data": ("jobs with CPU data", "finished jobs with cpu_used_s and cpus"),
    "jobs_without_cpu_data": (
        "jobs without CPU data",
        "finished jobs lacking cpu_used_s, cpus or a run time",
    ),
    "cpu_efficiency": (
        "CPU efficiency",
        "sum of cpu_used_s / sum of run_s x cpus (seff: TotalCPU / (Elapsed x AllocCPUS))",
    ),
    "median_cpu_efficiency": ("median CPU efficiency", "median of the jobs' CPU efficiency"),
    "jobs_with_mem_data": ("jobs with memory data", "finished jobs with mem_peak_bytes"),
    "jobs_without_mem_data": (
        "jobs without memory data",
        "finished jobs lacking mem_peak_bytes or mem_bytes",
    ),
    "mem_efficiency": (
        "memory efficiency",
        "sum of mem_peak_bytes / sum of mem_bytes (seff: peak memory / allocated)",
    ),
    "median_mem_efficiency": (
        "median memory efficiency",
        "median of the jobs' memory efficiency",
    ),
}

PLUGIN = AnalysisPlugin(
    name="accounting",
    help="Per account / QoS / partition / user / VC (sreport-like): GPU-hours, GPU-weighted "
    "queue hours, CPU-hours; --limits: time-limit accuracy; --efficiency: seff-style CPU and "
    "memory efficiency (definitions: docs/metrics.md).",
    run=_run,
    options=AccountingOptions,
    title="Accounting",
    glossary=GLOSSARY,
    rank=75,
)
