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

- **One record per line.** A line whose ``JobID`` is an allocation (``123``, ``123_7``,
  ``123_[1-9%2]``, ``123+1``) is a ``jobs`` record; a line whose ``JobID`` has a dot
  (``123.batch``, ``123.extern``, ``123.0``: a step, printed without ``-X``) is folded
  into its job as ``placements`` rows (``task`` = the step name), never a job of its
  own. So ``jobs`` rows read = lines without a dot in ``JobID``; the number of step
  lines is recorded in the Parquet metadata (``step_lines``). Bad step lines are
  quarantined under table ``placements``.
- **Placements.** Each job with a ``NodeList`` gets one placement per host (attempt 0,
  ``gpu_count`` = its GPUs split evenly over the hosts, since sacct gives only the
  total); each step line one per host of its own list. ``placements`` rows read are
  the rows derived plus the quarantined step lines.
- **Repeated job ids** (``sacct -D`` prints every requeued incarnation; overlapping
  exports repeat jobs): the last line of a job id is kept, with ``attempts`` = the
  number of its lines; earlier lines are quarantined with the line they repeat on.
- **Times** are local wall-clock times of the cluster (sacct prints no offset), read in
  ``--tz`` (default UTC, with a warning) and recorded in ``source_tz``. ``Unknown`` and
  ``None`` are null. A local time that does not exist in the zone (inside a spring-
  forward gap) is quarantined. An ambiguous one (inside a fall-back hour) takes the
  earlier instant, unless that would put it before the time it must follow (submit <=
  eligible, submit <= start <= end), then the later one: the only reading that keeps
  the job's own order. Their number is recorded (``ambiguous_local_times``).
- ``queue_s`` = start - submit; ``run_s`` = ``Elapsed`` (what Slurm measured; the running
  time so far for a running job), else end - start; null for a job that never started.
  Rows whose ``Elapsed`` differs from end - start are counted (``elapsed_mismatch_rows``),
  not changed. Start before submit or end before start is quarantined.
- **GPUs and memory** come from ``AllocTRES`` when it is not empty (what the job got),
  else ``ReqTRES`` (a pending job), which is then the only one read and checked;
  memory from ``ReqMem`` when that TRES list names none. ``gpus_raw`` is the same count (unit ``gpu``); ``gpu_type`` the models of
  ``gres/gpu:<model>=`` entries joined with ``|``.
- ``vc`` is ``Partition``; ``nodes`` is ``NNodes``; ``cpus`` is ``NCPUS``.
- ``JobName`` is the only free text: a line with more fields than the header (a ``|``
  inside a job name) is split from both ends around it, as for Helios.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from gpu_trace.errors import InputError, InputWarning
from gpu_trace.loaders import slurm_nodes as nodelist
from gpu_trace.loaders import slurm_values as sv
from gpu_trace.loaders.base import Batch
from gpu_trace.loaders.helios import fixed_offset, with_raw
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
}
"""sacct field names we read (lower case) -> our key. Others are ignored."""
REQUIRED = ("jobid", "state", "submit")
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
    """``_n`` (fields on the line) and one ``_t_<key>`` text column per field we read.

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
    return split.with_columns(cols).drop("_parts")


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
        local = text.str.strptime(pl.Datetime("us"), TIME_FORMAT, strict=False, cache=False)
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
        out = frame.with_columns(first).with_columns(e.alias(n) for n, e in outputs.items())
        names = [e.meta.output_name() for e in first]
        return out.drop([n for n in names if n not in outputs])
    table = (
        frame.select(col)
        .unique()
        .with_columns(first)
        .select(col, *(e.alias(n) for n, e in outputs.items()))
    )
    return frame.join(table, on=col, how="left", nulls_equal=True, maintain_order="left")


def typed(lines: pl.LazyFrame, header: Header) -> pl.DataFrame:
    """Every line split and typed (everything but the time-zone step and the reasons):
    the columns :func:`checks` and the row builders read. Split parts and regex
    captures are named in a first stage so each runs once
    (:data:`gpu_trace.loaders.slurm_values.Staged`); repetitive fields are parsed per
    distinct value (:func:`_by_value`).
    """
    elapsed_1, elapsed = sv.duration_s(_text("elapsed", header, no_value=sv.NO_VALUE), "_el")
    nnodes, nnodes_bad = _int("nnodes", header)
    ncpus, ncpus_bad = _int("ncpus", header)
    base = (
        _split(lines, header)
        .with_columns(
            step_flag().alias("_is_step"),
            _text("jobid", header).alias("_jobid"),
            *_local_times(header),
            *elapsed_1,
            nnodes.alias("_nnodes"),
            nnodes_bad.alias("_nnodes_bad"),
            ncpus.alias("_ncpus"),
            ncpus_bad.alias("_ncpus_bad"),
            _text("nodelist", header, no_value=sv.NO_VALUE).alias(nodelist.NODES),
        )
        .with_columns(elapsed["value"].alias("_elapsed"), elapsed["bad"].alias("_elapsed_bad"))
        .drop(e.meta.output_name() for e in elapsed_1)
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
    # ReqTRES only matters (and is only checked) where there is no AllocTRES
    got = pl.col("_at_text").is_not_null()
    reqmem, reqmem_bad = sv.req_mem(
        _text("reqmem", header, no_value=sv.NO_VALUE), pl.col("_nnodes"), pl.col("_ncpus")
    )
    return base.with_columns(
        pl.when(got).then(pl.col("_at_gpus")).otherwise(pl.col("_rt_gpus")).alias("_gpus"),
        pl.when(got)
        .then(pl.col("_at_gpu_type"))
        .otherwise(pl.col("_rt_gpu_type"))
        .alias("_gpu_type"),
        pl.coalesce(pl.when(got).then(pl.col("_at_mem_bytes")), pl.col("_rt_mem_bytes")).alias(
            "_tres_mem"
        ),
        pl.col("_at_bad").alias("_alloc_bad"),
        pl.when(~got).then(pl.col("_rt_bad")).alias("_req_bad"),
        pl.when(~got).then(pl.col("_rt_text")).alias("_rt_text"),
        reqmem.alias("_reqmem"),
        reqmem_bad.alias("_reqmem_bad"),
    ).drop([f"{n}_{k}" for n in ("_at", "_rt") for k in ("gpus", "gpu_type", "mem_bytes", "bad")])


def _in_range(local: pl.Expr) -> pl.Expr:
    return (local >= pl.lit(TIME_MIN)) & (local < pl.lit(TIME_MAX))


def to_utc(frame: pl.DataFrame, tz: str) -> pl.DataFrame:
    """Each time's two UTC readings (``_<key>_earliest``, ``_<key>_latest``: equal except
    inside a fall-back hour; null inside a spring-forward gap), then the chosen instants
    ``submit_time`` .. ``end_time`` (the rule of the module docstring).

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
    readings: list[pl.Expr] = []
    for key in TIMES:
        local = pl.col(f"_{key}_local")
        for how in ("earliest", "latest"):
            if offset is not None:
                utc = (local - pl.lit(offset)).dt.replace_time_zone("UTC")
            else:
                utc = local.dt.replace_time_zone(
                    tz, ambiguous=how, non_existent="null"
                ).dt.convert_time_zone("UTC")
            readings.append(utc.alias(f"_{key}_{how}"))
    submit = _pick("submit", None)
    start = _pick("start", submit)
    return (
        frame.with_columns(readings)
        .with_columns(
            submit.alias("submit_time"),
            _pick("eligible", submit).alias("eligible_time"),
            start.alias("start_time"),
        )
        .with_columns(_pick("end", pl.coalesce("start_time", "submit_time")).alias("end_time"))
    )


def _pick(key: str, lower: pl.Expr | None) -> pl.Expr:
    """The earlier reading of an ambiguous local time, or the later one when only the
    later keeps it at or after ``lower``.
    """
    early, late = pl.col(f"_{key}_earliest"), pl.col(f"_{key}_latest")
    if lower is None:
        return early
    return (
        pl.when((early < lower) & (late >= lower) & lower.is_not_null()).then(late).otherwise(early)
    )


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
        (pl.col(RAW).is_in(["", "\r"]).fill_null(True), "empty line"),
        (count_bad, pl.format(f"expected {expected} fields, found {{}}", pl.col("_n"))),
        (pl.col(RAW).str.contains("\ufffd", literal=True), "invalid UTF-8"),
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
                pl.format(f"{label} {{}} is not a time (YYYY-MM-DDTHH:MM:SS)", _quoted(text)),
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
        ("exit", "exitcode", "ExitCode", "status:signal"),
        ("reqmem", "reqmem", "ReqMem", "a memory amount"),
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
            pl.col("_req_bad").is_not_null(),
            pl.format("ReqTRES {} {}", _quoted(pl.col("_rt_text")), pl.col("_req_bad")),
        ),
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


def parse(info: FileInfo, header: Header, tz: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(good, bad) lines of an export: good lines typed, with their host-list size; bad
    lines with ``_line``, ``_raw`` and ``_reason``, host lists and repeated job ids
    included. Reasons are worded only for the bad lines (formatting text for a million
    good ones would cost more than all the parsing).
    """
    frame = to_utc(typed(scan_lines(info, skip=1), header), tz)
    found = checks(header)
    bad_flag = pl.any_horizontal(*(c.fill_null(False) for c, _ in found))
    frame = frame.with_columns(bad_flag.alias("_bad"))
    bad = frame.filter(pl.col("_bad")).with_columns(_first(found).alias(REASON))
    keep = [c for c in frame.columns if not c.startswith("_t_") or c[3:] in KEEP]
    good = frame.filter(~pl.col("_bad")).select([c for c in keep if c != RAW])
    del frame
    nodes = nodelist.check(good.lazy()).collect()
    good = good.join(nodes, on=LINE, how="left")
    job = ~pl.col("_is_step") & pl.col("_node_reason").is_null()
    last = pl.when(job).then(pl.col(LINE)).max().over("_jobid")
    good = good.with_columns(
        pl.when(job).then(last).alias("_last"),
        pl.when(job).then(pl.len().over("_jobid")).alias("_incarnations"),
    )
    repeated = pl.col("_last").is_not_null() & (pl.col(LINE) != pl.col("_last"))
    late = good.filter(pl.col("_node_reason").is_not_null() | repeated).with_columns(
        pl.when(pl.col("_node_reason").is_not_null())
        .then(pl.col("_node_reason"))
        .otherwise(
            pl.format(
                "JobID {} repeats on line {} (a requeued incarnation from sacct -D, or "
                "overlapping exports); the last line is kept",
                pl.col("_jobid"),
                pl.col("_last"),
            )
        )
        .alias(REASON)
    )
    good = good.filter(pl.col("_node_reason").is_null() & ~repeated)
    if late.height:
        late = with_raw(info, late.select(LINE, REASON, "_is_step"))
        bad = pl.concat(
            [bad.select(LINE, RAW, REASON, "_is_step"), late.select(LINE, RAW, REASON, "_is_step")]
        )
    else:
        bad = bad.select(LINE, RAW, REASON, "_is_step")
    return good, bad


def _seconds(delta: pl.Expr) -> pl.Expr:
    return delta.dt.total_microseconds().cast(pl.Float64) / 1e6


def job_rows(
    good: pl.DataFrame, header: Header, cluster: str, dataset: str, tz: str
) -> pl.LazyFrame:
    """Canonical ``jobs`` rows of the good allocation lines."""
    started = pl.col("start_time").is_not_null()
    run = pl.coalesce(pl.col("_elapsed"), _seconds(pl.col("end_time") - pl.col("start_time")))
    mem = pl.coalesce("_tres_mem", "_reqmem")
    state = _text("state", header)
    return good.lazy().select(
        pl.lit(SOURCE).alias("source"),
        pl.lit(dataset).alias("dataset"),
        pl.lit(cluster).alias("cluster"),
        pl.col("_jobid").alias("job_id"),
        _text("user", header).alias("user"),
        _text("partition", header).alias("vc"),
        _text("jobname", header).alias("name"),
        "submit_time",
        "start_time",
        "end_time",
        _seconds(pl.col("start_time") - pl.col("submit_time")).alias("queue_s"),
        pl.when(started).then(run).alias("run_s"),
        pl.col("_gpus").cast(pl.Float64).alias("gpus"),
        pl.col("_gpus").cast(pl.Float64).alias("gpus_raw"),
        pl.when(pl.col("_gpus").is_not_null()).then(pl.lit("gpu")).alias("gpus_raw_unit"),
        pl.col("_ncpus").cast(pl.Float64).alias("cpus"),
        mem.alias("mem_bytes"),
        pl.col("_gpu_type").alias("gpu_type"),
        pl.col("_nnodes").cast(pl.Int32).alias("nodes"),
        pl.col("_incarnations").cast(pl.Int32).alias("attempts"),
        sv.status(state).alias("status"),
        state.alias("raw_status"),
        _text("qos", header).alias("qos"),
        _text("account", header).alias("account"),
        "eligible_time",
        pl.col("_limit").alias("time_limit_s"),
        pl.col("_exit_code").cast(pl.Int32).alias("exit_code"),
        pl.col("_exit_signal").cast(pl.Int32).alias("exit_signal"),
        pl.lit(tz).alias("source_tz"),
        pl.lit("absolute").alias("time_basis"),
    )


def placement_rows(good: pl.DataFrame, header: Header, cluster: str, dataset: str) -> pl.DataFrame:
    """One ``placements`` row per host of each good job and step line with a host list."""
    listed = good.filter(pl.col("_node_count").is_not_null())
    hosts = nodelist.hosts(listed.lazy().select(LINE, nodelist.NODES)).collect()
    step = sv.STEP_ID
    state = _text("state", header)
    values = listed.select(
        LINE,
        pl.when(pl.col("_is_step"))
        .then(pl.col("_jobid").str.extract(step, 1))
        .otherwise(pl.col("_jobid"))
        .alias("job_id"),
        pl.when(pl.col("_is_step")).then(pl.col("_jobid").str.extract(step, 2)).alias("task"),
        "start_time",
        "end_time",
        (pl.col("_gpus").cast(pl.Float64) / pl.col("_node_count")).alias("gpu_count"),
        sv.status(state).alias("status"),
    )
    return hosts.join(values, on=LINE, how="left", maintain_order="left").select(
        pl.lit(SOURCE).alias("source"),
        pl.lit(dataset).alias("dataset"),
        pl.lit(cluster).alias("cluster"),
        "job_id",
        pl.lit(0, dtype=pl.Int32).alias("attempt"),
        "task",
        "start_time",
        "end_time",
        "machine_id",
        "gpu_count",
        "status",
    )


def export(path: Path, *, cluster: str | None, tz: str) -> Iterator[Batch]:
    """The ``jobs`` and ``placements`` batches of one sacct export."""
    header = read_sacct_header(path)
    info = file_info(path, header_lines=1)
    good, bad = parse(info, header, tz)
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
        (pl.col("_elapsed") != _seconds(pl.col("end_time") - pl.col("start_time"))).sum()
    )
    meta = {
        "time_basis": "absolute",
        "source_tz": tz,
        "cluster": cluster_name,
        "parsable": "--parsable (trailing |)" if header.trailing else "--parsable2",
        "fields": ",".join(header.names),
        "step_lines": str(steps),
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
        job_rows(jobs_good, header, cluster_name, dataset, tz),
        rejected(bad.filter(~step), "jobs"),
        rows_read=info.records - steps,
        cluster=cluster_name,
        metadata=meta,
    )
    placed = placement_rows(good, header, cluster_name, dataset)
    bad_steps = bad.filter(step)
    yield Batch(
        "placements",
        dataset,
        info,
        placed,
        rejected(bad_steps, "placements"),
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
        for file in discover(path):
            yield from export(file, cluster=cluster, tz=tz)


@dataclass(frozen=True)
class SlurmOptions:
    """`gpu-trace ingest slurm` options (passed to the loader as keyword arguments)."""

    cluster: str | None = option(None, "Cluster name for jobs.cluster (default: the file name).")
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
