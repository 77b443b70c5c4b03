"""The Python API: ``import gpu_trace as gt; s = gt.open("data/store")``.

A :class:`Store` is a read-only snapshot of **one generation** of a store, resolved when
it is opened: every table, SQL query and analysis of one ``Store`` object sees the same
commit, even while an ingest publishes a newer one (open the store again to see it).

- ``s.jobs`` (and every other canonical table: ``s.table("gpu_samples")``) is a lazy
  polars scan; nothing is read until ``.collect()``.
- ``s.sql("select ...")`` runs SQL on the same locked, read-only DuckDB connection as
  ``gpu-trace sql`` (only the store is readable; SELECT / EXPLAIN / SET VARIABLE) and
  returns a polars DataFrame.
- The analyses are plain functions over LazyFrames in :mod:`gpu_trace.analyses`
  (``gpu_trace.analyses.queueing.queue_by(s.jobs, "gpus")``); the most used ones are
  also methods here (``s.summary()``, ``s.queueing()``, ...) with the CLI's defaults,
  and every declared analysis, plugins included, runs by name from its declaration:
  ``s.analyze("accounting", by="account")``.

Opening a folder that is not a store is an error: unlike the ingest path, the API never
creates an empty store by accident (a mistyped path would otherwise read as zero rows).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from gpu_trace import plugins
from gpu_trace.analyses import backlog as blg
from gpu_trace.analyses import failures as fail
from gpu_trace.analyses import jobs as jb
from gpu_trace.analyses import occupancy as occ
from gpu_trace.analyses import queueing as que
from gpu_trace.analyses import sharing as shr
from gpu_trace.analyses import users as usr
from gpu_trace.analyses.inputs import Inputs
from gpu_trace.analyses.summary import summary as summary_table
from gpu_trace.errors import GpuTraceError
from gpu_trace.schemas import TABLES
from gpu_trace.store.catalog import check_read_only, connect_read_only, fetch_arrow, query
from gpu_trace.store.generations import CURRENT, is_generation, reader_root, release
from gpu_trace.store.parquet import ensure_layout
from gpu_trace.store.scan import scan

PathLike = str | os.PathLike[str]


def is_store(path: Path) -> bool:
    """A folder some ingest has written: ``current`` link, a generation folder, or the
    old layout (table folders directly inside).
    """
    if not path.is_dir():
        return False
    if (path / CURRENT).is_symlink() or is_generation(path):
        return True
    return any((path / name).is_dir() for name in TABLES)


def open(path: PathLike, sources: Sequence[str] | None = None) -> Store:
    """Open the store at ``path`` (str or Path) as a read-only snapshot; ``sources``
    restricts every table (and analysis) to those trace families.
    """
    return Store(path, sources)


class Store:
    """One generation of a store, read-only. See the module docstring."""

    def __init__(self, path: PathLike, sources: Sequence[str] | None = None) -> None:
        self.path = Path(path).expanduser()
        if not is_store(self.path):
            msg = f"no store at {self.path} (run gpu-trace ingest first)"
            raise GpuTraceError(msg)
        if not is_generation(self.path):
            ensure_layout(self.path)  # repairs what a killed writer left; reads otherwise
        self.root = reader_root(self.path)  # pinned until this Store is collected
        weakref.finalize(self, release, self.root)
        self.sources = list(sources) if sources else None

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r}, generation={self.generation!r})"

    @property
    def generation(self) -> str:
        """The generation folder read (``gen-00000012``)."""
        return self.root.name

    @property
    def tables(self) -> list[str]:
        """The canonical table names (``schemas/*.json``)."""
        return list(TABLES)

    def table(self, name: str) -> pl.LazyFrame:
        """A lazy scan of one canonical table (empty, with the canonical schema, when the
        store holds nothing for it).
        """
        if name not in TABLES:
            msg = f"unknown table {name!r}; choose one of {', '.join(TABLES)}"
            raise GpuTraceError(msg)
        return scan(self.root, name, self.sources)

    @property
    def jobs(self) -> pl.LazyFrame:
        """One row per submitted job (pod for openb): what most analyses start from."""
        return self.table("jobs")

    @property
    def placements(self) -> pl.LazyFrame:
        """Where and when each piece of a job ran: one row per job attempt per machine."""
        return self.table("placements")

    @property
    def machines(self) -> pl.LazyFrame:
        """The machine inventories: one row per machine, ``dataset`` naming the inventory."""
        return self.table("machines")

    @property
    def capacity(self) -> pl.LazyFrame:
        """GPU capacity over time, per virtual cluster (``vc`` null: the cluster total)."""
        return self.table("capacity")

    @property
    def gpu_samples(self) -> pl.LazyFrame:
        """GPU telemetry in long form: one row per time x GPU x metric."""
        return self.table("gpu_samples")

    @property
    def events(self) -> pl.LazyFrame:
        """Discrete device and job events (XID and ECC errors, lost GPUs)."""
        return self.table("events")

    @property
    def inputs(self) -> Inputs:
        """Every table an analysis reads, from this snapshot (``gpu_trace.analyses``)."""
        return Inputs.from_store(self.root, self.sources)

    def sql(self, sql: str) -> pl.DataFrame:
        """Run read-only SQL over this snapshot's views; the last statement's result.
        Raises :class:`gpu_trace.errors.QueryError` for bad or refused SQL. ``sources``
        given to :func:`open` does not filter SQL (add a ``WHERE source = ...``).
        """
        check_read_only(sql)
        con = connect_read_only(self.root)
        try:
            rel = query(con, sql)
            if rel is None:
                return pl.DataFrame()
            frame = pl.from_arrow(fetch_arrow(rel))
            assert isinstance(frame, pl.DataFrame)
            return frame
        finally:
            con.close()

    def analyze(self, name: str, **options: Any) -> pl.DataFrame:
        """Any declared analysis (``gpu-trace analyze NAME``), built-in or plugin, run
        from its declaration: ``options`` are its declared option fields (the CLI's
        flags with ``_`` for ``-``; defaults as the CLI's), e.g.
        ``s.analyze("queueing", by="hour")``. Same rows as the command prints.
        """
        plugin = plugins.lookup("analyses", name, {p.name: p for p in plugins.analyses()})
        fields = {f.name for f in dataclasses.fields(plugin.options)}
        unknown = sorted(set(options) - fields)
        if unknown:
            known = ", ".join(sorted(fields)) or "none"
            msg = f"analysis {name!r} has no option {', '.join(unknown)} (its options: {known})"
            raise GpuTraceError(msg)
        frame: pl.LazyFrame | pl.DataFrame = plugin.run(self.inputs, plugin.options(**options))
        return frame.lazy().collect()

    # The analyses with the CLI's defaults; each is one call into gpu_trace.analyses.

    def summary(self, by: Sequence[str] = ("source", "cluster")) -> pl.DataFrame:
        """``gpu-trace analyze summary``: counts, run / queue times, status rates (running
        jobs' GPU time up to the as-of instant, as the CLI counts it).
        """
        return summary_table(self.inputs.clipped_jobs, by=by).collect()

    def queueing(self, by: str = "gpus") -> pl.DataFrame:
        """``gpu-trace analyze queueing --by``: queueing delay of GPU jobs (pending jobs'
        waits so far included, counted in ``censored_jobs``).
        """
        inp = self.inputs
        return que.queue_by(inp.clipped_jobs, by, tz_by_source=inp.tz).collect()

    def utilization(self, freq: str = "1h", by: str = "cluster") -> pl.DataFrame:
        """``gpu-trace analyze utilization``: allocated / installed GPUs per bin."""
        inp = self.inputs  # running jobs hold their GPUs until the as-of instant
        jobs = inp.clipped_jobs
        return occ.occupancy(jobs, inp.capacity, inp.machines, freq=freq, by=by).collect()

    def backlog(self, by: str = "cluster", as_of: dt.datetime | None = None) -> pl.DataFrame:
        """``gpu-trace analyze backlog --by``: GPU jobs and GPUs pending at the as-of
        instant (default: each cluster's latest recorded time); the series over time and
        the longest waits are ``gt.analyses.backlog.backlog_series`` / ``longest_waits``.
        """
        return blg.backlog_now(self.jobs, by, as_of=as_of).collect()

    def failures(self, by: str = "status") -> pl.DataFrame:
        """``gpu-trace analyze failures --by``: final-status mix per group."""
        return fail.status_mix(self.jobs, by).collect()

    def users(self) -> pl.DataFrame:
        """``gpu-trace analyze users --per-user``: GPU time per user (running jobs' up to
        the as-of instant).
        """
        return usr.per_user(self.inputs.clipped_jobs).collect()

    def sizes(self) -> pl.DataFrame:
        """``gpu-trace analyze jobs``: share of jobs and GPU time per size bucket."""
        return jb.size_shares(self.jobs).collect()

    def request_mix(self) -> pl.DataFrame:
        """``gpu-trace analyze sharing``: whole / shared / multi-GPU request mix."""
        return shr.request_mix(self.jobs).collect()
