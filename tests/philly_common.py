"""Helpers shared by the tests/test_philly_*.py files (split from test_philly.py)."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from gpu_trace.store.parquet import read_table

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "philly"


def frame(store: Path, table: str) -> pl.DataFrame:
    df = pl.from_arrow(read_table(store, table, "philly"))
    assert isinstance(df, pl.DataFrame)
    return df
