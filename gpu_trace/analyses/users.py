"""Users: how concentrated GPU time and queueing are (Lorenz curve, top-k shares, Gini),
and each user's GPU-job completion rate (Helios Figs. 8-9). ``--by`` groups by account,
QoS, partition or VC instead of user (:mod:`gpu_trace.analyses.grouping`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from gpu_trace.analyses import periods
from gpu_trace.analyses.accounting import gpu_queue_hours
from gpu_trace.analyses.definitions import GPU_JOB, gpu_time_s, status_class
from gpu_trace.analyses.grouping import GROUP_BY, with_group
from gpu_trace.plugins import AnalysisPlugin, option
from gpu_trace.values import choose

TOP_FRACTIONS = (0.01, 0.05, 0.1, 0.2)


def per_user(
    jobs: pl.LazyFrame, base: Sequence[str] = ("source", "cluster"), by: str = "user"
) -> pl.LazyFrame:
    """One row per user (or per ``by`` group, a column of ``jobs``): jobs, GPU jobs, GPU
    hours, GPU-weighted queue hours (sum of ``gpus x queue_s`` / 3600 over GPU jobs: an
    8-GPU job waiting 1 h is 8 GPU-hours of queueing, a 1-GPU job waiting 2 h 2),
    completion rate of finished GPU jobs.
    """
    gpu = GPU_JOB.fill_null(False)
    sc = pl.col("status_class")
    finished_gpu = gpu & (sc != "unfinished")
    return (
        jobs.filter(pl.col(by).is_not_null())
        .with_columns(status_class(), gpu_time_s())
        .group_by([*base, by])
        .agg(
            pl.len().alias("jobs"),
            gpu.sum().alias("gpu_jobs"),
            (pl.col("gpu_time_s").filter(gpu).sum() / 3600).alias("gpu_hours"),
            gpu_queue_hours(),
            ((sc == "completed") & finished_gpu)
            .sum()
            .truediv(finished_gpu.sum())
            .alias("completion_rate"),
        )
        .sort([*base, "gpu_hours"], descending=[False] * len(base) + [True])
    )


def lorenz(
    users: pl.LazyFrame,
    value: str = "gpu_hours",
    base: Sequence[str] = ("source", "cluster"),
    by: str = "user",
) -> pl.LazyFrame:
    """Users sorted by descending ``value``: cumulative share of users vs cumulative share
    of ``value`` (every user counts, including those with zero).
    """
    keys = list(base)
    return (
        users.sort([*keys, value], descending=[False] * len(keys) + [True])
        .with_columns(
            (pl.int_range(1, pl.len() + 1).over(keys) / pl.len().over(keys)).alias("user_share"),
            (pl.col(value).cum_sum().over(keys) / pl.col(value).sum().over(keys)).alias(
                "value_share"
            ),
        )
        .select(*keys, by, "user_share", "value_share")
    )


def concentration(
    users: pl.LazyFrame,
    value: str = "gpu_hours",
    base: Sequence[str] = ("source", "cluster"),
    count: str = "users",
) -> pl.LazyFrame:
    """Per group: number of users (column ``count``; ``groups`` for another ``--by``),
    share of ``value`` held by the top 1/5/10/20 % of users (rounded up to whole users),
    and the Gini coefficient.
    """
    keys = list(base)
    ranked = users.sort([*keys, value], descending=[False] * len(keys) + [True]).with_columns(
        pl.int_range(1, pl.len() + 1).over(keys).alias("rank"), pl.len().over(keys).alias("n")
    )
    total = pl.col(value).sum()
    tops = [
        (pl.col(value).filter(pl.col("rank") <= (pl.col("n") * f).ceil()).sum() / total).alias(
            f"top{round(f * 100)}pct_share"
        )
        for f in TOP_FRACTIONS
    ]
    # Gini over ascending order: G = 2*sum(i*x_i)/(n*sum x) - (n+1)/n, i = 1..n
    asc_rank = pl.col("n") + 1 - pl.col("rank")
    gini = (2 * (asc_rank * pl.col(value)).sum() / (pl.col("n").first() * total)) - (
        (pl.col("n").first() + 1) / pl.col("n").first()
    )
    return ranked.group_by(keys).agg(pl.len().alias(count), *tops, gini.alias("gini")).sort(keys)


@dataclass(frozen=True)
class UsersOptions:
    """`gpu-trace analyze users` options."""

    per_user: bool = option(False, "One row per user (or --by group) instead.", flag="--per-user")
    value: str = option("gpu_hours", "gpu_hours or gpu_queue_hours (GPU-weighted).")
    by: str = option("user", "Group by user, account, qos, partition or vc.")


def _run(inputs: Any, options: UsersOptions) -> pl.LazyFrame:
    choose("--value", options.value, ("gpu_hours", "gpu_queue_hours"))
    choose("--by value", options.by, GROUP_BY)
    # Running jobs' GPU time counts up to the as-of instant, clipped to the window.
    clipped = inputs.clipped_jobs
    jobs = clipped if options.by == "user" else with_group(clipped, options.by)
    if inputs.scope.period:  # sreport user topusage: GPU-hours per group and period
        keys = ("source", "cluster", options.by)
        return periods.gpu_hours_by_period(jobs, inputs.scope.period, inputs.tz, keys)
    table = per_user(jobs, by=options.by)
    if options.per_user:
        return table
    return concentration(table, options.value, count="users" if options.by == "user" else "groups")


#: Header label and meaning of the columns (docs/metrics.md, "user concentration").
GLOSSARY = {
    "users": ("users", "users with jobs in the group (those with zero GPU hours included)"),
    **{
        f"top{k}pct_share": (f"top {k} % of users", f"share held by the top {k} % of users")
        for k in (1, 5, 10, 20)
    },
    "gini": ("Gini", "Gini coefficient over all users (0 = equal, 1 = one user holds all)"),
    "gpu_queue_hours": (
        "GPU queue hours",
        "sum of gpus x queue_s / 3600 over the user's GPU jobs (GPU-weighted)",
    ),
    "completion_rate": ("completed (rate)", "completed / finished GPU jobs of the user"),
}

PLUGIN = AnalysisPlugin(
    name="users",
    help="Concentration of GPU time (or queueing) across users: top-k shares and Gini.",
    run=_run,
    options=UsersOptions,
    title="Users",
    glossary=GLOSSARY,
    rank=70,
    periods=True,
)
