"""nvidia-smi outputs -> ``gpu_samples``, ``events`` and ``gpu_processes``.

Four formats, told apart by their first line (a folder is read file by file and files
that are none of them are skipped):

- ``--query-gpu=... --format=csv[,noheader][,nounits]``: one line per GPU per tick; the
  header names the fields (``memory.used [MiB]``), values carry units (``19818 MiB``)
  unless ``nounits``. Without a header pass ``--query`` (the same field list). Records:
  one per (data line x kept field), see :mod:`gpu_trace.loaders.telemetry_common`; a line with the
  wrong number of fields is one quarantined record.
- ``--query-compute-apps=... --format=csv``: one line per process -> ``gpu_processes``;
  one record per data line.
- ``dmon``: ``# gpu pwr gtemp ...`` / ``# Idx W C ...`` headers, whitespace-separated
  rows, ``-`` for missing; parsed by header *names* (columns vary with ``-s`` and driver).
  Records: data line x kept column. ``-o DT`` adds ``Date``/``Time`` columns.
- ``pmon``: ``# gpu pid type sm mem ... command``; one record per process line; lines
  with pid ``-`` (no process on that GPU) are not records (counted in the metadata).
  A line whose ``sm``/``mem`` is outside 0-100 % is quarantined.

Range checks on samples (utilization outside 0-100 %, memory free/used above total):
see :func:`gpu_trace.loaders.telemetry_common.cells_to_rows`. A file that starts with a UTF-8
byte-order mark reads as if it had none.

Times: the query CSV's ``timestamp`` and dmon/pmon's ``-o DT`` columns are local times
without a zone: read in ``--tz`` (default UTC, recorded as ``source_tz``). Without them,
tick *k* of a GPU is at ``--start + k x --interval``, or without ``--start`` the last tick
is relative time from 1970-01-01 (``time_basis`` says which, and a ``warning:`` line says so).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from gpu_trace.errors import InputError
from gpu_trace.loaders.base import Batch
from gpu_trace.loaders.telemetry_common import (
    TimeBasis,
    cell_number,
    check_lines,
    finish_wide,
    first_lines,
    is_missing,
    parse_start,
    quarantine_frame,
    tick_times,
    zone,
)
from gpu_trace.loaders.telemetry_fields import SMI_DMON, SMI_QUERY
from gpu_trace.loaders.telemetry_options import host_option, interval_option, start_option
from gpu_trace.loaders.textfile import RAW, REASON, FileInfo, file_info, scan_lines
from gpu_trace.loaders.units import MIB
from gpu_trace.loaders.zones import parse_tz
from gpu_trace.plugins import LoaderPlugin, option
from gpu_trace.store.parquet import slug

SOURCE = "nvidia-smi"
IDENTITY = ("timestamp", "index", "uuid", "hostname", "name", "pci.bus_id")
TS_FORMAT = "%Y/%m/%d %H:%M:%S%.3f"

MAX_BYTES = float(2**62)
"""Memory above this (4 EiB) cannot be a reading and would overflow int64 bytes."""


def _header_names(line: str) -> tuple[list[str], list[str | None]]:
    names: list[str] = []
    units: list[str | None] = []
    for token in line.split(","):
        token = token.strip()
        name, _, unit = token.partition(" [")
        names.append(name.strip())
        units.append(unit.rstrip("]") if unit else None)
    return names, units


def sniff(path: Path, query: str | None = None) -> str | None:
    """Which nvidia-smi format ``path`` holds, or None."""
    first = first_lines(path, 1)[0]
    if first.lstrip().startswith("#"):
        tokens = first.lstrip("# ").lower().split()
        if "pid" in tokens and "gpu" in tokens:
            return "pmon"
        if "gpu" in tokens:
            return "dmon"
        return None
    names, _ = _header_names(first)
    if "pid" in names and ("used_gpu_memory" in names or "used_memory" in names):
        return "apps"
    if set(names) & (set(SMI_QUERY) | set(IDENTITY)):
        return "query"
    if query:
        return "query"
    return None


def _local(expr: pl.Expr, fmt: str, tz: str) -> pl.Expr:
    zone(tz)
    return (
        expr.str.strip_chars()
        .str.strptime(pl.Datetime("us"), fmt, strict=False)
        .dt.replace_time_zone(tz, ambiguous="earliest", non_existent="null")
        .dt.convert_time_zone("UTC")
    )


def _host(host: str | None, column: pl.Expr | None, path: Path) -> pl.Expr:
    if host:
        return pl.lit(host)
    fallback = pl.lit(slug(path.stem))
    if column is None:
        return fallback
    return pl.when(is_missing(column)).then(fallback).otherwise(column.str.strip_chars())


def _split_lines(
    lines: pl.LazyFrame, parts: pl.Expr, n: int, *, at_least: bool = False
) -> pl.DataFrame:
    count = parts.list.len()
    ok = (count >= n) if at_least else (count == n)
    return (
        lines.with_columns(parts.alias("_parts"))
        .with_columns(
            pl.when(pl.col(RAW).str.strip_chars() == "")
            .then(pl.lit("empty line"))
            .when(~ok)
            .then(pl.format(f"expected {n} fields, found {{}}", count))
            .otherwise(
                pl.when(pl.col(RAW).str.contains("\ufffd", literal=True)).then(
                    pl.lit("invalid UTF-8")
                )
            )
            .alias(REASON)
        )
        .collect()
    )


def _columns(names: list[str]) -> dict[str, pl.Expr]:
    """Field ``name`` -> its token of the split line (null when the line is short)."""
    return {n: pl.col("_parts").list.get(i, null_on_oob=True) for i, n in enumerate(names)}


def query_csv(
    path: Path,
    dataset: str,
    *,
    tz: str = "UTC",
    host: str | None = None,
    query: str | None = None,
    start: str | None = None,
    interval_s: float = 1.0,
) -> list[Batch]:
    """``--query-gpu`` CSV (with or without header and units)."""
    first = first_lines(path, 1)[0]
    names, units = _header_names(first)
    header = bool(set(names) & (set(SMI_QUERY) | set(IDENTITY)))
    if not header:
        if not query:
            raise InputError(
                path, "no header line; pass --query with the --query-gpu field list", "line 1"
            )
        names, units = _header_names(query)
    skip = 1 if header else 0
    for name, unit in zip(names, units, strict=True):
        f = SMI_QUERY.get(name)
        if f is not None and unit is not None and f.unit is not None and unit != f.unit:
            raise InputError(path, f"{name} is in [{unit}], expected [{f.unit}]", "line 1")
    info = file_info(path, 0)
    lines = scan_lines(info, skip=skip).with_columns(pl.col(RAW).str.strip_chars_end("\r"))
    split = _split_lines(lines, pl.col(RAW).str.split(", "), len(names))
    col = _columns(names)
    tzs = tz
    if "timestamp" in col:
        time = _local(col["timestamp"], TS_FORMAT, tz)
        basis = TimeBasis("file", tz)
    else:
        gpu = col.get("index", col.get("uuid", pl.lit(0)))
        ticks = split.filter(pl.col(REASON).is_null()).height
        time, basis = tick_times(
            gpu.cum_count().over(gpu) - 1,
            ticks,
            start=parse_start(start, tz),
            interval_s=interval_s,
            path=path,
        )
        tzs = basis.tz
    keyed = split.with_columns(
        time.alias("time"),
        _host(host, col.get("hostname"), path).alias("host"),
        col["index"].str.strip_chars().cast(pl.Int16, strict=False).alias("gpu_index")
        if "index" in col
        else pl.lit(None, dtype=pl.Int16).alias("gpu_index"),
        col["uuid"].str.strip_chars().alias("gpu_uuid")
        if "uuid" in col
        else pl.lit(None, dtype=pl.String).alias("gpu_uuid"),
    ).with_columns(
        pl.when(pl.col(REASON).is_null() & pl.col("time").is_null())
        .then(pl.lit("timestamp is not YYYY/MM/DD HH:MM:SS.mmm (or not a valid local time)"))
        .otherwise(pl.col(REASON))
        .alias(REASON)
    )
    kept = [(i, n) for i, n in enumerate(names) if n in SMI_QUERY]
    if not kept:
        raise InputError(path, "none of the queried fields is a GPU metric gpu-trace keeps")
    return finish_wide(
        keyed,
        keys=["time", "host", "gpu_index", "gpu_uuid"],
        kept=kept,
        fields=SMI_QUERY,
        source=SOURCE,
        info=info,
        dataset=dataset,
        used=split.height,
        header_lines=skip,
        basis=TimeBasis(basis.basis, tzs),
        extra={"format": "nvidia-smi --query-gpu csv"},
    )


def compute_apps(
    path: Path, dataset: str, *, tz: str = "UTC", host: str | None = None
) -> list[Batch]:
    """``--query-compute-apps`` CSV -> ``gpu_processes`` (one record per line)."""
    names, units = _header_names(first_lines(path, 1)[0])
    mem_name = "used_gpu_memory" if "used_gpu_memory" in names else "used_memory"
    mem_unit = units[names.index(mem_name)]
    if mem_unit not in (None, "MiB"):
        raise InputError(path, f"{mem_name} is in [{mem_unit}], expected [MiB]", "line 1")
    if "timestamp" not in names:
        raise InputError(
            path, "no timestamp field; add timestamp to --query-compute-apps", "line 1"
        )
    info = file_info(path, 0)
    lines = scan_lines(info, skip=1).with_columns(pl.col(RAW).str.strip_chars_end("\r"))
    split = _split_lines(lines, pl.col(RAW).str.split(", "), len(names))
    col = {
        n: pl.col("_parts").list.get(i, null_on_oob=True).str.strip_chars()
        for i, n in enumerate(names)
    }
    pid = col["pid"].cast(pl.Int64, strict=False)
    mem = col[mem_name]
    mem_n = cell_number(mem)
    typed = split.with_columns(
        _local(col["timestamp"], TS_FORMAT, tz).alias("time"),
        _host(host, col.get("hostname"), path).alias("host"),
        (col["gpu_uuid"] if "gpu_uuid" in col else pl.lit(None, dtype=pl.String)).alias("gpu_uuid"),
        pid.alias("pid"),
        (col["process_name"] if "process_name" in col else pl.lit(None, dtype=pl.String)).alias(
            "process_name"
        ),
        pl.when(is_missing(mem) | (mem_n * MIB).abs().ge(MAX_BYTES))
        .then(None)
        .otherwise(mem_n * MIB)
        .cast(pl.Int64)
        .alias("used_mem_bytes"),
    ).with_columns(
        pl.coalesce(
            pl.col(REASON),
            pl.when(pl.col("time").is_null()).then(pl.lit("timestamp is not a valid local time")),
            pl.when(pid.is_null()).then(pl.format("pid '{}' is not an integer", col["pid"])),
            pl.when(~is_missing(mem) & mem_n.is_null()).then(
                pl.format("{} '{}' is not a number", pl.lit(mem_name), mem)
            ),
            pl.when(~is_missing(mem) & (mem_n * MIB).abs().ge(MAX_BYTES)).then(
                pl.format("{} '{}' is out of range", pl.lit(mem_name), mem)
            ),
        ).alias(REASON)
    )
    good = typed.filter(pl.col(REASON).is_null()).select(
        pl.lit(SOURCE).alias("source"),
        pl.lit(dataset).alias("dataset"),
        "time",
        "host",
        "gpu_uuid",
        "pid",
        "process_name",
        "used_mem_bytes",
    )
    bad = quarantine_frame(
        typed.filter(pl.col(REASON).is_not_null()),
        source=SOURCE,
        dataset=dataset,
        file=path,
        table="gpu_processes",
    )
    check_lines(info, split.height, 1)
    return [
        Batch(
            "gpu_processes",
            dataset,
            info,
            good,
            bad,
            rows_read=split.height,
            metadata={**TimeBasis("file", tz).metadata(), "format": "nvidia-smi compute-apps"},
        )
    ]


def _dmon_header(path: Path) -> list[str]:
    return first_lines(path, 1)[0].lstrip("#").strip().lower().split()


def _monitor_lines(
    path: Path, names: list[str], *, at_least: bool = False
) -> tuple[pl.DataFrame, dict[str, pl.Expr], int, FileInfo]:
    """The data lines of a dmon/pmon file split on whitespace (``_reason`` set on lines
    with the wrong token count), the column expressions, the ``#`` line count and the
    file info: the first steps dmon and pmon share.
    """
    info = file_info(path, 0)
    lines = scan_lines(info).with_columns(pl.col(RAW).str.strip_chars_end("\r"))
    comments = lines.filter(pl.col(RAW).str.strip_chars_start().str.starts_with("#"))
    data = lines.filter(~pl.col(RAW).str.strip_chars_start().str.starts_with("#"))
    n_comments = comments.select(pl.len()).collect().item()
    tokens = pl.col(RAW).str.extract_all(r"\S+")
    split = _split_lines(data, tokens, len(names), at_least=at_least)
    return split, _columns(names), n_comments, info


def _monitor_time(
    split: pl.DataFrame,
    col: dict[str, pl.Expr],
    key: pl.Expr,
    *,
    path: Path,
    tz: str,
    start: str | None,
    interval_s: float,
) -> tuple[pl.DataFrame, TimeBasis]:
    if "date" in col and "time" in col:
        time = _local(pl.concat_str(col["date"], pl.lit(" "), col["time"]), "%Y%m%d %H:%M:%S", tz)
        basis = TimeBasis("file", tz)
    else:
        ok = pl.col(REASON).is_null()
        ticks = (
            split.filter(pl.col(REASON).is_null()).select((key.cum_count().over(key)).max()).item()
            if split.filter(pl.col(REASON).is_null()).height
            else 0
        )
        time, basis = tick_times(
            pl.when(ok).then(key.cum_count().over(key, ok) - 1),
            int(ticks or 0),
            start=parse_start(start, tz),
            interval_s=interval_s,
            path=path,
        )
    out = split.with_columns(time.alias("time")).with_columns(
        pl.when(pl.col(REASON).is_null() & pl.col("time").is_null())
        .then(pl.lit("Date/Time is not YYYYMMDD HH:MM:SS (or not a valid local time)"))
        .otherwise(pl.col(REASON))
        .alias(REASON)
    )
    return out, basis


def dmon(
    path: Path,
    dataset: str,
    *,
    tz: str = "UTC",
    host: str | None = None,
    start: str | None = None,
    interval_s: float = 1.0,
) -> list[Batch]:
    """``nvidia-smi dmon`` text."""
    names = _dmon_header(path)
    if "gpu" not in names:
        raise InputError(path, "dmon header has no 'gpu' column", "line 1")
    if not any(n in SMI_DMON for n in names):
        raise InputError(
            path, "dmon header names no metric column gpu-trace keeps (truncated file?)", "line 1"
        )
    split, col, n_comments, info = _monitor_lines(path, names)
    gpu = col["gpu"].cast(pl.Int16, strict=False)
    split = split.with_columns(
        pl.when(pl.col(REASON).is_null() & gpu.is_null())
        .then(pl.format("gpu '{}' is not an index", col["gpu"]))
        .otherwise(pl.col(REASON))
        .alias(REASON)
    )
    keyed, basis = _monitor_time(
        split, col, gpu, path=path, tz=tz, start=start, interval_s=interval_s
    )
    keyed = keyed.with_columns(
        _host(host, None, path).alias("host"),
        gpu.alias("gpu_index"),
    )
    return finish_wide(
        keyed,
        keys=["time", "host", "gpu_index"],
        kept=[(i, n) for i, n in enumerate(names) if n in SMI_DMON],
        fields=SMI_DMON,
        source=SOURCE,
        info=info,
        dataset=dataset,
        used=split.height,
        header_lines=n_comments,
        basis=basis,
        extra={"format": "nvidia-smi dmon", "interval_s": str(interval_s)},
    )


def pmon(
    path: Path,
    dataset: str,
    *,
    tz: str = "UTC",
    host: str | None = None,
    start: str | None = None,
    interval_s: float = 1.0,
) -> list[Batch]:
    """``nvidia-smi pmon`` text -> ``gpu_processes``."""
    names = _dmon_header(path)
    split, col, n_comments, info = _monitor_lines(path, names, at_least=True)
    if "command" in names:
        col["command"] = pl.col("_parts").list.slice(names.index("command")).list.join(" ")
    no_process = col["pid"] == "-"
    split = split.with_columns(no_process.fill_null(False).alias("_none"))
    idle = split.filter(pl.col("_none") & pl.col(REASON).is_null()).height
    split = split.filter(~(pl.col("_none") & pl.col(REASON).is_null()))
    gpu = col["gpu"].cast(pl.Int16, strict=False)
    pid = col["pid"].cast(pl.Int64, strict=False)
    num: dict[str, pl.Expr] = {k: cell_number(col[k]) for k in ("sm", "mem") if k in col}
    checks = (
        [
            pl.col(REASON),
            pl.when(gpu.is_null()).then(pl.format("gpu '{}' is not an index", col["gpu"])),
            pl.when(pid.is_null()).then(pl.format("pid '{}' is not an integer", col["pid"])),
        ]
        + [
            pl.when(~is_missing(col[k]) & v.is_null()).then(
                pl.format(f"{k} '{{}}' is not a number", col[k])
            )
            for k, v in num.items()
        ]
        + [
            pl.when(~is_missing(col[k]) & ((v < 0) | (v > 100))).then(
                pl.format(f"{k} '{{}}' is outside 0-100 %", col[k])
            )
            for k, v in num.items()
        ]
    )
    split = split.with_columns(pl.coalesce(checks).alias(REASON))
    key = pl.concat_str(col["gpu"], pl.lit("/"), col["pid"])
    keyed, basis = _monitor_time(
        split, col, key, path=path, tz=tz, start=start, interval_s=interval_s
    )

    def util(k: str) -> pl.Expr:
        if k not in col:
            return pl.lit(None, dtype=pl.Float64)
        return pl.when(is_missing(col[k])).then(None).otherwise(num[k])

    good = keyed.filter(pl.col(REASON).is_null()).select(
        pl.lit(SOURCE).alias("source"),
        pl.lit(dataset).alias("dataset"),
        "time",
        _host(host, None, path).alias("host"),
        gpu.alias("gpu_index"),
        pid.alias("pid"),
        (col["type"] if "type" in col else pl.lit(None, dtype=pl.String)).alias("process_type"),
        (col["command"] if "command" in col else pl.lit(None, dtype=pl.String)).alias(
            "process_name"
        ),
        util("sm").alias("sm_util_pct"),
        util("mem").alias("mem_util_pct"),
    )
    bad = quarantine_frame(
        keyed.filter(pl.col(REASON).is_not_null()),
        source=SOURCE,
        dataset=dataset,
        file=path,
        table="gpu_processes",
    )
    check_lines(info, split.height + idle, n_comments)
    return [
        Batch(
            "gpu_processes",
            dataset,
            info,
            good,
            bad,
            rows_read=good.height + bad.height,
            metadata={
                **basis.metadata(),
                "format": "nvidia-smi pmon",
                "no_process_lines": str(idle),
                "interval_s": str(interval_s),
            },
        )
    ]


class NvidiaSmiLoader:
    """Loader for nvidia-smi query CSV, compute-apps CSV, dmon and pmon files."""

    name = SOURCE
    version = "1"

    def batches(
        self,
        path: Path,
        *,
        tz: str = "UTC",
        host: str | None = None,
        query: str | None = None,
        start: str | None = None,
        interval_s: float = 1.0,
        **_: Any,
    ) -> Iterator[Batch]:
        """Yield the batches of every nvidia-smi file at ``path`` (a file or a folder)."""
        tz = parse_tz(tz)
        files = [path] if path.is_file() else sorted(p for p in path.iterdir() if p.is_file())
        for f in files:
            kind = sniff(f, query)
            dataset = slug(f.stem)
            if kind == "query":
                yield from query_csv(
                    f, dataset, tz=tz, host=host, query=query, start=start, interval_s=interval_s
                )
            elif kind == "apps":
                yield from compute_apps(f, dataset, tz=tz, host=host)
            elif kind == "dmon":
                yield from dmon(f, dataset, tz=tz, host=host, start=start, interval_s=interval_s)
            elif kind == "pmon":
                yield from pmon(f, dataset, tz=tz, host=host, start=start, interval_s=interval_s)
            elif path.is_file() and ", " in first_lines(f, 1)[0]:
                raise InputError(
                    f, "no header line; pass --query with the --query-gpu field list", "line 1"
                )
            elif path.is_file():
                raise InputError(
                    f, "not an nvidia-smi output (query CSV, compute-apps CSV, dmon or pmon)"
                )


@dataclass(frozen=True)
class NvidiaSmiOptions:
    """`gpu-trace ingest nvidia-smi` options (passed to the loader as keyword arguments)."""

    tz: str = option(
        "UTC", "IANA zone of the tool's local timestamps (recorded as source_tz).", parse=parse_tz
    )
    host: str | None = host_option()
    query: str | None = option(None, "The --query-gpu field list, for CSV written with noheader.")
    start: str | None = start_option()
    interval_s: float = interval_option()


PLUGIN = LoaderPlugin(
    name="nvidia-smi",
    loader=NvidiaSmiLoader,
    help="nvidia-smi --query-gpu / --query-compute-apps CSV, dmon and pmon -> gpu_samples, events, gpu_processes.",
    options=NvidiaSmiOptions,
)
