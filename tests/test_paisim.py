"""The PAI 2020 simulator's own job CSV in and out, and its whole job set replayed.

Source of truth: alibaba/clusterdata ``cluster-trace-gpu-v2020/simulator`` (commit
7a6c496e): ``simulator.py`` reads the CSV with ``csv.DictReader`` (columns by name) and
``set_job_list_arrival_time`` re-times arrivals when ``arrival_rate`` is set: jobs sorted
by ``(submit_time, job_id)`` (``utils._add_job`` turns digit-only ids into ints, so they
compare as numbers) and the i-th gets ``(i // arrival_rate) * interval``, interval 60 by
default. ``num_gpu`` / ``num_cpu`` are the job's totals; a job with ``num_gpu`` 0 is a
CPU-only job the simulator schedules on CPUs (``resource = [num_gpu, num_cpu]``).
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpu_trace.cli import app
from gpu_trace.store.catalog import connect

runner = CliRunner()

# Column order as the simulator's 100K trace files list them does not matter
# (DictReader); this one follows the order.
SIM_CSV = """job_id,user,num_gpu,num_cpu,num_inst,submit_time,duration,gpu_type
9,u1,1,4,1,5,100,V100
10,u2,0,8,1,5,50,CPU
3,u1,1,2,2,0,30,T4
"""


def _ingest(tmp_path: Path, *extra: str) -> Path:
    src = tmp_path / "pai_sim.csv"
    src.write_text(SIM_CSV, encoding="utf-8")
    store = tmp_path / "store"
    out = runner.invoke(app, ["ingest", "paisim", str(src), "--store", str(store), *extra])
    assert out.exit_code == 0, out.output
    return store


def _submits(store: Path) -> dict[str, float]:
    rows = (
        connect(store)
        .execute("SELECT job_id, epoch(submit_time) FROM jobs WHERE source = 'paisim'")
        .fetchall()
    )
    return {j: float(t) for j, t in rows}


def test_file_times_kept_without_arrival_rate(tmp_path: Path) -> None:
    store = _ingest(tmp_path)
    assert _submits(store) == {"9": 5.0, "10": 5.0, "3": 0.0}
    got = connect(store).execute("SELECT job_id, gpus, cpus, run_s, user FROM jobs").fetchall()
    assert sorted(got) == [
        ("10", 0.0, 8.0, 50.0, "u2"),
        ("3", 1.0, 2.0, 30.0, "u1"),
        ("9", 1.0, 4.0, 100.0, "u1"),
    ]


def test_arrival_rate_retimes_like_the_simulator(tmp_path: Path) -> None:
    # Order by (submit_time, job_id as a number): 3 (t=0), 9 (t=5), 10 (t=5).
    # arrival_rate 2, interval 60: i = 0, 1 -> 0 s; i = 2 -> (2 // 2) * 60 = 60 s.
    store = _ingest(tmp_path, "--arrival-rate", "2")
    assert _submits(store) == {"3": 0.0, "9": 0.0, "10": 60.0}


def test_arrival_interval_option(tmp_path: Path) -> None:
    # rate 1, interval 30: the i-th job arrives at 30 i: 3 -> 0, 9 -> 30, 10 -> 60.
    store = _ingest(tmp_path, "--arrival-rate", "1", "--arrival-interval-s", "30")
    assert _submits(store) == {"3": 0.0, "9": 30.0, "10": 60.0}


@pytest.mark.parametrize("cluster", ["4x4,cpu=16", "6500x6500,cpu=150930"])
def test_cpu_only_jobs_replay_on_the_cpu_dimension(tmp_path: Path, cluster: str) -> None:
    # The second cluster is the simulator's README run: 6,500 GPUs on one node
    # (log name "6500g_1n") and NUM_CPUS = round(23.22 * 6500) = 150,930 cores
    # (run_simulator_fifo.py); nothing waits there either.
    store = _ingest(tmp_path)
    # One node of 4 GPUs and 16 cores, FIFO, file times (relative to the first, t=0):
    # job 3 (1 GPU, 2 cores) at 0: 0..30 (14 cores left).
    # job 9 (1 GPU, 4 cores) at 5: 5..105 (10 left); job 10 (CPU-only, 8 cores) at 5:
    # 5..55 (2 left). Every job is scored: JCT 30, 100, 50 -> mean 60.
    out = runner.invoke(
        app,
        [
            *("replay", "run", "-s", "paisim", "--policy", "fifo", "--gpus", cluster),
            *("--run-id", "cpu", "--store", str(store), "--out", str(tmp_path / "o")),
        ],
    )
    assert out.exit_code == 0, out.output
    db = connect(store)
    got = {
        j: (s, f)
        for j, s, f in db.execute(
            "SELECT job_id, start_time_s, finish_time_s FROM replay_jobs WHERE run_id = 'cpu'"
        ).fetchall()
    }
    assert got == {"3": (0.0, 30.0), "9": (5.0, 105.0), "10": (5.0, 55.0)}
    (jct,) = db.execute("SELECT jct_mean_s FROM replay_runs WHERE run_id = 'cpu'").fetchone()
    assert jct == 60.0


def test_cpu_only_job_waits_for_cores(tmp_path: Path) -> None:
    store = _ingest(tmp_path)
    # 8 cores: job 3 (2 cores) 0..30 (6 left); job 9 (4 cores) at 5: 5..105 (2 left);
    # job 10 (8 cores) at 5 waits for 8 free: at 30 job 3 ends (4 free), at 105 job 9
    # ends (8 free) -> 105..155.
    out = runner.invoke(
        app,
        [
            *("replay", "run", "-s", "paisim", "--policy", "fifo-skip", "--gpus", "4x4,cpu=8"),
            *("--run-id", "cpu8", "--store", str(store), "--out", str(tmp_path / "o")),
        ],
    )
    assert out.exit_code == 0, out.output
    got = connect(store).execute(
        "SELECT job_id, start_time_s, finish_time_s FROM replay_jobs WHERE run_id = 'cpu8'"
    )
    assert sorted(got.fetchall()) == [("10", 105.0, 155.0), ("3", 0.0, 30.0), ("9", 5.0, 105.0)]


def test_export_writes_the_simulator_csv(tmp_path: Path) -> None:
    store = _ingest(tmp_path)
    back = tmp_path / "back.csv"
    out = runner.invoke(
        app,
        [
            "replay",
            "export",
            "-s",
            "paisim",
            "--to",
            "paisim",
            "-o",
            str(back),
            "--store",
            str(store),
        ],
    )
    assert out.exit_code == 0, out.output
    with back.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    # The fields the simulator reads (utils._add_job), same-second jobs in file order.
    assert [
        (
            r["job_id"],
            r["user"],
            float(r["num_gpu"]),
            float(r["num_cpu"]),
            r["submit_time"],
            float(r["duration"]),
        )
        for r in rows
    ] == [
        ("3", "u1", 1.0, 2.0, "0", 30.0),
        ("9", "u1", 1.0, 4.0, "5", 100.0),
        ("10", "u2", 0.0, 8.0, "5", 50.0),
    ]


def test_missing_column_is_one_error_line(tmp_path: Path) -> None:
    src = tmp_path / "bad.csv"
    src.write_text("job_id,num_gpu,submit_time,duration\n1,1,0,10\n", encoding="utf-8")
    out = runner.invoke(app, ["ingest", "paisim", str(src), "--store", str(tmp_path / "s")])
    assert out.exit_code != 0
    assert "num_cpu" in out.output and "Traceback" not in out.output


def test_negative_duration_quarantined(tmp_path: Path) -> None:
    src = tmp_path / "neg.csv"
    src.write_text(
        "job_id,num_gpu,num_cpu,submit_time,duration\n1,1,2,0,10\n2,1,2,0,-5\n", encoding="utf-8"
    )
    store = tmp_path / "s"
    out = runner.invoke(app, ["ingest", "paisim", str(src), "--store", str(store)])
    assert out.exit_code == 0, out.output
    assert "read 2 = written 1 + quarantined 1" in out.output


def test_cpu_only_jobs_scored_in_a_direct_replay() -> None:
    # The same three jobs as a canonical frame (no store), one node of 4 GPUs and 16
    # cores, FIFO + consolidate: as in test_cpu_only_jobs_replay_on_the_cpu_dimension, job 10
    # (CPU-only, 8 cores) runs 5..55 next to the GPU jobs; nothing is skipped.
    import polars as pl

    from gpu_trace.replay import ReplayConfig, replay
    from gpu_trace.replay.cluster import parse_spec

    frame = pl.DataFrame(
        {
            "job_id": ["3", "9", "10"],
            "submit_time": [0, 5, 5],
            "run_s": [30.0, 100.0, 50.0],
            "gpus": [1.0, 1.0, 0.0],
            "cpus": [2.0, 4.0, 8.0],
        }
    ).with_columns(pl.from_epoch("submit_time", time_unit="s").dt.replace_time_zone("UTC"))
    cfg = ReplayConfig(source="t", estimator="oracle")
    jobs = replay(frame, parse_spec("4x4,cpu=16"), cfg).jobs
    got = {r["job_id"]: (r["start_time_s"], r["finish_time_s"]) for r in jobs.iter_rows(named=True)}
    assert got == {"3": (0.0, 30.0), "9": (5.0, 105.0), "10": (5.0, 55.0)}


def test_arrival_rate_zero_is_a_usage_error(tmp_path: Path) -> None:
    # The simulator treats a negative or missing rate as "keep the file's times"; 0 would
    # divide by zero there (i // 0), so it is refused here with one line.
    src = tmp_path / "pai_sim.csv"
    src.write_text(SIM_CSV, encoding="utf-8")
    out = runner.invoke(
        app, ["ingest", "paisim", str(src), "--store", str(tmp_path / "s"), "--arrival-rate", "0"]
    )
    assert out.exit_code != 0
    assert "--arrival-rate 0" in out.output and "Traceback" not in out.output
