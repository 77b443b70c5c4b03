"""CPU seconds of a loader's own work, start-up excluded.

``python -m bench.loader_cpu FAMILY PATH [KEY=VALUE ...]`` imports gpu-trace, then times
(``time.process_time``: user + system, all threads) one ``loaders.ingest`` of PATH into
a fresh temporary store, fsync off, with the loader options given (``tables=job,task``).
Prints one JSON line: ``cpu_s``, ``wall_s``, the 1-minute load average before, rows
written. Used for issue 25 beside ``ingest_vs_duckdb_*`` (whose figures include the
CLI's ~1 s of imports), so that start-up does not hide or fake a loader's gains.
Run it as ``PYTHONPATH=TREE python bench/loader_cpu.py ...`` (a path, not ``-m``, whose
working folder would shadow ``TREE``) to measure another tree's code.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path


def main(family: str, path: Path, options: dict[str, str]) -> dict[str, object]:
    """Ingest ``path`` once and return the timings."""
    os.environ["GPU_TRACE_FSYNC"] = "0"
    from gpu_trace.loaders import LOADERS, ingest  # start-up is not timed

    with tempfile.TemporaryDirectory() as tmp:
        load = os.getloadavg()[0]
        cpu, wall = time.process_time(), time.perf_counter()
        report = ingest(LOADERS[family], path, Path(tmp) / "store", **options)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {
        "family": family,
        "cpu_s": round(cpu, 2),
        "wall_s": round(wall, 2),
        "load_before": round(load, 1),
        "rows_written": report.totals[1],
    }


if __name__ == "__main__":
    opts = dict(a.split("=", 1) for a in sys.argv[3:])
    sys.stdout.write(json.dumps(main(sys.argv[1], Path(sys.argv[2]), opts)) + "\n")
