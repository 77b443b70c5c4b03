"""Alibaba 2023 GPU-sharing trace "openb" (alibaba/clusterdata cluster-trace-gpu-v2023).

Inputs (the trace's README, github.com/alibaba/clusterdata cluster-trace-gpu-v2023):

- pod lists ``openb_pod_list_<variant>.csv``, 11 columns
  ``name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,
  deletion_time,scheduled_time``, or only the first 5 for the resampled ``multigpu*``
  variants -> ``jobs`` (one row per pod), dataset = the variant name;
- node lists ``openb_node_list_<name>.csv`` (``sn,cpu_milli,memory_mib,gpu,model``)
  -> ``machines``, dataset = the list name (``all_node``, ``gpu_node``). The two lists
  number nodes independently, so ``machine_id`` is only a key within one dataset.

Conventions: ``gpu_milli`` is milli-GPU per GPU, so ``gpus = num_gpu * gpu_milli / 1000``
(500 -> 0.5 GPU, a sharing pod) and ``gpus_raw`` keeps ``num_gpu * gpu_milli`` in milli.
Times are integer seconds from the first pod's creation (``time_basis = relative``),
stored as 1970-01-01T00:00:00Z plus the offset. A pod's ``deletion_time`` is its
``end_time`` whatever its phase; ``Running`` pods carry the snapshot's end
(12,902,960 s, alibaba/clusterdata#218) and keep status ``running``.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from gpu_trace.errors import InputError, InputWarning
from gpu_trace.loaders.base import Batch
from gpu_trace.loaders.textfile import (
    REASON,
    FieldSpec,
    file_info,
    parse_fields,
    quarantine_rows,
    read_header,
    scan_lines,
)
from gpu_trace.loaders.units import GIB, MIB, per
from gpu_trace.plugins import LoaderPlugin, option
from gpu_trace.store.parquet import slug

SOURCE = "openb"
CLUSTER = "openb"

POD_FIELDS = (
    FieldSpec("name", required=True),
    FieldSpec("cpu_milli", "int"),
    FieldSpec("memory_mib", "int"),
    FieldSpec("num_gpu", "int", required=True),
    FieldSpec("gpu_milli", "int"),
    FieldSpec("gpu_spec"),
    FieldSpec("qos"),
    FieldSpec("pod_phase"),
    FieldSpec("creation_time", "int"),
    FieldSpec("deletion_time", "int"),
    FieldSpec("scheduled_time", "int"),
)
POD_FIELDS_SHORT = POD_FIELDS[:5]
POD_COLUMNS = tuple(f.name for f in POD_FIELDS)
"""The full pod-list header, in file order (what ``synth`` and ``replay export`` write)."""
NODE_FIELDS = (
    FieldSpec("sn", required=True),
    FieldSpec("cpu_milli", "int"),
    FieldSpec("memory_mib", "int"),
    FieldSpec("gpu", "int", required=True),
    FieldSpec("model"),
)

PHASE_STATUS = {
    "Succeeded": "completed",
    "Failed": "failed",
    "Running": "running",
    "Pending": "pending",
}

GPU_MEM_GIB = {"V100M16": 16, "V100M32": 32, "T4": 16, "A10": 24}
"""GPU memory for the models whose name or product fixes it; P100 (12 or 16 GiB) and the
undisclosed G1/G2/G3 stay null rather than guessed."""

DEFAULT_VARIANT = "default"
"""The pod list read from a folder that holds it, when no ``--variant`` is given."""
_POD_FILE = re.compile(r"^openb_pod_list_(?P<variant>.+)\.csv$")
_NODE_FILE = re.compile(r"^openb_node_list_(?P<variant>.+)\.csv$")


def _header_fields(
    path: Path, candidates: tuple[tuple[FieldSpec, ...], ...]
) -> tuple[FieldSpec, ...]:
    header = read_header(path)
    names = [h.strip() for h in header.split(",")]
    for fields in candidates:
        if names == [f.name for f in fields]:
            return fields
    expected = " or ".join(",".join(f.name for f in c) for c in candidates)
    raise InputError(path, f"unexpected header {header!r}; expected {expected}", "line 1")


def _seconds(col: str) -> pl.Expr:
    return pl.from_epoch(pl.col(col), time_unit="s").dt.replace_time_zone("UTC")


def _range_checks(checks: list[tuple[pl.Expr, str]]) -> pl.Expr:
    return pl.coalesce(
        [pl.col(REASON)] + [pl.when(bad).then(pl.lit(reason)) for bad, reason in checks]
    )


def pods(path: Path, dataset: str) -> Batch:
    """Read one pod list into a ``jobs`` batch."""
    fields = _header_fields(path, (POD_FIELDS, POD_FIELDS_SHORT))
    info = file_info(path, header_lines=1)
    absent = [f for f in POD_FIELDS if f not in fields]
    parsed = parse_fields(scan_lines(info, skip=1), fields).with_columns(
        pl.lit(None, dtype=pl.String if f.kind == "str" else pl.Int64).alias(f.name) for f in absent
    )
    parsed = parsed.with_columns(
        _range_checks(
            [
                (pl.col("num_gpu") < 0, "num_gpu is negative"),
                (
                    (pl.col("gpu_milli") < 0) | (pl.col("gpu_milli") > 1000),
                    "gpu_milli is outside 0-1000",
                ),
                ((pl.col("cpu_milli") < 0) | (pl.col("memory_mib") < 0), "negative cpu or memory"),
                (
                    pl.col("deletion_time") < pl.col("creation_time"),
                    "deletion_time is before creation_time",
                ),
                (
                    pl.col("scheduled_time") < pl.col("creation_time"),
                    "scheduled_time is before creation_time",
                ),
            ]
        ).alias(REASON)
    )
    good = parsed.filter(pl.col(REASON).is_null())
    submit = _seconds("creation_time")
    start = _seconds("scheduled_time")
    end = _seconds("deletion_time")
    milli = pl.col("num_gpu") * pl.col("gpu_milli").fill_null(1000)
    rows = good.select(
        pl.lit(SOURCE).alias("source"),
        pl.lit(dataset).alias("dataset"),
        pl.lit(CLUSTER).alias("cluster"),
        pl.col("name").alias("job_id"),
        pl.col("name"),
        submit.alias("submit_time"),
        start.alias("start_time"),
        end.alias("end_time"),
        (pl.col("scheduled_time") - pl.col("creation_time")).cast(pl.Float64).alias("queue_s"),
        (pl.col("deletion_time") - pl.col("scheduled_time")).cast(pl.Float64).alias("run_s"),
        per(milli, 1000).alias("gpus"),
        milli.cast(pl.Float64).alias("gpus_raw"),
        pl.lit("milli").alias("gpus_raw_unit"),
        per(pl.col("cpu_milli"), 1000).alias("cpus"),
        (pl.col("memory_mib") * MIB).alias("mem_bytes"),
        pl.col("gpu_spec").alias("gpu_type"),
        pl.when(pl.col("scheduled_time").is_not_null()).then(1).alias("nodes"),
        pl.lit(1).alias("attempts"),
        pl.col("pod_phase").replace_strict(PHASE_STATUS, default="unknown").alias("status"),
        pl.col("pod_phase").alias("raw_status"),
        pl.col("qos"),
        pl.lit(None, dtype=pl.String).alias("source_tz"),
        pl.lit("relative").alias("time_basis"),
    )
    rejected = quarantine_rows(
        parsed.filter(pl.col(REASON).is_not_null()),
        source=SOURCE,
        dataset=dataset,
        cluster=CLUSTER,
        table="jobs",
        file=path,
    )
    return Batch(
        "jobs",
        dataset,
        info,
        rows,
        rejected,
        cluster=CLUSTER,
        metadata={
            "time_basis": "relative",
            "source_tz": "none (relative seconds)",
            "variant": dataset,
        },
    )


def nodes(path: Path, dataset: str) -> Batch:
    """Read one node list into a ``machines`` batch."""
    _header_fields(path, (NODE_FIELDS,))
    info = file_info(path, header_lines=1)
    parsed = parse_fields(scan_lines(info, skip=1), NODE_FIELDS).with_columns(
        _range_checks(
            [
                (pl.col("gpu") < 0, "gpu is negative"),
                ((pl.col("cpu_milli") < 0) | (pl.col("memory_mib") < 0), "negative cpu or memory"),
            ]
        ).alias(REASON)
    )
    good = parsed.filter(pl.col(REASON).is_null())
    rows = good.select(
        pl.lit(SOURCE).alias("source"),
        pl.lit(dataset).alias("dataset"),
        pl.lit(CLUSTER).alias("cluster"),
        pl.col("sn").alias("machine_id"),
        pl.col("gpu").alias("gpus"),
        pl.col("model").alias("gpu_type"),
        (
            pl.col("model").replace_strict(GPU_MEM_GIB, default=None, return_dtype=pl.Int64) * GIB
        ).alias("gpu_mem_bytes"),
        per(pl.col("cpu_milli"), 1000).alias("cpus"),
        (pl.col("memory_mib") * MIB).alias("mem_bytes"),
    )
    rejected = quarantine_rows(
        parsed.filter(pl.col(REASON).is_not_null()),
        source=SOURCE,
        dataset=dataset,
        cluster=CLUSTER,
        table="machines",
        file=path,
    )
    return Batch("machines", dataset, info, rows, rejected, cluster=CLUSTER)


class OpenbLoader:
    """Loader for the openb pod and node lists (a folder, or one CSV file)."""

    name = SOURCE
    version = "1"

    def batches(self, path: Path, *, variant: str | None = None, **_: Any) -> Iterator[Batch]:
        """Yield a ``jobs`` batch per selected pod list and a ``machines`` batch per node
        list. ``variant`` picks pod lists in a folder (``default``, ``gpushare40``, ...,
        or ``all``); a file path is read whatever its variant. Without ``variant`` a
        folder's ``default`` list is read, or, when the folder holds exactly one other
        variant (a user who downloaded only ``gpushare40``), that one, with a warning line
        naming it so the choice is never silent.
        """
        files = [path] if path.is_file() else sorted(path.glob("openb_*_list_*.csv"))
        if path.is_dir():
            variant = _pick_variant(path, files, variant)
        for f in files:
            if m := _POD_FILE.match(f.name):
                v = m["variant"]
                if path.is_dir() and variant != "all" and v != variant:
                    continue
                yield pods(f, slug(v))
            elif m := _NODE_FILE.match(f.name):
                yield nodes(f, slug(m["variant"]))
            elif path.is_file():
                raise InputError(
                    f, "not an openb file (expected openb_pod_list_*.csv or openb_node_list_*.csv)"
                )


def _pick_variant(folder: Path, files: list[Path], variant: str | None) -> str:
    """The pod-list variant to read from ``folder``: ``variant`` when given (it must be
    there, or be ``all``), else ``default``, else the folder's only variant. Several
    variants and no ``default`` is an error listing them: guessing would be silent.
    """
    held = [m["variant"] for f in files if (m := _POD_FILE.match(f.name))]
    listing = ", ".join(held) or "none"
    if variant == "all":
        return variant
    if variant is not None:
        if variant in held:
            return variant
        raise InputError(
            folder, f"no openb_pod_list_{variant}.csv in this folder (pod lists here: {listing})"
        )
    if DEFAULT_VARIANT in held:
        return DEFAULT_VARIANT
    if len(held) == 1:
        warnings.warn(
            InputWarning(
                f"{folder}: no openb_pod_list_{DEFAULT_VARIANT}.csv; reading the one pod list "
                f"here, openb_pod_list_{held[0]}.csv (--variant {held[0]})"
            ),
            stacklevel=3,
        )
        return held[0]
    raise InputError(
        folder,
        f"no openb_pod_list_{DEFAULT_VARIANT}.csv in this folder (pod lists here: {listing}); "
        "pick one with --variant NAME, or --variant all",
    )


@dataclass(frozen=True)
class OpenbOptions:
    """`gpu-trace ingest openb` options (passed to the loader as keyword arguments)."""

    variant: str | None = option(
        None,
        "Pod list to read from a folder: default, gpushare40, ... or all. Unset: "
        "default, or the folder's only pod list (named on stderr).",
    )


PLUGIN = LoaderPlugin(
    name="openb",
    loader=OpenbLoader,
    help="Alibaba 2023 openb: pod lists -> jobs, node lists -> machines.",
    options=OpenbOptions,
)
