"""Writing result frames: table / csv / json / parquet, to stdout or (atomically) a file."""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path

import polars as pl

from gpu_trace.cli._boundary import err
from gpu_trace.errors import GpuTraceError


class Format(StrEnum):
    table = "table"
    csv = "csv"
    json = "json"
    parquet = "parquet"


def flat(frame: pl.DataFrame) -> pl.DataFrame:
    """CSV cannot hold nested values: list columns become ``[a, b]`` text and struct
    columns JSON text."""
    exprs = []
    for name, dtype in frame.schema.items():
        if isinstance(dtype, pl.List | pl.Array):
            inner = pl.col(name).cast(pl.List(dtype.inner)).list.eval(pl.element().cast(pl.String))
            exprs.append(pl.format("[{}]", inner.list.join(", ")).alias(name))
        elif isinstance(dtype, pl.Struct):
            exprs.append(pl.col(name).struct.json_encode().alias(name))
    return frame.with_columns(exprs) if exprs else frame


def emit(frame: pl.DataFrame, fmt: Format, output: Path | None = None, max_rows: int = 100) -> None:
    """Write ``frame`` in ``fmt`` to ``output`` (temp file + rename) or to stdout."""
    if fmt is Format.parquet and output is None:
        raise GpuTraceError("--format parquet needs --output FILE")
    if fmt is Format.csv:
        frame = flat(frame)
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        tmp = output.with_name(f".{output.name}.tmp")
        if fmt is Format.parquet:
            frame.write_parquet(tmp, compression="zstd")
        elif fmt is Format.json:
            frame.write_json(tmp)
        elif fmt is Format.csv:
            frame.write_csv(tmp)
        else:
            tmp.write_text(table_text(frame, 0), encoding="utf-8")
        tmp.replace(output)
        err.print(f"wrote {frame.height} rows to {output}")
        return
    if fmt is Format.csv:
        sys.stdout.write(frame.write_csv())
    elif fmt is Format.json:
        sys.stdout.write(frame.write_json() + "\n")
    else:
        sys.stdout.write(table_text(frame, max_rows))
        sys.stdout.flush()
        if max_rows and frame.height > max_rows:
            err.print(f"showing {max_rows} of {frame.height} rows (use --max-rows 0 for all)")


def table_text(frame: pl.DataFrame, max_rows: int) -> str:
    """A Markdown-style text table; floats rounded for reading (csv/json keep full precision)."""
    shown = frame.head(max_rows) if max_rows else frame
    shown = shown.with_columns(pl.selectors.float().round(4))
    with pl.Config(
        tbl_rows=-1,
        tbl_cols=-1,
        tbl_width_chars=10_000,
        fmt_str_lengths=200,
        tbl_hide_dataframe_shape=True,
        tbl_formatting="ASCII_MARKDOWN",
        tbl_hide_column_data_types=True,
    ):
        return str(shown) + "\n"
