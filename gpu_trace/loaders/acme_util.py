"""AcmeTrace utilization CSVs (``data/utilization/<cluster>/<METRIC>.csv``) ->
``gpu_samples`` / ``host_samples`` / ``events``, wide to long.

Format (InternLM/AcmeTrace README, "Resource Utilization"; the owners'
``data/generate_utilization_pkl.ipynb`` and ``data/utils.py``): a ``Time`` column
(15-second samples, ``2023-07-01 08:00:00+08:00``) and one column per device. Node
metrics (``NODE_CPU_UTILIZATION``, ``NODE_MEMORY_UTILIZATION``) have one column per
node IP (``10.140.1.10``); DCGM metrics have one per GPU, ``<node>-<index>``
(``172.31.15.112-6``; Kalos ``SM_ACTIVE`` names nodes by pod, ``lingjun-pod9-0016-3``),
split at the last ``-``. An empty cell (pandas' NaN: the device reported nothing) is no
sample; the file's count of them is recorded in the metadata (``empty_cells``).

The metric comes from the file name (``GPU_UTIL.csv``, also ``DCGM_FI_DEV_GPU_UTIL.csv``
and monthly parts ``GPU_UTIL-2023-07.csv``) through :data:`METRICS`. Units follow
DCGM / Prometheus as the owners' notebook processed them: ``FB_USED`` / ``FB_FREE`` in
MiB (x 2^20 -> bytes), ``POWER_USAGE`` W, temperatures C, clocks MHz, ``GPU_UTIL`` and
``MEM_COPY_UTIL`` percent; the notebook multiplied the DCGM profiling ratios
(``*_ACTIVE``, ``SM_OCCUPANCY``) and the node CPU / memory utilization by 100, so those
files hold percent and the ratios are divided by 100 back to 0-1 (exact decimal
rescaling). ``XID_ERRORS`` cells are the last XID a GPU reported: a positive value is
one ``events`` row (kind ``xid``), 0 is "no error" and only counted
(``no_event_cells``). Files whose unit the release does not document (``NODE_IB_SEND``,
``NODE_IB_RECEIVE``, the IPMI power tables) are not read (the loader says so).

Accounting: a data line rejected whole (wrong field count, bad ``Time``, invalid UTF-8)
is one quarantined record; a good line is one record per non-empty cell: a sample or
event row, a "no error" XID cell, or a quarantined cell (not a number, negative, a
percentage outside 0-100, an XID that is not a whole number). The counts come from a
separate streaming pass and are checked against the physical line count (good + bad
lines) and the cell count (good lines x columns = written + no-event + quarantined +
empty) before the write, whose row count the ingest driver then reads back from the
Parquet footer. Rows are written in file order (time, then column order), unsorted:
sorting hundreds of millions of samples would need them all in memory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from gpu_trace.errors import InputError
from gpu_trace.loaders.acme_common import (
    SOURCE,
    TIME_TEXT,
    staged,
    time_stages,
    zone_name,
)
from gpu_trace.loaders.base import Batch, ReconciliationError
from gpu_trace.loaders.telemetry_common import MAX_EVENT_VALUE
from gpu_trace.loaders.textfile import (
    LINE,
    RAW,
    REASON,
    FileInfo,
    file_info,
    quarantine_rows,
    read_header,
    scan_lines,
)
from gpu_trace.loaders.units import MIB, TIME_MAX, TIME_MIN, per
from gpu_trace.schemas.telemetry import GPU_METRICS, HOST_METRICS


@dataclass(frozen=True)
class Metric:
    """What one AcmeTrace utilization file holds and how its values are scaled."""

    table: str
    """``gpu_samples`` (columns are GPUs) or ``host_samples`` (columns are nodes)."""
    metric: str
    """Canonical metric, or ``event:xid``."""
    factor: int = 1
    """Integer multiplier into the canonical unit (MiB -> bytes)."""
    percent_of_ratio: bool = False
    """The file holds percent of a 0-1 ratio (divided by 100)."""
    percent: bool = False
    """Values are a percentage: outside 0-100 is quarantined."""

    @property
    def unit(self) -> str:
        """The canonical unit of this metric (``xid`` for an event), from the metric vocabulary."""
        if self.metric.startswith("event:"):
            return "xid"
        vocab = GPU_METRICS if self.table == "gpu_samples" else HOST_METRICS
        return vocab[self.metric][0]


GPU, HOST = "gpu_samples", "host_samples"
METRICS: dict[str, Metric] = {
    "GPU_UTIL": Metric(GPU, "gpu_util_pct", percent=True),
    "MEM_COPY_UTIL": Metric(GPU, "mem_util_pct", percent=True),
    "ENC_UTIL": Metric(GPU, "enc_util_pct", percent=True),
    "DEC_UTIL": Metric(GPU, "dec_util_pct", percent=True),
    "FB_USED": Metric(GPU, "mem_used_bytes", MIB),
    "FB_FREE": Metric(GPU, "mem_free_bytes", MIB),
    "POWER_USAGE": Metric(GPU, "power_w"),
    "GPU_TEMP": Metric(GPU, "temp_c"),
    "MEMORY_TEMP": Metric(GPU, "mem_temp_c"),
    "MEM_CLOCK": Metric(GPU, "mem_clock_mhz"),
    "SM_CLOCK": Metric(GPU, "sm_clock_mhz"),
    "SM_ACTIVE": Metric(GPU, "sm_active_ratio", percent_of_ratio=True, percent=True),
    "SM_OCCUPANCY": Metric(GPU, "sm_occupancy_ratio", percent_of_ratio=True, percent=True),
    "PIPE_TENSOR_ACTIVE": Metric(GPU, "tensor_active_ratio", percent_of_ratio=True, percent=True),
    "DRAM_ACTIVE": Metric(GPU, "dram_active_ratio", percent_of_ratio=True, percent=True),
    "GR_ENGINE_ACTIVE": Metric(GPU, "gr_engine_active_ratio", percent_of_ratio=True, percent=True),
    "XID_ERRORS": Metric(GPU, "event:xid"),
    "NODE_CPU_UTILIZATION": Metric(HOST, "cpu_util_pct", percent=True),
    "NODE_MEMORY_UTILIZATION": Metric(HOST, "mem_util_pct", percent=True),
}
"""AcmeTrace file metric (file name without ``.csv``, DCGM prefix and month suffix) ->
what it becomes."""

NOT_READ = {
    "NODE_IB_SEND": "InfiniBand throughput: the release does not document its unit",
    "NODE_IB_RECEIVE": "InfiniBand throughput: the release does not document its unit",
}
"""Utilization files of the release that are recognized but not read, and why."""

_NAME = re.compile(
    r"^(?:DCGM_FI_(?:DEV|PROF)_)?(?P<metric>[A-Z][A-Z0-9_]*?)(?:-(?P<part>\d{4}[0-9A-Za-z_-]*))?$"
)
_GPU_COLUMN = re.compile(r"^(?P<host>.+)-(?P<index>\d{1,5})$")
MAX_GPU_INDEX = 32767

# why a cell is quarantined (codes keep the per-cell work small; text is built for the
# few rejects only)
NOT_NUMBER, NEGATIVE, OUTSIDE_PCT, NOT_WHOLE = 1, 2, 3, 4
_CELL_REASON = {
    NOT_NUMBER: "is not a number",
    NEGATIVE: "is negative",
    OUTSIDE_PCT: "is outside 0-100 %",
    NOT_WHOLE: "is not a whole XID number (0 to 2^53)",
}


def metric_of(path: Path) -> tuple[str, str | None] | None:
    """(AcmeTrace metric name, month part or None) from a file name, None if the name
    is not a metric name.
    """
    if path.suffix.lower() != ".csv":
        return None
    m = _NAME.match(path.stem)
    return (m["metric"], m["part"]) if m else None


@dataclass(frozen=True)
class UtilFile:
    """One utilization CSV, its metric and the cluster it belongs to."""

    path: Path
    cluster: str
    name: str
    """AcmeTrace metric name (``GPU_UTIL``)."""
    dataset: str


@dataclass(frozen=True)
class Columns:
    """The device columns of a file's header."""

    names: list[str]
    hosts: list[str]
    gpus: list[int] | None


def columns(path: Path, metric: Metric) -> Columns:
    """The device columns of a utilization CSV (after ``Time``): the host of each and, for
    GPU metrics, the index of its ``<node>-<gpu>`` name; a bad header is refused (line 1).
    """
    names = [n.strip() for n in read_header(path).split(",")]
    if not names or names[0] != "Time" or len(names) < 2:
        raise InputError(
            path, "not an AcmeTrace utilization file (expected Time,<device>,...)", "line 1"
        )
    devices = names[1:]
    dupes = sorted({d for d in devices if devices.count(d) > 1})
    if dupes:
        raise InputError(path, f"duplicate column(s) {', '.join(dupes)[:200]}", "line 1")
    if "" in devices:
        raise InputError(path, "a device column has an empty name", "line 1")
    if metric.table == HOST:
        return Columns(devices, devices, None)
    hosts, gpus = [], []
    for d in devices:
        m = _GPU_COLUMN.match(d)
        if m is None or int(m["index"]) > MAX_GPU_INDEX:
            raise InputError(
                path,
                f"column {d[:60]!r} is not <node>-<gpu index> (e.g. 172.31.15.112-6)",
                "line 1",
            )
        hosts.append(m["host"])
        gpus.append(int(m["index"]))
    return Columns(devices, hosts, gpus)


def _cells(info: FileInfo, metric: Metric, ncol: int, tz: str) -> pl.LazyFrame:
    """One row per (good line, column) and one per rejected line: ``_line``, ``_time``
    (UTC), ``_col`` (null for a rejected line), ``_empty``, ``_value`` (canonical
    unit), ``_code`` (why the cell is rejected) and ``_line_reason``.
    """
    parts = pl.col("_parts")
    quoted = pl.lit("'") + pl.col("_time_text") + pl.lit("'")
    naive = pl.col("_time_naive")
    line_reason = pl.coalesce(
        pl.when(pl.col(RAW).is_in(["", "\r"]).fill_null(True)).then(pl.lit("empty line")),
        pl.when(parts.list.len() != ncol + 1).then(
            pl.format(f"expected {ncol + 1} fields, found {{}}", parts.list.len())
        ),
        pl.when(pl.col(RAW).str.contains("\ufffd", literal=True)).then(pl.lit("invalid UTF-8")),
        pl.when(~pl.col("_time_parsed")).then(
            pl.format(f"Time {{}} is not a time ({TIME_TEXT})", quoted)
        ),
        pl.when((naive < TIME_MIN) | (naive >= TIME_MAX)).then(
            pl.format("Time {} is a time out of range (1970..2099)", quoted)
        ),
        pl.when(pl.col("_time").is_null()).then(
            pl.format(f"Time {{}} does not exist in {tz}", quoted)
        ),
    )
    ok = pl.col("_line_reason").is_null()
    split = scan_lines(info, skip=1).with_columns(
        pl.col(RAW).str.strip_suffix("\r").str.split(",").alias("_parts")
    )
    split = split.with_columns(parts.list.first().str.strip_chars().alias("_time_text"))
    lines = (
        staged(split, time_stages("_time_text", "_time", tz))
        .with_columns(line_reason.alias("_line_reason"))
        .select(
            LINE,
            "_time",
            "_time_offset",
            "_line_reason",
            pl.when(ok)
            .then(parts.list.slice(1))
            .otherwise(pl.concat_list(pl.lit(None, dtype=pl.String)))
            .alias("_text"),
            pl.when(ok)
            .then(pl.int_ranges(0, ncol, dtype=pl.Int32))
            .otherwise(pl.concat_list(pl.lit(None, dtype=pl.Int32)))
            .alias("_col"),
        )
        .explode("_text", "_col")
    )
    text = pl.col("_text").str.strip_chars()
    number = text.cast(pl.Float64, strict=False)
    empty = ok & (text == "")
    bad_number = number.is_null() | number.is_nan() | number.is_infinite()
    code = (
        pl.when(~ok | empty)
        .then(None)
        .when(bad_number)
        .then(NOT_NUMBER)
        .when(number < 0)
        .then(NEGATIVE)
        .when(pl.lit(metric.percent) & (number > 100))
        .then(OUTSIDE_PCT)
        .when(
            pl.lit(metric.metric == "event:xid")
            & ((number != number.floor()) | (number > MAX_EVENT_VALUE))
        )
        .then(NOT_WHOLE)
    )
    if metric.percent_of_ratio:
        value = per(number, 100)
    elif metric.factor != 1:
        value = number * float(metric.factor)
    else:
        value = number
    return lines.with_columns(
        empty.fill_null(False).alias("_empty"),
        code.cast(pl.Int8).alias("_code"),
        pl.when(ok & ~empty & ~bad_number).then(value).alias("_value"),
    )


def _mapping(values: list[str] | list[int], dtype: pl.DataType) -> pl.Expr:
    return pl.col("_col").replace_strict(
        list(range(len(values))), values, return_dtype=dtype, default=None
    )


def _with_raw(info: FileInfo, bad: pl.DataFrame) -> pl.DataFrame:
    """``bad`` with each rejected line's text, fetched again by line number."""
    if bad.is_empty():
        return bad.with_columns(pl.lit(None, dtype=pl.String).alias(RAW))
    lines = scan_lines(info, skip=1).filter(pl.col(LINE).is_in(bad[LINE].unique().implode()))
    return bad.join(lines.collect(), on=LINE, how="left")


def util_batches(file: UtilFile, tz: str) -> list[Batch]:
    """Read one utilization CSV into its batches (see the module doc)."""
    metric = METRICS[file.name]
    cols = columns(file.path, metric)
    ncol = len(cols.names)
    info = file_info(file.path, header_lines=1)
    cells = _cells(info, metric, ncol, tz)
    is_xid = metric.metric == "event:xid"
    good = pl.col("_line_reason").is_null() & ~pl.col("_empty") & pl.col("_code").is_null()
    kept = good & (pl.col("_value") > 0) if is_xid else good
    stats_q = cells.select(
        pl.col("_line_reason").is_not_null().sum().alias("bad_lines"),
        (pl.col("_col") == 0).sum().alias("good_lines"),
        pl.col("_empty").sum().alias("empty"),
        kept.sum().alias("written"),
        (good & (pl.col("_value") == 0)).sum().alias("no_event")
        if is_xid
        else pl.lit(0, dtype=pl.UInt32).alias("no_event"),
        pl.col("_time_offset").min().alias("offset_lo"),
        pl.col("_time_offset").max().alias("offset_hi"),
        pl.col("_code").is_not_null().sum().alias("bad_cells"),
    )
    bad_q = cells.filter(pl.col("_line_reason").is_not_null() | pl.col("_code").is_not_null())
    stats_df, bad = pl.collect_all(
        [stats_q, bad_q.select(LINE, "_col", "_line_reason", "_code", "_text")],
        engine="streaming",
    )
    stats = stats_df.row(0, named=True)
    zones = sorted({zone_name(o, tz) for o in (stats["offset_lo"], stats["offset_hi"])})
    if stats["good_lines"] + stats["bad_lines"] != info.records:
        msg = (
            f"{file.path}: {info.records} data lines but {stats['good_lines']} good + "
            f"{stats['bad_lines']} rejected"
        )
        raise ReconciliationError(msg)
    cells_total = stats["good_lines"] * ncol
    accounted = stats["written"] + stats["no_event"] + stats["bad_cells"] + stats["empty"]
    if cells_total != accounted:
        msg = (
            f"{file.path}: {cells_total} cells but {accounted} written, no-event, "
            "quarantined or empty"
        )
        raise ReconciliationError(msg)
    reasons = _CELL_REASON
    bad = bad.with_columns(
        pl.coalesce(
            pl.col("_line_reason"),
            pl.format(
                "{} value '{}' {}",
                pl.col("_col").replace_strict(
                    list(range(ncol)), cols.names, return_dtype=pl.String, default=None
                ),
                pl.col("_text").str.strip_chars(),
                pl.col("_code").replace_strict(
                    list(reasons), list(reasons.values()), return_dtype=pl.String, default=None
                ),
            ),
        ).alias(REASON)
    )
    quarantine = quarantine_rows(
        _with_raw(info, bad.select(LINE, REASON)),
        source=SOURCE,
        dataset=file.dataset,
        cluster=file.cluster,
        table=metric.table,
        file=file.path,
    ).collect()
    keys = [
        pl.lit(SOURCE).alias("source"),
        pl.lit(file.dataset).alias("dataset"),
        pl.lit(file.cluster).alias("cluster"),
        pl.col("_time").alias("time"),
        _mapping(cols.hosts, pl.String()).alias("host"),
    ]
    if cols.gpus is not None:
        keys.append(_mapping(cols.gpus, pl.Int16()).alias("gpu_index"))
    meta = {
        "time_basis": "absolute",
        "source_tz": ",".join(zones),
        "cluster": file.cluster,
        "acme_metric": file.name,
        "columns": str(ncol),
        "empty_cells": str(stats["empty"]),
        "no_event_cells": str(stats["no_event"]),
        "rows_quarantined": str(quarantine.height),
        "unit_rule": (
            "percent / 100 -> ratio"
            if metric.percent_of_ratio
            else (f"x {metric.factor} (MiB -> bytes)" if metric.factor != 1 else "as written")
        ),
    }
    quarantined = quarantine.height
    if not is_xid:
        rows = cells.filter(kept).select(
            *keys,
            pl.lit(metric.metric).alias("metric"),
            pl.col("_value").alias("value"),
            pl.lit(metric.unit).alias("unit"),
            _mapping(cols.names, pl.String()).alias("raw_field"),
        )
        return [
            Batch(
                metric.table,
                file.dataset,
                info,
                rows,
                quarantine,
                rows_read=stats["written"] + quarantined,
                cluster=file.cluster,
                metadata=meta,
                sort=False,
            )
        ]
    events = cells.filter(kept).select(
        *keys,
        pl.lit("xid").alias("kind"),
        pl.col("_value").cast(pl.Int64).alias("code"),
        pl.format("{}={}", pl.lit(file.name), pl.col("_text").str.strip_chars()).alias("detail"),
    )
    empty_samples = pl.DataFrame(
        schema={"source": pl.String, "dataset": pl.String, "time": pl.Datetime("us", "UTC")}
    ).with_columns(pl.lit(None, dtype=pl.String).alias(c) for c in ("host", "metric", "unit"))
    return [
        Batch(
            GPU,
            file.dataset,
            info,
            empty_samples,
            quarantine,
            rows_read=quarantined,
            cluster=file.cluster,
            metadata=meta,
        ),
        Batch(
            "events",
            file.dataset,
            info,
            events,
            None,
            rows_read=stats["written"],
            cluster=file.cluster,
            metadata=meta,
            sort=False,
        ),
    ]
