"""Azure LLM inference traces (Azure/AzurePublicDataset): 2023 (Splitwise, ISCA 2024)
and the 2024 week (DynamoLLM, HPCA 2025) -> ``requests``.

Format (the upstream READMEs ``AzureLLMInferenceDataset2023.md`` and
``AzureLLMInferenceDataset2024.md``, "Schema"): a CSV with the header
``TIMESTAMP,ContextTokens,GeneratedTokens``, one row per request: ``TIMESTAMP`` the
invocation time (written ``2023-11-16 18:17:03.9799600``: 7 fractional digits),
``ContextTokens`` the prompt tokens, ``GeneratedTokens`` the generated tokens. The
released files end their lines with CRLF; a LF file reads the same. The files are
``AzureLLMInferenceTrace_{code,conv}.csv`` (2023) and ``..._{code,conv}_1week.csv``
(2024); the dataset is the name after ``AzureLLMInferenceTrace_`` (``code``, ``conv``,
``code_1week``, ...), the service ``code`` or ``conversation``.

Decisions on points the format leaves open:

- **Time zone.** The 2023 timestamps are naive and the README names no zone; they are
  read as UTC unless ``--tz`` names another IANA zone, recorded in ``source_tz``. A
  local time that does not exist in that zone (a DST gap) is quarantined; an ambiguous
  one takes the earlier instant. A time written with a UTC offset (``+00:00``, ``Z``;
  users of the 2024 week's files report such values, which pandas reads with
  ``format="mixed"``) is that instant whatever ``--tz`` says.
- **Precision.** ``arrival_time`` is microseconds (the store's unit): the 7th
  fractional digit (100 ns) is cut, and kept in ``arrival_raw`` as written.
- **Checks.** Every field is required; token counts must be whole non-negative
  numbers (``10.0`` is not guessed); a time must parse (``YYYY-MM-DD HH:MM:SS`` with an
  optional fraction) and lie in 1970 .. 2099. A row failing one is quarantined with
  the first reason, its line and raw text; rows read = written + quarantined.
- **Columns by name.** The three columns are found by their header names (extra
  columns are ignored); a file lacking one is refused with one ``error:`` line.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from gpu_trace.errors import InputError
from gpu_trace.loaders.base import Batch
from gpu_trace.loaders.requests_common import (
    as_count,
    count_checks,
    first_reason,
    lineage,
    quoted,
    requests_batch,
    with_raw,
)
from gpu_trace.loaders.textfile import LINE, RAW, REASON, file_info, read_header, scan_lines
from gpu_trace.loaders.units import TIME_MAX, TIME_MIN
from gpu_trace.loaders.zones import parse_tz
from gpu_trace.plugins import LoaderPlugin, option
from gpu_trace.store.parquet import slug

SOURCE = "azure-llm"
DEFAULT_TZ = "UTC"
COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
PREFIX = "azurellminferencetrace_"
SERVICES = {"code": "code", "conv": "conversation"}
"""File kind -> service: the trace's two services, coding and conversation (Splitwise)."""
TIME_FORMAT = "%Y-%m-%d %H:%M:%S%.f"
_TIME_TEXT = r"^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})?$"
_SPLIT = r"^(.*?)(Z|[+-]\d{2}:\d{2})?$"
"""The time and its optional UTC offset (``2024-05-10 00:00:00.009930+00:00``)."""


def dataset_of(path: Path) -> str:
    """``AzureLLMInferenceTrace_code_1week.csv`` -> ``code_1week``."""
    name = slug(path.stem)
    return name.removeprefix(PREFIX) or name


def service_of(dataset: str) -> str | None:
    """The service a dataset's name says (``code...`` / ``conv...``), else None."""
    head = dataset.split("_", 1)[0]
    return SERVICES.get(head)


def inputs(path: Path) -> list[Path]:
    """The CSV given, or every ``*.csv`` directly in the folder given."""
    if path.is_file():
        return [path]
    found = sorted(p for p in path.glob("*.csv") if p.is_file())
    if not found:
        raise InputError(
            path, "no Azure LLM trace CSV here (expected AzureLLMInferenceTrace_*.csv)"
        )
    return found


def _positions(path: Path) -> dict[str, int]:
    names = [n.strip() for n in read_header(path).split(",")]
    missing = [c for c in COLUMNS if c not in names]
    if missing:
        raise InputError(
            path,
            f"header lacks column(s) {', '.join(missing)}; expected {','.join(COLUMNS)}",
            "line 1",
        )
    return {c: names.index(c) for c in COLUMNS}


def parse(path: Path, tz: str) -> tuple[Any, pl.LazyFrame]:
    """The file's info and every data line typed and checked (``_reason`` null when good)."""
    at = _positions(path)
    info = file_info(path, header_lines=1)
    width = max(at.values()) + 1
    parts = pl.col("_parts")

    def field(name: str) -> pl.Expr:
        return parts.list.get(at[name], null_on_oob=True)

    stamp = field("TIMESTAMP").str.strip_chars()
    base = stamp.str.extract(_SPLIT, 1).str.replace("T", " ", literal=True)
    offset = stamp.str.extract(_SPLIT, 2)
    local = base.str.strptime(pl.Datetime("us"), TIME_FORMAT, strict=False)
    minutes = (
        pl.when(offset == "Z")
        .then(pl.lit(0, dtype=pl.Int64))
        .otherwise(
            (offset.str.slice(1, 2).cast(pl.Int64, strict=False) * 60
             + offset.str.slice(-2).cast(pl.Int64, strict=False))
            * pl.when(offset.str.starts_with("-")).then(-1).otherwise(1)
        )
    )  # fmt: skip
    utc = (
        pl.when(offset.is_null())
        .then(local.dt.replace_time_zone(tz, ambiguous="earliest", non_existent="null"))
        .otherwise(
            (local - pl.duration(minutes=minutes))
            .dt.replace_time_zone("UTC")
            .dt.convert_time_zone(tz)
        )
    )
    reasons = [
        pl.when(pl.col(RAW) == "").then(pl.lit("empty line")),
        pl.when(pl.col(RAW).str.contains("\ufffd", literal=True)).then(pl.lit("invalid UTF-8")),
        pl.when(parts.list.len() < width).then(
            pl.format(f"expected at least {width} fields, found {{}}", parts.list.len())
        ),
        pl.when(stamp.is_null() | (stamp == "")).then(pl.lit("TIMESTAMP is missing")),
        pl.when(~stamp.str.contains(_TIME_TEXT) | local.is_null()).then(
            pl.format(
                "TIMESTAMP {} is not a time (YYYY-MM-DD HH:MM:SS[.fraction][+HH:MM])",
                quoted(field("TIMESTAMP")),
            )
        ),
        pl.when((local < TIME_MIN) | (local >= TIME_MAX)).then(
            pl.format("TIMESTAMP {} is a time out of range (1970 .. 2099)", quoted(stamp))
        ),
        pl.when(utc.is_null()).then(pl.format(f"TIMESTAMP {{}} does not exist in {tz}", stamp)),
        *count_checks("ContextTokens", field("ContextTokens")),
        *count_checks("GeneratedTokens", field("GeneratedTokens")),
    ]
    parsed = (
        scan_lines(info, skip=1)
        .with_columns(pl.col(RAW).str.strip_suffix("\r"))
        .with_columns(pl.col(RAW).str.split(",").alias("_parts"))
        .with_columns(
            first_reason(reasons).alias(REASON),
            stamp.alias("_stamp"),
            utc.dt.convert_time_zone("UTC").alias("_arrival"),
            as_count(field("ContextTokens")).alias("_input"),
            as_count(field("GeneratedTokens")).alias("_output"),
        )
        .drop("_parts")
    )
    return info, parsed


class AzureLlmLoader:
    """Loader for the Azure LLM inference trace CSVs (2023 and the 2024 week)."""

    name = SOURCE
    version = "1"

    def batches(self, path: Path, *, tz: str = DEFAULT_TZ, **_: Any) -> Iterator[Batch]:
        """Yield one ``requests`` batch per trace CSV, times read in ``tz``."""
        tz = parse_tz(tz)
        for file in inputs(path):
            info, parsed = parse(file, tz)
            frame = parsed.drop(RAW).collect()
            dataset = dataset_of(file)
            rows = (
                frame.lazy()
                .filter(pl.col(REASON).is_null())
                .select(
                    pl.lit(SOURCE).alias("source"),
                    pl.lit(dataset).alias("dataset"),
                    pl.lit(service_of(dataset), dtype=pl.String).alias("service"),
                    pl.col("_arrival").alias("arrival_time"),
                    pl.col("_stamp").alias("arrival_raw"),
                    pl.lit("local_datetime").alias("arrival_raw_unit"),
                    pl.col("_input").alias("input_tokens"),
                    pl.col("_output").alias("output_tokens"),
                    pl.lit("unknown").alias("status"),
                    *lineage(info, 1),
                    pl.lit(tz).alias("source_tz"),
                    pl.lit("absolute").alias("time_basis"),
                )
            )
            good = frame.filter(pl.col(REASON).is_null())
            ordered = good.select(pl.col("_arrival").is_sorted()).item()
            yield requests_batch(
                SOURCE,
                dataset,
                info,
                with_raw(info, frame.filter(pl.col(REASON).is_not_null()).select(LINE, REASON)),
                rows,
                {"time_basis": "absolute", "source_tz": tz},
                sort=not ordered,
            )


@dataclass(frozen=True)
class AzureLlmOptions:
    """`gpu-trace ingest azure-llm` options."""

    tz: str = option(
        DEFAULT_TZ,
        "IANA zone of the naive TIMESTAMP values (the README names none). Recorded in "
        "requests.source_tz.",
        parse=parse_tz,
    )


PLUGIN = LoaderPlugin(
    name=SOURCE,
    loader=AzureLlmLoader,
    help="Azure LLM inference traces (2023 code / conv, 2024 week): TIMESTAMP,ContextTokens,GeneratedTokens -> requests.\n\nPATH: one CSV or a folder of AzureLLMInferenceTrace_*.csv.",
    options=AzureLlmOptions,
)
