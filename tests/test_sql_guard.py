"""`gpu-trace sql` without --write: DuckDB itself refuses writes and file access outside
the store, only allow-listed statements run, and every failure is one line, exit 1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import duckdb
import polars as pl
import pytest
from typer.testing import CliRunner, Result

from gpu_trace.cli import app
from gpu_trace.errors import QueryError
from gpu_trace.schemas import TABLES
from gpu_trace.schemas.views import derived_views
from gpu_trace.store.catalog import connect, connect_read_only, fetch_arrow, query
from gpu_trace.store.parquet import ensure_layout

runner = CliRunner()
BIN = Path(sys.executable).parent / "gpu-trace"


def sql(*args: str | Path) -> Result:
    return runner.invoke(app, ["sql", *[str(a) for a in args]])


def assert_one_line_error(result: Result, *needles: str) -> str:
    """Exit 1, one ``error:`` line on stderr, nothing on stdout, no traceback."""
    code, stdout, stderr = result.exit_code, result.stdout, result.stderr
    assert code == 1, (stdout, stderr)
    assert stdout == ""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), stderr
    assert "Traceback" not in stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """An empty store (reads refuse a path without one, so the guard is tested on a real,
    empty store: what `gpu-trace ingest` leaves before its first commit of data)."""
    root = tmp_path / "store"
    ensure_layout(root)
    return root


@pytest.fixture
def target(tmp_path: Path) -> Path:
    """A folder outside the store where a bypass would write its file."""
    out = tmp_path / "outside"
    out.mkdir()
    return out


def test_explain_analyze_copy_writes_nothing(store: Path, target: Path) -> None:
    dest = target / "x.csv"
    result = sql(f"EXPLAIN ANALYZE COPY (select 1) TO '{dest}'", "--store", store)
    assert_one_line_error(result, "EXPLAIN statement refused", "read-only")
    assert not dest.exists()


def test_import_database_does_not_run_schema_sql(store: Path, target: Path) -> None:
    dump = target / "dump"
    dump.mkdir()
    pwned = target / "pwned.csv"
    (dump / "schema.sql").write_text(f"COPY (SELECT 1 AS a) TO '{pwned}';\n")
    (dump / "load.sql").write_text("")
    result = sql(f"IMPORT DATABASE '{dump}'", "--store", store)
    assert_one_line_error(result, "refused")
    assert not pwned.exists()


@pytest.mark.parametrize("verb", ["PRAGMA", "SET"])
def test_profiling_output_cannot_write(store: Path, target: Path, verb: str) -> None:
    prof = target / "prof.json"
    statement = f"{verb} enable_profiling='json'; {verb} profiling_output='{prof}'; select 1 as a"
    assert_one_line_error(sql(statement, "--store", store), "refused")
    assert not prof.exists()


def test_update_extensions_is_refused_not_a_crash(store: Path) -> None:
    assert_one_line_error(sql("UPDATE EXTENSIONS", "--store", store), "UNKNOWN statement refused")


REFUSED = [
    "COPY (select 1) TO '{t}/copy.csv'",
    "COPY jobs TO '{t}/jobs.parquet' (FORMAT parquet)",
    "ATTACH '{t}/attached.db'",
    "ATTACH ':memory:' AS m",
    "INSTALL httpfs",
    "LOAD httpfs",
    "CREATE TABLE t AS SELECT 1",
    "CREATE VIEW v AS SELECT 1",
    "INSERT INTO jobs SELECT * FROM jobs",
    "DROP VIEW jobs",
    "SET enable_external_access = true",
    "SET lock_configuration = false",
    "SET threads = 1",
    "RESET enable_external_access",
    "PRAGMA version",
    "PRAGMA enable_profiling",
    "CALL pragma_version()",
    "EXPORT DATABASE '{t}/export'",
    "CHECKPOINT",
    "FORCE CHECKPOINT",
    "BEGIN",
    "VACUUM",
    "select 1; COPY (select 1) TO '{t}/second.csv'",
    "EXPLAIN ANALYZE CREATE TABLE t AS SELECT 1",
    "EXPLAIN COPY (select 1) TO '{t}/explained.csv'",
]


@pytest.mark.parametrize("template", REFUSED)
def test_non_select_statements_are_refused(store: Path, target: Path, template: str) -> None:
    result = sql(template.format(t=target), "--store", store)
    assert_one_line_error(result, "statement refused", "unless --write is given")
    assert list(target.iterdir()) == []


FILE_READS = [
    "select * from read_csv('/etc/passwd')",
    "select * from read_text('/etc/passwd')",
    "select * from read_blob('/etc/hostname')",
    "select * from glob('/*')",
    "select * from '{t}/secret.csv'",
    "select * from read_text('{store}/jobs/../../outside/secret.txt')",
    "select * from read_text('{store}/../outside/secret.txt')",
]


@pytest.mark.parametrize("template", FILE_READS)
def test_files_outside_the_store_cannot_be_read(store: Path, target: Path, template: str) -> None:
    (target / "secret.txt").write_text("TOPSECRET\n")
    (target / "secret.csv").write_text("a\nTOPSECRET\n")
    statement = template.format(t=target, store=store.resolve())
    line = assert_one_line_error(sql(statement, "--store", store), "Permission Error")
    # DuckDB's reason follows the echoed path, and a long line is clipped at the end
    # (pytest-xdist adds popen-gwN/ to tmp paths): the reason's first words are kept.
    assert "file system operations are disabled" in line and "TOPSECRET" not in line


def test_duckdb_itself_refuses_on_the_read_only_connection(store: Path, target: Path) -> None:
    """The allow-list aside, the locked connection cannot write outside the store, load
    extensions, or undo its own settings."""
    con = connect_read_only(store)
    for statement in (
        f"COPY (select 1) TO '{target}/direct.csv'",
        f"EXPLAIN ANALYZE COPY (select 1) TO '{target}/direct2.csv'",
        f"ATTACH '{target}/direct.db'",
        "LOAD httpfs",
    ):
        with pytest.raises(duckdb.PermissionException):
            con.execute(statement)
    for setting in (
        "SET enable_external_access = true",
        "SET lock_configuration = false",
        "RESET lock_configuration",
        f"SET profiling_output = '{target}/p.json'",
        "SET autoload_known_extensions = true",
        "SET allowed_directories = ['/']",
    ):
        with pytest.raises(duckdb.InvalidInputException, match="locked"):
            con.execute(setting)
    assert list(target.iterdir()) == []
    spill = con.execute("select current_setting('temp_directory')").fetchone()
    assert spill is not None and spill[0].startswith(tempfile.gettempdir())
    assert con.execute("select count(*) from jobs").fetchone() == (0,)


def test_every_view_still_answers(openb_store: Path) -> None:
    for name in TABLES:
        files = sorted((openb_store / "current" / name).glob("source=*/*.parquet"))
        expected = sum(pl.read_parquet(f).height for f in files)
        result = sql(f"select count(*) as n from {name}", "-f", "csv", "--store", openb_store)
        assert result.exit_code == 0, result.output
        assert result.stdout.splitlines() == ["n", str(expected)], name
    for view in derived_views():
        name = view.split()[4]
        result = sql(f"select count(*) as n from {name}", "-f", "csv", "--store", openb_store)
        assert result.exit_code == 0 and result.stdout.splitlines()[0] == "n", result.output
    jobs = sql("select count(*) as n from jobs", "-f", "json", "--store", openb_store)
    assert json.loads(jobs.stdout) == [{"n": 8152}]
    views = sql("--views", "--store", openb_store)
    assert views.exit_code == 0
    assert views.stdout.count("CREATE OR REPLACE VIEW") == len(TABLES) + len(derived_views())


def test_allowed_statements(openb_store: Path) -> None:
    for statement, expected in (
        ("select 1 as a; select 2 as b", ["b", "2"]),
        ("set variable x = 41; select getvariable('x') + 1 as y", ["y", "42"]),
        ("from (values (7)) t(v)", ["v", "7"]),
        ("with s as (select 3 as c) select c from s", ["c", "3"]),
        (
            "select column_name from (describe jobs) where column_name = 'gpus'",
            ["column_name", "gpus"],
        ),
    ):
        result = sql(statement, "-f", "csv", "--store", openb_store)
        assert result.exit_code == 0, result.output
        assert result.stdout.splitlines() == expected
    for statement in ("explain select count(*) from jobs", "explain analyze select 1"):
        result = sql(statement, "--store", openb_store)
        assert result.exit_code == 0 and "explain" in result.stdout.lower(), result.output


@pytest.mark.parametrize("fmt", ["table", "csv", "json", "parquet"])
def test_errors_while_rows_materialize_are_one_line(
    openb_store: Path, tmp_path: Path, fmt: str
) -> None:
    out = tmp_path / f"out.{fmt}"
    result = sql(
        "select cast(job_id AS INTEGER) from jobs",
        "-f",
        fmt,
        "-o",
        out,
        "--store",
        openb_store,
    )
    assert_one_line_error(result, "Conversion Error")
    assert not out.exists()
    stdout = sql("select cast(job_id AS INTEGER) from jobs", "-f", fmt, "--store", openb_store)
    if fmt != "parquet":
        assert_one_line_error(stdout, "Conversion Error")


def test_out_of_memory_while_fetching_is_a_query_error(store: Path) -> None:
    con = connect(store)
    con.execute("SET memory_limit = '20MB'")
    con.execute("SET threads = 1")
    rel = query(con, "select list(range) as l from range(20000000)")
    assert rel is not None
    with pytest.raises(QueryError, match="Out of Memory") as info:
        fetch_arrow(rel)
    assert "\n" not in str(info.value)


def test_write_keeps_full_access_and_clean_errors(store: Path, target: Path) -> None:
    dest = target / "w.csv"
    ok = sql(f"copy (select 42 as a) to '{dest}'; select 1 as b", "--write", "--store", store)
    assert ok.exit_code == 0, ok.output
    assert dest.read_text().splitlines() == ["a", "42"]
    assert_one_line_error(
        sql("select cast('x' as integer); select 1", "--write", "--store", store), "Conversion"
    )


def test_huge_statement_is_not_echoed_whole(store: Path) -> None:
    # 1 MB, 5,000 times the 200-character echo: DuckDB's parse of a 10 MB name took most
    # of a minute, and any length past the limit shows the clip the same way.
    name = "a" * 1_000_000
    refused = assert_one_line_error(sql(f"COPY {name} TO 'x.csv'", "--store", store), "refused")
    assert len(refused) < 300 and "…" in refused
    missing = assert_one_line_error(sql(f"select * from {name}", "--store", store))
    assert len(missing) <= len("error: ") + 200 and missing.endswith("…")


@pytest.mark.parametrize(
    ("column", "fmt", "expected"),
    [
        ("interval 1 day AS i", "csv", ["i", "1 day"]),
        ("union_value(k := 1) AS u", "json", ['[{"u":"1"}]']),
        ("'\\xAA'::BLOB AS b", "json", ['[{"b":"aa"}]']),
        ("[NULL, 1] AS l", "csv", ["l", '"[null, 1]"']),
        ("[[1, 2], [3]] AS l", "csv", ["l", '"[[1, 2], [3]]"']),
        ("map {'a': 1} AS m", "csv", ["m", '"{""a"":1}"']),
        ("map {1: 2} AS m", "json", ['[{"m":[{"key":1,"value":2}]}]']),
    ],
)
def test_awkward_types_print(store: Path, column: str, fmt: str, expected: list[str]) -> None:
    result = sql(f"select {column}", "-f", fmt, "--store", store)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == expected


@pytest.mark.skipif(not BIN.exists(), reason="console script not installed")
def test_real_subprocess_refusals(store: Path, tmp_path: Path) -> None:
    env = {**os.environ, "GPU_TRACE_STORE": str(store)}
    dest = tmp_path / "x.csv"
    for statement, needle in (
        (f"EXPLAIN ANALYZE COPY (select 1) TO '{dest}'", "refused"),
        ("select * from read_csv('/etc/passwd')", "Permission Error"),
        ("UPDATE EXTENSIONS", "refused"),
        ("select cast('x' AS INTEGER)", "Conversion Error"),
    ):
        proc = subprocess.run(
            [BIN, "sql", statement], capture_output=True, text=True, env=env, check=False
        )
        assert proc.returncode == 1 and proc.stdout == "", proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and needle in lines[0] and "Traceback" not in proc.stderr
    assert not dest.exists()
    two = subprocess.run(
        [BIN, "sql", "select 1 as a; select 2 as b", "-f", "csv"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert two.returncode == 0 and two.stdout.splitlines() == ["b", "2"], two.stderr


def test_safe_mode_refuses_write_and_keeps_reads(
    store: Path, target: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # --safe (shared servers, CI): a --write COPY that would create a file outside the
    # store is refused before DuckDB runs (usage error, exit 2; the file never exists);
    # the environment variable does the same without the flag; reads still run.
    out = target / "x.csv"
    res = sql("--safe", "--write", f"copy (select 1) to '{out}'", "--store", store)
    assert res.exit_code == 2 and "--safe" in res.stderr and not out.exists()
    monkeypatch.setenv("GPU_TRACE_SQL_SAFE", "1")
    res = sql("--write", f"copy (select 1) to '{out}'", "--store", store)
    assert res.exit_code == 2 and not out.exists()
    res = sql("select 40 + 2 as n", "--format", "csv", "--store", store)
    assert res.exit_code == 0 and res.stdout.splitlines() == ["n", "42"]
