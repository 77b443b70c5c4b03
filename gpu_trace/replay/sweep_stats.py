"""Statistics across the seeds of a sweep: per configuration the mean and a 95 %
interval, and paired differences between two values of one axis (two policies) on the
same seeds.

Interval: for n runs (seeds) with mean m and sample standard deviation s (n - 1 in the
denominator), m ± t * s / sqrt(n) with t the two-sided 95 % Student-t critical value at
n - 1 degrees of freedom (t = 12.706 for n = 2, 4.303 for n = 3, 2.262 for n = 10). With
n = 1 there is no interval (the half-width is null). Runs whose metric is missing or NaN
(no finished job, a trace without users for fairness) do not count towards n.

A paired comparison of A and B takes, for every seed and every other axis value, the
difference A - B of the two runs, and reports the same mean and t interval over those
differences: the seeds' shared randomness cancels, so the interval is narrower than
the two separate ones would suggest. An interval that excludes 0 is a difference at
the 5 % level.
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl

CONFIDENCE = 0.95
SEED_AXIS = "seed"

METRICS: dict[str, tuple[str, bool]] = {
    "jct_mean_s": ("JCT mean (s)", True),
    "queue_mean_s": ("queueing mean (s)", True),
    "bsld_mean": ("bounded slowdown", True),
    "alloc_mean_ratio": ("allocation", False),
    "unallocated_gpus_loaded": ("unallocated GPUs under load", True),
    "jain_slowdown": ("Jain fairness", False),
}
"""metric column -> (label, lower is better). Columns starting with ``frag`` (a
fragmentation metric, when the engine records one) are added when present."""


def t_critical(n: int, confidence: float = CONFIDENCE) -> float | None:
    """Two-sided Student-t critical value for ``n`` samples (None when n < 2)."""
    if n < 2:
        return None
    from scipy import stats as sps  # ~1 s to import: only when an interval is computed

    return float(sps.t.ppf(0.5 + confidence / 2, n - 1))


def metric_columns(frame: pl.DataFrame) -> list[str]:
    """The scorecard metrics present in ``frame`` (known ones, then ``frag*``)."""
    known = [m for m in METRICS if m in frame.columns]
    frag = [c for c in frame.columns if c.startswith("frag") and frame[c].dtype.is_numeric()]
    return known + [c for c in frag if c not in known]


def summarize(runs: pl.DataFrame, by: list[str], metrics: list[str]) -> pl.DataFrame:
    """Long form, one row per (configuration ``by``, metric): n, mean, sd, t, half, lo,
    hi (half/lo/hi null when n = 1).
    """
    if not by:
        runs = runs.with_columns(pl.lit("all").alias("_all"))
        by = ["_all"]
    values = runs.select(*by, *(pl.col(m).cast(pl.Float64) for m in metrics))
    long = values.unpivot(index=by, on=metrics, variable_name="metric", value_name="value")
    long = long.filter(pl.col("value").is_not_null() & pl.col("value").is_not_nan())
    grouped = long.group_by([*by, "metric"], maintain_order=True).agg(
        pl.len().cast(pl.Int64).alias("n"),
        pl.col("value").mean().alias("mean"),
        pl.col("value").std(ddof=1).alias("sd"),
    )
    ns = sorted(set(grouped["n"].to_list()))
    crit = pl.DataFrame(
        {"n": ns, "t": [t_critical(n) for n in ns]}, schema={"n": pl.Int64, "t": pl.Float64}
    )
    out = grouped.join(crit, on="n", how="left").with_columns(
        (pl.col("t") * pl.col("sd") / pl.col("n").cast(pl.Float64).sqrt()).alias("half")
    )
    out = out.with_columns(
        (pl.col("mean") - pl.col("half")).alias("lo"),
        (pl.col("mean") + pl.col("half")).alias("hi"),
    )
    return out.drop("_all") if "_all" in out.columns else out


def paired(
    runs: pl.DataFrame, axis: str, a: Any, b: Any, by: list[str], metrics: list[str]
) -> pl.DataFrame:
    """Mean and t interval of A - B (``axis`` = a minus ``axis`` = b) over runs that
    agree on the seed and on every axis of ``by``.
    """
    key = [*by, SEED_AXIS] if SEED_AXIS in runs.columns else list(by)
    left = runs.filter(pl.col(axis) == a).select(*key, *metrics)
    right = runs.filter(pl.col(axis) == b).select(*key, *metrics)
    joined = left.join(right, on=key, suffix="__b", nulls_equal=True)
    diff = joined.select(
        *key, *((pl.col(m).cast(pl.Float64) - pl.col(f"{m}__b")).alias(m) for m in metrics)
    )
    return summarize(diff, by, metrics).with_columns(
        pl.lit(str(a)).alias("a"), pl.lit(str(b)).alias("b")
    )


def _cell(value: Any) -> Any:
    """An axis value as a frame cell: scalars as they are, tables/lists as JSON text."""
    if isinstance(value, dict | list | tuple):
        return json.dumps(value, sort_keys=True)
    return value


def points_frame(manifest: dict[str, Any]) -> pl.DataFrame:
    """run_id + one column per axis, from a sweep manifest."""
    axes: list[str] = list(manifest.get("axes", []))
    rows = manifest["runs"]
    data: dict[str, list[Any]] = {"run_id": [r["run_id"] for r in rows]}
    for axis in axes:
        data[axis] = [_cell(r["point"].get(axis)) for r in rows]
    return pl.DataFrame(data, strict=False)


def with_points(manifest: dict[str, Any], runs: pl.DataFrame) -> pl.DataFrame:
    """Store ``replay_runs`` rows of a sweep joined to their grid points (manifest
    order); the axis columns replace same-named store columns (``seed``).
    """
    points = points_frame(manifest)
    axes = [c for c in points.columns if c != "run_id"]
    clean = runs.drop([c for c in axes if c in runs.columns])
    return points.join(clean, on="run_id", how="inner", maintain_order="left")


def config_axes(manifest: dict[str, Any]) -> list[str]:
    """The axes that define a configuration: every axis but the seed."""
    return [a for a in manifest.get("axes", []) if a != SEED_AXIS]
