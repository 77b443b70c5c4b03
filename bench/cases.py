"""Benchmark cases, each runnable alone: ``python -m bench.cases NAME``.

A case prints one JSON line with its own measurements (timings of the phases it
contains, row counts, and the baseline it compares against where there is one).
Peak memory is measured by ``bench.run`` around the child process.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from gpu_trace.loaders import LOADERS, ingest
from gpu_trace.store.catalog import connect

SAMPLES = Path("data/samples")


def openb_ingest() -> dict[str, object]:
    """Ingest the real openb default pod list and both node lists (10,888 rows)."""
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        report = ingest(LOADERS["openb"], SAMPLES / "openb", Path(tmp) / "store")
        elapsed = time.perf_counter() - start
    read, written, quarantined = report.totals
    return {
        "rows_read": read,
        "rows_written": written,
        "quarantined": quarantined,
        "ingest_s": round(elapsed, 3),
    }


def openb_query() -> dict[str, object]:
    """Catalog open + a grouped query over the openb store."""
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "store"
        ingest(LOADERS["openb"], SAMPLES / "openb", store)
        start = time.perf_counter()
        con = connect(store)
        rows = con.execute(
            "SELECT status, count(*), sum(gpus), avg(queue_s) FROM jobs GROUP BY ALL"
        ).fetchall()
        elapsed = time.perf_counter() - start
    return {"groups": len(rows), "query_s": round(elapsed, 4)}


CASES: dict[str, Callable[[], dict[str, object]]] = {
    "openb_ingest": openb_ingest,
    "openb_query": openb_query,
}

if __name__ == "__main__":
    sys.stdout.write(json.dumps(CASES[sys.argv[1]]()) + "\n")
