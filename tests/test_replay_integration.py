"""Replay engine: integration tests (store output, run dir, interchange files, end-to-end
replays of a synthetic workload)."""

from __future__ import annotations

import csv
from pathlib import Path

import polars as pl
import pytest

from gpu_trace.replay import ReplayConfig, replay
from gpu_trace.replay import interchange as ic
from gpu_trace.replay.cluster import parse_spec
from gpu_trace.replay.synthetic import pai_like_jobs
from gpu_trace.store.catalog import connect
from tests.replay_common import SAMPLES, jobs_frame

# -- store, interchange ----------------------------------------------------------------


def test_results_land_in_store_and_run_dir(tmp_path: Path) -> None:
    from gpu_trace.replay.simulate import write

    r = replay(
        pai_like_jobs(500, cluster_gpus=64, seed=1),
        parse_spec("64x8"),
        ReplayConfig(source="synthetic", scheduler="sjf", run_id="r1"),
    )
    write(r, tmp_path / "store", tmp_path / "run")
    con = connect(tmp_path / "store")
    n, jct = con.execute(
        "select count(*), avg(jct_s) from replay_jobs where run_id = 'r1' and outcome = 'finished'"
    ).fetchone()  # type: ignore[misc]
    assert n == 500
    assert jct == pytest.approx(r.runs["jct_mean_s"][0])
    assert (tmp_path / "run" / "config.resolved.json").exists()
    ts = pl.read_parquet(tmp_path / "run" / "replay_timeseries.parquet")
    assert ts["allocated_gpus"].max() <= 64  # type: ignore[operator]


def test_sjf_cuts_jct_below_fifo_under_load() -> None:
    jobs = pai_like_jobs(3000, cluster_gpus=64, utilization=1.1, seed=2)
    spec = parse_spec("64x8")
    jct = {
        p: replay(jobs, spec, ReplayConfig(source="s", scheduler=p, estimator="oracle")).runs[
            "jct_mean_s"
        ][0]
        for p in ("fifo", "sjf", "srtf")
    }
    assert jct["sjf"] < 0.7 * jct["fifo"] and jct["srtf"] < jct["fifo"]


def test_chronus_and_gavel_samples_parse(tmp_path: Path) -> None:
    path = SAMPLES / "processed" / "chronus" / "trace_job_Philly_MIX1.csv"
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    df = ic.read_chronus(path)
    assert df.height == len(rows) == 30940
    assert df["gpus"].sum() == sum(int(r["num_gpu"]) for r in rows)
    assert df["run_s"].sum() == sum(float(r["duration"]) for r in rows)
    gpath = SAMPLES / "processed" / "gavel" / "msr_seed0_103959.trace"
    with gpath.open(newline="") as fh:
        grows = list(csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE))
    g = ic.read_gavel(gpath, step_s=1.0)
    assert g.height == len(grows)
    assert g["gpus"].sum() == sum(int(r[6]) for r in grows)
    assert g["run_s"].sum() == sum(int(r[4]) for r in grows)


@pytest.mark.parametrize("fmt", ["chronus", "tiresias", "gavel", "gavel10", "openb"])
def test_export_import_round_trip(tmp_path: Path, fmt: str) -> None:
    df = jobs_frame([(0, 100, 1), (30, 7, 2), (45, 3600, 0.5 if fmt == "openb" else 4)])
    out = tmp_path / f"t.{fmt}"
    assert ic.export(df, fmt, out) == 3
    if fmt in {"chronus", "tiresias"}:
        back = ic.read_chronus(out)
    elif fmt.startswith("gavel"):
        back = ic.read_gavel(out, step_s=1.0)
    else:
        out = out.rename(tmp_path / "openb_pod_list_rt.csv")
        back = ic.read_openb(out, "rt")
    assert back["run_s"].to_list() == [100.0, 7.0, 3600.0]
    assert back["gpus"].to_list() == df["gpus"].to_list()
    offs = (back["submit_time"] - back["submit_time"].min()).dt.total_seconds().to_list()
    assert offs == [0, 30, 45]
