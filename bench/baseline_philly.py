"""Baseline for the Philly benchmark: the trace owners' recipe for the jobs table.

This is how ``analysis/Philly Trace Analysis.ipynb`` (msr-fiddle/philly-traces) reads
``cluster_job_log``. It calls ``json.load`` on the whole array, then makes one Python
``Job`` object per record with ``datetime.strptime`` on every time string (``"None"``
-> missing). ``num_gpus`` comes from the first attempt, ``run_time`` runs from the
first start to the last end, and the queueing delay is first start - submit.

The notebook stops at Python objects. A user who wants the same table we write goes
one step further, and so does this baseline, to keep the comparison fair. It builds a
pandas DataFrame with the columns of our ``jobs`` table, localizes the wall-clock times
to US-Pacific and converts them to UTC with pandas' vectorized ``tz_localize``, and
writes Parquet. Our loader additionally writes placements and inventories, so the
comparison favours the baseline.

Run alone: ``python -m bench.baseline_philly PATH/cluster_job_log OUT.parquet``. It
prints one JSON line with the seconds spent loading and writing (imports excluded, as
for our loader in the same benchmark case) and the job count.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd

DATE_FORMAT = "%Y-%m-%d %H:%M:%S"
STATUS = {"Pass": "completed", "Killed": "cancelled", "Failed": "failed"}


def parse_date(text: str | None) -> datetime | None:
    """The notebook's ``parse_date``: ``None``, ``''`` and ``'None'`` are missing."""
    if text is None or text == "" or text == "None":
        return None
    return datetime.strptime(text, DATE_FORMAT)


class Job:
    """The notebook's ``Job``: one per record, with the derived quantities."""

    def __init__(
        self,
        status: str,
        vc: str,
        jobid: str,
        attempts: list[dict[str, Any]],
        submitted_time: str,
        user: str,
    ) -> None:
        self.status = status
        self.vc = vc
        self.jobid = jobid
        self.user = user
        self.submitted_time = parse_date(submitted_time)
        self.attempts = [
            {
                "start_time": parse_date(a["start_time"]),
                "end_time": parse_date(a["end_time"]),
                "detail": a["detail"],
            }
            for a in attempts
        ]
        if self.attempts:
            first = self.attempts[0]
            self.num_gpus: int | None = sum(len(d["gpus"]) for d in first["detail"])
            self.nodes: int | None = len(first["detail"])
            self.start_time = first["start_time"]
            self.end_time = self.attempts[-1]["end_time"]
        else:
            self.num_gpus = self.nodes = None
            self.start_time = self.end_time = None


def load(job_log: Path) -> pd.DataFrame:
    """``json.load`` + one ``Job`` per record -> a DataFrame shaped like our jobs."""
    with job_log.open() as fh:
        records = json.load(fh)
    jobs = [Job(**r) for r in records]
    df = pd.DataFrame(
        {
            "job_id": [j.jobid for j in jobs],
            "user": [j.user for j in jobs],
            "vc": [j.vc for j in jobs],
            "submit_time": [j.submitted_time for j in jobs],
            "start_time": [j.start_time for j in jobs],
            "end_time": [j.end_time for j in jobs],
            "gpus": [j.num_gpus for j in jobs],
            "nodes": [j.nodes for j in jobs],
            "attempts": [len(j.attempts) for j in jobs],
            "raw_status": [j.status for j in jobs],
        }
    )
    for col in ("submit_time", "start_time", "end_time"):
        df[col] = (
            pd.to_datetime(df[col])
            .dt.tz_localize("America/Los_Angeles", ambiguous="NaT", nonexistent="NaT")
            .dt.tz_convert("UTC")
        )
    df["queue_s"] = (df["start_time"] - df["submit_time"]).dt.total_seconds()
    df["run_s"] = (df["end_time"] - df["start_time"]).dt.total_seconds()
    df["status"] = df["raw_status"].map(STATUS).fillna("unknown")
    return df


def run(job_log: Path, out: Path) -> int:
    """Load and write Parquet; returns the number of jobs."""
    df = load(job_log)
    df.to_parquet(out, index=False)
    return len(df)


if __name__ == "__main__":
    start = time.perf_counter()
    n = run(Path(sys.argv[1]), Path(sys.argv[2]))
    elapsed = time.perf_counter() - start
    sys.stdout.write(json.dumps({"baseline_s": round(elapsed, 3), "baseline_jobs": n}) + "\n")
