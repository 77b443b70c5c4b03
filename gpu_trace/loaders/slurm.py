r"""Slurm accounting exports (``sacct -P``) -> ``jobs`` and ``placements``.

What users run (``docs/your-cluster.md``)::

    sacct -a -X -P -S 2026-01-01 -E 2026-02-01 --format=JobID,JobIDRaw,JobName,User,\
    Account,Partition,QOS,State,ExitCode,Submit,Eligible,Start,End,Elapsed,Timelimit,\
    NNodes,NCPUS,ReqTRES,AllocTRES,NodeList > jobs.psv

The format is sacct's: a header line naming the fields, then one ``|``-separated line
per job or step (``--parsable2``; ``--parsable`` ends every line, header included, with
one more ``|``). Fields are found **by header name** (case-insensitive), in any order;
only ``JobID``, ``State`` and ``Submit`` must be there, every other field is optional and
unknown fields are ignored. Value grammars: :mod:`gpu_trace.loaders.slurm_values`; host
lists: :mod:`gpu_trace.loaders.slurm_nodes`.

Decisions on points the format leaves open:

- **Jobs.** A line whose ``JobID`` is an allocation (``123``, ``123_7``, ``123+1``) is a
  ``jobs`` record; a pending array range (``123_[1-9%2]``, ``123_[1-21:4]``) is one
  job per task (``123_1`` ...), each with the line's request (``sacct --array`` prints
  them so; :func:`gpu_trace.loaders.slurm_jobs.expand_arrays`); the lines of one job, requeued runs under
  ``sacct -D`` (a run is a distinct Start: one run printed twice is one run, the most
  advanced state winning) and the components ``123+0``, ``123+1`` of a heterogeneous job, are one
  job (:func:`gpu_trace.loaders.slurm_jobs.fold`). A line whose ``JobID`` has a dot (``123.batch``, ``123.extern``,
  ``123.0``: a step, printed without ``-X``) is folded into its job as ``placements``
  rows (``task`` = the step name), never a job of its own. So ``jobs`` records read =
  lines without a dot in ``JobID`` (``job_lines``) + tasks a range adds
  (``array_tasks_added``) = written + quarantined + merged, the lines folded into another
  line's job (``lines_folded``) being the merged ones (``ingests.rows_merged``); all three
  in the Parquet metadata with ``step_lines``. Bad step lines are
  quarantined under table ``placements``. A job's id is the one every export prints
  for it (a task's ``123_13``, a heterogeneous job's ``123``), so overlapping exports
  name it alike.
- **Placements.** Each job line with a ``NodeList`` gets one placement per host
  (``attempt`` = its run, 0 unless requeued; ``gpu_count`` = its GPUs split evenly over
  the hosts, since sacct gives only the total); each step line one per host of its own
  list. ``placements`` rows read are the rows derived plus the quarantined step lines.
  Host lists are capped per line and per file (:mod:`gpu_trace.loaders.slurm_nodes`).
- **Times** are local wall-clock times of the cluster (sacct prints no offset), read in
  ``--tz`` (default UTC, with a warning) and recorded in ``source_tz``. ``Unknown`` and
  ``None`` are null; any other text not shaped as sacct prints a time is quarantined. A
  local time that does not exist in the zone (inside a spring-forward gap) is
  quarantined. Ambiguous ones (inside a fall-back hour) are read by :func:`_resolve`
  (End - Start = ``Elapsed``, Submit <= Eligible <= Start <= End); a line two readings
  fit equally is quarantined. Their number is recorded (``ambiguous_local_times``).
- ``queue_s`` = start - submit; ``run_s`` = end - start (the schema's definition), null
  while a job has no end; ``as_of_time`` = end, or start + ``Elapsed`` for a started
  job without an end (when sacct printed it). Rows whose ``Elapsed`` differs from
  end - start are counted (``elapsed_mismatch_rows``), not changed. Start before submit
  or end before start is quarantined.
- **GPUs and memory** come from ``AllocTRES`` when it is not empty (what the job got),
  else the older ``AllocGRES``, else ``ReqTRES`` / ``ReqGRES`` (a pending job), which
  are then read and checked; memory from ``ReqMem`` when the TRES list names none.
  ``gpus_raw`` is the same count (unit ``gpu``); ``gpu_type`` the models joined with
  ``|``. An export with none of the four fields warns once and keeps ``gpus`` null.
- ``vc`` is ``Partition``; ``nodes`` is ``NNodes``; ``cpus`` is ``NCPUS`` (or the older
  ``AllocCPUS``, else the TRES ``cpu=``); ``cancelled_by`` the uid of
  ``CANCELLED by <uid>``.
- **Usage**: ``cpu_used_s`` is ``TotalCPU`` of the allocation line (sacct's sum over
  the job's steps) when the export lists the job's steps, else null (``sacct -X``
  prints 0); ``mem_peak_bytes`` the largest ``MaxRSS`` over the job's step lines
  (:func:`with_step_usage`). Both are the ``seff`` inputs.
- ``JobName`` is the only free text: a line with more fields than the header (a ``|``
  inside a job name) is split from both ends around it, as for Helios.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from gpu_trace.errors import InputError, InputWarning
from gpu_trace.loaders import slurm_csv as sc
from gpu_trace.loaders import slurm_jobs as sj
from gpu_trace.loaders import slurm_nodes as nodelist
from gpu_trace.loaders import slurm_values as sv
from gpu_trace.loaders.base import Batch
from gpu_trace.loaders.helios import fixed_offset, with_raw
from gpu_trace.loaders.store_order import in_store_order
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
from gpu_trace.loaders.units import TIME_MAX, TIME_MIN
from gpu_trace.loaders.zones import parse_tz
from gpu_trace.plugins import LoaderPlugin, option
from gpu_trace.schemas import TABLES
from gpu_trace.store.parquet import slug

SOURCE = "slurm"
DEFAULT_TZ = "UTC"
SEPARATOR = "|"
TIME_FORMAT = "%Y-%m-%dT%H:%M:%S"
INT32_MAX = 2**31 - 1
SUFFIXES = (".psv", ".txt", ".sacct")
"""File names read from a folder (one export per file)."""

FIELDS = {
    "jobid": "jobid",
    "jobidraw": "jobidraw",
    "jobname": "jobname",
    "user": "user",
    "account": "account",
    "partition": "partition",
    "qos": "qos",
    "state": "state",
    "exitcode": "exitcode",
    "submit": "submit",
    "eligible": "eligible",
    "start": "start",
    "end": "end",
    "elapsed": "elapsed",
    "timelimit": "timelimit",
    "nnodes": "nnodes",
    "ncpus": "ncpus",
    "reqtres": "reqtres",
    "alloctres": "alloctres",
    "nodelist": "nodelist",
    "reqmem": "reqmem",
    "reqgres": "reqgres",
    "allocgres": "allocgres",
    "alloccpus": "alloccpus",
    "totalcpu": "totalcpu",
    "maxrss": "maxrss",
}
"""sacct field names we read (lower case) -> our key. Others are ignored."""
REQUIRED = ("jobid", "state", "submit")
GPU_FIELDS = ("alloctres", "reqtres", "allocgres", "reqgres")
"""Fields that can say how many GPUs a job has; an export with none of them gets one
warning and ``gpus`` null (unknown), never 0."""
TIME_SHAPE = r"^\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d$"
"""What sacct prints for a time (``%Y-%m-%dT%H:%M:%S``, the ISO form of sacct's default
``SLURM_TIME_FORMAT=standard``): zero-padded fields, seconds below 60. ``2026-1-5T9:0:0``,
``09:00:60`` or ``25:00:00`` are damaged fields, not times a lenient parser may guess at."""
TIMES = ("submit", "eligible", "start", "end")
HEADER_NAMES = {
    "jobid": "JobID",
    "state": "State",
    "submit": "Submit",
}


@dataclass(frozen=True)
class Header:
    """Where each field we read sits, and how lines end."""

    names: tuple[str, ...]
    """The header's field names, lower case, in file order."""
    trailing: bool
    """``--parsable``: every line ends with one more ``|``."""

    def index(self, key: str) -> int | None:
        """Where field ``key`` sits on a line, or None when the export lacks it."""
        return self.names.index(key) if key in self.names else None


def read_sacct_header(path: Path) -> Header:
    """The field names of a sacct export, or a one-line error naming what is wrong."""
    line = read_header(path)
    trailing = line.endswith(SEPARATOR)
    names = tuple(n.strip().lower() for n in line.removesuffix(SEPARATOR).split(SEPARATOR))
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise InputError(path, f"duplicate field(s) {', '.join(dupes)} in the header", "line 1")
    missing = [HEADER_NAMES[k] for k in REQUIRED if k not in names]
    if missing:
        raise InputError(
            path,
            f"header lacks field(s) {', '.join(missing)}: not a sacct -P export with a header "
            "(run sacct -P without -n/--noheader, --format naming at least JobID,State,Submit)",
            "line 1",
        )
    return Header(names, trailing)


# --------------------------------------------------------------------------- splitting


def _split(lines: pl.LazyFrame, header: Header) -> pl.LazyFrame:
    """``_n`` (fields on the line), one ``_t_<key>`` text column per field we read, and
    the two checks that need the raw line (``_empty``, ``_fffd``: invalid UTF-8).

    Fields before ``JobName`` are counted from the left, those after it from the right,
    and ``JobName`` is what lies between (``|`` included), so a name holding the
    separator does not shift the other fields. Without ``JobName``, field ``i`` is the
    ``i``-th.
    """
    n = len(header.names)
    raw = pl.col(RAW).str.strip_suffix("\r")
    if header.trailing:
        raw = raw.str.strip_suffix(SEPARATOR)
    at = header.index("jobname")
    split = lines.with_columns(raw.str.split(SEPARATOR).alias("_parts")).with_columns(
        pl.col("_parts").list.len().cast(pl.Int64).alias("_n")
    )
    parts = pl.col("_parts")
    cols: list[pl.Expr] = []
    for i, name in enumerate(header.names):
        key = FIELDS.get(name)
        if key is None:
            continue
        if at is None or i < at:
            expr = parts.list.get(i, null_on_oob=True)
        elif i > at:
            expr = pl.when(pl.col("_n") >= n).then(parts.list.get(i - n, null_on_oob=True))
        else:
            expr = parts.list.slice(at, (pl.col("_n") - n + 1).clip(lower_bound=1)).list.join(
                SEPARATOR
            )
        cols.append(expr.alias(f"_t_{key}"))
    flags = [
        pl.col(RAW).is_in(["", "\r"]).fill_null(True).alias("_empty"),
        pl.col(RAW).str.contains("\ufffd", literal=True).alias("_fffd"),
    ]
    return split.with_columns(*cols, *flags).drop("_parts")


def wanted(header: Header) -> dict[int, str]:
    """Index -> key of each header field we read (the ``_t_<key>`` columns)."""
    return {i: FIELDS[name] for i, name in enumerate(header.names) if name in FIELDS}


def split_lines(info: FileInfo, header: Header, fields: sc.Fields, found: sc.Marks) -> pl.LazyFrame:
    """Every data line as :func:`_split` gives it (``_raw`` only on the lines split line
    by line): the reader's rows where :func:`gpu_trace.loaders.slurm_csv.split_fast`
    vouches for them, the line-exact split for the rest, in line order.
    """
    fast = sc.split_fast(info, header.names, header.trailing, wanted(header), fields, found)
    if fast is None:
        return _split(scan_lines(info, skip=1), header)
    rows, redo = fast
    rows = rows.with_columns(pl.lit(False).alias("_empty"), pl.lit(False).alias("_fffd"))
    if redo.is_empty():
        return rows.lazy()
    slow = _split(redo.lazy(), header).collect()
    return pl.concat([rows, slow], how="diagonal").sort(LINE).lazy()


def step_flag() -> pl.Expr:
    """Whether a line is a step line: its ``JobID`` field (counted as :func:`_split`
    counts it) holds a dot. The fuzz harness applies the same textual rule.
    """
    return pl.col("_t_jobid").str.contains(".", literal=True).fill_null(False)


def _text(key: str, header: Header, *, no_value: tuple[str, ...] = ("",)) -> pl.Expr:
    """A field's text, null when the field is absent or holds a no-value word."""
    if key not in header.names:
        return pl.lit(None, dtype=pl.String)
    t = pl.col(f"_t_{key}")
    return pl.when(t.is_in(list(no_value))).then(None).otherwise(t)


def _quoted(text: pl.Expr) -> pl.Expr:
    return pl.lit("'") + text + pl.lit("'")


# --------------------------------------------------------------------------- typing


def _local_times(header: Header) -> list[pl.Expr]:
    """Per time field: its text (null for ``Unknown``/``None``) and the naive local
    time it names (null when it does not parse or lies outside the store's range).
    """
    out: list[pl.Expr] = []
    for key in TIMES:
        text = _text(key, header, no_value=sv.NO_VALUE)
        local = (
            pl.when(text.str.contains(TIME_SHAPE))
            .then(text)
            .str.strptime(pl.Datetime("us"), TIME_FORMAT, strict=False, cache=False)
        )
        out += [text.alias(f"_{key}_text"), local.alias(f"_{key}_parsed")]
    return out


def _int(key: str, header: Header) -> tuple[pl.Expr, pl.Expr]:
    text = _text(key, header, no_value=sv.NO_VALUE)
    value = text.str.strip_chars().cast(pl.Int64, strict=False)
    bad = text.is_not_null() & (value.is_null() | (value < 0) | (value > INT32_MAX))
    return value, bad


def _by_value(
    frame: pl.DataFrame,
    header: Header,
    key: str,
    first: list[pl.Expr],
    outputs: dict[str, pl.Expr],
) -> pl.DataFrame:
    """Add ``outputs`` (expressions over field ``key`` and the ``first``-stage columns),
    computed once per distinct text of the field and joined back. TRES lists, time
    limits and exit codes repeat endlessly in an export (a few hundred distinct values
    in a million lines), so this parses a few hundred strings instead of a million.
    """
    col = f"_t_{key}"
    if key not in header.names:
        # the field is absent, so every output is one constant: computed on one row
        # (outputs depend on the field's text only), not on a million rows of nulls
        one = (
            pl.DataFrame({"_": [None]})
            .with_columns(first)
            .select(e.alias(n) for n, e in outputs.items())
        )
        return frame.with_columns(
            pl.lit(one.get_column(n).item(), dtype=one.schema[n]).alias(n) for n in outputs
        )
    # Series.unique, not DataFrame.unique: on the many-chunk column the first collect
    # leaves, the frame method took 30x longer for a field of a few distinct values
    table = (
        frame.get_column(col)
        .unique()
        .to_frame()
        .with_columns(first)
        .select(col, *(e.alias(n) for n, e in outputs.items()))
    )
    # joined on the one key column, the outputs then added beside the frame: a join of
    # the whole wide frame copied every column (3x the cost, per repetitive field)
    got = frame.select(col).join(table, on=col, how="left", nulls_equal=True, maintain_order="left")
    return frame.hstack(got.drop(col).get_columns())


def typed(split: pl.LazyFrame, header: Header) -> pl.DataFrame:
    """Every line (split: :func:`split_lines`) typed (everything but the time-zone step and the reasons):
    the columns :func:`checks` and the row builders read. Split parts and regex
    captures are named in a first stage so each runs once
    (:data:`gpu_trace.loaders.slurm_values.Staged`); repetitive fields are parsed per
    distinct value (:func:`_by_value`).
    """
    nnodes, nnodes_bad = _int("nnodes", header)
    ncpus, ncpus_bad = _int("ncpus", header)
    alloccpus, alloccpus_bad = _int("alloccpus", header)
    base = split.with_columns(
        step_flag().alias("_is_step"),
        _text("jobid", header).alias("_jobid"),
        *_local_times(header),
        nnodes.alias("_nnodes"),
        nnodes_bad.alias("_nnodes_bad"),
        ncpus.alias("_ncpus"),
        ncpus_bad.alias("_ncpus_bad"),
        alloccpus.alias("_alloccpus"),
        alloccpus_bad.alias("_alloccpus_bad"),
        _text("nodelist", header, no_value=sv.NO_VALUE).alias(nodelist.NODES),
    ).collect()
    # Elapsed repeats too (tens of thousands of distinct values in a million lines)
    elapsed_1, elapsed = sv.duration_s(_text("elapsed", header, no_value=sv.NO_VALUE), "_el")
    base = _by_value(
        base,
        header,
        "elapsed",
        elapsed_1,
        {"_elapsed": elapsed["value"], "_elapsed_bad": elapsed["bad"]},
    )
    # TotalCPU and MaxRSS (seff's inputs) differ line by line: parsed in place
    cpu_1, cpu = sv.duration_s(_text("totalcpu", header, no_value=sv.NO_VALUE), "_tc")
    rss, rss_bad = sv.rss_bytes(_text("maxrss", header, no_value=sv.NO_VALUE))
    base = (
        base.lazy()
        .with_columns(*cpu_1, rss.alias("_maxrss"), rss_bad.alias("_maxrss_bad"))
        .with_columns(cpu["value"].alias("_totalcpu"), cpu["bad"].alias("_totalcpu_bad"))
        .drop(e.meta.output_name() for e in cpu_1)
        .collect()
    )
    limit_1, limit = sv.limit_s(_text("timelimit", header, no_value=sv.NO_VALUE), "_tl")
    base = _by_value(
        base, header, "timelimit", limit_1, {"_limit": limit["value"], "_limit_bad": limit["bad"]}
    )
    code, signal, code_bad = sv.exit_code(_text("exitcode", header))
    base = _by_value(
        base,
        header,
        "exitcode",
        [],
        {"_exit_code": code, "_exit_signal": signal, "_exit_bad": code_bad},
    )
    for key, name in (("alloctres", "_at"), ("reqtres", "_rt")):
        first, tres = sv.tres(_text(key, header, no_value=sv.NO_VALUE), name)
        outputs = {f"{name}_text": pl.col(f"{name}_text")} | {
            f"{name}_{k}": v for k, v in tres.items()
        }
        base = _by_value(base, header, key, first, outputs)
    for key, name in (("allocgres", "_ag"), ("reqgres", "_rg")):
        first, found = sv.gres(_text(key, header, no_value=sv.NO_VALUE), name)
        outputs = {f"{name}_text": pl.col(f"{name}_text")} | {
            f"{name}_{k}": v for k, v in found.items()
        }
        base = _by_value(base, header, key, first, outputs)
    # What the job got (AllocTRES, else the older AllocGRES) is read and checked; what it
    # asked for (ReqTRES, else ReqGRES) only where it got nothing yet (a pending job).
    at, ag = pl.col("_at_text").is_not_null(), pl.col("_ag_text").is_not_null()
    rt = pl.col("_rt_text").is_not_null()
    got = at | ag

    def pick(what: str) -> pl.Expr:
        return (
            pl.when(at)
            .then(pl.col(f"_at_{what}"))
            .when(ag)
            .then(pl.col(f"_ag_{what}"))
            .when(rt)
            .then(pl.col(f"_rt_{what}"))
            .otherwise(pl.col(f"_rg_{what}"))
        )

    cpus = pl.coalesce(
        "_ncpus", "_alloccpus", pl.when(at).then(pl.col("_at_cpus")).otherwise(pl.col("_rt_cpus"))
    )
    reqmem, reqmem_bad = sv.req_mem(
        _text("reqmem", header, no_value=sv.NO_VALUE), pl.col("_nnodes"), cpus
    )
    gpus = pick("gpus")
    if "allocgres" in header.names or "reqgres" in header.names:
        # an empty GRES field is sacct's way of saying "no GRES": 0 GPUs, not unknown
        gpus = pl.coalesce(gpus, pl.when(~(at | ag | rt)).then(pl.lit(0, dtype=pl.Int64)))
    return base.with_columns(
        gpus.alias("_gpus"),
        pick("gpu_type").alias("_gpu_type"),
        cpus.alias("_cpus"),
        pl.coalesce(pl.when(at).then(pl.col("_at_mem_bytes")), pl.col("_rt_mem_bytes")).alias(
            "_tres_mem"
        ),
        pl.col("_at_bad").alias("_alloc_bad"),
        pl.col("_ag_bad").alias("_allocgres_bad"),
        pl.when(~got).then(pl.col("_rt_bad")).alias("_req_bad"),
        pl.when(~got & ~rt).then(pl.col("_rg_bad")).alias("_reqgres_bad"),
        pl.when(~got).then(pl.col("_rt_text")).alias("_rt_text"),
        pl.when(~got & ~rt).then(pl.col("_rg_text")).alias("_rg_text"),
        reqmem.alias("_reqmem"),
        reqmem_bad.alias("_reqmem_bad"),
    ).drop(
        [
            f"{n}_{k}"
            for n in ("_at", "_rt")
            for k in ("gpus", "gpu_type", "mem_bytes", "cpus", "bad")
        ]
        + [f"{n}_{k}" for n in ("_ag", "_rg") for k in ("gpus", "gpu_type", "bad")]
    )


def _in_range(local: pl.Expr) -> pl.Expr:
    return (local >= pl.lit(TIME_MIN)) & (local < pl.lit(TIME_MAX))


def to_utc(frame: pl.DataFrame, tz: str) -> pl.DataFrame:
    """Each time's two UTC readings (``_<key>_earliest``, ``_<key>_latest``: equal except
    inside a fall-back hour; null inside a spring-forward gap), then the chosen instants
    ``submit_time`` .. ``end_time`` (:func:`_resolve`) and ``_dst_reason`` where no
    single reading can be chosen.

    When the zone keeps one UTC offset over the whole span of the file (any zone
    without DST, or a file inside one DST period) the offset is subtracted from the
    column instead of looked up per value (:func:`gpu_trace.loaders.helios.fixed_offset`).
    """
    locals_ = {
        k: pl.when(_in_range(pl.col(f"_{k}_parsed"))).then(pl.col(f"_{k}_parsed")) for k in TIMES
    }
    frame = frame.with_columns(v.alias(f"_{k}_local") for k, v in locals_.items())
    bounds = frame.select(
        pl.min_horizontal(*(pl.col(f"_{k}_local").min() for k in TIMES)).alias("lo"),
        pl.max_horizontal(*(pl.col(f"_{k}_local").max() for k in TIMES)).alias("hi"),
    ).row(0)
    offset = fixed_offset(tz, *bounds) if None not in bounds else None
    if offset is not None:
        readings: list[pl.Expr] = []
        for key in TIMES:
            utc = (pl.col(f"_{key}_local") - pl.lit(offset)).dt.replace_time_zone("UTC")
            readings += [utc.alias(f"_{key}_earliest"), utc.alias(f"_{key}_latest")]
        frame = frame.with_columns(readings)
    else:
        frame = _hourly_utc(frame, tz)
    frame = frame.with_columns(
        *(pl.col(f"_{k}_earliest").alias(f"{k}_time") for k in TIMES),
        pl.lit(None, dtype=pl.String).alias("_dst_reason"),
    )
    if offset is not None:
        return frame
    two = pl.any_horizontal(
        (pl.col(f"_{k}_earliest") != pl.col(f"_{k}_latest")).fill_null(False) for k in TIMES
    )
    where = frame.select(two.arg_true()).to_series()
    if where.is_empty():
        return frame
    chosen = _resolve(frame[where])
    return frame.with_columns(
        frame.get_column(c).scatter(where, chosen.get_column(c))
        for c in (*(f"{k}_time" for k in TIMES), "_dst_reason")
    )


_READINGS = ("earliest", "latest")


def _exact_utc(local: pl.Expr, tz: str, how: str) -> pl.Expr:
    """One reading of a local time in ``tz``, looked up per value (null in a gap)."""
    return local.dt.replace_time_zone(
        tz, ambiguous="earliest" if how == "earliest" else "latest", non_existent="null"
    ).dt.convert_time_zone("UTC")


def _hourly_utc(frame: pl.DataFrame, tz: str) -> pl.DataFrame:
    """``_<key>_earliest`` / ``_<key>_latest`` for a zone whose offset changes within
    the file (DST), by the hour: an hour of local time whose first and last instant
    have one offset under both readings (every hour but those of a clock change, since
    no zone changes its offset twice within an hour) is read by subtracting it; the
    rows with a time in any other hour are looked up per value
    (:func:`_exact_utc`, polars' zone rules: 8 look-ups a row cost ~0.7 s per million
    lines, the hourly table a few thousand).
    """
    hour = {k: pl.col(f"_{k}_local").dt.truncate("1h") for k in TIMES}
    hours = pl.concat([frame.select(hour[k].alias("_h")) for k in TIMES]).drop_nulls().unique()
    last = pl.col("_h") + pl.duration(hours=1) - pl.duration(microseconds=1)
    offsets = [
        (at - _exact_utc(at, tz, how).dt.replace_time_zone(None)).alias(f"_o{i}")
        for i, (at, how) in enumerate((a, h) for a in (pl.col("_h"), last) for h in _READINGS)
    ]
    one = pl.all_horizontal(pl.col(f"_o{i}") == pl.col("_o0") for i in range(1, 4))
    table = hours.select("_h", *offsets).filter(one.fill_null(False))
    keys, values = table.get_column("_h"), table.get_column("_o0")
    readings: list[pl.Expr] = []
    for key in TIMES:
        off = hour[key].replace_strict(keys, values, default=None)
        utc = (pl.col(f"_{key}_local") - off).dt.replace_time_zone("UTC")
        readings += [utc.alias(f"_{key}_{how}") for how in _READINGS]
    frame = frame.with_columns(readings)
    hard = pl.any_horizontal(
        pl.col(f"_{k}_local").is_not_null() & pl.col(f"_{k}_earliest").is_null() for k in TIMES
    )
    where = frame.select(hard.arg_true()).to_series()
    if where.is_empty():
        return frame
    exact = frame[where].select(
        _exact_utc(pl.col(f"_{k}_local"), tz, how).alias(f"_{k}_{how}")
        for k in TIMES
        for how in _READINGS
    )
    return frame.with_columns(
        frame.get_column(c).scatter(where, exact.get_column(c)) for c in exact.columns
    )


def _resolve(rows: pl.DataFrame) -> pl.DataFrame:
    """The readings of times in a fall-back hour (a local time that happened twice):
    of the 16 ways to read Submit, Eligible, Start and End, those for which End - Start
    = ``Elapsed`` and Submit <= Eligible <= Start <= End (a pair with a null side holds);
    when none fits ``Elapsed``, those that keep the order alone. A time is chosen when
    every fitting reading agrees on it; when two fitting readings disagree the line is
    ambiguous (``_dst_reason``), and when none fits the earlier readings stand and the
    order checks quarantine the line. Runs only on the few lines with such a time.
    """
    reads = {k: (pl.col(f"_{k}_earliest"), pl.col(f"_{k}_latest")) for k in TIMES}
    combos = list(itertools.product((0, 1), repeat=len(TIMES)))

    def ok(a: pl.Expr, b: pl.Expr) -> pl.Expr:
        return (a <= b).fill_null(True)

    full: list[pl.Expr] = []
    order: list[pl.Expr] = []
    for bits in combos:
        v = {k: reads[k][b] for k, b in zip(TIMES, bits, strict=True)}
        kept = (
            ok(v["submit"], v["eligible"])
            & ok(v["eligible"], v["start"])
            & ok(v["submit"], v["start"])
            & ok(v["start"], v["end"])
        )
        fits = (sv.seconds(v["end"] - v["start"]) == pl.col("_elapsed")).fill_null(True)
        order.append(kept)
        full.append(kept & fits)
    rows = rows.with_columns(
        pl.any_horizontal(full).alias("_any_full"), pl.any_horizontal(order).alias("_any_order")
    )
    valid = [
        pl.when(pl.col("_any_full")).then(f).otherwise(o) for f, o in zip(full, order, strict=True)
    ]
    picked: list[pl.Expr] = []
    split: list[pl.Expr] = []
    for i, key in enumerate(TIMES):
        early = pl.any_horizontal(v for v, bits in zip(valid, combos, strict=True) if not bits[i])
        late = pl.any_horizontal(v for v, bits in zip(valid, combos, strict=True) if bits[i])
        e, lt = reads[key]
        picked.append(pl.when(~early & late).then(lt).otherwise(e).alias(f"{key}_time"))
        split.append(
            pl.when(early & late & (e != lt).fill_null(False)).then(
                pl.format(f"{key.capitalize()} {{}}", _quoted(pl.col(f"_{key}_text")))
            )
        )
    reason = pl.concat_str(split, separator=", ", ignore_nulls=True)
    why = pl.when(reason != "").then(
        pl.format(
            "{} falls in the repeated hour of a fall-back clock change, and no single "
            "reading gives End - Start = Elapsed with Submit <= Eligible <= Start",
            reason,
        )
    )
    return rows.select(*picked, why.alias("_dst_reason"))


Check = tuple[pl.Expr, pl.Expr | str]


def checks(header: Header) -> list[Check]:
    """(condition, reason) per problem a line can have, in the order a reader fixing the
    file would want them; the first that holds is the line's reason.
    """
    n = len(header.names)
    has_name = "jobname" in header.names
    count_bad = (pl.col("_n") < n) if has_name else (pl.col("_n") != n)
    jobid = pl.col("_jobid")
    state = _text("state", header)
    id_ok = (
        pl.when(pl.col("_is_step"))
        .then(jobid.str.contains(sv.STEP_ID))
        .otherwise(jobid.str.contains(f"^{sv.ALLOC_ID}$"))
    )
    expected = f"at least {n}" if has_name else str(n)
    out: list[Check] = [
        (pl.col("_empty"), "empty line"),
        (count_bad, pl.format(f"expected {expected} fields, found {{}}", pl.col("_n"))),
        (pl.col("_fffd"), "invalid UTF-8"),
        (jobid.is_null(), "JobID is missing"),
        (
            ~id_ok,
            pl.format(
                "JobID {} is not a Slurm job or step id (123, 123_7, 123_[1-9%2], 123+1, "
                "123.batch)",
                _quoted(jobid),
            ),
        ),
        (state.is_null(), "State is missing"),
        (
            ~state.str.contains(sv.STATE_WORD),
            pl.format("State {} is not a Slurm state", _quoted(state)),
        ),
        (pl.col("_submit_text").is_null(), "Submit is missing (Unknown)"),
    ]
    for key in TIMES:
        text, parsed = pl.col(f"_{key}_text"), pl.col(f"_{key}_parsed")
        label = key.capitalize()
        out += [
            (
                text.is_not_null() & parsed.is_null(),
                pl.format(
                    f"{label} {{}} is not a time (YYYY-MM-DDTHH:MM:SS, zero-padded, "
                    "seconds below 60)",
                    _quoted(text),
                ),
            ),
            (
                parsed.is_not_null() & ~_in_range(parsed),
                pl.format(f"{label} {{}} is a time out of range", _quoted(text)),
            ),
            (
                pl.col(f"_{key}_local").is_not_null() & pl.col(f"_{key}_earliest").is_null(),
                pl.format(f"{label} {{}} does not exist in the time zone", _quoted(text)),
            ),
        ]
    for key, src, label, what in (
        ("elapsed", "elapsed", "Elapsed", "a [D-]HH:MM:SS duration"),
        ("limit", "timelimit", "Timelimit", "a [D-]HH:MM:SS duration"),
        ("nnodes", "nnodes", "NNodes", "a count"),
        ("ncpus", "ncpus", "NCPUS", "a count"),
        ("alloccpus", "alloccpus", "AllocCPUS", "a count"),
        ("exit", "exitcode", "ExitCode", "status:signal"),
        ("reqmem", "reqmem", "ReqMem", "a memory amount"),
        ("totalcpu", "totalcpu", "TotalCPU", "a [D-]HH:MM:SS[.mmm] duration"),
        ("maxrss", "maxrss", "MaxRSS", "a memory amount"),
    ):
        if src in header.names:
            out.append(
                (
                    pl.col(f"_{key}_bad"),
                    pl.format(f"{label} {{}} is not {what}", _quoted(pl.col(f"_t_{src}"))),
                )
            )
    out += [
        (
            pl.col("_alloc_bad").is_not_null(),
            pl.format("AllocTRES {} {}", _quoted(pl.col("_at_text")), pl.col("_alloc_bad")),
        ),
        (
            pl.col("_allocgres_bad").is_not_null(),
            pl.format("AllocGRES {} {}", _quoted(pl.col("_ag_text")), pl.col("_allocgres_bad")),
        ),
        (
            pl.col("_req_bad").is_not_null(),
            pl.format("ReqTRES {} {}", _quoted(pl.col("_rt_text")), pl.col("_req_bad")),
        ),
        (
            pl.col("_reqgres_bad").is_not_null(),
            pl.format("ReqGRES {} {}", _quoted(pl.col("_rg_text")), pl.col("_reqgres_bad")),
        ),
        (pl.col("_dst_reason").is_not_null(), pl.col("_dst_reason")),
        (
            pl.col("start_time") < pl.col("submit_time"),
            pl.format(
                "Start {} is before Submit {}", pl.col("_start_text"), pl.col("_submit_text")
            ),
        ),
        (
            pl.col("end_time") < pl.col("start_time"),
            pl.format("End {} is before Start {}", pl.col("_end_text"), pl.col("_start_text")),
        ),
    ]
    return out


def _first(found: list[Check]) -> pl.Expr:
    return pl.coalesce(
        [
            pl.when(bad.fill_null(False)).then(why if isinstance(why, pl.Expr) else pl.lit(why))
            for bad, why in found
        ]
    )


# --------------------------------------------------------------------------- batches

KEEP = ("jobname", "user", "account", "partition", "qos", "state")
"""Text fields the row builders read (the other ``_t_`` columns serve only reasons)."""
CHECK_ONLY = ("_bad", "_text", "_parsed", "_local")
"""Suffixes of the columns only the checks and reasons read (field texts, flags, local
times): the good lines go on without them, so the frame that later filters copy (the
array ranges taken out) is ~40 % narrower."""


def _kept(column: str) -> bool:
    """Whether the good lines keep ``column`` past the checks."""
    if column.startswith("_t_"):
        return column[3:] in KEEP
    return column not in (RAW, "_empty", "_fffd", "_n", "_dst_reason") and not column.endswith(
        CHECK_ONLY
    )


def parse(
    info: FileInfo,
    header: Header,
    tz: str,
    fields: sc.Fields | None = None,
    marks: sc.Marks | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame, int]:
    """(good, bad, array tasks added) of an export: good lines typed, with their
    host-list size and job key (:func:`gpu_trace.loaders.slurm_jobs.ids`), pending array ranges expanded; bad lines
    with ``_line``, ``_raw`` and ``_reason``, host lists over their caps included.
    Reasons are worded only for the bad lines (formatting text for a million good ones
    would cost more than all the parsing). ``fields`` and ``found``: the reader's rows
    and the byte marks of the fast path (:mod:`gpu_trace.loaders.slurm_csv`); without
    them every line is split line by line.
    """
    split = (
        _split(scan_lines(info, skip=1), header)
        if marks is None or fields is None
        else split_lines(info, header, fields, marks)
    )
    frame = to_utc(typed(split, header), tz)
    found = checks(header)
    bad_flag = pl.any_horizontal(*(c.fill_null(False) for c, _ in found))
    frame = frame.with_columns(bad_flag.alias("_bad"))
    bad = frame.filter(pl.col("_bad")).with_columns(_first(found).alias(REASON))
    good = (
        frame.filter(~pl.col("_bad"))
        .select(c for c in frame.columns if _kept(c))
        .with_columns(sj.ids())
    )
    del frame
    nodes = nodelist.check(good.lazy(), budget=nodelist.file_budget(info.records)).collect()
    good = good.join(nodes, on=LINE, how="left")
    late = good.filter(pl.col("_node_reason").is_not_null()).select(
        LINE, pl.col("_node_reason").alias(REASON), "_is_step"
    )
    placed = pl.col("_node_reason").is_null()
    is_range = pl.col("_range").is_not_null() & ~pl.col("_is_step")
    budget = nodelist.file_budget(info.records)
    tasks, bad_ranges, added = sj.expand_arrays(good.filter(placed & is_range), budget)
    # one filter of the wide frame, then the few task lines appended (no rechunk)
    good = good.filter(placed & ~is_range)
    if tasks.height:
        good = pl.concat([good, tasks])
    late = pl.concat([late, bad_ranges.with_columns(pl.lit(False).alias("_is_step"))])
    if RAW not in bad.columns:
        bad = bad.with_columns(pl.lit(None, dtype=pl.String).alias(RAW))
    bad = pl.concat(
        [
            bad.select(LINE, RAW, REASON, "_is_step"),
            late.select(LINE, pl.lit(None, dtype=pl.String).alias(RAW), REASON, "_is_step"),
        ]
    )
    return good, _fill_raw(info, bad), added


def _fill_raw(info: FileInfo, bad: pl.DataFrame) -> pl.DataFrame:
    """``bad`` with the raw text of the lines the reader's rows left without it (one
    pass over the lines, only when there are such lines), in the same row order.
    """
    missing = bad.filter(pl.col(RAW).is_null()).select(LINE)
    if missing.is_empty():
        return bad
    raws = with_raw(info, missing.unique()).rename({RAW: "_fetched"})
    return bad.join(raws, on=LINE, how="left", maintain_order="left").select(
        LINE, pl.coalesce(RAW, "_fetched").alias(RAW), REASON, "_is_step"
    )


def _line_jobs(
    jobs: pl.DataFrame, header: Header, cluster: str, dataset: str, tz: str
) -> pl.LazyFrame:
    """Canonical ``jobs`` columns of each good allocation line, plus ``_line`` and
    ``_comp``.

    ``run_s`` is End - Start, so null while a job has no end (running, suspended); the
    instant the line describes, ``as_of_time``, is End for an ended job and Start +
    ``Elapsed`` for a started one that has not ended (sacct computes Elapsed up to the
    moment it prints, so that is when the export was made); null for a job that never
    started.
    """
    start, end = pl.col("start_time"), pl.col("end_time")
    elapsed = pl.duration(microseconds=(pl.col("_elapsed") * 1e6).round(0).cast(pl.Int64))
    as_of = pl.when(end.is_not_null()).then(end).when(start.is_not_null()).then(start + elapsed)
    mem = pl.coalesce("_tres_mem", "_reqmem")
    state = _text("state", header)
    gpus = pl.col("_gpus").cast(pl.Float64)
    return jobs.lazy().select(
        pl.lit(SOURCE).alias("source"),
        pl.lit(dataset).alias("dataset"),
        pl.lit(cluster).alias("cluster"),
        pl.col("_key").alias("job_id"),
        _text("user", header).alias("user"),
        _text("partition", header).alias("vc"),
        _text("jobname", header).alias("name"),
        "submit_time",
        "start_time",
        "end_time",
        sv.seconds(start - pl.col("submit_time")).alias("queue_s"),
        sv.seconds(end - start).alias("run_s"),
        gpus.alias("gpus"),
        gpus.alias("gpus_raw"),
        pl.when(gpus.is_not_null()).then(pl.lit("gpu")).alias("gpus_raw_unit"),
        pl.col("_cpus").cast(pl.Float64).alias("cpus"),
        mem.alias("mem_bytes"),
        pl.col("_gpu_type").alias("gpu_type"),
        pl.col("_nnodes").cast(pl.Int32).alias("nodes"),
        pl.lit(1, dtype=pl.Int32).alias("attempts"),
        sv.status(state).alias("status"),
        state.alias("raw_status"),
        _text("qos", header).alias("qos"),
        _text("account", header).alias("account"),
        "eligible_time",
        pl.col("_limit").alias("time_limit_s"),
        pl.col("_exit_code").cast(pl.Int32).alias("exit_code"),
        pl.col("_exit_signal").cast(pl.Int32).alias("exit_signal"),
        pl.col("_totalcpu").alias("cpu_used_s"),
        pl.col("_maxrss").alias("mem_peak_bytes"),
        sv.cancelled_by(state).alias("cancelled_by"),
        as_of.alias("as_of_time"),
        pl.lit(tz).alias("source_tz"),
        pl.lit("absolute").alias("time_basis"),
        LINE,
        "_comp",
        "_shared",
    )


def job_rows(
    jobs: pl.DataFrame, header: Header, cluster: str, dataset: str, tz: str
) -> tuple[pl.LazyFrame, pl.DataFrame, int]:
    """Canonical ``jobs`` rows of the good allocation lines, the attempt of each line of
    a folded job (``_line``, ``_attempt``) and the number of lines folded away (lines
    minus jobs, over the jobs :func:`gpu_trace.loaders.slurm_jobs.fold` builds).
    """
    shared = jobs.get_column("_key").is_duplicated()
    if not shared.any():
        single = _line_jobs(
            jobs.with_columns(pl.lit(False).alias("_shared")), header, cluster, dataset, tz
        )
        single = single.drop(*sj.HELPERS, "_shared")
        return single, pl.DataFrame(schema={LINE: pl.Int64, "_attempt": pl.Int32}), 0
    # lazily, so that each part reads only the columns it needs (no copy of the whole
    # wide frame): the few shared lines now, the rest when the writer collects
    lines = _line_jobs(jobs.with_columns(shared.alias("_shared")), header, cluster, dataset, tz)
    single = lines.filter(~pl.col("_shared")).drop(*sj.HELPERS, "_shared")
    multi = lines.filter(pl.col("_shared")).drop("_shared").collect()
    folded, attempts = sj.fold(multi)
    return pl.concat([single, folded.lazy()]), attempts, multi.height - folded.height


def with_step_usage(rows: pl.LazyFrame, good: pl.DataFrame, header: Header) -> pl.LazyFrame:
    """``cpu_used_s`` and ``mem_peak_bytes`` of each job, from its step lines.

    sacct fills an allocation line's ``TotalCPU`` by summing the job's completed steps
    (src/sacct/options.c, "aggregate the aggregatable"), and does not fetch steps under
    ``-X`` (``JOBCOND_FLAG_NO_STEP``), where it prints ``00:00:00`` for every job. So
    the allocation line's value is kept only for a job whose steps the export lists
    (never added to the steps' own, which it already holds), else null. ``MaxRSS`` is
    printed on step lines (the step's largest task, sacct man page): the job's peak is
    the largest over its steps and its own line. Without either field the rows are
    returned as they are.
    """
    if "totalcpu" not in header.names and "maxrss" not in header.names:
        return rows
    steps = (
        good.lazy()
        .filter(pl.col("_is_step"))
        .group_by("_key")
        .agg(pl.col("_maxrss").max().alias("_step_rss"), pl.lit(True).alias("_has_steps"))
    )
    return (
        rows.join(steps, left_on="job_id", right_on="_key", how="left", maintain_order="left")
        .with_columns(
            pl.when(pl.col("_has_steps")).then(pl.col("cpu_used_s")).alias("cpu_used_s"),
            pl.max_horizontal("mem_peak_bytes", "_step_rss").alias("mem_peak_bytes"),
        )
        .drop("_step_rss", "_has_steps")
    )


def placement_rows(
    good: pl.DataFrame, header: Header, cluster: str, dataset: str, attempts: pl.DataFrame
) -> pl.DataFrame:
    """One ``placements`` row per host of each good job and step line with a host list
    (steps of a pending array range, which has run nothing, are left out); ``attempt``
    is the run of a requeued job (0 otherwise), ``task`` from :func:`_task`.
    """
    listed = good.filter(pl.col("_node_count").is_not_null() & pl.col("_range").is_null())
    hosts = nodelist.hosts(listed.lazy().select(LINE, nodelist.NODES)).collect()
    state = _text("state", header)
    values = listed.select(
        LINE,
        pl.col("_key").alias("job_id"),
        sj.task().alias("task"),
        "start_time",
        "end_time",
        (pl.col("_gpus").cast(pl.Float64) / pl.col("_node_count")).alias("gpu_count"),
        sv.status(state).alias("status"),
    )
    if attempts.height:
        runs = (
            pl.concat([attempts, sj.step_attempts(listed, attempts), sj.repeated_steps(listed)])
            .group_by(LINE)
            .agg(pl.col("_attempt").min())  # DUPLICATE (-1) wins over a run number
        )
        values = values.join(runs, on=LINE, how="left").filter(
            pl.col("_attempt").fill_null(0) != sj.DUPLICATE
        )
    else:
        values = values.with_columns(pl.lit(None, dtype=pl.Int32).alias("_attempt"))
    placed = hosts.join(values, on=LINE, how="inner", maintain_order="left").select(
        pl.lit(SOURCE).alias("source"),
        pl.lit(dataset).alias("dataset"),
        pl.lit(cluster).alias("cluster"),
        "job_id",
        pl.col("_attempt").fill_null(0).cast(pl.Int32).alias("attempt"),
        "task",
        "start_time",
        "end_time",
        "machine_id",
        "gpu_count",
        "status",
    )
    return placed


def read(path: Path, header: Header) -> tuple[FileInfo, sc.Fields, sc.Marks]:
    """The file's hash and line count, the reader's rows and the byte marks of the fast
    path: the two byte passes run in a thread while polars reads (hashlib, file reads
    and the reader all release the GIL), instead of before it.
    """
    with ThreadPoolExecutor(max_workers=1) as pool:
        pending = pool.submit(lambda: (file_info(path, header_lines=1), sc.marks(path)))
        fields = sc.read_fields(path, header.names, header.trailing)
        info, found = pending.result()
    return info, fields, found


def _ordered(table: str, frame: pl.DataFrame) -> tuple[pl.DataFrame, bool]:
    """``frame`` in the store's order for ``table`` when an integer sort can vouch for
    it (:mod:`gpu_trace.loaders.store_order`: an export is in job-id order, so nearly
    always it is in order already), and whether the writer must still sort it (its sort
    by string job ids cost ~0.5 s per million rows and table).
    """
    ordered = in_store_order(frame, TABLES[table].sort_by)
    return (frame, True) if ordered is None else (ordered, False)


def export(
    path: Path, *, cluster: str | None, tz: str, header: Header | None = None
) -> Iterator[Batch]:
    """The ``jobs`` and ``placements`` batches of one sacct export.

    ``jobs`` records read = the lines without a dot in ``JobID``, each pending array
    range counted as its tasks; the extra lines of one job (requeued runs, heterogeneous
    components) are merged into it (``rows_merged``); the three figures are in the
    metadata (``job_lines``, ``array_tasks_added``, ``lines_folded``).
    """
    header = header or read_sacct_header(path)
    info, fields, found = read(path, header)
    good, bad, added = parse(info, header, tz, fields, found)
    del fields
    name = cluster or path.stem
    cluster_name = slug(name)
    dataset = slug(f"{cluster}-{path.stem}") if cluster else slug(path.stem)
    step = pl.col("_is_step")
    jobs_good = good.filter(~step)
    steps = int(good.get_column("_is_step").sum()) + int(bad.get_column("_is_step").sum())
    ambiguous = good.select(
        pl.sum_horizontal(
            (pl.col(f"_{k}_earliest") != pl.col(f"_{k}_latest")).fill_null(False) for k in TIMES
        ).sum()
    )
    elapsed_mismatch = jobs_good.select(
        (pl.col("_elapsed") != sv.seconds(pl.col("end_time") - pl.col("start_time"))).sum()
    )
    lazy_rows, attempts, folded = job_rows(jobs_good, header, cluster_name, dataset, tz)
    lazy_rows = with_step_usage(lazy_rows, good, header)
    rows, sort_jobs = _ordered("jobs", lazy_rows.collect())
    meta = {
        "time_basis": "absolute",
        "source_tz": tz,
        "cluster": cluster_name,
        "parsable": "--parsable (trailing |)" if header.trailing else "--parsable2",
        "fields": ",".join(header.names),
        "step_lines": str(steps),
        "job_lines": str(info.records - steps),
        "array_tasks_added": str(added),
        "lines_folded": str(folded),
        "ambiguous_local_times": str(ambiguous.item() or 0),
        "elapsed_mismatch_rows": str(elapsed_mismatch.item() or 0),
    }

    def rejected(rows: pl.DataFrame, table: str) -> pl.LazyFrame:
        return quarantine_rows(
            rows, source=SOURCE, dataset=dataset, cluster=cluster_name, table=table, file=path
        )

    yield Batch(
        "jobs",
        dataset,
        info,
        rows,
        rejected(bad.filter(~step), "jobs"),
        sort=sort_jobs,
        rows_read=info.records - steps + added,
        cluster=cluster_name,
        metadata=meta,
        rows_merged=folded,
    )
    placed, sort_placed = _ordered(
        "placements", placement_rows(good, header, cluster_name, dataset, attempts)
    )
    bad_steps = bad.filter(step)
    yield Batch(
        "placements",
        dataset,
        info,
        placed,
        rejected(bad_steps, "placements"),
        sort=sort_placed,
        rows_read=placed.height + bad_steps.height,
        cluster=cluster_name,
        metadata={
            **meta,
            "rows_read": "placements derived from good job and step lines, plus bad step lines",
        },
    )


def discover(path: Path) -> list[Path]:
    """The export files at ``path``: the file itself, or a folder's ``*.psv``,
    ``*.txt`` and ``*.sacct`` files.
    """
    if path.is_file():
        return [path]
    found = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in SUFFIXES)
    if not found:
        raise InputError(path, "no sacct export here (expected *.psv, *.txt or *.sacct files)")
    return found


class SlurmLoader:
    """Loader for ``sacct -P`` / ``--parsable`` exports (a file or a folder of them)."""

    name = SOURCE
    version = "1"
    merge_key = ("cluster", "job_id")

    def batches(
        self, path: Path, *, cluster: str | None = None, tz: str | None = None, **_: Any
    ) -> Iterator[Batch]:
        """Yield a ``jobs`` and a ``placements`` batch per export, times read in ``tz``."""
        if tz is None:
            warnings.warn(
                InputWarning(
                    "sacct prints local times without a zone; reading them as UTC "
                    "(pass --tz with the cluster's IANA zone, e.g. Europe/Berlin)"
                ),
                stacklevel=2,
            )
            tz = DEFAULT_TZ
        tz = parse_tz(tz)
        cluster = cluster or _default_cluster(path)
        blind: list[Path] = []
        for file in discover(path):
            header = read_sacct_header(file)
            if not any(f in header.names for f in GPU_FIELDS):
                blind.append(file)
            yield from export(file, cluster=cluster, tz=tz, header=header)
        if blind:
            warnings.warn(
                InputWarning(
                    f"{blind[0]}{f' and {len(blind) - 1} more export(s)' if len(blind) > 1 else ''}"
                    ": no GPU field (AllocTRES, ReqTRES, AllocGRES or ReqGRES); gpus left "
                    "unknown (add AllocTRES to sacct --format)"
                ),
                stacklevel=2,
            )


def _default_cluster(path: Path) -> str | None:
    """Without ``--cluster``, a folder of exports is one cluster named after the folder,
    so its overlapping exports merge; a lone file's jobs are named after the file (the
    option's help says to name every export of one cluster alike).
    """
    return (path.resolve().name or None) if path.is_dir() else None


@dataclass(frozen=True)
class SlurmOptions:
    """`gpu-trace ingest slurm` options (passed to the loader as keyword arguments)."""

    cluster: str | None = option(
        None,
        "Cluster name for jobs.cluster (default: the folder's name for a folder, the file "
        "name for a file). Exports merge by (cluster, JobID): give every export of one "
        "cluster the same name.",
    )
    tz: str | None = option(
        None,
        "IANA zone of the cluster's clock (sacct prints local times without an offset). Default UTC, with a warning. Recorded in jobs.source_tz.",
        parse=parse_tz,
    )


PLUGIN = LoaderPlugin(
    name="slurm",
    loader=SlurmLoader,
    help="Slurm `sacct -P` (or --parsable) export -> jobs, placements (one per host; steps as placements of their job).\n\nPATH: one export (fields found by header name, any order) or a folder of *.psv.",
    options=SlurmOptions,
)
