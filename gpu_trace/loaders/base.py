"""What a loader hands to the store, and the ingest driver that writes it.

A loader turns one raw input (a folder or a file) into :class:`Batch` objects: rows for
one canonical table from one input file, plus the rows it rejected. It never writes
files. :func:`ingest` writes every batch through one :class:`StoreTransaction`, checks
that rows read = rows written + rows quarantined for every file, and records the
reconciliation in the ``ingests`` table and the rejects in ``quarantine``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import polars as pl

from gpu_trace import __version__
from gpu_trace.errors import GpuTraceError, InputError
from gpu_trace.loaders.provenance import Manifests
from gpu_trace.loaders.textfile import FileInfo
from gpu_trace.schemas import QUARANTINE
from gpu_trace.store.parquet import StoreTransaction, polars_schema


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


class Loader(Protocol):
    """A source family's reader. ``name`` is the ``source`` value it writes."""

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
        """Rows read, written and quarantined over every line (read = written + quarantined)."""
        return (
            sum(r.rows_read for r in self.lines),
            sum(r.rows_written for r in self.lines),
            sum(r.rows_quarantined for r in self.lines),
        )


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


def ingest(
    loader: Loader,
    path: Path,
    store: Path,
    *,
    on_batch: Callable[[Batch], None] | None = None,
    **options: Any,
) -> IngestReport:
    """Load ``path`` with ``loader`` and write it to ``store`` atomically."""
    require_path(path)
    source = loader.name
    report = IngestReport(source, store)
    quarantine: dict[str, list[pl.DataFrame]] = {}
    ingests: dict[str, list[dict[str, object]]] = {}
    module = type(loader).__module__
    seen: dict[tuple[str, str], Path] = {}
    manifests = Manifests()  # generated inputs (gpu-trace synth): loaders/provenance.py
    with StoreTransaction(store) as tx:
        for batch in loader.batches(path, **options):
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
                "generator": generator,
            }
            staged = tx.write(
                batch.table,
                batch.rows,
                source=source,
                dataset=batch.dataset,
                metadata=meta,
                sort=batch.sort,
            )
            rejected = (
                batch.rejected.lazy().collect() if batch.rejected is not None else pl.DataFrame()
            )
            read = batch.file.records if batch.rows_read is None else batch.rows_read
            line = Reconciled(
                batch.file.path.name, batch.table, batch.dataset, read, staged.rows, rejected.height
            )
            if line.rows_read != line.rows_written + line.rows_quarantined:
                msg = (
                    f"{batch.file.path}: {batch.table}: read {read} records but wrote "
                    f"{staged.rows} and quarantined {rejected.height}"
                )
                raise ReconciliationError(msg)
            report.lines.append(line)
            if rejected.height:
                quarantine.setdefault(batch.dataset, []).append(rejected)
            ingests.setdefault(batch.dataset, []).append(
                {
                    "source": source,
                    "dataset": batch.dataset,
                    "cluster": batch.cluster,
                    "table": batch.table,
                    "file": batch.file.path.name,
                    "file_sha256": batch.file.sha256,
                    "file_bytes": batch.file.size_bytes,
                    "rows_read": read,
                    "rows_written": staged.rows,
                    "rows_quarantined": rejected.height,
                    "loader": module,
                    "gpu_trace_version": __version__,
                    "generator": generator,
                }
            )
        if not report.lines:
            raise InputError(path, f"no {source} input files found")
        for dataset, rows in ingests.items():
            frames = quarantine.get(dataset, [])
            q = (
                pl.concat(frames, how="vertical_relaxed")
                if frames
                else pl.DataFrame(schema=polars_schema(QUARANTINE))
            )
            tx.write("quarantine", q, source=source, dataset=dataset)
            tx.write("ingests", pl.DataFrame(rows), source=source, dataset=dataset)
    return report
