"""Side by side with the PAI 2020 simulator (issue 27): timing and job-by-job agreement.

:func:`side_by_side` (the bench case ``replay_paisim_side_20k``) writes the input
(``bench/paisim_trace.py``), times our two commands as separate processes (``gpu-trace
ingest paisim FILE --arrival-rate 1000`` then ``gpu-trace replay run --source paisim
--gpus 6500x6500,cpu=150930`` with ``fifo-skip`` and ``sjf``: wall and CPU seconds
summed, start-up included, peak RSS the larger of the two, all from ``wait4``) and,
when ``PAI_SIM`` names the simulator's folder, the simulator the same way
(``bench/paisim_driver.py`` under ``PAI_SIM_PYTHON``, a command line, default
``python3``), then compares every job.

It also times what no work of ours can go below (``startup_floor``): a process that only
imports the libraries every command loads (polars, pyarrow, numpy, typer, rich), best of
three. Twice that (two commands) against the simulator's CPU seconds is the highest
speed-up any amount of engine work could show (``ceiling_speedup_cpu``).

``python -m bench.paisim_side OUR_RUN_DIR SIM_JOBS_CSV`` joins our run's
``replay_jobs.parquet`` (``replay run --out``) with the simulator's per-job results
(``bench/paisim_driver.py``: ``job_id, submit_time, duration, jct``, the fields of its
``JobHistory.job_done_list``; its ``jct`` is completion minus re-timed submit, so its
finish time is ``submit_time + jct``) on ``job_id`` and prints one JSON line: jobs on
each side, how many have the same arrival and the same finish time, mean JCTs, and the
first differing jobs.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import tempfile
from pathlib import Path

import polars as pl

from bench.child import timed

RUNS = (("fifo-skip", "fifo"), ("sjf", "sjf"))
"""(our policy, the simulator's): its FIFO scans without blocking (= our fifo-skip)."""
CLUSTER = "6500x6500,cpu=150930"
"""Its README run: one node of 6,500 GPUs and round(23.22 x 6,500) cores."""
STACK = "import polars, pyarrow.parquet, numpy, typer, rich.console"
"""The libraries both commands import before they do anything of their own."""


def startup_floor(env: dict[str, str]) -> dict[str, float]:
    """CPU and wall seconds of a process that only imports :data:`STACK`, best of three
    (the same ``wait4`` accounting as our commands; the command line's one-BLAS-thread
    default set as it sets it).
    """
    env = {"OPENBLAS_NUM_THREADS": "1", **env}
    runs = [timed([sys.executable, "-c", STACK], env) for _ in range(3)]
    return {
        "cpu_s": min(float(r["cpu_s"]) for r in runs),
        "wall_s": min(float(r["wall_s"]) for r in runs),
    }


def compare(ours_dir: Path, sim_jobs: Path) -> dict[str, object]:
    """Agreement of our run in ``ours_dir`` with the simulator's ``sim_jobs``."""
    ours = pl.read_parquet(ours_dir / "replay_jobs.parquet").select(
        pl.col("job_id").cast(pl.Int64),
        "outcome",
        pl.col("arrival_time_s").alias("arrival"),
        pl.col("finish_time_s").alias("finish"),
        pl.col("jct_s").alias("jct"),
    )
    sim = pl.read_csv(sim_jobs).select(
        "job_id",
        pl.col("submit_time").cast(pl.Float64).alias("sim_arrival"),
        (pl.col("submit_time") + pl.col("jct")).cast(pl.Float64).alias("sim_finish"),
        pl.col("jct").cast(pl.Float64).alias("sim_jct"),
    )
    both = ours.join(sim, on="job_id", how="full", coalesce=True).sort("job_id")
    same_arrival = (both["arrival"] == both["sim_arrival"]).fill_null(False)
    same_finish = (both["finish"] == both["sim_finish"]).fill_null(False)
    diff = both.filter(~(same_arrival & same_finish))
    return {
        "jobs_ours": ours.height,
        "jobs_sim": sim.height,
        "ours_outcomes": dict(ours.group_by("outcome").len().sort("outcome").iter_rows()),
        "same_arrival": int(same_arrival.sum()),
        "same_finish": int((same_arrival & same_finish).sum()),
        "ours_jct_mean_s": round(float(ours["jct"].mean()), 2),  # type: ignore[arg-type]
        "sim_jct_mean_s": round(float(sim["sim_jct"].mean()), 2),  # type: ignore[arg-type]
        "first_diffs": diff.head(3).to_dicts(),
    }


def skip_reason() -> str | None:
    """Why the simulator cannot be run here (None when it can)."""
    sim = os.environ.get("PAI_SIM")
    if not sim:
        return "PAI_SIM is not set (path of alibaba/clusterdata cluster-trace-gpu-v2020/simulator)"
    if not (Path(sim) / "simulator.py").is_file():
        return f"PAI_SIM={sim} has no simulator.py"
    return None


def side_by_side(jobs: int = 20_000) -> dict[str, object]:
    """The bench case: see the module docstring."""
    gt = [sys.executable, "-m", "gpu_trace"]
    env = {k: v for k, v in os.environ.items() if k != "GPU_TRACE_FSYNC"}  # a user's commit
    out: dict[str, object] = {"load_before": os.getloadavg()[0], "jobs": jobs}
    floor = startup_floor(env)
    out["startup_floor"] = floor
    reason = skip_reason()
    if reason:
        out["simulator"] = reason
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        csv = t / "pai_jobs.csv"
        from bench.paisim_trace import write

        write(csv, jobs)
        store = t / "store"
        store.mkdir()
        ingest = timed(
            [*gt, "ingest", "paisim", str(csv), "--arrival-rate", "1000", "--store", str(store)],
            env,
        )
        for ours, theirs in RUNS:
            run = timed(
                [
                    *gt,
                    "replay",
                    "run",
                    "--source",
                    "paisim",
                    "--store",
                    str(store),
                    "--policy",
                    ours,
                    "--gpus",
                    CLUSTER,
                    "--out",
                    str(t / ours),
                ],
                env,
            )
            row: dict[str, object] = {
                "ours_ingest_wall_s": ingest["wall_s"],
                "ours_ingest_cpu_s": ingest["cpu_s"],
                "ours_replay_wall_s": run["wall_s"],
                "ours_replay_cpu_s": run["cpu_s"],
                "ours_wall_s": round(float(ingest["wall_s"]) + float(run["wall_s"]), 3),  # type: ignore[arg-type]
                "ours_cpu_s": round(float(ingest["cpu_s"]) + float(run["cpu_s"]), 3),  # type: ignore[arg-type]
                "ours_peak_rss_mib": max(float(ingest["peak_rss_mib"]), float(run["peak_rss_mib"])),  # type: ignore[arg-type]
            }
            if reason is None:
                python = shlex.split(os.environ.get("PAI_SIM_PYTHON", "python3"))
                driver = str(Path(__file__).with_name("paisim_driver.py"))
                sim = timed([*python, driver, str(csv), theirs, str(t / f"sim-{theirs}")], env)
                own = json.loads(str(sim["last_line"]))
                row |= {
                    "sim_wall_s": sim["wall_s"],
                    "sim_cpu_s": sim["cpu_s"],
                    "sim_peak_rss_mib": sim["peak_rss_mib"],
                    "sim_own_runtime_s": own["runtime_s"],
                    "speedup_wall": round(float(sim["wall_s"]) / float(row["ours_wall_s"]), 1),  # type: ignore[arg-type]
                    "speedup_cpu": round(float(sim["cpu_s"]) / float(row["ours_cpu_s"]), 1),  # type: ignore[arg-type]
                    "ceiling_speedup_cpu": round(float(sim["cpu_s"]) / (2 * floor["cpu_s"]), 1),
                }
                row |= compare(t / ours, t / f"sim-{theirs}" / "jobs.csv")
            else:
                got = pl.read_parquet(t / ours / "replay_jobs.parquet")
                row["ours_jct_mean_s"] = round(float(got["jct_s"].mean()), 2)  # type: ignore[arg-type]
            out[ours] = row
    out["load_after"] = os.getloadavg()[0]
    return out


if __name__ == "__main__":
    a = sys.argv[1:]
    print(json.dumps(compare(Path(a[0]), Path(a[1])), default=str))
