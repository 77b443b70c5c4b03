"""Every CLI command, through typer's runner and through a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from gpu_trace import __version__
from gpu_trace.cli import app
from gpu_trace.schemas import TABLES
from gpu_trace.schemas.views import derived_views
from tests.conftest import OPENB

runner = CliRunner()
BIN = Path(sys.executable).parent / "gpu-trace"


def run(*args: str | Path, env: dict[str, str] | None = None):
    return runner.invoke(app, [str(a) for a in args], env=env)


def test_help_and_version() -> None:
    result = run("--help")
    assert result.exit_code == 0
    for group in (
        "ingest",
        "sql",
        "schema",
        "report",
        "datasets",
        "telemetry",
        "analyze",
        "replay",
        "synth",
    ):
        assert group in result.output
    assert run("--version").output.strip() == f"gpu-trace {__version__}"


def test_usage_error_exits_2() -> None:
    assert run("sql", "--format", "xml", "select 1").exit_code == 2
    assert run("nonsense").exit_code == 2


def test_ingest_prints_reconciliation(store: Path) -> None:
    result = run("ingest", "openb", OPENB, "--store", store)
    assert result.exit_code == 0, result.output
    total = [line for line in result.stdout.splitlines() if line.startswith("total")]
    assert total and total[0].split()[1:] == ["10888", "10888", "0", "0"]
    assert "read 10888 = written 10888 + quarantined 0" in result.stderr


def test_ingest_bad_input_is_one_line(tmp_path: Path, store: Path) -> None:
    bad = tmp_path / "openb_pod_list_default.csv"
    bad.write_text("x,y\n1,2\n")
    result = run("ingest", "openb", bad, "--store", store)
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0] and "line 1" in lines[0]
    assert "Traceback" not in result.output


def test_sql_formats(openb_store: Path, tmp_path: Path) -> None:
    q = "select status, count(*) as n from jobs group by 1 order by 1"
    table = run("sql", q, "--store", openb_store)
    assert table.exit_code == 0 and "| running" in table.stdout
    csv = run("sql", q, "--store", openb_store, "--format", "csv")
    assert csv.stdout.splitlines()[0] == "status,n"
    js = json.loads(run("sql", q, "--store", openb_store, "-f", "json").stdout)
    assert {r["status"]: r["n"] for r in js}["running"] == 5193
    out = tmp_path / "out.parquet"
    pq = run("sql", q, "--store", openb_store, "-f", "parquet", "-o", out)
    assert pq.exit_code == 0 and pl.read_parquet(out).height == 4
    assert run("sql", q, "--store", openb_store, "-f", "parquet").exit_code == 2  # usage


def test_sql_env_store_and_views(openb_store: Path) -> None:
    result = run(
        "sql",
        "select count(*) as n from jobs",
        "-f",
        "csv",
        env={"GPU_TRACE_STORE": str(openb_store)},
    )
    assert result.stdout.splitlines() == ["n", "8152"]
    views = run("sql", "--views", "--store", openb_store)
    assert views.exit_code == 0
    assert f"{openb_store.resolve()}/current/jobs/source=*/*.parquet" in views.stdout
    assert views.stdout.count("CREATE OR REPLACE VIEW") == len(TABLES) + len(derived_views())


def test_sql_errors(openb_store: Path) -> None:
    for args, code in ((["selec 1"], 1), (["copy (select 1) to 'x.csv'"], 1), ([], 2)):
        result = run("sql", *args, "--store", openb_store)
        assert result.exit_code == code  # no SQL at all is a usage mistake
        assert len(result.stderr.strip().splitlines()) == 1
        assert result.stderr.startswith("error:")


def test_sql_write_allows_copy(openb_store: Path, tmp_path: Path) -> None:
    target = tmp_path / "x.csv"
    result = run("sql", f"copy (select 42 as a) to '{target}'", "--write", "--store", openb_store)
    assert result.exit_code == 0 and target.read_text().splitlines() == ["a", "42"]


def test_schema_command() -> None:
    listing = run("schema")
    assert listing.exit_code == 0 and "gpu_samples" in listing.stdout
    jobs = run("schema", "jobs")
    assert "queue_s" in jobs.stdout and "[s]" in jobs.stdout
    assert run("schema", "nope").exit_code == 2  # an unknown name is a usage mistake


def test_report_command(openb_store: Path, tmp_path: Path) -> None:
    result = run(
        "report", "--store", openb_store, "--out", tmp_path / "site", "--title", "<b>T</b>"
    )
    assert result.exit_code == 0, result.output
    index = Path(result.stdout.strip())
    html = index.read_text()
    assert "&lt;b&gt;T&lt;/b&gt;" in html and "<b>T</b>" not in html
    assert "8152" in html
    assert 'src="http' not in html and "cdn.jsdelivr" not in html


def test_groups_without_arguments_show_their_commands() -> None:
    """A group called with no arguments prints its usage and command list (exit 2, as
    click does for a missing command), not a traceback or nothing."""
    expected = {
        "telemetry": ("sample", "scrape", "jobs"),
        "replay": ("run", "compare", "policies", "export", "live", "validate"),
        "ingest": (
            "openb",
            "helios",
            "pai2020",
            "philly",
            "nvidia-smi",
            "chronus",
            "gavel",
            "acme",
        ),
        "analyze": ("summary", "utilization", "queueing", "fragmentation", "provisioning"),
        "datasets": ("list", "fetch", "verify"),
    }
    for group, commands in expected.items():
        result = run(group)
        assert result.exit_code == 2, (group, result.output)
        assert f"Usage: gpu-trace {group}" in result.output
        for command in commands:
            assert command in result.output, (group, command)


@pytest.mark.skipif(not BIN.exists(), reason="console script not installed")
def test_real_subprocess(tmp_path: Path) -> None:
    env = {**os.environ, "GPU_TRACE_STORE": str(tmp_path / "store")}
    ok = subprocess.run(
        [BIN, "ingest", "openb", OPENB], capture_output=True, text=True, env=env, check=False
    )
    assert ok.returncode == 0, ok.stderr
    out = subprocess.run(
        [BIN, "sql", "select source, count(*) as n from jobs group by 1", "-f", "csv"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert out.stdout.splitlines() == ["source,n", "openb,8152"]
    bad = subprocess.run(
        [BIN, "sql", "select * from nope"], capture_output=True, text=True, env=env, check=False
    )
    assert bad.returncode == 1 and bad.stdout == ""
    assert len(bad.stderr.strip().splitlines()) == 1 and "Traceback" not in bad.stderr
    missing = subprocess.run(
        [BIN, "ingest", "openb", tmp_path / "none"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert missing.returncode == 1 and "no such file" in missing.stderr


# Every analyze case is checked for its values in tests/test_cli_analyze_values.py.


def test_analyze_values_and_errors(openb_store: Path) -> None:
    js = json.loads(run("analyze", "summary", "--store", openb_store, "-f", "json").stdout)
    assert js[0]["jobs"] == 8152 and js[0]["gpu_jobs"] == 7064
    bad = run("analyze", "utilization", "--freq", "5parsecs", "--store", openb_store)
    assert bad.exit_code == 1 and "frequency" in bad.stderr
    assert run("analyze", "queueing", "--by", "nope", "--store", openb_store).exit_code == 2
    none = run("analyze", "summary", "--source", "helios", "--store", openb_store)
    assert none.exit_code == 1 and "no data for source 'helios'" in none.stderr


def test_sql_csv_flattens_nested_columns(tmp_path: Path) -> None:
    store = tmp_path / "store"
    fixtures = Path(__file__).parent / "fixtures" / "philly"
    assert run("ingest", "philly", fixtures, "--store", store).exit_code == 0
    out = run(
        "sql",
        "select job_id, gpu_indices from placements order by all limit 2",
        "-f",
        "csv",
        "--store",
        store,
    )
    assert out.exit_code == 0, out.output
    assert out.stdout.splitlines()[1].endswith('"[0, 1]"')
