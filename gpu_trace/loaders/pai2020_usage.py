"""``pai_sensor_table.csv`` and ``pai_machine_metric.csv`` -> ``usage`` (long form).

Both tables hold one summary per instance lifetime, not time series: the sensor table
what the instance itself used (scope ``instance``), the machine-metric table what the
whole machine did while it ran (scope ``machine``). Each numeric field becomes one
``usage`` row (metric, ``mean`` or ``max``, value in canonical units, raw field name).

The unit of account is therefore one *value*, not one line: ``rows_read`` is records x
fields, a bad value (``abc``, ``inf``, negative) quarantines that value alone, and a bad
line (wrong field count, invalid UTF-8, bad time) quarantines each of its values with
the line's reason prefixed by the field name. Machine CPU percentages
(``machine_cpu*``) above 100 are bad values too. Empty fields are written with a null value,
as ``gpu_samples`` does for N/A.

Conversions: percent of one core / one GPU -> cores / GPUs (divide by 100); GB -> bytes
(x 2^30, see ``GIB``); everything else as written. The division is a float division
(correctly rounded, as pandas does), not ``units.per``: these are lifetime averages
written with 16-17 significant digits (``140.1451612903226``), which ``per``'s 12-decimal
scale would truncate. Sensor rows keep ``job_name`` as the
job; machine-metric rows only name the worker, so their ``job_id`` stays null (join
``placements`` on ``instance``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import polars as pl

from gpu_trace.loaders.base import Batch
from gpu_trace.loaders.pai2020_files import (
    CLUSTER,
    GIB,
    MACHINE_METRIC,
    SENSOR,
    Input,
    first,
    instant,
    mapped,
    metadata,
    parse,
    provenance,
    rejects,
    seconds,
    time_checks,
)
from gpu_trace.loaders.textfile import LINE, RAW, REASON
from gpu_trace.schemas.usage import USAGE_METRICS

Scale = Literal["percent", "gib", "as_is"]
VALUE_MAX = 1e15
"""Sanity bound on any lifetime average (1 PB of traffic, a million GB of memory)."""


@dataclass(frozen=True)
class Measure:
    """How one raw field becomes ``usage`` rows."""

    raw_field: str
    metric: str
    stat: str
    scale: Scale


SENSOR_MEASURES = (
    Measure("cpu_usage", "cpu_used_cores", "mean", "percent"),
    Measure("gpu_wrk_util", "gpu_used_gpus", "mean", "percent"),
    Measure("avg_mem", "mem_used_bytes", "mean", "gib"),
    Measure("max_mem", "mem_used_bytes", "max", "gib"),
    Measure("avg_gpu_wrk_mem", "gpu_mem_used_bytes", "mean", "gib"),
    Measure("max_gpu_wrk_mem", "gpu_mem_used_bytes", "max", "gib"),
    Measure("read", "net_rx_bytes", "mean", "as_is"),
    Measure("write", "net_tx_bytes", "mean", "as_is"),
    Measure("read_count", "net_rx_ops", "mean", "as_is"),
    Measure("write_count", "net_tx_ops", "mean", "as_is"),
)
METRIC_MEASURES = (
    Measure("machine_cpu_iowait", "cpu_iowait_pct", "mean", "as_is"),
    Measure("machine_cpu_kernel", "cpu_kernel_pct", "mean", "as_is"),
    Measure("machine_cpu_usr", "cpu_user_pct", "mean", "as_is"),
    Measure("machine_gpu", "gpu_util_sum_pct", "mean", "as_is"),
    Measure("machine_load_1", "load_1m", "mean", "as_is"),
    Measure("machine_net_receive", "net_rx_bytes", "mean", "as_is"),
    Measure("machine_num_worker", "colocated_instances", "mean", "as_is"),
    Measure("machine_cpu", "cpu_util_pct", "mean", "as_is"),
)


PERCENT_0_100 = frozenset(
    m.raw_field for m in METRIC_MEASURES if m.metric.startswith("cpu_") and m.scale == "as_is"
)
"""Raw fields that are a share of the whole machine's CPU time in percent (0-100); a
value above 100 is quarantined. ``machine_gpu`` is not one (a sum over GPUs), nor the
sensor's ``cpu_usage`` / ``gpu_wrk_util`` (percent of one core / one GPU)."""


def _lookup(measures: Sequence[Measure], attr: str) -> pl.Expr:
    return mapped("raw_field", {m.raw_field: str(getattr(m, attr)) for m in measures})


def _scaled(measures: Sequence[Measure]) -> pl.Expr:
    value = pl.col("_value")
    by_scale = {s: [m.raw_field for m in measures if m.scale == s] for s in ("percent", "gib")}
    return (
        pl.when(pl.col("raw_field").is_in(by_scale["percent"]))
        .then(value / 100)
        .when(pl.col("raw_field").is_in(by_scale["gib"]))
        .then(value * GIB)
        .otherwise(value)
    )


def _long(inp: Input, measures: Sequence[Measure], ids: list[str], timed: bool) -> pl.LazyFrame:
    """One row per (line, measured field) with ``_value`` and a per-value ``_reason``."""
    checked = parse(inp)
    if timed:
        checked = checked.with_columns(first(*time_checks()))
    index = [LINE, RAW, REASON, *ids, *(["start_time", "end_time"] if timed else [])]
    text = pl.col("_text").str.strip_chars()
    value = pl.col("_value")
    field = pl.col("raw_field")
    return (
        checked.unpivot(
            on=[m.raw_field for m in measures],
            index=index,
            variable_name="raw_field",
            value_name="_text",
        )
        .with_columns(text.cast(pl.Float64, strict=False).alias("_value"))
        .with_columns(
            pl.coalesce(
                pl.when(pl.col(REASON).is_not_null()).then(
                    pl.format("{}: {}", field, pl.col(REASON))
                ),
                pl.when(pl.col("_text").is_not_null() & value.is_null()).then(
                    pl.format("{} '{}' is not a valid float", field, pl.col("_text"))
                ),
                pl.when(~value.is_finite()).then(
                    pl.format("{} {} is not a finite number", field, value)
                ),
                pl.when(value < 0).then(pl.format("{} {} is negative", field, value)),
                pl.when(value >= VALUE_MAX).then(
                    pl.format("{} {} is out of range (>= 1e15)", field, value)
                ),
                pl.when(field.is_in(list(PERCENT_0_100)) & (value > 100)).then(
                    pl.format("{} {} is above 100 %", field, value)
                ),
            ).alias(REASON)
        )
    )


def _batch(
    inp: Input,
    dataset: str,
    measures: Sequence[Measure],
    scope: str,
    ids: dict[str, str | None],
    timed: bool,
) -> Batch:
    """One ``usage`` batch: ``ids`` maps usage columns to source columns (None: null),
    ``timed`` says whether the file has start/end times.
    """
    source_ids = [c for c in ids.values() if c is not None]
    long = _long(inp, measures, source_ids, timed)
    units = {m.raw_field: USAGE_METRICS[m.metric][0] for m in measures}
    rows = long.filter(pl.col(REASON).is_null()).select(
        *provenance(dataset),
        *(
            (pl.col(src) if src is not None else pl.lit(None, dtype=pl.String)).alias(name)
            for name, src in ids.items()
        ),
        pl.lit(scope).alias("scope"),
        *(
            (
                instant(seconds("start_time")).alias("start_time"),
                instant(seconds("end_time")).alias("end_time"),
            )
            if timed
            else ()
        ),
        _lookup(measures, "metric").alias("metric"),
        _lookup(measures, "stat").alias("stat"),
        _scaled(measures).alias("value"),
        mapped("raw_field", units).alias("unit"),
        pl.col("raw_field"),
    )
    rejected = rejects(long, inp, "usage", dataset).collect(engine="streaming")
    return Batch(
        "usage",
        dataset,
        inp.info,
        rows,
        rejected,
        rows_read=inp.info.records * len(measures),
        cluster=CLUSTER,
        metadata=metadata(
            inp,
            unit_of_account=(
                f"one usage row per (record, field): rows_read = {inp.info.records} records "
                f"x {len(measures)} fields"
            ),
            conversions="percent of one core/GPU / 100 -> cores/GPUs; GB x 2^30 -> bytes",
            row_order="file order, fields interleaved per chunk (not sorted)",
        ),
        sort=False,
    )


def sensor(inp: Input) -> Batch:
    """Per-instance lifetime use (scope ``instance``); ``gpu_name`` becomes ``device``."""
    ids: dict[str, str | None] = {
        "job_id": "job_name",
        "task": "task_name",
        "instance": "worker_name",
        "machine_id": "machine",
        "device": "gpu_name",
    }
    return _batch(inp, SENSOR, SENSOR_MEASURES, "instance", ids, timed=False)


def machine_metric(inp: Input) -> Batch:
    """Machine-level averages over each instance's lifetime (scope ``machine``)."""
    ids: dict[str, str | None] = {
        "job_id": None,
        "task": None,
        "instance": "worker_name",
        "machine_id": "machine",
        "device": None,
    }
    return _batch(inp, MACHINE_METRIC, METRIC_MEASURES, "machine", ids, timed=True)
