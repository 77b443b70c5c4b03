"""The serving replay's stored runs as the report reads them: ``serve_runs`` (one row per
run), ``serve_requests`` and ``serve_timeseries`` (the columns of
:mod:`gpu_trace.serve.result` plus ``run_id``, ``source``, ``dataset``), written by
``gpu-trace serve run`` through the store's one writer.

The report reads the tables' Parquet files in one pinned generation directly (not the
catalog's views), so a store written before the serve tables existed, or one without
serve runs, simply has none: no page, no error. Every stored column name the report
uses is in one of the mappings below (report name -> stored name), so a rename in the
writer is one line here; a column the store lacks reads as null and the page says
what it could not show instead of failing.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from gpu_trace.store.parquet import EMPTY_SOURCE

RUNS_TABLE = "serve_runs"
REQUESTS_TABLE = "serve_requests"
TIMESERIES_TABLE = "serve_timeseries"

RUN_COLUMNS: dict[str, tuple[str, pl.DataType]] = {
    "run_id": ("run_id", pl.String()),
    "source": ("source", pl.String()),
    "dataset": ("dataset", pl.String()),
    "config_json": ("config_json", pl.String()),
    "model": ("model", pl.String()),
    "gpu": ("gpu", pl.String()),
    "tp": ("tp", pl.Int64()),
    "replicas": ("replicas", pl.Int64()),
    "batching": ("batching", pl.String()),
    "router": ("router", pl.String()),
    "ttft_slo_s": ("ttft_slo_s", pl.Float64()),
    "tpot_slo_s": ("tpot_slo_s", pl.Float64()),
    "ttft_p50_s": ("ttft_p50_s", pl.Float64()),
    "ttft_p90_s": ("ttft_p90_s", pl.Float64()),
    "tpot_p50_s": ("tpot_p50_s", pl.Float64()),
    "e2e_p50_s": ("e2e_p50_s", pl.Float64()),
    "slo_attainment": ("slo_attainment", pl.Float64()),
    "goodput_rps": ("goodput_rps", pl.Float64()),
    "gpu_seconds": ("gpu_seconds", pl.Float64()),
    "energy_j_per_token": ("energy_j_per_token", pl.Float64()),
    "usd_per_mtok": ("usd_per_mtok", pl.Float64()),
    "notes": ("notes", pl.String()),
}
"""``serve_runs``: report name -> (stored name, dtype read as)."""

REQUEST_COLUMNS: dict[str, tuple[str, pl.DataType]] = {
    "run_id": ("run_id", pl.String()),
    "arrival_s": ("arrival_s", pl.Float64()),
    "ttft_s": ("ttft_s", pl.Float64()),
    "tpot_s": ("tpot_s", pl.Float64()),
    "e2e_s": ("e2e_s", pl.Float64()),
    "finish_s": ("finish_s", pl.Float64()),
    "status": ("status", pl.String()),
}
"""``serve_requests`` (gpu_trace.serve.result.REQUEST_COLUMNS + run_id): the columns
the report reads."""

TIMESERIES_COLUMNS: dict[str, tuple[str, pl.DataType]] = {
    "run_id": ("run_id", pl.String()),
    "time_s": ("time_s", pl.Float64()),
    "replica": ("replica", pl.Int64()),
    "role": ("role", pl.String()),
    "up": ("up", pl.Boolean()),
    "busy_s": ("busy_s", pl.Float64()),
    "running": ("running", pl.Int64()),
    "waiting": ("waiting", pl.Int64()),
    "kv_used_blocks": ("kv_used_blocks", pl.Float64()),
    "kv_capacity_blocks": ("kv_capacity_blocks", pl.Float64()),
}
"""``serve_timeseries`` (gpu_trace.serve.result.TIMESERIES_COLUMNS + run_id): the
columns the report reads."""


def table_files(root: Path, table: str) -> list[Path]:
    """The table's data files in generation ``root`` (the zero-row placeholder and
    hidden files left out), sorted.
    """
    folder = root / table
    return sorted(
        p
        for p in folder.glob("source=*/*.parquet")
        if not p.name.startswith(".") and p.parent.name != f"source={EMPTY_SOURCE}"
    )


def _scan(root: Path, table: str, columns: dict[str, tuple[str, pl.DataType]]) -> pl.LazyFrame:
    """The table under the report's names; absent columns (or no files) read as null."""
    wanted = pl.LazyFrame(schema={name: dtype for name, (_, dtype) in columns.items()})
    files = table_files(root, table)
    if not files:
        return wanted
    lf = pl.scan_parquet(
        files, hive_partitioning=False, missing_columns="insert", extra_columns="ignore"
    )
    have = lf.collect_schema()
    return lf.select(
        _column(have, stored, dtype).alias(name) for name, (stored, dtype) in columns.items()
    )


def _column(have: pl.Schema, stored: str, dtype: pl.DataType) -> pl.Expr:
    """One stored column as the report reads it: null when absent, a list of strings
    (notes) joined one per line.
    """
    if stored not in have:
        return pl.lit(None).cast(dtype)
    if isinstance(have[stored], pl.List) and dtype == pl.String():
        return pl.col(stored).cast(pl.List(pl.String())).list.join("\n")
    return pl.col(stored).cast(dtype)


def runs(root: Path) -> pl.DataFrame:
    """Every stored serve run, one row each, sorted by source, dataset and run id."""
    return _scan(root, RUNS_TABLE, RUN_COLUMNS).collect().sort("source", "dataset", "run_id")


def requests(root: Path, run_id: str) -> pl.LazyFrame:
    """The requests of one run."""
    return _scan(root, REQUESTS_TABLE, REQUEST_COLUMNS).filter(pl.col("run_id") == run_id)


def timeseries(root: Path, run_id: str) -> pl.LazyFrame:
    """The (bin, replica) rows of one run."""
    return _scan(root, TIMESERIES_TABLE, TIMESERIES_COLUMNS).filter(pl.col("run_id") == run_id)


def notes_of(value: str | None) -> list[str]:
    """A run's stored notes as a list: a JSON list of strings, else one note per line."""
    if not value:
        return []
    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = None
    if isinstance(parsed, list):
        return [str(n) for n in parsed if str(n).strip()]
    return [line for line in value.splitlines() if line.strip()]


def config_of(value: str | None) -> dict[str, object]:
    """A run's stored configuration (``config_json``) as a dict; {} when unreadable."""
    try:
        parsed = json.loads(value) if value else None
    except ValueError:
        parsed = None
    return parsed if isinstance(parsed, dict) else {}
