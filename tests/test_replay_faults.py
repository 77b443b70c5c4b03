"""Node failures in replay: hand-computed checkpoint restarts, retries, trace-derived
rates, and invariants (nothing runs on a failed node, GPU-seconds conserved,
determinism per seed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from gpu_trace.analyses import failures as fa
from gpu_trace.cli import app
from gpu_trace.errors import GpuTraceError
from gpu_trace.replay import ReplayConfig, replay
from gpu_trace.replay.cluster import parse_spec
from gpu_trace.replay.faults import from_trace, parse_duration, parse_faults
from gpu_trace.replay.synthetic import pai_like_jobs
from gpu_trace.store.scan import scan
from tests.replay_frames import jobs_frame as shared_frame

runner = CliRunner()


def jobs_frame(rows: list[tuple[float, float, float]]) -> pl.DataFrame:
    """(submit offset s, run_s, gpus) rows as jobs of three users u0, u1, u2."""
    return shared_frame(
        rows, users=[f"u{i % 3}" for i in range(len(rows))], vcs=["vc0"] * len(rows)
    )


def run_row(result: Any) -> dict[str, Any]:
    row: dict[str, Any] = result.runs.row(0, named=True)
    return row


def test_failure_mid_job_restarts_from_last_checkpoint_hand_computed() -> None:
    # two 1-GPU nodes; j0: 1 GPU, 7200 s, starts at 0 on node 0. Node 0 fails at 100 min
    # = 6000 s; checkpoints every 30 min of progress: 1800, 3600, 5400 -> the last one is
    # at 5400 s, so 6000 - 5400 = 600 s of work are lost. The job restarts at once on
    # node 1, first restoring (120 s), then the 7200 - 5400 = 1800 s left:
    # finish = 6000 + 120 + 1800 = 7920 s.
    cfg = ReplayConfig(source="t", faults="fail=100m@0,mttr=1h", checkpoint_s=1800, restore_s=120)
    r = replay(jobs_frame([(0, 7200, 1)]), parse_spec("2x1"), cfg)
    job = r.jobs.row(0, named=True)
    assert job["outcome"] == "finished"
    assert (job["start_time_s"], job["finish_time_s"]) == (0.0, 7920.0)
    assert (job["failures"], job["attempts"]) == (1, 2)
    row = run_row(r)
    assert row["node_failures"] == 1 and row["jobs_failed"] == 0
    assert row["lost_gpu_h_failure"] == pytest.approx(600 / 3600)
    assert row["lost_gpu_h_restore"] == pytest.approx(120 / 3600)
    assert row["lost_gpu_h_preemption"] == 0.0
    # consumed = 6000 (first run) + 120 + 1800 = 7920 GPU-s; useful = 7200
    assert row["consumed_gpu_h"] == pytest.approx(7920 / 3600)
    assert row["useful_gpu_h"] == pytest.approx(2.0)
    assert row["goodput_ratio"] == pytest.approx(7200 / 7920)
    events = r.extra["fault_events"]
    # the repair at 6000 + 3600 s comes after the work ended: logged, not in the series
    assert events.rows() == [(6000.0, 0, "failure", 1), (9600.0, 0, "repair", 0)]
    assert r.timeseries["time_s"].max() < 7920


def test_no_checkpoint_loses_all_work_and_node_is_out_until_repaired() -> None:
    # one 1-GPU node: j0 1000 s; the node fails at 400 s, repaired 300 s later. No
    # checkpoints: all 400 s are lost, the job waits for the node (nothing else to run
    # on) and reruns 1000 s from 700: finish 1700.
    cfg = ReplayConfig(source="t", faults="fail=400@0,mttr=300")
    r = replay(jobs_frame([(0, 1000, 1)]), parse_spec("1x1"), cfg)
    assert r.jobs.row(0, named=True)["finish_time_s"] == 1700.0
    row = run_row(r)
    assert row["lost_gpu_h_failure"] == pytest.approx(400 / 3600)
    assert row["goodput_ratio"] == pytest.approx(1000 / 1400)
    # the time series shows the node out of service for [400, 700)
    ts = r.timeseries
    down = ts.filter((pl.col("time_s") >= 400) & (pl.col("time_s") + pl.col("bin_s") <= 700))
    assert down.height and (down["down_gpus"] == 1.0).all()
    assert (down["allocated_gpus"] == 0.0).all()


def test_retries_exhausted_ends_failed() -> None:
    # one node; j0 (1000 s) and j1 (50 s) arrive at 0, j0 first. The node fails at 300 s
    # (j0's first failure) and is back at 400. A killed job is requeued like a
    # resubmission, behind j1: j1 runs 400 -> 450, j0 restarts at 450 and dies again at
    # 600 (150 s into the rerun). --retries 1: the second failure ends it failed; all
    # 300 + 150 GPU-s of its work are lost.
    cfg = ReplayConfig(source="t", faults="fail=300@0,fail=600@0,mttr=100", retries=1)
    r = replay(jobs_frame([(0, 1000, 1), (0, 50, 1)]), parse_spec("1x1"), cfg)
    jobs = {x["job_id"]: x for x in r.jobs.iter_rows(named=True)}
    assert jobs["j0"]["outcome"] == "failed"
    assert jobs["j0"]["finish_time_s"] is None
    assert jobs["j0"]["failures"] == 2
    assert (jobs["j1"]["outcome"], jobs["j1"]["finish_time_s"]) == ("finished", 450.0)
    assert jobs["j0"]["attempts"] == 2
    row = run_row(r)
    assert row["jobs_failed"] == 1
    assert row["lost_gpu_h_failure"] == pytest.approx(450 / 3600)
    assert row["useful_gpu_h"] == pytest.approx(50 / 3600)
    assert row["consumed_gpu_h"] == pytest.approx(500 / 3600)
    assert row["goodput_ratio"] == pytest.approx(50 / 500)


def test_parse_faults_and_durations() -> None:
    assert parse_duration("30m", "x") == 1800.0
    assert parse_duration("50000h", "x") == 50000 * 3600.0
    assert parse_duration("1.5d", "x") == 1.5 * 86400
    assert parse_faults("mtbf=50000h,mttr=2h") == (
        "given",
        {"mtbf": 1.8e8, "mttr": 7200.0},
        [],
    )
    assert parse_faults("trace,mttr=4h") == ("trace", {"mttr": 14400.0}, [])
    assert parse_faults("fail=5m@3,fail=1m@0")[2] == [(60.0, 0), (300.0, 3)]
    for bad in ("mtbf=soon", "mttr=2h", "fail=5m", "weird", "mtbf=0"):
        with pytest.raises(GpuTraceError, match="--faults"):
            parse_faults(bad)


def test_rates_from_trace_hand_computed(tmp_path: Path) -> None:
    # exposure: j0 1 node x 100 h + j1 2 nodes x 50 h = 200 node-hours; failures: j1
    # ended node_fail + one XID 79 event = 2 -> MTBF 100 h per node
    empty = tmp_path / "empty"
    jobs = pl.concat(
        [
            scan(empty, "jobs").collect(),
            pl.DataFrame(
                {
                    "source": ["s", "s"],
                    "cluster": ["c", "c"],
                    "status": ["completed", "node_fail"],
                    "gpus": [8.0, 16.0],
                    "nodes": [1, 2],
                    "run_s": [100 * 3600.0, 50 * 3600.0],
                }
            ),
        ],
        how="diagonal_relaxed",
    )
    events = pl.concat(
        [
            scan(empty, "events").collect(),
            pl.DataFrame({"source": ["s"], "cluster": ["c"], "kind": ["xid"], "code": [79]}),
        ],
        how="diagonal_relaxed",
    )
    summary = fa.mtbf(jobs.lazy(), events.lazy(), scan(empty, "gpu_samples")).collect()
    model = from_trace(summary, None)
    assert model.mtbf_s == pytest.approx(100 * 3600.0)
    assert model.mttr_s == 7200.0
    assert dict(model.derived)["node_failures"] == 2
    with pytest.raises(GpuTraceError, match="no node failures"):
        from_trace(summary.head(0), None)


def test_seeded_failures_are_deterministic_per_seed() -> None:
    jobs = pai_like_jobs(400, cluster_gpus=64, seed=3)
    spec = parse_spec("64x8")

    def go(seed: int) -> Any:
        cfg = ReplayConfig(
            source="t", faults="mtbf=200h,mttr=2h", checkpoint_s=1800, restore_s=60, seed=seed
        )
        return replay(jobs, spec, cfg)

    a, b, c = go(1), go(1), go(2)
    assert a.extra["fault_events"].height > 0
    assert a.extra["fault_events"].equals(b.extra["fault_events"])
    assert a.jobs.equals(b.jobs)
    assert not a.extra["fault_events"].equals(c.extra["fault_events"])


@st.composite
def fault_cases(draw: st.DrawFn) -> tuple[list[tuple[float, float, float]], str, str, float, float]:
    n = draw(st.integers(1, 12))
    rows = [
        (
            float(draw(st.integers(0, 300))),
            float(draw(st.integers(1, 400))),
            float(draw(st.sampled_from([1, 2, 4]))),
        )
        for _ in range(n)
    ]
    k = draw(st.integers(0, 6))
    fails = [f"fail={draw(st.integers(0, 900))}@{draw(st.integers(0, 2))}" for _ in range(k)]
    mttr = draw(st.integers(1, 200))
    spec = ",".join([*fails, f"mttr={mttr}"]) if fails else f"mtbf=300,mttr={mttr}"
    sched = draw(st.sampled_from(["fifo", "srtf", "las"]))
    return rows, spec, sched, float(draw(st.integers(0, 100))), float(draw(st.integers(0, 30)))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fault_cases())
def test_invariants_under_failures(case: Any) -> None:
    rows, faults, sched, ckpt, restore = case
    cfg = ReplayConfig(
        source="t",
        scheduler=sched,
        faults=faults,
        checkpoint_s=ckpt,
        restore_s=restore,
        retries=2,
        seed=7,
    )
    r = replay(jobs_frame(rows), parse_spec("12x4"), cfg, record_log=True)
    ev = r.extra["fault_events"]
    # down intervals per node from the event log
    down: dict[int, list[tuple[float, float]]] = {}
    open_at: dict[int, float] = {}
    for t, node, kind, _ in ev.iter_rows():
        if kind == "failure":
            open_at[node] = t
        else:
            down.setdefault(node, []).append((open_at.pop(node), t))
    for node, t in open_at.items():
        down.setdefault(node, []).append((t, float("inf")))
    consumed = 0.0
    started: dict[int, float] = {}
    ids = r.engine.w.frame["job_id"].to_list()  # engine index -> input row "j<i>"
    gpus = [rows[int(i[1:])][2] for i in ids]
    for t, what, j, parts in r.engine.log:
        if what == "start":
            started[j] = t
            for n, _, _ in parts:
                assert not any(a <= t < b for a, b in down.get(n, [])), (t, n, down)
        else:
            consumed += (t - started.pop(j)) * gpus[j]
    assert not started  # every job finished or failed
    done = r.jobs.filter(pl.col("outcome") == "finished")["job_id"].to_list()
    assert set(r.jobs["outcome"].to_list()) <= {"finished", "failed"}
    useful = sum(rows[int(i[1:])][1] * rows[int(i[1:])][2] for i in done)
    row = run_row(r)
    lost = row["lost_gpu_h_failure"] + row["lost_gpu_h_preemption"] + row["lost_gpu_h_restore"]
    assert row["consumed_gpu_h"] * 3600 == pytest.approx(consumed, abs=1e-6)
    assert row["useful_gpu_h"] * 3600 == pytest.approx(useful, abs=1e-6)
    assert (useful / 3600 + lost) == pytest.approx(row["consumed_gpu_h"], abs=1e-9)
    assert min(row["lost_gpu_h_failure"], row["lost_gpu_h_restore"]) >= 0
    assert sum(r.jobs["failures"].to_list()) == sum(ev["jobs_killed"].to_list())


def test_cli_faults_and_power_write_columns_and_event_log(store_copy: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = runner.invoke(
        app,
        [
            "replay", "run", "--source", "openb", "--store", str(store_copy), "--gpus", "16x8",
            "--faults", "mtbf=20h,mttr=1h", "--checkpoint", "10m", "--restore-s", "60",
            "--power", "gpu-model", "--out", str(out), "--seed", "5",
            "--power-off", "idle=30m,boot=5m,reserve=2",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    runs = scan(store_copy, "replay_runs").collect()
    row = runs.row(0, named=True)
    assert row["energy_kwh"] > 0 and 0 < row["goodput_ratio"] <= 1
    assert row["energy_saved_kwh"] is not None and row["node_boots"] >= 0
    assert "goodput_ratio" in result.stdout
    log = pl.read_csv(out / "fault_events.csv")
    assert log.columns == ["time_s", "node", "event", "jobs_killed"]
    assert row["node_failures"] == log.filter(pl.col("event") == "failure").height
    ts = scan(store_copy, "replay_timeseries").collect()
    assert (ts["power_w"] > 0).all()


def test_cli_bad_faults_is_one_line_error(store_copy: Path) -> None:
    for spec, want, code in (
        ("mtbf=often", "is not a duration", 2),  # a usage mistake
        ("trace", "no node failures", 1),  # the store's data
    ):
        result = runner.invoke(
            app,
            ["replay", "run", "--source", "openb", "--store", str(store_copy),
             "--gpus", "16x8", "--faults", spec],
        )  # fmt: skip
        assert result.exit_code == code
        assert want in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_report_shows_failures_and_energy_of_a_faulted_run(
    store_copy: Path, tmp_path: Path
) -> None:
    """The replay page carries a failures-and-energy table with the run's own values
    (read back from replay_runs) and a cluster-power chart."""
    result = runner.invoke(
        app,
        [
            "replay", "run", "--source", "openb", "--store", str(store_copy), "--gpus", "16x8",
            "--faults", "mtbf=20h,mttr=1h", "--checkpoint", "10m", "--power", "gpu-model",
            "--seed", "5",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    row = scan(store_copy, "replay_runs").collect().row(0, named=True)
    site = tmp_path / "site"
    built = runner.invoke(
        app, ["report", "--store", str(store_copy), "--out", str(site), "--replay", "all"]
    )
    assert built.exit_code == 0, built.output
    html = "".join(p.read_text() for p in site.glob("*.html"))
    assert "Failures and energy" in html and "Cluster power over time per run" in html
    assert f"<td>{row['node_failures']:,}</td>" in html
    assert f"{row['energy_kwh']:,.1f}" in html
