"""Baseline for the ``pai2020_full`` benchmark: the trace owners' pandas recipe.

``python -m bench.baseline_pai2020 RAW_DIR OUT_DIR [--vectorized]`` builds the same
three tables as ``gpu-trace ingest pai2020 --tables job,task,instance`` (jobs, tasks,
placements, written as Parquet) the way alibaba/clusterdata ``analysis/utils.py`` does:

- ``get_df``: ``pd.read_csv(file, header=None)`` with the ``.header`` file's columns;
- ``get_dfiw``: sort instances by ``status, start_time, end_time``, ``drop_duplicates
  (subset='worker_name', keep='last')``, ``dropna(subset=['worker_name'])``, 0 -> NaN;
- ``get_dfw`` / ``get_dfa``: merges of instances with tasks, tasks with jobs, the
  per-task instance aggregates of ``get_dfia``, and times turned into timestamps with
  ``.apply(pd.Timestamp, unit='s', tz='Asia/Shanghai')``, exactly as the owners do.

By default that per-row ``apply`` is kept (it is the owners' code, and what a user
copying the notebook runs). ``--vectorized`` replaces it with ``pd.to_datetime`` so the
comparison can also be made against the best plain-pandas version of the same recipe.
The owners' recipe as written has one bug we do not copy: ``get_dfiw`` sets
``start_time`` to NaN where it is 0 and then tests ``start_time == 0`` again to clear
``end_time``, which can no longer match; here both are cleared, as intended and as
gpu-trace does. Prints one JSON line: seconds per phase and row counts.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

STATUS = {"Terminated": "completed", "Failed": "failed", "Running": "running", "Waiting": "pending"}


def get_df(file: Path) -> pd.DataFrame:
    """``utils.get_df``: headerless CSV, columns from the sibling ``.header`` file."""
    df = pd.read_csv(file, header=None)
    header = file.with_suffix(".header")
    if not header.exists():
        header = file.parent / "headers" / header.name
    df.columns = pd.read_csv(header).columns
    return df


def get_dfiw(dfi: pd.DataFrame) -> pd.DataFrame:
    """``utils.get_dfiw``: deduplicate instances by worker_name, keep the last."""
    dfiw = dfi.sort_values(["status", "start_time", "end_time"])
    dfiw = dfiw.drop_duplicates(subset=["worker_name"], keep="last")
    dfiw = dfiw.dropna(subset=["worker_name"])
    zero = dfiw.start_time == 0
    dfiw.loc[zero, "start_time"] = np.nan
    dfiw.loc[zero | (dfiw.end_time == 0), "end_time"] = np.nan
    return dfiw


def get_dfia(dfi: pd.DataFrame) -> pd.DataFrame:
    """``utils.get_dfia``: per task, earliest instance start."""
    return (
        dfi[dfi.start_time > 0][["job_name", "task_name", "start_time"]]
        .groupby(["job_name", "task_name"])
        .min()
        .reset_index()
    )


def stamp(series: pd.Series, vectorized: bool) -> pd.Series:
    """Float seconds -> timestamps, the owners' way or the vectorized way."""
    if vectorized:
        return pd.to_datetime(series, unit="s", utc=True)
    return series.apply(lambda x: pd.Timestamp(x, unit="s", tz="Asia/Shanghai"))


def build(raw: Path, out: Path, vectorized: bool) -> dict[str, Any]:
    """Build and write the three tables from ``raw`` into ``out`` the owners' way;
    the seconds per phase and the row counts.
    """
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    dfj = get_df(raw / "pai_job_table.csv")
    dft = get_df(raw / "pai_task_table.csv")
    dfi = get_df(raw / "pai_instance_table.csv")
    timings["read_s"] = time.perf_counter() - t0

    t = time.perf_counter()
    dfw = get_dfiw(dfi)
    # get_dfw: instances + tasks (left), times as timestamps
    dfw = dfw.merge(dft, on=["job_name", "task_name"], how="left", suffixes=("", "_t"))
    placements = pd.DataFrame(
        {
            "job_id": dfw.job_name,
            "attempt": 0,
            "task": dfw.task_name,
            "instance": dfw.worker_name,
            "start_time": stamp(dfw.start_time, vectorized),
            "end_time": stamp(dfw.end_time, vectorized),
            "machine_id": dfw.machine,
            "gpu_count": dfw.plan_gpu / 100,
            "status": dfw.status.map(STATUS).fillna("unknown"),
        }
    )
    timings["placements_s"] = time.perf_counter() - t

    t = time.perf_counter()
    # get_dfa: tasks + jobs, 0 -> NaN, + per-task instance aggregates
    dfa = dft.copy()
    zero = dfa.start_time == 0
    dfa.loc[zero, "start_time"] = np.nan
    dfa.loc[zero | (dfa.end_time == 0), "end_time"] = np.nan
    dfa = dfa.merge(get_dfia(dfi), on=["job_name", "task_name"], how="left", suffixes=("", "_i"))
    tasks = pd.DataFrame(
        {
            "job_id": dfa.job_name,
            "task": dfa.task_name,
            "instances": dfa.inst_num,
            "status": dfa.status.map(STATUS).fillna("unknown"),
            "start_time": stamp(dfa.start_time, vectorized),
            "end_time": stamp(dfa.end_time, vectorized),
            "run_s": dfa.end_time - dfa.start_time,
            "gpus": dfa.inst_num * dfa.plan_gpu / 100,
            "gpus_per_instance": dfa.plan_gpu / 100,
            "cpus": dfa.inst_num * dfa.plan_cpu / 100,
            "mem_bytes": (dfa.inst_num * dfa.plan_mem * 2**30).round(),
            "gpu_type": dfa.gpu_type,
        }
    )
    timings["tasks_s"] = time.perf_counter() - t

    t = time.perf_counter()
    dfa["gpu_pct"] = dfa.inst_num * dfa.plan_gpu
    dfa["cpu_pct"] = dfa.inst_num * dfa.plan_cpu
    dfa["mem_gb"] = dfa.inst_num * dfa.plan_mem
    per_job = dfa.groupby("job_name").agg(
        gpu_pct=("gpu_pct", "sum"),
        cpu_pct=("cpu_pct", "sum"),
        mem_gb=("mem_gb", "sum"),
        task_start=("start_time", "min"),
    )
    types = (
        dfa.dropna(subset=["gpu_type"])
        .drop_duplicates(["job_name", "gpu_type"])
        .sort_values(["job_name", "gpu_type"])
        .groupby("job_name")["gpu_type"]
        .agg("|".join)
    )
    per_job = per_job.join(types)
    inst_start = dfw.groupby("job_name").agg(
        inst_start=("start_time", "min"), nodes=("machine", "nunique")
    )
    jobs = dfj.merge(per_job, on="job_name", how="left").merge(
        inst_start, on="job_name", how="left"
    )
    zero = jobs.start_time == 0
    jobs.loc[zero, "start_time"] = np.nan
    jobs.loc[zero | (jobs.end_time == 0), "end_time"] = np.nan
    start = jobs.task_start.fillna(jobs.inst_start)
    out_jobs = pd.DataFrame(
        {
            "job_id": jobs.job_name,
            "user": jobs.user,
            "vc": jobs.user,
            "submit_time": stamp(jobs.start_time, vectorized),
            "start_time": stamp(start, vectorized),
            "end_time": stamp(jobs.end_time, vectorized),
            "queue_s": start - jobs.start_time,
            "run_s": jobs.end_time - start,
            "gpus": jobs.gpu_pct / 100,
            "cpus": jobs.cpu_pct / 100,
            "mem_bytes": (jobs.mem_gb * 2**30).round(),
            "gpu_type": jobs.gpu_type,
            "nodes": jobs.nodes.where(jobs.nodes > 0),
            "status": jobs.status.map(STATUS).fillna("unknown"),
            "raw_status": jobs.status,
        }
    )
    timings["jobs_s"] = time.perf_counter() - t

    t = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    placements.to_parquet(out / "placements.parquet", compression="zstd")
    tasks.to_parquet(out / "tasks.parquet", compression="zstd")
    out_jobs.to_parquet(out / "jobs.parquet", compression="zstd")
    timings["write_s"] = time.perf_counter() - t
    return {
        "variant": "vectorized" if vectorized else "owners",
        "total_s": round(time.perf_counter() - t0, 2),
        **{k: round(v, 2) for k, v in timings.items()},
        "rows": {"jobs": len(out_jobs), "tasks": len(tasks), "placements": len(placements)},
    }


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    result = build(Path(args[0]), Path(args[1]), vectorized="--vectorized" in sys.argv)
    sys.stdout.write(json.dumps(result) + "\n")
