"""AcmeTrace job traces (``trace_seren.csv``, ``trace_kalos.csv``) -> ``jobs``.

Columns as the InternLM/AcmeTrace README publishes them, picked **by name**:

- both clusters: ``job_id, user, node_num, gpu_num, cpu_num, type, state, submit_time,
  start_time, end_time, duration, queue, gpu_time``;
- Kalos only (optional): ``mem_per_pod_GB, shared_mem_per_pod, fail_time, stop_time``.

Any other column is ignored and named in the file's metadata (``ignored_columns``).
The files are unquoted CSV (no field holds a comma), so each physical line is split on
``,`` and a line with another number of fields than the header is quarantined.

What each column becomes (``docs/your-cluster.md`` has the table):

- ``job_id``, ``user`` as written; ``type`` (Pretrain, SFT, Eval, MLLM, Debug, Other)
  -> ``workload_type`` as written; ``state`` -> canonical ``status`` (COMPLETED,
  CANCELLED, FAILED, TIMEOUT, NODE_FAIL, RUNNING, PENDING; anything else ``unknown``)
  with the original in ``raw_status``.
- ``gpu_num`` -> ``gpus`` and ``gpus_raw`` (unit ``gpu``); ``cpu_num`` -> ``cpus``;
  ``node_num`` -> ``nodes``. They are the job's totals (the README's Kalos example:
  8 nodes, 64 GPUs, 960 CPUs). pandas writes a count column as ``8.0`` when the column
  has gaps, so integral decimals are accepted; a fraction of a node is rejected.
- ``mem_per_pod_GB`` -> ``mem_bytes`` = value x 10^9 x ``node_num``: the README calls it
  the pod memory configuration in GB and the trace has no pod count, so one pod per
  node is assumed (the same reading as the example's 8 pods of 8 GPUs).
  ``shared_mem_per_pod`` has no canonical column; it is checked to be a number.
- Times: see :mod:`gpu_trace.loaders.acme_common` (offset -> UTC, ``source_tz``).
  ``submit_time`` is required; ``start_time`` / ``end_time`` may be empty (pending and
  running jobs). Kalos ``fail_time`` / ``stop_time`` (equal to ``end_time`` in the
  README's examples) have no canonical column: ``end_time`` falls back to them when it
  is empty, and rows where one of them disagrees with ``end_time`` are counted in the
  metadata (``fail_time_mismatch_rows``, ``stop_time_mismatch_rows``).
- ``queue_s`` = start - submit and ``run_s`` = end - start, from the instants. The
  file's ``duration`` is *not* used: in the README's Kalos examples it is end - submit
  (18 s for a job that ran 8 s), in the Seren ones end - start. ``duration``, ``queue``
  and ``gpu_time`` are checked to be numbers (or empty); rows where they disagree with
  the instants are counted (``duration_mismatch_rows``, ``queue_mismatch_rows``).
- Quarantined with a reason: wrong field count, invalid UTF-8, missing ``job_id`` /
  ``state`` / ``submit_time`` / ``gpu_num``, a count or size that is not a number or is
  negative, a time that is not a time, lies outside 1970..2099 or does not exist in
  ``--tz``, start before submit, end before start.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from gpu_trace.errors import InputError
from gpu_trace.loaders.acme_common import (
    SOURCE,
    TIME_TEXT,
    offset_zone,
    staged,
    time_stages,
    zone_name,
)
from gpu_trace.loaders.base import Batch
from gpu_trace.loaders.helios import STATUS as HELIOS_STATUS
from gpu_trace.loaders.textfile import (
    LINE,
    RAW,
    REASON,
    file_info,
    quarantine_rows,
    read_header,
    scan_lines,
)
from gpu_trace.loaders.units import GB, TIME_MAX, TIME_MIN

COLUMNS = (
    "job_id",
    "user",
    "node_num",
    "gpu_num",
    "cpu_num",
    "type",
    "state",
    "submit_time",
    "start_time",
    "end_time",
    "duration",
    "queue",
    "gpu_time",
)
"""The Seren columns, README order: every job trace has them."""
KALOS_COLUMNS = ("mem_per_pod_GB", "shared_mem_per_pod", "fail_time", "stop_time")
"""Kalos-only columns (optional)."""

STATUS = {**HELIOS_STATUS, "RUNNING": "running", "PENDING": "pending"}
"""The README's five final states (the Slurm states Helios writes, from the same
group's scheduler; Slurm's ``OUT_OF_MEMORY`` / ``PREEMPTED`` too, which the README does
not list) plus the RUNNING / PENDING a snapshot can hold."""

REQUIRED_TEXT = ("job_id", "state", "submit_time")
NUMBERS = ("node_num", "gpu_num", "cpu_num", "duration", "queue", "gpu_time")
KALOS_NUMBERS = ("mem_per_pod_GB", "shared_mem_per_pod")
TIMES = ("submit_time", "start_time", "end_time")
KALOS_TIMES = ("fail_time", "stop_time")
INT32_MAX = 2**31 - 1
MAX_POD_MEM_GB = 1_000_000
"""A pod's memory above 1 PB (30x the largest single server's) is damage, not a size:
quarantined, as is any product with node_num past int64 bytes (``1e10`` GB x 1 node
overflowed the int64 cast, a traceback before)."""


@dataclass(frozen=True)
class JobFile:
    """One job trace and the cluster it describes."""

    path: Path
    cluster: str


def header(path: Path) -> list[str]:
    """The job trace's column names, refused (line 1) when one is doubled or a needed one is
    missing.
    """
    names = [n.strip() for n in read_header(path).split(",")]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise InputError(path, f"duplicate column(s) {', '.join(dupes)} in the header", "line 1")
    missing = [c for c in COLUMNS if c not in names]
    if missing:
        raise InputError(
            path,
            f"header lacks column(s) {', '.join(missing)}; an AcmeTrace job trace has "
            f"{','.join(COLUMNS)} (Kalos also {','.join(KALOS_COLUMNS)})",
            "line 1",
        )
    return names


def _quoted(text: pl.Expr) -> pl.Expr:
    return pl.lit("'") + text + pl.lit("'")


def _field(names: list[str], name: str) -> pl.Expr:
    """The text of a column (null when absent from the header or the line is short);
    a CR left by a CRLF line end is removed from the last field.
    """
    if name not in names:
        return pl.lit(None, dtype=pl.String)
    i = names.index(name)
    text = pl.col("_parts").list.get(i, null_on_oob=True)
    return text.str.strip_suffix("\r") if i == len(names) - 1 else text


def parse(path: Path, names: list[str], tz: str) -> pl.LazyFrame:
    """Every data line typed and checked: the canonical inputs plus ``_reason``.

    Built in stages (split, text fields, typed values, checks), each reading the
    columns of the one before, so no value is computed twice.
    """
    info = file_info(path, header_lines=1)
    n = len(names)
    times = [*TIMES, *(t for t in KALOS_TIMES if t in names)]
    numbers = [*NUMBERS, *(c for c in KALOS_NUMBERS if c in names)]
    texts = [*COLUMNS, *(c for c in KALOS_COLUMNS if c in names)]
    lines = scan_lines(info, skip=1).with_columns(pl.col(RAW).str.split(",").alias("_parts"))
    lines = lines.with_columns(
        pl.col("_parts").list.len().alias("_n"),
        *(_field(names, c).str.strip_chars().alias(f"_t_{c}") for c in texts),
    ).drop("_parts")

    def t(c: str) -> pl.Expr:
        return pl.col(f"_t_{c}") if c in texts else pl.lit(None, dtype=pl.String)

    def empty(c: str) -> pl.Expr:
        return t(c).is_null() | (t(c) == "")

    lines = lines.with_columns(
        pl.when(empty(c)).then(None).otherwise(t(c)).cast(pl.Float64, strict=False).alias(f"_{c}")
        for c in numbers
    )
    lines = staged(lines, *(time_stages(f"_t_{c}", f"_{c}", tz) for c in times))
    checks: list[pl.Expr] = [
        pl.when(pl.col(RAW).is_in(["", "\r"]).fill_null(True)).then(pl.lit("empty line")),
        pl.when(pl.col("_n") != n).then(pl.format(f"expected {n} fields, found {{}}", "_n")),
        pl.when(pl.col(RAW).str.contains("\ufffd", literal=True)).then(pl.lit("invalid UTF-8")),
    ]
    for c in (*REQUIRED_TEXT, "gpu_num"):
        checks.append(pl.when(empty(c)).then(pl.lit(f"{c} is missing")))
    for c in numbers:
        value = pl.col(f"_{c}")
        checks.append(
            pl.when(~empty(c) & (value.is_null() | value.is_nan() | value.is_infinite())).then(
                pl.format(f"{c} {{}} is not a number", _quoted(t(c)))
            )
        )
        checks.append(pl.when(value < 0).then(pl.lit(f"{c} is negative")))
    node = pl.col("_node_num")
    if "mem_per_pod_GB" in numbers:
        mem = pl.col("_mem_per_pod_GB")
        checks.append(
            pl.when((mem > MAX_POD_MEM_GB) | (mem * float(GB) * node >= 2.0**63)).then(
                pl.format(
                    f"mem_per_pod_GB {{}} is not a memory size (at most {MAX_POD_MEM_GB} GB "
                    "per pod, and x node_num within int64 bytes)",
                    _quoted(t("mem_per_pod_GB")),
                )
            )
        )
    checks.append(
        pl.when((node != node.floor()) | (node > INT32_MAX)).then(
            pl.format("node_num {} is not a whole number of nodes", _quoted(t("node_num")))
        )
    )
    for c in times:
        naive = pl.col(f"_{c}_naive")
        parsed = pl.col(f"_{c}_parsed")
        checks += [
            pl.when(~empty(c) & ~parsed).then(
                pl.format(f"{c} {{}} is not a time ({TIME_TEXT})", _quoted(t(c)))
            ),
            pl.when(~empty(c) & ((naive < TIME_MIN) | (naive >= TIME_MAX))).then(
                pl.format(f"{c} {{}} is a time out of range (1970..2099)", _quoted(t(c)))
            ),
            pl.when(~empty(c) & parsed & pl.col(f"_{c}").is_null()).then(
                pl.format(f"{c} {{}} does not exist in {tz}", _quoted(t(c)))
            ),
        ]
    checks += [
        pl.when(pl.col("_start_time") < pl.col("_submit_time")).then(
            pl.lit("start_time is before submit_time")
        ),
        pl.when(pl.col("_end_time") < pl.col("_start_time")).then(
            pl.lit("end_time is before start_time")
        ),
    ]
    keep = [
        LINE,
        RAW,
        *(f"_t_{c}" for c in ("job_id", "user", "type", "state")),
        *(f"_{c}" for c in numbers),
        *(f"_{c}" for c in times),
        "_submit_time_offset",
    ]
    return lines.with_columns(pl.coalesce(checks).alias(REASON)).select(*keep, REASON)


def _seconds(a: str, b: str) -> pl.Expr:
    return (pl.col(a) - pl.col(b)).dt.total_microseconds().cast(pl.Float64) / 1e6


def job_batch(file: JobFile, tz: str) -> Batch:
    """Read one job trace into a ``jobs`` batch and its rejects."""
    names = header(file.path)
    info = file_info(file.path, header_lines=1)
    parsed = parse(file.path, names, tz).collect()
    ok = pl.col(REASON).is_null()
    good = parsed.filter(ok)
    kalos = [c for c in KALOS_TIMES if c in names]
    end = pl.coalesce(pl.col("_end_time"), *(pl.col(f"_{c}") for c in kalos))
    good = good.with_columns(end.alias("_end"))
    mismatch = {
        "duration_mismatch_rows": (pl.col("_duration") != _seconds("_end", "_start_time")),
        "queue_mismatch_rows": (pl.col("_queue") != _seconds("_start_time", "_submit_time")),
        **{
            f"{c}_mismatch_rows": (pl.col(f"_{c}") != pl.col("_end_time"))
            for c in KALOS_TIMES
            if c in names
        },
    }
    counts = good.select(*(e.fill_null(False).sum().alias(k) for k, e in mismatch.items()))
    mem = (
        (pl.col("_mem_per_pod_GB") * float(GB) * pl.col("_node_num")).round(0).cast(pl.Int64)
        if "mem_per_pod_GB" in names
        else pl.lit(None, dtype=pl.Int64)
    )
    offsets = good["_submit_time_offset"].unique().to_list()
    rows = good.lazy().select(
        pl.lit(SOURCE).alias("source"),
        pl.lit(file.cluster).alias("dataset"),
        pl.lit(file.cluster).alias("cluster"),
        pl.col("_t_job_id").alias("job_id"),
        pl.when(pl.col("_t_user") == "").then(None).otherwise(pl.col("_t_user")).alias("user"),
        pl.col("_submit_time").alias("submit_time"),
        pl.col("_start_time").alias("start_time"),
        pl.col("_end").alias("end_time"),
        _seconds("_start_time", "_submit_time").alias("queue_s"),
        _seconds("_end", "_start_time").alias("run_s"),
        pl.col("_gpu_num").alias("gpus"),
        pl.col("_gpu_num").alias("gpus_raw"),
        pl.lit("gpu").alias("gpus_raw_unit"),
        pl.col("_cpu_num").alias("cpus"),
        mem.alias("mem_bytes"),
        pl.col("_node_num").cast(pl.Int32).alias("nodes"),
        pl.lit(1, dtype=pl.Int32).alias("attempts"),
        pl.col("_t_state")
        .replace_strict(STATUS, default="unknown", return_dtype=pl.String)
        .alias("status"),
        pl.col("_t_state").alias("raw_status"),
        pl.when(pl.col("_t_type") == "")
        .then(None)
        .otherwise(pl.col("_t_type"))
        .alias("workload_type"),
        offset_zone(pl.col("_submit_time_offset"), offsets, tz).alias("source_tz"),
        pl.lit("absolute").alias("time_basis"),
    )
    rejected = quarantine_rows(
        parsed.filter(~ok).select(LINE, RAW, REASON),
        source=SOURCE,
        dataset=file.cluster,
        cluster=file.cluster,
        table="jobs",
        file=file.path,
    )
    ignored = [c for c in names if c not in (*COLUMNS, *KALOS_COLUMNS)]
    return Batch(
        "jobs",
        file.cluster,
        info,
        rows,
        rejected,
        cluster=file.cluster,
        metadata={
            "time_basis": "absolute",
            "source_tz": ",".join(sorted({zone_name(o, tz) for o in offsets})) or tz,
            "naive_time_tz": tz,
            "cluster": file.cluster,
            "run_rule": "run_s = end_time - start_time (file duration not used)",
            "mem_rule": "mem_bytes = mem_per_pod_GB x 1e9 x node_num (one pod per node)",
            "ignored_columns": ",".join(ignored),
            **{k: str(v) for k, v in counts.row(0, named=True).items()},
        },
    )
