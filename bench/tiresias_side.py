"""Job-by-job comparison with the Tiresias simulator's ``job.csv`` (issue 27).

``python -m bench.tiresias_side TRACE.csv SIM_JOB_CSV POLICY [GPUS, default 256x8: 32 nodes of 8, the simulator's flag defaults]`` replays the
trace (read with ``read_chronus``, as ``gpu-trace ingest chronus`` does) with POLICY and
the ``yarn`` placement, then joins on ``job_id`` with the simulator's ``job.csv``
(``job_id, start_time, end_time`` as its ``log.py`` writes them: first start, end) and
prints one JSON line: jobs, how many have the same start and end, mean JCTs, and the
first differing jobs.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import polars as pl

from gpu_trace.replay import ReplayConfig, replay
from gpu_trace.replay.cluster import parse_spec
from gpu_trace.replay.interchange import read_chronus


def compare(
    trace: Path, sim_jobs: Path | None, policy: str, gpus: str = "256x8"
) -> dict[str, object]:
    """Replay ``trace`` with ``policy`` + yarn; agreement with the simulator's jobs
    (``sim_jobs`` None: our timing only).
    """
    cfg = ReplayConfig(source="chronus", scheduler=policy, placement="yarn", estimator="oracle")
    jobs = read_chronus(trace)
    replay(jobs.head(200), parse_spec(gpus), cfg)  # warm-up: imports, first-call costs
    start, cpu = time.perf_counter(), time.process_time()
    result = replay(jobs, parse_spec(gpus), cfg)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    ours = result.jobs.select(
        pl.col("job_id").cast(pl.Int64),
        pl.col("start_time_s").alias("start"),
        pl.col("finish_time_s").alias("end"),
        pl.col("preemptions"),
    )
    mine = {
        "policy": policy,
        "cluster": gpus,
        "ours_s": round(wall, 3),
        "ours_cpu_s": round(cpu, 3),
        "ours_jct_mean_s": round(float(result.runs["jct_mean_s"][0]), 2),
    }
    if sim_jobs is None:
        return mine
    sim = pl.read_csv(sim_jobs).select(
        "job_id",
        pl.col("start_time").cast(pl.Float64).alias("sim_start"),
        pl.col("end_time").cast(pl.Float64).alias("sim_end"),
        pl.col("preempt").alias("sim_preempt"),
        pl.col("JCT").alias("sim_jct"),
    )
    both = ours.join(sim, on="job_id", how="full", coalesce=True).sort("job_id")
    same_start = both["start"] == both["sim_start"]
    same_end = both["end"] == both["sim_end"]
    same = both.filter(same_start & same_end)
    diff = both.filter(~(same_start & same_end))
    return mine | {
        "jobs": both.height,
        "sim_jobs": sim.height,
        "same_start_and_end": same.height,
        "same_start": int(same_start.sum()),
        "same_end": int(same_end.sum()),
        "ours_preemptions": int(both["preemptions"].sum()),
        "sim_preemptions": int(both["sim_preempt"].sum()),
        "sim_jct_mean_s": round(float(both["sim_jct"].mean()), 2),  # type: ignore[arg-type]
        "first_diffs": diff.head(3).to_dicts(),
    }


if __name__ == "__main__":
    a = sys.argv[1:]
    print(json.dumps(compare(Path(a[0]), Path(a[1]), a[2], *a[3:]), default=str))
