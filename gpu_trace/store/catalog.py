"""The DuckDB catalog: an in-memory connection with one view per canonical table.

Views are created afresh on every connection with absolute paths, never persisted, so
they cannot go stale or break when DuckDB runs from another folder (duckdb#2342).

``gpu-trace sql`` runs user SQL on a *locked* connection (:func:`connect_read_only`):
DuckDB itself refuses file access outside the store and any change of configuration,
and :func:`check_read_only` admits only an allow-list of statement types. The two layers
cover each other: DuckDB cannot tell reading the store from writing into it, and a
statement-type check alone cannot see what a statement touches.
"""

from __future__ import annotations

import os
import re
import tempfile
import uuid
from collections.abc import Mapping
from pathlib import Path

import duckdb
import pyarrow as pa

from gpu_trace.errors import QueryError, UsageError
from gpu_trace.schemas.views import views_sql
from gpu_trace.store.generations import is_generation, live_root, reader_root
from gpu_trace.store.parquet import ensure_layout

READ_ONLY_STATEMENTS = frozenset({"SELECT", "EXPLAIN", "SET"})
"""Statement types `gpu-trace sql` runs without ``--write`` (an allow-list). SELECT
covers DESCRIBE, SUMMARIZE, SHOW, VALUES, FROM-first queries; EXPLAIN [ANALYZE] only of
a SELECT; SET only as ``SET VARIABLE`` / ``RESET VARIABLE`` (settings are locked)."""

MAX_ECHO = 200
"""Longest piece of user text (or DuckDB message) echoed in an error."""

_EXPLAIN = re.compile(r"\s*explain\s+(?:analy[sz]e\s+)?(?:\([^()]*\)\s*)?(?P<rest>.*)", re.I | re.S)
_VARIABLE = re.compile(r"\s*(?:re)?set\s+variable\s", re.I)


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
    # A store is pinned (commits may land while we read); a generation passed in is the
    # caller's, already pinned by it (a report, an API Store) or deliberately not.
    root = store if is_generation(store) else reader_root(store)
    con.execute(store_views_sql(root))
    return con


def connect_read_only(store: Path) -> duckdb.DuckDBPyConnection:
    """:func:`connect`, then lock the connection down for untrusted SQL."""
    con = connect(store)
    lock_down(con, store)
    return con


def lock_down(con: duckdb.DuckDBPyConnection, store: Path) -> None:
    """Make DuckDB refuse what a read-only query must not do.

    Only the store is reachable (the views read it; statements that could write into
    it are kept out by :func:`check_read_only`); no extension is installed or loaded;
    profiling cannot write a file; spill files go to a private folder under the system
    temp dir (DuckDB removes it on close) rather than ``./.tmp``; and the configuration
    is locked last so that SET, RESET or PRAGMA cannot undo any of it.
    """
    root = store.resolve().as_posix().rstrip("/") + "/"
    spill = Path(tempfile.gettempdir()) / f"gpu-trace-sql-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    con.execute("PRAGMA disable_profiling")
    con.execute("SET profiling_output = ''")
    con.execute("SET temp_directory = ?", [spill.as_posix()])
    con.execute("SET autoinstall_known_extensions = false")
    con.execute("SET autoload_known_extensions = false")
    con.execute("SET allow_community_extensions = false")
    con.execute("SET allowed_directories = ?", [[root]])
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")


def check_read_only(sql: str) -> None:
    """Refuse every statement not on the allow-list (COPY, CREATE, ATTACH, PRAGMA...)."""
    for st in _statements(sql):
        kind = _type_name(st)
        if kind not in READ_ONLY_STATEMENTS or not _harmless(kind, st.query):
            msg = (
                f"{kind} statement refused ({clip(st.query, 60)}): gpu-trace sql is read-only "
                "(SELECT, EXPLAIN of a SELECT, SET VARIABLE) unless --write is given"
            )
            raise QueryError(msg)


def _harmless(kind: str, text: str) -> bool:
    """EXPLAIN ANALYZE runs its statement, so that must be a SELECT; SET must be a
    session variable (configuration is locked anyway, this makes the error clearer).
    """
    if kind == "EXPLAIN":
        match = _EXPLAIN.fullmatch(text)
        if match is None:
            return False
        try:
            inner = duckdb.extract_statements(match["rest"])
        except duckdb.Error:
            return False
        return len(inner) == 1 and _type_name(inner[0]) == "SELECT"
    if kind == "SET":
        return _VARIABLE.match(text) is not None
    return True


def query(
    con: duckdb.DuckDBPyConnection, sql: str, params: Mapping[str, str] | None = None
) -> duckdb.DuckDBPyRelation | None:
    """Run ``sql``; every statement but the last is executed for effect and the last
    one's result returned (None when it has none). DuckDB errors become one-line
    :class:`QueryError`.

    ``params`` bind DuckDB's named prepared parameters (``$name``), as text (cast in the
    SQL: ``$n::INTEGER``); each statement gets the ones it names, and a parameter no
    statement names is refused (a typo would otherwise be ignored).
    """
    statements = _statements(sql)
    given = dict(params or {})
    used = set().union(*(st.named_parameters for st in statements))
    unused = sorted(set(given) - used)
    if unused:
        msg = f"--param {unused[0]} is not used by the SQL (write ${unused[0]})"
        raise UsageError(msg)

    def bound(st: duckdb.Statement) -> dict[str, str] | None:
        names = st.named_parameters
        return {k: v for k, v in given.items() if k in names} or None

    try:
        for st in statements[:-1]:
            con.execute(st.query, bound(st))
            con.complete()
        last = statements[-1]
        return con.sql(last.query, params=bound(last))
    except (duckdb.Error, MemoryError) as exc:
        raise QueryError(_one_line(exc)) from None


def fetch_arrow(rel: duckdb.DuckDBPyRelation) -> pa.Table:
    """Materialize a result; errors raised while rows are computed (bad casts, out of
    memory) become one-line :class:`QueryError` like errors at bind time.
    """
    try:
        return rel.to_arrow_table()
    except (duckdb.Error, MemoryError) as exc:
        raise QueryError(_one_line(exc)) from None


def clip(text: str, limit: int = MAX_ECHO) -> str:
    """One line of at most ``limit`` characters, so a huge statement is not echoed whole."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _statements(sql: str) -> list[duckdb.Statement]:
    try:
        statements = duckdb.extract_statements(sql)
    except (duckdb.Error, MemoryError) as exc:
        raise QueryError(_one_line(exc)) from None
    if not statements:
        msg = "no SQL statement given"
        raise QueryError(msg)
    return statements


def _type_name(st: duckdb.Statement) -> str:
    """The statement type; UNKNOWN for types newer than duckdb's Python enum
    (``UPDATE EXTENSIONS`` raises ValueError on ``.type``).
    """
    try:
        return st.type.name
    except ValueError:
        return "UNKNOWN"


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    return clip(first)
