"""The DuckDB catalog: views for every table, read-only guard, friendly errors."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import duckdb
import pytest

from gpu_trace.errors import QueryError
from gpu_trace.schemas import TABLES
from gpu_trace.store.catalog import check_read_only, connect, query
from tests.conftest import ROOT


def test_empty_store_has_typed_empty_views(store: Path) -> None:
    con = connect(store)
    for name, table in TABLES.items():
        rel = con.sql(f"SELECT * FROM {name}")
        assert rel.fetchall() == []
        assert rel.columns == table.column_names
    assert con.execute("SELECT count(*) FROM gpu_samples_wide").fetchone() == (0,)
    types = dict(
        zip(
            *[con.sql("SELECT * FROM jobs").columns, con.sql("SELECT * FROM jobs").types],
            strict=True,
        )
    )
    assert str(types["submit_time"]) == "TIMESTAMP WITH TIME ZONE"
    assert str(types["gpus"]) == "DOUBLE"


def test_views_answer_from_store(openb_store: Path) -> None:
    con = connect(openb_store)
    assert con.execute("SELECT source, count(*) FROM jobs GROUP BY 1").fetchall() == [
        ("openb", 8152)
    ]
    assert con.execute("SELECT count(DISTINCT dataset) FROM machines").fetchone() == (2,)


def test_read_only_guard() -> None:
    check_read_only("select 1; explain select 2; explain analyze select 3")
    check_read_only("set variable x = 1; reset variable x; describe jobs; from jobs")
    for statement in (
        "copy (select 1) to 'x.csv'",
        "create table t (a int)",
        "insert into t values (1)",
        "attach 'x.db'",
        "select 1; drop view jobs",
        "explain analyze copy (select 1) to 'x.csv'",
        "import database 'dump'",
        "pragma profiling_output = 'p.json'",
        "set threads = 1",
        "update extensions",
    ):
        with pytest.raises(QueryError, match="read-only"):
            check_read_only(statement)


def test_bad_sql_is_one_line(store: Path) -> None:
    con = connect(store)
    with pytest.raises(QueryError) as info:
        query(con, "selec * from jobs")
    assert "\n" not in str(info.value) and "syntax error" in str(info.value)
    with pytest.raises(QueryError, match="nope"):
        query(con, "select * from nope")


def test_committed_views_sql_works_in_plain_duckdb(openb_store: Path, tmp_path: Path) -> None:
    """`duckdb -init schemas/views.sql` from a folder holding data/store sees the data."""
    (tmp_path / "data").mkdir()
    shutil.copytree(openb_store, tmp_path / "data" / "store")
    script = (ROOT / "schemas" / "views.sql").read_text()
    cwd = Path.cwd()
    os.chdir(tmp_path)
    try:
        con = duckdb.connect(":memory:")
        con.execute(script)
        assert con.execute("SELECT count(*) FROM jobs").fetchone() == (8152,)
        assert con.execute("SELECT count(*) FROM quarantine").fetchone() == (0,)
    finally:
        os.chdir(cwd)


def test_committed_views_sql_works_from_any_folder(openb_store: Path, tmp_path: Path) -> None:
    """The same script from a folder without data/store, the store given as the DuckDB
    variable gpu_trace_store (what `duckdb -cmd "SET VARIABLE ..." -cmd ".read ..."`
    does). 8152 = rows of the bundled openb_pod_list_default.csv (wc -l minus header)."""
    script = (ROOT / "schemas" / "views.sql").read_text()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    cwd = Path.cwd()
    os.chdir(elsewhere)
    try:
        unset = duckdb.connect(":memory:")
        with pytest.raises(duckdb.IOException, match="data/store/current/jobs"):
            unset.execute(script)  # no data/store here and no variable: says where it looked
        con = duckdb.connect(":memory:")
        con.execute("SET VARIABLE gpu_trace_store = ?", [str(openb_store) + "/"])
        con.execute(script)
        assert con.execute("SELECT count(*) FROM jobs").fetchone() == (8152,)
        assert con.execute("SELECT count(*) FROM gpu_samples_wide").fetchone() == (0,)
    finally:
        os.chdir(cwd)
