"""The declared unit of every named column a table shows: where number formatting comes
from (:mod:`gpu_trace.display`), so that no unit is ever guessed from part of a name.

A column's unit is looked up by its **exact** name, in this order:

1. the units the code that made the frame passes along (``readable(frame, units)``,
   ``emit(..., units=...)``): an analysis' own declaration (:func:`analysis_units`:
   ``AnalysisPlugin.units``, a mapping or a function of the command's options, then
   :data:`BUILTIN` for the built-in analyses), or a producer of computed names
   (``job_usage.usage_units``);
2. the canonical schemas' columns (``Column.unit``, ``gpu-trace schema``) and
   :data:`COMMON`, names that mean one thing wherever they appear;
3. the project's naming convention ("units in column names"), for a name that is a
   plain identifier (``[a-z][a-z0-9_]*``) only, by its **last** part alone
   (:data:`SUFFIX_UNITS`: ``wait_s`` seconds, ``idle_gpu_s`` GPU-seconds,
   ``vram_bytes`` bytes, ``backlog_share`` a fraction), so a new analysis column named
   by the convention is shown right before anyone lists it;
4. nothing: a plain number. A computed SQL column such as ``sum(gpus*run_s)/3600``
   (not an identifier) has no unit and is shown as ``4054.5``, never as a duration
   because ``run_s`` appears inside it; ``mem_used_bytes_samples`` ends in
   ``samples``, so it is never bytes.

Units (:data:`DISPLAY_UNITS` lists those with their own form; any other unit, e.g.
``gpu``, ``gpu_h``, ``kWh``, ``count``, is a plain number):

- ``s``: seconds, shown as a duration (``2 h 03 min``); ``ms`` stays a plain number
  (sub-millisecond overheads would read ``0.0 s``);
- ``bytes`` / ``mib``: a binary size (``1.5 TiB``);
- ``fraction``: a 0-1 share, rate or ratio, shown as a percentage with one decimal
  computed from the exact value (``0.1434`` -> ``14.3 %``);
- ``pct``: already 0-100, a plain number (the header says "%");
- ``id``: an identifier, digits as they are (no thousands separators);
- ``gpu_s``: GPU-seconds, a plain number (a quantity of GPU time, not a duration).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

from gpu_trace.schemas import TABLES
from gpu_trace.schemas.telemetry import GPU_METRICS, HOST_METRICS

DISPLAY_UNITS = ("s", "bytes", "mib", "fraction", "id")
"""The units shown in a form of their own; every other unit is a plain number."""

STATUS_CLASSES = ("completed", "cancelled", "failed", "preempted", "unfinished")

_DURATIONS = ("mean", "p10", "p25", "p50", "p75", "p90", "p95", "p99", "max")

COMMON: dict[str, str] = {
    # queueing delays (``analyze queueing``, report tables)
    **{f"{stat}_s": "s" for stat in ("mean", "median", "p90", "p99", "max")},
    # summary
    **{
        f"{a}_{b}_s_{c}": "s"
        for a in ("avg", "med")
        for b in ("run", "queue")
        for c in ("gpu", "cpu")
    },
    **{f"{s}_gpu_job_share": "fraction" for s in STATUS_CLASSES},
    **{f"{s}_gpu_hours_share": "fraction" for s in STATUS_CLASSES},
    **{f"{s}_gpu_time_share": "fraction" for s in STATUS_CLASSES},
    **{f"{s}_rate{c}": "fraction" for s in STATUS_CLASSES for c in ("", "_cpu", "_gpu")},
    "gpu_job_share": "fraction",
    "gpu_hours": "gpu_h",
    "jobs": "count",
    "gpu_jobs": "count",
    "cpu_jobs": "count",
    "unfinished_jobs": "count",
    "users": "count",
    "samples": "count",
    # shares of a group (jobs --view sizes, failures, sharing, provisioning, users)
    "job_share": "fraction",
    "gpu_share": "fraction",
    "gpu_time_share": "fraction",
    "cum_job_share": "fraction",
    "cum_gpu_time_share": "fraction",
    "zero_wait_share": "fraction",
    "lost_share": "fraction",
    "share_of_gpu_hours": "fraction",
    "over_share": "fraction",
    "under_share": "fraction",
    "idle_share": "fraction",
    "saturated_share": "fraction",
    "user_share": "fraction",
    "value_share": "fraction",
    **{f"top{p}pct_share": "fraction" for p in (1, 5, 10, 20)},
    "cdf": "fraction",
    "queue_share": "fraction",
    "coverage": "fraction",
    "lost_gpu_hours": "gpu_h",
    "failed_gpu_hours": "gpu_h",
    "cancelled_gpu_hours": "gpu_h",
    "preempted_gpu_hours": "gpu_h",
    # durations and GPU time
    "x_s": "s",
    "gpu_time_s": "gpu_s",
    "covered_gpu_s": "gpu_s",
    "gap_gpu_s": "gpu_s",
    "covered_s": "s",
    "gap_s": "s",
    "median_interval_s": "s",
    "allocation_pct": "pct",
    "mean_allocation_pct": "pct",
    "median_allocation_pct": "pct",
    "fragmented_pct": "pct",
    "hour": "id",
    "weekday": "id",
    # accounting (sreport / seff views): seff prints efficiencies as percentages
    **{f"{m}{k}_efficiency": "fraction" for m in ("", "median_") for k in ("cpu", "mem")},
    "median_limit_used": "fraction",
    # replay ratios (0-1) the schemas declare without a unit
    "goodput_ratio": "fraction",
    "alloc_mean_ratio": "fraction",
    "alloc_ratio": "fraction",
    **{f"estimator_within_{p}_ratio": "fraction" for p in (10, 50, 100)},
}
"""Output columns that mean the same thing in every analysis and report table."""

BUILTIN: dict[str, Mapping[str, str]] = {
    "jobs": {**dict.fromkeys(_DURATIONS, "s"), "n": "count"},
}
"""Per built-in analysis: its columns whose unit is its own (``jobs``' ``p50`` is a run
time; ``per-job``'s is the metric's unit, see :func:`_per_job_units`)."""


SUFFIX_UNITS: tuple[tuple[str, str], ...] = (
    ("_gpu_s", "gpu_s"),
    ("_s", "s"),
    ("_bytes", "bytes"),
    ("_mib", "mib"),
    ("_share", "fraction"),
)
"""The naming convention's unit suffixes, most specific first. ``_rate`` and
``_ratio`` are not among them: a rate may be per hour and a ratio above 1 (finish-time
fairness), so those are declared by name."""

_IDENTIFIER = re.compile(r"[a-z][a-z0-9_]*")


def convention_unit(name: str) -> str | None:
    """The unit a plain identifier's last part names (:data:`SUFFIX_UNITS`), else None;
    None for anything that is not a plain identifier (a SQL expression).
    """
    if not _IDENTIFIER.fullmatch(name):
        return None
    return next((unit for suffix, unit in SUFFIX_UNITS if name.endswith(suffix)), None)


def metric_unit(metric: str) -> str | None:
    """The canonical unit of a telemetry metric (``mem_used_bytes`` -> ``bytes``)."""
    found = GPU_METRICS.get(metric) or HOST_METRICS.get(metric)
    return found[0] if found else None


def metric_stats_units(metric: str, stats: tuple[str, ...], prefix: str = "") -> dict[str, str]:
    """Units of statistics of one metric: the metric's own unit for each of ``stats``
    (named ``prefix + stat``); counts of samples are counts, not bytes.
    """
    unit = metric_unit(metric)
    return {f"{prefix}{s}": unit for s in stats if unit is not None}


def _per_job_units(options: Any) -> Mapping[str, str]:
    metric = str(getattr(options, "metric", "gpu_util_pct"))
    return {**metric_stats_units(metric, ("mean", "p50", "p95")), "samples": "count"}


BUILTIN_BY_OPTIONS: dict[str, Callable[[Any], Mapping[str, str]]] = {
    "per-job": _per_job_units,
}


@cache
def schema_units() -> dict[str, str]:
    """Every canonical column with a declared unit (first table wins on a shared name;
    the schemas give one unit per name).
    """
    out: dict[str, str] = {}
    for table in TABLES.values():
        for col in table.columns:
            if col.unit:
                out.setdefault(col.name, col.unit)
    return out


def known_unit(name: str) -> str | None:
    """A column's unit from :data:`COMMON`, the schemas, then the naming convention
    (no analysis context).
    """
    return COMMON.get(name) or schema_units().get(name) or convention_unit(name)


def analysis_units(plugin: Any, options: Any) -> dict[str, str]:
    """The units an ``analyze`` command's output declares: the plugin's own
    ``units`` (mapping, or function of the options), else the built-in table.
    """
    declared = getattr(plugin, "units", None)
    if callable(declared):
        declared = declared(options)
    name = getattr(plugin, "name", "")
    out: dict[str, str] = dict(BUILTIN.get(name, {}))
    if name in BUILTIN_BY_OPTIONS:
        out.update(BUILTIN_BY_OPTIONS[name](options))
    out.update(declared or {})
    return out
