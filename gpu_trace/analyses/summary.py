"""Cross-trace summary in the Helios / Acme ``cluster_summary`` format.

One row per group (default: source and cluster): job counts, mean/median run and
queue time of GPU and CPU jobs, GPUs per GPU job, final-status rates for all and for
GPU jobs, and the share of GPU time by final status. Definitions:
:mod:`gpu_trace.analyses.definitions`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from gpu_trace.analyses.definitions import GPU_JOB, STATUS_CLASSES, gpu_time_s, status_class
from gpu_trace.analyses.grouping import GROUP_BY, with_group
from gpu_trace.plugins import AnalysisPlugin, option
from gpu_trace.values import choose

DEFAULT_BY = ("source", "cluster")


def _rate(mask: pl.Expr, among: pl.Expr) -> pl.Expr:
    """Share of rows matching ``mask`` among the rows matching ``among``."""
    return (mask & among).sum() / among.sum()


def summary(jobs: pl.LazyFrame, by: Sequence[str] = DEFAULT_BY) -> pl.LazyFrame:
    """The summary table; ``*_rate*`` are fractions 0-1 over jobs with a final status
    (Helios convention), ``*_gpu_job_share`` / ``*_gpu_hours_share`` fractions of all
    GPU jobs / GPU time with ``unfinished`` (running, pending, unknown) as a class.
    """
    gpu = GPU_JOB.fill_null(False)
    cpu = ~gpu
    final = pl.col("status_class") != "unfinished"
    sc = pl.col("status_class")
    gt = pl.col("gpu_time_s")
    gt_final = gt.filter(final & gpu).sum()
    aggs: list[pl.Expr] = [
        pl.len().alias("jobs"),
        cpu.sum().alias("cpu_jobs"),
        gpu.sum().alias("gpu_jobs"),
        (gpu.sum() / pl.len()).alias("gpu_job_share"),
        pl.col("run_s").filter(gpu).mean().alias("avg_run_s_gpu"),
        pl.col("run_s").filter(gpu).median().alias("med_run_s_gpu"),
        pl.col("run_s").filter(cpu).mean().alias("avg_run_s_cpu"),
        pl.col("run_s").filter(cpu).median().alias("med_run_s_cpu"),
        pl.col("queue_s").filter(gpu).mean().alias("avg_queue_s_gpu"),
        pl.col("queue_s").filter(gpu).median().alias("med_queue_s_gpu"),
        pl.col("queue_s").filter(cpu).mean().alias("avg_queue_s_cpu"),
        pl.col("queue_s").filter(cpu).median().alias("med_queue_s_cpu"),
        pl.col("gpus").filter(gpu).mean().alias("avg_gpus"),
        pl.col("gpus").filter(gpu).median().alias("med_gpus"),
        pl.col("gpus").filter(gpu).max().alias("max_gpus"),
        (~final).sum().alias("unfinished_jobs"),
    ]
    for s in STATUS_CLASSES:
        aggs.append(_rate(sc == s, final).alias(f"{s}_rate"))
        aggs.append(_rate(sc == s, final & gpu).alias(f"{s}_rate_gpu"))
        aggs.append(_rate(sc == s, final & cpu).alias(f"{s}_rate_cpu"))
    aggs.append((gt.filter(gpu).sum() / 3600).alias("gpu_hours"))
    for s in STATUS_CLASSES:
        aggs.append((gt.filter((sc == s) & gpu).sum() / gt_final).alias(f"{s}_gpu_time_share"))
    # Over *all* GPU jobs, unfinished ones as their own class: a trace that is mostly
    # running / pending (openb) must not read as "91 % failed" from the rates above.
    gt_all = gt.filter(gpu).sum()
    for s in (*STATUS_CLASSES, "unfinished"):
        aggs.append(((sc == s) & gpu).sum().truediv(gpu.sum()).alias(f"{s}_gpu_job_share"))
        aggs.append((gt.filter((sc == s) & gpu).sum() / gt_all).alias(f"{s}_gpu_hours_share"))
    return (
        jobs.with_columns(status_class(), gpu_time_s()).group_by(list(by)).agg(aggs).sort(list(by))
    )


@dataclass(frozen=True)
class SummaryOptions:
    """`gpu-trace analyze summary` options."""

    by_dataset: bool = option(False, "One row per dataset, not per cluster.")
    by: str | None = option(
        None, "Also one row per account, qos, partition, user or vc of each cluster."
    )


def serving_summary(requests: pl.LazyFrame) -> pl.LazyFrame:
    """The serving traces' rows of the summary, one per (source, dataset): requests,
    time span, mean and median input / output tokens (the figures serving papers
    tabulate, e.g. Mooncake's README table).
    """
    t = pl.col("arrival_time")
    return (
        requests.group_by("source", "dataset")
        .agg(
            pl.len().alias("requests"),
            ((t.max() - t.min()).dt.total_microseconds() / 1e6).alias("span_s"),
            pl.col("input_tokens").mean().alias("mean_input_tokens"),
            pl.col("input_tokens").median().alias("median_input_tokens"),
            pl.col("output_tokens").mean().alias("mean_output_tokens"),
            pl.col("output_tokens").median().alias("median_output_tokens"),
            pl.col("time_basis").first().alias("time_basis"),
        )
        .sort("source", "dataset")
    )


def _run(inputs: Any, options: SummaryOptions) -> pl.LazyFrame:
    by: tuple[str, ...] = ("source", "dataset") if options.by_dataset else DEFAULT_BY
    # Running jobs' GPU time counts up to the as-of instant, clipped to the window.
    jobs = inputs.clipped_jobs
    if options.by is not None:
        choose("--by value", options.by, GROUP_BY)
        jobs = with_group(jobs, options.by)
        by = (*by, options.by)
    table = summary(jobs, by=by)
    requests = getattr(inputs, "requests", None)
    if requests is None or requests.select(pl.len()).collect().item() == 0:
        return table  # a jobs-only store: the table as it always was
    # The serving traces beside the job traces: their own columns, null for the other.
    serving = serving_summary(requests)
    if table.select(pl.len()).collect().item() == 0:
        return serving
    return pl.concat([table, serving], how="diagonal_relaxed")


PLUGIN = AnalysisPlugin(
    name="summary",
    help="Cross-trace summary (Helios/Acme format): counts, run and queue times, GPUs per "
    "job, status rates, GPU time by status; serving traces beside them (requests, span, "
    "mean / median input and output tokens per dataset).",
    run=_run,
    options=SummaryOptions,
    title="Summary",
    rank=10,
    units={
        "requests": "count",
        "span_s": "s",
        "mean_input_tokens": "tokens",
        "median_input_tokens": "tokens",
        "mean_output_tokens": "tokens",
        "median_output_tokens": "tokens",
    },
    glossary={
        "requests": ("requests", "Serving requests counted in the row."),
        "span_s": ("span", "Last arrival - first arrival of the serving trace."),
        "mean_input_tokens": ("mean input tokens", "Mean prompt tokens per request."),
        "median_input_tokens": ("median input tokens", "Median prompt tokens per request."),
        "mean_output_tokens": ("mean output tokens", "Mean generated tokens per request."),
        "median_output_tokens": ("median output tokens", "Median generated tokens per request."),
    },
)
