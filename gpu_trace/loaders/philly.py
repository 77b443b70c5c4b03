"""Microsoft Philly (msr-fiddle/philly-traces): the unpacked ``trace-data/`` folder.

Inputs (the trace's README, github.com/msr-fiddle/philly-traces), all without file extensions:

- ``cluster_job_log`` (required): one JSON array of jobs. It becomes ``jobs`` (one row
  per record) and ``placements`` (one row per attempt per machine), both in dataset
  ``philly``. See :mod:`gpu_trace.loaders.philly_json` for how the array is read.
- ``cluster_machine_list``: the shipped inventory -> ``machines`` dataset
  ``machine_list``.
- ``cluster_gpu_util``, ``cluster_cpu_util``, ``cluster_mem_util`` (each optional) ->
  ``gpu_samples`` / ``host_samples``; see :mod:`gpu_trace.loaders.philly_util`.

Jobs follow the official notebook's rules:

- ``start_time`` is the first attempt's start and ``end_time`` the last attempt's end.
  ``run_s`` = end - start, so gaps between retries are included. ``queue_s`` = first
  start - submit.
- ``gpus`` (= ``gpus_raw``, unit ``gpu_ids``) counts the GPU ids over all machines of
  the **first** attempt. ``nodes`` counts that attempt's machines. ``attempts`` is the
  length of the list.
- Status: ``Pass`` -> completed, ``Killed`` -> cancelled, ``Failed`` -> failed, any
  other value -> unknown. ``raw_status`` keeps the value as written.
- Missing marker: the string ``"None"`` (or ``""`` or JSON null) -> null. A job with
  an empty ``attempts`` list is kept, with null start and end and 0 attempts. An
  attempt whose start is ``None`` is kept, with a null start.
- **Still running.** "A job's latest attempt having no end time indicates that the job
  was still running when the log data was collected." Such a job keeps its mapped
  final status (the log's own word), but ``end_time`` and ``run_s`` stay null. The
  status is not rewritten to ``running``: the log states one, and analyses can select
  ``end_time IS NULL`` themselves.

Time zone. Job-log times are naive US-Pacific wall clock (``America/Los_Angeles``),
converted to UTC; ``source_tz`` records the zone. Two cases need a rule:

- The **ambiguous hour**. DST ended on 2017-11-05 at 02:00 PDT, so wall-clock times
  01:00-01:59 that day happened twice. The rule is inferred from ordering where
  possible. A job's times are a sequence (submit, attempt 0 start, attempt 0 end,
  attempt 1 start, ...) that must not go backwards. Within a job, once an ambiguous
  time is earlier on the wall clock than an ambiguous time before it in the sequence,
  the clock has fallen back. From that point on, the job's ambiguous times are PST
  (the later instant). Every other ambiguous time defaults to PDT (the earlier
  instant, polars ``ambiguous='earliest'``). The counts of inferred and defaulted
  times are written to the ``jobs`` Parquet metadata (``dst_ambiguous_*``).
- The **non-existent hour** at the spring-forward change (02:00-02:59 on a March
  Sunday; not inside the 2017-08..12 trace window). Such a time cannot be converted,
  so the record is quarantined with that reason instead of being shifted silently.

Placements: one row per attempt per machine (``detail`` entry). ``gpu_indices`` comes
from the ``gpu<k>`` ids. An attempt with an empty ``detail`` list still gets one row,
with a null machine, so every attempt's times survive.

Reconciliation. ``jobs`` reads the records of the array (1-based ``record N``
locators), counted independently of the parser: the job-object starts in the bytes
plus the records that do not start with one (see :mod:`gpu_trace.loaders.philly_json`;
records merged by a parser fail the ingest). A broken record is cut at the next job
start and quarantined alone; a file whose array is not closed is an error. A bad record (not valid JSON, a wrong JSON type, an unreadable or
non-existent time, a malformed gpu id, ...) is quarantined **once, whole**, with its
raw JSON text, under ``jobs``, and produces no placements. ``placements`` are derived
rows, so their ``rows_read`` is the number of rows derived from the good records.

Inventories. The shipped ``cluster_machine_list`` (552 machines, 321 x 2 + 231 x 8 =
2,490 GPUs) is **known to be wrong** (msr-fiddle/philly-traces#8). Jobs use ``gpu0``
to ``gpu7`` on machines the list says have two GPUs. Two inferred inventories are
written next to it:

- ``inferred_jobs``: per machine, the highest GPU index any placement used, + 1;
- ``inferred_util``: per machine in ``cluster_gpu_util``, the number of ``gpuN_util``
  columns that are ever not ``NA``. Qinghao-Hu's revised list (3,205 GPUs) was derived
  this way.

**Analyses should use ``inferred_util``** (falling back to ``inferred_jobs`` when the
util file is absent). The machine list is kept only to show the discrepancy.
``single GPU mem`` (``12GB``/``24GB``) is read as **GiB** (12 x 2^30 bytes), because GPU
memory is sized in binary units in practice.

Capacity. There is one ``capacity`` row per inventory (``basis`` machine_list,
inferred_jobs, inferred_util), holding that inventory's total GPUs.
``machine_list`` and ``inferred_jobs`` rows start at the first job submission and last
``period_s`` = until the last job event (submit, start or end). The ``inferred_util``
row starts at the first util sample and lasts until one minute after the last one
(each sample covers its minute). The ``capacity`` option selects which bases get a row.

Datasets: ``philly`` (jobs, placements), ``machine_list`` / ``inferred_jobs`` /
``inferred_util`` (machines, capacity), ``gpu_util`` (gpu_samples), ``cpu_util`` and
``mem_util`` (host_samples). Re-ingesting a folder replaces each of these that the
folder holds. A dataset whose file is absent keeps what an earlier ingest wrote.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import polars as pl

from gpu_trace.errors import InputError
from gpu_trace.loaders.base import Batch
from gpu_trace.loaders.philly_json import (
    RECORD,
    Records,
    decode_records,
    raw_text,
    read_records,
)
from gpu_trace.loaders.philly_util import (
    CPU_UTIL,
    GPU_UTIL,
    MEM_UTIL,
    UtilResult,
    inferred_inventory,
    util_file,
)
from gpu_trace.loaders.textfile import (
    RAW,
    RAW_LIMIT,
    REASON,
    FieldSpec,
    FileInfo,
    capped,
    file_info,
    parse_fields,
    quarantine_rows,
    read_header,
    scan_lines,
)
from gpu_trace.loaders.units import GIB
from gpu_trace.plugins import LoaderPlugin, option
from gpu_trace.schemas import JOBS, PLACEMENTS
from gpu_trace.values import choose, split_list

SOURCE = "philly"
CLUSTER = "philly"
DATASET = "philly"
TZ = "America/Los_Angeles"
JOB_LOG = "cluster_job_log"
MACHINE_LIST = "cluster_machine_list"
FILES = (JOB_LOG, MACHINE_LIST, GPU_UTIL.file, CPU_UTIL.file, MEM_UTIL.file)
BASES = ("machine_list", "inferred_jobs", "inferred_util")

STATUS = {"Pass": "completed", "Killed": "cancelled", "Failed": "failed"}
MISSING = ("None", "")
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
MACHINE_FIELDS = (
    FieldSpec("machineId", required=True),
    FieldSpec("number of GPUs", "int", required=True),
    FieldSpec("single GPU mem", required=True),
)


def _naive(col: str) -> pl.Expr:
    """A job-log time string -> naive wall-clock datetime (null when missing or
    unreadable; :func:`_unreadable` tells the two apart). Exactly ``YYYY-MM-DD
    HH:MM:SS`` (19 characters: strptime alone would take ``1:12:09``).
    """
    text = pl.col(col)
    parsed = text.str.strptime(pl.Datetime("us"), TIME_FORMAT, strict=False)
    return pl.when(text.str.len_bytes() == len("2017-10-07 01:12:09")).then(parsed)


def _unreadable(col: str, parsed: str) -> pl.Expr:
    """Whether the time text in ``col`` is there (not a missing marker) but did not
    parse (``parsed``: the column :func:`_naive` made of it). Computed from that
    column, so each text is parsed once.
    """
    text = pl.col(col)
    missing = text.is_null() | (text == MISSING[0]) | (text == MISSING[1])
    return ~missing & pl.col(parsed).is_null()


def _bad_time(label: pl.Expr, col: str) -> pl.Expr:
    return pl.format("{} '{}' is not a valid time (YYYY-MM-DD HH:MM:SS)", label, pl.col(col))


@dataclass(frozen=True)
class _Localized:
    """UTC instants for a column of job-log times, aligned with the input rows."""

    utc: pl.Series
    ambiguous: int
    inferred_pst: int


def _hour_offsets(hours: pl.Series) -> pl.DataFrame:
    """For each distinct wall-clock hour: its UTC offset if it is the earlier (PDT) or
    the later (PST) occurrence. The two differ only in the repeated hour, and both are
    null in the hour skipped at spring-forward. US-Pacific DST changes happen on the
    hour, so one lookup per hour is exact. That lookup is what keeps the time-zone
    work off the hundreds of thousands of individual times.
    """
    frame = pl.DataFrame({"_h": hours})
    h = pl.col("_h")

    def offset(ambiguous: Literal["earliest", "latest"]) -> pl.Expr:
        local = h.dt.replace_time_zone(TZ, ambiguous=ambiguous, non_existent="null")
        return local.dt.convert_time_zone("UTC").dt.replace_time_zone(None) - h

    return frame.with_columns(offset("earliest").alias("_early"), offset("latest").alias("_late"))


_HOUR_US = 3_600_000_000
_DENSE_HOURS = 200_000
"""Most hours (~23 years) between a log's first and last time for which the offsets
are looked up by position (one entry per hour of the span); a wider span is looked
up per distinct hour instead."""


def _offsets(naive: pl.Series) -> tuple[pl.Series, pl.Series]:
    """The PDT-reading and PST-reading UTC offsets of each naive time (see
    :func:`_hour_offsets`), aligned with ``naive``.

    The hours of a log span a few months, so each time's offset is picked by position
    from a table with one entry per hour of the span (an integer gather), rather than
    matched by value against the distinct hours (a hash lookup per time; the whole
    localization took 0.42 s of CPU that way at 1 M jobs, 0.18 s now). Both give the
    offsets of the same hours.
    """
    hour = naive.to_physical() // _HOUR_US
    first, last = hour.min(), hour.max()
    if not isinstance(first, int) or not isinstance(last, int):
        nothing = pl.Series([None] * len(naive), dtype=pl.Duration("us"))
        return nothing, nothing
    if last - first < _DENSE_HOURS:
        span = pl.int_range(first, last + 1, dtype=pl.Int64, eager=True) * _HOUR_US
        offsets = _hour_offsets(span.cast(pl.Datetime("us")))
        at = hour - first
        return offsets["_early"].gather(at), offsets["_late"].gather(at)
    hours = naive.dt.truncate("1h")
    offsets = _hour_offsets(hours.drop_nulls().unique())
    return (
        hours.replace_strict(offsets["_h"], offsets["_early"], default=None),
        hours.replace_strict(offsets["_h"], offsets["_late"], default=None),
    )


def _localize(times: pl.DataFrame) -> _Localized:
    """Convert naive wall-clock times (``_j`` job, ``_seq`` position in the job's
    sequence, ``_t`` time) to UTC, row for row, with the ordering rule for the
    ambiguous hour (see the module doc). Non-existent times come back null.
    """
    t = pl.col("_t")
    early, late = _offsets(times["_t"])
    amb = (
        times.with_row_index("_i")
        .filter(pl.Series(early != late).fill_null(False))
        .sort("_j", "_seq")
        .with_columns(
            (t < t.cum_max().shift(1).over("_j"))
            .fill_null(False)
            .cast(pl.Int32)
            .cum_sum()
            .over("_j")
            .gt(0)
            .alias("_pst")
        )
    )
    offset = early
    if amb.height:
        pst = pl.repeat(False, times.height, eager=True).scatter(amb["_i"], amb["_pst"])
        offset = pl.select(pl.when(pst).then(late).otherwise(early)).to_series()
    utc = (times["_t"] + offset).dt.replace_time_zone("UTC").alias("_utc")
    return _Localized(utc, amb.height, int(amb["_pst"].sum()))


@dataclass
class JobLog:
    """Everything read from ``cluster_job_log``."""

    jobs: Batch
    placements: Batch
    inferred: pl.DataFrame
    window: tuple[datetime, datetime] | None


def _quarantine(bad: pl.DataFrame, path: Path) -> pl.DataFrame:
    return bad.select(
        pl.lit(SOURCE).alias("source"),
        pl.lit(DATASET).alias("dataset"),
        pl.lit(CLUSTER).alias("cluster"),
        pl.lit("jobs").alias("table"),
        pl.lit(path.name).alias("file"),
        pl.format("record {}", pl.col(RECORD)).alias("locator"),
        pl.col(REASON).alias("reason"),
        capped(pl.col(RAW), RAW_LIMIT).alias("raw"),
    )


def job_log(path: Path) -> JobLog:
    """Read ``cluster_job_log`` into jobs, placements and the job-inferred inventory."""
    with tempfile.TemporaryDirectory(prefix="gpu-trace-philly-") as tmp:
        return _job_log(path, Path(tmp))


def _at(values: pl.Series, index: pl.Series, valid: pl.Series) -> pl.Series:
    """``values[index]`` where ``valid``, else null: a positional lookup (rows are
    aligned by construction, so no join is needed).
    """
    if len(values) == 0:
        return pl.Series(values.name, [None] * len(index), dtype=values.dtype)
    picked = values.gather(index.clip(0, len(values) - 1))
    return pl.select(pl.when(valid).then(picked)).to_series().alias(values.name)


def _job_log(path: Path, workdir: Path) -> JobLog:
    records = read_records(path, workdir)
    decoded = decode_records(records)
    frames = _aligned_frames(decoded)
    times = _times(frames)
    problems = _first_problems(frames, times.gaps)
    n_jobs = frames.jobs.height
    bad_job = pl.repeat(False, n_jobs, eager=True).alias("_bad")
    if problems.height:
        bad_job = bad_job.scatter(problems["_j"], True)
    rejected = _rejected(decoded, records, frames.jobs, problems)
    job_rows = _job_rows(frames, times, bad_job)
    placement_rows = _placement_rows(frames, times, bad_job)
    metadata = _metadata(times.local, records.closed)
    return JobLog(
        _jobs_batch(path, records.info, job_rows, rejected, metadata),
        _placements_batch(records.info, placement_rows, metadata),
        _inferred_inventory(placement_rows),
        _window(job_rows, placement_rows),
    )


@dataclass(frozen=True)
class _Frames:
    """The good job records, their attempts and the attempts' machines, kept aligned
    instead of joined: job row j, attempt row a (jobs exploded, in order) and detail
    row d (attempts exploded, in order) carry ``_j`` / ``_a`` indices.
    """

    jobs: pl.DataFrame
    attempts: pl.DataFrame
    detail: pl.DataFrame


def _aligned_frames(decoded: pl.DataFrame) -> _Frames:
    jobs = _jobs_frame(decoded)
    attempts = _attempts_frame(jobs)
    return _Frames(jobs, attempts, _detail_frame(attempts))


def _jobs_frame(decoded: pl.DataFrame) -> pl.DataFrame:
    """One row per decodable job record, in record order, with its naive submit time."""
    jobs = decoded.filter(pl.col(REASON).is_null()).select(RECORD, pl.col("rec")).unnest("rec")
    if not jobs[RECORD].is_sorted():  # the fast path keeps record order: no nested gather
        jobs = jobs.sort(RECORD)
    return jobs.with_columns(
        _naive("submitted_time").alias("_submit"),
        pl.col("attempts").list.len().cast(pl.Int32).alias("_attempts"),
    ).with_columns(_unreadable("submitted_time", "_submit").alias("_bad"))


def _attempts_frame(jobs: pl.DataFrame) -> pl.DataFrame:
    """One row per attempt (``_j``: its job), with naive start/end times, the number of
    machines and of GPUs.
    """
    attempts = (
        jobs.select(
            pl.int_range(pl.len(), dtype=pl.UInt32).alias("_j"),
            pl.col("attempts"),
            pl.int_ranges(pl.col("attempts").list.len()).alias("attempt"),
        )
        .explode(["attempts", "attempt"])
        .unnest("attempts")
        .rename({"start_time": "_start_text", "end_time": "_end_text"})
    )
    return (
        attempts.with_columns(
            _naive("_start_text").alias("_start"),
            _naive("_end_text").alias("_end"),
            pl.col("detail").list.len().fill_null(0).cast(pl.Int32).alias("_nodes"),
            pl.col("detail")
            .list.eval(pl.element().struct.field("gpus").list.len())
            .list.sum()
            .fill_null(0)
            .cast(pl.Float64)
            .alias("_gpus"),
        )
        .with_columns(
            _unreadable("_start_text", "_start").alias("_bad_start"),
            _unreadable("_end_text", "_end").alias("_bad_end"),
        )
        .with_columns((pl.col("_bad_start") | pl.col("_bad_end")).alias("_bad"))
    )


def _bad_gpu_index() -> pl.Expr:
    """Inside ``list.eval``: a GPU id that is not ``gpu<N>`` with 0 <= N < 10000."""
    return pl.element().is_null() | (pl.element() < 0) | (pl.element() > 9999)


def _detail_frame(attempts: pl.DataFrame) -> pl.DataFrame:
    """One row per (attempt, machine) (``_a``: its attempt; an attempt with no machines
    keeps one all-null row), with the GPU indices parsed and the bad rows flagged.
    """
    detail = (
        attempts.select(
            pl.int_range(pl.len(), dtype=pl.UInt32).alias("_a"), "_j", "attempt", "detail"
        )
        .explode("detail", empty_as_null=True)
        .unnest("detail")
    )
    # gpu<k> -> k; anything else (GPU1, gpu, gpu-1, gpu99999) -> null or out of range.
    indices = pl.col("gpus").list.eval(
        pl.element().str.strip_prefix("gpu").cast(pl.Int16, strict=False)
    )
    return detail.with_columns(indices.alias("_indices")).with_columns(
        ((pl.col("ip") == "") | pl.col("_indices").list.eval(_bad_gpu_index()).list.any())
        .fill_null(False)
        .alias("_bad")
    )


@dataclass(frozen=True)
class _Times:
    """The job log's times in UTC: submit per job, start and end per attempt (aligned
    with the frames), the DST bookkeeping, and the non-existent local times.
    """

    local: _Localized
    submit_utc: pl.Series
    start_utc: pl.Series
    end_utc: pl.Series
    gaps: pl.DataFrame


def _times(frames: _Frames) -> _Times:
    """Every time of the log localized in one pass: each job's sequence (submit, then
    each attempt's start and end) is what decides the ambiguous fall-back hour.
    """
    jobs, attempts = frames.jobs, frames.attempts
    n_jobs, n_att = jobs.height, attempts.height
    times = pl.concat(
        [
            jobs.select(
                pl.int_range(pl.len(), dtype=pl.UInt32).alias("_j"),
                pl.lit(0, dtype=pl.Int64).alias("_seq"),
                pl.col("_submit").alias("_t"),
            ),
            attempts.select(
                "_j", (1 + 2 * pl.col("attempt")).alias("_seq"), pl.col("_start").alias("_t")
            ),
            attempts.select(
                "_j", (2 + 2 * pl.col("attempt")).alias("_seq"), pl.col("_end").alias("_t")
            ),
        ]
    )
    local = _localize(times)
    gaps = times.with_columns(local.utc).filter(
        pl.col("_t").is_not_null() & pl.col("_utc").is_null()
    )
    return _Times(
        local,
        local.utc.slice(0, n_jobs),
        local.utc.slice(n_jobs, n_att),
        local.utc.slice(n_jobs + n_att, n_att),
        gaps,
    )


def _gap_reason() -> pl.Expr:
    """Why a time in the spring-forward gap is refused, naming the field it came from."""
    return pl.format(
        "{} '{}' does not exist in {} (skipped by the spring-forward DST change)",
        pl.when(pl.col("_seq") == 0)
        .then(pl.lit("submitted_time"))
        .when(pl.col("_seq") % 2 == 1)
        .then(pl.format("attempts[{}].start_time", (pl.col("_seq") - 1) // 2))
        .otherwise(pl.format("attempts[{}].end_time", (pl.col("_seq") - 2) // 2)),
        pl.col("_t").dt.strftime(TIME_FORMAT),
        pl.lit(TZ),
    )


def _submit_problems(jobs: pl.DataFrame) -> pl.DataFrame:
    return (
        jobs.with_row_index("_j")
        .filter("_bad")
        .select(
            "_j",
            _bad_time(pl.lit("submitted_time"), "submitted_time").alias(REASON),
            pl.lit(0).alias("_k"),
            pl.lit(0, dtype=pl.Int64).alias("_o"),
        )
    )


def _attempt_problems(attempts: pl.DataFrame) -> pl.DataFrame:
    return (
        attempts.with_row_index("_o")
        .filter("_bad")
        .select(
            "_j",
            pl.when("_bad_start")
            .then(_bad_time(pl.format("attempts[{}].start_time", "attempt"), "_start_text"))
            .otherwise(_bad_time(pl.format("attempts[{}].end_time", "attempt"), "_end_text"))
            .alias(REASON),
            pl.lit(1).alias("_k"),
            pl.col("_o").cast(pl.Int64),
        )
    )


def _detail_problems(detail: pl.DataFrame) -> pl.DataFrame:
    first_bad_id = pl.col("gpus").list.get(
        pl.col("_indices").list.eval(_bad_gpu_index()).list.arg_max()
    )
    return (
        detail.with_row_index("_o")
        .filter("_bad")
        .select(
            "_j",
            pl.when(pl.col("ip") == "")
            .then(pl.format("attempts[{}]: empty machine ip", "attempt"))
            .otherwise(
                pl.format(
                    "attempts[{}]: gpu id '{}' is not gpu<N> (N < 10000)", "attempt", first_bad_id
                )
            )
            .alias(REASON),
            pl.lit(2).alias("_k"),
            pl.col("_o").cast(pl.Int64),
        )
    )


def _gap_problems(gaps: pl.DataFrame) -> pl.DataFrame:
    return gaps.select(
        "_j",
        _gap_reason().alias(REASON),
        pl.lit(3).alias("_k"),
        pl.col("_seq").alias("_o"),
    )


def _first_problems(frames: _Frames, gaps: pl.DataFrame) -> pl.DataFrame:
    """The first problem of each job (``_j``, reason), in the order: submit time,
    attempts (in order), machines (in order), non-existent local times (in sequence
    order).
    """
    return (
        pl.concat(
            [
                _submit_problems(frames.jobs),
                _attempt_problems(frames.attempts),
                _detail_problems(frames.detail),
                _gap_problems(gaps),
            ],
            how="vertical_relaxed",
        )
        .sort("_j", "_k", "_o")
        .group_by("_j", maintain_order=True)
        .agg(pl.col(REASON).first())
    )


def _rejected(
    decoded: pl.DataFrame, records: Records, jobs: pl.DataFrame, problems: pl.DataFrame
) -> pl.DataFrame:
    """Undecodable records and records with a problem: (record, raw text, reason)."""
    late = pl.DataFrame({RECORD: jobs[RECORD].gather(problems["_j"]), REASON: problems[REASON]})
    parts = [decoded.filter(pl.col(REASON).is_not_null()).select(RECORD, RAW, REASON)]
    if late.height:
        texts = raw_text(records, late[RECORD])
        parts.append(texts.join(late, on=RECORD).select(RECORD, RAW, REASON))
    return pl.concat(parts, how="vertical_relaxed").sort(RECORD)


def _job_rows(frames: _Frames, times: _Times, bad_job: pl.Series) -> pl.DataFrame:
    """Canonical ``jobs`` rows of the good records: submit, the first attempt's start
    and size, the last attempt's end.
    """
    jobs = frames.jobs
    has = pl.col("_attempts") > 0
    first_idx = (pl.col("_attempts").cum_sum() - pl.col("_attempts")).cast(pl.UInt32)
    last_idx = (pl.col("_attempts").cum_sum() - 1).clip(0).cast(pl.UInt32)
    index = jobs.select(has.alias("has"), first_idx.alias("first"), last_idx.alias("last"))
    first_att = frames.attempts.select("_nodes", "_gpus")
    jobs = jobs.with_columns(
        times.submit_utc.alias("submit_time"),
        _at(times.start_utc, index["first"], index["has"]).alias("start_time"),
        _at(times.end_utc, index["last"], index["has"]).alias("end_time"),
        _at(first_att["_nodes"], index["first"], index["has"]).alias("nodes"),
        _at(first_att["_gpus"], index["first"], index["has"]).alias("_gpus"),
        bad_job,
    ).filter(~pl.col("_bad"))
    seconds = pl.Duration("us")
    return jobs.select(
        pl.lit(SOURCE).alias("source"),
        pl.lit(DATASET).alias("dataset"),
        pl.lit(CLUSTER).alias("cluster"),
        pl.col("jobid").alias("job_id"),
        pl.col("user"),
        pl.col("vc"),
        pl.col("submit_time"),
        pl.col("start_time"),
        pl.col("end_time"),
        (
            (pl.col("start_time") - pl.col("submit_time")).cast(seconds).dt.total_microseconds()
            / 1e6
        ).alias("queue_s"),
        (
            (pl.col("end_time") - pl.col("start_time")).cast(seconds).dt.total_microseconds() / 1e6
        ).alias("run_s"),
        pl.col("_gpus").alias("gpus"),
        pl.col("_gpus").alias("gpus_raw"),
        pl.when(pl.col("_gpus").is_not_null()).then(pl.lit("gpu_ids")).alias("gpus_raw_unit"),
        pl.col("nodes"),
        pl.col("_attempts").alias("attempts"),
        pl.col("status").replace_strict(STATUS, default="unknown").alias("status"),
        pl.col("status").alias("raw_status"),
        pl.lit(TZ).alias("source_tz"),
        pl.lit("absolute").alias("time_basis"),
    )


def _store_sorted(rows: pl.DataFrame, keys: Sequence[str]) -> pl.DataFrame:
    """``rows`` in the store's order: a stable sort by ``keys``, nulls last (the
    writer's sort, which the batches skip). Without nulls in the keys, ``nulls_last``
    changes nothing but costs ~3x (polars' multi-column sort takes a slower path for
    it), so it is asked for only when a key holds a null.
    """
    nulls = any(rows[k].null_count() for k in keys)
    return rows.sort(list(keys), nulls_last=nulls, maintain_order=True)


def _placement_rows(frames: _Frames, times: _Times, bad_job: pl.Series) -> pl.DataFrame:
    """Canonical ``placements`` rows: one per (attempt, machine) of the good records."""
    detail = frames.detail
    return (
        detail.with_columns(
            frames.jobs["jobid"].gather(detail["_j"]).alias("job_id"),
            times.start_utc.gather(detail["_a"]).alias("start_time"),
            times.end_utc.gather(detail["_a"]).alias("end_time"),
            bad_job.gather(detail["_j"]).alias("_bad"),
        )
        .filter(~pl.col("_bad"))
        .select(
            pl.lit(SOURCE).alias("source"),
            pl.lit(DATASET).alias("dataset"),
            pl.lit(CLUSTER).alias("cluster"),
            pl.col("job_id"),
            pl.col("attempt").cast(pl.Int32),
            pl.col("start_time"),
            pl.col("end_time"),
            pl.col("ip").alias("machine_id"),
            pl.when(pl.col("ip").is_not_null())
            .then(pl.col("gpus").list.len().cast(pl.Float64))
            .alias("gpu_count"),
            pl.when(pl.col("ip").is_not_null()).then(pl.col("_indices")).alias("gpu_indices"),
        )
    )


def _inferred_inventory(placement_rows: pl.DataFrame) -> pl.DataFrame:
    """Machines seen in placements, each with 1 + its highest GPU index as its size."""
    return (
        placement_rows.filter(pl.col("machine_id").is_not_null())
        .group_by("machine_id")
        # the highest index of each row first: a group's max of maxes, no explode
        .agg((pl.col("gpu_indices").list.max().max().cast(pl.Int32) + 1).fill_null(0).alias("gpus"))
        .sort("machine_id")
        .select(
            pl.lit(SOURCE).alias("source"),
            pl.lit("inferred_jobs").alias("dataset"),
            pl.lit(CLUSTER).alias("cluster"),
            "machine_id",
            "gpus",
        )
    )


def _window(
    job_rows: pl.DataFrame, placement_rows: pl.DataFrame
) -> tuple[datetime, datetime] | None:
    """First submit to last event (the span the inferred capacity rows cover)."""
    events = pl.concat(
        [job_rows["submit_time"], placement_rows["start_time"], placement_rows["end_time"]]
    )
    first_submit, last_event = job_rows["submit_time"].min(), events.max()
    if isinstance(first_submit, datetime) and isinstance(last_event, datetime):
        return (first_submit, last_event)
    return None


def _metadata(local: _Localized, closed: bool) -> dict[str, str]:
    """Batch metadata: the time zone and the DST rules applied, with their counts."""
    return {
        "source_tz": TZ,
        "time_basis": "absolute",
        "dst_ambiguous_times": str(local.ambiguous),
        "dst_ambiguous_inferred_pst": str(local.inferred_pst),
        "dst_ambiguous_defaulted_pdt": str(local.ambiguous - local.inferred_pst),
        "dst_rule": (
            "2017-11-05 01:00-01:59 wall clock: PST once a job's times fall back on the "
            "wall clock, else PDT (earliest); non-existent times are quarantined"
        ),
        "running_rule": "last attempt end None -> end_time null, status as logged",
        "record_numbers": "1-based",
        "json_array_closed": str(closed).lower(),
    }


# The batches are sorted here, eagerly and in the store's canonical order (an in-memory
# sort of a few hundred thousand rows is cheaper than the writer's sort inside its
# streaming sink).


def _jobs_batch(
    path: Path,
    info: FileInfo,
    job_rows: pl.DataFrame,
    rejected: pl.DataFrame,
    metadata: dict[str, str],
) -> Batch:
    return Batch(
        "jobs",
        DATASET,
        info,
        _store_sorted(job_rows, JOBS.sort_by),
        _quarantine(rejected, path),
        cluster=CLUSTER,
        metadata=metadata,
        sort=False,
    )


def _placements_batch(
    info: FileInfo, placement_rows: pl.DataFrame, metadata: dict[str, str]
) -> Batch:
    return Batch(
        "placements",
        DATASET,
        info,
        _store_sorted(placement_rows, PLACEMENTS.sort_by),
        None,
        rows_read=placement_rows.height,
        cluster=CLUSTER,
        metadata={**metadata, "rows_read": "placements derived from the good job records"},
        sort=False,
    )


def machine_list(path: Path) -> Batch:
    """Read ``cluster_machine_list`` (header ``machineId, number of GPUs, single GPU
    mem`` with spaces after the commas; memory as `` 12GB``) into ``machines``.
    """
    header = read_header(path)
    names = [h.strip() for h in header.split(",")]
    expected = [f.name for f in MACHINE_FIELDS]
    if names != expected:
        raise InputError(
            path, f"unexpected header {header!r}; expected {', '.join(expected)}", "line 1"
        )
    info = file_info(path, header_lines=1)
    parsed = parse_fields(scan_lines(info, skip=1), MACHINE_FIELDS, strip=True)
    mem_gib = pl.col("single GPU mem").str.extract(r"^(\d{1,6})\s*GB$").cast(pl.Int64)
    parsed = parsed.with_columns(
        pl.coalesce(
            pl.col(REASON),
            pl.when(pl.col("number of GPUs") < 0).then(pl.lit("number of GPUs is negative")),
            pl.when(mem_gib.is_null()).then(
                pl.format("single GPU mem '{}' is not <N>GB", pl.col("single GPU mem"))
            ),
        ).alias(REASON)
    )
    rows = parsed.filter(pl.col(REASON).is_null()).select(
        pl.lit(SOURCE).alias("source"),
        pl.lit("machine_list").alias("dataset"),
        pl.lit(CLUSTER).alias("cluster"),
        pl.col("machineId").alias("machine_id"),
        pl.col("number of GPUs").alias("gpus"),
        (mem_gib * GIB).alias("gpu_mem_bytes"),
    )
    rejected = quarantine_rows(
        parsed.filter(pl.col(REASON).is_not_null()),
        source=SOURCE,
        dataset="machine_list",
        cluster=CLUSTER,
        table="machines",
        file=path,
    )
    return Batch(
        "machines",
        "machine_list",
        info,
        rows,
        rejected,
        cluster=CLUSTER,
        metadata={
            "gpu_mem_rule": "single GPU mem NGB read as N GiB",
            "known_issue": "msr-fiddle/philly-traces#8: GPU counts contradict the job log; "
            "use dataset inferred_util (or inferred_jobs)",
        },
    )


def _capacity(
    basis: str, info: FileInfo, gpus: int, window: tuple[datetime, datetime] | None
) -> Batch:
    """One capacity row holding an inventory's GPU total over ``window`` (no row when
    the window is unknown: a job log without a readable submit time).
    """
    rows = pl.DataFrame(
        {
            "source": [SOURCE],
            "dataset": [basis],
            "cluster": [CLUSTER],
            "time": [window[0] if window else None],
            "period_s": [(window[1] - window[0]).total_seconds() if window else None],
            "gpus": [gpus],
            "basis": [basis],
        },
        schema_overrides={"time": pl.Datetime("us", "UTC"), "period_s": pl.Float64},
    ).filter(pl.col("time").is_not_null())
    return Batch(
        "capacity",
        basis,
        info,
        rows,
        None,
        rows_read=rows.height,
        cluster=CLUSTER,
        metadata={"capacity_rule": "total GPUs of the inventory over the window it describes"},
    )


def _inventory_batch(dataset: str, info: FileInfo, rows: pl.DataFrame) -> Batch:
    return Batch(
        "machines",
        dataset,
        info,
        rows,
        None,
        rows_read=rows.height,
        cluster=CLUSTER,
        metadata={"inventory": dataset, "preferred_inventory": "inferred_util"},
    )


def _files(path: Path) -> dict[str, Path]:
    """The Philly files in ``path``: a ``trace-data`` folder (or a folder holding one),
    or a single Philly file.
    """
    if path.is_file():
        if path.name not in FILES:
            raise InputError(path, f"not a Philly trace file (expected one of {', '.join(FILES)})")
        return {path.name: path}
    if not (path / JOB_LOG).exists() and (path / "trace-data").is_dir():
        path = path / "trace-data"
    found = {name: path / name for name in FILES if (path / name).is_file()}
    if JOB_LOG not in found:
        raise InputError(path, f"no {JOB_LOG} in this folder (expected the unpacked trace-data/)")
    return found


class PhillyLoader:
    """Loader for the Microsoft Philly trace folder (see the module doc)."""

    name = SOURCE
    version = "1"

    def batches(self, path: Path, *, capacity: Iterable[str] = BASES, **_: Any) -> Iterator[Batch]:
        """Yield jobs, placements, inventories, capacity rows and util samples.

        ``capacity`` picks the inventories that get a capacity row (default: all of
        machine_list, inferred_jobs, inferred_util, when their input is present).
        """
        bases = _checked_bases(path, capacity)
        files = _files(path)
        log: JobLog | None = None
        if JOB_LOG in files:
            log = job_log(files[JOB_LOG])
            yield from _job_log_batches(log, bases)
        if MACHINE_LIST in files:
            yield from _machine_list_batches(
                files[MACHINE_LIST], bases, log.window if log else None
            )
        util = [k for k in (GPU_UTIL, CPU_UTIL, MEM_UTIL) if k.file in files]
        if not util:
            return
        # Util files are staged as typed Parquet in a folder that lives until ingest
        # has written the batches (it writes each one before asking for the next).
        with tempfile.TemporaryDirectory(prefix="gpu-trace-philly-util-") as tmp:
            for kind in util:
                result: UtilResult = util_file(kind, files[kind.file], Path(tmp))
                yield result.batch
                if kind is GPU_UTIL:
                    yield from _util_inventory_batches(result, bases)


def _checked_bases(path: Path, capacity: Iterable[str]) -> set[str]:
    """``capacity`` as a set, every name one of :data:`BASES` (the library API takes
    any iterable; the CLI has checked the names already).
    """
    bases = set(capacity)
    unknown = bases - set(BASES)
    if unknown:
        raise InputError(
            path, f"unknown capacity basis {sorted(unknown)}; choose from {', '.join(BASES)}"
        )
    return bases


def _job_log_batches(log: JobLog, bases: set[str]) -> Iterator[Batch]:
    """Jobs, placements, the job-inferred inventory and (if chosen) its capacity row."""
    yield log.jobs
    yield log.placements
    info = log.jobs.file
    yield _inventory_batch("inferred_jobs", info, log.inferred)
    if "inferred_jobs" in bases:
        yield _capacity("inferred_jobs", info, int(log.inferred["gpus"].sum()), log.window)


def _machine_list_batches(
    path: Path, bases: set[str], window: tuple[datetime, datetime] | None
) -> Iterator[Batch]:
    """The shipped machine list and (if chosen) its capacity row over the job log's
    window.
    """
    batch = machine_list(path)
    yield batch
    if "machine_list" in bases:
        total = batch.rows.lazy().select(pl.col("gpus").sum()).collect().item()
        yield _capacity("machine_list", batch.file, int(total or 0), window)


def _util_inventory_batches(result: UtilResult, bases: set[str]) -> Iterator[Batch]:
    """The GPU-util-inferred inventory and (if chosen) its capacity row over the util
    window (its last sample's minute included).
    """
    inventory = inferred_inventory(result)
    yield _inventory_batch("inferred_util", result.batch.file, inventory)
    if "inferred_util" in bases:
        span = result.window
        if span is not None:
            span = (span[0], span[1] + timedelta(minutes=1))
        yield _capacity("inferred_util", result.batch.file, int(inventory["gpus"].sum()), span)


def _capacity_bases(text: str) -> tuple[str, ...]:
    # "a,b" and repeated flags alike; each name checked (exit 2, "did you mean").
    bases = [choose("--capacity value", name, BASES) for name in split_list(text)]
    return tuple(bases or BASES)


@dataclass(frozen=True)
class PhillyOptions:
    """`gpu-trace ingest philly` options (passed to the loader as keyword arguments)."""

    capacity: tuple[str, ...] = option(
        BASES,
        "Inventory to write a capacity row for (a,b or repeated): machine_list, "
        "inferred_jobs, inferred_util. Analyses should use inferred_util: the shipped "
        "machine list is wrong (philly-traces#8).",
        parse=_capacity_bases,
        repeat=True,
    )


PLUGIN = LoaderPlugin(
    name="philly",
    loader=PhillyLoader,
    help="Microsoft Philly: cluster_job_log -> jobs, placements; cluster_machine_list and "
    "inferred inventories -> machines, capacity; cluster_{gpu,cpu,mem}_util -> samples.\n\n"
    "PATH: the unpacked trace-data/ folder (or a folder holding it, or one of its files).",
    options=PhillyOptions,
)
