"""What the serving-trace loaders (azure_llm.py, mooncake.py) share: the lineage
columns every ``requests`` row carries, the checks on token counts, and the batch of
one file's requests with its rejects.

The serving traces publish no request id, so a request's key (``request_id``) is its
record number in the file: the line number minus the header lines. It is stable across
re-ingests of the same bytes and joins ``request_blocks``.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from gpu_trace.errors import InputError
from gpu_trace.loaders.base import Batch
from gpu_trace.loaders.textfile import (
    LINE,
    RAW,
    REASON,
    FileInfo,
    quarantine_rows,
    read_header,
    scan_lines,
)

INT_TEXT = r"^[+-]?[0-9]+$"
"""A whole number as text (no decimal point, no exponent): ``1.0`` is not guessed."""
MAX_TOKENS = 2**40
"""Above any context a model has (10^12 tokens): a larger count is a corrupt value, and
kept below it sums over millions of requests stay exact in int64."""


def header_positions(
    path: Path, required: tuple[str, ...], optional: tuple[str, ...] = ()
) -> dict[str, int]:
    """Column name -> field index from the header line (names stripped, BOM dropped),
    for the ``required`` and present ``optional`` columns; a missing required column or
    a duplicated name is one error naming the file.
    """
    names = [n.strip() for n in read_header(path).split(",")]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise InputError(path, f"duplicate column(s) {', '.join(dupes)} in the header", "line 1")
    missing = [c for c in required if c not in names]
    if missing:
        raise InputError(
            path,
            f"header lacks column(s) {', '.join(missing)}; expected {','.join(required)}",
            "line 1",
        )
    return {c: names.index(c) for c in (*required, *optional) if c in names}


def split_lines(info: FileInfo, header_lines: int = 1) -> pl.LazyFrame:
    """The data lines (``_line``, ``_raw`` without a CR) split on commas into ``_parts``:
    the serving CSVs quote nothing (no field holds a comma).
    """
    return (
        scan_lines(info, skip=header_lines)
        .with_columns(pl.col(RAW).str.strip_suffix("\r"))
        .with_columns(pl.col(RAW).str.split(",").alias("_parts"))
    )


def line_checks(width: int) -> list[pl.Expr]:
    """Reasons a whole line is unusable: empty, invalid UTF-8, fewer fields than needed."""
    parts = pl.col("_parts")
    return [
        pl.when(pl.col(RAW) == "").then(pl.lit("empty line")),
        pl.when(pl.col(RAW).str.contains("\ufffd", literal=True)).then(pl.lit("invalid UTF-8")),
        pl.when(parts.list.len() < width).then(
            pl.format(f"expected at least {width} fields, found {{}}", parts.list.len())
        ),
    ]


def number_checks(
    name: str, text: pl.Expr, *, required: bool, whole: bool, limit: float | None = None
) -> list[pl.Expr]:
    """Reasons a decimal field (``32.0``, ``1e3``; empty is missing) is unusable: missing
    when ``required``, not a finite number, negative, not whole when ``whole`` (``4.0``
    is whole: the GenTD26 README types its counts as floats), at or above ``limit``.
    """
    t = text.str.strip_chars()
    missing = text.is_null() | (t == "")
    value = t.cast(pl.Float64, strict=False)
    checks: list[pl.Expr] = []
    if required:
        checks.append(pl.when(missing).then(pl.lit(f"{name} is missing")))
    checks += [
        pl.when(~missing & (value.is_null() | ~value.is_finite())).then(
            pl.format(f"{name} {{}} is not a number", quoted(text))
        ),
        pl.when(value < 0).then(pl.format(f"{name} {{}} is negative", t)),
    ]
    if whole:
        checks.append(
            pl.when(value != value.floor()).then(pl.format(f"{name} {{}} is not whole", t))
        )
    if limit is not None:
        checks.append(pl.when(value >= limit).then(pl.format(f"{name} {{}} is out of range", t)))
    return checks


def as_number(text: pl.Expr) -> pl.Expr:
    """A checked decimal field as Float64 (null when empty)."""
    return text.str.strip_chars().cast(pl.Float64, strict=False)


def first_reason(reasons: list[pl.Expr]) -> pl.Expr:
    """The first non-null reason of ``reasons`` (null for a good row)."""
    return pl.coalesce(reasons)


def quoted(text: pl.Expr) -> pl.Expr:
    """``'text'`` for a reason (the value as the file wrote it)."""
    return pl.lit("'") + text + pl.lit("'")


def count_checks(name: str, text: pl.Expr, *, tokens: bool = True) -> list[pl.Expr]:
    """Reasons a whole-number field (as text, null when missing) is unusable: missing,
    not a whole number, negative, or (``tokens``: a token count) beyond
    :data:`MAX_TOKENS`.
    """
    value = text.str.strip_chars().cast(pl.Int64, strict=False)
    checks: list[pl.Expr] = [
        pl.when(text.is_null() | (text.str.strip_chars() == "")).then(pl.lit(f"{name} is missing")),
        pl.when(~text.str.strip_chars().str.contains(INT_TEXT) | value.is_null()).then(
            pl.format(f"{name} {{}} is not a whole number", quoted(text))
        ),
        pl.when(value < 0).then(pl.format(f"{name} {{}} is negative", value)),
    ]
    if tokens:
        checks.append(
            pl.when(value > MAX_TOKENS).then(
                pl.format(f"{name} {{}} is out of range (> 2^40 tokens)", value)
            )
        )
    return checks


def as_count(text: pl.Expr) -> pl.Expr:
    """A checked count field as Int64."""
    return text.str.strip_chars().cast(pl.Int64, strict=False)


def lineage(info: FileInfo, header_lines: int) -> list[pl.Expr]:
    """``request_id``, ``file``, ``line`` and ``file_sha256`` of rows with ``_line``."""
    return [
        (pl.col(LINE) - header_lines).alias("request_id"),
        pl.lit(info.path.name).alias("file"),
        pl.col(LINE).alias("line"),
        pl.lit(info.sha256).alias("file_sha256"),
    ]


def with_raw(info: FileInfo, bad: pl.DataFrame) -> pl.DataFrame:
    """``bad`` (``_line``, ``_reason``) with each line's raw text, read again by line
    number: the parse drops the raw text, so good rows (nearly all) never keep a copy.
    """
    if bad.is_empty():
        return bad.with_columns(pl.lit(None, dtype=pl.String).alias(RAW))
    lines = (
        scan_lines(info)
        .filter(pl.col(LINE).is_in(bad[LINE].implode()))
        .with_columns(pl.col(RAW).str.strip_suffix("\r"))
    )
    return bad.join(lines.collect(), on=LINE, how="left", maintain_order="left")


def requests_batch(
    source: str,
    dataset: str,
    info: FileInfo,
    parsed: pl.LazyFrame | pl.DataFrame,
    rows: pl.LazyFrame | pl.DataFrame,
    metadata: dict[str, str],
    *,
    sort: bool = True,
) -> Batch:
    """The ``requests`` batch of one file: its canonical rows and, as quarantine rows,
    the lines of ``parsed`` that failed a check (``_reason`` set; ``_raw`` kept).
    """
    bad = quarantine_rows(
        parsed.lazy().filter(pl.col(REASON).is_not_null()),
        source=source,
        dataset=dataset,
        cluster=None,
        table="requests",
        file=info.path,
    )
    return Batch("requests", dataset, info, rows, bad, metadata=metadata, sort=sort)
