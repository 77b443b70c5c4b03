"""Allocated-but-idle GPUs: GPU-hours that jobs held while the GPU did (almost) nothing,
per job, user or account, from telemetry that overlaps the jobs.

Each held window (:mod:`gpu_trace.analyses.attribution`: by GPU index, by the
dcgm-exporter ``pod`` / ``namespace`` labels, by its ``hpc_job`` label, or a whole node)
is matched
with the device's activity samples in [t_start, t_end). Activity is DCGM's SM activity
(``sm_active_ratio`` x 100) where the window has any, else ``gpu_util_pct``
(nvidia-smi ``utilization.gpu``, ``DCGM_FI_DEV_GPU_UTIL``), because SM activity counts
the share of SMs busy, whereas utilization is 100 % as soon as one kernel runs. A sample
is idle when its activity is below the threshold (default :data:`THRESHOLD_PCT`).

Per window: ``idle_gpu_hours = held GPU-hours x idle samples / samples``; a window
without samples counts as held but unmeasured (``unmeasured_gpu_hours``), never idle.
Held GPU-hours are the window's length times the GPU's share (a fractional placement
holds ``gpu_count / len(gpu_indices)`` of each GPU listed). The sample share is an
estimate of the time share when the sampling is regular, which exporters' is. A job on
part of a sampled node whose GPUs cannot be told is listed (``host (GPUs unknown)``)
with all its GPU-hours unmeasured.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import polars as pl

from gpu_trace.analyses.attribution import ABSOLUTE_SQL, HELD_SQL, warn_relative
from gpu_trace.plugins import AnalysisPlugin, option
from gpu_trace.values import check_number

if TYPE_CHECKING:  # DuckDB itself is loaded by whoever opens the connection
    import duckdb

THRESHOLD_PCT = 5.0
"""Default activity (percent) below which a sample is idle (``--threshold``): a choice,
documented in docs/metrics.md, low enough that a job doing real work between stalls is
not idle, above the 0 % of ``utilization`` views' ``idle_share`` so that a GPU touched
by a monitoring probe or a stray kernel still counts as idle."""

HOUR_US = 3_600_000_000
"""Windows and samples meet in hour buckets (a window is split into the hours it spans,
a sample falls in one): an equi-join on (GPU, hour) then the exact time test, instead
of testing every sample of a GPU against every window on it."""

WINDOWS_SQL = f"""
WITH {HELD_SQL}, act AS (
    SELECT host, gpu_index, coalesce(mig_instance, '') AS mig, time, metric,
           CASE WHEN metric = 'sm_active_ratio' THEN value * 100 ELSE value END AS pct,
           epoch_us(time) // {HOUR_US} AS hour
    FROM gpu_samples
    WHERE metric IN ('sm_active_ratio', 'gpu_util_pct') AND value IS NOT NULL
      AND gpu_index IS NOT NULL AND time >= {ABSOLUTE_SQL}
), last_seen AS (
    SELECT host, gpu_index, mig, max(time) AS last_t FROM act GROUP BY ALL
), held AS (
    SELECT h.source, h.cluster, h.job_id, h.attempt, h.host, h.gpu_index, h.mig,
           h.share, h.matched_by, h.t_start,
           coalesce(h.t_end, j.as_of_time, l.last_t) AS t_end
    FROM (SELECT * FROM held_all UNION ALL SELECT * FROM held_unknown) h
    LEFT JOIN last_seen l USING (host, gpu_index, mig)
    LEFT JOIN (SELECT source, cluster, job_id, max(as_of_time) AS as_of_time
               FROM jobs GROUP BY ALL) j
      ON j.source = h.source AND j.job_id = h.job_id
     AND j.cluster IS NOT DISTINCT FROM h.cluster
), held_hours AS (
    SELECT *, unnest(range(epoch_us(t_start) // {HOUR_US},
                           epoch_us(t_end) // {HOUR_US} + 1)) AS hour
    FROM held WHERE t_end > t_start
), per_metric AS (
    SELECT h.source, h.cluster, h.job_id, h.attempt, h.host, h.gpu_index, h.mig,
           h.t_start, a.metric, count(*) AS samples,
           sum(CASE WHEN a.pct < $threshold THEN 1 ELSE 0 END) AS idle_samples
    FROM held_hours h JOIN act a
      ON a.host = h.host AND a.gpu_index = h.gpu_index AND a.mig = h.mig
     AND a.hour = h.hour AND a.time >= h.t_start AND a.time < h.t_end
    GROUP BY ALL
), chosen AS (
    SELECT * FROM per_metric
    QUALIFY row_number() OVER (
        PARTITION BY source, cluster, job_id, attempt, host, gpu_index, mig, t_start
        ORDER BY metric = 'sm_active_ratio' DESC) = 1
)
SELECT h.source, h.cluster, h.job_id, h.attempt, h.host, h.gpu_index,
       nullif(h.mig, '') AS mig_instance, h.matched_by, h.t_start AS start_time,
       h.t_end AS end_time,
       greatest(epoch_us(h.t_end) - epoch_us(h.t_start), 0) / 3.6e9 * h.share
           AS held_gpu_hours,
       c.metric AS activity_metric, coalesce(c.samples, 0) AS samples,
       coalesce(c.idle_samples, 0) AS idle_samples
FROM held h LEFT JOIN chosen c
  ON c.source = h.source AND c.job_id = h.job_id AND c.attempt = h.attempt
 AND c.host = h.host AND c.gpu_index = h.gpu_index AND c.mig = h.mig
 AND c.t_start = h.t_start AND c.cluster IS NOT DISTINCT FROM h.cluster
WHERE h.t_end IS NOT NULL
"""


def idle_windows(con: duckdb.DuckDBPyConnection, threshold_pct: float) -> pl.DataFrame:
    """One row per held window (job attempt x GPU): held GPU-hours, the activity metric
    used, its samples and how many were idle. ``con`` needs views ``placements``,
    ``jobs`` and ``gpu_samples``.
    """
    rel = con.sql(WINDOWS_SQL, params={"threshold": threshold_pct})
    frame = pl.from_arrow(rel.to_arrow_table())
    assert isinstance(frame, pl.DataFrame)
    measured = pl.col("samples") > 0
    return frame.with_columns(
        pl.when(measured).then(pl.col("held_gpu_hours")).otherwise(0.0).alias("measured"),
        pl.when(measured)
        .then(pl.col("held_gpu_hours") * pl.col("idle_samples") / pl.col("samples"))
        .otherwise(0.0)
        .alias("idle_gpu_hours"),
    ).sort("source", "job_id", "attempt", "host", "gpu_index", nulls_last=True)


class IdleBy(StrEnum):
    """The rows of ``analyze idle``."""

    job = "job"
    user = "user"
    account = "account"
    gpu = "gpu"


KEYS: dict[IdleBy, list[str]] = {
    IdleBy.job: ["source", "cluster", "job_id", "user", "account"],
    IdleBy.user: ["source", "cluster", "user"],
    IdleBy.account: ["source", "cluster", "account"],
    IdleBy.gpu: ["source", "cluster", "job_id", "attempt", "host", "gpu_index", "mig_instance"],
}


def idle_by(windows: pl.DataFrame, jobs: pl.LazyFrame, by: IdleBy) -> pl.DataFrame:
    """Sum the windows per job, user or account (user and account from ``jobs``; a job
    not in ``jobs``, e.g. from a jobs file, has them null), or keep one row per GPU.
    """
    who = (
        jobs.select("source", "cluster", "job_id", "user", "account")
        .unique(["source", "cluster", "job_id"], keep="first")
        .collect()
    )
    frame = windows.join(who, on=["source", "cluster", "job_id"], how="left", nulls_equal=True)
    keys = KEYS[by]
    metric = pl.col("activity_metric").drop_nulls().unique().sort().str.join("+")
    out = (
        frame.group_by(keys)
        .agg(
            pl.col("job_id").n_unique().alias("jobs")
            if by in (IdleBy.user, IdleBy.account)
            else pl.col("held_gpu_hours").len().alias("gpu_windows"),
            pl.col("held_gpu_hours").sum(),
            pl.col("measured").sum().alias("measured_gpu_hours"),
            pl.col("idle_gpu_hours").sum(),
            pl.col("samples").sum(),
            metric.alias("activity_metric"),
            pl.col("matched_by").unique().sort().str.join("+"),
        )
        .with_columns(
            (pl.col("held_gpu_hours") - pl.col("measured_gpu_hours")).alias("unmeasured_gpu_hours"),
            (pl.col("idle_gpu_hours") / pl.col("measured_gpu_hours"))
            .fill_nan(None)
            .alias("idle_share"),
        )
    )
    if by is IdleBy.gpu:
        out = out.drop("gpu_windows")
    return out.sort(
        ["idle_gpu_hours", *keys], descending=[True] + [False] * len(keys), nulls_last=True
    )


def threshold(text: str) -> float:
    """``--threshold``: a percentage in [0, 100]."""
    return check_number(float(text.rstrip("% ")), "--threshold", ge=0, le=100)


@dataclass(frozen=True)
class IdleOptions:
    """`gpu-trace analyze idle` options."""

    by: IdleBy = option(IdleBy.job, "job, user, account, or gpu (one row per GPU held).")
    threshold: float = option(
        f"{THRESHOLD_PCT:g}",
        "Activity (percent) below which a sample is idle: SM activity where DCGM profiling "
        "is sampled, else GPU utilization.",
        parse=threshold,
        metavar="PCT",
    )


def connection(inputs: Any) -> duckdb.DuckDBPyConnection:
    """The whole store's ``gpu_samples`` (telemetry of any source joins any trace's
    jobs) with the ``placements`` and ``jobs`` of ``inputs`` (the page's, or those
    ``--source`` and the other filters of the command kept).
    """
    from gpu_trace.store.catalog import connect  # the store's SQL views, on demand

    con = connect(inputs.store)
    con.register("_placements", inputs.placements.collect().to_arrow())
    con.execute("CREATE OR REPLACE VIEW placements AS SELECT * FROM _placements")
    con.register("_jobs", inputs.jobs.collect().to_arrow())
    con.execute("CREATE OR REPLACE VIEW jobs AS SELECT * FROM _jobs")
    return con


def _run(inputs: Any, options: IdleOptions) -> pl.DataFrame:
    con = connection(inputs)
    warn_relative(con, "left out of idle GPU-hours (they cannot overlap any job)")
    windows = idle_windows(con, options.threshold)
    return idle_by(windows, inputs.jobs, options.by)


#: Header label and meaning of the columns (docs/metrics.md, "Idle GPUs").
GLOSSARY = {
    "held_gpu_hours": (
        "held GPU-hours",
        "GPU-hours the job held on GPUs matched to telemetry (window x GPU share)",
    ),
    "measured_gpu_hours": (
        "measured GPU-hours",
        "held GPU-hours on GPUs with activity samples in the window",
    ),
    "unmeasured_gpu_hours": (
        "unmeasured GPU-hours",
        "held GPU-hours without any activity sample (never counted idle)",
    ),
    "idle_gpu_hours": (
        "idle GPU-hours",
        "held GPU-hours x share of samples below the idle threshold",
    ),
    "idle_share": ("idle share", "idle / measured GPU-hours"),
    "activity_metric": (
        "activity metric",
        "sm_active_ratio (DCGM SM activity) where sampled, else gpu_util_pct",
    ),
    "matched_by": (
        "matched by",
        "how jobs met telemetry: gpu index (host + index + time), pod label, hpc_job label",
    ),
    "gpu_windows": ("GPU windows", "GPUs held (per attempt) that telemetry covers"),
    "idle_samples": ("idle samples", "activity samples below the threshold"),
}

PLUGIN = AnalysisPlugin(
    name="idle",
    help="Allocated-but-idle GPU-hours per job / user / account: telemetry joined to jobs "
    "by GPU index, dcgm-exporter pod/namespace or hpc_job labels (docs/metrics.md).",
    run=_run,
    options=IdleOptions,
    title="Idle GPUs (allocated but idle)",
    glossary=GLOSSARY,
    rank=55,
)
