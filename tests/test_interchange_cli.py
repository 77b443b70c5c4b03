"""Other simulators' formats in and out (Chronus/Tiresias CSV, Gavel .trace, openb pod
list) through the CLI, and the replay commands end to end on an ingested trace."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpu_trace.cli import app
from gpu_trace.store.catalog import connect
from tests.conftest import SAMPLES

runner = CliRunner()
CHRONUS = SAMPLES / "processed" / "chronus" / "trace_job_Philly_MIX1.csv"
GAVEL = SAMPLES / "processed" / "gavel" / "msr_seed0_103959.trace"


def run(*args: str | Path):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def chronus_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("chronus") / "store"
    result = run("ingest", "chronus", CHRONUS, "--store", store)
    assert result.exit_code == 0, result.output
    return store


def test_chronus_ingest_matches_csv(chronus_store: Path) -> None:
    with CHRONUS.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    got = (
        connect(chronus_store)
        .execute(
            "SELECT count(*), sum(gpus), sum(run_s), count(DISTINCT vc) FROM jobs WHERE source='chronus'"
        )
        .fetchone()
    )
    assert got == (
        len(rows),
        sum(float(r["num_gpu"]) for r in rows),
        sum(float(r["duration"]) for r in rows),
        len({r["user"] for r in rows}),
    )


def test_gavel_ingest_matches_file(tmp_path: Path) -> None:
    lines = GAVEL.read_text().splitlines()
    store = tmp_path / "store"
    assert run("ingest", "gavel", GAVEL, "--step-s", "0.5", "--store", store).exit_code == 0
    got = connect(store).execute("SELECT count(*), sum(gpus), sum(run_s) FROM jobs").fetchone()
    fields = [line.split("\t") for line in lines]
    assert got == (
        len(lines),
        sum(float(f[6]) for f in fields),
        sum(float(f[4]) * 0.5 for f in fields),
    )


def test_bad_interchange_rows_quarantined(tmp_path: Path) -> None:
    f = tmp_path / "t.csv"
    f.write_text(
        "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
        "0,1,10,5,vgg,100,1\n1,x,20,5,vgg,100,1\n2,2\n"
    )
    store = tmp_path / "store"
    result = run("ingest", "chronus", f, "--store", store)
    assert result.exit_code == 0 and "read 3 = written 1 + quarantined 2" in result.stderr
    assert run("ingest", "gavel", f, "--store", store).exit_code == 1  # not 7/10 tab fields


def test_replay_run_compare_export(chronus_store: Path, tmp_path: Path) -> None:
    for policy in ("fifo", "sjf"):
        out = run(
            "replay",
            "run",
            "-s",
            "chronus",
            "--policy",
            policy,
            "--gpus",
            "64x8",
            "--run-id",
            f"cli-{policy}",
            "--store",
            chronus_store,
            "--out",
            tmp_path / policy,
        )
        assert out.exit_code == 0, out.output
        assert (tmp_path / policy / "config.resolved.json").exists()
    jct = dict(
        connect(chronus_store)
        .execute("SELECT scheduler, jct_mean_s FROM replay_runs WHERE run_id LIKE 'cli-%'")
        .fetchall()
    )
    assert jct["sjf"] < jct["fifo"]  # shortest-first cuts mean JCT on a loaded cluster
    listed = run("replay", "policies")
    assert listed.exit_code == 0
    for name in (
        "fifo",
        "sjf",
        "srtf",
        "las",
        "qssf",
        "backfill",
        "fairshare",
        "recorded",
        "consolidate",
        "fgd",
    ):
        assert name in listed.stdout
    cmp = run(
        "replay",
        "compare",
        "-s",
        "chronus",
        "--policies",
        "fifo,srtf",
        "--gpus",
        "64x8",
        "--store",
        chronus_store,
        "-f",
        "csv",
    )
    assert cmp.exit_code == 0 and cmp.stdout.count("\n") == 3
    exported = tmp_path / "back.csv"
    assert (
        run(
            "replay",
            "export",
            "-s",
            "chronus",
            "-f",
            "chronus",
            "--output",
            exported,
            "--store",
            chronus_store,
        ).exit_code
        == 0
    )
    again = tmp_path / "again"
    assert run("ingest", "chronus", exported, "--store", again).exit_code == 0
    assert connect(again).execute("SELECT count(*) FROM jobs").fetchone() == (30940,)
    bad = run("replay", "run", "-s", "nope", "--store", chronus_store)
    assert bad.exit_code == 2 and "unknown source 'nope'" in bad.stderr  # a usage mistake
