"""Observed serving latency, where a trace records one (BurstGPT ``Elapsed time``: end to
end; GenTD26 ``exec_time_seconds``: execution): its distribution, by token count and by
load.

**Token bucket**: total tokens (input + output) in powers of two, ``[2^k, 2^(k+1))``.
**Load**: the requests of the same trace that arrived in the ``--window`` before a
request (itself included), in powers-of-two buckets: the arrival rate it met. Latency
kinds are never pooled (``latency_kind`` is part of every group).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from gpu_trace.analyses.serving_common import COMMON_GLOSSARY, MIN_FIT, TRACE, seconds
from gpu_trace.plugins import AnalysisPlugin, option
from gpu_trace.values import choose

LATENCY_BY = ("none", "tokens", "load")

QUANTILES = (0.5, 0.9, 0.99)


def _pow2_bucket(value: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """(lower edge, label) of the power-of-two bucket of a non-negative count."""
    low = (
        pl.when(value < 1)
        .then(0)
        .otherwise((2 ** value.cast(pl.Float64).log(2).floor()).cast(pl.Int64))
    )
    label = (
        pl.when(low <= 1).then(low.cast(pl.String)).otherwise(pl.format("{}-{}", low, low * 2 - 1))
    )
    return low, label


def latency(requests: pl.LazyFrame, by: str = "none", window: str = "1min") -> pl.LazyFrame:
    """Per trace and latency kind (and token or load bucket): requests with a latency,
    mean, p50 / p90 / p99 and max latency, and a ``caveat`` for small buckets.
    """
    lf = requests.filter(pl.col("latency_s").is_not_null())
    keys = [*TRACE, "latency_kind"]
    if by == "tokens":
        total = pl.col("input_tokens") + pl.col("output_tokens")
        low, label = _pow2_bucket(total)
        lf = lf.filter(total.is_not_null()).with_columns(
            low.alias("bucket_low"), label.alias("bucket")
        )
        keys += ["bucket_low", "bucket"]
    elif by == "load":
        w = seconds(window)
        t = pl.col("arrival_time")
        lf = (
            requests.sort([*TRACE, "arrival_time", "request_id"])
            .with_columns(
                # arrivals in (t - w, t]: the position of t's last tie minus that of t - w
                (
                    t.search_sorted(t, side="right").over(list(TRACE))
                    - t.search_sorted(t - pl.duration(seconds=w), side="right").over(list(TRACE))
                ).alias("arrivals_in_window")
            )
            .filter(pl.col("latency_s").is_not_null())
        )
        low, label = _pow2_bucket(pl.col("arrivals_in_window"))
        lf = lf.with_columns(low.alias("bucket_low"), label.alias("bucket"))
        keys += ["bucket_low", "bucket"]
    lat = pl.col("latency_s")
    n = pl.col("requests")
    return (
        lf.group_by(keys)
        .agg(
            pl.len().alias("requests"),
            lat.mean().alias("latency_mean_s"),
            *[lat.quantile(q, "linear").alias(f"latency_p{round(q * 100)}_s") for q in QUANTILES],
            lat.max().alias("latency_max_s"),
        )
        .with_columns(
            pl.when(n < MIN_FIT)
            .then(pl.format("only {} requests: p99 unreliable", n))
            .alias("caveat")
        )
        .sort(keys)
    )


@dataclass(frozen=True)
class LatencyOptions:
    """`gpu-trace analyze request-latency` options."""

    by: str = option(
        "none",
        "One row per trace, or per total-token bucket, or per load bucket (arrivals in "
        "--window before the request).",
        choices=LATENCY_BY,
    )
    window: str = option("1min", "Load window for --by load (30s, 1min, 10min).")


def _run(inputs: Any, options: LatencyOptions) -> pl.LazyFrame:
    choose("--by value", options.by, LATENCY_BY)
    seconds(options.window)
    return latency(inputs.requests, options.by, options.window)


def _empty(inputs: Any, options: Any) -> str | None:
    if inputs.requests.select(pl.len()).collect().item() == 0:
        return None
    return (
        "no observed latency in these traces (BurstGPT v1.2 Elapsed time and GenTD26 "
        "exec_time_seconds have one; Azure and Mooncake do not)"
    )


def _units(options: Any) -> dict[str, str]:
    return {
        "latency_mean_s": "s",
        **{f"latency_p{round(q * 100)}_s": "s" for q in QUANTILES},
        "latency_max_s": "s",
        "bucket_low": "count",
    }


PLUGIN = AnalysisPlugin(
    name="request-latency",
    title="Observed latency",
    help="Observed serving latency (BurstGPT end to end, GenTD26 execution) per trace, by "
    "total tokens or by load.",
    run=_run,
    options=LatencyOptions,
    needs=("requests",),
    needs_jobs=False,
    empty=_empty,
    rank=240,
    units=_units,
    glossary={
        **COMMON_GLOSSARY,
        "bucket_low": ("bucket from", "Lower edge of the token / load bucket."),
        "bucket": ("bucket", "Total tokens (--by tokens) or arrivals in the window (--by load)."),
        "latency_mean_s": ("mean latency", "Mean observed latency."),
        "latency_p50_s": ("p50 latency", "Median observed latency."),
        "latency_p90_s": ("p90 latency", "90th percentile of observed latency (linear)."),
        "latency_p99_s": ("p99 latency", "99th percentile of observed latency (linear)."),
        "latency_max_s": ("max latency", "Largest observed latency."),
    },
)
