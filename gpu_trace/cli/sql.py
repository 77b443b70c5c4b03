"""``gpu-trace sql``: query the store with DuckDB SQL."""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import polars as pl
import typer

from gpu_trace.cli._boundary import domain_errors, err
from gpu_trace.cli.options import StoreOpt
from gpu_trace.errors import GpuTraceError
from gpu_trace.settings import resolve_store
from gpu_trace.store.catalog import check_read_only, connect, query, store_views_sql


class Format(StrEnum):
    table = "table"
    csv = "csv"
    json = "json"
    parquet = "parquet"


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
    _emit(frame, fmt, output, max_rows)


def _emit(frame: pl.DataFrame, fmt: Format, output: Path | None, max_rows: int) -> None:
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        tmp = output.with_name(f".{output.name}.tmp")
        if fmt is Format.parquet:
            frame.write_parquet(tmp, compression="zstd")
        elif fmt is Format.json:
            frame.write_json(tmp)
        elif fmt is Format.csv:
            frame.write_csv(tmp)
        else:
            tmp.write_text(_table_text(frame, max_rows), encoding="utf-8")
        tmp.replace(output)
        err.print(f"wrote {frame.height} rows to {output}")
        return
    if fmt is Format.csv:
        sys.stdout.write(frame.write_csv())
    elif fmt is Format.json:
        sys.stdout.write(frame.write_json() + "\n")
    else:
        sys.stdout.write(_table_text(frame, max_rows))
        if max_rows and frame.height > max_rows:
            err.print(f"showing {max_rows} of {frame.height} rows (use --max-rows 0 for all)")


def _table_text(frame: pl.DataFrame, max_rows: int) -> str:
    shown = frame.head(max_rows) if max_rows else frame
    with pl.Config(
        tbl_rows=-1,
        tbl_cols=-1,
        tbl_width_chars=10_000,
        fmt_str_lengths=200,
        tbl_hide_dataframe_shape=True,
        tbl_formatting="ASCII_MARKDOWN",
        tbl_hide_column_data_types=True,
    ):
        return str(shown) + "\n"
