r"""Slurm node inventory from ``sinfo -N`` -> ``machines`` and ``capacity`` (source
``slurm``, beside the jobs of ``ingest slurm``, so allocation meets capacity).

The recommended export (``docs/your-cluster.md``)::

    sinfo -N --noconvert -o "%N|%P|%T|%c|%m|%G" > sinfo-$(date -u +%Y-%m-%dT%H%M%SZ).txt

Written from the sinfo manual and Slurm's ``src/sinfo/print.c``: with ``-o`` a field
written ``%<type>`` without a size is printed whole ("If no size is specified, whatever
is needed to print the information will be used"), and text after it (the ``|``) is
printed as is, header included, so the split is exact; the header names the fields
(``NODELIST|PARTITION|STATE|CPUS|MEMORY|GRES``). ``-N`` prints one line per node and
partition; ``--noconvert`` keeps CPU counts whole (sinfo otherwise prints 1024 CPUs as
``1K``, which is read too).

Fields are found **by header name**, in any order, ``|``-separated or, without a ``|``
in the header, separated by runs of blanks (sinfo's own aligned layouts, e.g. ``sinfo
-N -l``). ``NODELIST`` (else ``HOSTNAMES``) and ``GRES`` are required; ``PARTITION``,
``STATE`` (``%T``, ``%t`` or ``StateComplete``), ``CPUS`` (else the total of
``CPUS(A/I/O/T)``) and ``MEMORY`` are read when present, others ignored. ``REASON`` may
hold blanks or ``|``: a line with extra fields is split around it. A field printed with
a size (``%.6m``) is cut to that size by sinfo, so use none.

- ``machine_id`` = ``NODELIST``; a host list (``gpu[01-04]``, printed without ``-N``)
  is quarantined: export with ``-N``.
- ``partition`` = ``PARTITION`` without the ``*`` that marks the default partition; a
  node's lines are one machine with its partitions joined (:mod:`.inventory`).
- ``gpus`` = the ``gpu`` GRES count (:mod:`.slurm_node_values`), ``gpu_type`` its types;
  ``gpus_schedulable`` is null (sinfo prints no separate figure).
- ``cpus`` = ``CPUS``; ``mem_bytes`` = ``MEMORY`` (MiB) x 2^20; ``N/A`` is null.
- ``state`` = ``STATE`` as printed; ``available`` from it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from gpu_trace.errors import InputError
from gpu_trace.loaders import inventory as inv
from gpu_trace.loaders import slurm_node_values as nv
from gpu_trace.loaders.base import Batch
from gpu_trace.loaders.textfile import (
    LINE,
    RAW,
    FileInfo,
    file_info,
    read_header,
    scan_lines,
)
from gpu_trace.plugins import LoaderPlugin

SOURCE = "slurm"
SUFFIXES = (".txt", ".sinfo", ".psv")
FIELDS = {
    "NODELIST": "node",
    "HOSTNAMES": "host",
    "PARTITION": "partition",
    "STATE": "state",
    "STATECOMPLETE": "state",
    "CPUS": "cpus",
    "CPUS(A/I/O/T)": "cpus_aiot",
    "MEMORY": "memory",
    "GRES": "gres",
    "REASON": "reason",
}
"""sinfo header titles we read (``print.c``) -> our key."""
NO_VALUE = ("", "N/A", "n/a")
NODE_NAME = r"^[A-Za-z0-9_.\-]+$"


@dataclass(frozen=True)
class Header:
    """The fields of an sinfo export: names in file order and how lines split."""

    names: tuple[str, ...]
    separator: str | None
    """``|``, or None for runs of blanks."""
    trailing: bool

    def key_at(self) -> dict[str, int]:
        """Our key -> position (the first of ``STATE`` / ``STATECOMPLETE``)."""
        out: dict[str, int] = {}
        for i, n in enumerate(self.names):
            key = FIELDS.get(n)
            if key is not None:
                out.setdefault(key, i)
        return out


def read_sinfo_header(path: Path, original: Path | None = None) -> Header:
    """The field names of an sinfo export, or a one-line error naming what is wrong
    (about ``original`` when ``path`` is its bounded copy).
    """
    line = read_header(path)
    path = original or path
    sep = "|" if "|" in line else None
    trailing = sep is not None and line.endswith(sep)
    body = line.removesuffix("|") if trailing else line
    names = tuple(n.strip().upper() for n in (body.split(sep) if sep else body.split()))
    keys = [FIELDS[n] for n in names if n in FIELDS]
    dupes = sorted({k for k in keys if keys.count(k) > 1})
    if dupes:
        raise InputError(path, f"the header names {', '.join(dupes)} twice", "line 1")
    if not ({"node", "host"} & set(keys)) or "gres" not in keys:
        raise InputError(
            path,
            "header lacks NODELIST or GRES: not an sinfo export with a header (run "
            'sinfo -N --noconvert -o "%N|%P|%T|%c|%m|%G" without -h/--noheader)',
            "line 1",
        )
    return Header(names, sep, trailing)


def _fields(lines: pl.LazyFrame, header: Header) -> pl.LazyFrame:
    """``_n`` (fields on the line) and ``_t_<key>`` per field read; fields after
    ``REASON`` are counted from the right, so a reason holding the separator does not
    shift them.
    """
    raw = pl.col(RAW).str.strip_suffix("\r")
    if header.separator is None:
        parts = raw.str.strip_chars().str.replace_all(r"\s+", " ").str.split(" ")
    else:
        parts = (raw.str.strip_suffix("|") if header.trailing else raw).str.split("|")
    n = len(header.names)
    at = header.key_at()
    free = at.get("reason")
    split = lines.with_columns(parts.alias("_parts")).with_columns(
        pl.col("_parts").list.len().cast(pl.Int64).alias("_n")
    )
    cols = []
    for key, i in at.items():
        p = pl.col("_parts")
        if free is None or i < free:
            expr = p.list.get(i, null_on_oob=True)
        elif i > free:
            expr = pl.when(pl.col("_n") >= n).then(p.list.get(i - n, null_on_oob=True))
        else:
            expr = p.list.slice(free, (pl.col("_n") - n + 1).clip(lower_bound=1)).list.join(
                header.separator or " "
            )
        cols.append(expr.str.strip_chars().alias(f"_t_{key}"))
    return split.with_columns(cols).drop("_parts")


def _text(key: str, header: Header) -> pl.Expr:
    if key not in header.key_at():
        return pl.lit(None, dtype=pl.String)
    t = pl.col(f"_t_{key}")
    return pl.when(t.is_in(list(NO_VALUE))).then(None).otherwise(t)


def _quoted(text: pl.Expr) -> pl.Expr:
    return pl.lit("'") + text + pl.lit("'")


def parse(info: FileInfo, header: Header) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(good, bad) lines: good ones typed (``_line``, ``machine_id``, the per-node
    values, ``available``, ``partition``), bad ones with ``_line``, ``_raw``, ``_reason``.
    """
    at = header.key_at()
    n = len(header.names)
    frame = _fields(scan_lines(info, skip=1), header).collect()
    gres = nv.gres_table(frame.get_column("_t_gres").drop_nulls())
    frame = frame.join(gres, left_on="_t_gres", right_on="_gres", how="left", maintain_order="left")
    node = _text("node" if "node" in at else "host", header)
    cpus_text = (
        _text("cpus", header)
        if "cpus" in at
        else _text("cpus_aiot", header).str.split("/").list.get(3, null_on_oob=True)
    )
    cpus, cpus_bad = nv.count(cpus_text, nv.CPU_MAX)
    mem, mem_bad = nv.count(_text("memory", header), nv.MEM_MAX_MIB)
    state = _text("state", header)
    count_bad = (pl.col("_n") < n) if "reason" in at else (pl.col("_n") != n)
    checks: list[tuple[pl.Expr, pl.Expr | str]] = [
        (pl.col(RAW).is_in(["", "\r"]).fill_null(True), "empty line"),
        (inv.long_lines().is_not_null(), inv.long_lines()),
        (
            count_bad,
            pl.format(
                f"expected {'at least ' if 'reason' in at else ''}{n} fields, found {{}}",
                pl.col("_n"),
            ),
        ),
        (pl.col(RAW).str.contains("\ufffd", literal=True), "invalid UTF-8"),
        (node.is_null(), "NODELIST is missing"),
        (
            node.str.contains("[", literal=True),
            pl.format(
                "NODELIST {} is a host list: export with sinfo -N (one node per line)",
                _quoted(node),
            ),
        ),
        (~node.str.contains(NODE_NAME), pl.format("NODELIST {} is not a node name", _quoted(node))),
        (pl.col("_gres_bad").is_not_null(), pl.col("_gres_bad")),
        (pl.col("_t_gres").is_null(), "GRES is missing"),
        (
            state.is_not_null() & ~nv.state_ok(state),
            pl.format("STATE {} is not a Slurm node state", _quoted(state)),
        ),
        (cpus_bad, pl.format("CPUS {} is not a whole count (export with -N)", _quoted(cpus_text))),
        (
            mem_bad,
            pl.format(
                "MEMORY {} is not a whole number of MiB (export with -N)",
                _quoted(_text("memory", header)),
            ),
        ),
    ]
    kept, bad = inv.split_checked(frame, checks)
    good = kept.select(
        LINE,
        node.alias("machine_id"),
        pl.col("_gpus").alias("gpus"),
        pl.lit(None, dtype=pl.Int64).alias("gpus_schedulable"),
        pl.col("_gpu_type").alias("gpu_type"),
        cpus.cast(pl.Float64).alias("cpus"),
        (mem * (1 << 20)).alias("mem_bytes"),
        state.alias("state"),
        nv.available(state).alias("available"),
        _text("partition", header).str.strip_suffix("*").alias("partition"),
    )
    return good, bad


class SinfoLoader:
    """Loader for ``sinfo -N`` exports (a file, or a folder of snapshots)."""

    name = SOURCE
    version = "1"

    def batches(
        self,
        path: Path,
        *,
        cluster: str | None = None,
        snapshot_time: Any = None,
        **_: Any,
    ) -> Iterator[Batch]:
        """Yield a ``machines`` and a ``capacity`` batch per snapshot file."""
        name = inv.require_cluster(cluster, "sinfo")
        files = inv.discover(path, SUFFIXES, "sinfo export")
        checked = {}
        for f in files:  # every file checked before any time is read or warned about
            inv.check_size(f)
            info = file_info(f, header_lines=1)
            scan = inv.bounded(info)
            checked[f] = (info, scan, read_sinfo_header(scan.path, f))
        shots = inv.snapshots(files, snapshot_time)
        for shot, period in zip(shots, inv.periods([s.time for s in shots]), strict=True):
            info, scan, header = checked[shot.path]
            good, bad = parse(scan, header)
            yield from inv.batches(
                source=SOURCE,
                cluster=name,
                info=info,
                snapshot=shot,
                period_s=period,
                parsed=good,
                bad=bad,
                scan=scan,
                metadata={
                    "format": "sinfo",
                    "fields": ",".join(header.names),
                    "separator": header.separator or "blanks",
                },
            )


PLUGIN = LoaderPlugin(
    name="sinfo",
    loader=SinfoLoader,
    help=(
        'Slurm node inventory `sinfo -N --noconvert -o "%N|%P|%T|%c|%m|%G"` -> machines, '
        "capacity (source slurm; one dataset per snapshot).\n\nPATH: one export (fields "
        "found by header name) or a folder of snapshots (*.txt, a UTC time in each name)."
    ),
    options=inv.InventoryOptions,
)
