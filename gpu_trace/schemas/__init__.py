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
from gpu_trace.schemas.telemetry import (
    EVENT_KINDS,
    EVENTS,
    GPU_METRICS,
    GPU_SAMPLES,
    HOST_METRICS,
    HOST_SAMPLES,
)

TABLES: dict[str, Table] = {
    t.name: t
    for t in (
        JOBS,
        PLACEMENTS,
        MACHINES,
        CAPACITY,
        GPU_SAMPLES,
        HOST_SAMPLES,
        EVENTS,
        QUARANTINE,
        INGESTS,
    )
}

__all__ = [
    "CAPACITY",
    "EVENTS",
    "EVENT_KINDS",
    "GPU_METRICS",
    "GPU_SAMPLES",
    "HOST_METRICS",
    "HOST_SAMPLES",
    "INGESTS",
    "JOBS",
    "JOB_STATUSES",
    "MACHINES",
    "PLACEMENTS",
    "QUARANTINE",
    "TABLES",
    "TIME_BASES",
    "TS_UTC",
    "Column",
    "Table",
]
