"""Energy per job, user or VC: measured from ``power_w`` telemetry where the GPUs a job
held were sampled, else from the power model (:mod:`gpu_trace.analyses.power`).

Telemetry rule (docs/energy.md): per GPU, readings at the same instant are averaged,
consecutive readings form segments, and the power between two readings is their linear
interpolation (trapezoid rule). A segment longer than ``gap_factor`` x the GPU's median
sampling interval (or ``max_gap_s`` when given) is a gap: it is not bridged, and the
held time it covers is reported as ``gap_gpu_s``; so is held time before a GPU's first or
after its last reading. For every window ``covered + gap = held`` exactly. Segments are
clipped to each job's held windows (:mod:`gpu_trace.analyses.attribution`: by host name
and GPU index, by the dcgm-exporter ``pod`` / ``namespace`` or ``hpc_job`` labels, or a
whole node; telemetry from any source joins any trace's placements), in one DuckDB
range join. Relative-time readings (files without timestamps, 1970-based) form series
of their own (``time_basis``), never bridged to absolute ones of the same GPU nor
charged to jobs; a ``warning:`` line says so. A GPU shared by a fractional placement (gpu_count < GPUs listed) is charged
``gpu_count / len(gpu_indices)`` of the device's energy.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from gpu_trace.analyses import power as pwr
from gpu_trace.analyses.attribution import ABSOLUTE_SQL, HELD_SQL, warn_relative
from gpu_trace.analyses.definitions import GPU_JOB
from gpu_trace.analyses.job_usage import read_jobs
from gpu_trace.analyses.power import PowerModel
from gpu_trace.analyses.utilization import per_job
from gpu_trace.plugins import AnalysisPlugin, option
from gpu_trace.values import check_number, parse_duration

if TYPE_CHECKING:  # DuckDB itself is loaded by whoever opens the connection
    import duckdb

GAP_FACTOR = 3.0
"""A segment longer than this many median sampling intervals is a gap."""

J_PER_KWH = 3.6e6

_SEGMENTS = f"""
WITH pw AS (
    SELECT host, gpu_index,
           CASE WHEN time < {ABSOLUTE_SQL} THEN 'relative' ELSE 'absolute' END AS time_basis,
           time, avg(value) AS w
    FROM gpu_samples
    WHERE metric = 'power_w' AND value IS NOT NULL AND value >= 0
      AND gpu_index IS NOT NULL AND mig_instance IS NULL
    GROUP BY ALL
), seg AS (
    SELECT host, gpu_index, time_basis, time AS t0, w AS w0,
           lead(time) OVER g AS t1, lead(w) OVER g AS w1,
           (epoch_us(lead(time) OVER g) - epoch_us(time)) / 1e6 AS dt
    FROM pw
    WINDOW g AS (PARTITION BY host, gpu_index, time_basis ORDER BY time)
), med AS (
    SELECT host, gpu_index, time_basis, median(dt) AS med_dt, min(t0) AS first_t,
           max(t1) AS last_t
    FROM seg WHERE t1 IS NOT NULL GROUP BY ALL
), bridged AS (
    SELECT s.host, s.gpu_index, s.time_basis, s.t0, s.t1, s.w0, s.w1, s.dt
    FROM seg s JOIN med m USING (host, gpu_index, time_basis)
    WHERE s.t1 IS NOT NULL AND s.dt > 0
      AND s.dt <= coalesce(CAST($max_gap AS DOUBLE), $factor * m.med_dt)
)
"""

WINDOWS_SQL = (
    _SEGMENTS
    + ", "
    + HELD_SQL.strip()
    + """
, held AS (
    SELECT source, cluster, job_id, attempt, host, t_start, t_end, gpu_index, share
    FROM held_all
    WHERE t_end IS NOT NULL AND t_end > t_start AND mig = ''
), clipped AS (
    SELECT h.source, h.cluster, h.job_id, h.attempt, h.host, h.gpu_index, h.t_start,
           b.t0, b.w0, b.w1, b.dt,
           (epoch_us(greatest(h.t_start, b.t0)) - epoch_us(b.t0)) / 1e6 AS a,
           (epoch_us(least(h.t_end, b.t1)) - epoch_us(b.t0)) / 1e6 AS z
    FROM held h JOIN bridged b
      ON b.host = h.host AND b.gpu_index = h.gpu_index AND b.time_basis = 'absolute'
     AND b.t0 < h.t_end AND b.t1 > h.t_start
), integ AS (
    SELECT source, cluster, job_id, attempt, host, gpu_index, t_start,
           sum(z - a) AS covered_s,
           sum((2 * w0 + (w1 - w0) * (a + z) / dt) / 2 * (z - a)) AS energy_j
    FROM clipped GROUP BY ALL
)
SELECT h.source, h.cluster, h.job_id, h.attempt, h.host, h.gpu_index, h.share,
       (epoch_us(h.t_end) - epoch_us(h.t_start)) / 1e6 AS held_s,
       coalesce(i.covered_s, 0) AS covered_s,
       coalesce(i.energy_j, 0) * h.share AS energy_j
FROM held h LEFT JOIN integ i
  ON i.source = h.source AND i.job_id = h.job_id AND i.attempt = h.attempt
 AND i.host = h.host AND i.gpu_index = h.gpu_index AND i.t_start = h.t_start
 AND i.cluster IS NOT DISTINCT FROM h.cluster
"""
)

DEVICES_SQL = (
    _SEGMENTS
    + """
SELECT m.host, m.gpu_index, m.time_basis, m.first_t AS first_time, m.last_t AS last_time,
       (epoch_us(m.last_t) - epoch_us(m.first_t)) / 1e6 AS span_s,
       coalesce(sum(b.dt), 0) AS covered_s,
       coalesce(sum((b.w0 + b.w1) / 2 * b.dt), 0) AS energy_j,
       m.med_dt AS median_interval_s
FROM med m LEFT JOIN bridged b USING (host, gpu_index, time_basis)
GROUP BY ALL
"""
)


def _frame(con: duckdb.DuckDBPyConnection, sql: str, max_gap_s: float | None) -> pl.DataFrame:
    rel = con.sql(sql, params={"max_gap": max_gap_s, "factor": GAP_FACTOR})
    assert rel is not None
    frame = pl.from_arrow(rel.to_arrow_table())
    assert isinstance(frame, pl.DataFrame)
    return frame


def telemetry_windows(
    con: duckdb.DuckDBPyConnection, max_gap_s: float | None = None
) -> pl.DataFrame:
    """One row per (placement, GPU held): held, covered and gap seconds and the energy
    integrated from ``power_w`` over the covered part.
    """
    frame = _frame(con, WINDOWS_SQL, max_gap_s)
    return frame.with_columns(
        (pl.col("held_s") - pl.col("covered_s")).clip(lower_bound=0).alias("gap_s")
    ).sort("source", "job_id", "attempt", "host", "gpu_index")


def device_energy(con: duckdb.DuckDBPyConnection, max_gap_s: float | None = None) -> pl.DataFrame:
    """Energy per sampled GPU over its whole sampled span (no jobs needed)."""
    frame = _frame(con, DEVICES_SQL, max_gap_s)
    return frame.select(
        "host",
        "gpu_index",
        "time_basis",
        "first_time",
        "last_time",
        (pl.col("energy_j") / J_PER_KWH).alias("energy_kwh"),
        (pl.col("energy_j") / pl.col("covered_s")).fill_nan(None).alias("mean_power_w"),
        "covered_s",
        (pl.col("span_s") - pl.col("covered_s")).clip(lower_bound=0).alias("gap_s"),
        "median_interval_s",
    ).sort("host", "gpu_index", "time_basis")


def _model_columns(jobs: pl.LazyFrame, model: PowerModel) -> pl.LazyFrame:
    """Join each job's GPU type to the table (unknown types -> the default model)."""
    default = model.gpus[model.default]
    key = pl.col("gpu_type").str.split("|").list.first().str.strip_chars().str.to_uppercase()
    return (
        jobs.with_columns(key.alias("_alias"))
        .join(model.lookup().lazy(), on="_alias", how="left")
        .with_columns(
            pl.col("power_model").fill_null(default.name),
            pl.col("idle_w").fill_null(default.idle_w),
            pl.col("busy_w").fill_null(default.busy_w),
        )
        .drop("_alias")
    )


def per_job_energy(
    jobs: pl.LazyFrame,
    con: duckdb.DuckDBPyConnection,
    model: PowerModel,
    max_gap_s: float | None = None,
) -> pl.DataFrame:
    """Per job: GPU energy from telemetry (``basis = telemetry``) when any held GPU-second
    is covered by power readings, else from the model at the job's measured mean
    utilization (``model_util``) or at busy power (``model_alloc``); plus the modelled
    host baseline share. Jobs in ``placements`` but not ``jobs`` (a ``--jobs`` file) count
    with their held GPU-seconds.
    """
    win = telemetry_windows(con, max_gap_s)
    tele = win.group_by("source", "job_id").agg(
        pl.col("cluster").first().alias("_cluster"),
        pl.col("energy_j").sum().alias("telemetry_energy_j"),
        pl.col("held_s").sum().alias("held_gpu_s"),
        pl.col("covered_s").sum().alias("covered_gpu_s"),
        pl.col("gap_s").sum().alias("gap_gpu_s"),
    )
    util = per_job(con, "gpu_util_pct").select(
        "source", "job_id", (pl.col("mean") / 100).clip(0.0, 1.0).alias("util")
    )
    base = jobs.filter(GPU_JOB.fill_null(False)).select(
        "source", "cluster", "job_id", "user", "vc", "gpu_type", "gpus", "run_s"
    )
    frame = (
        base.join(tele.lazy(), on=["source", "job_id"], how="full", coalesce=True)
        .join(util.lazy(), on=["source", "job_id"], how="left")
        .with_columns(pl.coalesce("cluster", "_cluster").alias("cluster"))
        .drop("_cluster")
    )
    frame = _model_columns(frame, model)
    gpu_s = pl.coalesce(pl.col("gpus") * pl.col("run_s"), pl.col("held_gpu_s"))
    watts = pl.col("idle_w") + (pl.col("busy_w") - pl.col("idle_w")) * pl.col("util").fill_null(1)
    measured = pl.col("covered_gpu_s").fill_null(0) > 0
    gpu_j = pl.when(measured).then(pl.col("telemetry_energy_j")).otherwise(gpu_s * watts)
    host_j = gpu_s * model.host_w_per_gpu
    out = frame.with_columns(
        gpu_s.alias("gpu_time_s"),
        pl.when(measured)
        .then(pl.lit("telemetry"))
        .when(pl.col("util").is_not_null())
        .then(pl.lit("model_util"))
        .otherwise(pl.lit("model_alloc"))
        .alias("basis"),
        (gpu_j / J_PER_KWH).alias("gpu_energy_kwh"),
        (host_j / J_PER_KWH).alias("host_energy_kwh"),
        pl.when(measured)
        .then(pl.col("telemetry_energy_j") / pl.col("covered_gpu_s"))
        .otherwise(watts)
        .alias("mean_gpu_power_w"),
    ).with_columns(
        (pl.col("gpu_energy_kwh") + pl.col("host_energy_kwh")).alias("energy_kwh"),
        (pl.col("covered_gpu_s") / pl.col("held_gpu_s")).fill_nan(None).alias("coverage"),
        pl.col("covered_gpu_s").fill_null(0),
        pl.col("gap_gpu_s").fill_null(0),
    )
    return (
        out.select(
            "source",
            "cluster",
            "job_id",
            "user",
            "vc",
            "gpu_type",
            "power_model",
            "gpus",
            (pl.col("gpu_time_s") / 3600).alias("gpu_hours"),
            "basis",
            "util",
            "mean_gpu_power_w",
            "gpu_energy_kwh",
            "host_energy_kwh",
            "energy_kwh",
            "covered_gpu_s",
            "gap_gpu_s",
            "coverage",
        )
        .sort("source", "cluster", "job_id", nulls_last=True)
        .collect()
    )


def energy_by(job_energy: pl.DataFrame, by: str) -> pl.DataFrame:
    """Sum per-job energy over ``user`` or ``vc`` (per source and cluster), with how
    many jobs used each basis.
    """
    if by not in ("user", "vc", "namespace"):
        msg = "by must be job, user, vc, namespace or gpu"
        raise ValueError(msg)
    if by == "namespace":  # a Kubernetes job's vc is its namespace (loaders/kubernetes.py)
        job_energy = job_energy.rename({"vc": "namespace"})
    keys = ["source", "cluster", by]
    basis = pl.col("basis")
    return (
        job_energy.group_by(keys)
        .agg(
            pl.len().alias("jobs"),
            (basis == "telemetry").sum().alias("telemetry_jobs"),
            (basis != "telemetry").sum().alias("model_jobs"),
            pl.col("gpu_hours").sum(),
            pl.col("gpu_energy_kwh").sum(),
            pl.col("host_energy_kwh").sum(),
            pl.col("energy_kwh").sum(),
            pl.col("covered_gpu_s").sum(),
            pl.col("gap_gpu_s").sum(),
        )
        .with_columns(
            pl.when(pl.col("model_jobs") == 0)
            .then(pl.lit("telemetry"))
            .when(pl.col("telemetry_jobs") == 0)
            .then(pl.lit("model"))
            .otherwise(pl.lit("mixed"))
            .alias("basis")
        )
        .sort(keys, nulls_last=True)
    )


class EnergyBy(StrEnum):
    """The rows of ``analyze energy``."""

    job = "job"
    user = "user"
    vc = "vc"
    namespace = "namespace"
    gpu = "gpu"


@dataclass(frozen=True)
class EnergyOptions:
    """`gpu-trace analyze energy` options. ``max_gap`` is kept as typed and checked when
    the command runs, so a bad value reads ``error: --max-gap ...`` like every run-time
    check of this command.
    """

    by: EnergyBy = option(
        EnergyBy.job,
        "job, user, vc, namespace (Kubernetes: the vc column), or gpu (each sampled "
        "device, no jobs needed).",
    )
    power: Path | None = option(None, "TOML power table overriding the built-in one.")
    jobs_file: Path | None = option(
        None,
        "CSV job_id,host,gpu_indices,start,end (gpu_indices like 0;1; ISO times): the "
        "jobs to charge telemetry to. Default: the store's placements.",
        flag="--jobs-file",
        metavar="FILE",
        deprecated="--jobs",
    )
    max_gap: str | None = option(
        None,
        "Gap between power readings (90s, 5m; bare number: seconds) above which they are "
        "not bridged (default: 3 x each GPU's median interval).",
        flag="--max-gap",
    )


def _held(inputs: Any, jobs_file: Path | None) -> pl.DataFrame:
    """The placements energy is charged to: a jobs file's, or the page's sources'."""
    if jobs_file is None:
        frame: pl.DataFrame = inputs.placements.collect()
        return frame
    return read_jobs(jobs_file).with_columns(
        pl.col("gpu_indices").list.len().cast(pl.Float64).alias("gpu_count")
    )


def _run(inputs: Any, options: EnergyOptions) -> pl.DataFrame:
    max_gap = None
    if options.max_gap is not None:
        max_gap = check_number(parse_duration(options.max_gap, "--max-gap"), "--max-gap", gt=0)
    model = pwr.load(options.power)
    con = inputs.connection()  # the store's SQL views, restricted to the scope
    if options.by is EnergyBy.gpu:
        warn_relative(con, "their energy is a row of its own (time_basis relative)")
        return device_energy(con, max_gap)
    warn_relative(con, "they are not charged to any job")
    jobs = inputs.jobs.head(0) if options.jobs_file is not None else inputs.jobs
    if options.jobs_file is not None or inputs.sources:
        con.register("_placements", _held(inputs, options.jobs_file).to_arrow())
        con.execute("CREATE OR REPLACE VIEW placements AS SELECT * FROM _placements")
    table = per_job_energy(jobs, con, model, max_gap)
    return table if options.by is EnergyBy.job else energy_by(table, options.by.value)


#: Header label and meaning of the columns (docs/metrics.md, "Energy").
GLOSSARY = {
    # Headers are looked up by column name across the report: `basis` also labels the
    # capacity table's column, so the meaning covers both.
    "basis": (
        "basis",
        "where the number comes from: energy telemetry, model_util or model_alloc (per "
        "group: telemetry, model, mixed); capacity published, machine_list or inferred_*",
    ),
    "power_model": ("power model", "power_models.toml entry the job's gpu_type matched"),
    "util": ("utilization (0-1)", "measured mean gpu_util_pct / 100, when known"),
    "mean_gpu_power_w": ("mean GPU power (W)", "GPU energy / covered GPU-seconds, or P(u)"),
    "gpu_energy_kwh": ("GPU energy (kWh)", "integrated power_w telemetry, else the power model"),
    "host_energy_kwh": ("host energy (kWh)", "modelled host baseline share per GPU held"),
    "energy_kwh": ("energy (kWh)", "GPU + host energy"),
    "covered_gpu_s": ("covered GPU time", "held GPU-seconds with power readings"),
    "gap_gpu_s": ("uncovered GPU time", "held GPU-seconds without readings in the gap limit"),
    "coverage": ("coverage", "covered / held GPU-seconds"),
    "telemetry_jobs": ("jobs (telemetry)", "jobs whose energy comes from telemetry"),
    "model_jobs": ("jobs (model)", "jobs whose energy comes from the power model"),
}

PLUGIN = AnalysisPlugin(
    name="energy",
    help="Energy (kWh) per job / user / VC: integrated power_w telemetry over the GPUs and "
    "times each job held (basis telemetry), else the power model (docs/energy.md).",
    run=_run,
    options=EnergyOptions,
    title="Energy",
    glossary=GLOSSARY,
    needs_jobs=False,
    rank=50,
)
