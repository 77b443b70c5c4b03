"""The canonical tables an analysis reads, as lazy frames over one store."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from gpu_trace.analyses.arrivals import tz_by_source
from gpu_trace.analyses.occupancy import INVENTORY_SOURCES
from gpu_trace.analyses.scope import Scope
from gpu_trace.schemas import TABLES
from gpu_trace.store.generations import snapshot_root
from gpu_trace.store.parquet import polars_schema
from gpu_trace.store.scan import scan


def _empty(table: str) -> pl.LazyFrame:
    return pl.LazyFrame(schema=polars_schema(TABLES[table]))


if TYPE_CHECKING:  # DuckDB is loaded by the analyses that query in SQL
    import duckdb


@dataclass
class Inputs:
    """Lazy scans of every table an analysis may need, optionally restricted to some
    sources and to a :class:`~gpu_trace.analyses.scope.Scope` (clusters, partitions, a
    time window, an as-of instant). Nothing is read until an analysis collects.

    ``jobs`` are the jobs in scope with their columns as stored; ``clipped_jobs`` the
    same jobs as of the as-of instant and clipped to the window (running jobs run until
    as-of, pending ones carry their wait so far): what allocation, GPU-hours, users and
    queueing count.
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
    #: What the scans are restricted to (default: everything, as of each dataset).
    scope: Scope = field(default_factory=Scope)
    #: The jobs as stored, before the scope (the as-of instant is each dataset's).
    all_jobs: pl.LazyFrame | None = None
    #: Serving requests arriving in the window (``requests``), and their prefix blocks
    #: (``request_blocks``: cluster-filtered only; the serving analyses join them to
    #: the requests in scope). Empty frames with the canonical schema by default.
    requests: pl.LazyFrame = field(default_factory=lambda: _empty("requests"))
    request_blocks: pl.LazyFrame = field(default_factory=lambda: _empty("request_blocks"))

    @classmethod
    def from_store(
        cls, store: Path, sources: Sequence[str] | None = None, scope: Scope | None = None
    ) -> Inputs:
        """Scans of ``store``'s current generation, restricted to ``sources`` if given
        and to ``scope`` (:meth:`Scope.select` for jobs; cluster, partition and window
        filters for the other tables).
        """
        src = list(sources) if sources else None
        sc = scope or Scope()
        root = store
        store = snapshot_root(store)  # every table from the same generation
        jobs = scan(store, "jobs", src)

        def timed(table: str) -> pl.LazyFrame:
            return sc.during(sc.where(scan(store, table, src)))

        return cls(
            jobs=sc.select(jobs),
            placements=sc.overlapping(sc.where(scan(store, "placements", src))),
            # inventory-only sources' nodes serve every source's cluster of that name
            machines=sc.where(
                scan(
                    store,
                    "machines",
                    list(dict.fromkeys([*src, *INVENTORY_SOURCES])) if src else None,
                )
            ),
            # inventory-only sources serve every source's cluster of that name
            capacity=sc.capacity(
                scan(
                    store,
                    "capacity",
                    list(dict.fromkeys([*src, *INVENTORY_SOURCES])) if src else None,
                )
            ),
            gpu_samples=timed("gpu_samples"),
            host_samples=timed("host_samples"),
            events=timed("events"),
            tasks=sc.where(scan(store, "tasks", src)),
            usage=sc.where(scan(store, "usage", src)),
            store=root,
            sources=tuple(src or ()),
            scope=sc,
            all_jobs=jobs,
            # a request is in the window when it arrives in it
            requests=sc.during(sc.where(scan(store, "requests", src)), "arrival_time"),
            request_blocks=sc.where(scan(store, "request_blocks", src)),
        )

    @cached_property
    def clipped_jobs(self) -> pl.LazyFrame:
        """The jobs in scope as of their as-of instant, clipped to the window
        (:meth:`Scope.clip`): running jobs end at as-of, pending ones have ``wait_s``
        so far and ``wait_censored``.
        """
        return self.scope.clip(self._stored_jobs, self.as_of)

    @property
    def _stored_jobs(self) -> pl.LazyFrame:
        return self.all_jobs if self.all_jobs is not None else self.jobs

    @cached_property
    def as_of(self) -> pl.DataFrame:
        """``source, dataset, as_of``: each dataset's as-of instant (the export's own
        time, else its latest timestamp; ``--as-of`` for all), computed once.
        """
        return self.scope.as_of_by_dataset(self._stored_jobs).collect()

    @cached_property
    def tz(self) -> dict[str, str | None]:
        """Each source's time zone, for local-time analyses."""
        return tz_by_source(self.jobs)

    def connection(self) -> duckdb.DuckDBPyConnection:
        """The store's SQL views (for analyses that join in DuckDB: energy, per-job),
        with ``placements``, ``gpu_samples`` and ``events`` restricted to the scope when
        it restricts anything, so that SQL sees what the frames see. The views stay
        views over the Parquet files (nothing is loaded into memory here).
        """
        from gpu_trace.store.catalog import connect  # DuckDB, on demand

        assert self.store is not None, "Inputs.connection needs the store"
        con = connect(self.store)
        if self.scope.everything:
            return con
        restricted: tuple[tuple[str, pl.LazyFrame, str | None, tuple[str, str] | None], ...] = (
            ("placements", self.placements, None, ("start_time", "end_time")),
            ("gpu_samples", self.gpu_samples, "time", None),
            ("events", self.events, "time", None),
        )
        for name, frame, time, interval in restricted:
            row = con.execute(
                "SELECT sql FROM duckdb_views() WHERE view_name = ?", [name]
            ).fetchone()
            assert row is not None, name
            body = str(row[0]).split(" AS ", 1)[1].rstrip().rstrip(";")
            names = frame.collect_schema().names()
            where = self.scope.sql_where(names, time=time, interval=interval)
            con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM ({body}) WHERE {where}")
        return con
