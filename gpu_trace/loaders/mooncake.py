"""Mooncake FAST'25 request traces (kvcache-ai/Mooncake, ``FAST25-release/traces``) ->
``requests`` and ``request_blocks``.

Format (the release's README, "Trace Format"): JSON lines, one request per line,
``{"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46,
...]}``: ``timestamp`` the arrival in milliseconds relative to the trace's start,
``input_length`` / ``output_length`` the input and output tokens, ``hash_ids`` the
remapped prefix block hashes, **512 tokens per block**; identical ids are reusable
prefix KV-cache blocks. Files: ``conversation_trace.jsonl``, ``toolagent_trace.jsonl``,
``synthetic_trace.jsonl`` (and the arXiv ``mooncake_trace.jsonl``); the dataset is the
name before ``_trace`` (``conversation``, ``toolagent``, ``synthetic``, ``mooncake``),
which is also the service.

Decisions on points the format leaves open:

- **Time basis.** The timestamps are offsets, not instants: ``time_basis`` is
  ``relative`` and ``arrival_time`` is 1970-01-01T00:00:00Z + timestamp ms (differences
  exact, dates meaningless), ``source_tz`` null, ``arrival_raw`` the number as written
  with ``arrival_raw_unit`` ``ms_since_start``.
- **Blocks.** Each id of ``hash_ids`` is one ``request_blocks`` row (position, hash,
  ``block_tokens`` 512); ``requests.prefix_blocks`` is their count. The release holds
  ``len(hash_ids) = ceil(input_length / 512)`` on every line; a line where it does not
  is kept (the README does not promise it) and counted in the Parquet metadata
  (``block_count_mismatch_rows``). ``request_blocks`` reconciles as its own table:
  records read = the ids listed by the accepted lines (a rejected line is one
  quarantined ``requests`` record, its ids are not read).
- **Checks.** A line must be a JSON object (malformed JSON, an empty line, an array are
  quarantined with the reason); ``timestamp``, ``input_length`` and ``output_length``
  must be present, whole (``1.5`` and ``1.0`` are not guessed) and not negative, the
  timestamp below 2100 as an offset; ``hash_ids`` must be an array of whole numbers
  (an empty array is a request with no full block listed). Other keys are ignored.

Parsing is one polars JSON decode of the file's lines; when it fails (a malformed line
somewhere) the lines are split in halves until the failing ones are isolated, so
finding k bad lines costs about k log n decodes, never a Python loop over good lines.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from gpu_trace.errors import InputError
from gpu_trace.loaders.base import Batch
from gpu_trace.loaders.requests_common import (
    INT_TEXT,
    as_count,
    count_checks,
    first_reason,
    lineage,
    requests_batch,
)
from gpu_trace.loaders.textfile import (
    LINE,
    RAW,
    REASON,
    FileInfo,
    file_info,
    scan_lines,
)
from gpu_trace.loaders.units import TIME_MAX_S
from gpu_trace.plugins import LoaderPlugin
from gpu_trace.store.parquet import slug

SOURCE = "mooncake"
BLOCK_TOKENS = 512
"""Tokens per prefix block (README: "The block size is 512 tokens")."""
FIELDS = ("timestamp", "input_length", "output_length")
RECORD = pl.Struct(
    {
        "timestamp": pl.String(),
        "input_length": pl.String(),
        "output_length": pl.String(),
        "hash_ids": pl.List(pl.String()),
    }
)
"""Fields decoded as text, so that ``1.5`` stays ``1.5`` (a numeric decode truncates it)
and every value is checked as written."""
SMALL = 256
"""Below this many lines, a failing slice is checked line by line."""
_OBJECT = r"^\s*\{"
_HASH_ARRAY = r"\"hash_ids\"\s*:\s*\["


def dataset_of(path: Path) -> str:
    """``conversation_trace.jsonl`` -> ``conversation``."""
    name = slug(path.stem)
    return name.removesuffix("_trace") or name


def inputs(path: Path) -> list[Path]:
    """The JSONL file given, or every ``*.jsonl`` directly in the folder given."""
    if path.is_file():
        return [path]
    found = sorted(p for p in path.glob("*.jsonl") if p.is_file())
    if not found:
        raise InputError(path, "no Mooncake trace here (expected *_trace.jsonl files)")
    return found


def _decode(raw: pl.Series) -> pl.DataFrame:
    """``raw`` JSON-decoded as :data:`RECORD`, one row per line (raises on a bad line)."""
    return raw.to_frame(RAW).select(pl.col(RAW).str.json_decode(RECORD).alias("_rec"))


def _bad_lines(raw: pl.Series, offset: int, out: dict[int, str]) -> None:
    """Find the lines of ``raw`` (0-based from ``offset``) the decoder refuses, with a
    reason, by halving: a slice that decodes is good as a whole.
    """
    try:
        _decode(raw)
    except pl.exceptions.PolarsError:
        if raw.len() <= SMALL:
            _small(raw.to_list(), offset, out)
            return
        half = raw.len() // 2
        _bad_lines(raw.slice(0, half), offset, out)
        _bad_lines(raw.slice(half), offset + half, out)


def _small(texts: list[str | None], offset: int, out: dict[int, str]) -> None:
    """Check the lines of a small failing slice: Python's JSON reader names each syntax
    error; the lines it accepts are decoded together, and one by one only if the decoder
    still refuses one of them (a value of the wrong JSON type).
    """
    valid: list[int] = []
    for i, text in enumerate(texts):
        try:
            json.loads(text or "")
        except ValueError as err:
            out[offset + i] = f"malformed JSON: {err}"
        else:
            valid.append(i)
    try:
        _decode(pl.Series([texts[i] for i in valid], dtype=pl.String()))
    except pl.exceptions.PolarsError:
        for i in valid:
            try:
                _decode(pl.Series([texts[i]], dtype=pl.String()))
            except pl.exceptions.PolarsError:
                out[offset + i] = "not a request object (a value has the wrong JSON type)"


def decode(lines: pl.DataFrame) -> pl.DataFrame:
    """``lines`` (``_line``, ``_raw``) with ``_rec`` decoded and ``_reason`` set for the
    lines that are not JSON objects of the right shape (their ``_rec`` null).
    """
    shaped = lines.with_columns(
        pl.when(pl.col(RAW).str.strip_chars() == "")
        .then(pl.lit("empty line"))
        .when(pl.col(RAW).str.contains("\ufffd", literal=True))
        .then(pl.lit("invalid UTF-8"))
        .when(~pl.col(RAW).str.contains(_OBJECT))
        .then(pl.lit("not a JSON object"))
        .alias(REASON)
    )
    candidates = shaped.filter(pl.col(REASON).is_null())
    bad: dict[int, str] = {}
    _bad_lines(candidates[RAW], 0, bad)
    if bad:
        marks = pl.DataFrame(
            {
                LINE: candidates[LINE].gather(list(bad)),
                "_json": list(bad.values()),
            },
            schema={LINE: pl.Int64, "_json": pl.String},
        )
        shaped = shaped.join(marks, on=LINE, how="left", maintain_order="left").with_columns(
            pl.coalesce(REASON, "_json").alias(REASON)
        )
        shaped = shaped.drop("_json")
    ok = shaped.filter(pl.col(REASON).is_null())
    records = _decode(ok[RAW]).with_columns(ok[LINE])
    return shaped.join(records, on=LINE, how="left", maintain_order="left")


def _checks() -> list[pl.Expr]:
    rec = pl.col("_rec")
    reasons: list[pl.Expr] = [pl.col(REASON)]
    for name in FIELDS:
        reasons += count_checks(name, rec.struct.field(name), tokens=name != "timestamp")
    stamp = as_count(rec.struct.field("timestamp"))
    reasons.append(
        pl.when(stamp >= TIME_MAX_S * 1000).then(
            pl.format(
                f"timestamp {{}} is an offset out of range (>= {TIME_MAX_S * 1000:.0f} ms)", stamp
            )
        )
    )
    ids = rec.struct.field("hash_ids")
    reasons += [
        pl.when(ids.is_null() | ~pl.col(RAW).str.contains(_HASH_ARRAY)).then(
            pl.lit("hash_ids is missing or not an array")
        ),
        pl.when(
            ids.list.eval(pl.element().is_null() | ~pl.element().str.contains(INT_TEXT)).list.any()
        ).then(pl.lit("hash_ids holds a value that is not a whole number")),
        pl.when(ids.list.eval(pl.element().cast(pl.Int64, strict=False).is_null()).list.any()).then(
            pl.lit("hash_ids holds a value out of the int64 range")
        ),
    ]
    return reasons


def parse(info: FileInfo) -> pl.DataFrame:
    """Every line of the file decoded and checked (``_reason`` null for good ones)."""
    lines = scan_lines(info).with_columns(pl.col(RAW).str.strip_suffix("\r")).collect()
    rec = pl.col("_rec")
    return (
        decode(lines)
        .lazy()
        .with_columns(first_reason(_checks()).alias(REASON))
        .with_columns(
            rec.struct.field("timestamp").str.strip_chars().alias("_stamp"),
            as_count(rec.struct.field("timestamp")).alias("_ms"),
            as_count(rec.struct.field("input_length")).alias("_input"),
            as_count(rec.struct.field("output_length")).alias("_output"),
            rec.struct.field("hash_ids").alias("_ids"),
        )
        .drop("_rec")
        .collect()
    )


def _offset(ms: pl.Expr) -> pl.Expr:
    return pl.from_epoch(ms * 1000, time_unit="us").dt.replace_time_zone("UTC")


class MooncakeLoader:
    """Loader for the Mooncake FAST'25 JSONL request traces."""

    name = SOURCE
    version = "1"

    def batches(self, path: Path, **_: Any) -> Iterator[Batch]:
        """Yield a ``requests`` and a ``request_blocks`` batch per trace file."""
        for file in inputs(path):
            info = file_info(file, header_lines=0)
            parsed = parse(info)
            dataset = dataset_of(file)
            good = parsed.filter(pl.col(REASON).is_null()).with_columns(
                pl.col("_ids").list.len().alias("_blocks")
            )
            mismatch = good.select(
                (pl.col("_blocks") != (pl.col("_input") + BLOCK_TOKENS - 1) // BLOCK_TOKENS).sum()
            ).item()
            rows = good.lazy().select(
                pl.lit(SOURCE).alias("source"),
                pl.lit(dataset).alias("dataset"),
                pl.lit(dataset).alias("service"),
                _offset(pl.col("_ms")).alias("arrival_time"),
                pl.col("_stamp").alias("arrival_raw"),
                pl.lit("ms_since_start").alias("arrival_raw_unit"),
                pl.col("_input").alias("input_tokens"),
                pl.col("_output").alias("output_tokens"),
                pl.col("_blocks").cast(pl.Int32).alias("prefix_blocks"),
                pl.lit("unknown").alias("status"),
                *lineage(info, 0),
                pl.lit(None, dtype=pl.String).alias("source_tz"),
                pl.lit("relative").alias("time_basis"),
            )
            ordered = good.select(pl.col("_ms").is_sorted()).item()
            meta = {
                "time_basis": "relative",
                "block_tokens": str(BLOCK_TOKENS),
                "block_count_mismatch_rows": str(mismatch),
            }
            yield requests_batch(
                SOURCE,
                dataset,
                info,
                parsed.select(LINE, RAW, REASON),
                rows,
                meta,
                sort=not ordered,
            )
            blocks = (
                good.lazy()
                .select(pl.col(LINE).alias("request_id"), pl.col("_ids"))
                .with_columns(
                    pl.int_ranges(pl.col("_ids").list.len(), dtype=pl.Int32).alias("position")
                )
                .explode("_ids", "position")
                .drop_nulls("_ids")
                .select(
                    pl.lit(SOURCE).alias("source"),
                    pl.lit(dataset).alias("dataset"),
                    pl.col("request_id"),
                    pl.col("position"),
                    pl.col("_ids").cast(pl.Int64).alias("block_hash"),
                    pl.lit(BLOCK_TOKENS, dtype=pl.Int32).alias("block_tokens"),
                )
            )
            listed = int(good["_blocks"].sum() or 0)
            yield Batch(
                "request_blocks",
                dataset,
                info,
                blocks,
                None,
                rows_read=listed,
                metadata={"block_tokens": str(BLOCK_TOKENS)},
                sort=False,
            )


@dataclass(frozen=True)
class MooncakeOptions:
    """`gpu-trace ingest mooncake` takes no options (the format fixes its time basis)."""


PLUGIN = LoaderPlugin(
    name=SOURCE,
    loader=MooncakeLoader,
    help="Mooncake FAST'25 JSONL traces (timestamp, input_length, output_length, hash_ids) -> requests, request_blocks (512-token prefix blocks).\n\nPATH: one *_trace.jsonl or a folder of them.",
    options=MooncakeOptions,
)
