"""Replay metrics, each defined once (glossary in ``docs/replay.md``).

For job j with arrival a_j, first start s_j, finish c_j, service demand d_j and GPUs
g_j: queueing delay q_j = s_j - a_j; JCT_j = c_j - a_j; bounded slowdown
bsld_j = max(1, JCT_j / max(d_j, 10 s)); makespan = max c_j - min a_j. Cluster
metrics are time-weighted over the engine's step-function timeline.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from gpu_trace.replay.cluster import MILLI
from gpu_trace.replay.kernel.engine import Timeline

BSLD_THRESHOLD_S = 10.0
F64 = npt.NDArray[np.float64]


def jain(x: F64) -> float:
    """Jain's fairness index (sum x)^2 / (n sum x^2): 1 = all equal, 1/n = one takes all."""
    x = x[np.isfinite(x)]
    if not x.size or not (x**2).sum():
        return float("nan")
    return float(x.sum() ** 2 / (x.size * (x**2).sum()))


def _pct(x: F64, q: float) -> float:
    return float(np.percentile(x, q)) if x.size else float("nan")


def _mean(x: F64) -> float:
    return float(x.mean()) if x.size else float("nan")


def _makespan(fin: pl.DataFrame, jobs: pl.DataFrame) -> float:
    if not fin.height:
        return float("nan")
    last = fin["finish_time_s"].to_numpy().astype(np.float64).max()
    first = jobs["arrival_time_s"].to_numpy().astype(np.float64).min()
    return float(last - first)


def job_metrics(jobs: pl.DataFrame, cluster_gpus: float) -> dict[str, Any]:
    """Headline metrics over finished jobs (columns of ``replay_jobs``)."""
    fin = jobs.filter(pl.col("outcome") == "finished")
    jct = fin["jct_s"].to_numpy().astype(np.float64)
    started = jobs.filter(pl.col("start_time_s").is_not_null())
    queue = started["queue_s"].to_numpy().astype(np.float64)
    bsld = fin["bsld"].to_numpy().astype(np.float64)
    out: dict[str, Any] = {
        "jct_mean_s": _mean(jct),
        "jct_p50_s": _pct(jct, 50),
        "jct_p95_s": _pct(jct, 95),
        "jct_p99_s": _pct(jct, 99),
        "queue_mean_s": _mean(queue),
        "queue_p99_s": _pct(queue, 99),
        "bsld_mean": _mean(bsld),
        "makespan_s": _makespan(fin, jobs),
    }
    per_user = (
        fin.group_by("user")
        .agg(
            pl.col("bsld").mean().alias("sd"),
            (pl.col("jct_s") / pl.col("duration_s").clip(lower_bound=BSLD_THRESHOLD_S))
            .mean()
            .alias("ratio"),
            (pl.col("gpus").mean()).alias("g"),
        )
        .sort("user")
    )
    known = per_user.filter(pl.col("user").is_not_null() & (pl.col("user") != ""))
    # fairness across users needs users: a trace without them (openb) would be one
    # "user" and score a meaningless 1.0
    out["jain_slowdown"] = (
        jain(known["sd"].to_numpy().astype(np.float64)) if known.height >= 2 else None
    )
    users = max(per_user.height, 1)
    # finish-time fairness (Themis): JCT against running alone on a 1/N share, N = users
    share = np.maximum(1.0, users * per_user["g"].to_numpy() / max(cluster_gpus, 1e-9))
    rho = per_user["ratio"].to_numpy() / share
    out["ftf_max_ratio"] = float(rho.max()) if rho.size else float("nan")
    return out


def _integral(times: F64, values: F64, at: F64) -> F64:
    """Integral of the step function (values[i] on [times[i], times[i+1])) from
    times[0] to each point of ``at``.
    """
    if times.size == 0:
        return np.zeros_like(at)
    seg = np.diff(times) * values[:-1]
    cum = np.concatenate([[0.0], np.cumsum(seg)])
    k = np.clip(np.searchsorted(times, at, side="right") - 1, 0, times.size - 1)
    out: F64 = cum[k] + values[k] * (at - times[k])
    out[at <= times[0]] = 0.0
    return out


def _working(tl: Timeline) -> F64:
    """Allocated milli-GPU per timeline point, without nodes out of service (a failed
    or powered-off node's GPUs are held by a pseudo-allocation, not by work).
    """
    used = np.asarray(tl.used_milli, dtype=np.float64)
    if len(tl.down_milli) == used.size and used.size:
        used = used - np.asarray(tl.down_milli, dtype=np.float64)
    return used


def cluster_metrics(
    tl: Timeline, capacity_milli: int, last_arrival_s: float | None = None
) -> dict[str, float]:
    """Time-weighted allocation over the arrival window [first event, last arrival]
    (the drain after the last arrival would dilute it), and the mean unallocated GPUs
    over the time some job was waiting.
    """
    t = np.asarray(tl.time, dtype=np.float64)
    if t.size < 2:
        return {"alloc_mean_ratio": float("nan"), "unallocated_gpus_loaded": float("nan")}
    used = _working(tl)
    waiting = np.asarray(tl.waiting, dtype=np.float64)
    dt = np.diff(t)
    end = t[-1] if last_arrival_s is None or last_arrival_s <= t[0] else last_arrival_s
    span = end - t[0]
    integ = _integral(t, used, np.asarray([end]))
    alloc = float(integ[0] / span / capacity_milli) if span > 0 else math.nan
    loaded = waiting[:-1] > 0
    busy = float(dt[loaded].sum())
    unalloc = (
        float(((capacity_milli - used[:-1])[loaded] * dt[loaded]).sum() / busy / MILLI)
        if busy > 0
        else 0.0
    )
    return {"alloc_mean_ratio": alloc, "unallocated_gpus_loaded": unalloc}


def timeseries(tl: Timeline, capacity_milli: int, bin_s: float | None = None) -> pl.DataFrame:
    """Bin the timeline into time-weighted means (``replay_timeseries`` columns)."""
    t = np.asarray(tl.time, dtype=np.float64)
    cols = ["allocated_gpus", "running_jobs", "queued_jobs", "queued_gpus", "fragmented_gpus"]
    if t.size < 2 or t[-1] <= t[0]:
        return pl.DataFrame(
            {"time_s": [], "bin_s": [], "alloc_ratio": [], **{c: [] for c in cols}},
            schema=dict.fromkeys(["time_s", "bin_s", "alloc_ratio", *cols], pl.Float64),
        )
    span = t[-1] - t[0]
    if bin_s is None:
        bin_s = max(60.0, 60.0 * math.ceil(span / 500 / 60.0))
    edges = np.arange(t[0], t[-1] + bin_s, bin_s)
    series = {
        "allocated_gpus": _working(tl) / MILLI,
        "running_jobs": np.asarray(tl.running, dtype=np.float64),
        "queued_jobs": np.asarray(tl.waiting, dtype=np.float64),
        "queued_gpus": np.asarray(tl.waiting_milli, dtype=np.float64) / MILLI,
        "fragmented_gpus": np.asarray(tl.frag_milli, dtype=np.float64) / MILLI,
    }
    out: dict[str, Any] = {"time_s": edges[:-1], "bin_s": np.full(edges.size - 1, bin_s)}
    for name, v in series.items():
        integ = _integral(t, v, edges)
        out[name] = np.diff(integ) / bin_s
    frame = pl.DataFrame(out)
    return frame.with_columns(
        (pl.col("allocated_gpus") * MILLI / capacity_milli).alias("alloc_ratio")
    )


def breakdown(jobs: pl.DataFrame, by: str) -> pl.DataFrame:
    """Per user or VC: jobs, mean JCT, queue and slowdown (the ``replay compare`` table)."""
    return (
        jobs.filter(pl.col("outcome") == "finished")
        .group_by(by)
        .agg(
            pl.len().alias("jobs"),
            pl.col("jct_s").mean().alias("jct_mean_s"),
            pl.col("queue_s").mean().alias("queue_mean_s"),
            pl.col("bsld").mean().alias("bsld_mean"),
        )
        .sort(by, nulls_last=True)
    )
