"""AcmeTrace: CLI tests (the typer app: one-line errors, ``synth acme``, ingest, analyses
and a replay on the bundled sample)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from gpu_trace.cli import app
from gpu_trace.errors import InputError
from gpu_trace.loaders import LOADERS, ingest
from gpu_trace.store.parquet import read_table
from tests.acme_common import _jobs, _write

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "data" / "samples" / "acme"


@pytest.mark.parametrize(
    ("name", "lines", "reason"),
    [
        ("trace_seren.csv", ["job_id,user", "1,u"], "header lacks column(s) node_num"),
        ("GPU_UTIL.csv", ["Time,10.0.0.1", "2023-07-01 08:00:00+08:00,1"], "not <node>-<gpu"),
        ("GPU_UTIL.csv", ["Time,a-0,a-0"], "duplicate column(s) a-0"),
        ("notes.csv", ["hello,world"], "not an AcmeTrace input"),
    ],
)
def test_unreadable_files_are_one_line_errors(
    tmp_path: Path, name: str, lines: list[str], reason: str
) -> None:
    f = _write(tmp_path / name, *lines)
    with pytest.raises(InputError, match="line 1") as exc:
        ingest(LOADERS["acme"], f, tmp_path / "store")
    assert reason in str(exc.value) and str(f) in str(exc.value)
    result = CliRunner().invoke(app, ["ingest", "acme", str(f), "--store", str(tmp_path / "s")])
    assert result.exit_code == 1
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and reason in errors[0] and "Traceback" not in result.output


def test_synth_is_deterministic_and_ingests_clean(tmp_path: Path) -> None:
    runner = CliRunner()
    for out in ("a", "b"):
        r = runner.invoke(
            app, ["synth", "acme", "--jobs", "40", "--seed", "3", "--out", str(tmp_path / out)]
        )
        assert r.exit_code == 0, r.output
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*.csv"))
    assert len(files) == 16  # 2 job traces + 7 metrics x 2 clusters
    for rel in files:
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes()
    report = ingest(LOADERS["acme"], tmp_path / "a" / "data", tmp_path / "store")
    read, written, quarantined = report.totals
    assert quarantined == 0 and read == written
    assert report.lines[0].rows_read + report.lines[1].rows_read == 40  # both traces


def test_cli_ingest_analyze_and_replay_on_the_bundled_sample(tmp_path: Path) -> None:
    """`gpu-trace ingest acme` on the bundled sample, then an analysis and a replay."""
    runner = CliRunner()
    store = str(tmp_path / "store")
    r = runner.invoke(app, ["ingest", "acme", str(SAMPLE), "--store", store])
    assert r.exit_code == 0, r.output
    assert "trace_seren.csv" in r.stdout and "seren-gpu_util" in r.stdout
    # 285 + 19 job rows in the two sample traces (wc -l minus the header)
    jobs = _jobs(tmp_path / "store")
    assert jobs.height == 285 + 19
    assert set(jobs["cluster"]) == {"seren", "kalos"}
    for analysis in ("summary", "queueing", "failures"):
        a = runner.invoke(app, ["analyze", analysis, "--source", "acme", "--store", store])
        assert a.exit_code == 0, a.output
        assert "seren" in a.stdout and "kalos" in a.stdout
    a = runner.invoke(app, ["analyze", "failures", "--source", "acme", "--store", store])
    assert "failed" in a.stdout
    out = tmp_path / "replay"
    rp = runner.invoke(
        app,
        [
            "replay",
            "run",
            "--source",
            "acme",
            "--gpus",
            "2048x8",
            "--store",
            store,
            "--out",
            str(out),
        ],
    )
    assert rp.exit_code == 0, rp.output
    runs = read_table(tmp_path / "store", "replay_runs").to_pylist()
    assert len(runs) == 1 and runs[0]["source"] == "acme"
    finished = runs[0]["jobs_finished"]
    gpu_jobs = jobs.filter(pl.col("gpus") > 0).height
    assert finished == gpu_jobs  # every GPU job fits 2048 x 8 GPUs and finishes
