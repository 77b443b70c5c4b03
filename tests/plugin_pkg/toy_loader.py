"""A toy loader in one file: a CSV ``job_id,gpus,run_s`` -> canonical jobs."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from gpu_trace.loaders.base import Batch
from gpu_trace.loaders.textfile import file_info
from gpu_trace.plugins import LoaderPlugin, option


class ToyLoader:
    name = "toy"
    version = "1"

    def batches(self, path: Path, *, cluster: str = "toy", **_: Any) -> Iterator[Batch]:
        info = file_info(path, header_lines=1)
        rows = pl.read_csv(path, schema_overrides={"job_id": pl.String}).with_columns(
            pl.lit("toy").alias("source"),
            pl.lit(path.stem).alias("dataset"),
            pl.lit(cluster).alias("cluster"),
            pl.lit("completed").alias("status"),
            pl.lit("relative").alias("time_basis"),
            pl.col("gpus").cast(pl.Float64),
            pl.col("run_s").cast(pl.Float64),
            pl.col("gpus").cast(pl.Float64).alias("gpus_raw"),
            pl.lit("gpu").alias("gpus_raw_unit"),
        )
        yield Batch("jobs", path.stem, info, rows, cluster=cluster)


@dataclass(frozen=True)
class ToyOptions:
    cluster: str = option("toy", "Cluster name written to jobs.cluster (toy plugin).")


PLUGIN = LoaderPlugin(
    name="toy",
    loader=ToyLoader,
    help="Toy CSV (job_id,gpus,run_s) -> jobs; installed from a plugin package.",
    options=ToyOptions,
)
