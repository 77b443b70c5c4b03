"""Per-job GPU usage from telemetry: mean / p50 / p95 of utilization, memory and power
over the samples of the GPUs each job held, while it held them.

The interval join is :func:`gpu_trace.analyses.utilization.per_job` (a DuckDB range join
of ``placements`` x ``gpu_samples``), reused as is: for a ``--jobs`` file we hand it a
connection whose ``placements`` view is the file and whose ``gpu_samples`` view is the
store's samples relabelled to the file's source, so telemetry from any source
(``nvml``, ``prometheus``, ...) joins. Jobs identified by labels instead (dcgm-exporter
``pod``/``namespace``, ``hpc_job``) are grouped directly.

``--jobs FILE`` format: CSV with header ``job_id,host,gpu_indices,start,end``;
``gpu_indices`` separated by ``;`` (``0;1;2;3``), ``start``/``end`` ISO-8601 (a time
without offset is UTC). One line per job and host; a job on two hosts has two lines.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from gpu_trace.analyses.utilization import per_job
from gpu_trace.column_units import metric_stats_units
from gpu_trace.errors import InputError
from gpu_trace.store.generations import snapshot_root
from gpu_trace.store.parquet import ensure_layout

if TYPE_CHECKING:  # DuckDB itself is loaded by whoever opens the connection
    import duckdb

JOBS_SOURCE = "jobs-file"
METRICS = ("gpu_util_pct", "mem_used_bytes", "power_w")
HEADER = ["job_id", "host", "gpu_indices", "start", "end"]


def read_jobs(path: Path) -> pl.DataFrame:
    """The ``--jobs`` file as ``placements`` rows (bad lines raise with their number)."""
    if not path.is_file():
        raise InputError(path, "no such file")
    frame = pl.read_csv(path, infer_schema=False)
    if frame.columns != HEADER:
        raise InputError(path, f"header must be {','.join(HEADER)}", "line 1")

    def ts(col: str) -> pl.Expr:
        text = pl.col(col).str.strip_chars().str.replace(r"Z$", "+00:00").str.replace(" ", "T")
        aware = text.str.to_datetime(
            "%Y-%m-%dT%H:%M:%S%.f%:z", strict=False, time_unit="us", time_zone="UTC"
        )
        naive = text.str.to_datetime("%Y-%m-%dT%H:%M:%S%.f", strict=False, time_unit="us")
        return pl.coalesce(aware, naive.dt.replace_time_zone("UTC"))

    out = frame.with_row_index("_line", offset=2).with_columns(
        ts("start").alias("start_time"),
        ts("end").alias("end_time"),
        pl.col("gpu_indices")
        .str.split(";")
        .list.eval(pl.element().str.strip_chars().cast(pl.Int16, strict=False))
        .alias("gpu_indices_l"),
    )
    bad = out.filter(
        pl.col("job_id").is_null()
        | pl.col("host").is_null()
        | pl.col("start_time").is_null()
        | pl.col("end_time").is_null()
        | (pl.col("end_time") < pl.col("start_time"))
        | pl.col("gpu_indices_l").list.eval(pl.element().is_null()).list.any()
    )
    if bad.height:
        line = bad["_line"][0]
        raise InputError(
            path, "needs job_id, host, gpu_indices like 0;1, ISO start <= end", f"line {line}"
        )
    return out.select(
        pl.lit(JOBS_SOURCE).alias("source"),
        pl.lit(None, dtype=pl.String).alias("cluster"),
        "job_id",
        pl.lit(0, dtype=pl.Int32).alias("attempt"),
        pl.col("host").alias("machine_id"),
        "start_time",
        "end_time",
        pl.col("gpu_indices_l").alias("gpu_indices"),
        pl.col("gpu_indices_l").list.len().cast(pl.Float64).alias("gpu_count"),
        pl.lit(None, dtype=pl.String).alias("instance"),
    )


def usage_units(metrics: Sequence[str] = METRICS) -> dict[str, str]:
    """Display units of the per-job usage columns (:mod:`gpu_trace.column_units`):
    ``{m}_samples`` is a count of samples whatever ``m`` measures; ``{m}_mean`` /
    ``_p50`` / ``_p95`` are in ``m``'s own unit (``mem_used_bytes_mean``: bytes).
    """
    out: dict[str, str] = {}
    for m in metrics:
        out[f"{m}_samples"] = "count"
        out.update(metric_stats_units(m, ("mean", "p50", "p95"), prefix=f"{m}_"))
    return out


def _wide(con: duckdb.DuckDBPyConnection, metrics: Sequence[str]) -> pl.DataFrame:
    out: pl.DataFrame | None = None
    for m in metrics:
        stats = per_job(con, m).select(
            "source",
            "job_id",
            pl.col("samples").alias(f"{m}_samples"),
            pl.col("mean").alias(f"{m}_mean"),
            pl.col("p50").alias(f"{m}_p50"),
            pl.col("p95").alias(f"{m}_p95"),
        )
        out = (
            stats
            if out is None
            else out.join(stats, on=["source", "job_id"], how="full", coalesce=True)
        )
    assert out is not None
    return out.sort("source", "job_id")


def usage_from_file(store: Path, jobs: Path, metrics: Sequence[str] = METRICS) -> pl.DataFrame:
    """Per-job usage for the jobs in a ``--jobs`` file, from every telemetry source."""
    import duckdb

    placements = read_jobs(jobs)
    ensure_layout(store)
    glob = (
        (snapshot_root(store).resolve() / "gpu_samples" / "source=*" / "*.parquet")
        .as_posix()
        .replace("'", "''")
    )
    con = duckdb.connect(":memory:")
    con.execute(
        "CREATE VIEW gpu_samples AS SELECT * REPLACE ('"
        + JOBS_SOURCE
        + f"' AS source) FROM read_parquet('{glob}', hive_partitioning = false, "
        "union_by_name = true)"
    )
    con.register("_jobs_file", placements.to_arrow())
    con.execute("CREATE VIEW placements AS SELECT * FROM _jobs_file")
    return _wide(con, metrics)


def usage_from_store(
    con: duckdb.DuckDBPyConnection, metrics: Sequence[str] = METRICS
) -> pl.DataFrame:
    """Per-job usage for the store's own placements (e.g. Philly jobs x Philly util)."""
    return _wide(con, metrics)


def usage_by_label(
    con: duckdb.DuckDBPyConnection, label: str, metrics: Sequence[str] = METRICS
) -> pl.DataFrame:
    """Per-pod (or per-``job_id`` label) usage, for sources that attribute samples."""
    if label not in ("pod", "job_id"):
        raise ValueError(label)
    keys = "namespace, pod" if label == "pod" else "job_id"
    wanted = ", ".join(f"'{m}'" for m in metrics)
    rel = con.sql(
        f"SELECT source, {keys}, metric, count(value) AS samples, avg(value) AS mean, "
        "quantile_cont(value, 0.5) AS p50, quantile_cont(value, 0.95) AS p95 "
        f"FROM gpu_samples WHERE {label} IS NOT NULL AND metric IN ({wanted}) "
        "AND value IS NOT NULL GROUP BY ALL ORDER BY ALL"
    )
    frame = pl.from_arrow(rel.to_arrow_table())
    assert isinstance(frame, pl.DataFrame)
    return frame
