"""Writing result frames: table / csv / json / parquet, to stdout or (atomically) a file."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import polars as pl
import typer
from polars.datatypes import DataTypeClass

from gpu_trace.cli._boundary import err
from gpu_trace.display import WIDE_ONE_ROW, readable, transposed
from gpu_trace.errors import UsageError
from gpu_trace.store.atomic import check_target


class Format(StrEnum):
    """The ``--format`` of a command's result (``table`` is for reading, the rest for tools)."""

    table = "table"
    csv = "csv"
    json = "json"
    parquet = "parquet"


FormatOpt = Annotated[Format, typer.Option("--format", "-f", help="Output format.")]
"""``--format`` of every command that prints a result (declared once)."""


def flat(frame: pl.DataFrame) -> pl.DataFrame:
    """CSV cannot hold nested or binary values: list columns become ``[a, b]`` text
    (nested to any depth, nulls kept), struct and map columns JSON text, binary hex.
    """
    exprs = [
        _text(pl.col(name), dtype).alias(name)
        for name, dtype in frame.schema.items()
        if _nested(dtype)
    ]
    return frame.with_columns(exprs) if exprs else frame


def _nested(dtype: pl.DataType) -> bool:
    return isinstance(dtype, pl.List | pl.Array | pl.Struct | pl.Map | pl.Binary)


def _text(expr: pl.Expr, dtype: pl.DataType | DataTypeClass) -> pl.Expr:
    """A vectorized text form of ``expr``; recursion follows the type, not the rows."""
    if isinstance(dtype, pl.List | pl.Array):
        item = _text(pl.element(), dtype.inner).fill_null(pl.lit("null"))
        inner = expr.cast(pl.List(dtype.inner)).list.eval(item)
        return pl.format("[{}]", inner.list.join(", "))
    if isinstance(dtype, pl.Struct):
        return expr.struct.json_encode()
    if isinstance(dtype, pl.Map) and dtype.key != pl.String:  # JSON keys must be text
        entries = pl.List(pl.Struct({"key": dtype.key, "value": dtype.value}))
        return _text(expr.map.entries(), entries)
    if isinstance(dtype, pl.Map):  # JSON object text: encode {"v": map}, keep the map
        wrapped = pl.struct(expr.alias("v")).struct.json_encode()
        text = wrapped.str.strip_prefix('{"v":').str.strip_suffix("}")
        return pl.when(expr.is_null()).then(pl.lit(None, pl.String)).otherwise(text)
    if isinstance(dtype, pl.Binary):
        return expr.bin.encode("hex")
    return expr.cast(pl.String)


def _json_ready(frame: pl.DataFrame) -> pl.DataFrame:
    """Polars cannot write binary (it panics) or maps with non-text keys to JSON:
    top-level binary becomes hex, such maps a list of key/value objects.
    """
    exprs = []
    for name, dtype in frame.schema.items():
        if isinstance(dtype, pl.Binary):
            exprs.append(pl.col(name).bin.encode("hex"))
        elif isinstance(dtype, pl.Map) and dtype.key != pl.String:
            exprs.append(pl.col(name).map.entries())
    return frame.with_columns(exprs) if exprs else frame


def emit(
    frame: pl.DataFrame,
    fmt: Format,
    output: Path | None = None,
    max_rows: int = 100,
    units: Mapping[str, str] | None = None,
) -> None:
    """Write ``frame`` in ``fmt`` to ``output`` (temp file + rename) or to stdout;
    ``units`` (column -> declared unit, :mod:`gpu_trace.column_units`) only shape the
    ``table`` view.
    """
    if fmt is Format.parquet and output is None:
        msg = "--format parquet needs --output FILE"
        raise UsageError(msg)
    if fmt is Format.csv:
        frame = flat(frame)
    elif fmt is Format.json:
        frame = _json_ready(frame)
    if output is not None:
        _write(frame, fmt, output, units)
        return
    if fmt is Format.csv:
        sys.stdout.write(frame.write_csv())
    elif fmt is Format.json:
        sys.stdout.write(frame.write_json() + "\n")
    else:
        sys.stdout.write(table_text(frame, max_rows, units))
        sys.stdout.flush()
        if max_rows and frame.height > max_rows:
            err.print(f"showing {max_rows} of {frame.height} rows (use --max-rows 0 for all)")


def _write(
    frame: pl.DataFrame, fmt: Format, output: Path, units: Mapping[str, str] | None = None
) -> None:
    """``frame`` in ``fmt`` to ``output``: a temp file next to it, then a rename, so a
    reader never sees half a file.
    """
    check_output(output)
    tmp = output.with_name(f".{output.name}.tmp")
    if fmt is Format.parquet:
        frame.write_parquet(tmp, compression="zstd")
    elif fmt is Format.json:
        frame.write_json(tmp)
    elif fmt is Format.csv:
        frame.write_csv(tmp)
    else:
        tmp.write_text(table_text(frame, 0, units), encoding="utf-8")
    tmp.replace(output)
    err.print(f"wrote {frame.height} rows to {output}", markup=False)


def check_output(output: Path | None) -> None:
    """Refuse an ``--output`` whose folder does not exist (a typo in the path must not
    create folders) or that is a folder; checked before the query runs.
    """
    if output is not None:
        check_target(output, "--output")


def table_text(frame: pl.DataFrame, max_rows: int, units: Mapping[str, str] | None = None) -> str:
    """A Markdown-style text table for reading (:mod:`gpu_trace.display`: fixed
    decimals, durations and sizes spelled out from the columns' declared units, a wide
    single row turned into ``metric | value`` lines); csv / json / parquet keep the raw
    values.
    """
    shown = readable(frame.head(max_rows) if max_rows else frame, units)
    if shown.height == 1 and shown.width > WIDE_ONE_ROW:
        shown = transposed(flat(shown))
    with pl.Config(
        tbl_rows=-1,
        tbl_cols=-1,
        tbl_width_chars=10_000,
        fmt_str_lengths=200,
        tbl_hide_dataframe_shape=True,
        tbl_formatting="ASCII_MARKDOWN",
        tbl_hide_column_data_types=True,
        fmt_float="full",
    ):
        return str(shown) + "\n"
