"""The definitions every analysis shares — one place, so "GPU job", "GPU time" and
"failed" mean the same thing in the summary, the failure breakdown and the report.

Glossary (also in docs/metrics.md):

- **GPU job**: a job with ``gpus > 0`` (fractional shares count). CPU job: ``gpus == 0``.
- **GPU time** (``gpu_time_s``, GPU-seconds): ``gpus x run_s``. Philly ``run_s`` includes
  the gaps between attempts (the trace owners' rule).
- **Queueing delay** (``queue_s``): first start - submission.
- **Final status classes** (Helios convention, extended): ``completed``; ``cancelled``
  (a kill by a user or an administrator, Philly ``Killed``); ``failed`` (unsuccessful)
  = failed + oom + timeout + node_fail; ``preempted`` (stopped by the scheduler for other
  work: final, but not the user's failure, so reported apart); everything else (running,
  pending, unknown) is ``unfinished`` and excluded from status *rates*.
- **Allocation** (``allocation_pct``): GPUs held by running jobs / GPUs installed, time-
  weighted over each bin. This is what Helios calls "utilization"; it says nothing about
  whether kernels ran.
- **Capacity** (``capacity_gpus``, ``capacity_basis``): installed GPUs per bin, a step
  function of the inventory snapshots (the first snapshot before it), else a static
  inventory, else the peak concurrent GPUs allocated (``inferred``):
  :mod:`gpu_trace.analyses.occupancy`.
- **Pending / backlog** (``pending_jobs``, ``pending_gpus``): GPU jobs submitted and not
  yet started (nor ended) at a time; waits of jobs still pending at the as-of instant are
  censored (waits so far): :mod:`gpu_trace.analyses.backlog`.
- **Measured utilization** (``gpu_util_pct``): the device's own activity counter
  (nvidia-smi / NVML / DCGM), from ``gpu_samples``.
"""

from __future__ import annotations

import polars as pl

GPU_JOB = pl.col("gpus") > 0
CPU_JOB = pl.col("gpus").fill_null(0) == 0

STATUS_CLASSES = ("completed", "cancelled", "failed", "preempted")
"""The final-status classes, in the order tables and charts show them."""

FAILED_STATUSES = ("failed", "oom", "timeout", "node_fail")
"""Canonical statuses whose class is ``failed``: the job itself ended unsuccessfully
(out of memory is the job's own failure; Slurm counts it apart, so do we in ``status``)."""

ADMIN_USERS = ("0", "root")
"""``cancelled_by`` values that mean an administrator (Slurm ``CANCELLED by 0``: uid 0)."""


def exact_sum(expr: pl.Expr, scale: float = 1e6) -> pl.Expr:
    """Sum of ``expr`` that is the same bytes on every run: the values are rounded to
    ``1/scale`` and added as integers, whose sum does not depend on order.

    A plain float sum adds partial sums in an order that depends on threads and chunk
    boundaries, so the last digit moved from run to run (``failures --by cause``,
    ``fragmentation``). At the default scale that is a micro-unit (a micro-GPU-second),
    far below anything the traces record; the integers hold totals up to ~9.2e12.
    """
    return (expr * scale).round().cast(pl.Int64).sum() / scale


def status_class() -> pl.Expr:
    """Map canonical status to completed / cancelled / failed / preempted / unfinished."""
    return (
        pl.when(pl.col("status") == "completed")
        .then(pl.lit("completed"))
        .when(pl.col("status") == "cancelled")
        .then(pl.lit("cancelled"))
        .when(pl.col("status").is_in(FAILED_STATUSES))
        .then(pl.lit("failed"))
        .when(pl.col("status") == "preempted")
        .then(pl.lit("preempted"))
        .otherwise(pl.lit("unfinished"))
        .alias("status_class")
    )


def admin_cancel(jobs: pl.LazyFrame) -> pl.Expr:
    """Whether a job's ``cancelled_by`` names an administrator (:data:`ADMIN_USERS`).

    A store written before ``cancelled_by`` existed has no such column: no job there is
    known to be an administrator's cancellation (False, not an error).
    """
    if "cancelled_by" not in jobs.collect_schema().names():
        return pl.lit(False)
    return pl.col("cancelled_by").str.strip_chars().is_in(ADMIN_USERS).fill_null(False)


def gpu_time_s() -> pl.Expr:
    """GPU-seconds held by a job (null when its run time is unknown)."""
    return (pl.col("gpus") * pl.col("run_s")).alias("gpu_time_s")


SIZE_EDGES = (1, 2, 4, 8, 16, 32, 64)
"""Upper edges of the job-size buckets (GPUs): <1 (shared), 1, 2, 3-4, 5-8, 9-16, ...,
>64 — the Helios buckets, with fractional requests kept apart."""


def size_bucket() -> pl.Expr:
    """Human-readable GPU-count bucket for a job, as an ordered ``Enum`` of
    :func:`size_labels`: every sort, table and chart axis keeps the buckets in size
    order (1, 2, 3-4, 5-8, ..., not "33-64" before "5-8"); CSV / JSON get the labels.
    """
    g = pl.col("gpus")
    expr = pl.when(g.is_null()).then(pl.lit("unknown")).when(g == 0).then(pl.lit("0 (CPU)"))
    expr = expr.when(g < 1).then(pl.lit("<1 (shared)"))
    low = 1
    for edge in SIZE_EDGES:
        label = str(edge) if low == edge else f"{low}-{edge}"
        expr = expr.when(g <= edge).then(pl.lit(label))
        low = edge + 1
    last = expr.otherwise(pl.lit(f">{SIZE_EDGES[-1]}"))
    return last.cast(pl.Enum(size_labels())).alias("size_bucket")


def size_labels() -> list[str]:
    """All :func:`size_bucket` labels, smallest first."""
    labels = ["0 (CPU)", "<1 (shared)"]
    low = 1
    for edge in SIZE_EDGES:
        labels.append(str(edge) if low == edge else f"{low}-{edge}")
        low = edge + 1
    return [*labels, f">{SIZE_EDGES[-1]}", "unknown"]


def size_rank() -> pl.Expr:
    """Sort key of the ``size_bucket`` column (0 = CPU jobs)."""
    return (
        pl.col("size_bucket")
        .cast(pl.String)
        .replace_strict({label: i for i, label in enumerate(size_labels())}, return_dtype=pl.Int32)
    )


def freq_to_polars(freq: str) -> tuple[str, int]:
    """'1min' / '10min' / '1h' / '1d' / '30s' -> (polars duration string, seconds)."""
    units = {"s": ("s", 1), "min": ("m", 60), "m": ("m", 60), "h": ("h", 3600), "d": ("d", 86400)}
    text = freq.strip().lower()
    num = "".join(ch for ch in text if ch.isdigit()) or "1"
    unit = text[len(num) :] if text.startswith(num) else text
    if unit not in units or int(num) <= 0:
        msg = f"frequency {freq!r}: use e.g. 30s, 1min, 10min, 1h, 1d"
        raise ValueError(msg)
    pl_unit, seconds = units[unit]
    return f"{int(num)}{pl_unit}", int(num) * seconds
