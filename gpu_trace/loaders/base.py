"""What a loader hands to the store, and the ingest driver that writes it.

A loader turns one raw input (a folder or a file) into :class:`Batch` objects: rows for
one canonical table from one input file, plus the rows it rejected. It never writes
files. :func:`ingest` writes every batch through one :class:`StoreTransaction`, checks
that rows read = rows written + rows quarantined (+ rows merged, for a loader that
declares a ``merge_key``: :mod:`gpu_trace.loaders.merge`) for every file, and records
the reconciliation in the ``ingests`` table and the rejects in ``quarantine``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import polars as pl

from gpu_trace.errors import GpuTraceError, InputError
from gpu_trace.loaders.merge import (
    MERGED_TABLES,
    ORIGIN,
    Outcome,
    Pending,
    prior_lines,
    prior_quarantine,
    reconcile,
)
from gpu_trace.loaders.provenance import Manifests
from gpu_trace.loaders.textfile import FileInfo
from gpu_trace.schemas import QUARANTINE
from gpu_trace.store.parquet import StoreTransaction, polars_schema
from gpu_trace.version import __version__


class ReconciliationError(GpuTraceError):
    """Rows read did not equal rows written plus rows quarantined (a loader bug)."""


@dataclass
class Batch:
    """Canonical rows for one table from one input file, and that file's rejects."""

    table: str
    dataset: str
    file: FileInfo
    rows: pl.LazyFrame | pl.DataFrame
    rejected: pl.LazyFrame | pl.DataFrame | None = None
    rows_read: int | None = None
    """Records read for this table; defaults to the file's physical record count."""
    cluster: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    sort: bool = True
    rows_merged: int = 0
    """Records the loader itself folded into another record of this batch (a node that
    an inventory lists once per partition): read = written + quarantined + merged.
    """


class Loader(Protocol):
    """A source family's reader. ``name`` is the ``source`` value it writes.

    A loader whose exports overlap (the same job in several files or ingests) also sets
    ``merge_key`` (e.g. ``("cluster", "job_id")``): its ``jobs`` rows are then merged to
    one per key and its ``placements`` follow the winner (:mod:`gpu_trace.loaders.merge`).
    Such a loader may also set ``shared_datasets = True``: several input files of one
    ingest may then yield ``jobs`` / ``placements`` of the same dataset (snapshots of
    one cluster, which successive ingests also merge into one dataset); each is staged
    as a part and the merge joins them, as if the files were ingested one after another.
    """

    name: str

    def batches(self, path: Path, **options: Any) -> Iterator[Batch]:
        """Yield the batches for the raw input at ``path``."""
        ...


@dataclass(frozen=True)
class Reconciled:
    """One line of an ingest's reconciliation."""

    file: str
    table: str
    dataset: str
    rows_read: int
    rows_written: int
    rows_quarantined: int
    rows_merged: int = 0
    """Records folded into another export's record of the same job (merging sources)."""


@dataclass
class IngestReport:
    """The reconciliation of one ingest: a line per (file, table), for the CLI and the
    ``ingests`` table.
    """

    source: str
    store: Path
    lines: list[Reconciled] = field(default_factory=list)

    @property
    def totals(self) -> tuple[int, int, int]:
        """Rows read, written and quarantined over every line (read = written +
        quarantined + :attr:`merged`).
        """
        return (
            sum(r.rows_read for r in self.lines),
            sum(r.rows_written for r in self.lines),
            sum(r.rows_quarantined for r in self.lines),
        )

    @property
    def merged(self) -> int:
        """Records merged over every line (read = written + quarantined + merged)."""
        return sum(r.rows_merged for r in self.lines)


def require_path(path: Path) -> Path:
    """``path`` if it exists, else the one-line input error every loader gives."""
    if not path.exists():
        raise InputError(path, "no such file or directory")
    return path


def refuse_collision(seen: dict[tuple[str, str], Path], batch: Batch) -> None:
    """Two inputs whose names slug to one dataset (``Trace.csv`` and ``trace.csv``) would
    replace each other's rows in the store; refuse before anything is written.
    """
    key = (batch.table, batch.dataset)
    first = seen.setdefault(key, batch.file.path)
    if first != batch.file.path:
        raise InputError(
            batch.file.path,
            f"maps to the same {batch.table} dataset {batch.dataset!r} as {first}; "
            "rename one of the two files",
        )


def _check(batch: Batch, read: int, written: int, quarantined: int, merged: int = 0) -> None:
    """Rows read must be written + quarantined (+ merged); anything else is a loader bug."""
    if read != written + quarantined + merged:
        merge = f" and merged {merged}" if merged else ""
        msg = (
            f"{batch.file.path}: {batch.table}: read {read} records but wrote "
            f"{written}{merge} and quarantined {quarantined}"
        )
        raise ReconciliationError(msg)


@dataclass
class _Entry:
    """One batch written, waiting for its final counts (after the merge)."""

    batch: Batch
    read: int
    rejected: pl.DataFrame
    written: int
    pending: Pending | None = None
    generator: str | None = None
    """The manifest JSON of the program that made the input (loaders/provenance.py)."""

    def line(self) -> Reconciled:
        b, p = self.batch, self.pending
        written = self.written if p is None else p.kept
        merged = b.rows_merged + (0 if p is None else p.merged)
        _check(b, self.read, written, self.rejected.height, merged)
        return Reconciled(
            b.file.path.name, b.table, b.dataset, self.read, written, self.rejected.height, merged
        )

    def ingests_row(self, source: str, module: str) -> dict[str, object]:
        line = self.line()
        b = self.batch
        return {
            "source": source,
            "dataset": b.dataset,
            "cluster": b.cluster,
            "table": b.table,
            "file": b.file.path.name,
            "file_sha256": b.file.sha256,
            "file_bytes": b.file.size_bytes,
            "rows_read": line.rows_read,
            "rows_written": line.rows_written,
            "rows_quarantined": line.rows_quarantined,
            "rows_merged": line.rows_merged,
            "loader": module,
            "gpu_trace_version": __version__,
            "generator": self.generator,
        }


def ingest(
    loader: Loader,
    path: Path,
    store: Path,
    *,
    on_batch: Callable[[Batch], None] | None = None,
    **options: Any,
) -> IngestReport:
    """Load ``path`` with ``loader`` and write it to ``store`` atomically; a loader
    declaring ``merge_key`` has its jobs merged with the store's (:mod:`.merge`).
    """
    require_path(path)
    source = loader.name
    merge_key: tuple[str, ...] | None = getattr(loader, "merge_key", None)
    report = IngestReport(source, store)
    module = type(loader).__module__
    shared = merge_key is not None and bool(getattr(loader, "shared_datasets", False))
    seen: dict[tuple[str, str], Path] = {}
    parts: dict[tuple[str, str], int] = {}
    entries: list[_Entry] = []
    manifests = Manifests()  # generated inputs (gpu-trace synth): loaders/provenance.py
    with StoreTransaction(store) as tx:
        for index, batch in enumerate(loader.batches(path, **options)):
            merging = merge_key is not None and batch.table in MERGED_TABLES
            part = 0
            if shared and merging:
                # further snapshots of the dataset: staged apart, joined by the merge
                part = parts.setdefault((batch.table, batch.dataset), -1) + 1
                parts[(batch.table, batch.dataset)] = part
            else:
                refuse_collision(seen, batch)
            if on_batch is not None:
                on_batch(batch)
            generator = manifests.generator(batch.file)
            meta = {
                "loader": module,
                "loader_version": getattr(loader, "version", __version__),
                "source_file": batch.file.path.name,
                "source_sha256": batch.file.sha256,
                **batch.metadata,
            }
            if generator is not None:
                meta["generator"] = generator
            rows = batch.rows
            if merging:
                rows = rows.lazy().with_columns(pl.lit(batch.file.sha256).alias(ORIGIN))
            staged = tx.write(
                batch.table,
                rows,
                source=source,
                dataset=batch.dataset,
                metadata=meta,
                sort=batch.sort,
                part=part,
            )
            rejected = (
                batch.rejected.lazy().collect() if batch.rejected is not None else pl.DataFrame()
            )
            read = batch.file.records if batch.rows_read is None else batch.rows_read
            _check(batch, read, staged.rows, rejected.height, batch.rows_merged)
            entry = _Entry(batch, read, rejected, staged.rows, generator=generator)
            if merging:
                entry.pending = Pending(
                    index, batch.table, batch.dataset, batch.file.sha256, staged, meta
                )
            entries.append(entry)
        if not entries:
            raise InputError(path, f"no {source} input files found")
        pending = [e.pending for e in entries if e.pending is not None]
        if merge_key is None:
            report.lines.extend(e.line() for e in entries)
            _write_bookkeeping(tx, source, module, entries)
        else:
            outcome = reconcile(tx, source, merge_key, pending) if pending else Outcome()
            report.lines.extend(e.line() for e in entries)
            write_merged_bookkeeping(tx, source, module, entries, outcome)
    return report


def _quarantine_frame(frames: list[pl.DataFrame]) -> pl.DataFrame:
    return (
        pl.concat(frames, how="vertical_relaxed")
        if frames
        else pl.DataFrame(schema=polars_schema(QUARANTINE))
    )


def _write_bookkeeping(
    tx: StoreTransaction, source: str, module: str, entries: list[_Entry]
) -> None:
    """The ``quarantine`` and ``ingests`` files of every dataset written (replacing the
    dataset's previous ones, as its data files are).
    """
    by_ds: dict[str, list[_Entry]] = {}
    for e in entries:
        by_ds.setdefault(e.batch.dataset, []).append(e)
    for dataset, group in by_ds.items():
        q = _quarantine_frame([e.rejected for e in group if e.rejected.height])
        tx.write("quarantine", q, source=source, dataset=dataset)
        rows = [e.ingests_row(source, module) for e in group]
        tx.write("ingests", pl.DataFrame(rows), source=source, dataset=dataset)


def write_merged_bookkeeping(
    tx: StoreTransaction, source: str, module: str, entries: list[_Entry], outcome: Outcome
) -> None:
    """``quarantine`` and ``ingests`` of a merging source: a dataset keeps the lines of
    the exports merged into it before (their counts updated to what it now holds) and
    their quarantined records; this ingest's lines replace those of the same export
    (same table and sha256) and, for tables not merged, those of the same table.
    """
    by_ds: dict[str, list[_Entry]] = {ds: [] for ds in sorted(outcome.rewritten)}
    for e in entries:
        by_ds.setdefault(e.batch.dataset, []).append(e)
    for dataset, group in by_ds.items():
        replaced_tables = {e.batch.table for e in group if e.pending is None}
        kept, dropped = _kept_lines(tx, source, dataset, group, outcome)
        new_rows = [e.ingests_row(source, module) for e in group]
        frame = pl.DataFrame(kept + new_rows, infer_schema_length=None)
        tx.write("ingests", frame, source=source, dataset=dataset)
        if not group:
            continue  # only rows superseded: its quarantine is unchanged
        # An export ingested again under a file name another kept line also has: its
        # rejects are the ones already there (same bytes, same loader), kept as they are.
        shared = dropped & {(str(k["table"]), str(k["file"])) for k in kept}
        frames = [
            e.rejected
            for e in group
            if e.rejected.height and (e.batch.table, e.batch.file.path.name) not in shared
        ]
        q_old = prior_quarantine(tx, source, dataset)
        if q_old is not None and q_old.height:
            gone = pl.col("table").is_in(list(replaced_tables)) | pl.struct("table", "file").is_in(
                [{"table": t, "file": f} for t, f in dropped - shared]
            )
            frames.insert(0, q_old.filter(~gone))
        tx.write("quarantine", _quarantine_frame(frames), source=source, dataset=dataset)


def _kept_lines(
    tx: StoreTransaction, source: str, dataset: str, group: list[_Entry], outcome: Outcome
) -> tuple[list[dict[str, object]], set[tuple[str, str]]]:
    """The dataset's earlier ``ingests`` lines that stay (counts updated to the merged
    files), and the (table, file) of those this ingest replaces.
    """
    replaced_tables = {e.batch.table for e in group if e.pending is None}
    replaced_exports = {(e.batch.table, e.batch.file.sha256) for e in group if e.pending}
    old = prior_lines(tx, source, dataset)
    kept: list[dict[str, object]] = []
    dropped: set[tuple[str, str]] = set()
    for line in old.iter_rows(named=True) if old is not None else []:
        if line["table"] in replaced_tables or (line["table"], line["file_sha256"]) in (
            replaced_exports
        ):
            dropped.add((line["table"], line["file"]))
            continue
        counts = outcome.counts.get((line["table"], dataset))
        if line["table"] in MERGED_TABLES and counts is not None:
            line["rows_written"] = counts.get(line["file_sha256"], 0)
            line["rows_merged"] = (
                line["rows_read"] - line["rows_written"] - line["rows_quarantined"]
            )
        kept.append(line)
    return kept, dropped
