"""The reference per-row approach to the occupancy series (HeliosArtifact
``trace_parser.parse_sequence`` style: a per-minute frame, then every job adds its GPUs
to each minute it spans with ``iterrows`` + ``.loc``), on a subset of jobs.

``python -m bench.baseline_analyses STORE N`` prints one JSON line with the seconds per
job. The published code "may take hours" on the full trace; the subset keeps it to
seconds and the per-job cost is compared with ours.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pandas as pd
import polars as pl

from gpu_trace.store.scan import scan


def main(store: Path, n: int) -> None:
    """Time the per-row occupancy recipe on the first ``n`` finished Venus GPU jobs of
    ``store`` and print the JSON line.
    """
    jobs = (
        scan(store, "jobs", ["helios"])
        .filter(
            (pl.col("cluster") == "venus") & (pl.col("gpus") > 0) & pl.col("end_time").is_not_null()
        )
        .select("start_time", "end_time", "gpus")
        .head(n)
        .collect()
        .to_pandas()
    )
    start = time.perf_counter()
    lo = jobs["start_time"].min().floor("min")
    hi = jobs["end_time"].max().ceil("min")
    seq = pd.DataFrame({"running_gpu": 0.0}, index=pd.date_range(lo, hi, freq="min"))
    for _, row in jobs.iterrows():
        s = row["start_time"].floor("min")
        e = row["end_time"].floor("min")
        seq.loc[s:e, "running_gpu"] += row["gpus"]
    elapsed = time.perf_counter() - start
    sys.stdout.write(
        json.dumps(
            {
                "baseline_jobs": len(jobs),
                "baseline_s": round(elapsed, 3),
                "baseline_s_per_job": elapsed / len(jobs),
            }
        )
        + "\n"
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]))
