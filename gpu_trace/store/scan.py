"""Lazy polars scans of the store, for analyses that are easier in expressions than SQL.

Both this and the DuckDB catalog read the same files; neither caches anything. Each call
reads one generation; a caller scanning several tables passes ``snapshot_root(store)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import polars as pl

from gpu_trace.schemas import TABLES
from gpu_trace.store.generations import snapshot_root
from gpu_trace.store.parquet import EMPTY_SOURCE, ensure_layout, polars_schema


def table_files(store: Path, table: str, sources: Sequence[str] | None = None) -> list[Path]:
    """The Parquet files of one table (optionally only some sources), sorted, from one
    generation (pass a :func:`snapshot_root` to keep several tables consistent).
    """
    root = snapshot_root(store) / table
    files = sorted(p for p in root.glob("source=*/*.parquet") if not p.name.startswith("."))
    if sources:
        wanted = {f"source={s}" for s in sources}
        files = [p for p in files if p.parent.name in wanted]
    return files


def scan(store: Path, table: str, sources: Sequence[str] | None = None) -> pl.LazyFrame:
    """A LazyFrame over one canonical table; empty (with the canonical schema) when the
    store holds nothing for it.
    """
    ensure_layout(store)
    files = table_files(store, table, sources)
    if not files:
        return pl.LazyFrame(schema=polars_schema(TABLES[table]))
    return pl.scan_parquet(files, hive_partitioning=False, missing_columns="insert")


def store_sources(store: Path) -> list[str]:
    """The sources with data in any table of the store's current generation (sorted;
    the zero-row ``_empty`` placeholders are not a source).
    """
    root = snapshot_root(store)
    found = {
        part.name.removeprefix("source=")
        for part in root.glob("*/source=*")
        if part.is_dir() and part.name != f"source={EMPTY_SOURCE}"
    }
    return sorted(found)
