"""The canonical tables an analysis reads, as lazy frames over one store."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import polars as pl

from gpu_trace.analyses.arrivals import tz_by_source
from gpu_trace.analyses.occupancy import INVENTORY_SOURCES
from gpu_trace.store.generations import snapshot_root
from gpu_trace.store.scan import scan


@dataclass
class Inputs:
    """Lazy scans of every table an analysis may need, optionally restricted to some
    sources. Nothing is read until an analysis collects.
    """

    jobs: pl.LazyFrame
    placements: pl.LazyFrame
    machines: pl.LazyFrame
    capacity: pl.LazyFrame
    gpu_samples: pl.LazyFrame
    host_samples: pl.LazyFrame
    events: pl.LazyFrame
    tasks: pl.LazyFrame
    usage: pl.LazyFrame
    #: The store these scans read (for analyses that query it in SQL, e.g. energy).
    store: Path | None = None
    #: The sources the scans are restricted to (empty: all).
    sources: tuple[str, ...] = ()

    @classmethod
    def from_store(cls, store: Path, sources: Sequence[str] | None = None) -> Inputs:
        """Scans of ``store``'s current generation, restricted to ``sources`` if given."""
        src = list(sources) if sources else None
        root = store
        store = snapshot_root(store)  # every table from the same generation
        return cls(
            jobs=scan(store, "jobs", src),
            placements=scan(store, "placements", src),
            machines=scan(store, "machines", src),
            # inventory-only sources serve every source's cluster of that name
            capacity=scan(
                store, "capacity", list(dict.fromkeys([*src, *INVENTORY_SOURCES])) if src else None
            ),
            gpu_samples=scan(store, "gpu_samples", src),
            host_samples=scan(store, "host_samples", src),
            events=scan(store, "events", src),
            tasks=scan(store, "tasks", src),
            usage=scan(store, "usage", src),
            store=root,
            sources=tuple(src or ()),
        )

    @cached_property
    def tz(self) -> dict[str, str | None]:
        """Each source's time zone, for local-time analyses."""
        return tz_by_source(self.jobs)
