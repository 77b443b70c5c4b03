"""``serve sweep`` on a real local Ray (2 CPUs, no dashboard, started here as the replay
sweep's Ray tests start theirs), through replay sweep's Ray backend: the same grid
gives the same per-point results as in process, a run's own error is marked failed
with its one line, and ``--resume`` after an interruption reruns exactly the runs not
marked done, each run once in the store. The real engine runs (the stand-in of
tests/serve_standin.py is patched into this process only, not into Ray's workers).
Skipped only where the ``ray`` extra is missing, unless ``GPU_TRACE_REQUIRE_RAY=1``
(CI) makes a missing Ray a failure.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from gpu_trace.replay import sweep as sw
from gpu_trace.serve import sweep as ssw
from gpu_trace.store.scan import scan
from tests.serving_common import SAMPLES, cli, ingest_ok

if os.environ.get("GPU_TRACE_REQUIRE_RAY") == "1":
    import ray
else:
    ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def local_ray() -> Iterator[Any]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def azure_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("serve-sweep-ray") / "store"
    ingest_ok(root, "azure-llm", SAMPLES / "azure-llm")
    return root


@pytest.fixture
def store(azure_store: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "store"
    shutil.copytree(azure_store, dest)
    return dest


GRID = {
    "source": "azure-llm",
    "fixed": {"dataset": "conv", "duration_s": 60},
    "grid": {"router": ["round-robin", "least-tokens"], "replicas": [1, 2]},
}


def stored(store: Path, table: str) -> pl.DataFrame:
    """A serve table of the store, in run order, without the commit time (a run's
    ``created_at`` is when it was written, not a result)."""
    frame = scan(store, table, ["azure-llm"]).collect()
    keys = ["run_id", "request_id"] if table == "serve_requests" else ["run_id"]
    return frame.drop("created_at", strict=False).sort(keys)


def test_the_same_grid_on_ray_gives_the_same_runs_as_in_process(
    local_ray: Any, store: Path, tmp_path: Path
) -> None:
    other = tmp_path / "store-local"
    shutil.copytree(store, other)
    spec = ssw.parse(GRID, "test")
    on_ray = ssw.run_sweep(store, spec, tmp_path / "ray", workers=2)
    local = ssw.run_sweep(other, spec, tmp_path / "local", workers=1)
    assert (on_ray.backend, on_ray.workers, on_ray.ran, on_ray.failed) == ("ray", 2, 4, [])
    assert (local.backend, local.ran, local.failed) == ("in-process", 4, [])
    # the per-point summaries (what the CLI prints), in grid order either way
    rows = [pl.concat(s.rows).drop("created_at") for s in (on_ray, local)]
    assert rows[0].height == 4 and rows[0].equals(rows[1])
    for table in ("serve_runs", "serve_requests", "serve_timeseries"):
        assert stored(store, table).equals(stored(other, table)), table
    assert stored(store, "serve_runs").height == 4
    # the runs ran in Ray's workers, not in this process
    markers = sw.read_markers(tmp_path / "ray")
    assert len(markers) == 4 and all(m["status"] == "done" for m in markers.values())
    assert os.getpid() not in {m["pid"] for m in markers.values()}
    assert all(m.get("node") for m in markers.values())


def test_resume_on_ray_reruns_only_the_runs_not_marked_done(
    local_ray: Any, store: Path, tmp_path: Path
) -> None:
    """A driver killed between a batch's commit and its markers leaves runs stored but
    not marked: ``--resume`` (grid from the manifest) runs exactly those again, and
    each run is once in the store."""
    out = tmp_path / "sw"
    first = ssw.run_sweep(store, ssw.parse(GRID, "test"), out, workers=2)
    assert first.ran == 4
    lost = sorted((out / sw.MARKERS).glob("*.json"))[:2]
    for marker in lost:
        marker.unlink()
    code, csv, err = cli(
        "serve", "sweep", "--out", out, "--store", store, "--resume", "--format", "csv"
    )
    assert code == 0, err
    assert "sweep: 4 runs (2 already done), ran 2, failed 0" in err
    assert "on ray with 2 workers" in err
    rerun = pl.read_csv(csv.encode())["run_id"].to_list()
    assert sorted(rerun) == sorted(m.stem for m in lost)
    runs = stored(store, "serve_runs")
    assert runs.height == 4 and runs["run_id"].n_unique() == 4
    assert sorted(sw.read_markers(out)) == sorted(runs["run_id"].to_list())


def test_a_runs_own_error_on_ray_is_marked_failed_in_one_line(
    local_ray: Any, store: Path, tmp_path: Path
) -> None:
    doc = {**GRID, "grid": {"model": ["llama-2-7b", "no-such-model"]}}
    out = tmp_path / "sw"
    summary = ssw.run_sweep(store, ssw.parse(doc, "test"), out, workers=2)
    assert summary.ran == 1 and len(summary.failed) == 1
    ((run_id, why),) = summary.failed
    assert "no-such-model" in why and "\n" not in why
    assert sw.read_markers(out)[run_id] == {"run_id": run_id, "status": "failed", "error": why}
    assert stored(store, "serve_runs").height == 1
