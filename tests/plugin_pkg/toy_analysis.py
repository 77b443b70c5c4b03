"""A toy analysis in one file: GPU-seconds per cluster, with a chart and glossary."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from gpu_trace.plugins import AnalysisPlugin, option


@dataclass(frozen=True)
class Options:
    min_gpus: float = option(0.0, "Only jobs with at least this many GPUs (toy plugin).")


def run(inputs: Any, options: Options) -> pl.LazyFrame:
    return (
        inputs.jobs.filter(pl.col("gpus") >= options.min_gpus)
        .group_by("cluster")
        .agg((pl.col("gpus") * pl.col("run_s")).sum().alias("toy_gpu_s"))
        .sort("cluster")
    )


def chart(frame: pl.DataFrame) -> Any:
    import altair as alt

    return alt.Chart(frame).mark_bar().encode(x="cluster:N", y="toy_gpu_s:Q")


PLUGIN = AnalysisPlugin(
    name="toy-gpus",
    help="Toy: GPU-seconds per cluster (installed from a plugin package).",
    run=run,
    options=Options,
    title="Toy GPU-seconds",
    chart=chart,
    glossary={"toy_gpu_s": ("toy GPU-seconds", "sum of gpus x run_s in the cluster")},
)
