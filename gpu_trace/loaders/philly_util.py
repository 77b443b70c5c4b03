"""Philly's per-minute utilization CSVs -> ``gpu_samples`` and ``host_samples``.

Three files, no extension (the trace's README, github.com/msr-fiddle/philly-traces):

- ``cluster_gpu_util``: ``time,machineId,gpu0_util,...,gpu7_util``. Values are
  nvidia-smi utilization in percent. Each becomes one ``gpu_samples`` row with metric
  ``gpu_util_pct``, ``gpu_index`` taken from the column name and ``raw_field`` the
  column name (``gpu3_util``).
- ``cluster_cpu_util``: ``time,machine_id,cpu_util`` -> ``host_samples`` with
  ``cpu_util_pct``.
- ``cluster_mem_util``: ``time,machine_id,mem_total,mem_free`` -> ``host_samples`` with
  ``mem_total_bytes`` and ``mem_free_bytes``. The units are undocumented. A ~512 GB
  host reports 528,272,672, so the values are taken as **KiB** and multiplied by 1024
  (exact in binary floating point). Fractional values such as ``2030730.6667`` are
  per-minute averages and are kept as floats.

Conventions:

- Data rows end with a trailing comma; the header does not. A row with or without the
  trailing comma is accepted.
- ``NA`` marks an offline GPU or host. It is not a bad row, and it produces **no
  sample**, just as the notebook skips it. An empty field is not ``NA``: that row is
  quarantined as "not a valid float".
- The ``time`` column ends in ``PST`` or ``PDT``. The suffix fixes the UTC offset (-8 h
  or -7 h) exactly, so the repeated hour at the 2017-11-05 fall-back needs no guessing.
  A suffix that contradicts the calendar (``PDT`` in December) is quarantined.
- Rows with ``mem_total == 0`` are quarantined, with that reason. The notebook skips
  them, because (total - free) / total is undefined for them.
- Reconciliation. ``ingest`` counts what is written in sample rows, not file rows.
  So a batch's ``rows_read`` is the number of non-``NA`` values in the good rows (one
  sample each) plus the number of quarantined rows. Those values are counted in a
  separate streaming pass before the write, so the writer's row count is checked
  against an independent count. The per-row balance of the file (rows with values +
  rows that are all ``NA`` + quarantined rows = physical rows) is checked here. It is
  recorded in the batch metadata as ``file_rows``, ``rows_with_samples``,
  ``rows_all_na`` and ``rows_quarantined``.
- The real GPU file is several GB, so nothing collects it whole. It is parsed once,
  streaming, into a typed staging Parquet file (a temporary file beside the ingest).
  The count pass and the rejects read that file. The wide-to-long step is streamed
  from it into the store by the writer, unsorted (``sort=False``). Sorting billions of
  samples would blow memory. Rows come value column by value column (all ``gpu0``
  samples, then ``gpu1``, ...), each in file order, which is time order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import polars as pl

from gpu_trace.errors import InputError
from gpu_trace.loaders.base import Batch, ReconciliationError
from gpu_trace.loaders.textfile import (
    LINE,
    RAW,
    REASON,
    FieldSpec,
    FileInfo,
    file_info,
    parse_fields,
    quarantine_rows,
    read_header,
    scan_lines,
)

SOURCE = "philly"
CLUSTER = "philly"
TZ = "America/Los_Angeles"
KIB = 1024

UTC_TIME = "_utc"
HOST_NAMES = ("machineId", "machine_id")
_ZONED = r"^(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}) (PST|PDT)$"
_GPU_COLUMN = re.compile(r"^gpu(\d+)_util$")

MAX_GPU_INDEX = 32767
"""``gpu_index`` is an int16 in the canonical schema; a larger index in a header is a
damaged file, not a machine."""


@dataclass(frozen=True)
class Value:
    """One value column of a util file and the sample it becomes."""

    field: str
    """Column name in the parsed frame."""
    raw_field: str
    """Column name in the file header."""
    metric: str
    unit: str
    scale: int = 1
    gpu_index: int | None = None


@dataclass(frozen=True)
class UtilKind:
    """What one util file holds."""

    file: str
    table: str
    dataset: str
    values: tuple[Value, ...] | None
    """Fixed value columns, or None to take them from the header (GPU file)."""


GPU_UTIL = UtilKind("cluster_gpu_util", "gpu_samples", "gpu_util", None)
CPU_UTIL = UtilKind(
    "cluster_cpu_util",
    "host_samples",
    "cpu_util",
    (Value("cpu_util", "cpu_util", "cpu_util_pct", "pct"),),
)
MEM_UTIL = UtilKind(
    "cluster_mem_util",
    "host_samples",
    "mem_util",
    (
        Value("mem_total", "mem_total", "mem_total_bytes", "bytes", KIB),
        Value("mem_free", "mem_free", "mem_free_bytes", "bytes", KIB),
    ),
)
KINDS = (GPU_UTIL, CPU_UTIL, MEM_UTIL)


@dataclass
class UtilResult:
    """The samples batch of one util file and what the pre-pass learned about it."""

    batch: Batch
    stats: pl.DataFrame
    """One row per host: ``host``, ``_rows`` (good rows), one count of non-NA values per
    value column, ``first``/``last`` sample time (UTC)."""
    values: tuple[Value, ...]

    @property
    def window(self) -> tuple[datetime, datetime] | None:
        """First and last sample time (UTC), None if the file had no good row."""
        first, last = self.stats["first"].min(), self.stats["last"].max()
        if isinstance(first, datetime) and isinstance(last, datetime):
            return first, last
        return None


def _values(kind: UtilKind, path: Path, names: list[str]) -> tuple[Value, ...]:
    if kind.values is not None:
        expected = ["time", "machine_id", *(v.raw_field for v in kind.values)]
        if names[2:] != expected[2:]:
            raise InputError(
                path, f"unexpected header {','.join(names)!r}; expected {','.join(expected)}"
            )
        return kind.values
    values = []
    for name in names[2:]:
        m = _GPU_COLUMN.match(name)
        if m is None:
            raise InputError(
                path, f"unexpected header column {name!r}; expected gpu<N>_util", "line 1"
            )
        index = int(m[1])
        if index > MAX_GPU_INDEX:
            raise InputError(
                path, f"header column {name[:40]!r}: GPU index above {MAX_GPU_INDEX}", "line 1"
            )
        values.append(Value(name, name, "gpu_util_pct", "pct", gpu_index=index))
    if not values or len({v.field for v in values}) != len(values):
        raise InputError(path, "the header names no gpu<N>_util column (or repeats one)", "line 1")
    return tuple(values)


def _header(kind: UtilKind, path: Path) -> tuple[Value, ...]:
    header = read_header(path)
    names = [h.strip() for h in header.split(",")]
    if names and names[-1] == "":
        names.pop()
    if len(names) < 3 or names[0] != "time" or names[1] not in HOST_NAMES:
        raise InputError(
            path,
            f"unexpected header {header!r}; expected time,{'|'.join(HOST_NAMES)},<values>",
            "line 1",
        )
    return _values(kind, path, names)


def zoned_time(col: str) -> tuple[pl.Expr, pl.Expr]:
    """``YYYY-MM-DD HH:MM:SS PST|PDT`` -> (UTC instant, reason when unreadable).

    The suffix fixes the offset, and the result is checked against the calendar. That
    check is what catches a mislabelled hour, because a wrong suffix would otherwise
    shift the sample by one hour without any error.
    """
    parts = pl.col(col).str.extract_groups(_ZONED)
    naive = parts.struct[0].str.strptime(pl.Datetime("us"), "%Y-%m-%d %H:%M:%S", strict=False)
    zone = parts.struct[1]
    offset = pl.when(zone == "PDT").then(7).when(zone == "PST").then(8)
    utc = (naive + pl.duration(hours=offset)).dt.replace_time_zone("UTC")
    dst = utc.dt.convert_time_zone(TZ).dt.dst_offset() != pl.duration(hours=offset - 8).abs()
    quoted = pl.lit("'") + pl.col(col) + pl.lit("'")
    reason = (
        pl.when(utc.is_null())
        .then(pl.format("time {} is not 'YYYY-MM-DD HH:MM:SS PST|PDT'", quoted))
        .when(dst)
        .then(pl.format("time {}: {} is not in effect in {} then", quoted, zone, pl.lit(TZ)))
    )
    return utc, reason


def _parsed(kind: UtilKind, info: FileInfo, values: tuple[Value, ...]) -> pl.LazyFrame:
    fields = [
        FieldSpec("time", required=True),
        FieldSpec("host", required=True),
        *(FieldSpec(v.field, "float", nulls=("NA",)) for v in values),
    ]
    parsed = parse_fields(scan_lines(info, skip=1), fields, allow_trailing_empty=True)
    utc, time_reason = zoned_time("time")
    checks = [pl.col(REASON), time_reason]
    for v in values:
        col = pl.col(v.field)
        checks.append(
            pl.when(col.is_nan() | col.is_infinite())
            .then(pl.lit(f"{v.raw_field} is not a finite number"))
            .when(col < 0)
            .then(pl.lit(f"{v.raw_field} is negative"))
        )
    if kind is MEM_UTIL:
        checks.append(
            pl.when(pl.col("mem_total") == 0).then(
                pl.lit("mem_total is 0 (no memory reported; the notebook skips these rows)")
            )
        )
    return parsed.with_columns(utc.alias(UTC_TIME)).with_columns(pl.coalesce(checks).alias(REASON))


def util_file(kind: UtilKind, path: Path, workdir: Path) -> UtilResult:
    """Read one util file into a samples batch (see the module doc).

    The text is parsed once, streaming, into a typed staging Parquet file in
    ``workdir`` (raw text kept only for bad rows). The counting pre-pass, the rejects
    and the samples batch all read that file, so a multi-GB util file is split and
    typed once, not once per consumer. ``workdir`` must outlive the batch's write.
    """
    values = _header(kind, path)
    info = file_info(path, header_lines=1)
    stage = workdir / f"{kind.dataset}.parquet"
    _parsed(kind, info, values).select(
        LINE,
        pl.when(pl.col(REASON).is_not_null()).then(pl.col(RAW)).alias(RAW),
        REASON,
        UTC_TIME,
        "host",
        *(v.field for v in values),
    ).sink_parquet(stage, compression="lz4", statistics=False)
    parsed = pl.scan_parquet(stage)
    good = parsed.filter(pl.col(REASON).is_null())
    stats_q = good.group_by("host").agg(
        pl.len().alias("_rows"),
        pl.sum_horizontal(pl.col(v.field).is_not_null() for v in values)
        .eq(0)
        .sum()
        .alias("_all_na"),
        *(pl.col(v.field).count() for v in values),
        pl.col(UTC_TIME).min().alias("first"),
        pl.col(UTC_TIME).max().alias("last"),
    )
    rejected_q = quarantine_rows(
        parsed.filter(pl.col(REASON).is_not_null()),
        source=SOURCE,
        dataset=kind.dataset,
        cluster=CLUSTER,
        table=kind.table,
        file=path,
    )
    stats, rejected = pl.collect_all([stats_q, rejected_q], engine="streaming")
    stats = stats.sort("host")
    good_rows = int(stats["_rows"].sum())
    all_na = int(stats["_all_na"].sum())
    if good_rows + rejected.height != info.records:
        msg = f"{path}: {info.records} rows but {good_rows} good + {rejected.height} quarantined"
        raise ReconciliationError(msg)
    samples = sum(int(stats[v.field].sum()) for v in values)

    # Wide -> long as one projection per value column, concatenated: all gpu0 samples
    # in file (time) order, then all gpu1 samples, ... Each part is its own scan of
    # the typed staging file reading only its columns. That is cheap (Parquet
    # projection), keeps the output order fixed whatever the thread count (a streaming
    # unpivot's order is not), and costs less CPU than exploding per-row lists. The
    # scans must stay separate: parts sharing one subplan get it cached and fanned
    # out, and an in-order concat then buffers every later part in memory.
    def part(v: Value) -> pl.LazyFrame:
        return (
            pl.scan_parquet(stage)
            .select(UTC_TIME, "host", v.field, REASON)
            .filter(pl.col(REASON).is_null() & pl.col(v.field).is_not_null())
            .select(
                pl.lit(SOURCE).alias("source"),
                pl.lit(kind.dataset).alias("dataset"),
                pl.lit(CLUSTER).alias("cluster"),
                pl.col(UTC_TIME).alias("time"),
                pl.col("host"),
                *(
                    [pl.lit(v.gpu_index, dtype=pl.Int16).alias("gpu_index")]
                    if kind.table == "gpu_samples"
                    else []
                ),
                pl.lit(v.metric).alias("metric"),
                (pl.col(v.field) * float(v.scale) if v.scale != 1 else pl.col(v.field)).alias(
                    "value"
                ),
                pl.lit(v.unit).alias("unit"),
                pl.lit(v.raw_field).alias("raw_field"),
            )
        )

    rows = pl.concat([part(v) for v in values])
    metadata = {
        "source_tz": TZ,
        "time_basis": "absolute",
        "time_rule": "PST/PDT suffix gives the UTC offset (-8 h / -7 h)",
        "na_rule": "NA (offline) produces no sample row",
        "file_rows": str(info.records),
        "rows_with_samples": str(good_rows - all_na),
        "rows_all_na": str(all_na),
        "rows_quarantined": str(rejected.height),
    }
    if kind is MEM_UTIL:
        metadata["unit_rule"] = "mem_total/mem_free taken as KiB, x1024 -> bytes"
    batch = Batch(
        kind.table,
        kind.dataset,
        info,
        rows,
        rejected,
        rows_read=samples + rejected.height,
        cluster=CLUSTER,
        metadata=metadata,
        sort=False,
    )
    return UtilResult(batch, stats, values)


def inferred_inventory(result: UtilResult) -> pl.DataFrame:
    """Machines as the GPU util file shows them: per host, the number of ``gpuN_util``
    columns that are ever not ``NA`` (0 for hosts whose GPUs are always offline).
    This is how Qinghao-Hu's revised list (3,205 GPUs) was derived.
    """
    return result.stats.select(
        pl.lit(SOURCE).alias("source"),
        pl.lit("inferred_util").alias("dataset"),
        pl.lit(CLUSTER).alias("cluster"),
        pl.col("host").alias("machine_id"),
        pl.sum_horizontal(pl.col(v.field).gt(0) for v in result.values)
        .cast(pl.Int32)
        .alias("gpus"),
    )
