"""Baseline for the ``helios_full`` benchmark: the trace owners' pandas recipe.

HeliosArtifact's ``analysis/trace_parser.py`` reads every cluster with
``pd.read_csv(f"{dir}/cluster_log.csv", parse_dates=["submit_time", "start_time",
"end_time"])`` and works on that frame. This script does the same per cluster, then
brings the frame to the canonical ``jobs`` columns our loader writes (UTC instants from
Asia/Shanghai local time, canonical status, float units, GPU unit, time basis), sorts
it like our store and writes zstd Parquet, so both sides do the same end-to-end job on
the same files. It checks nothing: no field counts, no line numbers, no quarantine, no
checksums; a malformed row either raises or is coerced silently.

Run alone: ``python -m bench.baseline_helios DATA_DIR [OUT_DIR]`` prints one JSON line.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

CLUSTERS = ("Venus", "Earth", "Saturn", "Uranus")
TZ = "Asia/Shanghai"
STATUS = {
    "COMPLETED": "completed",
    "CANCELLED": "cancelled",
    "FAILED": "failed",
    "TIMEOUT": "timeout",
    "NODE_FAIL": "node_fail",
}


def jobs_frame(folder: Path, cluster: str) -> pd.DataFrame:
    """One cluster's ``cluster_log.csv`` as the canonical jobs columns, pandas style."""
    log = pd.read_csv(
        folder / "cluster_log.csv", parse_dates=["submit_time", "start_time", "end_time"]
    )
    times = {
        c: pd.to_datetime(log[c]).dt.tz_localize(TZ).dt.tz_convert("UTC")
        for c in ("submit_time", "start_time", "end_time")
    }
    slug = cluster.lower()
    return pd.DataFrame(
        {
            "source": "helios",
            "dataset": slug,
            "cluster": slug,
            "job_id": log["job_id"].astype(str),
            "user": log["user"],
            "vc": log["vc"],
            "name": log.get("jobname"),
            **times,
            "queue_s": log["queue"].astype(float),
            "run_s": log["duration"].astype(float),
            "gpus": log["gpu_num"].astype(float),
            "gpus_raw": log["gpu_num"].astype(float),
            "gpus_raw_unit": "gpu",
            "cpus": log["cpu_num"].astype(float),
            "nodes": log["node_num"].astype("int32"),
            "attempts": 1,
            "status": log["state"].map(STATUS).fillna("unknown"),
            "raw_status": log["state"],
            "source_tz": TZ,
            "time_basis": "absolute",
        }
    )


def run(data: Path, out: Path) -> dict[str, object]:
    """Read, normalize and write every cluster under ``data``; time both phases."""
    read_s = write_s = 0.0
    rows = 0
    for cluster in CLUSTERS:
        folder = data / cluster
        if not (folder / "cluster_log.csv").exists():
            continue
        start = time.perf_counter()
        jobs = jobs_frame(folder, cluster)
        read_s += time.perf_counter() - start
        start = time.perf_counter()
        jobs.sort_values(["submit_time", "job_id"]).to_parquet(
            out / f"{cluster.lower()}.parquet", compression="zstd", index=False
        )
        write_s += time.perf_counter() - start
        rows += len(jobs)
    return {
        "baseline_rows": rows,
        "baseline_read_s": round(read_s, 3),
        "baseline_write_s": round(write_s, 3),
        "baseline_s": round(read_s + write_s, 3),
    }


if __name__ == "__main__":
    data = Path(sys.argv[1])
    if len(sys.argv) > 2:
        result = run(data, Path(sys.argv[2]))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            result = run(data, Path(tmp))
    sys.stdout.write(json.dumps(result) + "\n")
