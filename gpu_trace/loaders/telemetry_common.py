"""Shared pieces of the telemetry parsers: value cells -> canonical rows.

Every text format is first reshaped into *cells*: one row per (input line, source field)
with the line number, the raw line, the keys (time, host, GPU) and the cell text. A cell
is the unit of accounting for long-form telemetry ("one record"): it becomes exactly one
``gpu_samples`` row (null value for ``N/A`` and friends, never 0), one ``events`` row
(an XID/ECC cell with a positive value), or one quarantine row (text that is not a
number). Cells of event fields with value 0 mean "no error" and produce no row; they
are counted in the batch metadata (``no_event_cells``) so nothing is silently lost.
"""

from __future__ import annotations

import datetime as dt
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from zoneinfo import ZoneInfo

import polars as pl

from gpu_trace.errors import GpuTraceError, InputError, InputWarning
from gpu_trace.loaders.base import Batch, ReconciliationError
from gpu_trace.loaders.telemetry_fields import (
    AT_MOST_TOTAL,
    DCGM_FP64_BLANK,
    DCGM_INT32_BLANK,
    NULL_MARKERS,
    PERCENT_0_100,
    Field,
)
from gpu_trace.loaders.textfile import (
    BOM,
    LINE,
    RAW,
    RAW_LIMIT,
    REASON,
    REASON_LIMIT,
    FileInfo,
    capped,
)
from gpu_trace.loaders.textfile import (
    first_lines as bounded_first_lines,
)
from gpu_trace.loaders.zones import parse_tz
from gpu_trace.schemas.telemetry import GPU_METRICS

CELL = "_cell"
FIELD = "_field"
KEYS = ("host", "gpu_index", "gpu_uuid", "mig_instance", "pod", "namespace", "container", "job_id")

_NUMBER = r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)(?:\s*[A-Za-z%/]+)?\s*$"


@dataclass(frozen=True)
class TimeBasis:
    """Where timestamps came from, recorded in every file's metadata."""

    basis: str
    """``file`` (the source printed them), ``start`` (--start + tick x interval),
    ``relative`` (no times printed or given: time since the first sample, from
    1970-01-01), ``scrape`` (scrape wall clock)."""
    tz: str
    """Zone the source's local times were read in (``UTC`` when the source is UTC)."""

    def metadata(self) -> dict[str, str]:
        """The batch metadata recording where the times came from."""
        return {"time_basis": self.basis, "source_tz": self.tz}


def zone(tz: str) -> ZoneInfo:
    """The IANA zone ``tz`` as :func:`gpu_trace.loaders.zones.parse_tz` reads it, or its
    one-line error.
    """
    return ZoneInfo(parse_tz(tz))


def parse_start(text: str | None, tz: str) -> dt.datetime | None:
    """An ISO-8601 ``--start``; naive values are read in ``tz``."""
    if text is None:
        return None
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        msg = f"--start {text!r} is not an ISO-8601 time"
        raise GpuTraceError(msg) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=zone(tz))
    return when.astimezone(dt.UTC)


RELATIVE_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
"""Where the first sample of a file that prints no times is put when no ``--start`` /
``--time`` is given: times are then time since the file's first sample, shown from
1970-01-01 (``time_basis = relative``), the same on every machine and every clone. (The
file's mtime was used before, so each copy of the same file gave other times.)"""


def relative_fallback(path: Path, option: str) -> dt.datetime:
    """The anchor of a file that prints no times and was given none, announced as an
    :class:`InputWarning` (one ``warning:`` line at the CLI) so the choice is never
    silent; the batches record it as ``time_basis = relative``.
    """
    warnings.warn(
        InputWarning(
            f"{path}: the file has no timestamps; times are relative to its first sample "
            f"(shown from 1970-01-01, time_basis=relative); pass {option} to set them"
        ),
        stacklevel=2,
    )
    return RELATIVE_EPOCH


def tick_times(
    tick: pl.Expr, ticks: int, *, start: dt.datetime | None, interval_s: float, path: Path
) -> tuple[pl.Expr, TimeBasis]:
    """Times for sources that print none: ``start + tick * interval``, where ``start`` is
    ``--start`` or, without it, the relative epoch (a warning says so).
    """
    step = pl.duration(microseconds=(tick * round(interval_s * 1_000_000)).cast(pl.Int64))
    if start is not None:
        return pl.lit(start).dt.cast_time_unit("us") + step, TimeBasis("start", "UTC")
    first = relative_fallback(path, "--start") if ticks else RELATIVE_EPOCH
    return pl.lit(first).dt.cast_time_unit("us") + step, TimeBasis("relative", "UTC")


def is_missing(cell: pl.Expr) -> pl.Expr:
    """Whether a cell says 'no value' (``N/A`` and friends, ``[Not Supported]``): a null
    sample, never 0.
    """
    text = cell.str.strip_chars()
    return text.is_null() | text.is_in(list(NULL_MARKERS)) | text.str.starts_with("[")


def cell_number(cell: pl.Expr) -> pl.Expr:
    """The number in a cell: ``100 %`` -> 100, ``631.95 W`` -> 631.95, ``0x1FF`` -> 511,
    ``P0`` -> 0; null when the cell holds no number.
    """
    text = cell.str.strip_chars()
    hexed = text.str.strip_prefix("0x").str.to_integer(base=16, strict=False)
    pstate = text.str.extract(r"^P(\d+)$", 1).cast(pl.Float64, strict=False)
    plain = text.str.extract(_NUMBER, 1).cast(pl.Float64, strict=False)
    return (
        pl.when(text.str.starts_with("0x"))
        .then(hexed.cast(pl.Float64))
        .when(pstate.is_not_null())
        .then(pstate)
        .otherwise(plain)
    )


def is_sentinel(value: pl.Expr) -> pl.Expr:
    """DCGM's BLANK / NOT_FOUND / NOT_SUPPORTED / NOT_PERMISSIONED codes."""
    return (value >= DCGM_FP64_BLANK) | value.is_between(DCGM_INT32_BLANK, DCGM_INT32_BLANK + 3)


def field_frame(fields: dict[str, Field]) -> pl.LazyFrame:
    """The field map as a frame to join cells with."""
    names = list(fields)
    return pl.LazyFrame(
        {
            FIELD: names,
            "metric": [fields[n].metric for n in names],
            "_factor": [float(fields[n].factor or 1) for n in names],
        },
        schema={FIELD: pl.String, "metric": pl.String, "_factor": pl.Float64},
    )


MAX_EVENT_VALUE = float(2**53)
"""Largest event value kept: every whole number up to it is exact in a float and fits
``events.code`` (int64)."""


def cells_to_rows(cells: pl.LazyFrame, fields: dict[str, Field]) -> pl.DataFrame:
    """Type and scale every cell. Adds ``value`` (canonical unit, null when missing or a
    sentinel), ``metric``, ``unit`` and ``_reason`` (non-null: quarantine).

    Range checks quarantine the cell (one record) whose value cannot be true: a
    percentage of time outside 0-100 (:data:`PERCENT_0_100`), memory free or used
    above the total printed on the same line (:data:`AT_MOST_TOTAL`), and an event
    value (an XID code, an ECC count) that is not a whole number 0 to
    :data:`MAX_EVENT_VALUE` (DCGM's XID field holds the last XID, a small positive
    integer; a negative, fractional or astronomic one is damage, not an event to round).
    """
    raw = pl.col(CELL)
    number = cell_number(raw)
    value = pl.when(is_missing(raw) | is_sentinel(number)).then(None).otherwise(number)
    units = {m: u for m, (u, _) in GPU_METRICS.items()}
    text = raw.str.strip_chars()
    metric, val = pl.col("metric"), pl.col("value")
    total = {
        t: pl.when(metric == t).then(val).max().over(LINE) for t in set(AT_MOST_TOTAL.values())
    }
    over_total = [
        pl.when((metric == m) & (val > total[t])).then(
            pl.format(f"{{}} value '{{}}' exceeds {t} on the same line", pl.col(FIELD), text)
        )
        for m, t in AT_MOST_TOTAL.items()
    ]
    earlier = pl.col(REASON) if REASON in cells.collect_schema() else pl.lit(None, pl.String)
    out = (
        cells.join(field_frame(fields), on=FIELD, how="left")
        .with_columns((value * pl.col("_factor")).alias("value"))
        .with_columns(
            pl.coalesce(
                pl.when(~is_missing(raw) & number.is_null()).then(
                    pl.format("{} value '{}' is not a number", pl.col(FIELD), text)
                ),
                earlier,
                pl.when(metric.is_in(list(PERCENT_0_100)) & ((val < 0) | (val > 100))).then(
                    pl.format("{} value '{}' is outside 0-100 %", pl.col(FIELD), text)
                ),
                pl.when(
                    metric.str.starts_with("event:")
                    & (val.is_nan() | (val < 0) | (val > MAX_EVENT_VALUE) | (val != val.floor()))
                ).then(
                    pl.format(
                        "{} value '{}' is not an XID or error count (a whole number >= 0)",
                        pl.col(FIELD),
                        text,
                    )
                ),
                *over_total,
            ).alias(REASON),
            metric.replace_strict(units, default=None, return_dtype=pl.String).alias("unit"),
        )
        .collect()
    )
    return out


def split_rows(
    typed: pl.DataFrame,
    *,
    source: str,
    dataset: str,
    file: Path,
    keep: Sequence[str] = (),
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, int]:
    """Good sample rows, event rows, quarantine rows and the count of "no event" cells
    (value 0, or, where the frame has a ``_repeat`` column, a repeat of the series'
    previous error). ``keep``: columns carried into the event rows as they are (a
    caller that decides repeats later, over several batches).
    """
    bad = typed.filter(pl.col(REASON).is_not_null())
    good = typed.filter(pl.col(REASON).is_null())
    is_event = pl.col("metric").str.starts_with("event:")
    samples = good.filter(~is_event)
    events_all = good.filter(is_event)
    fired = pl.col("value") > 0
    if "_repeat" in good.columns:  # range data: the same error again at the next step
        fired = fired & ~pl.col("_repeat")
    events = events_all.filter(fired)
    cols = [c for c in KEYS if c in typed.columns]
    tag = (pl.lit(source).alias("source"), pl.lit(dataset).alias("dataset"))
    samples_out = samples.select(
        *tag,
        pl.col("time"),
        *cols,
        pl.col("metric"),
        pl.col("value"),
        pl.col("unit"),
        pl.col(FIELD).alias("raw_field"),
    )
    code = (
        pl.col("_xid").cast(pl.Int64, strict=False)
        if "_xid" in events.columns
        else pl.lit(None, dtype=pl.Int64)
    )
    events_out = events.select(
        *tag,
        pl.col("time"),
        *[c for c in ("host", "gpu_index", "gpu_uuid") if c in cols],
        pl.col("metric").str.strip_prefix("event:").alias("kind"),
        pl.coalesce(code, pl.col("value").cast(pl.Int64)).alias("code"),
        pl.format("{}={}", pl.col(FIELD), pl.col(CELL).str.strip_chars()).alias("detail"),
        *keep,
    )
    quarantine = quarantine_frame(bad, source=source, dataset=dataset, file=file)
    return samples_out, events_out, quarantine, events_all.height - events.height


def quarantine_frame(
    bad: pl.DataFrame, *, source: str, dataset: str, file: Path, table: str = "gpu_samples"
) -> pl.DataFrame:
    """Rejected cells as quarantine rows (file, line, reason, raw line)."""
    return bad.select(
        pl.lit(source).alias("source"),
        pl.lit(dataset).alias("dataset"),
        pl.lit(None, dtype=pl.String).alias("cluster"),
        pl.lit(table).alias("table"),
        pl.lit(file.name).alias("file"),
        pl.format("line {}", pl.col(LINE)).alias("locator"),
        capped(pl.col(REASON), REASON_LIMIT).alias("reason"),
        capped(pl.col(RAW), RAW_LIMIT).alias("raw"),
    )


def batches(
    *,
    info: FileInfo,
    dataset: str,
    samples: pl.DataFrame | pl.LazyFrame,
    events: pl.DataFrame,
    quarantine: pl.DataFrame,
    no_event: int,
    basis: TimeBasis,
    extra: dict[str, str] | None = None,
    samples_rows: int | None = None,
    samples_sorted: bool = False,
) -> list[Batch]:
    """The ``gpu_samples`` batch (carrying every quarantined cell) and, when any event
    cell fired, an ``events`` batch. ``rows_read`` is the number of cells that were meant
    for each table, so ingest's check (read = written + quarantined) holds per table.
    ``samples_rows``: the number of sample rows, when ``samples`` is lazy (rows a loader
    wrote to disk batch by batch); ``samples_sorted``: they are in the store's order
    already (the writer then streams them instead of sorting them all in memory).
    """
    if samples_rows is None:
        assert isinstance(samples, pl.DataFrame)
        samples_rows = samples.height
    meta = {**basis.metadata(), "no_event_cells": str(no_event), **(extra or {})}
    out = [
        Batch(
            "gpu_samples",
            dataset,
            info,
            samples,
            quarantine,
            rows_read=samples_rows + quarantine.height,
            metadata=meta,
            sort=not samples_sorted,
        )
    ]
    if events.height:
        out.append(
            Batch("events", dataset, info, events, None, rows_read=events.height, metadata=meta)
        )
    return out


def check_lines(info: FileInfo, used: int, header_lines: int) -> None:
    """The independent count: every physical line was a header/comment line or a data
    line; a mismatch is a parser bug, not user input.
    """
    if used + header_lines != info.records:
        msg = (
            f"{info.path}: {info.records} physical lines but {used} data + {header_lines} "
            "header/comment lines were accounted for"
        )
        raise ReconciliationError(msg)


def require_text(info: FileInfo) -> None:
    """Refuse an empty file (one line naming it)."""
    if info.empty:
        raise InputError(info.path, "file is empty")


def first_lines(path: Path, n: int = 2) -> list[str]:
    """The first ``n`` lines of ``path`` (decoded leniently, line ends dropped), for
    sniffing the format; each line bounded as :func:`textfile.read_lines` bounds it.
    """
    lines = bounded_first_lines(path, n)
    lines += [b""] * (n - len(lines))  # an empty line for each line the file lacks
    text = [ln.decode("utf-8", errors="replace").rstrip("\r\n") for ln in lines]
    return [text[0].removeprefix(BOM), *text[1:]] if text else text


def concat(frames: Sequence[pl.LazyFrame]) -> pl.LazyFrame:
    """The frames stacked, columns matched by name (an empty frame for none)."""
    return pl.concat(frames, how="diagonal_relaxed") if frames else pl.LazyFrame()


def wide_to_cells(
    good: pl.DataFrame, keys: Sequence[str], kept: Sequence[tuple[int, str]]
) -> pl.LazyFrame:
    """Long-form cells (one row per kept field of every good line) from split wide rows:
    ``_line, _raw, *keys, field, cell`` where the cell is ``_parts[i]``.
    """
    return concat(
        [
            good.lazy().select(
                LINE,
                RAW,
                *keys,
                pl.lit(name).alias(FIELD),
                pl.col("_parts").list.get(i).alias(CELL),
            )
            for i, name in kept
        ]
    )


def finish_wide(
    keyed: pl.DataFrame,
    *,
    keys: Sequence[str],
    kept: Sequence[tuple[int, str]],
    fields: dict[str, Field],
    source: str,
    info: FileInfo,
    dataset: str,
    used: int,
    header_lines: int,
    basis: TimeBasis,
    extra: dict[str, str],
) -> list[Batch]:
    """The common tail of the wide-text parsers (nvidia-smi query/dmon, dcgmi dmon), in one
    place so they cannot drift apart in how a line is accounted for: lines with no
    ``_reason`` become one typed cell per kept field, split into samples / events /
    quarantine; the others are quarantined whole; then check that every physical line was
    accounted for and build the batches.
    """
    good = keyed.filter(pl.col(REASON).is_null())
    bad = keyed.filter(pl.col(REASON).is_not_null())
    typed = cells_to_rows(wide_to_cells(good, keys, kept), fields)
    samples, events, quarantine, no_event = split_rows(
        typed, source=source, dataset=dataset, file=info.path
    )
    quarantine = pl.concat(
        [quarantine_frame(bad, source=source, dataset=dataset, file=info.path), quarantine]
    )
    check_lines(info, used, header_lines)
    return batches(
        info=info,
        dataset=dataset,
        samples=samples,
        events=events,
        quarantine=quarantine,
        no_event=no_event,
        basis=basis,
        extra=extra,
    )


def run_periodic(
    step: Callable[[], object],
    flush: Callable[[], object],
    *,
    clock: Callable[[], float],
    sleep: Callable[[float], object],
    interval_s: float,
    flush_s: float,
    duration_s: float | None,
) -> None:
    """Call ``step`` every ``interval_s`` (drift-free: deadlines, not sleeps) until
    ``duration_s`` has passed or Ctrl-C, calling ``flush`` every ``flush_s`` and once more
    at the end, so a crash loses at most one flush interval. Shared by the NVML sampler
    and the Prometheus scraper.
    """
    begin = clock()
    due = last_flush = begin
    try:
        while duration_s is None or clock() - begin < duration_s:
            step()
            if clock() - last_flush >= flush_s:
                flush()
                last_flush = clock()
            due += interval_s
            delay = due - clock()
            if delay > 0:
                sleep(delay)
    except KeyboardInterrupt:
        pass
    finally:
        flush()
