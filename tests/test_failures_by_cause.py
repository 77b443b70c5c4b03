"""``gpu-trace analyze failures --by cause|size|user`` and ``--mtbf`` on a hand-made
store and on the Philly / Helios fixtures, with every value worked out by hand."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from typer.testing import CliRunner

from gpu_trace.cli import app
from gpu_trace.store.parquet import StoreTransaction

runner = CliRunner()
FIXTURES = Path(__file__).parent / "fixtures"
T0 = datetime(2024, 1, 1, tzinfo=UTC)
H = 3600.0


def analyze(store: Path | str, *args: str) -> list[dict[str, Any]]:
    result = runner.invoke(app, ["analyze", *args, "--store", str(store), "-f", "json"])
    assert result.exit_code == 0, result.output
    rows: list[dict[str, Any]] = json.loads(result.stdout)
    return rows


def at(hours: float) -> datetime:
    return T0 + timedelta(hours=hours)


@pytest.fixture
def hand_store(tmp_path: Path) -> Path:
    """Seven jobs on hosts h1..h3 (one cluster c), with device events:

    ====  =========  ====  =====  ======  ==================================  =========
    job   status     gpus  nodes  run     placement                           cause
    ====  =========  ====  =====  ======  ==================================  =========
    j1    failed     2     1      1 h     h1 GPUs 0,1, [0, 1) h; XID 79 GPU 1  xid
    j2    failed     1     1      2 h     h1 GPU 0, [1, 3) h; ECC DBE GPU 3    job_failed
    j3    node_fail  8     2      0.5 h   (none)                              node_fail
    j4    cancelled  4     1      1 h     h2 GPUs 0-3, [0, 1); gpu_lost        cancelled
    j5    completed  1     1      3 h     h3 GPU 0: attempt 0 [0, 1) h,        retry
                                          attempt 1 [2, 3) h
    j6    timeout    1     1      4 h     (none)                              timeout
    j7    completed  2     1      1 h     h3 GPUs 1,2, [0, 1) h               (none)
    ====  =========  ====  =====  ======  ==================================  =========

    j2's ECC event is on GPU 3 of h1, which j2 did not hold (GPU 0); an XID code 0 on
    h1 (dcgm-exporter's "no error") is not a failure. j5 lost its first attempt:
    1 GPU x 1 h.
    """
    ids = ["j1", "j2", "j3", "j4", "j5", "j6", "j7"]
    jobs = pl.DataFrame(
        {
            "source": ["x"] * 7,
            "dataset": ["d"] * 7,
            "cluster": ["c"] * 7,
            "job_id": ids,
            "user": ["u1", "u1", "u2", "u2", "u3", "u3", "u3"],
            "vc": ["v"] * 7,
            "gpus": [2.0, 1.0, 8.0, 4.0, 1.0, 1.0, 2.0],
            "nodes": [1, 1, 2, 1, 1, 1, 1],
            "run_s": [1 * H, 2 * H, 0.5 * H, 1 * H, 3 * H, 4 * H, 1 * H],
            "status": [
                "failed",
                "failed",
                "node_fail",
                "cancelled",
                "completed",
                "timeout",
                "completed",
            ],
            "attempts": [1, 1, 1, 1, 2, 1, 1],
            "time_basis": ["absolute"] * 7,
        },
        schema_overrides={"nodes": pl.Int32, "attempts": pl.Int32},
    )
    placements = pl.DataFrame(
        {
            "source": ["x"] * 6,
            "dataset": ["d"] * 6,
            "cluster": ["c"] * 6,
            "job_id": ["j1", "j2", "j4", "j5", "j5", "j7"],
            "attempt": [0, 0, 0, 0, 1, 0],
            "machine_id": ["h1", "h1", "h2", "h3", "h3", "h3"],
            "start_time": [at(0), at(1), at(0), at(0), at(2), at(0)],
            "end_time": [at(1), at(3), at(1), at(1), at(3), at(1)],
            "gpu_count": [2.0, 1.0, 4.0, 1.0, 1.0, 2.0],
            "gpu_indices": [[0, 1], [0], [0, 1, 2, 3], [0], [0], [1, 2]],
        }
    )
    events = pl.DataFrame(
        {
            "source": ["x"] * 4,
            "dataset": ["ev"] * 4,
            "cluster": ["c"] * 4,
            "time": [at(0.5), at(2), at(0.5), at(0.2)],
            "host": ["h1", "h1", "h2", "h1"],
            "gpu_index": [1, 3, None, 0],
            "kind": ["xid", "ecc_dbe", "gpu_lost", "xid"],
            "code": [79, 1, None, 0],
        },
        schema_overrides={"gpu_index": pl.Int16, "code": pl.Int64},
    )
    store = tmp_path / "store"
    with StoreTransaction(store) as tx:
        tx.write("jobs", jobs, source="x", dataset="d")
        tx.write("placements", placements, source="x", dataset="d")
        tx.write("events", events, source="x", dataset="ev")
    return store


def test_by_cause_hand_store(hand_store: Path) -> None:
    """Lost GPU-hours: j1 2 x 1 = 2 (xid); j2 1 x 2 = 2 (job_failed); j3 8 x 0.5 = 4
    (node_fail); j4 4 x 1 = 4 (cancelled: a user cancel wins over the lost GPU);
    j5 1 x 1 = 1 (retry); j6 1 x 4 = 4 (timeout). Lost total 17; all GPU hours
    2 + 2 + 4 + 4 + 3 + 4 + 2 = 21."""
    rows = analyze(hand_store, "failures", "--by", "cause")
    got = {r["cause"]: (r["jobs"], r["lost_gpu_hours"]) for r in rows}
    assert got == {
        "xid": (1, 2.0),
        "node_fail": (1, 4.0),
        "timeout": (1, 4.0),
        "job_failed": (1, 2.0),
        "cancelled": (1, 4.0),
        "retry": (1, 1.0),
    }
    assert [r["cause"] for r in rows] == [
        "xid",
        "node_fail",
        "timeout",
        "job_failed",
        "cancelled",
        "retry",
    ]
    share = {r["cause"]: (r["lost_share"], r["share_of_gpu_hours"]) for r in rows}
    assert share["node_fail"] == pytest.approx((4 / 17, 4 / 21))
    assert share["retry"] == pytest.approx((1 / 17, 1 / 21))


@pytest.fixture
def status_store(tmp_path: Path) -> Path:
    """Eight jobs of one cluster c with the statuses operators tell apart:

    ====  =========  ============  ====  ======  ==========================  ===============
    job   status     cancelled_by  gpus  run     placement / event           cause
    ====  =========  ============  ====  ======  ==========================  ===============
    k1    oom                      2     1 h                                 oom
    k2    preempted                4     0.5 h                               preempted
    k3    cancelled  0             1     3 h                                 cancelled_admin
    k4    cancelled  root          2     1 h                                 cancelled_admin
    k5    cancelled  1234          1     1 h                                 cancelled
    k6    cancelled  (null)        8     0.25 h                              cancelled
    k7    completed                2     2 h                                 (none)
    k8    preempted                1     1 h     h1 GPU 0 [0, 1); XID 79     preempted
    ====  =========  ============  ====  ======  ==========================  ===============

    Slurm's sacct manual (JOB STATE CODES) prints ``CANCELLED by <uid>``; uid 0 is root.
    """
    ids = [f"k{i}" for i in range(1, 9)]
    jobs = pl.DataFrame(
        {
            "source": ["x"] * 8,
            "dataset": ["d"] * 8,
            "cluster": ["c"] * 8,
            "job_id": ids,
            "user": ["u1", "u1", "u2", "u2", "u3", "u3", "u3", "u4"],
            "gpus": [2.0, 4.0, 1.0, 2.0, 1.0, 8.0, 2.0, 1.0],
            "run_s": [1 * H, 0.5 * H, 3 * H, 1 * H, 1 * H, 0.25 * H, 2 * H, 1 * H],
            "status": [
                "oom",
                "preempted",
                "cancelled",
                "cancelled",
                "cancelled",
                "cancelled",
                "completed",
                "preempted",
            ],
            "cancelled_by": [None, None, "0", "root", "1234", None, None, None],
            "attempts": [1] * 8,
            "time_basis": ["absolute"] * 8,
        },
        schema_overrides={"attempts": pl.Int32},
    )
    placements = pl.DataFrame(
        {
            "source": ["x"],
            "dataset": ["d"],
            "cluster": ["c"],
            "job_id": ["k8"],
            "attempt": [0],
            "machine_id": ["h1"],
            "start_time": [at(0)],
            "end_time": [at(1)],
            "gpu_count": [1.0],
            "gpu_indices": [[0]],
        }
    )
    events = pl.DataFrame(
        {
            "source": ["x"],
            "dataset": ["ev"],
            "cluster": ["c"],
            "time": [at(0.5)],
            "host": ["h1"],
            "gpu_index": [0],
            "kind": ["xid"],
            "code": [79],
        },
        schema_overrides={"gpu_index": pl.Int16, "code": pl.Int64},
    )
    store = tmp_path / "status-store"
    with StoreTransaction(store) as tx:
        tx.write("jobs", jobs, source="x", dataset="d")
        tx.write("placements", placements, source="x", dataset="d")
        tx.write("events", events, source="x", dataset="ev")
    return store


def test_by_cause_oom_preempted_admin_cancel(status_store: Path) -> None:
    """Lost GPU-hours: oom k1 2 x 1 = 2; preempted k2 4 x 0.5 = 2 and k8 1 x 1 = 1 (the
    XID during k8 does not make it a device failure: the scheduler stopped it) = 3;
    cancelled_admin k3 1 x 3 = 3 (by 0) and k4 2 x 1 = 2 (by root) = 5; cancelled k5
    1 x 1 = 1 (by uid 1234) and k6 8 x 0.25 = 2 (nobody named) = 3. Lost 13 of
    2 + 2 + 3 + 2 + 1 + 2 + 4 + 1 = 17 GPU hours."""
    rows = analyze(status_store, "failures", "--by", "cause")
    got = {r["cause"]: (r["jobs"], r["lost_gpu_hours"]) for r in rows}
    assert got == {
        "oom": (1, 2.0),
        "preempted": (2, 3.0),
        "cancelled_admin": (2, 5.0),
        "cancelled": (2, 3.0),
    }
    assert [r["cause"] for r in rows] == ["oom", "preempted", "cancelled_admin", "cancelled"]
    share = {r["cause"]: (r["lost_share"], r["share_of_gpu_hours"]) for r in rows}
    assert share["cancelled_admin"] == pytest.approx((5 / 13, 5 / 17))
    assert share["preempted"] == pytest.approx((3 / 13, 3 / 17))


def test_status_mix_keeps_preempted_apart(status_store: Path) -> None:
    """Classes: failed = k1 (oom: 1 job, 2 GPU-h); cancelled = k3..k6 (4 jobs,
    3 + 2 + 1 + 2 = 8 h); preempted = k2, k8 (2 jobs, 3 h); completed = k7 (1 job, 4 h).
    --lost: failed 2, cancelled 8, preempted 3 of 17 -> lost share 13 / 17."""
    rows = {r["status_class"]: r for r in analyze(status_store, "failures")}
    assert {k: (r["jobs"], r["gpu_hours"]) for k, r in rows.items()} == {
        "failed": (1, 2.0),
        "cancelled": (4, 8.0),
        "preempted": (2, 3.0),
        "completed": (1, 4.0),
    }
    assert rows["preempted"]["job_share"] == pytest.approx(2 / 8)
    (lost,) = analyze(status_store, "failures", "--by", "vc", "--lost")
    assert (lost["failed_gpu_hours"], lost["cancelled_gpu_hours"]) == (2.0, 8.0)
    assert (lost["preempted_gpu_hours"], lost["gpu_hours"]) == (3.0, 17.0)
    assert lost["lost_share"] == pytest.approx(13 / 17)


def test_summary_rates_with_oom_and_preempted(status_store: Path) -> None:
    """All 8 jobs are final: completed 1/8, cancelled 4/8, failed (k1 oom) 1/8,
    preempted 2/8; preempted GPU time 3 of 17 h; nothing unfinished."""
    (row,) = analyze(status_store, "summary")
    assert (row["completed_rate"], row["cancelled_rate"]) == (1 / 8, 4 / 8)
    assert (row["failed_rate"], row["preempted_rate"]) == (1 / 8, 2 / 8)
    assert row["preempted_gpu_time_share"] == pytest.approx(3 / 17)
    assert row["preempted_gpu_job_share"] == pytest.approx(2 / 8)
    assert row["unfinished_jobs"] == 0


def test_by_cause_on_a_store_without_cancelled_by(status_store: Path) -> None:
    """A jobs table written before ``cancelled_by`` existed (the column absent): every
    cancellation is ``cancelled`` (k3..k6: 4 jobs, 8 GPU-h), none an error."""
    from gpu_trace.analyses.failures import by_cause
    from gpu_trace.analyses.inputs import Inputs

    inp = Inputs.from_store(status_store)
    rows = by_cause(inp.jobs.drop("cancelled_by"), inp.placements, inp.events).collect()
    got = {r["cause"]: (r["jobs"], r["lost_gpu_hours"]) for r in rows.iter_rows(named=True)}
    assert got["cancelled"] == (4, 8.0)
    assert "cancelled_admin" not in got


def test_mtbf_hand_store(hand_store: Path) -> None:
    """Exposure (GPU jobs): node-hours 1 + 2 + 2 x 0.5 + 1 + 3 + 4 + 1 = 13; GPU-hours 21.
    Node-attributed failures: 1 node_fail job + 3 device events (XID 79, ECC DBE, lost
    GPU; the XID 0 is not one) = 4. MTBF 13 / 4 = 3.25 node-hours, 21 / 4 = 5.25
    GPU-hours; 4 / 13 x 1000 and 4 / 21 x 1000 per 1000 hours."""
    (row,) = analyze(hand_store, "failures", "--mtbf")
    assert (row["node_fail_jobs"], row["device_events"], row["node_failures"]) == (1, 3, 4)
    assert row["node_hours"] == pytest.approx(13.0)
    assert row["gpu_hours"] == pytest.approx(21.0)
    assert row["mtbf_node_h"] == pytest.approx(3.25)
    assert row["mtbf_gpu_h"] == pytest.approx(5.25)
    assert row["failures_per_1k_node_h"] == pytest.approx(4000 / 13)
    assert row["failures_per_1k_gpu_h"] == pytest.approx(4000 / 21)


def test_by_user_and_size_hand_store(hand_store: Path) -> None:
    """--by user --lost: u1 lost j1 + j2 = 4 of 4 GPU-hours (failed); u2 lost j3 (4,
    failed) and j4 (4, cancelled) of 8; u3's timeout j6 = 4 failed of 4 + 3 + 2 = 9.
    --by size is the size-bucket breakdown (= --by gpus)."""
    rows = {r["user"]: r for r in analyze(hand_store, "failures", "--by", "user", "--lost")}
    assert (rows["u1"]["failed_gpu_hours"], rows["u1"]["lost_share"]) == (4.0, 1.0)
    assert (rows["u2"]["failed_gpu_hours"], rows["u2"]["cancelled_gpu_hours"]) == (4.0, 4.0)
    assert rows["u3"]["failed_gpu_hours"] == 4.0
    assert rows["u3"]["lost_share"] == pytest.approx(4 / 9)
    size = analyze(hand_store, "failures", "--by", "size", "--lost")
    assert size == analyze(hand_store, "failures", "--by", "gpus", "--lost")
    buckets = {r["size_bucket"]: r["failed_gpu_hours"] for r in size}
    # 1 GPU: j2 2 h + j6 4 h; 2 GPUs: j1 2 h; 5-8: j3 4 h; 3-4: j4 cancelled only
    assert buckets == {"1": 6.0, "2": 2.0, "3-4": 0.0, "5-8": 4.0}


def test_by_cause_and_mtbf_on_philly_fixture(tmp_path: Path) -> None:
    """Philly fixture (times in the job log are UTC-7, differences are what count):
    cancelled (Killed) 15001 16 GPUs x 7200 s, 31002 2 x 15600, 00100 8 x 60 ->
    146 880 GPU-s = 40.8 h; failed 00412 (no attempts) and 00077 (start unknown):
    no run time, 0 h; retries (earlier attempts of completed jobs, from placements):
    14199 8 GPUs x 74 s, 00001 2 x 360 + 2 x 540, 31001 1 x 900 = 3 292 GPU-s.
    No node_fail status and no events: MTBF undefined, rate 0. Node-hours = sum of
    nodes x run_s over GPU jobs = 3360 + 193263 + 2 x 7200 + 3600 + 15600 + 7500 + 60."""
    store = tmp_path / "store"
    result = runner.invoke(
        app, ["ingest", "philly", str(FIXTURES / "philly"), "--store", str(store)]
    )
    assert result.exit_code == 0, result.output
    rows = analyze(store, "failures", "--by", "cause")
    assert {r["cause"]: r["jobs"] for r in rows} == {"cancelled": 3, "job_failed": 2, "retry": 3}
    hours = {r["cause"]: r["lost_gpu_hours"] for r in rows}
    assert hours == pytest.approx({"cancelled": 146_880 / H, "job_failed": 0.0, "retry": 3_292 / H})
    (m,) = analyze(store, "failures", "--mtbf")
    assert m["node_hours"] == pytest.approx((3360 + 193263 + 14400 + 3600 + 15600 + 7500 + 60) / H)
    assert (m["node_failures"], m["mtbf_node_h"], m["failures_per_1k_node_h"]) == (0, None, 0.0)


def test_by_cause_and_mtbf_on_helios_fixture(tmp_path: Path) -> None:
    """Helios Earth: 7003 NODE_FAIL 16 GPUs x 600 s = 2.667 GPU-h; 7002 TIMEOUT is a CPU
    job (0 h); 7006 FAILED ran 0 s; 7005 CANCELLED 1 x 500 s. Exposure (GPU jobs 7001,
    7003, 7004, 7005, 7006): node-hours (3600 + 2 x 600 + 7200 + 500 + 0) / 3600,
    GPU-hours (8 x 3600 + 16 x 600 + 2 x 7200 + 500) / 3600; one failure. Venus has none."""
    store = tmp_path / "store"
    result = runner.invoke(
        app, ["ingest", "helios", str(FIXTURES / "helios" / "data"), "--store", str(store)]
    )
    assert result.exit_code == 0, result.output
    rows = analyze(store, "failures", "--by", "cause")
    earth = [r for r in rows if r["cluster"] == "earth"]
    assert [(r["cause"], r["jobs"]) for r in earth] == [
        ("node_fail", 1),
        ("timeout", 1),
        ("job_failed", 1),
        ("cancelled", 1),
    ]
    assert [r["lost_gpu_hours"] for r in earth] == pytest.approx([9600 / H, 0.0, 0.0, 500 / H])
    mt = {r["cluster"]: r for r in analyze(store, "failures", "--mtbf")}
    node_h = (3600 + 1200 + 7200 + 500) / H
    gpu_h = (28_800 + 9_600 + 14_400 + 500) / H
    assert mt["earth"]["node_hours"] == pytest.approx(node_h)
    assert mt["earth"]["mtbf_node_h"] == pytest.approx(node_h)
    assert mt["earth"]["mtbf_gpu_h"] == pytest.approx(gpu_h)
    assert mt["earth"]["failures_per_1k_node_h"] == pytest.approx(1000 / node_h)
    assert (mt["venus"]["node_failures"], mt["venus"]["mtbf_node_h"]) == (0, None)


def test_bad_by_is_one_line_error(hand_store: Path) -> None:
    result = runner.invoke(
        app, ["analyze", "failures", "--by", "colour", "--store", str(hand_store)]
    )
    assert result.exit_code == 2  # a usage mistake
    assert result.output.strip() == (
        "error: unknown --by value 'colour'; known: cause, gpus, size, user, vc, status, "
        "account, qos, partition"
    )
