"""``replay fidelity``'s Philly check runs where the policies differ (issue 27): hand-
worked mean JCTs of FIFO, QSSF, SJF and SRTF on one 8-GPU node, the cluster sized from
the jobs' demand (worked by hand), and "too idle to tell" instead of ok when every policy
gives the same value.

The published ordering is HeliosArtifact's Philly table (``framework/QSSF Service/plot/
result_plot.ipynb``): FIFO 86,072 s > QSSF 37,324 > SJF 34,272 > SRTF 30,683 (mean JCT).
Policies as Helios defines them (``policies/sjf.py``, ``qssf.py``, ``srtf.py``): SJF by
true duration, QSSF by estimated duration x GPUs, SRTF preemptive by true remaining time.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from gpu_trace.replay.fidelity import busy_setting, philly_check
from gpu_trace.store.parquet import StoreTransaction

T0 = datetime(2017, 10, 1, tzinfo=UTC)

# (user, submit s, run s, GPUs), input order. The check holds out the first 25 % of the
# jobs by submit time (int(8 x 0.25) = 2: jobs 0 and 1) to train QSSF's estimator; with
# under 200 training jobs a user's estimate is the mean log1p(run) of their training
# jobs, so user a's jobs are estimated at 100 s and user b's at 1,000 s.
JOBS = [
    ("a", 0, 100, 8),  # training
    ("b", 1, 1000, 8),  # training
    ("c", 10, 400, 8),  # J1: runs first
    ("b", 20, 300, 8),  # J2 (estimated 1,000 s)
    ("a", 20, 200, 8),  # J3 (estimated 100 s: QSSF's wrong guess puts it first)
    ("b", 20, 100, 8),  # J4 (estimated 1,000 s)
    ("c", 5000, 10, 8),  # J5, J6: alone, 10 s under every policy
    ("c", 6000, 10, 8),
]


def _store(tmp_path: Path, rows: list[tuple[str, float, float, float]]) -> Path:
    n = len(rows)
    jobs = pl.DataFrame(
        {
            "source": ["philly"] * n,
            "dataset": ["d"] * n,
            "cluster": ["philly"] * n,
            "job_id": [str(i) for i in range(n)],
            "user": [r[0] for r in rows],
            "vc": ["6214e9"] * n,
            "name": [f"job{i}" for i in range(n)],
            "gpus": [float(r[3]) for r in rows],
            "submit_time": [T0 + timedelta(seconds=r[1]) for r in rows],
            "start_time": [T0 + timedelta(seconds=r[1]) for r in rows],
            "end_time": [T0 + timedelta(seconds=r[1] + r[2]) for r in rows],
            "run_s": [float(r[2]) for r in rows],
            "status": ["completed"] * n,
            "time_basis": ["absolute"] * n,
        }
    )
    store = tmp_path / "store"
    with StoreTransaction(store) as tx:
        tx.write("jobs", jobs, source="philly", dataset="d")
    return store


def test_philly_ordering_on_one_busy_node_is_worked_by_hand(tmp_path: Path) -> None:
    # One 8-GPU node ("8x8": 8 GPUs in nodes of 8), every job takes it whole. J1 runs 10-410; J2, J3, J4 wait.
    # FIFO: J2 410-710, J3 710-910, J4 910-1010; JCT 400, 690, 890, 990, 10, 10.
    # QSSF (a: 100 s before b: 1,000 s, ties in input order): J3 410-610, J2 610-910,
    #   J4 910-1010; JCT 400, 890, 590, 990, 10, 10.
    # SJF (true 100 < 200 < 300): J4 410-510, J3 510-710, J2 710-1010;
    #   JCT 400, 990, 690, 490, 10, 10.
    # SRTF: at 20 J1 has 390 s left, J4 100: J1 stops; J4 20-120, J3 120-320,
    #   J2 320-620 (300 < 390), J1 620-1010; JCT 1000, 600, 300, 100, 10, 10.
    rows = philly_check(_store(tmp_path, JOBS), cluster="8x8")
    got = {r.policy: r.ours for r in rows}
    assert got == {
        "fifo": round(2990 / 6, 1),
        "qssf": round(2890 / 6, 1),
        "sjf": round(2590 / 6, 1),
        "srtf": round(2020 / 6, 1),
    }
    assert {r.status for r in rows} == {"ok"}
    assert rows[0].note == "ordering holds"


def test_every_policy_at_one_value_is_too_idle_never_ok(tmp_path: Path) -> None:
    # Eight 8-GPU nodes ("64x8"): every job starts on arrival under every policy, JCT = run time:
    # (400 + 300 + 200 + 100 + 10 + 10) / 6 = 170 s for all four.
    rows = philly_check(_store(tmp_path, JOBS), cluster="64x8")
    assert {r.ours for r in rows} == {170.0}
    assert {r.status for r in rows} == {"OUT"}
    assert "all 4 policies gave 170.0 s: the cluster is too idle to tell them apart" in (
        rows[0].note
    )


def test_the_default_cluster_is_sized_from_the_replayed_jobs_demand(tmp_path: Path) -> None:
    # Replayed jobs J1-J6 (the two training jobs are not sized for). Had none waited:
    # 8 GPUs 10-20, 32 for 20-120, 24 for 120-220, 16 for 220-320, 8 for 320-410, 8 for
    # 10 s twice: 420 s with a job running; 8 GPUs 120 s (29 %), <= 16 GPUs 220 s (52 %),
    # <= 24 GPUs 320 s (76 %), <= 32 GPUs 420 s: 90 % needs 32 GPUs = 4 nodes of 8.
    # Offered load: 8 x (400 + 300 + 200 + 100 + 10 + 10) = 8,160 GPU-s over 32 GPUs x
    # (6,000 - 10) s = 0.043; arrivals 0.9 / 0.0426 = 21.1x faster: J2-J4 at 0.47 s after
    # J1, J5 at 236 s, J6 at 283 s. Four nodes for the four jobs of the burst, and J5, J6
    # come after J3 and J4 have ended: no job waits, every JCT is its run time, the same
    # 170 s under every policy: too idle, said so, not ok.
    rows = philly_check(_store(tmp_path, JOBS))
    assert rows[0].note.startswith(
        "32 GPUs (4 nodes of 8) sized from demand: had no job waited, the jobs would hold "
        "<= 32 GPUs 90% of the time any runs (peak 32, largest job 8); offered load 0.043, "
        "arrivals 21.1x faster to reach 0.9"
    )
    assert {r.status for r in rows} == {"OUT"} and {r.ours for r in rows} == {170.0}
    assert "too idle to tell them apart" in rows[0].note


@pytest.mark.parametrize(
    ("trace_gpus", "cluster", "speedup"),
    [(None, "24x8", 10.4), (64, "24x8", 10.4), (16, "from-trace", 6.9)],
)
def test_busy_setting_by_hand(trace_gpus: int | None, cluster: str, speedup: float) -> None:
    # Had none waited: 16 GPUs 0-50, 20 for 50-100, 4 for 100-150, 8 for 1000-1010: 160 s
    # with a job running; <= 4 GPUs 50 s (31 %), <= 8 60 s (38 %), <= 16 110 s (69 %),
    # <= 20 160 s: 90 % needs 20 GPUs -> 3 nodes of 8 (24 GPUs). A trace cluster of 16
    # GPUs is no larger: it is kept. Offered load: 800 + 800 + 400 + 80 = 2,080 GPU-s
    # over 1,000 s of arrivals: on 24 GPUs 0.087 (0.9 / 0.0867 = 10.4x faster), on 16
    # GPUs 0.13 (6.9x).
    jobs = pl.DataFrame(
        {
            "submit_time": [T0 + timedelta(seconds=s) for s in (0, 0, 50, 1000)],
            "run_s": [100.0, 100.0, 100.0, 10.0],
            "gpus": [8.0, 8.0, 4.0, 8.0],
        }
    )
    got = busy_setting(jobs, trace_gpus)
    assert (got.cluster, round(got.load, 1)) == (cluster, speedup)
    assert "<= 20 GPUs 90% of the time any runs (peak 20, largest job 8)" in got.note
