"""Canonical tables, defined once as pyarrow schemas.

``TABLES`` is the registry every other part of gpu-trace reads: the store validates
frames against it, the catalog creates one DuckDB view per entry, and
``gpu_trace.schemas.export`` writes the language-neutral contracts in ``schemas/``.
"""

from __future__ import annotations

from gpu_trace.schemas.jobs import JOB_STATUSES, JOBS, PLACEMENTS, TIME_BASES
from gpu_trace.schemas.machines import CAPACITY, MACHINES
from gpu_trace.schemas.model import TS_UTC, Column, Table
from gpu_trace.schemas.provenance import INGESTS, QUARANTINE
from gpu_trace.schemas.replay import (
    REPLAY_JOBS,
    REPLAY_RUNS,
    REPLAY_TIMESERIES,
    REPLAY_VALIDATION,
)
from gpu_trace.schemas.requests import LATENCY_KINDS, REQUEST_BLOCKS, REQUEST_STATUSES, REQUESTS
from gpu_trace.schemas.serve import SERVE_REQUESTS, SERVE_RUNS, SERVE_TIMESERIES
from gpu_trace.schemas.tasks import JOB_TAGS, TASKS
from gpu_trace.schemas.telemetry import (
    EVENT_KINDS,
    EVENTS,
    GPU_METRICS,
    GPU_PROCESSES,
    GPU_SAMPLES,
    HOST_METRICS,
    HOST_SAMPLES,
)
from gpu_trace.schemas.usage import USAGE, USAGE_METRICS

TABLES: dict[str, Table] = {
    t.name: t
    for t in (
        JOBS,
        PLACEMENTS,
        MACHINES,
        CAPACITY,
        GPU_SAMPLES,
        GPU_PROCESSES,
        HOST_SAMPLES,
        EVENTS,
        QUARANTINE,
        INGESTS,
        REPLAY_RUNS,
        REPLAY_JOBS,
        REPLAY_TIMESERIES,
        REPLAY_VALIDATION,
        TASKS,
        JOB_TAGS,
        USAGE,
        REQUESTS,
        REQUEST_BLOCKS,
        SERVE_RUNS,
        SERVE_REQUESTS,
        SERVE_TIMESERIES,
    )
}

__all__ = [
    "CAPACITY",
    "EVENTS",
    "EVENT_KINDS",
    "GPU_METRICS",
    "GPU_PROCESSES",
    "GPU_SAMPLES",
    "HOST_METRICS",
    "HOST_SAMPLES",
    "INGESTS",
    "JOBS",
    "JOB_STATUSES",
    "JOB_TAGS",
    "LATENCY_KINDS",
    "MACHINES",
    "PLACEMENTS",
    "QUARANTINE",
    "REPLAY_JOBS",
    "REPLAY_RUNS",
    "REPLAY_TIMESERIES",
    "REPLAY_VALIDATION",
    "REQUESTS",
    "REQUEST_BLOCKS",
    "REQUEST_STATUSES",
    "SERVE_REQUESTS",
    "SERVE_RUNS",
    "SERVE_TIMESERIES",
    "TABLES",
    "TASKS",
    "TIME_BASES",
    "TS_UTC",
    "USAGE",
    "USAGE_METRICS",
    "Column",
    "Table",
]
