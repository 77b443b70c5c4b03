"""Characterization analyses: one module per analysis, each a set of functions from
canonical LazyFrames (``gpu_trace.open(store).jobs``) to an aggregated LazyFrame.

``import gpu_trace as gt; gt.analyses.queueing.queue_by(s.jobs, "gpus")``: every
submodule below is importable from here. Definitions: ``definitions`` and
``docs/metrics.md``.

Each analysis module also declares its ``gpu-trace analyze`` command(s) (a module-level
``PLUGIN`` / ``PLUGINS``, :mod:`gpu_trace.plugins`): the command, ``docs/plugins.md`` and
the report's use of its chart and glossary are generated from that declaration.
"""

from __future__ import annotations

from gpu_trace.analyses import (
    arrivals,
    backlog,
    definitions,
    energy,
    failures,
    jobs,
    occupancy,
    periods,
    provisioning,
    queueing,
    scope,
    serving_arrivals,
    serving_fidelity,
    serving_latency,
    serving_popularity,
    serving_prefix,
    serving_sessions,
    serving_tokens,
    sharing,
    summary,
    users,
    utilization,
)

__all__ = [
    "arrivals",
    "backlog",
    "definitions",
    "energy",
    "failures",
    "jobs",
    "occupancy",
    "periods",
    "provisioning",
    "queueing",
    "scope",
    "serving_arrivals",
    "serving_fidelity",
    "serving_latency",
    "serving_popularity",
    "serving_prefix",
    "serving_sessions",
    "serving_tokens",
    "sharing",
    "summary",
    "users",
    "utilization",
]
