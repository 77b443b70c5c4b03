"""Helpers shared by tests/test_acme_integration.py and tests/test_acme_cli.py (split from
test_acme.py)."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from gpu_trace.store.parquet import read_table


def _write(path: Path, *lines: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def _jobs(store: Path) -> pl.DataFrame:
    frame = pl.from_arrow(read_table(store, "jobs", "acme"))
    assert isinstance(frame, pl.DataFrame)
    return frame.sort("job_id")
