"""Numbers as a person reads them: ``--format table`` and the report's HTML tables.

csv / json / parquet keep the raw, exact values; this module is only the reading view:

- each column is shown in the form of its **declared unit**
  (:mod:`gpu_trace.column_units`: the producer's declaration, the canonical schemas,
  the common output names, looked up by the exact column name; then the naming
  convention's unit suffix of a plain identifier; never a unit found inside a computed
  name such as ``sum(gpus*run_s)/3600``): ``s`` as a duration (``2 h 03 min``), ``bytes`` / ``mib`` as a binary
  size (``1.5 TiB``), ``fraction`` (0-1) as a percentage (``22.9 %``, one decimal from
  the exact value), ``id`` as its digits; every other column, declared or not (a count,
  GPUs, GPU hours, a computed SQL expression), is a plain number;
- no scientific notation: floats get fixed decimals chosen per column from its largest
  magnitude (``1,234.5``, ``12.346``, ``0.0123``);
- thousands separators only where they cannot be misread: in numbers of five or more
  integer digits (``12,345``; a four-digit ``1,234`` could be read as 1.234 in a
  decimal-comma locale) and never in identifiers;
- a one-row result with many columns (``analyze summary`` of one cluster) is printed as
  a two-column ``metric | value`` table instead of a line 31 columns wide.

A producer whose column names are computed (``mem_used_bytes_samples``, a count, and
``mem_used_bytes_mean``, bytes) passes their units: ``readable(frame, units)``.

Everything is a polars expression over the column: no Python loop over rows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import polars as pl

from gpu_trace.column_units import known_unit

WIDE_ONE_ROW = 8
"""A one-row frame with more columns than this is printed transposed."""

_GROUP_FROM = 10_000
_SIZE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


ID_COLUMNS = frozenset(
    {"attempt", "attempts", "gpu_index", "pid", "seed", "exit_code", "exit_signal", "code"}
    | {"line", "record", "year", "port", "index", "idx", "hour", "weekday", "uid", "gid"}
    | {"job_id", "task_id", "pod_id", "node_id", "machine_id", "gpu_id", "run_id", "id"}
)
"""Integer columns that are identifiers or codes: digits as they are (``2026``, not
``2,026``). Exact names, as for units."""


def unit_of(name: str, units: Mapping[str, str] | None = None) -> str | None:
    """The declared unit of column ``name``: ``units`` (the producer's), else the
    schemas', the common output names' and the naming convention's
    (:func:`gpu_trace.column_units.known_unit`), else ``id`` for :data:`ID_COLUMNS`,
    else None (a plain number).
    """
    if units and name in units:
        return units[name]
    found = known_unit(name)
    if found is None and name in ID_COLUMNS:
        return "id"
    return found


def _group(digits: pl.Expr) -> pl.Expr:
    """``"1234567"`` -> ``"1,234,567"`` (digits only, no sign)."""
    rev = digits.str.reverse().str.replace_all(r"(\d{3})", "${1},").str.strip_suffix(",")
    return rev.str.reverse()


def fixed(expr: pl.Expr, decimals: int, group: bool = True) -> pl.Expr:
    """A float/int expression as fixed-decimal text: never scientific notation, digit
    groups from five integer digits, ``inf`` / ``nan`` spelled out, null kept null.
    """
    x = expr.cast(pl.Float64)
    scale = 10**decimals
    scaled = (x.abs() * scale).round(0)
    fits = scaled < 9.0e18  # int64 digits; beyond, whole digits via Decimal (to 1e37)
    whole = (scaled // scale).cast(pl.Int64, strict=False)
    frac = (scaled % scale).cast(pl.Int64, strict=False)
    int_text = whole.cast(pl.String)
    if group:
        int_text = pl.when(whole >= _GROUP_FROM).then(_group(int_text)).otherwise(int_text)
    body = (
        pl.concat_str(int_text, pl.lit("."), frac.cast(pl.String).str.zfill(decimals))
        if decimals
        else int_text
    )
    sign = pl.when((x < 0) & (scaled > 0)).then(pl.lit("-")).otherwise(pl.lit(""))
    return (
        pl.when(x.is_nan())
        .then(pl.lit("nan"))
        .when(x.is_infinite())
        .then(pl.when(x > 0).then(pl.lit("inf")).otherwise(pl.lit("-inf")))
        .when(fits)
        .then(pl.concat_str(sign, body))
        .otherwise(x.round(0).cast(pl.Decimal(38, 0), strict=False).cast(pl.String))
    )


def decimals_for(values: pl.Series) -> int:
    """Decimals for a float column: fewer for large magnitudes, none if all integral."""
    floats = values.cast(pl.Float64).drop_nulls()
    finite = floats.filter(floats.is_finite())
    if finite.is_empty():
        return 2
    if (finite.round(0) == finite).all():
        return 0
    top = float(finite.abs().max())  # type: ignore[arg-type]
    if top >= 1000:
        return 1
    if top >= 1:
        return 2
    if top == 0:
        return 2
    return min(12, max(3, 2 - math.floor(math.log10(top))))


def duration(expr: pl.Expr) -> pl.Expr:
    """Seconds as ``12.3 s``, ``4 min 05 s``, ``2 h 03 min``, ``3 d 04 h``."""
    x = expr.cast(pl.Float64)
    a = x.abs()
    sign = pl.when(x < 0).then(pl.lit("-")).otherwise(pl.lit(""))
    whole = a.round(0).cast(pl.Int64, strict=False)

    def two(v: pl.Expr) -> pl.Expr:
        return v.cast(pl.String).str.zfill(2)

    mins = whole // 60
    hours = whole // 3600
    days = whole // 86400
    text = (
        pl.when(a < 60)
        .then(pl.concat_str(fixed(a, 1, group=False), pl.lit(" s")))
        .when(a < 3600)
        .then(pl.concat_str(mins.cast(pl.String), pl.lit(" min "), two(whole % 60), pl.lit(" s")))
        .when(a < 86400)
        .then(
            pl.concat_str(
                hours.cast(pl.String), pl.lit(" h "), two((whole // 60) % 60), pl.lit(" min")
            )
        )
        .otherwise(
            pl.concat_str(fixed(days, 0), pl.lit(" d "), two((whole // 3600) % 24), pl.lit(" h"))
        )
    )
    return (
        pl.when(x.is_nan() | x.is_infinite())
        .then(x.cast(pl.String))
        .otherwise(pl.concat_str(sign, text))
    )


def size(expr: pl.Expr, unit_bytes: int = 1) -> pl.Expr:
    """Bytes (or MiB with ``unit_bytes=2**20``) as ``512 B``, ``1.5 TiB`` (binary units)."""
    x = expr.cast(pl.Float64) * unit_bytes
    a = x.abs()
    power = (
        pl.when(a < 1024)
        .then(pl.lit(0))
        .otherwise(a.log(1024).floor().clip(0, len(_SIZE_UNITS) - 1))
        .cast(pl.Int64)
    )
    units = power.replace_strict(dict(enumerate(_SIZE_UNITS)), return_dtype=pl.String)
    number = pl.when(power == 0).then(fixed(x, 0)).otherwise(fixed(x / (1024.0**power), 1))
    return (
        pl.when(x.is_nan() | x.is_infinite())
        .then(x.cast(pl.String))
        .otherwise(pl.concat_str(number, pl.lit(" "), units))
    )


def percent(expr: pl.Expr) -> pl.Expr:
    """A fraction 0-1 as ``22.9 %`` (one decimal; ``0.0 %`` for tiny non-zero shares)."""
    return pl.concat_str(fixed(expr.cast(pl.Float64) * 100, 1, group=False), pl.lit(" %"))


def readable(frame: pl.DataFrame, units: Mapping[str, str] | None = None) -> pl.DataFrame:
    """Every numeric column as display text in the form of its declared unit (see the
    module docstring; ``units`` are the producer's, by exact column name); other columns
    unchanged. Booleans stay booleans.
    """
    exprs: list[pl.Expr] = []
    for name, dtype in frame.schema.items():
        if not dtype.is_numeric():
            continue
        col = pl.col(name)
        unit = unit_of(name, units)
        if unit == "s":
            exprs.append(duration(col).alias(name))
        elif unit == "bytes":
            exprs.append(size(col).alias(name))
        elif unit == "mib":
            exprs.append(size(col, 2**20).alias(name))
        elif unit == "fraction":
            exprs.append(percent(col).alias(name))
        elif unit == "id" and dtype.is_integer():
            exprs.append(col.cast(pl.String))
        elif dtype.is_integer():
            exprs.append(fixed(col, 0).alias(name))
        else:
            exprs.append(fixed(col, decimals_for(frame[name])).alias(name))
    return frame.with_columns(exprs) if exprs else frame


def transposed(frame: pl.DataFrame) -> pl.DataFrame:
    """A one-row frame as ``metric | value`` rows (values already display text, nested
    columns already flattened by the caller).
    """
    text = frame.with_columns(pl.all().cast(pl.String))
    return pl.DataFrame(
        {"metric": text.columns, "value": [text[c][0] for c in text.columns]},
        schema={"metric": pl.String, "value": pl.String},
    )


def duration_text(seconds: float) -> str:
    """One duration as text, the same way tables show it (``2 h 44 min``)."""
    text = pl.select(duration(pl.lit(float(seconds)))).item()
    return str(text)
