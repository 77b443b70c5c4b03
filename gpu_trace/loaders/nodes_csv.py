r"""A plain node list for any cluster -> ``machines`` and ``capacity`` (source
``nodes-csv``).

For clusters whose scheduler has no export we read (or a hand-kept list)::

    node,gpus,gpu_type,cpus,mem
    gpu01,8,a100,128,1T
    gpu02,8,a100,128,1048576M
    cpu01,0,,64,274877906944

Columns are found **by header name** (case-insensitive, any order, no quoting needed:
names hold no commas). ``node`` and ``gpus`` are required; ``gpu_type``, ``cpus``,
``mem``, ``partition``, ``state``, ``available`` and ``time`` are optional, others
ignored.

- ``gpus``: a whole number of GPUs installed (0 to 4096); ``cpus``: CPU cores (a
  number); ``gpu_type``: the model, as your jobs name it.
- ``mem``: host memory, bytes (``274877906944``) or a number with a binary unit: ``K``,
  ``M``, ``G``, ``T``, ``P`` (also written ``Gi`` / ``GiB``), powers of 1024 as in Slurm:
  ``512G`` = ``524288M`` = 512 GiB. ``GB`` / ``MB`` are refused: they are read as powers
  of 1000 by some tools and 1024 by others.
- ``partition``: the node's pool(s), several joined with ``;``; ``state``: kept as text;
  ``available``: ``true`` / ``false`` (also ``yes`` / ``no``, ``1`` / ``0``); without
  it availability is unknown and the node counts in capacity.
- ``time``: when the row was true, ISO 8601 with ``Z`` or an offset
  (``2026-12-01T09:00:00Z``, ``2026-12-01 10:00+01:00``). Each distinct time is one
  snapshot (one dataset), so one file can hold capacity over time. Without the column
  the file is one snapshot, timed as every inventory (:mod:`.inventory`).

Every line is accounted for (rows read = machines written + quarantined); a value that
is negative, not a number, past int64 or out of range is quarantined with the reason.
"""

from __future__ import annotations

import datetime as dt
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl

from gpu_trace.errors import InputError, UsageError
from gpu_trace.loaders import inventory as inv
from gpu_trace.loaders import slurm_node_values as nv
from gpu_trace.loaders.base import Batch
from gpu_trace.loaders.textfile import (
    LINE,
    RAW,
    REASON,
    FieldSpec,
    FileInfo,
    file_info,
    parse_fields,
    read_header,
    scan_lines,
)
from gpu_trace.plugins import LoaderPlugin

SOURCE = "nodes-csv"
SUFFIXES = (".csv",)
COLUMNS = ("node", "gpus", "gpu_type", "cpus", "mem", "partition", "state", "available", "time")
REQUIRED = ("node", "gpus")
MEM = r"^(\d+(?:\.\d+)?)(?:([KMGTP])(?:i|iB)?|B)?$"
_UNIT = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4, "P": 1024**5}
MEM_MAX = 2.0**62
TIME = (
    r"^(\d{4}-\d{2}-\d{2})[T ](\d{2}:[0-5]\d)(:[0-5]\d(?:\.\d{1,6})?)?"
    r"(Z|[+-]\d{2}:?\d{2})$"
)
TRUE = ("true", "yes", "1")
FALSE = ("false", "no", "0")


def read_csv_header(path: Path, original: Path | None = None) -> tuple[str, ...]:
    """The column names (lower case), or a one-line error naming what is missing (about
    ``original`` when ``path`` is its bounded copy).
    """
    names = tuple(n.strip().strip('"').strip().lower() for n in read_header(path).split(","))
    path = original or path
    dupes = sorted({n for n in names if n in COLUMNS and names.count(n) > 1})
    if dupes:
        raise InputError(path, f"the header names {', '.join(dupes)} twice", "line 1")
    missing = [c for c in REQUIRED if c not in names]
    if missing:
        raise InputError(
            path,
            f"header lacks column(s) {', '.join(missing)} (expected node,gpus,gpu_type,cpus,mem)",
            "line 1",
        )
    return names


def _quoted(text: pl.Expr) -> pl.Expr:
    return pl.lit("'") + text + pl.lit("'")


def _col(name: str, names: tuple[str, ...]) -> pl.Expr:
    if name not in names:
        return pl.lit(None, dtype=pl.String)
    return pl.col(f"_c_{name}")


def _mem_bytes(text: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    m = text.str.extract_groups(MEM)
    number = m.struct.field("1").cast(pl.Float64, strict=False)
    unit = m.struct.field("2").fill_null("")
    value = (number * unit.replace_strict(_UNIT, default=None, return_dtype=pl.Float64)).round(0)
    bad = text.is_not_null() & (value.is_null() | (value >= MEM_MAX)).fill_null(True)
    return pl.when(~bad).then(value).cast(pl.Int64), bad


def _utc(text: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """A ``time`` value as a UTC instant, and whether it is malformed."""
    m = text.str.extract_groups(TIME)
    local = (
        m.struct.field("1")
        + pl.lit("T")
        + m.struct.field("2")
        + m.struct.field("3").fill_null(":00")
    ).str.strptime(pl.Datetime("us"), "%Y-%m-%dT%H:%M:%S%.f", strict=False)
    zone = m.struct.field("4")
    offset = zone.str.replace(":", "", literal=True)
    minutes = (
        pl.when(zone == "Z")
        .then(0)
        .otherwise(
            offset.str.slice(1, 2).cast(pl.Int64, strict=False) * 60
            + offset.str.slice(3, 2).cast(pl.Int64, strict=False)
        )
    )
    sign = pl.when(offset.str.starts_with("-")).then(-1).otherwise(1)
    utc = (local - pl.duration(minutes=sign * minutes)).dt.replace_time_zone("UTC")
    bad = text.is_not_null() & utc.is_null()
    return utc, bad


def parse(info: FileInfo, names: tuple[str, ...]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(good, bad) lines as :func:`gpu_trace.loaders.sinfo.parse` returns them, good
    ones with ``_time`` (their ``time``, null without the column).
    """
    specs = [FieldSpec(f"_c_{n}" if n in COLUMNS else f"_x{i}") for i, n in enumerate(names)]
    lines = scan_lines(info, skip=1).with_columns(pl.col(RAW).str.strip_suffix("\r"))
    frame = (
        parse_fields(lines, specs)
        .with_columns(
            pl.col(f"_c_{n}").str.strip_chars().str.strip_chars('"').str.strip_chars()
            for n in names
            if n in COLUMNS
        )
        .with_columns(
            pl.when(pl.col(f"_c_{n}") != "").then(pl.col(f"_c_{n}")).alias(f"_c_{n}")
            for n in names
            if n in COLUMNS
        )
        .collect()
    )
    node = _col("node", names)
    gpus_text = _col("gpus", names)
    gpus = gpus_text.cast(pl.Int64, strict=False)
    gpus_bad = gpus_text.is_not_null() & (
        ~gpus_text.str.contains(r"^\d+$") | gpus.is_null() | (gpus > nv.GPU_MAX_PER_NODE)
    )
    cpus_text = _col("cpus", names)
    cpus = cpus_text.cast(pl.Float64, strict=False)
    cpus_bad = cpus_text.is_not_null() & (
        ~cpus_text.str.contains(r"^\d+(?:\.\d+)?$") | (cpus > nv.CPU_MAX)
    )
    mem, mem_bad = _mem_bytes(_col("mem", names))
    when, when_bad = _utc(_col("time", names))
    avail_text = _col("available", names).str.to_lowercase()
    avail_bad = avail_text.is_not_null() & ~avail_text.is_in([*TRUE, *FALSE])
    checks: list[tuple[pl.Expr, pl.Expr | str]] = [
        (pl.col(REASON).is_not_null(), pl.col(REASON)),
        (inv.long_lines().is_not_null(), inv.long_lines()),
        (node.is_null(), "node is missing"),
        (node.str.contains(r"\s"), pl.format("node {} holds a blank", _quoted(node))),
        (gpus_text.is_null(), "gpus is missing"),
        (
            gpus_bad,
            pl.format(
                f"gpus {{}} is not a whole number of GPUs (0 to {nv.GPU_MAX_PER_NODE})",
                _quoted(gpus_text),
            ),
        ),
        (
            cpus_bad,
            pl.format(f"cpus {{}} is not a number of CPUs (0 to {nv.CPU_MAX})", _quoted(cpus_text)),
        ),
        (
            mem_bad,
            pl.format(
                "mem {} is not bytes or a number with a binary unit K, M, G, T, P "
                "(512G = 524288M = 512 GiB; GB and MB are ambiguous), below 4 EiB",
                _quoted(_col("mem", names)),
            ),
        ),
        (
            pl.lit("time" in names) & _col("time", names).is_null(),
            "time is missing (the file has a time column)",
        ),
        (
            when_bad,
            pl.format(
                "time {} is not an ISO-8601 time with Z or an offset (2026-12-01T09:00:00Z)",
                _quoted(_col("time", names)),
            ),
        ),
        (
            avail_bad,
            pl.format("available {} is not true or false", _quoted(_col("available", names))),
        ),
    ]
    kept, bad = inv.split_checked(frame, checks)
    good = kept.select(
        LINE,
        node.alias("machine_id"),
        gpus.alias("gpus"),
        pl.lit(None, dtype=pl.Int64).alias("gpus_schedulable"),
        _col("gpu_type", names).alias("gpu_type"),
        cpus.alias("cpus"),
        mem.alias("mem_bytes"),
        _col("state", names).alias("state"),
        pl.when(avail_text.is_in(TRUE))
        .then(True)
        .when(avail_text.is_in(FALSE))
        .then(False)
        .cast(pl.Boolean)
        .alias("available"),
        _col("partition", names).str.replace_all(";", ",", literal=True).alias("partition"),
        # snapshots are named to the second (inventory.stamp): times within one second
        # are one snapshot, not two datasets of one name
        when.dt.truncate("1s").alias("_time"),
    )
    return good, bad


class NodesCsvLoader:
    """Loader for plain node-list CSVs (a file, or a folder of them)."""

    name = SOURCE
    version = "1"

    def batches(
        self,
        path: Path,
        *,
        cluster: str | None = None,
        snapshot_time: dt.datetime | None = None,
        **_: Any,
    ) -> Iterator[Batch]:
        """Yield a ``machines`` and a ``capacity`` batch per snapshot."""
        name = inv.require_cluster(cluster, "nodes-csv")
        files = inv.discover(path, SUFFIXES, "node list CSV")
        if snapshot_time is not None and len(files) > 1:
            inv.snapshots(files, snapshot_time)  # the one-line refusal
        parts: list[tuple[inv.Snapshot, FileInfo, FileInfo, pl.DataFrame, pl.DataFrame]] = []
        for f in files:
            inv.check_size(f)
            info = file_info(f, header_lines=1)
            scan = inv.bounded(info)
            names = read_csv_header(scan.path, f)
            good, bad = parse(scan, names)
            if "time" in names:
                if snapshot_time is not None:
                    msg = f"--snapshot-time given but {f.name} has a time column (one or the other)"
                    raise UsageError(msg)
                times = good.get_column("_time").unique().sort().to_list()
                if not times:
                    times = [None]
                for i, t in enumerate(times):
                    rows = good.filter(pl.col("_time") == t) if t is not None else good.head(0)
                    shot = inv.Snapshot(f, t or _fallback(f), "time_column")
                    parts.append((shot, info, scan, rows, bad if i == 0 else bad.head(0)))
            else:
                (shot,) = inv.snapshots([f], snapshot_time)
                parts.append((shot, info, scan, good, bad))
        parts.sort(key=lambda p: (p[0].time, p[0].path.name))
        for (shot, info, scan, good, bad), period in zip(
            parts, inv.periods([p[0].time for p in parts]), strict=True
        ):
            yield from inv.batches(
                source=SOURCE,
                cluster=name,
                info=info,
                snapshot=shot,
                period_s=period,
                parsed=good.drop("_time"),
                bad=bad,
                scan=scan,
                metadata={"format": "nodes-csv"},
            )


def _fallback(path: Path) -> dt.datetime:
    """The time of a file whose time column has no usable value (every row is then
    quarantined): its name's time, else its modification time (with a warning).
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (shot,) = inv.snapshots([path], None)
    return shot.time


PLUGIN = LoaderPlugin(
    name="nodes-csv",
    loader=NodesCsvLoader,
    help=(
        "Plain node list CSV node,gpus,gpu_type,cpus,mem[,partition,state,available,time] "
        "for any cluster -> machines, capacity (one dataset per snapshot).\n\nPATH: one CSV "
        "or a folder of *.csv."
    ),
    options=inv.InventoryOptions,
)
