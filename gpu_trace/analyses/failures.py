"""Failures: final-status mix of jobs and of GPU time, GPU time lost to failed,
cancelled and preempted jobs by size / user / VC / cause (status, device events, who
cancelled, retried attempts), attempts (retries), time to failure, and MTBF per
node-hour and GPU-hour.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from gpu_trace.analyses.definitions import (
    GPU_JOB,
    admin_cancel,
    exact_sum,
    gpu_time_s,
    size_bucket,
    size_rank,
    status_class,
)
from gpu_trace.analyses.grouping import GROUP_BY, with_group
from gpu_trace.plugins import AnalysisPlugin, option
from gpu_trace.values import choose

BY_CHOICES = ("gpus", "size", "user", "vc", "status", "account", "qos", "partition")
LOST_CLASSES = ("failed", "cancelled", "preempted")
"""Final-status classes whose GPU time produced no result: it is counted as lost."""


def status_mix(
    jobs: pl.LazyFrame, by: str = "status", base: Sequence[str] = ("source", "cluster")
) -> pl.LazyFrame:
    """Per group (and ``by``: size bucket or an accounting key, a column of ``jobs``)
    and final-status class: jobs, GPU hours, and their shares within the group.
    """
    if by not in BY_CHOICES:
        msg = f"by must be one of {BY_CHOICES}"
        raise ValueError(msg)
    if by == "size":  # the name for the size-bucket breakdown
        by = "gpus"
    lf = jobs.with_columns(status_class(), gpu_time_s())
    keys = list(base)
    if by == "gpus":
        lf = lf.with_columns(size_bucket())
        keys.append("size_bucket")
    elif by in GROUP_BY:
        keys.append(by)
    out = (
        lf.group_by([*keys, "status_class"])
        .agg(
            pl.len().alias("jobs"),
            GPU_JOB.fill_null(False).sum().alias("gpu_jobs"),
            (pl.col("gpu_time_s").sum() / 3600).alias("gpu_hours"),
        )
        .with_columns(
            (pl.col("jobs") / pl.col("jobs").sum().over(keys)).alias("job_share"),
            (pl.col("gpu_hours") / pl.col("gpu_hours").sum().over(keys))
            .fill_nan(None)
            .alias("gpu_time_share"),
        )
    )
    if by == "gpus":
        return out.sort([*base, size_rank(), "status_class"])
    return out.sort([*keys, "status_class"], nulls_last=True)


def lost_gpu_time(
    jobs: pl.LazyFrame, by: str = "gpus", base: Sequence[str] = ("source", "cluster")
) -> pl.LazyFrame:
    """GPU hours spent by jobs that ended failed, cancelled or preempted (each its own
    column), per ``by`` group, with their sum's share of all GPU hours of the group.
    """
    mix = status_mix(jobs, by=by, base=base)
    keys = [c for c in mix.collect_schema().names() if c in (*base, "size_bucket", *GROUP_BY)]
    return (
        mix.group_by(keys)
        .agg(
            pl.col("gpu_hours")
            .filter(pl.col("status_class") == "failed")
            .sum()
            .alias("failed_gpu_hours"),
            pl.col("gpu_hours")
            .filter(pl.col("status_class") == "cancelled")
            .sum()
            .alias("cancelled_gpu_hours"),
            pl.col("gpu_hours")
            .filter(pl.col("status_class") == "preempted")
            .sum()
            .alias("preempted_gpu_hours"),
            pl.col("gpu_hours").sum().alias("gpu_hours"),
        )
        .with_columns(
            (
                (
                    pl.col("failed_gpu_hours")
                    + pl.col("cancelled_gpu_hours")
                    + pl.col("preempted_gpu_hours")
                )
                / pl.col("gpu_hours")
            )
            .fill_nan(None)
            .alias("lost_share")
        )
        .sort([size_rank() if k == "size_bucket" else pl.col(k) for k in keys])
    )


def attempts(jobs: pl.LazyFrame, base: Sequence[str] = ("source", "cluster")) -> pl.LazyFrame:
    """Jobs by number of attempts and final status class (retries show as attempts > 1)."""
    return (
        jobs.with_columns(status_class())
        .group_by([*base, "attempts", "status_class"])
        .agg(pl.len().alias("jobs"))
        .with_columns((pl.col("jobs") / pl.col("jobs").sum().over(list(base))).alias("share"))
        .sort([*base, "attempts", "status_class"], nulls_last=True)
    )


def time_to_failure(
    jobs: pl.LazyFrame, base: Sequence[str] = ("source", "cluster")
) -> pl.LazyFrame:
    """Run time before failure of failed GPU jobs: quantiles per group and size bucket."""
    lf = jobs.with_columns(status_class(), size_bucket()).filter(
        (pl.col("status_class") == "failed")
        & GPU_JOB.fill_null(False)
        & pl.col("run_s").is_not_null()
    )
    c = pl.col("run_s")
    return (
        lf.group_by([*base, "size_bucket"])
        .agg(
            pl.len().alias("jobs"),
            c.median().alias("median_s"),
            c.quantile(0.9, interpolation="linear").alias("p90_s"),
            c.mean().alias("mean_s"),
        )
        .sort([*base, size_rank()])
    )


def xid_events(events: pl.LazyFrame) -> pl.LazyFrame:
    """XID error counts per source, cluster and code (from telemetry ``events``)."""
    return (
        events.filter(pl.col("kind") == "xid")
        .group_by("source", "cluster", "code")
        .agg(pl.len().alias("events"), pl.col("host").n_unique().alias("hosts"))
        .sort("source", "cluster", "events", descending=[False, False, True])
    )


DEVICE_FAULTS = ("gpu_lost", "ecc_dbe", "xid")
"""Event kinds that count as a device failure, in the order that names a job's cause
(a job that saw a lost GPU and an XID is attributed to the lost GPU)."""

CAUSES = (
    "gpu_lost",
    "ecc_dbe",
    "xid",
    "node_fail",
    "oom",
    "timeout",
    "job_failed",
    "preempted",
    "cancelled_admin",
    "cancelled",
    "retry",
)
"""Failure causes, most specific first (docs/metrics.md)."""


def _fault_events(events: pl.LazyFrame) -> pl.LazyFrame:
    """Device-failure events (XID code 0 means "no error" in dcgm-exporter and is dropped)."""
    return events.filter(
        pl.col("kind").is_in(DEVICE_FAULTS) & ~((pl.col("kind") == "xid") & (pl.col("code") == 0))
    )


def _event_causes(placements: pl.LazyFrame, events: pl.LazyFrame) -> pl.LazyFrame:
    """(source, job_id) -> the most specific device fault seen on a machine (and GPU, when
    both sides name one) the job held, while it held it.
    """
    held = placements.filter(
        pl.col("start_time").is_not_null() & pl.col("end_time").is_not_null()
    ).select("source", "job_id", "machine_id", "start_time", "end_time", "gpu_indices")
    ev = _fault_events(events).select(
        pl.col("host").alias("machine_id"),
        pl.col("time").alias("_ev_time"),
        pl.col("gpu_index").alias("_ev_gpu"),
        pl.col("kind").alias("_kind"),
    )
    rank = {k: i for i, k in enumerate(DEVICE_FAULTS)}
    return (
        held.join(ev, on="machine_id", how="inner")
        .filter(
            (pl.col("_ev_time") >= pl.col("start_time"))
            & (pl.col("_ev_time") <= pl.col("end_time"))
            & (
                pl.col("_ev_gpu").is_null()
                | pl.col("gpu_indices").is_null()
                | pl.col("gpu_indices").list.contains(pl.col("_ev_gpu"))
            )
        )
        .group_by("source", "job_id")
        .agg(pl.col("_kind").replace_strict(rank, return_dtype=pl.Int32).min().alias("_rank"))
        .select(
            "source",
            "job_id",
            pl.col("_rank")
            .replace_strict({i: k for k, i in rank.items()}, return_dtype=pl.String)
            .alias("_event_cause"),
        )
    )


def job_causes(jobs: pl.LazyFrame, placements: pl.LazyFrame, events: pl.LazyFrame) -> pl.LazyFrame:
    """Each failed, cancelled or preempted job with its cause and lost GPU-seconds (all its
    GPU time), plus each other job with retried attempts (cause ``retry``, lost = the GPU
    time of every attempt but the last, from ``placements``).

    A cancellation is the canceller's decision and a preemption the scheduler's, whatever
    device events the job saw: ``cancelled_admin`` (``cancelled_by`` an administrator),
    ``cancelled`` and ``preempted`` come first. A failed job's cause is its most severe
    device event, else its status (``node_fail``, ``oom``, ``timeout``), else
    ``job_failed``.
    """
    ended = jobs.with_columns(
        status_class(), gpu_time_s(), admin_cancel(jobs).alias("_admin")
    ).join(_event_causes(placements, events), on=["source", "job_id"], how="left")
    status = pl.col("status")
    klass = pl.col("status_class")
    cause = (
        pl.when((klass == "cancelled") & pl.col("_admin"))
        .then(pl.lit("cancelled_admin"))
        .when(klass == "cancelled")
        .then(pl.lit("cancelled"))
        .when(klass == "preempted")
        .then(pl.lit("preempted"))
        .when(pl.col("_event_cause").is_not_null())
        .then(pl.col("_event_cause"))
        .when(status.is_in(["node_fail", "oom", "timeout"]))
        .then(status)
        .otherwise(pl.lit("job_failed"))
    )
    lost = ended.filter(klass.is_in(LOST_CLASSES)).select(
        "source",
        "cluster",
        "job_id",
        "user",
        "vc",
        "gpus",
        cause.alias("cause"),
        pl.col("gpu_time_s").fill_null(0).alias("lost_gpu_s"),
    )
    last = pl.col("attempt").max().over("source", "job_id")
    held_s = (pl.col("end_time") - pl.col("start_time")).dt.total_microseconds() / 1e6
    rework = (
        placements.filter(pl.col("attempt") < last)
        .group_by("source", "job_id")
        .agg((pl.col("gpu_count").fill_null(0) * held_s.fill_null(0)).sum().alias("lost_gpu_s"))
    )
    retried = (
        ended.filter(~klass.is_in(LOST_CLASSES))
        .join(rework, on=["source", "job_id"], how="inner")
        .select(
            "source",
            "cluster",
            "job_id",
            "user",
            "vc",
            "gpus",
            pl.lit("retry").alias("cause"),
            "lost_gpu_s",
        )
    )
    return pl.concat([lost, retried])


def by_cause(
    jobs: pl.LazyFrame,
    placements: pl.LazyFrame,
    events: pl.LazyFrame,
    base: Sequence[str] = ("source", "cluster"),
) -> pl.LazyFrame:
    """Per group and cause: jobs, lost GPU hours and their share of the group's lost and
    of its total GPU hours.
    """
    keys = list(base)
    total = (
        jobs.with_columns(gpu_time_s())
        .group_by(keys)
        .agg((exact_sum(pl.col("gpu_time_s")) / 3600).alias("_total_h"))
    )
    rank = {c: i for i, c in enumerate(CAUSES)}
    return (
        job_causes(jobs, placements, events)
        .group_by([*keys, "cause"])
        .agg(
            pl.len().alias("jobs"), (exact_sum(pl.col("lost_gpu_s")) / 3600).alias("lost_gpu_hours")
        )
        .join(total, on=keys, how="left", nulls_equal=True)
        .with_columns(
            (pl.col("lost_gpu_hours") / pl.col("lost_gpu_hours").sum().over(keys))
            .fill_nan(None)
            .alias("lost_share"),
            (pl.col("lost_gpu_hours") / pl.col("_total_h"))
            .fill_nan(None)
            .alias("share_of_gpu_hours"),
        )
        .drop("_total_h")
        .sort([*keys, pl.col("cause").replace_strict(rank, return_dtype=pl.Int32)], nulls_last=True)
    )


def mtbf(
    jobs: pl.LazyFrame,
    events: pl.LazyFrame,
    gpu_samples: pl.LazyFrame,
    base: Sequence[str] = ("source", "cluster"),
) -> pl.LazyFrame:
    """Node-attributed failures and the exposure they happened in, per group.

    Exposure: for job traces, node-hours and GPU-hours held by GPU jobs
    (``nodes x run_s``, ``gpus x run_s``; nodes unknown = 1); for telemetry, each host's
    and each GPU's sampled span (first to last sample). Failures: GPU jobs that ended
    ``node_fail`` plus device-failure events (XID, double-bit ECC, lost GPU).
    MTBF = exposure / failures; rates = failures per 1000 hours.
    """
    keys = list(base)
    gj = jobs.filter(GPU_JOB.fill_null(False))
    job_side = gj.group_by(keys).agg(
        (pl.col("nodes").fill_null(1).cast(pl.Float64) * pl.col("run_s")).sum().alias("_node_s"),
        (pl.col("gpus") * pl.col("run_s")).sum().alias("_gpu_s"),
        (pl.col("status") == "node_fail").sum().cast(pl.Int64).alias("node_fail_jobs"),
    )

    def span(by: list[str]) -> pl.LazyFrame:
        return gpu_samples.group_by([*keys, *by]).agg(
            ((pl.col("time").max() - pl.col("time").min()).dt.total_microseconds() / 1e6).alias(
                "_s"
            )
        )

    tele = (
        span(["host"])
        .group_by(keys)
        .agg(pl.col("_s").sum().alias("_node_s"))
        .join(
            span(["host", "gpu_index"]).group_by(keys).agg(pl.col("_s").sum().alias("_gpu_s")),
            on=keys,
            how="full",
            coalesce=True,
            nulls_equal=True,
        )
        .join(job_side, on=keys, how="anti", nulls_equal=True)  # jobs' exposure wins
        .with_columns(pl.lit(0, dtype=pl.Int64).alias("node_fail_jobs"))
        .select([*keys, "_node_s", "_gpu_s", "node_fail_jobs"])
    )
    exposure = (
        pl.concat([job_side.select([*keys, "_node_s", "_gpu_s", "node_fail_jobs"]), tele])
        .group_by(keys)
        .agg(pl.col("_node_s").sum(), pl.col("_gpu_s").sum(), pl.col("node_fail_jobs").sum())
    )
    ev = _fault_events(events).group_by(keys).agg(pl.len().cast(pl.Int64).alias("device_events"))
    failures = pl.col("node_failures")
    return (
        exposure.join(ev, on=keys, how="full", coalesce=True, nulls_equal=True)
        .with_columns(
            (pl.col("_node_s").fill_null(0) / 3600).alias("node_hours"),
            (pl.col("_gpu_s").fill_null(0) / 3600).alias("gpu_hours"),
            pl.col("node_fail_jobs").fill_null(0),
            pl.col("device_events").fill_null(0),
        )
        .with_columns((pl.col("node_fail_jobs") + pl.col("device_events")).alias("node_failures"))
        .with_columns(
            pl.when(failures > 0).then(pl.col("node_hours") / failures).alias("mtbf_node_h"),
            pl.when(failures > 0).then(pl.col("gpu_hours") / failures).alias("mtbf_gpu_h"),
            pl.when(pl.col("node_hours") > 0)
            .then(failures / pl.col("node_hours") * 1000)
            .alias("failures_per_1k_node_h"),
            pl.when(pl.col("gpu_hours") > 0)
            .then(failures / pl.col("gpu_hours") * 1000)
            .alias("failures_per_1k_gpu_h"),
        )
        .select(
            *keys,
            "node_hours",
            "gpu_hours",
            "node_fail_jobs",
            "device_events",
            "node_failures",
            "mtbf_node_h",
            "mtbf_gpu_h",
            "failures_per_1k_node_h",
            "failures_per_1k_gpu_h",
        )
        .sort(keys, nulls_last=True)
    )


@dataclass(frozen=True)
class FailuresOptions:
    """`gpu-trace analyze failures` options."""

    by: str = option("status", "status, cause, size (= gpus), account, qos, partition, user or vc.")
    lost: bool = option(False, "GPU hours lost to failed/cancelled/preempted jobs.")
    mtbf: bool = option(False, "Node-attributed failures, MTBF per node-hour and GPU-hour.")


def _run(inputs: Any, options: FailuresOptions) -> pl.LazyFrame:
    choose("--by value", options.by, ("cause", *BY_CHOICES))
    if options.mtbf:
        return mtbf(inputs.jobs, inputs.events, inputs.gpu_samples)
    if options.by == "cause":
        return by_cause(inputs.jobs, inputs.placements, inputs.events)
    jobs = with_group(inputs.jobs, options.by) if options.by in GROUP_BY else inputs.jobs
    if options.lost:
        return lost_gpu_time(jobs, options.by)
    return status_mix(jobs, options.by)


#: Header label and meaning of the columns of ``--by cause`` and ``--mtbf`` (the ones the
#: report shows; shared columns such as ``lost_gpu_hours`` are in ``reports/headers.py``).
#: Definitions: docs/metrics.md, "Failures by cause and MTBF".
GLOSSARY = {
    "cause": (
        "cause",
        "most specific failure cause of the job (who cancelled, preemption, device event, "
        "status or retry)",
    ),
    "node_hours": ("node-hours", "node-hours held by GPU jobs (else the sampled span)"),
    "node_fail_jobs": ("node-failed jobs", "GPU jobs that ended node_fail"),
    "device_events": ("device faults", "xid (code != 0), ecc_dbe and gpu_lost events"),
    "node_failures": ("node-attributed failures", "node_fail_jobs + device_events"),
    "mtbf_node_h": ("MTBF (node-hours)", "node_hours / node_failures"),
    "mtbf_gpu_h": ("MTBF (GPU hours)", "gpu_hours / node_failures"),
    "failures_per_1k_node_h": (
        "failures per 1,000 node-hours",
        "node_failures per 1000 node-hours",
    ),
    "failures_per_1k_gpu_h": ("failures per 1,000 GPU hours", "node_failures per 1000 GPU hours"),
}

PLUGIN = AnalysisPlugin(
    name="failures",
    help="Final-status mix of jobs and GPU time; with --lost, GPU time lost per group; "
    "--by cause: lost GPU hours by cause (status, OOM, preemption, admin or user cancel, XID / "
    "ECC / lost-GPU events, retries); "
    "--mtbf: failure rates and MTBF (definitions: docs/metrics.md).",
    run=_run,
    options=FailuresOptions,
    title="Failures",
    glossary=GLOSSARY,
    rank=40,
)
