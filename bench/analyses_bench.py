"""Benchmark of the characterization analyses at full Helios scale (issue: summary +
per-minute occupancy for 3.36 M jobs under 20 s, >= 100x the per-row reference).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

from gpu_trace.analyses.inputs import Inputs
from gpu_trace.analyses.occupancy import occupancy
from gpu_trace.analyses.summary import summary
from gpu_trace.loaders import LOADERS, ingest

HELIOS_JOBS = 3_362_981
BASELINE_JOBS = 2_000


def analyses_helios() -> dict[str, object]:
    """Synthesize and ingest full-scale Helios (not timed), then time the summary and the
    per-minute occupancy series over all four clusters; run the per-row reference on a
    subset in a child process and compare the cost per job.
    """
    with tempfile.TemporaryDirectory() as tmp:
        raw, store = Path(tmp) / "raw", Path(tmp) / "store"
        script = (
            "import sys; from pathlib import Path; from gpu_trace.synth.helios import write; "
            f"write(Path(sys.argv[1]), jobs={HELIOS_JOBS}, seed=0)"
        )
        subprocess.run([sys.executable, "-c", script, str(raw)], check=True)
        ingest(LOADERS["helios"], raw, store)
        inp = Inputs.from_store(store, ["helios"])
        start = time.perf_counter()
        table = summary(inp.jobs).collect()
        summary_s = time.perf_counter() - start
        start = time.perf_counter()
        series = occupancy(inp.jobs, inp.capacity, inp.machines, freq="1min").collect()
        occupancy_s = time.perf_counter() - start
        gpu_jobs = int(inp.jobs.filter(pl.col("gpus") > 0).select(pl.len()).collect().item())
        out = subprocess.run(
            [sys.executable, "-m", "bench.baseline_analyses", str(store), str(BASELINE_JOBS)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        baseline = json.loads(out.strip().splitlines()[-1])
    per_job = occupancy_s / gpu_jobs
    return {
        "jobs": int(table["jobs"].sum()),
        "gpu_jobs": gpu_jobs,
        "clusters": table.height,
        "summary_s": round(summary_s, 3),
        "occupancy_1min_s": round(occupancy_s, 3),
        "occupancy_rows": series.height,
        "total_s": round(summary_s + occupancy_s, 3),
        **{k: v for k, v in baseline.items() if k != "baseline_s_per_job"},
        "speedup_per_job": round(float(baseline["baseline_s_per_job"]) / per_job, 1),
    }


def report_1m() -> dict[str, object]:
    """Build the report site for a 1,000,000-job store (synthetic openb pods + nodes):
    build seconds and the size of every page (goal: < 60 s, < 5 MB per page).
    """
    from gpu_trace.reports import build_site
    from gpu_trace.synth.openb import write

    with tempfile.TemporaryDirectory() as tmp:
        raw, store, site = Path(tmp) / "raw", Path(tmp) / "store", Path(tmp) / "site"
        write(raw, jobs=1_000_000, seed=0)
        ingest(LOADERS["openb"], raw, store)
        start = time.perf_counter()
        build_site(store, site)
        build_s = time.perf_counter() - start
        sizes = {p.name: p.stat().st_size for p in sorted(site.glob("*.html"))}
    return {
        "jobs": 1_000_000,
        "build_s": round(build_s, 2),
        "pages": len(sizes),
        "max_page_mib": round(max(sizes.values()) / 2**20, 2),
        "page_mib": {k: round(v / 2**20, 2) for k, v in sizes.items()},
    }
