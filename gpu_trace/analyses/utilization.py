"""Measured GPU utilization (device activity from telemetry), as opposed to allocation.

- :func:`sample_distribution`: over all GPU-samples of a metric: share of idle samples
  (value 0), mean, quantiles and a 10-point histogram (Philly: 32.2 % of GPU-minutes at
  0 %; Acme: ~31-34 %).
- :func:`per_job`: each job's mean / p50 / p95 of a metric over the samples of the GPUs
  it held while it held them: a range join (host, GPU index, time within the attempt) in
  DuckDB, which plans it as an interval join rather than a row loop; the held GPUs come
  from :mod:`gpu_trace.analyses.attribution` (GPU indices, dcgm-exporter labels, whole
  nodes), so Kubernetes pods and Slurm jobs get usage without a jobs file.

Declares ``analyze utilization`` (allocation over time from :mod:`occupancy`, or the
measured distribution) and ``analyze per-job``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import polars as pl

from gpu_trace.analyses import occupancy as occ
from gpu_trace.analyses import periods
from gpu_trace.analyses.attribution import ABSOLUTE_SQL, HELD_SQL
from gpu_trace.errors import GpuTraceError, UsageError
from gpu_trace.plugins import AnalysisPlugin, option
from gpu_trace.values import choose

if TYPE_CHECKING:  # DuckDB itself is loaded by whoever opens the connection
    import duckdb


def sample_distribution(samples: pl.LazyFrame, metric: str = "gpu_util_pct") -> pl.LazyFrame:
    """Distribution of one metric's samples per source and cluster."""
    v = pl.col("value")
    return (
        samples.filter((pl.col("metric") == metric) & v.is_not_null())
        .group_by("source", "cluster")
        .agg(
            pl.len().alias("samples"),
            (v == 0).mean().alias("idle_share"),
            v.mean().alias("mean"),
            v.median().alias("median"),
            v.quantile(0.9, interpolation="linear").alias("p90"),
            (v >= 99).mean().alias("saturated_share"),
        )
        .sort("source", "cluster")
    )


def histogram(
    samples: pl.LazyFrame, metric: str = "gpu_util_pct", width: float = 10.0
) -> pl.LazyFrame:
    """Sample counts in ``width``-wide bins of the metric, with shares per group."""
    v = pl.col("value")
    return (
        samples.filter((pl.col("metric") == metric) & v.is_not_null())
        .with_columns(((v / width).floor() * width).clip(upper_bound=100.0 - width).alias("bin"))
        .group_by("source", "cluster", "bin")
        .agg(pl.len().alias("samples"))
        .with_columns(
            (pl.col("samples") / pl.col("samples").sum().over("source", "cluster")).alias("share")
        )
        .sort("source", "cluster", "bin")
    )


PER_JOB_SQL = f"""
WITH {HELD_SQL}, held AS (
    SELECT source, cluster, job_id, host, mig, t_start, t_end, gpu_index,
           unnest(range(epoch_us(t_start) // 3600000000,
                        epoch_us(t_end) // 3600000000 + 1)) AS hour
    FROM held_all WHERE t_end IS NOT NULL AND t_end > t_start
), s AS (
    SELECT host, gpu_index, coalesce(mig_instance, '') AS mig, time, value,
           epoch_us(time) // 3600000000 AS hour
    FROM gpu_samples
    WHERE metric = $metric AND value IS NOT NULL AND time >= {ABSOLUTE_SQL}
)
SELECT h.source, h.cluster, h.job_id,
       count(*) AS samples,
       avg(s.value) AS mean,
       quantile_cont(s.value, 0.5) AS p50,
       quantile_cont(s.value, 0.95) AS p95,
       avg(CASE WHEN s.value = 0 THEN 1.0 ELSE 0.0 END) AS idle_share
FROM held h
JOIN s
  ON s.host = h.host AND s.gpu_index = h.gpu_index AND s.mig = h.mig AND s.hour = h.hour
 AND s.time >= h.t_start AND s.time < h.t_end
GROUP BY ALL
"""
"""Per job: the samples of ``$metric`` on the GPUs it held while it held them, held
windows as :mod:`gpu_trace.analyses.attribution` finds them (GPU index, dcgm-exporter
pod / namespace or hpc_job labels, whole nodes), telemetry of any source. Windows and
samples meet in hour buckets (each window split into the hours it spans; a sample lies
in one), an equi-join, then the exact time test. Relative-time samples (1970-based, no
timestamps) join no job, not even a relative-time trace's: their zeros are unrelated."""


def per_job(con: duckdb.DuckDBPyConnection, metric: str = "gpu_util_pct") -> pl.DataFrame:
    """Per-job statistics of ``metric`` over the GPUs and times each job held."""
    rel = con.sql(PER_JOB_SQL, params={"metric": metric})
    assert rel is not None
    frame = pl.from_arrow(rel.to_arrow_table())
    assert isinstance(frame, pl.DataFrame)
    return frame.sort("source", "cluster", "job_id")


class View(StrEnum):
    """What ``analyze utilization`` shows."""

    series = "series"
    diurnal = "diurnal"
    monthly = "monthly"
    measured = "measured"


@dataclass(frozen=True)
class UtilizationOptions:
    """`gpu-trace analyze utilization` options."""

    freq: str = option("1h", "Bin width: 30s, 1min, 10min, 1h, 1d.")
    by: str = option("cluster", "cluster, vc or gpu_type.")
    view: View = option(
        View.series,
        "series (allocation per bin), diurnal (weekday x hour profile), monthly, "
        "or measured (device activity from gpu_samples).",
    )
    rule: occ.Rule = option(
        occ.Rule.time_weighted,
        "time-weighted (each bin's mean GPUs held) or helios (HeliosArtifact's count: a job "
        "in every bin from its start to its end bin, capped at the installed GPUs).",
    )


def _utilization(inputs: Any, options: UtilizationOptions) -> pl.LazyFrame:
    choose("--by value", options.by, occ.OCCUPANCY_BY)
    period = inputs.scope.period
    if period and options.view is not View.series:
        msg = f"--period tables the allocation series; it does not go with --view {options.view}"
        raise UsageError(msg)
    if options.view is View.measured:
        return sample_distribution(inputs.gpu_samples)
    # Running jobs hold their GPUs until the as-of instant; the window clips every job
    # (Inputs.clipped_jobs, gpu_trace.analyses.scope).
    try:
        series = occ.occupancy(
            inputs.clipped_jobs,
            inputs.capacity,
            inputs.machines,
            freq=periods.BIN if period else options.freq,
            by=options.by,
            rule=options.rule,
        )
    except ValueError as exc:
        raise GpuTraceError(str(exc)) from None
    if period:
        keys = ["source", "cluster", *([options.by] if options.by != "cluster" else [])]
        return periods.allocation_by_period(series, period, inputs.tz, keys)
    if options.view is View.diurnal:
        return occ.profiles(series, inputs.tz)
    if options.view is View.monthly:
        return occ.monthly(series)
    return series


@dataclass(frozen=True)
class PerJobOptions:
    """`gpu-trace analyze per-job` options."""

    metric: str = option("gpu_util_pct", "gpu_samples metric.")


def _per_job(inputs: Any, options: PerJobOptions) -> pl.DataFrame:
    # The store's SQL views (DuckDB, loaded on demand), restricted to the scope.
    return per_job(inputs.connection(), options.metric)


UTILIZATION = AnalysisPlugin(
    name="utilization",
    help="GPU allocation over time (allocated / installed GPUs) or measured utilization.",
    run=_utilization,
    options=UtilizationOptions,
    title="Utilization (allocation)",
    glossary={
        "capacity_basis": (
            "capacity basis",
            "where capacity_gpus comes from: inventory (node snapshots in force, the first "
            "before it), trace (the trace's capacity file) or inferred (no inventory: peak "
            "concurrent GPUs allocated)",
        ),
    },
    rank=20,
    periods=True,
)


PER_JOB = AnalysisPlugin(
    name="per-job",
    help="Each job's mean / p50 / p95 of a telemetry metric over the GPUs it held.",
    run=_per_job,
    options=PerJobOptions,
    sources=False,
    needs_jobs=False,
    rank=110,
)


PLUGINS = (UTILIZATION, PER_JOB)
