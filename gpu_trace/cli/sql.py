"""``gpu-trace sql``: query the store with DuckDB SQL."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import polars as pl
import typer

from gpu_trace.cli._boundary import domain_errors
from gpu_trace.cli.options import StoreOpt
from gpu_trace.cli.output import Format, emit
from gpu_trace.errors import GpuTraceError
from gpu_trace.settings import resolve_store
from gpu_trace.store.catalog import check_read_only, connect, query, store_views_sql


@domain_errors
def sql(
    statement: Annotated[
        str | None, typer.Argument(help="SQL to run; the views are named after the tables.")
    ] = None,
    store: StoreOpt = None,
    fmt: Annotated[Format, typer.Option("--format", "-f", help="Output format.")] = Format.table,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write to this file instead of stdout.")
    ] = None,
    views: Annotated[
        bool, typer.Option("--views", help="Print the CREATE VIEW script for `duckdb -init`.")
    ] = False,
    write: Annotated[
        bool, typer.Option("--write", help="Allow statements that write (COPY, CREATE ...).")
    ] = False,
    max_rows: Annotated[
        int, typer.Option("--max-rows", help="Rows shown by --format table (0 = all).")
    ] = 100,
) -> None:
    """Run SQL against the store's views (read-only unless --write).

    Example: gpu-trace sql "select source, count(*) from jobs group by 1"
    """
    root = resolve_store(store)
    if views:
        sys.stdout.write(store_views_sql(root))
        return
    if not statement:
        raise GpuTraceError("give a SQL statement, or --views")
    if not write:
        check_read_only(statement)
    if fmt is Format.parquet and output is None:
        raise GpuTraceError("--format parquet needs --output FILE")
    con = connect(root)
    rel = query(con, statement)
    if rel is None:
        return
    frame = pl.from_arrow(rel.to_arrow_table())
    assert isinstance(frame, pl.DataFrame)
    emit(frame, fmt, output, max_rows)
