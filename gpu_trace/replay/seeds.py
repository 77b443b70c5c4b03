"""Repeating a replay over seeds, and the FGD figure's sweep over arrived demand.

The FGD paper reports every point as the mean over 10 seeds (workload shuffle and
inflation draws, random tie-breaking); ``--seeds 0-9`` does the same here and reports
the mean and spread (sample standard deviation, min, max) next to each other.
"""

from __future__ import annotations

import dataclasses
import math
import re

import polars as pl

from gpu_trace.replay.config import ReplayConfig
from gpu_trace.replay.experiment import UsageError
from gpu_trace.replay.score import RunResult

DEFAULT_POINTS = (0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3)
"""Arrived-demand shares at which the packing curve is read by default."""


def parse_seeds(text: str) -> list[int]:
    """``0-9`` / ``0,3,5`` / ``7`` / ``0-4,9`` -> seeds, in order, without repeats."""
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m:
            msg = f"--seeds {text!r}: use N, A-B or a comma list (e.g. 0-9)"
            raise UsageError(msg)
        lo = int(m[1])
        hi = int(m[2]) if m[2] else lo
        if hi < lo:
            msg = f"--seeds {part!r}: the range goes backwards"
            raise UsageError(msg)
        out.extend(s for s in range(lo, hi + 1) if s not in out)
    return out


def parse_points(text: str) -> tuple[float, tuple[float, ...]]:
    """``--inflate-to``: ``1.3`` (inflate to 1.3, read the default points up to it) or
    ``START:STOP:STEP`` (read every point of the range; inflate to STOP) -> (inflate
    target, curve points).
    """
    try:
        if ":" not in text:
            target = float(text)
            if target <= 0:
                raise ValueError
            pts = tuple(p for p in DEFAULT_POINTS if p <= target + 1e-9)
            if not any(math.isclose(p, target) for p in pts):
                pts = (*pts, target)
            return target, pts
        a, b, c = (float(x) for x in text.split(":"))
    except ValueError:
        msg = f"--inflate-to {text!r}: give a positive number (1.3) or START:STOP:STEP"
        raise UsageError(msg) from None
    if a <= 0 or b < a or c <= 0:
        msg = f"--inflate-to {text!r}: needs 0 < START <= STOP and STEP > 0"
        raise UsageError(msg)
    n = math.floor((b - a) / c + 1e-9) + 1
    return b, tuple(round(a + i * c, 10) for i in range(n))


def for_seeds(config: ReplayConfig, seeds: list[int]) -> list[ReplayConfig]:
    """One config per seed (the run id, when given, gets ``-s<seed>``)."""
    return [
        dataclasses.replace(
            config, seed=s, run_id=f"{config.run_id}-s{s}" if config.run_id else None
        )
        for s in seeds
    ]


def packing_summary(results: list[RunResult]) -> pl.DataFrame:
    """Per placement and arrived-demand point: allocation ratio mean, std, min, max
    and the number of seeds (runs without a packing curve are left out).
    """
    frames = [
        r.extra["packing"].with_columns(
            pl.lit(r.config.placement).alias("placement"), pl.lit(r.config.seed).alias("seed")
        )
        for r in results
        if "packing" in r.extra
    ]
    if not frames:
        return pl.DataFrame()
    df = pl.concat(frames)
    order = {r.config.placement: i for i, r in reversed(list(enumerate(results)))}
    out: pl.DataFrame = (
        df.group_by("placement", "arrived_ratio")
        .agg(
            pl.col("alloc_ratio").mean().alias("alloc_mean"),
            pl.col("alloc_ratio").std().alias("alloc_std"),
            pl.col("alloc_ratio").min().alias("alloc_min"),
            pl.col("alloc_ratio").max().alias("alloc_max"),
            pl.col("unallocated_gpus").mean().alias("unallocated_gpus_mean"),
            pl.len().alias("seeds"),
        )
        .with_columns(pl.col("placement").replace_strict(order, return_dtype=pl.Int64).alias("_o"))
        .sort("_o", "arrived_ratio")
        .drop("_o")
    )
    return out


HEADLINE = ("jct_mean_s", "queue_mean_s", "bsld_mean", "makespan_s", "alloc_mean_ratio")


def run_summary(results: list[RunResult]) -> pl.DataFrame:
    """Per (scheduler, placement): over the seeds / replicates, the mean of each
    headline metric and its 95 % Student-t half-width (``_ci95``; definition in
    :mod:`gpu_trace.replay.sweep_stats`). ``spread`` says ``deterministic (no spread)``
    when every run gave the same values, and then no half-width is shown: a zero-width
    interval is not evidence of a difference.
    """
    from gpu_trace.replay import sweep_stats as st

    runs = pl.concat([r.runs for r in results], how="diagonal_relaxed")
    metrics = [c for c in HEADLINE if c in runs.columns]
    by = ["scheduler", "placement"]
    stats = st.summarize(runs, by, metrics)
    flat = stats.group_by(by, maintain_order=True).agg(
        pl.col("n").max().alias("runs"),
        ((pl.col("sd").fill_null(0) == 0).all() & (pl.col("n").max() > 1)).alias("_flat"),
    )
    out = flat.with_columns(
        pl.when(pl.col("_flat"))
        .then(pl.lit("deterministic (no spread)"))
        .when(pl.col("runs") < 2)
        .then(pl.lit("one run (no interval)"))
        .otherwise(pl.lit("95 % t interval"))
        .alias("spread")
    ).drop("_flat")
    for m in metrics:
        one = stats.filter(pl.col("metric") == m).select(
            *by,
            pl.col("mean").alias(f"{m}_mean"),
            pl.when(pl.col("sd").fill_null(0) > 0).then(pl.col("half")).alias(f"{m}_ci95"),
        )
        out = out.join(one, on=by, how="left", maintain_order="left")
    return out
