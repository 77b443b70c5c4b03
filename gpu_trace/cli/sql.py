"""``gpu-trace sql``: query the store with DuckDB SQL."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import duckdb
import polars as pl
import pyarrow as pa
import typer

from gpu_trace.cli._boundary import domain_errors
from gpu_trace.cli.options import StoreOpt
from gpu_trace.cli.output import Format, emit
from gpu_trace.errors import GpuTraceError, QueryError
from gpu_trace.settings import resolve_store
from gpu_trace.store.catalog import (
    check_read_only,
    clip,
    connect,
    connect_read_only,
    fetch_arrow,
    query,
    store_views_sql,
)

_AS_TEXT = ("INTERVAL", "UNION", "BIT", "TIME WITH TIME ZONE")
"""Top-level column types polars cannot import from Arrow: shown as their DuckDB text."""


@domain_errors
def sql(
    statement: Annotated[
        str | None,
        typer.Argument(
            help="SQL to run; the views are named after the tables. Several statements "
            "separated by ';' run in order and the last one's result is printed."
        ),
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
        bool,
        typer.Option(
            "--write",
            help="Run any statement with DuckDB's full file and extension access (COPY TO, "
            "CREATE, ATTACH, INSTALL, PRAGMA, SET ...). Only for SQL you trust.",
        ),
    ] = False,
    max_rows: Annotated[
        int, typer.Option("--max-rows", help="Rows shown by --format table (0 = all).")
    ] = 100,
) -> None:
    """Run SQL against the store's views (read-only unless --write).

    Without --write only SELECT (with DESCRIBE, SUMMARIZE, SHOW), EXPLAIN [ANALYZE] of a
    SELECT and SET/RESET VARIABLE run; DuckDB can read only the store, and its settings
    are locked. --output is written by gpu-trace, not by DuckDB.

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
    con = connect(root) if write else connect_read_only(root)
    try:
        rel = query(con, statement)
        if rel is None:
            return
        frame = _frame(fetch_arrow(_printable(rel)))
        try:
            emit(frame, fmt, output, max_rows)
        except (pl.exceptions.PolarsError, pl.exceptions.PanicException) as exc:
            raise QueryError(f"cannot write the result as {fmt}: {_first_line(exc)}") from None
    finally:
        con.close()


def _printable(rel: duckdb.DuckDBPyRelation) -> duckdb.DuckDBPyRelation:
    """Cast the columns polars cannot hold to text, so ``select interval 1 day`` works."""
    cols = []
    cast = False
    for name, kind in zip(rel.columns, rel.types, strict=True):
        ident = '"' + name.replace('"', '""') + '"'
        if str(kind).upper().startswith(_AS_TEXT):
            cols.append(f"CAST({ident} AS VARCHAR) AS {ident}")
            cast = True
        else:
            cols.append(ident)
    if not cast:
        return rel
    try:
        return rel.project(", ".join(cols))
    except duckdb.Error as exc:
        raise QueryError(_first_line(exc)) from None


def _frame(table: pa.Table) -> pl.DataFrame:
    """Arrow to polars; a type polars cannot import is a one-line error, not a crash."""
    try:
        frame = pl.from_arrow(table)
    except (pl.exceptions.PolarsError, pa.ArrowException, pl.exceptions.PanicException) as exc:
        raise QueryError(
            f"cannot show the result ({_first_line(exc)}); cast that column to VARCHAR"
        ) from None
    except MemoryError:
        raise QueryError("out of memory while converting the result; add a LIMIT") from None
    assert isinstance(frame, pl.DataFrame)
    return frame


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return clip(text.splitlines()[0] if text else type(exc).__name__)
