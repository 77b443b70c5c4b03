"""BurstGPT (HPMLL/BurstGPT, KDD'25): ChatGPT and GPT-4 request logs of an Azure
OpenAI service -> ``requests``.

Format (the repository README, "Schema" and "Data"): a CSV with a header naming
``Timestamp`` (request submission, seconds from 0:00:00 on the first day, "calibrated
to the local time zone"), ``Session ID`` (conversation id, conversation mode only),
``Elapsed time`` (seconds from submission to the complete response, all tokens: not
TTFT), ``Model`` (``ChatGPT``, ``GPT-4``), ``Request tokens``, ``Response tokens``,
``Total tokens`` (request + response) and ``Log Type`` (``Conversation log``, ``API
log``). ``Session ID`` and ``Elapsed time`` are new in release v1.2; older releases
have the other six columns only. Failed requests have ``Response tokens`` 0 (the
``BurstGPT_without_fails_*`` files drop them). The dataset is the file's stem
(``burstgpt_1``, ``burstgpt_without_fails_3``).

Decisions on points the format leaves open:

- **Time basis.** The timestamps are offsets from a midnight whose date is unpublished:
  ``time_basis`` is ``relative``, ``arrival_time`` is 1970-01-01T00:00:00Z + the
  offset (microseconds, rounded), ``source_tz`` null. Because the origin is local
  midnight, the time of day of ``arrival_time`` read in UTC is the service's local
  time of day (the Parquet metadata says so: ``time_of_day`` ``local``).
- **Status.** ``Response tokens`` 0 is ``failed`` (the README's failure marker), any
  other count ``completed``; ``raw_status`` is null (the file has no status column).
- **Latency.** ``Elapsed time`` is ``latency_s`` with ``latency_kind`` ``end_to_end``;
  empty (an older release, or a missing value) is null.
- **Checks.** ``Timestamp``, ``Model``, ``Request tokens`` and ``Response tokens`` are
  required; counts must be whole and not negative, times finite, not negative and
  below 2100 as offsets. ``Total tokens`` is not checked against the sum: rows where it
  differs are kept and counted (``total_tokens_mismatch_rows`` in the metadata).
  Columns are found by name; a file lacking a required one is one ``error:`` line.

**Speed.** The checks build a message per failing field, and polars builds it for every
row before choosing; so one regular expression (:func:`vouch`) first picks the lines
that pass every check by their form alone (plain digits, an ASCII model, enough
fields), and only the others go through the checks. That took the 10 M-row ingest's
parse from ~17 to ~10 CPU seconds (``bench serving_ingest_10m``).
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
    as_number,
    count_checks,
    first_reason,
    header_positions,
    line_checks,
    lineage,
    number_checks,
    requests_batch,
    split_lines,
    with_raw,
)
from gpu_trace.loaders.textfile import LINE, RAW, REASON, file_info
from gpu_trace.loaders.units import TIME_MAX_S
from gpu_trace.plugins import LoaderPlugin
from gpu_trace.store.parquet import slug

SOURCE = "burstgpt"
REQUIRED = ("Timestamp", "Model", "Request tokens", "Response tokens")
OPTIONAL = ("Session ID", "Elapsed time", "Total tokens", "Log Type")
"""v1.2 adds Session ID and Elapsed time; Total tokens and Log Type are in every
release but nothing here needs them."""


def inputs(path: Path) -> list[Path]:
    """The CSV given, or every ``*.csv`` directly in the folder given."""
    if path.is_file():
        return [path]
    found = sorted(p for p in path.glob("*.csv") if p.is_file())
    if not found:
        raise InputError(path, "no BurstGPT CSV here (expected BurstGPT_*.csv)")
    return found


def _text(at: dict[str, int], name: str) -> pl.Expr:
    """Field ``name`` as text; null when the file has no such column or the line is short."""
    if name not in at:
        return pl.lit(None, dtype=pl.String)
    return pl.col("_parts").list.get(at[name], null_on_oob=True)


def _empty_null(text: pl.Expr) -> pl.Expr:
    t = text.str.strip_chars()
    return pl.when(t == "").then(None).otherwise(t)


_NUMBER = r"[0-9]{1,9}(\.[0-9]{1,9})?"
"""A time offset every check accepts: not negative, finite, below 10^9 s (2001, under
the 2100 bound)."""
_PATTERNS = {
    "Timestamp": _NUMBER,
    "Model": r"[!-+\--~][ -+\--~]*",
    "Request tokens": r"[0-9]{1,12}",
    "Response tokens": r"[0-9]{1,12}",
    "Elapsed time": r"([0-9]{1,15}(\.[0-9]{1,15})?)?",
}
"""Per column, text that passes all of its checks (a count of at most 12 digits is
below 2^40; a Model starting with a printable ASCII character is not empty)."""
_ANY = r"[^,\x{FFFD}]*"


def vouch(at: dict[str, int], width: int) -> str:
    """A regular expression that only lines passing every check of :func:`read` match
    (enough fields, no U+FFFD, each checked field well formed): those lines skip the
    checks, whose messages are costly to build, and the rest (a bad line, or an odd
    good one such as a padded number) are checked one expression at a time as before.
    """
    by_index = {i: _PATTERNS.get(name, _ANY) for name, i in at.items()}
    fields = ",".join(by_index.get(i, _ANY) for i in range(width))
    return "^" + fields + r"(,[^\x{FFFD}]*)?$"


def _values(at: dict[str, int], *, vouched: bool) -> list[pl.Expr]:
    """The typed fields; on ``vouched`` lines the numbers hold no blanks to strip."""

    def number(name: str) -> pl.Expr:
        text = _text(at, name)
        return text.cast(pl.Float64, strict=False) if vouched else as_number(text)

    def count(name: str) -> pl.Expr:
        text = _text(at, name)
        return text.cast(pl.Int64, strict=False) if vouched else as_count(text)

    stamp = _text(at, "Timestamp")
    return [
        (stamp if vouched else stamp.str.strip_chars()).alias("_stamp"),
        (number("Timestamp") * 1_000_000).round().cast(pl.Int64, strict=False).alias("_us"),
        _empty_null(_text(at, "Model")).alias("_model"),
        _empty_null(_text(at, "Session ID")).alias("_session"),
        _empty_null(_text(at, "Log Type")).alias("_log"),
        number("Elapsed time").alias("_elapsed"),
        count("Request tokens").alias("_in"),
        count("Response tokens").alias("_out"),
        as_count(_text(at, "Total tokens")).alias("_total"),
    ]


def read(file: Path) -> Batch:
    """One BurstGPT CSV as a ``requests`` batch with its rejects."""
    at = header_positions(file, REQUIRED, OPTIONAL)
    info = file_info(file, header_lines=1)
    width = max(at.values()) + 1
    stamp = _text(at, "Timestamp")
    reasons = [
        *line_checks(width),
        *number_checks("Timestamp", stamp, required=True, whole=False, limit=TIME_MAX_S),
        pl.when(_empty_null(_text(at, "Model")).is_null()).then(pl.lit("Model is missing")),
        *count_checks("Request tokens", _text(at, "Request tokens")),
        *count_checks("Response tokens", _text(at, "Response tokens")),
        *number_checks("Elapsed time", _text(at, "Elapsed time"), required=False, whole=False),
    ]
    values = _values(at, vouched=False)
    lines = split_lines(info).with_columns(pl.col(RAW).str.contains(vouch(at, width)).alias("_ok"))
    # the checks (and their messages) run on the lines the pattern cannot vouch for only
    fast, slow = pl.collect_all(
        [
            lines.filter(pl.col("_ok")).select(
                LINE, pl.lit(None, dtype=pl.String).alias(REASON), *_values(at, vouched=True)
            ),
            lines.filter(~pl.col("_ok")).select(LINE, first_reason(reasons).alias(REASON), *values),
        ]
    )
    frame = fast if slow.is_empty() else pl.concat([fast, slow]).sort(LINE)
    dataset = slug(file.stem)
    good = frame.filter(pl.col(REASON).is_null())
    mismatch = good.select(
        (
            pl.col("_total").is_not_null() & (pl.col("_total") != pl.col("_in") + pl.col("_out"))
        ).sum()
    ).item()
    has_latency = "Elapsed time" in at
    rows = good.lazy().select(
        pl.lit(SOURCE).alias("source"),
        pl.lit(dataset).alias("dataset"),
        pl.col("_log").alias("service"),
        pl.col("_model").alias("model"),
        pl.col("_session").alias("session_id"),
        pl.from_epoch(pl.col("_us"), time_unit="us")
        .dt.replace_time_zone("UTC")
        .alias("arrival_time"),
        pl.col("_stamp").alias("arrival_raw"),
        pl.lit("s_since_start").alias("arrival_raw_unit"),
        pl.col("_in").alias("input_tokens"),
        pl.col("_out").alias("output_tokens"),
        pl.when(pl.col("_out") == 0)
        .then(pl.lit("failed"))
        .otherwise(pl.lit("completed"))
        .alias("status"),
        pl.col("_elapsed").alias("latency_s"),
        pl.when(pl.col("_elapsed").is_not_null())
        .then(pl.lit("end_to_end"))
        .otherwise(pl.lit(None, dtype=pl.String))
        .alias("latency_kind"),
        *lineage(info, 1),
        pl.lit("relative").alias("time_basis"),
    )
    ordered = good.select(pl.col("_us").is_sorted()).item()
    meta = {
        "time_basis": "relative",
        "time_of_day": "local",
        "release_columns": "v1.2" if has_latency and "Session ID" in at else "pre-v1.2",
        "total_tokens_mismatch_rows": str(mismatch),
    }
    bad = with_raw(info, frame.filter(pl.col(REASON).is_not_null()).select(LINE, REASON))
    return requests_batch(SOURCE, dataset, info, bad, rows, meta, sort=not ordered)


class BurstGptLoader:
    """Loader for BurstGPT CSVs (release v1.2 and the older six-column releases)."""

    name = SOURCE
    version = "1"

    def batches(self, path: Path, **_: Any) -> Iterator[Batch]:
        """Yield one ``requests`` batch per BurstGPT CSV."""
        for file in inputs(path):
            yield read(file)


@dataclass(frozen=True)
class BurstGptOptions:
    """`gpu-trace ingest burstgpt` takes no options (the format fixes its time basis)."""


PLUGIN = LoaderPlugin(
    name=SOURCE,
    loader=BurstGptLoader,
    help="BurstGPT (v1.2 with Session ID and Elapsed time, or older) CSV -> requests.\n\nPATH: one BurstGPT_*.csv or a folder of them.",
    options=BurstGptOptions,
)
