"""Why an analysis returned no rows: one line naming what is missing.

Every ``gpu-trace analyze`` command that returns an empty table still exits 0 with the
empty table (an empty answer is an answer; scripts read the header), and prints **one**
line on stderr saying why, so an empty table never reads as "nothing happened":

    analyze summary: no rows: no jobs in this store; ingest a scheduler export ...

The reason is found in this order:

1. the analysis' own ``empty(inputs, options)`` (``AnalysisPlugin.empty``), when it
   returns text (e.g. a reason specific to an option);
2. the first table the analysis reads (``AnalysisPlugin.needs``, else
   :data:`BUILTIN_NEEDS` for the built-ins, else ``jobs``) that holds no row for the
   selected sources, with how to fill it (:data:`HINTS`); for telemetry, the metric
   the command asked for when the store holds other metrics but not that one; for
   jobs, "no GPU job" when every job is a CPU job;
3. otherwise: the inputs are there, but none matched what the analysis counts with
   these options.

The line also names the tables the store does hold, so a DCGM-only store's ``analyze
summary`` says it has GPU telemetry and no jobs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import polars as pl

HINTS: dict[str, str] = {
    "jobs": "ingest a scheduler export (gpu-trace ingest slurm, kubernetes, ...) or a "
    "published trace",
    "placements": "ingest a scheduler export that names the hosts and GPUs each job held "
    "(slurm, kubernetes, philly, pai2020)",
    "gpu_samples": "ingest GPU telemetry (gpu-trace ingest nvidia-smi, dcgmi, prometheus, "
    "prometheus-range) or collect it (gpu-trace telemetry sample, scrape, pull)",
    "machines": "ingest a node inventory (gpu-trace ingest sinfo, scontrol, nodes-csv, or "
    "kubernetes nodes)",
    "capacity": "ingest a node inventory (sinfo, scontrol, nodes-csv) or a trace that "
    "publishes its GPU totals",
    "events": "ingest telemetry with device events (XID, ECC: dcgmi, prometheus)",
    "tasks": "ingest a trace with per-task requests (pai2020)",
    "usage": "ingest a trace with per-task usage (pai2020 sensor / machine_metric)",
    "host_samples": "ingest host telemetry (philly, acme utilization files)",
    "requests": "ingest a serving trace (gpu-trace ingest azure-llm, mooncake, burstgpt, gentd26)",
    "request_blocks": "ingest a serving trace with prefix-block hashes (gpu-trace ingest mooncake)",
}
"""What fills each table, for the one line an empty result prints."""

WHAT: dict[str, str] = {
    "jobs": "jobs",
    "placements": "placements (the hosts and GPUs each job held)",
    "gpu_samples": "GPU telemetry (gpu_samples)",
    "machines": "machine inventory",
    "capacity": "GPU capacity",
    "events": "device events",
    "tasks": "tasks",
    "usage": "task usage",
    "host_samples": "host telemetry",
    "requests": "serving requests",
    "request_blocks": "prefix-cache blocks (request_blocks)",
}

TABLES = tuple(HINTS)


def _energy_needs(options: Any) -> tuple[str, ...]:
    if str(getattr(options, "by", "")) == "gpu":
        return ("gpu_samples",)
    held = () if getattr(options, "jobs_file", None) is not None else ("placements",)
    return (*held, "gpu_samples")


def _failures_needs(options: Any) -> tuple[str, ...]:
    if getattr(options, "mtbf", False):
        return ("jobs", "events")
    return ("jobs",)


def _utilization_needs(options: Any) -> tuple[str, ...]:
    return ("gpu_samples",) if str(getattr(options, "view", "")) == "measured" else ("jobs",)


BUILTIN_NEEDS: dict[str, tuple[str, ...] | Callable[[Any], tuple[str, ...]]] = {
    "summary": ("jobs",),
    "arrivals": ("jobs",),
    "jobs": ("jobs",),
    "queueing": ("jobs",),
    "users": ("jobs",),
    "failures": _failures_needs,
    "sharing": ("jobs",),
    "fragmentation": ("machines", "jobs"),
    "provisioning": ("tasks", "usage"),
    "utilization": _utilization_needs,
    "per-job": ("placements", "gpu_samples"),
    "energy": _energy_needs,
    "idle": ("jobs", "gpu_samples"),
    "backlog": ("jobs",),
    "accounting": ("jobs",),
}
"""The tables each built-in analysis reads (a plugin declares ``needs`` itself)."""

GPU_JOB_ANALYSES = frozenset({"utilization", "sharing", "queueing", "fragmentation"})
"""Analyses that count GPU jobs only: "no GPU job" is their reason on a CPU-only store."""


def _count(frame: pl.LazyFrame) -> int:
    return int(frame.select(pl.len()).collect().item())


def _needs(plugin: Any, options: Any) -> tuple[str, ...]:
    declared = getattr(plugin, "needs", ())
    if declared:
        return tuple(declared)
    builtin = BUILTIN_NEEDS.get(getattr(plugin, "name", ""), ("jobs",))
    return builtin(options) if callable(builtin) else builtin


def _held(inputs: Any) -> list[str]:
    return [t for t in TABLES if hasattr(inputs, t) and _count(getattr(inputs, t))]


def _where(inputs: Any) -> str:
    sources = tuple(getattr(inputs, "sources", ()) or ())
    return f"for source(s) {', '.join(sources)}" if sources else "in this store"


def _holds(inputs: Any) -> str:
    held = _held(inputs)
    if not held:
        return " (the store holds no rows at all)"
    return " (it holds " + ", ".join(WHAT[t] for t in held) + ")"


def _metric_reason(inputs: Any, options: Any) -> str | None:
    metric = getattr(options, "metric", None)
    if not metric:
        return None
    samples = inputs.gpu_samples
    if _count(samples.filter(pl.col("metric") == metric)):
        return None
    have = samples.select(pl.col("metric").unique().sort()).collect().to_series().to_list()
    return f"no GPU telemetry of metric {metric} {_where(inputs)} (it has {', '.join(have)})"


def why_empty(plugin: Any, inputs: Any, options: Any) -> str:
    """The one line an empty result of ``plugin`` prints (see the module docstring)."""
    name = getattr(plugin, "name", "analysis")
    custom: Callable[[Any, Any], str | None] | None = getattr(plugin, "empty", None)
    reason = custom(inputs, options) if custom else None
    if reason is None:
        reason = _missing(name, _needs(plugin, options), inputs, options)
    return f"analyze {name}: no rows: {reason}"


def _missing(name: str, needs: tuple[str, ...], inputs: Any, options: Any) -> str:
    for table in needs:
        frame = getattr(inputs, table, None)
        if frame is None or _count(frame) == 0:
            hint = HINTS.get(table, f"ingest data for the {table} table")
            if table == "placements" and hasattr(options, "jobs_file"):
                hint += ", or pass --jobs-file"
            return f"no {WHAT.get(table, table)} {_where(inputs)}{_holds(inputs)}; {hint}"
        if table == "gpu_samples":
            reason = _metric_reason(inputs, options)
            if reason:
                return reason
        if table == "jobs" and name in GPU_JOB_ANALYSES:
            jobs = _count(frame)
            if _count(frame.filter(pl.col("gpus") > 0)) == 0:
                return f"no GPU job (gpus > 0) among the {jobs:,} jobs {_where(inputs)}"
    if {"placements", "gpu_samples"} <= set(needs):
        return _no_overlap(inputs)
    what = ", ".join(WHAT.get(t, t) for t in needs)
    return f"the {what} {_where(inputs)} hold nothing that {name} counts with these options"


def _span(frame: pl.LazyFrame, host: str, start: str, end: str) -> str:
    row = frame.select(
        pl.col(host).n_unique().alias("hosts"),
        pl.col(start).min().alias("first"),
        pl.col(end).max().alias("last"),
    ).collect()
    hosts, first, last = row.row(0)
    return f"{hosts} host(s), {first:%Y-%m-%d %H:%M} to {last:%Y-%m-%d %H:%M} UTC"


def _no_overlap(inputs: Any) -> str:
    """Placements and telemetry both present, but no sample on a held GPU while held."""
    held = inputs.placements.filter(pl.col("start_time").is_not_null())
    samples = inputs.gpu_samples
    shared = (
        held.select(pl.col("machine_id").alias("host"))
        .unique()
        .join(samples.select("host").unique(), on="host")
    )
    where = "share no host" if _count(shared) == 0 else "overlap on no GPU and time"
    jobs = _span(held, "machine_id", "start_time", "end_time")
    telemetry = _span(samples, "host", "time", "time")
    return f"the placements ({jobs}) and the GPU telemetry ({telemetry}) {where}"
