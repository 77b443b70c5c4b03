"""Helpers shared by the tests/test_helios_*.py files (split from test_helios.py)."""

from __future__ import annotations

from pathlib import Path

from gpu_trace.loaders import LOADERS
from gpu_trace.loaders.base import IngestReport

FIXTURES = Path(__file__).parent / "fixtures" / "helios"
DATA = FIXTURES / "data"
LOG_HEADER = (
    "job_id,user,vc,jobname,gpu_num,cpu_num,node_num,state,submit_time,start_time,"
    "end_time,duration,queue"
)
HELIOS = LOADERS["helios"]
GOOD = "1,uA,vcB,n,1,1,1,COMPLETED,2020-06-09 18:41:01,2020-06-09 18:41:01,2020-06-09 18:41:02,1,0"


def lines(report: IngestReport) -> set[tuple[str, str, str, int, int, int]]:
    return {
        (r.file, r.table, r.dataset, r.rows_read, r.rows_written, r.rows_quarantined)
        for r in report.lines
    }
