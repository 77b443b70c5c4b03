"""What the node-inventory loaders share (``sinfo``, ``scontrol``, ``nodes-csv``): when
each inventory was taken, its dataset name, one machine per node, and capacity over time.

- **Snapshot time**: ``--snapshot-time`` (ISO 8601 with ``Z`` or an offset), else a UTC
  time in the file name (:data:`NAME_TIME`: ``sinfo-2026-12-01T0900Z.txt``,
  ``nodes-20261201T090000Z.csv``, ``scontrol-2026-12-01T09:00:00Z.txt``), else the
  file's modification time, with one ``warning:`` line saying so. Where it came from is
  recorded in the Parquet metadata (``snapshot_time_from``).
- **One dataset per snapshot**: ``<cluster>-inventory-<YYYYMMDDTHHMMSSZ>``, so successive
  ingests accumulate snapshots (each ingest adds its own), re-ingesting one snapshot
  replaces only it, and the ``sinfo`` and ``scontrol`` exports of one moment are one
  snapshot (the later ingest replaces the earlier).
- **One machine per node**: a node printed on several lines (``sinfo -N`` prints one
  line per node and partition) is one ``machines`` row with its partitions joined by
  commas, in the order printed. A line that repeats a node with other values (GPUs,
  CPUs, memory, state) is quarantined with the line it contradicts. So ``machines``
  rows read (node lines) = distinct nodes written + quarantined lines + partition lines
  folded into their node (``ingests.rows_merged``).
- **Capacity** (``capacity``, ``basis`` = ``inventory``): per snapshot, ``gpus`` = the
  GPUs of the nodes that are not unavailable (``available`` true or unknown), one row
  for the cluster (``vc`` null) and one per partition (a node in two partitions counts
  in both, so partition rows overlap and do not add up to the total). ``period_s`` runs
  to the next snapshot of the same ingest; the last one's is null (the next snapshot is
  not known yet).
- **Bounds**: a file over :data:`MAX_FILE_BYTES` is refused; a line over
  :data:`MAX_LINE_BYTES` bytes is quarantined without being held whole (the file is read
  through a copy where such lines are cut, :func:`bounded`); at most :data:`MAX_NODES`
  nodes are read per file.
"""

from __future__ import annotations

import datetime as dt
import itertools
import re
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import polars as pl

from gpu_trace.errors import InputError, InputWarning, UsageError
from gpu_trace.loaders.base import Batch
from gpu_trace.loaders.textfile import LINE, RAW, REASON, FileInfo, quarantine_rows, scan_lines
from gpu_trace.plugins import option
from gpu_trace.store.parquet import slug

BASIS = "inventory"
MAX_FILE_BYTES = 128 * 1024 * 1024
"""Largest inventory file read (a 50,000-node ``scontrol -o`` export is ~60 MB)."""
MAX_LINE_BYTES = 65_536
"""Longest line read; a longer one is quarantined (a node record is a few hundred
bytes)."""
_CHUNK = 1 << 22
_CUT = "\x00[cut at {limit} of {n} bytes]"
_CUT_RE = r"\x00\[cut at \d+ of (\d+) bytes\]$"
_COPIES: list[tempfile.TemporaryDirectory[str]] = []
MAX_NODES = 200_000
"""Most nodes read from one file (the largest clusters have tens of thousands);
lines beyond are quarantined, so a hostile file cannot grow without bound."""
NAME_TIME = re.compile(
    r"(\d{4})-?(\d{2})-?(\d{2})[Tt](\d{2}):?(\d{2})(?::?(\d{2}))?[Zz](?![A-Za-z0-9])"
)
"""A UTC time in a file name: ``2026-12-01T0900Z``, ``2026-12-01T090000Z``,
``20261201T0900Z``, ``2026-12-01T09:00:00Z`` (what ``date -u +%Y-%m-%dT%H%MZ`` and
``date -u +%Y%m%dT%H%M%SZ`` print)."""

VALUES = ("gpus", "gpus_schedulable", "gpu_type", "cpus", "mem_bytes", "state")
"""Per-node values that must agree when a node is printed on several lines."""


def parse_snapshot_time(text: str) -> dt.datetime:
    """``--snapshot-time``: ISO 8601 with ``Z`` or an offset, as a UTC instant. A time
    without a zone is refused: an inventory's moment must not depend on this machine's
    clock setting.
    """
    try:
        when = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        msg = f"--snapshot-time {text!r} is not an ISO-8601 time (2026-12-01T09:00:00Z)"
        raise UsageError(msg) from None
    if when.tzinfo is None:
        msg = f"--snapshot-time {text!r} has no zone: add Z (UTC) or an offset (+01:00)"
        raise UsageError(msg)
    return when.astimezone(dt.UTC)


@dataclass(frozen=True)
class InventoryOptions:
    """Options of every node-inventory ingest (passed to the loader as keyword arguments)."""

    cluster: str | None = option(
        None,
        "Cluster name (required): the one your `ingest slurm --cluster` used, so "
        "capacity and jobs meet.",
    )
    snapshot_time: dt.datetime | None = option(
        None,
        "When the inventory was taken, ISO 8601 with Z or an offset. Default: a UTC time "
        "in the file name (sinfo-2026-12-01T0900Z.txt), else the file's modification time.",
        parse=parse_snapshot_time,
        metavar="TIME",
    )


def require_cluster(cluster: str | None, command: str) -> str:
    """The ``--cluster`` value, slugged; a usage error when it is missing."""
    if cluster is None or not slug(cluster):
        msg = (
            f"ingest {command} needs --cluster NAME (the name your `ingest slurm --cluster` "
            "used, so capacity and jobs of the cluster meet)"
        )
        raise UsageError(msg)
    return slug(cluster)


def discover(path: Path, suffixes: Sequence[str], what: str) -> list[Path]:
    """The inventory files at ``path``: the file itself, or a folder's files with one
    of ``suffixes``, in name order.
    """
    if path.is_file():
        return [path]
    found = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in suffixes)
    if not found:
        raise InputError(path, f"no {what} here (expected {', '.join('*' + s for s in suffixes)})")
    return found


def check_size(path: Path) -> None:
    """Refuse a file too large to be a node inventory (memory stays bounded)."""
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise InputError(
            path, f"{size} bytes: larger than any node inventory (limit {MAX_FILE_BYTES})"
        )


def time_in_name(path: Path) -> dt.datetime | None:
    """The UTC time written in ``path``'s name (:data:`NAME_TIME`), if any."""
    m = NAME_TIME.search(path.name)
    if m is None:
        return None
    y, mo, d, h, mi, s = (int(g) if g else 0 for g in m.groups())
    try:
        return dt.datetime(y, mo, d, h, mi, s, tzinfo=dt.UTC)
    except ValueError:
        raise InputError(
            path, f"the time {m.group(0)!r} in the file name is not a valid UTC time"
        ) from None


@dataclass(frozen=True)
class Snapshot:
    """One inventory file and the moment it shows."""

    path: Path
    time: dt.datetime
    origin: str
    """Where the time came from: option, file_name or mtime."""


def snapshots(files: list[Path], given: dt.datetime | None) -> list[Snapshot]:
    """Each file's snapshot time (the rule of the module docstring), in time order."""
    if given is not None and len(files) > 1:
        msg = (
            f"--snapshot-time names one moment but {len(files)} files were given: put each "
            "file's UTC time in its name (sinfo-2026-12-01T0900Z.txt) instead"
        )
        raise UsageError(msg)
    out = []
    for f in files:
        if given is not None:
            out.append(Snapshot(f, given, "option"))
            continue
        named = time_in_name(f)
        if named is not None:
            out.append(Snapshot(f, named, "file_name"))
            continue
        mtime = dt.datetime.fromtimestamp(int(f.stat().st_mtime), tz=dt.UTC)
        warnings.warn(
            InputWarning(
                f"{f.name}: no snapshot time in the file name (e.g. "
                f"sinfo-2026-12-01T0900Z.txt) and no --snapshot-time; using the file's "
                f"modification time {mtime:%Y-%m-%dT%H:%M:%SZ}"
            ),
            stacklevel=3,
        )
        out.append(Snapshot(f, mtime, "mtime"))
    return sorted(out, key=lambda s: (s.time, s.path.name))


def stamp(when: dt.datetime) -> str:
    """A snapshot time as it appears in dataset names (``20261201t090000z``)."""
    return when.astimezone(dt.UTC).strftime("%Y%m%dT%H%M%SZ").lower()


def dataset_name(cluster: str, when: dt.datetime) -> str:
    """The dataset of one snapshot of one cluster."""
    return slug(f"{cluster}-inventory-{stamp(when)}")


def periods(times: list[dt.datetime]) -> list[float | None]:
    """Seconds from each snapshot to the next distinct one; None for the last."""
    distinct = sorted(set(times))
    following = dict(itertools.pairwise(distinct))
    return [(following[t] - t).total_seconds() if t in following else None for t in times]


def _longest_line(path: Path) -> int:
    """Bytes of the longest line of ``path``, streamed (nothing held but one chunk)."""
    longest = current = 0
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            parts = chunk.split(b"\n")
            if len(parts) == 1:
                current += len(chunk)
                continue
            inner = max(map(len, parts[1:-1]), default=0)
            longest = max(longest, current + len(parts[0]), inner)
            current = len(parts[-1])
    return max(longest, current)


def bounded(info: FileInfo) -> FileInfo:
    """``info`` itself when no line is over :data:`MAX_LINE_BYTES` bytes; else the
    :class:`FileInfo` of a copy in which each such line keeps its first
    :data:`MAX_LINE_BYTES` bytes and ends with a marker naming its length, so a
    hostile line (a gigabyte without a newline) is never held whole, and
    :func:`long_lines` quarantines it. Line numbers are unchanged. The copy lives until
    the process exits (the lazy scans read it).
    """
    if _longest_line(info.path) <= MAX_LINE_BYTES:
        return info
    tmp = tempfile.TemporaryDirectory(prefix="gpu-trace-inventory-")
    _COPIES.append(tmp)
    out = Path(tmp.name) / info.path.name
    current = 0

    def cut(n: int) -> bytes:
        return _CUT.format(limit=MAX_LINE_BYTES, n=n).encode()

    with info.path.open("rb") as src, out.open("wb") as dst:
        while chunk := src.read(_CHUNK):
            for i, part in enumerate(chunk.split(b"\n")):
                if i:
                    if current > MAX_LINE_BYTES:
                        dst.write(cut(current))
                    dst.write(b"\n")
                    current = 0
                room = MAX_LINE_BYTES - current
                if room > 0:
                    dst.write(part[:room])
                current += len(part)
        if current > MAX_LINE_BYTES:
            dst.write(cut(current))
    return replace(info, path=out, utf8=None)


def long_lines() -> pl.Expr:
    """The reason for a line :func:`bounded` cut (else null)."""
    n = pl.col(RAW).str.extract(_CUT_RE, 1)
    return pl.when(n.is_not_null()).then(
        pl.format(f"line of {{}} bytes (more than {MAX_LINE_BYTES})", n)
    )


def split_checked(
    frame: pl.DataFrame, checks: list[tuple[pl.Expr, str | pl.Expr]]
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(lines that pass every check, rejected lines with ``_line``, ``_raw`` and the
    reason of the first check they fail): ``checks`` are (failed?, reason) pairs in the
    order their reasons should win.
    """
    flag = pl.any_horizontal(c.fill_null(False) for c, _ in checks)
    reason = pl.coalesce(
        pl.when(c.fill_null(False)).then(w if isinstance(w, pl.Expr) else pl.lit(w))
        for c, w in checks
    )
    frame = frame.with_columns(flag.alias("_bad"))
    bad = frame.filter(pl.col("_bad")).select(LINE, RAW, reason.alias(REASON))
    return frame.filter(~pl.col("_bad")), bad


def one_per_node(good: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, int]:
    """(machines, contradicting lines, lines merged): good lines (``_line``,
    ``machine_id``, :data:`VALUES`, ``partition``) folded to one row per node, partitions
    joined in the order printed; a line whose values differ from the node's first line
    comes back with ``_reason``. Lines beyond :data:`MAX_NODES` distinct nodes come back
    too.
    """
    good = good.sort(LINE)
    first = {c: pl.col(c).first().over("machine_id") for c in (*VALUES, LINE)}
    differs = pl.any_horizontal(pl.col(c).ne_missing(first[c]) for c in VALUES)
    order = pl.col(LINE).min().over("machine_id")
    marked = good.with_columns(
        differs.alias("_differs"),
        first[LINE].alias("_first"),
        order.rank("dense").cast(pl.Int64).alias("_node_no"),
    )
    too_many = pl.col("_node_no") > MAX_NODES
    bad = marked.filter(pl.col("_differs") | too_many).select(
        LINE,
        pl.when(too_many)
        .then(pl.lit(f"more than {MAX_NODES} nodes in one file"))
        .otherwise(
            pl.format(
                "node {} repeats line {} with other values (GPUs, CPUs, memory or state)",
                "machine_id",
                "_first",
            )
        )
        .alias(REASON),
    )
    kept = marked.filter(~pl.col("_differs") & ~too_many)
    part = pl.col("partition")
    machines = (
        kept.group_by("machine_id", maintain_order=True)
        .agg(
            *(pl.col(c).first() for c in VALUES),
            pl.col("available").first(),
            part.filter(part.is_not_null())
            .unique(maintain_order=True)
            .str.join(",")
            .alias("partition"),
        )
        .with_columns(pl.when(part != "").then(part).alias("partition"))
    )
    return machines, bad, kept.height - machines.height


def machine_rows(
    machines: pl.DataFrame, source: str, dataset: str, cluster: str, when: dt.datetime
) -> pl.DataFrame:
    """Canonical ``machines`` rows of one snapshot."""
    return machines.select(
        pl.lit(source).alias("source"),
        pl.lit(dataset).alias("dataset"),
        pl.lit(cluster).alias("cluster"),
        "machine_id",
        pl.col("gpus").cast(pl.Int32),
        pl.col("gpus_schedulable").cast(pl.Int32),
        "gpu_type",
        pl.col("cpus").cast(pl.Float64),
        pl.col("mem_bytes").cast(pl.Int64),
        pl.lit(when).cast(pl.Datetime("us", "UTC")).alias("snapshot_time"),
        "state",
        pl.col("available").cast(pl.Boolean),
        "partition",
    )


def capacity_rows(
    machines: pl.DataFrame,
    source: str,
    dataset: str,
    cluster: str,
    when: dt.datetime,
    period_s: float | None,
) -> pl.DataFrame:
    """``capacity`` rows of one snapshot: the cluster (``vc`` null), then each partition."""
    up = machines.filter(pl.col("available").fill_null(True))
    total = up.select(pl.lit(None, dtype=pl.String).alias("vc"), pl.col("gpus").sum())
    per = (
        up.select(pl.col("partition").str.split(",").alias("vc"), "gpus")
        .explode("vc")
        .filter(pl.col("vc").is_not_null())
        .group_by("vc", maintain_order=True)
        .agg(pl.col("gpus").sum())
    )
    # partitions with no available node still have a capacity: 0
    listed = (
        machines.select(pl.col("partition").str.split(",").alias("vc"))
        .explode("vc")
        .filter(pl.col("vc").is_not_null())
        .unique(maintain_order=True)
    )
    per = listed.join(per, on="vc", how="left").with_columns(pl.col("gpus").fill_null(0))
    return pl.concat([total, per.select("vc", "gpus")], how="vertical_relaxed").select(
        pl.lit(source).alias("source"),
        pl.lit(dataset).alias("dataset"),
        pl.lit(cluster).alias("cluster"),
        pl.lit(when).cast(pl.Datetime("us", "UTC")).alias("time"),
        pl.lit(period_s, dtype=pl.Float64).alias("period_s"),
        "vc",
        pl.col("gpus").fill_null(0).cast(pl.Int32),
        pl.lit(BASIS).alias("basis"),
    )


def batches(
    *,
    source: str,
    cluster: str,
    info: FileInfo,
    snapshot: Snapshot,
    period_s: float | None,
    parsed: pl.DataFrame,
    bad: pl.DataFrame,
    metadata: dict[str, str],
    scan: FileInfo | None = None,
) -> Iterator[Batch]:
    """The ``machines`` and ``capacity`` batches of one inventory file: ``parsed`` are
    its good lines (``_line``, ``machine_id``, :data:`VALUES`, ``available``,
    ``partition``), ``bad`` its rejected ones (``_line``, ``_raw``, ``_reason``); ``scan``
    the (:func:`bounded`) copy the lines were read from, when not the file itself.
    """
    dataset = dataset_name(cluster, snapshot.time)
    machines, contradicting, merged = one_per_node(parsed)
    contradicting = _with_raw(scan or info, contradicting)
    rejected = pl.concat(
        [bad.select(LINE, RAW, REASON), contradicting.select(LINE, RAW, REASON)]
    ).sort(LINE)
    meta = {
        "cluster": cluster,
        "snapshot_time": snapshot.time.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "snapshot_time_from": snapshot.origin,
        "lines_merged": str(merged),
        "rows_read": "node lines: distinct nodes written + quarantined + merged",
        **metadata,
    }
    yield Batch(
        "machines",
        dataset,
        info,
        machine_rows(machines, source, dataset, cluster, snapshot.time),
        quarantine_rows(
            rejected,
            source=source,
            dataset=dataset,
            cluster=cluster,
            table="machines",
            file=info.path,
        ),
        rows_read=machines.height + rejected.height + merged,
        cluster=cluster,
        metadata=meta,
        rows_merged=merged,
    )
    capacity = capacity_rows(machines, source, dataset, cluster, snapshot.time, period_s)
    yield Batch(
        "capacity",
        dataset,
        info,
        capacity,
        rows_read=capacity.height,
        cluster=cluster,
        metadata={**meta, "basis": BASIS, "rows_read": "capacity rows derived"},
    )


def _with_raw(info: FileInfo, rows: pl.DataFrame) -> pl.DataFrame:
    """``rows`` (``_line``, ``_reason``) with each line's raw text, read again by number
    (good lines are parsed without keeping their text).
    """
    if rows.is_empty():
        return rows.with_columns(pl.lit(None, dtype=pl.String).alias(RAW))
    lines = scan_lines(info).filter(pl.col(LINE).is_in(rows[LINE].implode()))
    return rows.join(lines.collect(), on=LINE, how="left")
