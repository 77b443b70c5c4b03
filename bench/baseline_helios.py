"""Baselines for the ``helios_full`` benchmark, in pandas.

``python -m bench.baseline_helios DATA_DIR [OUT_DIR] [--rewrite]`` prints one JSON line.

**The trace owners' recipe (default).** HeliosArtifact's ``analysis/trace_parser.py``
builds its one all-cluster jobs table in ``parse_all_cluster_log``: for each cluster it
reads ``data/<Cluster>/cluster_log.csv`` with ``pd.read_csv(...,
parse_dates=["submit_time", "start_time", "end_time"])``, tags the rows with the
cluster, concatenates the frames, moves the cluster column to position 1 and writes
``all_cluster_log.csv`` with ``to_csv(index=False)``. Every later step of their
pipeline (per-user tables, monthly counts) reads that table. This script does the same
steps (our code, not theirs) and times them, so it is the owners' way from the raw
files to the same table that ``gpu-trace ingest helios`` writes.

**A pandas rewrite (``--rewrite``).** The same read, then the frame brought to the
canonical ``jobs`` columns our loader writes (UTC instants from Asia/Shanghai local
time, canonical status, float units, GPU unit, time basis), sorted like our store and
written as zstd Parquet. It is the strongest plain-pandas version of the job, and is
reported beside the owners' recipe.

Neither checks anything: no field counts, no line numbers, no quarantine, no
checksums; a malformed row either raises or is coerced silently.
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
    log = pd.read_csv(folder / "cluster_log.csv", parse_dates=TIMES)
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


TIMES = ["submit_time", "start_time", "end_time"]


def owners(data: Path, out: Path) -> dict[str, object]:
    """The owners' ``parse_all_cluster_log`` steps: read and tag every cluster, concat,
    write ``all_cluster_log.csv``. Times the read and the write.
    """
    start = time.perf_counter()
    frames = []
    for cluster in CLUSTERS:
        path = data / cluster / "cluster_log.csv"
        if path.exists():
            log = pd.read_csv(path, parse_dates=TIMES)
            log["c"] = cluster
            frames.append(log)
    logall = pd.concat(frames)
    logall.insert(1, "cluster", logall["c"])
    logall = logall.drop(columns="c")
    read_s = time.perf_counter() - start
    start = time.perf_counter()
    logall.to_csv(out / "all_cluster_log.csv", index=False)
    write_s = time.perf_counter() - start
    return {
        "baseline": "owners",
        "baseline_rows": len(logall),
        "baseline_read_s": round(read_s, 3),
        "baseline_write_s": round(write_s, 3),
        "baseline_s": round(read_s + write_s, 3),
    }


def rewrite(data: Path, out: Path) -> dict[str, object]:
    """Read, normalize and write every cluster under ``data`` as canonical Parquet;
    time both phases.
    """
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
        "baseline": "rewrite",
        "baseline_rows": rows,
        "baseline_read_s": round(read_s, 3),
        "baseline_write_s": round(write_s, 3),
        "baseline_s": round(read_s + write_s, 3),
    }


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--rewrite"]
    recipe = rewrite if "--rewrite" in sys.argv else owners
    data = Path(args[0])
    if len(args) > 1:
        result = recipe(data, Path(args[1]))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            result = recipe(data, Path(tmp))
    sys.stdout.write(json.dumps(result) + "\n")
