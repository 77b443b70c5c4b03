"""The DuckDB catalog: an in-memory connection with one view per canonical table.

Views are created afresh on every connection with absolute paths, never persisted, so
they cannot go stale or break when DuckDB runs from another folder (duckdb#2342).
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from gpu_trace.errors import QueryError
from gpu_trace.schemas.views import views_sql
from gpu_trace.store.generations import live_root, snapshot_root
from gpu_trace.store.parquet import ensure_layout

READ_ONLY_STATEMENTS = {"SELECT", "EXPLAIN", "PRAGMA", "SET", "VARIABLE_SET"}
"""Statement types `gpu-trace sql` runs without ``--write``."""


def store_views_sql(store: Path) -> str:
    """The view script for this store, with absolute paths."""
    return views_sql(live_root(store.resolve()).as_posix())


def connect(store: Path) -> duckdb.DuckDBPyConnection:
    """Open an in-memory DuckDB connection with the store's views.

    The store folders (and the zero-row files that make empty views bind) are created
    if missing, so a query against a fresh store answers with zero rows, not an error.
    """
    ensure_layout(store)
    con = duckdb.connect(":memory:")
    con.execute(store_views_sql(snapshot_root(store)))
    return con


def check_read_only(sql: str) -> None:
    """Refuse statements that would change anything (COPY, CREATE, INSERT, ATTACH...)."""
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryError(_one_line(exc)) from None
    if not statements:
        raise QueryError("no SQL statement given")
    for st in statements:
        kind = st.type.name
        if kind not in READ_ONLY_STATEMENTS:
            raise QueryError(
                f"{kind} statements change data; gpu-trace sql is read-only unless --write is given"
            )


def query(con: duckdb.DuckDBPyConnection, sql: str) -> duckdb.DuckDBPyRelation | None:
    """Run ``sql``; every statement but the last is executed for effect and the last
    one's result returned. DuckDB errors become one-line :class:`QueryError`."""
    try:
        statements = duckdb.extract_statements(sql)
        for st in statements[:-1]:
            con.execute(st)
        return con.sql(statements[-1].query) if statements else None
    except duckdb.Error as exc:
        raise QueryError(_one_line(exc)) from None


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    return first
