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

_F = pl.Float64()
_I = pl.Int64()
_S = pl.String()

RUN_COLUMNS: dict[str, tuple[str, pl.DataType]] = {
    "run_id": ("run_id", _S),
    "source": ("source", _S),
    "trace_dataset": ("trace_dataset", _S),  # the replayed dataset (conv); null: all
    "config_json": ("config_json", _S),
    "model": ("model", _S),
    "gpu": ("gpu", _S),
    "tp": ("tp", _I),
    "replicas": ("replicas", _I),
    "replicas_max": ("replicas_max", _I),
    "batching": ("batching", _S),
    "router": ("router", _S),
    "latency_model": ("latency_model", _S),
    "disaggregate": ("disaggregate", _S),
    "slo_ttft_s": ("slo_ttft_s", _F),
    "slo_tpot_s": ("slo_tpot_s", _F),
    "slo_e2e_s": ("slo_e2e_s", _F),
    "requests": ("requests", _I),
    "requests_finished": ("requests_finished", _I),
    "requests_dropped": ("requests_dropped", _I),
    "drop_reasons": ("drop_reasons", _S),
    "ttft_p50_s": ("ttft_p50_s", _F),
    "ttft_p90_s": ("ttft_p90_s", _F),
    "ttft_p99_s": ("ttft_p99_s", _F),
    "tpot_p50_s": ("tpot_p50_s", _F),
    "tpot_p90_s": ("tpot_p90_s", _F),
    "e2e_p50_s": ("e2e_p50_s", _F),
    "e2e_p90_s": ("e2e_p90_s", _F),
    "slo_attainment_ratio": ("slo_attainment_ratio", _F),
    "goodput_rps": ("goodput_rps", _F),
    "preemptions": ("preemptions", _I),
    "horizon_s": ("horizon_s", _F),
    "gpu_seconds": ("gpu_seconds", _F),
    "utilization_ratio": ("utilization_ratio", _F),
    "energy_per_token_j": ("energy_per_token_j", _F),
    "cost_per_mtok_usd": ("cost_per_mtok_usd", _F),
    "notes": ("notes", _S),
}
"""``serve_runs`` (gpu_trace/schemas/serve.py): report name -> (stored name, dtype
read as). The store's ``dataset`` is the run id; the trace's dataset is
``trace_dataset``."""

REQUEST_COLUMNS: dict[str, tuple[str, pl.DataType]] = {
    "run_id": ("run_id", _S),
    "arrival_s": ("arrival_s", _F),
    "ttft_s": ("ttft_s", _F),
    "tpot_s": ("tpot_s", _F),
    "e2e_s": ("e2e_s", _F),
    "finish_s": ("finish_s", _F),
    "status": ("status", _S),
}
"""``serve_requests`` (gpu_trace.serve.result.REQUEST_COLUMNS + run_id): the columns
the report reads."""

TIMESERIES_COLUMNS: dict[str, tuple[str, pl.DataType]] = {
    "run_id": ("run_id", _S),
    "time_s": ("time_s", _F),
    "replica": ("replica", _I),
    "role": ("role", _S),
    "up": ("up", pl.Boolean()),
    "busy_s": ("busy_s", _F),
    "running": ("running", _I),
    "waiting": ("waiting", _I),
    "kv_used_blocks": ("kv_used_blocks", _F),
    "kv_capacity_blocks": ("kv_capacity_blocks", _F),
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


def _scan(
    root: Path,
    table: str,
    columns: dict[str, tuple[str, pl.DataType]],
    run_id: str | None = None,
) -> pl.LazyFrame:
    """The table under the report's names (one run's rows with ``run_id``); absent
    columns (or no files) read as null.

    A run's rows are in the files named after it (``dataset`` = the run id, as the
    replay tables are keyed): those are read when there are some, else every file, so
    a report over a sweep of hundreds of runs opens each run's files only.
    """
    wanted = pl.LazyFrame(schema={name: dtype for name, (_, dtype) in columns.items()})
    files = table_files(root, table)
    if run_id is not None:
        files = [f for f in files if f.stem == run_id] or files
    if not files:
        return wanted
    # one scan per file, joined by name: files written under older schema versions
    # (a column added since) or by other writers line up column by column
    lf = pl.concat(
        [pl.scan_parquet(f, hive_partitioning=False) for f in files], how="diagonal_relaxed"
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
    runs = _scan(root, RUNS_TABLE, RUN_COLUMNS).collect()
    return runs.sort("source", "trace_dataset", "run_id", nulls_last=True)


def requests(root: Path, run_id: str) -> pl.LazyFrame:
    """The requests of one run."""
    scan = _scan(root, REQUESTS_TABLE, REQUEST_COLUMNS, run_id)
    return scan.filter(pl.col("run_id") == run_id)


def timeseries(root: Path, run_id: str) -> pl.LazyFrame:
    """The (bin, replica) rows of one run."""
    scan = _scan(root, TIMESERIES_TABLE, TIMESERIES_COLUMNS, run_id)
    return scan.filter(pl.col("run_id") == run_id)


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


def drop_reasons_of(value: str | None) -> dict[str, int]:
    """A run's stored ``drop_reasons`` (JSON {reason: requests}); {} when none or
    unreadable.
    """
    try:
        parsed = json.loads(value) if value else None
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        return {}
    return {str(k): int(v) for k, v in parsed.items() if isinstance(v, int | float)}


def config_of(value: str | None) -> dict[str, object]:
    """A run's stored configuration (``config_json``) as a dict; {} when unreadable."""
    try:
        parsed = json.loads(value) if value else None
    except ValueError:
        parsed = None
    return parsed if isinstance(parsed, dict) else {}
