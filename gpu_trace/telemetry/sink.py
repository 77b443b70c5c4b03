"""Periodic flushes of live telemetry through the store's one writer.

Each flush is its own :class:`StoreTransaction` writing a *new* dataset
``<host>-<start>-<n>`` (one Parquet file per table), so a crash loses at most the rows
buffered since the last flush and every file already in the store is complete, valid
Parquet (files are staged and renamed atomically).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from gpu_trace.schemas import TABLES
from gpu_trace.store.parquet import StoreTransaction, polars_schema, slug
from gpu_trace.version import __version__


@dataclass
class Buffer:
    """Rows of one table collected between flushes, column by column."""

    table: str
    columns: dict[str, list[object]] = field(default_factory=dict)

    def add(self, **row: object) -> None:
        """Append one row; a column seen for the first time is back-filled with
        nulls, and a column a row leaves out gets a null.
        """
        n = len(next(iter(self.columns.values()), []))
        for k in row:
            self.columns.setdefault(k, [None] * n)
        for k, col in self.columns.items():
            col.append(row.get(k))

    def __len__(self) -> int:
        return len(next(iter(self.columns.values()), []))

    def frame(self) -> pl.DataFrame:
        """The rows as a frame with the canonical table's types for the columns given."""
        schema = polars_schema(TABLES[self.table])
        data = dict(self.columns)
        return pl.DataFrame(data, schema={k: schema[k] for k in data}, strict=False)

    def clear(self) -> None:
        """Drop the rows (after they were written)."""
        self.columns = {}


@dataclass
class FlushWriter:
    """Writes buffers as dataset ``<host>-<start>-<n>`` of ``source`` on each flush."""

    store: Path
    source: str
    host: str
    start: dt.datetime
    loader: str
    metadata: dict[str, str] = field(default_factory=dict)
    flushes: int = 0
    rows_written: int = 0

    def dataset(self) -> str:
        """The next flush's dataset name: ``<host>-<start>-<flush number>``."""
        return f"{slug(self.host)}-{self.start:%Y%m%dt%H%M%Sz}-{self.flushes:05d}"

    def flush(self, buffers: list[Buffer]) -> str | None:
        """Write every non-empty buffer; returns the dataset name (None if nothing)."""
        if not any(len(b) for b in buffers):
            return None
        dataset = self.dataset()
        ingests: list[dict[str, object]] = []
        with StoreTransaction(self.store) as tx:
            for b in buffers:
                if not len(b):
                    continue
                frame = b.frame().with_columns(
                    pl.lit(self.source).alias("source"), pl.lit(dataset).alias("dataset")
                )
                staged = tx.write(
                    b.table,
                    frame,
                    source=self.source,
                    dataset=dataset,
                    metadata={"loader": self.loader, **self.metadata},
                )
                self.rows_written += staged.rows
                ingests.append(
                    {
                        "source": self.source,
                        "dataset": dataset,
                        "cluster": None,
                        "table": b.table,
                        "file": f"{self.source}:{self.host}",
                        "file_sha256": None,
                        "file_bytes": None,
                        "rows_read": len(b),
                        "rows_written": staged.rows,
                        "rows_quarantined": 0,
                        "loader": self.loader,
                        "gpu_trace_version": __version__,
                    }
                )
                b.clear()
            tx.write("ingests", pl.DataFrame(ingests), source=self.source, dataset=dataset)
        self.flushes += 1
        return dataset
