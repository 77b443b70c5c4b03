"""Analyses on a hand-computable fixture (expected values worked out in the comments),
on the real openb files (expected values computed here with the csv module), and a
published figure reproduced from a processed file."""

from __future__ import annotations

import csv
import datetime as dt
import math
import statistics
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from gpu_trace.analyses import arrivals as arr
from gpu_trace.analyses import failures as fail
from gpu_trace.analyses import jobs as jb
from gpu_trace.analyses import occupancy as occ
from gpu_trace.analyses import queueing as que
from gpu_trace.analyses import sharing as shr
from gpu_trace.analyses import users as usr
from gpu_trace.analyses.definitions import freq_to_polars, size_labels
from gpu_trace.analyses.inputs import Inputs
from gpu_trace.analyses.summary import summary
from tests.conftest import OPENB, SAMPLES

U = dt.UTC


def t(h: int, m: int = 0) -> dt.datetime:
    return dt.datetime(2020, 6, 1, h, m, tzinfo=U)


def fixture_jobs() -> pl.LazyFrame:
    """Five jobs (times UTC; the source's zone is Asia/Shanghai, UTC+8):

    j1  1 GPU   submit 00:00 start 00:00 end 01:00  completed  u1 v1
    j2  2 GPUs  submit 00:00 start 00:30 end 01:30  failed     u1 v1
    j3  CPU     submit 01:00 start 01:00 end 01:10  completed  u2 v2
    j4  0.5 GPU submit 02:00 start 02:10 end 03:10  cancelled  u3 v2
    j5  4 GPUs  submit 03:00 never started          pending    u3 v2
    """
    return pl.LazyFrame(
        {
            "source": ["t"] * 5,
            "cluster": ["c"] * 5,
            "dataset": ["c"] * 5,
            "job_id": ["j1", "j2", "j3", "j4", "j5"],
            "user": ["u1", "u1", "u2", "u3", "u3"],
            "vc": ["v1", "v1", "v2", "v2", "v2"],
            "gpus": [1.0, 2.0, 0.0, 0.5, 4.0],
            "submit_time": [t(0), t(0), t(1), t(2), t(3)],
            "start_time": [t(0), t(0, 30), t(1), t(2, 10), None],
            "end_time": [t(1), t(1, 30), t(1, 10), t(3, 10), None],
            "queue_s": [0.0, 1800.0, 0.0, 600.0, None],
            "run_s": [3600.0, 3600.0, 600.0, 3600.0, None],
            "status": ["completed", "failed", "completed", "cancelled", "pending"],
            "raw_status": ["a", "b", "a", "c", "d"],
            "qos": [None] * 5,
            "gpu_type": [None, None, None, "B", None],
            "attempts": [1, 1, 1, 1, 0],
            "source_tz": ["Asia/Shanghai"] * 5,
        },
        schema_overrides={"qos": pl.String, "gpu_type": pl.String},
    )


def test_summary_fixture() -> None:
    row = summary(fixture_jobs()).collect().row(0, named=True)
    assert (row["jobs"], row["cpu_jobs"], row["gpu_jobs"], row["unfinished_jobs"]) == (5, 1, 4, 1)
    assert row["avg_run_s_gpu"] == 3600 and row["med_run_s_gpu"] == 3600
    assert row["avg_queue_s_gpu"] == 800 and row["med_queue_s_gpu"] == 600
    assert row["avg_gpus"] == 1.875 and row["med_gpus"] == 1.5 and row["max_gpus"] == 4
    assert (row["completed_rate"], row["cancelled_rate"], row["failed_rate"]) == (0.5, 0.25, 0.25)
    assert row["completed_rate_gpu"] == pytest.approx(1 / 3)
    assert row["completed_rate_cpu"] == 1.0
    assert row["gpu_hours"] == 3.5  # 3600*1 + 3600*2 + 3600*0.5 GPU-seconds
    assert row["completed_gpu_time_share"] == pytest.approx(3600 / 12600)
    assert row["failed_gpu_time_share"] == pytest.approx(7200 / 12600)
    assert row["cancelled_gpu_time_share"] == pytest.approx(1800 / 12600)


def test_allocation_is_time_weighted() -> None:
    got = occ.allocation(fixture_jobs(), freq="1h").collect()
    # 00-01: j1 1 GPU all hour + j2 2 GPUs half hour = 2; 01-02: j2 half hour = 1;
    # 02-03: j4 0.5 GPU for 50 min; 03-04: j4 for 10 min
    assert got["time"].to_list() == [t(0), t(1), t(2), t(3)]
    assert got["allocated_gpus"].to_list() == pytest.approx(
        [2.0, 1.0, 0.5 * 50 / 60, 0.5 * 10 / 60]
    )


def test_occupancy_with_capacity_and_profiles() -> None:
    cap = pl.LazyFrame(
        {
            "source": ["t", "t"],
            "cluster": ["c", "c"],
            "vc": [None, "v1"],
            "time": [dt.datetime(2020, 6, 1, tzinfo=U)] * 2,
            "gpus": [10, 4],
            "basis": ["published", "published"],
        },
        schema_overrides={"vc": pl.String},
    )
    machines = pl.LazyFrame(
        schema={
            "source": pl.String,
            "cluster": pl.String,
            "dataset": pl.String,
            "gpus": pl.Int32,
            "gpu_type": pl.String,
        }
    )
    series = occ.occupancy(fixture_jobs(), cap, machines, freq="1h").collect()
    assert series["allocation_pct"].to_list()[:2] == pytest.approx([20.0, 10.0])
    by_vc = occ.occupancy(fixture_jobs(), cap, machines, freq="1h", by="vc").collect()
    v1 = by_vc.filter(pl.col("vc") == "v1")
    assert v1["allocation_pct"].to_list() == pytest.approx([50.0, 25.0])  # 2/4, 1/4
    prof = occ.profiles(series.lazy(), {"t": "Asia/Shanghai"}).collect()
    assert prof["hour"].to_list() == [8, 9, 10, 11]  # UTC 00-03 is 08-11 in Shanghai


def test_duration_cdf_and_quantiles() -> None:
    cdf = jb.duration_cdf(fixture_jobs()).collect()
    gpu = dict(
        zip(
            *cdf.filter(pl.col("job_class") == "gpu")
            .select("x_s", "cdf")
            .to_dict(as_series=False)
            .values(),
            strict=True,
        )
    )
    assert gpu[2048.0] == 0 and gpu[4096.0] == 1.0
    cpu = dict(
        zip(
            *cdf.filter(pl.col("job_class") == "cpu")
            .select("x_s", "cdf")
            .to_dict(as_series=False)
            .values(),
            strict=True,
        )
    )
    assert cpu[512.0] == 0 and cpu[1024.0] == 1.0
    sizes = jb.size_shares(fixture_jobs()).collect()
    assert sizes["size_bucket"].to_list() == ["<1 (shared)", "1", "2", "3-4"]
    assert sizes["cum_job_share"].to_list()[-1] == pytest.approx(1.0)


def test_queueing_fixture() -> None:
    q = que.queue_by(fixture_jobs(), "gpus").collect()
    assert dict(zip(q["size_bucket"], q["mean_s"], strict=True)) == {
        "<1 (shared)": 600.0,
        "1": 0.0,
        "2": 1800.0,
    }
    hours = que.queue_by(fixture_jobs(), "hour", tz_by_source={"t": "Asia/Shanghai"}).collect()
    assert hours["hour"].to_list() == [8, 10]
    placements = pl.LazyFrame(
        {
            "source": ["t"] * 3,
            "cluster": ["c"] * 3,
            "job_id": ["j2"] * 3,
            "attempt": [0, 1, 1],
            "start_time": [t(0, 30), t(0, 50), t(0, 50)],
            "end_time": [t(0, 40), t(1, 30), t(1, 20)],
        }
    )
    gaps = que.requeue_gaps(fixture_jobs(), placements).collect()
    assert gaps.select("kind", "wait_s").rows() == [("initial", 1800.0), ("requeue", 600.0)]


def test_failures_users_arrivals_fixture() -> None:
    mix = fail.status_mix(fixture_jobs()).collect()
    assert dict(zip(mix["status_class"], mix["jobs"], strict=True)) == {
        "cancelled": 1,
        "completed": 2,
        "failed": 1,
        "unfinished": 1,
    }
    lost = fail.lost_gpu_time(fixture_jobs(), "status").collect().row(0, named=True)
    assert lost["failed_gpu_hours"] == 2.0 and lost["cancelled_gpu_hours"] == 0.5
    per = usr.per_user(fixture_jobs()).collect()
    assert dict(zip(per["user"], per["gpu_hours"], strict=True)) == {
        "u1": 3.0,
        "u3": 0.5,
        "u2": 0.0,
    }
    conc = usr.concentration(per.lazy()).collect().row(0, named=True)
    assert conc["users"] == 3 and conc["top1pct_share"] == pytest.approx(3 / 3.5)
    # ascending [0, 0.5, 3]: 2*(1*0 + 2*0.5 + 3*3)/(3*3.5) - 4/3
    assert conc["gini"] == pytest.approx(2 * 10 / 10.5 - 4 / 3)
    hourly = arr.hourly_profile(fixture_jobs(), {"t": "Asia/Shanghai"}).collect()
    assert dict(zip(hourly["hour"], hourly["jobs"], strict=True)) == {8: 2, 9: 1, 10: 1, 11: 1}


def test_fragmentation_fixture() -> None:
    machines = pl.LazyFrame({"machine_id": ["n1", "n2"], "gpu_type": ["A", "B"], "gpus": [2, 8]})
    classes = pl.LazyFrame(
        {
            "task_gpus": [4, 1],
            "per_gpu": [1.0, 0.5],
            "gpu_type": [None, "B"],
            "jobs": [1, 1],
            "popularity": [0.5, 0.5],
        },
        schema_overrides={"gpu_type": pl.String},
    )
    empty = shr.fragmentation(machines, classes).collect()
    # n1: the 4-GPU task cannot fit and the B-only task may not use type A -> all 2 free GPUs, x0.5 each
    assert dict(zip(empty["machine_id"], empty["fragmented_gpus"], strict=True)) == {
        "n1": 2.0,
        "n2": 0.0,
    }
    free = pl.LazyFrame(
        {
            "machine_id": ["n2"] * 8 + ["n1"] * 2,
            "gpu_index": [*range(8), 0, 1],
            "free": [0.3, 1, 1, 1, 0, 0, 0, 0, 1, 1],
        }
    )
    busy = shr.fragmentation(machines, classes, free).collect()
    # n2: only 3 whole GPUs -> 4-GPU task cannot fit: 3.3 x 0.5; 0.3 < 0.5 unusable: 0.3 x 0.5
    assert dict(zip(busy["machine_id"], busy["fragmented_gpus"], strict=True)) == pytest.approx(
        {"n1": 2.0, "n2": 1.8}
    )


def test_definitions() -> None:
    assert freq_to_polars("10min") == ("10m", 600)
    assert freq_to_polars("1h") == ("1h", 3600)
    with pytest.raises(ValueError):
        freq_to_polars("5 parsecs")
    assert size_labels()[:4] == ["0 (CPU)", "<1 (shared)", "1", "2"]


def test_real_openb(openb_store: Path) -> None:
    """Pod, node and GPU counts, fractional share, QoS and phase mix, against csv."""
    with (OPENB / "openb_pod_list_default.csv").open(newline="") as fh:
        pods = list(csv.DictReader(fh))
    with (OPENB / "openb_node_list_all_node.csv").open(newline="") as fh:
        nodes = list(csv.DictReader(fh))
    inp = Inputs.from_store(openb_store)
    mix = shr.request_mix(inp.jobs).collect()
    counts = dict(zip(mix["request"], mix["jobs"], strict=True))
    frac = sum(1 for p in pods if p["num_gpu"] == "1" and int(p["gpu_milli"]) < 1000)
    assert counts["fractional (<1 GPU)"] == frac
    assert counts["cpu-only"] == sum(1 for p in pods if p["num_gpu"] == "0")
    assert counts["multi-GPU"] == sum(1 for p in pods if int(p["num_gpu"]) > 1)
    gpu_pods = sum(1 for p in pods if int(p["num_gpu"]) > 0)
    row = summary(inp.jobs).collect().row(0, named=True)
    assert row["gpu_jobs"] == gpu_pods and row["jobs"] == len(pods)
    qp = shr.qos_phase_mix(inp.jobs).collect()
    assert {(r["qos"], r["raw_status"]): r["jobs"] for r in qp.iter_rows(named=True)} == dict(
        Counter((p["qos"], p["pod_phase"]) for p in pods)
    )
    inv = shr.inventory(inp.machines.filter(pl.col("dataset") == "all_node")).collect()
    assert inv["machines"].sum() == len(nodes) and inv["gpus"].sum() == sum(
        int(n["gpu"]) for n in nodes
    )
    shares = shr.share_histogram(inp.jobs).collect()
    top = shares.sort("jobs", descending=True).row(0, named=True)
    milli = Counter(
        int(p["gpu_milli"]) for p in pods if p["num_gpu"] == "1" and int(p["gpu_milli"]) < 1000
    )
    assert (round(top["gpus"] * 1000), top["jobs"]) == milli.most_common(1)[0]


def test_reproduces_published_philly_runtime_percentiles() -> None:
    """HeliosArtifact's processed philly_runtime.csv: Philly runtimes (philly_runtime.csv) n = 83,154; median 1,186 s;
    p10 61 s; p90 12,860 s; mean 14,613 s; 9.7 % <= 60 s; 3.5 % >= 1 day."""
    path = SAMPLES / "processed" / "alibaba-v2020-analysis" / "philly_runtime.csv"
    runtimes = pl.read_csv(path)["runtime"].cast(pl.Float64)
    jobs = pl.LazyFrame(
        {
            "source": "philly",
            "cluster": "philly",
            "gpus": 1.0,
            "run_s": runtimes,
            "queue_s": None,
            "status": "completed",
        },
        schema_overrides={"queue_s": pl.Float64},
    )
    q = jb.duration_quantiles(jobs).collect().row(0, named=True)
    assert q["n"] == 83_154
    assert round(q["p50"]) == 1186
    assert round(q["p10"]) == 61
    assert abs(q["p90"] - 12_860) / 12_860 < 0.001
    assert round(q["mean"]) == 14_613
    cdf = jb.duration_cdf(jobs, edges=(60.0, 86_399.999)).collect()
    assert round(cdf["cdf"][0] * 100, 1) == 9.7
    assert round((1 - cdf["cdf"][1]) * 100, 1) == 3.5
    # and the same median as the stdlib computes
    assert q["p50"] == statistics.median(runtimes.to_list())
    assert not math.isnan(q["max"])


def test_provisioning_fixture() -> None:
    """Task t1 asks 2 instances x (4 vCPU, 0.5 GPU, 8 GiB); its instances used 1.5 + 2.5
    cores, 0.2 + 0.1 GPU, 10 + 7 GiB -> CPU and GPU over-provisioned, memory under."""
    from gpu_trace.analyses import provisioning as prov

    gib = 2**30
    tasks = pl.LazyFrame(
        {
            "source": ["p"],
            "cluster": ["c"],
            "job_id": ["j"],
            "task": ["t1"],
            "cpus": [8.0],
            "gpus": [1.0],
            "mem_bytes": [16 * gib],
        }
    )
    usage = pl.LazyFrame(
        {
            "source": ["p"] * 6,
            "cluster": ["c"] * 6,
            "job_id": ["j"] * 6,
            "task": ["t1"] * 6,
            "scope": ["instance"] * 6,
            "stat": ["mean"] * 6,
            "metric": [
                "cpu_used_cores",
                "cpu_used_cores",
                "gpu_used_gpus",
                "gpu_used_gpus",
                "mem_used_bytes",
                "mem_used_bytes",
            ],
            "value": [1.5, 2.5, 0.2, 0.1, 10.0 * gib, 7.0 * gib],
        }
    )
    rv = prov.requested_vs_used(tasks, usage).collect().row(0, named=True)
    assert (rv["cpu_requested"], rv["cpu_used"]) == (8.0, 4.0)
    assert rv["gpu_used"] == pytest.approx(0.3) and rv["mem_used"] == 17.0 * gib
    over = prov.over_provisioning(prov.requested_vs_used(tasks, usage)).collect()
    assert dict(zip(over["resource"], over["over_share"], strict=True)) == {
        "cpu": 1.0,
        "gpu": 1.0,
        "mem": 0.0,
    }
    assert dict(zip(over["resource"], over["under_share"], strict=True))["mem"] == 1.0
