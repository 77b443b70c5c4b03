"""``gpu-trace analyze idle``: allocated-but-idle GPU-hours, joined without a jobs file:
Kubernetes pods to dcgm-exporter series by their ``pod`` / ``namespace`` labels, Slurm
jobs by the ``hpc_job`` label or by host when the job holds the whole node. Every
figure is worked by hand from the fixtures in tests/idle_common.py."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from gpu_trace.store.parquet import StoreTransaction
from tests.idle_common import STEP, T0, app, k8s_store, runner, slurm_store


def idle(store: Path, *args: str) -> list[dict[str, Any]]:
    result = runner.invoke(app, ["analyze", "idle", "--store", str(store), *args, "-f", "json"])
    assert result.exit_code == 0, result.output
    rows: list[dict[str, Any]] = json.loads(result.stdout)
    return rows


@pytest.fixture(scope="module")
def k8s(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return k8s_store(tmp_path_factory.mktemp("k8s"))


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return slurm_store(tmp_path_factory.mktemp("slurm"))


def test_pods_join_dcgm_series_by_pod_and_namespace_labels(k8s: Path) -> None:
    rows = {r["job_id"]: r for r in idle(k8s)}
    # GPU 2 (no label): no job
    assert set(rows) == {"ml/Job/train", "research/Job/eval", "infer/Job/mig"}
    train, ev = rows["ml/Job/train"], rows["research/Job/eval"]
    # train-0: 1 GPU x 10:00-11:00 = 1 GPU-hour held; utilization 90, 0, 0, 2, 80, 50:
    # three of six samples < 5 %, so idle = 1 x 3/6 = 0.5 GPU-hour.
    assert train["held_gpu_hours"] == pytest.approx(1.0)
    assert train["idle_gpu_hours"] == pytest.approx(0.5)
    assert train["activity_metric"] == "gpu_util_pct"
    assert train["matched_by"] == "pod label" and train["user"] == "alice"
    # eval-0: 1 GPU x 10:00-10:40 = 2/3 GPU-hour. SM activity (preferred to the 100 %
    # utilization) at 10:00..10:30 = 1, 50, 2, 3 %: three of four idle (10:40 is outside
    # the window), so idle = 2/3 x 3/4 = 0.5 GPU-hour.
    assert ev["held_gpu_hours"] == pytest.approx(2 / 3)
    assert ev["samples"] == 4
    assert ev["idle_gpu_hours"] == pytest.approx(0.5)
    assert ev["idle_share"] == pytest.approx(0.75)
    assert ev["activity_metric"] == "sm_active_ratio"
    # mig-0: a 1g slice is 1/7 GPU for 10:00-11:00 = 1/7 GPU-hour; SM activity 0, 0, 0,
    # 0, 50, 50 %: four of six idle, so idle = 1/7 x 4/6 = 2/21 GPU-hour.
    mig = rows["infer/Job/mig"]
    assert mig["held_gpu_hours"] == pytest.approx(1 / 7)
    assert mig["idle_gpu_hours"] == pytest.approx(2 / 21)


def test_idle_by_user_and_threshold(k8s: Path) -> None:
    users = {r["user"]: r for r in idle(k8s, "--by", "user")}
    assert users["alice"]["idle_gpu_hours"] == pytest.approx(0.5)
    assert users["bob"]["idle_gpu_hours"] == pytest.approx(0.5)
    # threshold 1 %: train has 0, 0 below 1 (2 is not): 1 x 2/6 = 1/3;
    # eval has only 0 % at 10:40, outside its window, and 1 % is not below 1: 0.
    rows = {r["job_id"]: r for r in idle(k8s, "--threshold", "1")}
    assert rows["ml/Job/train"]["idle_gpu_hours"] == pytest.approx(1 / 3)
    assert rows["research/Job/eval"]["idle_gpu_hours"] == pytest.approx(0.0)


def test_threshold_out_of_range_is_usage_error(k8s: Path) -> None:
    result = runner.invoke(app, ["analyze", "idle", "--store", str(k8s), "--threshold", "120"])
    assert result.exit_code == 2
    assert "--threshold" in result.output and "Traceback" not in result.output


def test_slurm_jobs_join_by_hpc_job_label_and_whole_node(slurm: Path) -> None:
    rows = {r["job_id"]: r for r in idle(slurm)}
    # 101: hpc_job="101" on gpu01 GPUs 0 and 1, 10:00-11:00: held 2 GPU-hours; GPU 0 at
    # 0 % six times (1 idle hour), GPU 1 at 100 % (0): idle = 1.0. GPUs 2 and 3 (idle,
    # unlabelled) are not the job's: sacct says 2 GPUs and the host shows 4.
    assert rows["101"]["held_gpu_hours"] == pytest.approx(2.0)
    assert rows["101"]["idle_gpu_hours"] == pytest.approx(1.0)
    assert rows["101"]["matched_by"] == "hpc_job label"
    # 102: 2 GPUs on gpu02, which shows 2 GPUs: the whole node, 10:00-10:30 = 0.5 h each.
    # GPU 0 at 3, 4, 60 %: 2 of 3 idle -> 0.5 x 2/3 = 1/3; GPU 1 at 100 %: 0.
    assert rows["102"]["held_gpu_hours"] == pytest.approx(1.0)
    assert rows["102"]["idle_gpu_hours"] == pytest.approx(1 / 3)
    assert rows["102"]["matched_by"] == "host (whole node)"
    # 103: 1 GPU of gpu01's 4, no label: which GPU is unknown, so its 0.75 GPU-hour
    # (10:00-10:45) is held but unmeasured, never idle.
    assert rows["103"]["matched_by"] == "host (GPUs unknown)"
    assert rows["103"]["held_gpu_hours"] == pytest.approx(0.75)
    assert rows["103"]["unmeasured_gpu_hours"] == pytest.approx(0.75)
    assert rows["103"]["idle_gpu_hours"] == 0
    accounts = {r["account"]: r for r in idle(slurm, "--by", "account")}
    assert accounts["physics"]["idle_gpu_hours"] == pytest.approx(1.0)
    assert accounts["chem"]["idle_gpu_hours"] == pytest.approx(1 / 3)
    assert accounts["chem"]["unmeasured_gpu_hours"] == pytest.approx(0.75)


def test_per_gpu_rows(slurm: Path) -> None:
    rows = idle(slurm, "--by", "gpu")
    got = {(r["job_id"], r["host"], r["gpu_index"]): r["idle_gpu_hours"] for r in rows}
    assert got == pytest.approx(
        {
            ("101", "gpu01", 0): 1.0,
            ("101", "gpu01", 1): 0.0,
            ("102", "gpu02", 0): 1 / 3,
            ("102", "gpu02", 1): 0.0,
            ("103", "gpu01", None): 0.0,  # which GPU is unknown
        }
    )


def _samples(host: str, gpu: int, values: list[float], t0: datetime = T0) -> pl.DataFrame:
    """gpu_util_pct every 10 minutes from ``t0`` (as nvidia-smi --query-gpu rows)."""
    n = len(values)
    return pl.DataFrame(
        {
            "source": ["nvidia-smi"] * n,
            "dataset": [f"{host}-{gpu}-{t0.year}"] * n,
            "time": [t0 + i * STEP for i in range(n)],
            "host": [host] * n,
            "gpu_index": [gpu] * n,
            "metric": ["gpu_util_pct"] * n,
            "value": values,
            "unit": ["pct"] * n,
        },
        schema_overrides={"gpu_index": pl.Int16},
    )


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Placements that list GPU indices (as Philly's machine lists do), telemetry from
    another source (nvidia-smi) joined by host + index + time:

    - A: h1 GPUs 0 and 1, ``gpu_count`` 1 (a shared placement: half of each), 10:00-11:00.
    - B: h1 GPU 2, 10:00-11:00, never sampled.
    - C: h2 GPU 0, the job 10:00-11:00 and a step 10:10-10:30 on the same GPU (sacct
      without -X lists both).
    - a relative-time capture (1970-based) of h1 GPU 0 at 0 % that must join nothing.
    """
    end = T0 + timedelta(hours=1)
    jobs = pl.DataFrame(
        {
            "source": ["x"] * 3,
            "dataset": ["d"] * 3,
            "cluster": ["c"] * 3,
            "job_id": ["A", "B", "C"],
            "user": ["ua", "ub", "uc"],
            "account": ["p1", "p1", "p2"],
            "gpus": [1.0, 1.0, 1.0],
            "run_s": [3600.0] * 3,
            "status": ["completed"] * 3,
            "time_basis": ["absolute"] * 3,
        }
    )
    placements = pl.DataFrame(
        {
            "source": ["x"] * 4,
            "dataset": ["d"] * 4,
            "cluster": ["c"] * 4,
            "job_id": ["A", "B", "C", "C"],
            "attempt": [0, 0, 0, 0],
            "task": [None, None, None, "0"],
            "machine_id": ["h1", "h1", "h2", "h2"],
            "start_time": [T0, T0, T0, T0 + STEP],
            "end_time": [end, end, end, T0 + 3 * STEP],
            "gpu_indices": [[0, 1], [2], [0], [0]],
            "gpu_count": [1.0, 1.0, 1.0, 1.0],
        },
        schema_overrides={"gpu_indices": pl.List(pl.Int16)},
    )
    store = tmp_path_factory.mktemp("indexed") / "store"
    relative = datetime(1970, 1, 1, tzinfo=UTC)
    with StoreTransaction(store) as tx:
        tx.write("jobs", jobs, source="x", dataset="d")
        tx.write("placements", placements, source="x", dataset="d")
        for s in (
            _samples("h1", 0, [0, 0, 0, 0, 0, 0]),
            _samples("h1", 1, [50] * 6),
            _samples("h2", 0, [0, 0, 0, 100, 100, 100]),
            _samples("h1", 0, [0, 0, 0], relative),
        ):
            tx.write("gpu_samples", s, source="nvidia-smi", dataset=s["dataset"][0])
    return store


def test_placements_join_by_host_gpu_index_and_time(indexed: Path) -> None:
    result = runner.invoke(app, ["analyze", "idle", "--store", str(indexed), "-f", "json"])
    assert result.exit_code == 0, result.output
    rows = {r["job_id"]: r for r in json.loads(result.stdout)}
    # A: 2 GPUs x 1 h x share 1/2 = 1.0 held; GPU 0 at 0 % six times -> 0.5 idle,
    # GPU 1 at 50 % -> 0: idle 0.5.
    assert rows["A"]["held_gpu_hours"] == pytest.approx(1.0)
    assert rows["A"]["idle_gpu_hours"] == pytest.approx(0.5)
    assert rows["A"]["matched_by"] == "gpu index"
    # B: 1 GPU-hour held, no sample: unmeasured, not idle.
    assert rows["B"]["unmeasured_gpu_hours"] == pytest.approx(1.0)
    assert rows["B"]["idle_gpu_hours"] == pytest.approx(0.0)
    # C: job and step on one GPU merge to 10:00-11:00 (1 GPU-hour, not 1 h 20 min);
    # 0, 0, 0, 100, 100, 100: half idle -> 0.5.
    assert rows["C"]["held_gpu_hours"] == pytest.approx(1.0)
    assert rows["C"]["idle_gpu_hours"] == pytest.approx(0.5)
    # the 1970 capture joined nothing and is named once on stderr
    warn = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert len(warn) == 1 and "3 gpu_samples rows on h1" in warn[0] and "--start" in warn[0]
    accounts = {r["account"]: r for r in json.loads(
        runner.invoke(
            app, ["analyze", "idle", "--store", str(indexed), "--by", "account", "-f", "json"]
        ).stdout
    )}  # fmt: skip
    assert accounts["p1"]["idle_gpu_hours"] == pytest.approx(0.5)
    assert accounts["p1"]["held_gpu_hours"] == pytest.approx(2.0)  # A 1.0 + B 1.0
    assert accounts["p2"]["idle_gpu_hours"] == pytest.approx(0.5)


def test_pod_energy_by_namespace_through_the_same_join(k8s: Path) -> None:
    result = runner.invoke(
        app, ["analyze", "energy", "--by", "namespace", "--store", str(k8s), "-f", "json"]
    )
    assert result.exit_code == 0, result.output
    rows = {r["namespace"]: r for r in json.loads(result.stdout)}
    # DCGM_FI_DEV_POWER_USAGE = 300 W every 10 min from 10:00 to 10:50 on each GPU.
    # ml (train-0, GPU 0, 10:00-11:00): covered 10:00-10:50 = 3,000 s x 300 W = 0.9 MJ
    # = 0.25 kWh; 10:50-11:00 has no reading after it: 600 s uncovered.
    assert rows["ml"]["gpu_energy_kwh"] == pytest.approx(0.25)
    assert rows["ml"]["gap_gpu_s"] == pytest.approx(600.0)
    # research (eval-0, GPU 1, 10:00-10:40): 2,400 s x 300 W = 0.72 MJ = 0.2 kWh.
    assert rows["research"]["gpu_energy_kwh"] == pytest.approx(0.2)
    assert rows["research"]["basis"] == "telemetry"


def test_per_job_usage_of_pods_and_slurm_jobs_without_a_jobs_file(k8s: Path, slurm: Path) -> None:
    result = runner.invoke(app, ["analyze", "per-job", "--store", str(k8s), "-f", "json"])
    assert result.exit_code == 0, result.output
    rows = {r["job_id"]: r for r in json.loads(result.stdout)}
    # train-0's GPU_UTIL in its window: (90 + 0 + 0 + 2 + 80 + 50) / 6 = 37
    assert rows["ml/Job/train"]["samples"] == 6
    assert rows["ml/Job/train"]["mean"] == pytest.approx(37.0)
    # eval-0: 100 % at 10:00..10:30 (10:40 is outside)
    assert rows["research/Job/eval"]["samples"] == 4
    result = runner.invoke(app, ["analyze", "per-job", "--store", str(slurm), "-f", "json"])
    rows = {r["job_id"]: r for r in json.loads(result.stdout)}
    # 101: GPUs 0 and 1 (hpc_job), six samples each at 0 and 100: mean 50
    assert rows["101"]["samples"] == 12 and rows["101"]["mean"] == pytest.approx(50.0)
    # 102: whole node gpu02, 10:00..10:20: (3 + 4 + 60 + 100 + 100 + 100) / 6
    assert rows["102"]["mean"] == pytest.approx(367 / 6)
