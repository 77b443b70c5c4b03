"""``gpu-trace sql``: query the store with DuckDB SQL."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import polars as pl
import typer

from gpu_trace.cli._boundary import domain_errors
from gpu_trace.cli.options import ReadStoreOpt, number
from gpu_trace.cli.output import Format, check_output, emit
from gpu_trace.errors import QueryError, UsageError
from gpu_trace.settings import resolve_store

if TYPE_CHECKING:  # DuckDB and Arrow load when a query runs, not with the command line
    import duckdb
    import pyarrow as pa

_AS_TEXT = ("INTERVAL", "UNION", "BIT", "TIME WITH TIME ZONE")
"""Top-level column types polars cannot import from Arrow: shown as their DuckDB text."""


@domain_errors
def sql(
    statement: Annotated[
        str | None,
        typer.Argument(
            help="SQL to run ('-' or nothing with piped input: read standard input); the "
            "views are named after the tables. Several statements separated by ';' run in "
            "order and the last one's result is printed.",
            show_default=False,
        ),
    ] = None,
    store: ReadStoreOpt = None,
    file: Annotated[
        Path | None,
        typer.Option("--file", help="Read the SQL from this file.", show_default=False),
    ] = None,
    param: Annotated[
        list[str] | None,
        typer.Option(
            "--param",
            "-p",
            help="NAME=VALUE for a $NAME parameter in the SQL (repeatable); bound by DuckDB "
            "as text, never spliced into the SQL: cast in the SQL ($n::INTEGER).",
            show_default=False,
        ),
    ] = None,
    fmt: Annotated[Format, typer.Option("--format", "-f", help="Output format.")] = Format.table,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", "-o", help="Write to this file (its folder must exist) instead of stdout."
        ),
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
    safe: Annotated[
        bool,
        typer.Option(
            "--safe",
            envvar="GPU_TRACE_SQL_SAFE",
            help="Shared servers and CI: keep DuckDB's external file access off whatever "
            "else is asked (--write is refused). Also set by GPU_TRACE_SQL_SAFE=1.",
        ),
    ] = False,
    max_rows: Annotated[
        int,
        typer.Option(
            "--max-rows", callback=number(ge=0), help="Rows shown by --format table (0 = all)."
        ),
    ] = 100,
) -> None:
    """Run SQL against the store's views (read-only unless --write).

    Without --write only SELECT (with DESCRIBE, SUMMARIZE, SHOW), EXPLAIN [ANALYZE] of a
    SELECT and SET/RESET VARIABLE run; DuckDB can read only the store, and its settings
    are locked. --output is written by gpu-trace, not by DuckDB.

    Examples: gpu-trace sql "select source, count(*) from jobs group by 1";
    gpu-trace sql --file q.sql -p src=openb; echo "select 1" | gpu-trace sql -
    """
    from gpu_trace.store.catalog import (
        check_read_only,
        connect,
        connect_read_only,
        fetch_arrow,
        query,
        store_views_sql,
    )

    if safe and write:
        msg = (
            "--write needs DuckDB's external file access, which --safe (or "
            "GPU_TRACE_SQL_SAFE=1) keeps off"
        )
        raise UsageError(msg)
    root = resolve_store(store)
    if views:
        sys.stdout.write(store_views_sql(root))
        return
    text = _statement_text(statement, file)
    params = _params(param)
    if not write:
        check_read_only(text)
    if fmt is Format.parquet and output is None:
        msg = "--format parquet needs --output FILE"
        raise UsageError(msg)
    check_output(output)
    con = connect(root) if write else connect_read_only(root)
    try:
        rel = query(con, text, params)
        if rel is None:
            return
        frame = _frame(fetch_arrow(_printable(rel)))
        try:
            emit(frame, fmt, output, max_rows)
        except (pl.exceptions.PolarsError, pl.exceptions.PanicException) as exc:
            msg = f"cannot write the result as {fmt}: {_first_line(exc)}"
            raise QueryError(msg) from None
    finally:
        con.close()


def _statement_text(statement: str | None, file: Path | None) -> str:
    """The SQL from the argument, ``--file`` or standard input (``-``, or no argument
    with input piped in); exactly one of them.
    """
    if statement is not None and file is not None:
        msg = "give the SQL as an argument or with --file, not both"
        raise UsageError(msg)
    if file is not None:
        return file.read_text(encoding="utf-8")
    if statement == "-" or (statement is None and not sys.stdin.isatty()):
        text = sys.stdin.read()
        if not text.strip():
            msg = "no SQL on standard input"
            raise UsageError(msg)
        return text
    if not statement:
        msg = "give a SQL statement, --file FILE, '-' for standard input, or --views"
        raise UsageError(msg)
    return statement


def _params(items: list[str] | None) -> dict[str, str]:
    """``--param NAME=VALUE`` items; a name given twice or without ``=`` is refused."""
    out: dict[str, str] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        name = name.strip().removeprefix("$")
        if not sep or not name.isidentifier():
            msg = f"--param {item!r} is not NAME=VALUE"
            raise UsageError(msg)
        if name in out:
            msg = f"--param {name} is given twice"
            raise UsageError(msg)
        out[name] = value
    return out


def _printable(rel: duckdb.DuckDBPyRelation) -> duckdb.DuckDBPyRelation:
    """Cast the columns polars cannot hold to text, so ``select interval 1 day`` works."""
    import duckdb

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
    import pyarrow as pa

    try:
        frame = pl.from_arrow(table)
    except (pl.exceptions.PolarsError, pa.ArrowException, pl.exceptions.PanicException) as exc:
        msg = f"cannot show the result ({_first_line(exc)}); cast that column to VARCHAR"
        raise QueryError(msg) from None
    except MemoryError:
        msg = "out of memory while converting the result; add a LIMIT"
        raise QueryError(msg) from None
    assert isinstance(frame, pl.DataFrame)
    return frame


def _first_line(exc: BaseException) -> str:
    from gpu_trace.store.catalog import clip

    text = str(exc).strip()
    return clip(text.splitlines()[0] if text else type(exc).__name__)
