"""GPU telemetry over time, down-sampled for charts: utilization, memory and power per
cluster, per host and per GPU, and a GPU x time utilization grid (the report's heatmap).

Down-sampling is by time bins, never by dropping samples: the bin width is the smallest
of :data:`STEPS` that gives at most ``max_bins`` bins over the series' span (default
:data:`MAX_BINS`), and each bin holds the mean of each GPU's samples in it. A cluster's or
host's utilization is the mean over its GPUs of those means; its memory and power are
their sum (what the cluster draws, what it holds). Charts keep the :data:`MAX_SERIES`
hosts or GPUs with the most samples (the caption says how many of how many), and the
heatmap the :data:`HEATMAP_ROWS` GPUs with the most samples. A week of 1-minute samples
for 1,000 GPUs thus charts as at most 200 points per line, 10 lines, and a 40 x 100 grid.

Relative-time samples (files without timestamps: 1970-based, see
:mod:`gpu_trace.analyses.attribution`) are binned apart (``time_basis``) and charted on
elapsed time, never on one axis with calendar times.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from gpu_trace.analyses.attribution import ABSOLUTE_SINCE

MAX_BINS = 200
"""Time points per line at most."""
MAX_SERIES = 10
"""Lines per chart at most (the palette has ten colours)."""
HEATMAP_ROWS = 40
"""GPUs in the heatmap at most."""
HEATMAP_BINS = 100
"""Time bins in the heatmap at most."""

STEPS: tuple[tuple[str, int], ...] = (
    ("1s", 1),
    ("10s", 10),
    ("30s", 30),
    ("1m", 60),
    ("5m", 300),
    ("10m", 600),
    ("15m", 900),
    ("30m", 1800),
    ("1h", 3600),
    ("2h", 7200),
    ("6h", 21600),
    ("12h", 43200),
    ("1d", 86400),
    ("7d", 604800),
    ("28d", 2419200),
)
"""Bin widths, as polars durations and in seconds."""

METRICS: dict[str, tuple[str, float, str]] = {
    # metric: (label, scale to the label's unit, how GPUs combine in a cluster / host)
    "gpu_util_pct": ("utilization (%)", 1.0, "mean"),
    "mem_used_bytes": ("memory used (GiB)", 1 / 2**30, "sum"),
    "power_w": ("power (W)", 1.0, "sum"),
}
"""The metrics charted over time."""

LEVELS = ("cluster", "host", "gpu")


def bin_width(span_s: float, max_bins: int = MAX_BINS) -> tuple[str, int]:
    """The smallest step of :data:`STEPS` giving at most ``max_bins`` bins over
    ``span_s`` seconds (the largest step when none does).
    """
    for every, seconds in STEPS:
        if span_s / seconds < max_bins:
            return every, seconds
    return STEPS[-1]


@dataclass(frozen=True)
class Binned:
    """One basis (absolute or relative) of the samples, binned per GPU."""

    time_basis: str
    every: str
    frame: pl.DataFrame
    """cluster (else the source), host, gpu, metric, time (bin start), value (the GPU's
    mean in its unit), samples."""


def _charted(samples: pl.LazyFrame) -> pl.LazyFrame:
    return samples.filter(
        pl.col("metric").is_in(list(METRICS))
        & pl.col("value").is_not_null()
        & pl.col("gpu_index").is_not_null()
        & pl.col("mig_instance").is_null()
    )


def binned(
    samples: pl.LazyFrame, max_bins: int = MAX_BINS, machines: pl.LazyFrame | None = None
) -> list[Binned]:
    """Per GPU, metric and time bin: the mean of the samples, per time basis. A host's
    cluster is the sample's own, else the inventory's (``machines``: a dcgm-exporter
    series names no cluster, the Kubernetes node it runs on does), else the source.
    """
    base = _charted(samples)
    rel = pl.col("time") < ABSOLUTE_SINCE
    spans = base.select(
        pl.col("time").filter(~rel).min().alias("absolute_lo"),
        pl.col("time").filter(~rel).max().alias("absolute_hi"),
        pl.col("time").filter(rel).min().alias("relative_lo"),
        pl.col("time").filter(rel).max().alias("relative_hi"),
    ).collect()
    scale = pl.col("metric").replace_strict(
        {m: s for m, (_, s, _) in METRICS.items()}, return_dtype=pl.Float64
    )
    out = []
    for basis, keep in (("absolute", ~rel), ("relative", rel)):
        lo, hi = spans[f"{basis}_lo"].item(), spans[f"{basis}_hi"].item()
        if lo is None:
            continue
        every, _ = bin_width((hi - lo).total_seconds(), max_bins)
        lazy = (
            base.filter(keep)
            .with_columns(pl.col("time").dt.truncate(every))
            .group_by("host", "gpu_index", "metric", "time")
            .agg(
                pl.col("value").mean(),
                pl.len().alias("samples"),
                pl.col("cluster").drop_nulls().first().alias("_cluster"),
                pl.col("source").first().alias("_source"),
            )
            .with_columns(  # on the binned rows, not on every sample
                pl.col("value") * scale,
                pl.format("{}/{}", "host", "gpu_index").alias("gpu"),
            )
            .drop("gpu_index")
        )
        if machines is not None:
            owner = (
                machines.filter(pl.col("cluster").is_not_null())
                .group_by(pl.col("machine_id").alias("host"))
                .agg(pl.col("cluster").min().alias("_inventory"))
            )
            lazy = (
                lazy.join(owner, on="host", how="left")
                .with_columns(pl.coalesce("_cluster", "_inventory", "_source").alias("cluster"))
                .drop("_inventory")
            )
        else:
            lazy = lazy.with_columns(pl.coalesce("_cluster", "_source").alias("cluster"))
        frame = (
            lazy.drop("_cluster", "_source")
            .sort("cluster", "host", "gpu", "metric", "time")
            .collect()
        )
        out.append(Binned(basis, every, frame))
    return out


def _top(frame: pl.DataFrame, key: str, n: int) -> tuple[pl.DataFrame, str]:
    """The ``n`` keys with the most samples, and a caption note when some were cut."""
    ranked = (
        frame.group_by(key)
        .agg(pl.col("samples").sum())
        .sort(["samples", key], descending=[True, False])
    )
    if ranked.height <= n:
        return frame, ""
    keep = ranked[key].head(n)
    return (
        frame.filter(pl.col(key).is_in(keep.implode())),
        f" ({n} of {ranked.height} with the most samples)",
    )


def series(
    b: Binned, level: str, metrics: Sequence[str] = tuple(METRICS), n: int = MAX_SERIES
) -> tuple[pl.DataFrame, str]:
    """Lines at one level (cluster, host or GPU): ``series``, ``label`` (the metric in
    words), ``time`` (or ``elapsed_h`` for relative time), ``value``; and a caption note.
    """
    if level not in LEVELS:
        msg = f"level must be one of {', '.join(LEVELS)}"
        raise ValueError(msg)
    frame = b.frame.filter(pl.col("metric").is_in(list(metrics)))
    frame, note = _top(frame, level, n)
    if level != "gpu":
        how = pl.col("metric").replace_strict(
            {m: h for m, (_, _, h) in METRICS.items()}, return_dtype=pl.String
        )
        frame = (
            frame.with_columns(how.alias("_how"))
            .group_by(level, "metric", "time")
            .agg(
                pl.when(pl.col("_how").first() == "sum")
                .then(pl.col("value").sum())
                .otherwise(pl.col("value").mean())
                .alias("value"),
                pl.col("samples").sum(),
            )
        )
    label = pl.col("metric").replace_strict(
        {m: lab for m, (lab, _, _) in METRICS.items()}, return_dtype=pl.String
    )
    out = frame.select(pl.col(level).alias("series"), label.alias("label"), "time", "value").sort(
        "series", "label", "time"
    )
    return _relative_axis(out, b), note


def heatmap(
    b: Binned, rows: int = HEATMAP_ROWS, bins: int = HEATMAP_BINS
) -> tuple[pl.DataFrame, str]:
    """GPU x time bin utilization (``series`` = host/index, ``value`` = mean %), at most
    ``rows`` GPUs and ``bins`` time bins (re-binned from the series' bins).
    """
    frame = b.frame.filter(pl.col("metric") == "gpu_util_pct")
    if frame.height == 0:
        return frame.select(pl.col("gpu").alias("series"), "time", "value"), ""
    frame, note = _top(frame, "gpu", rows)
    span = frame.select(
        (pl.col("time").max() - pl.col("time").min()).dt.total_microseconds()
    ).item()
    every, _ = bin_width(float(span) / 1e6, bins)
    out = (
        frame.with_columns(pl.col("time").dt.truncate(every))
        .group_by("gpu", "time")
        .agg(pl.col("value").mean())
        .select(pl.col("gpu").alias("series"), "time", "value")
        .sort("series", "time")
    )
    return _relative_axis(out, b), note


def _relative_axis(frame: pl.DataFrame, b: Binned) -> pl.DataFrame:
    """Relative-time frames get ``elapsed_h`` (hours since the first sample) instead
    of a 1970 calendar time.
    """
    if b.time_basis != "relative":
        return frame
    return frame.with_columns(
        ((pl.col("time").dt.epoch("us") - pl.col("time").dt.epoch("us").min()) / 3.6e9)
        .round(4)
        .alias("elapsed_h")
    ).drop("time")
