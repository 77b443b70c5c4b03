"""The ingest driver's reconciliation (rows read = written + quarantined) is a real
check: a loader that loses a row without quarantining it fails the ingest, and the store
keeps its previous contents. The rows-read side is an independent count of the file's
lines, not the parser's own tally."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from gpu_trace.loaders import LOADERS, Batch, ingest
from gpu_trace.loaders.base import ReconciliationError
from gpu_trace.loaders.textfile import file_info
from gpu_trace.store.catalog import connect
from tests.conftest import OPENB


class DropsOneRow:
    """A loader with a bug: it parses a 4-line CSV (header + 3 rows) and hands the
    store only two rows, rejecting none."""

    name = "chronus"

    def batches(self, path: Path, **options: Any) -> Iterator[Batch]:
        info = file_info(path, header_lines=1)
        rows = pl.DataFrame(
            {
                "source": ["chronus"] * 2,
                "dataset": ["lossy"] * 2,
                "cluster": ["c"] * 2,
                "job_id": ["1", "2"],
                "status": ["completed"] * 2,
                "time_basis": ["relative"] * 2,
            }
        )
        yield Batch("jobs", "lossy", info, rows)


def test_lost_row_fails_the_ingest(tmp_path: Path) -> None:
    src = tmp_path / "lossy.csv"
    src.write_text("job_id\n1\n2\n3\n")
    assert file_info(src, header_lines=1).records == 3  # the independent count
    store = tmp_path / "store"
    ingest(LOADERS["openb"], OPENB, store)
    before = connect(store).execute("select count(*) from jobs").fetchone()
    with pytest.raises(ReconciliationError, match="read 3 records but wrote 2"):
        ingest(DropsOneRow(), src, store)
    con = connect(store)
    assert con.execute("select count(*) from jobs").fetchone() == before
    assert con.execute("select count(*) from jobs where dataset='lossy'").fetchone() == (0,)


def test_openb_rows_read_is_the_raw_line_count(openb_store: Path) -> None:
    """rows_read in ``ingests`` equals the data lines of the raw file counted here with
    the csv module, and rows_written equals what the jobs table holds."""
    with (OPENB / "openb_pod_list_default.csv").open(newline="") as f:
        raw = sum(1 for _ in csv.DictReader(f))
    con = connect(openb_store)
    read, written, quarantined = con.execute(
        "select rows_read, rows_written, rows_quarantined from ingests "
        "where \"table\" = 'jobs' and dataset = 'default'"
    ).fetchone() or (None, None, None)
    assert read == raw == 8152
    (held,) = con.execute("select count(*) from jobs where dataset = 'default'").fetchone() or (0,)
    assert written == held and quarantined == 0
