r"""Slurm node inventory from ``scontrol show node -o`` -> ``machines`` and ``capacity``
(source ``slurm``, beside the jobs of ``ingest slurm``).

The export (``docs/your-cluster.md``)::

    scontrol show node -o > scontrol-$(date -u +%Y-%m-%dT%H%M%SZ).txt

Written from Slurm's ``slurm_sprint_node_table`` (``src/api/node_info.c``): with
``-o`` (``--oneliner``) each node is one line of ``Key=value`` pairs separated by
blanks (sometimes two), in a fixed order: ``NodeName=gpu01 Arch=x86_64
CoresPerSocket=32 CPUAlloc=0 CPUEfctv=64 CPUTot=64 ... Gres=gpu:a100:8(S:0-1) ...
OS=Linux 5.15.0-91-generic #101-Ubuntu SMP ... RealMemory=1031517 ... State=IDLE+DRAIN
... Partitions=gpu,long ... CfgTRES=cpu=64,mem=1031517M,billing=64,gres/gpu=8
AllocTRES= ... Reason=maintenance [root@2026-12-01T08:00:00]``. ``OS``, ``Reason`` and
``Comment`` hold blanks; the keys read here never do, so each is read as the first
``Key=`` at the start of the line or after a blank, up to the next blank, in the line
cut before ``Reason=`` / ``Comment=`` / ``Extra=`` (printed after every key read). A line
that still names one of them twice (``OS=`` text imitating a key) is quarantined rather
than guessed.

- ``machine_id`` = ``NodeName``; ``cpus`` = ``CPUTot``; ``mem_bytes`` = ``RealMemory``
  (MiB) x 2^20; ``partition`` = ``Partitions`` (comma list; null when absent).
- ``gpus`` = the ``gpu`` entries of ``Gres`` (configured GRES, :mod:`.slurm_node_values`),
  ``gpu_type`` their types; ``gpus_schedulable`` = ``gres/gpu=`` of ``CfgTRES`` (what
  the scheduler accounts and hands out; null when ``AccountingStorageTRES`` does not
  track ``gres/gpu``). They differ on MIG nodes and when GRES drain.
- ``state`` = ``State`` as printed (``IDLE+DRAIN``, ``DOWN*``, ``MIXED+DRAIN``),
  ``available`` from it.

The multi-line form (``scontrol show node`` without ``-o``) is refused with one line.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl

from gpu_trace.errors import InputError
from gpu_trace.loaders import inventory as inv
from gpu_trace.loaders import slurm_node_values as nv
from gpu_trace.loaders.base import Batch
from gpu_trace.loaders.textfile import LINE, RAW, FileInfo, file_info, scan_lines
from gpu_trace.plugins import LoaderPlugin

SOURCE = "slurm"
SUFFIXES = (".txt", ".scontrol")
KEYS = ("NodeName", "CPUTot", "RealMemory", "Gres", "State", "Partitions", "CfgTRES")
"""The keys read (``node_info.c``)."""
_UNTYPED_GPU = r"(?:^|,)gres/gpu=([^,]*)"


FREE_TEXT = r"\s(?:Reason|Comment|Extra)=.*$"
"""The free-text fields ``node_info.c`` prints after every key read here: the line is
cut at the first of them before keys are looked up, so a reason such as ``set
State=DOWN`` cannot pass for a key."""
BODY = "_body"


def _value(key: str) -> pl.Expr:
    return pl.col(BODY).str.extract(rf"(?:^|\s){key}=(\S*)", 1)


def _times(key: str) -> pl.Expr:
    return pl.col(BODY).str.count_matches(rf"(?:^|\s){key}=")


def _quoted(text: pl.Expr) -> pl.Expr:
    return pl.lit("'") + text + pl.lit("'")


def _check_one_liner(info: FileInfo, path: Path) -> None:
    """Refuse ``scontrol show node`` without ``-o``: its line 2 is an indented
    continuation (``   CPUAlloc=...``), and one node would be split over a dozen lines.
    """
    second = scan_lines(info).filter(pl.col(LINE) == 2).collect()
    if second.height and second[RAW][0] is not None:
        text = second[RAW][0]
        if text[:1].isspace() and "=" in text:
            raise InputError(
                path,
                "one node spans several lines: export with scontrol show node -o "
                "(--oneliner), one line per node",
                "line 2",
            )


def parse(info: FileInfo) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(good, bad) lines, as :func:`gpu_trace.loaders.sinfo.parse` returns them."""
    frame = (
        scan_lines(info)
        .with_columns(pl.col(RAW).str.strip_suffix("\r"))
        .with_columns(pl.col(RAW).str.replace(FREE_TEXT, "").alias(BODY))
        .with_columns(
            *(_value(k).alias(f"_t_{k}") for k in KEYS),
            *(_times(k).alias(f"_n_{k}") for k in KEYS),
        )
        .collect()
    )
    gres = nv.gres_table(frame.get_column("_t_Gres").drop_nulls())
    frame = frame.join(gres, left_on="_t_Gres", right_on="_gres", how="left", maintain_order="left")
    node = pl.col("_t_NodeName")
    cpus, cpus_bad = nv.count(pl.col("_t_CPUTot"), nv.CPU_MAX)
    mem, mem_bad = nv.count(pl.col("_t_RealMemory"), nv.MEM_MAX_MIB)
    state = pl.col("_t_State")
    sched_text = pl.col("_t_CfgTRES").str.extract(_UNTYPED_GPU, 1)
    sched = sched_text.cast(pl.Int64, strict=False)
    sched_bad = sched_text.is_not_null() & (
        ~sched_text.str.contains(r"^\d+$") | sched.is_null() | (sched > nv.GPU_MAX_PER_NODE)
    )
    checks: list[tuple[pl.Expr, pl.Expr | str]] = [
        (pl.col(RAW).is_in([""]).fill_null(True), "empty line"),
        (inv.long_lines().is_not_null(), inv.long_lines()),
        (pl.col(RAW).str.contains("\ufffd", literal=True), "invalid UTF-8"),
        (
            ~pl.col(RAW).str.starts_with("NodeName="),
            "not a node line of scontrol show node -o (it starts with NodeName=)",
        ),
        (node == "", "NodeName is empty"),
        *(
            (
                pl.col(f"_n_{k}") > 1,
                f"{k}= appears more than once on the line (free text imitating a key?)",
            )
            for k in KEYS
        ),
        (pl.col("_t_Gres").is_null(), "Gres= is missing"),
        (pl.col("_gres_bad").is_not_null(), pl.col("_gres_bad")),
        (
            state.is_not_null() & ~nv.state_ok(state),
            pl.format("State {} is not a Slurm node state", _quoted(state)),
        ),
        (cpus_bad, pl.format("CPUTot {} is not a whole count", _quoted(pl.col("_t_CPUTot")))),
        (
            mem_bad,
            pl.format(
                "RealMemory {} is not a whole number of MiB", _quoted(pl.col("_t_RealMemory"))
            ),
        ),
        (
            sched_bad,
            pl.format(
                f"CfgTRES gres/gpu={{}} is not a GPU count (0 to {nv.GPU_MAX_PER_NODE})",
                sched_text,
            ),
        ),
    ]
    kept, bad = inv.split_checked(frame, checks)
    partitions = pl.col("_t_Partitions")
    good = kept.select(
        LINE,
        node.alias("machine_id"),
        pl.col("_gpus").alias("gpus"),
        pl.when(~sched_bad.fill_null(False)).then(sched).alias("gpus_schedulable"),
        pl.col("_gpu_type").alias("gpu_type"),
        cpus.cast(pl.Float64).alias("cpus"),
        (mem * (1 << 20)).alias("mem_bytes"),
        state.alias("state"),
        nv.available(state).alias("available"),
        pl.when(partitions != "").then(partitions).alias("partition"),
    )
    return good, bad


class ScontrolLoader:
    """Loader for ``scontrol show node -o`` exports (a file, or a folder of snapshots)."""

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
        name = inv.require_cluster(cluster, "scontrol")
        files = inv.discover(path, SUFFIXES, "scontrol show node -o export")
        shots = inv.snapshots(files, snapshot_time)
        for shot, period in zip(shots, inv.periods([s.time for s in shots]), strict=True):
            inv.check_size(shot.path)
            info = file_info(shot.path, header_lines=0)
            if info.empty:
                raise InputError(shot.path, "file is empty (expected one line per node)")
            scan = inv.bounded(info)
            _check_one_liner(scan, shot.path)
            good, bad = parse(scan)
            yield from inv.batches(
                source=SOURCE,
                cluster=name,
                info=info,
                snapshot=shot,
                period_s=period,
                parsed=good,
                bad=bad,
                scan=scan,
                metadata={"format": "scontrol show node -o"},
            )


PLUGIN = LoaderPlugin(
    name="scontrol",
    loader=ScontrolLoader,
    help=(
        "Slurm node inventory `scontrol show node -o` -> machines, capacity (source slurm; "
        "one dataset per snapshot).\n\nPATH: one export (one line per node) or a folder of "
        "snapshots (*.txt, a UTC time in each name)."
    ),
    options=inv.InventoryOptions,
)
