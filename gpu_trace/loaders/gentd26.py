"""Alibaba GenTD26 (alibaba/clusterdata ``cluster-trace-v2026-GenAI``): Stable
Diffusion + LoRA serving requests, ``lora_request_trace.csv`` -> ``requests``.

Format (the dataset README, "Request-Level Performance Data"): a CSV with the header
``gmt_create,predict_type,predict_status,exec_time_seconds,groupId,prompt_length,
negative_prompt_length,num_images_per_prompt,num_inference_steps,
checkpoint_model_version_id,num_lora``: ``gmt_create`` the request's creation time
(``2024-11-15 16:57:50``, "anonymized with time offset"), ``predict_type``
(``TXT_2_IMG``, ``IMG_2_IMG``, ``INPAINTING``), ``predict_status`` (``SUCCEED``,
``PROCESSING``, ...), ``exec_time_seconds`` (float, total execution time), ``groupId``
(anonymized user / group), ``prompt_length`` and ``negative_prompt_length`` (float,
character counts; the negative prompt "can be empty"), ``num_images_per_prompt`` and
``num_inference_steps`` (float), ``checkpoint_model_version_id`` (anonymized base model),
``num_lora`` (int, LoRA adapters; 0 = base model only).

The upstream repository has no licence file: the loader reads the file, gpu-trace does
not bundle it.

Decisions on points the format leaves open:

- **Time basis.** The README: "All timestamps are anonymized with a time offset to
  preserve relative order but hide absolute values". So the dates are not real:
  ``time_basis`` is ``relative``, ``arrival_time`` is 1970-01-01T00:00:00Z + the time
  since the file's earliest accepted ``gmt_create`` (its raw text in the Parquet
  metadata, ``trace_start_raw``), ``source_tz`` null; ``arrival_raw`` keeps the value.
- **Status.** ``SUCCEED`` is ``completed``, ``FAILED`` ``failed``, anything else
  (``PENDING``, ``PROCESSING``: unfinished when the trace was cut) ``unknown``, with the
  value in ``raw_status``. ``exec_time_seconds`` is ``latency_s`` (``latency_kind``
  ``execution``).
- **Counts written as floats** (``30.0``) must be whole; ``1.5`` images is quarantined,
  as is a negative count or time, a missing ``gmt_create``, ``predict_status`` or
  ``exec_time_seconds``, or a time that does not parse. Empty optional fields (the
  release has 25 rows without images, steps, model or prompt length) are null.
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
    as_number,
    first_reason,
    header_positions,
    line_checks,
    lineage,
    number_checks,
    quoted,
    requests_batch,
    split_lines,
    with_raw,
)
from gpu_trace.loaders.textfile import LINE, REASON, file_info
from gpu_trace.loaders.units import TIME_MAX, TIME_MIN
from gpu_trace.plugins import LoaderPlugin
from gpu_trace.store.parquet import slug

SOURCE = "gentd26"
REQUIRED = (
    "gmt_create",
    "predict_type",
    "predict_status",
    "exec_time_seconds",
    "groupId",
    "prompt_length",
    "negative_prompt_length",
    "num_images_per_prompt",
    "num_inference_steps",
    "checkpoint_model_version_id",
    "num_lora",
)
"""Every column of the README's table must be in the header (found by name)."""
STATUS = {"SUCCEED": "completed", "FAILED": "failed"}
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
INT32_MAX = 2**31 - 1
COUNTS = ("num_images_per_prompt", "num_inference_steps", "num_lora")
CHARS = ("prompt_length", "negative_prompt_length")


def inputs(path: Path) -> list[Path]:
    """The CSV given, or ``lora_request_trace.csv`` in the folder given."""
    if path.is_file():
        return [path]
    found = path / "lora_request_trace.csv"
    if not found.is_file():
        raise InputError(path, "no lora_request_trace.csv here")
    return [found]


def read(file: Path) -> Batch:
    """``lora_request_trace.csv`` as a ``requests`` batch with its rejects."""
    at = header_positions(file, REQUIRED)
    info = file_info(file, header_lines=1)
    parts = pl.col("_parts")

    def text(name: str) -> pl.Expr:
        return parts.list.get(at[name], null_on_oob=True)

    def value(name: str) -> pl.Expr:
        t = text(name).str.strip_chars()
        return pl.when(t == "").then(None).otherwise(t)

    created = value("gmt_create")
    local = created.str.strptime(pl.Datetime("us"), TIME_FORMAT, strict=False)
    reasons = [
        *line_checks(max(at.values()) + 1),
        pl.when(created.is_null()).then(pl.lit("gmt_create is missing")),
        pl.when(created.is_not_null() & local.is_null()).then(
            pl.format("gmt_create {} is not a time (YYYY-MM-DD HH:MM:SS)", quoted(created))
        ),
        pl.when((local < TIME_MIN) | (local >= TIME_MAX)).then(
            pl.format("gmt_create {} is a time out of range (1970 .. 2099)", created)
        ),
        pl.when(value("predict_status").is_null()).then(pl.lit("predict_status is missing")),
        *number_checks("exec_time_seconds", text("exec_time_seconds"), required=True, whole=False),
    ]
    for c in COUNTS:
        reasons += number_checks(c, text(c), required=False, whole=True, limit=INT32_MAX)
    for c in CHARS:
        reasons += number_checks(c, text(c), required=False, whole=True, limit=2.0**53)
    frame = (
        split_lines(info)
        .with_columns(
            first_reason(reasons).alias(REASON),
            created.alias("_created"),
            local.alias("_local"),
            value("predict_type").alias("_type"),
            value("predict_status").alias("_status"),
            value("groupId").alias("_group"),
            value("checkpoint_model_version_id").alias("_model"),
            as_number(text("exec_time_seconds")).alias("_exec"),
            *(
                as_number(text(c)).cast(pl.Int64, strict=False).alias(f"_{c}")
                for c in (*COUNTS, *CHARS)
            ),
        )
        .drop("_parts", "_raw")
        .collect()
    )
    good = frame.filter(pl.col(REASON).is_null())
    start = good["_local"].min()
    start_raw = (
        good.filter(pl.col("_local") == start)["_created"].first() if start is not None else None
    )
    dataset = slug(file.stem)
    rows = good.lazy().select(
        pl.lit(SOURCE).alias("source"),
        pl.lit(dataset).alias("dataset"),
        pl.col("_type").alias("service"),
        pl.col("_model").alias("model"),
        pl.col("_group").alias("user"),
        (pl.lit(0, dtype=pl.Int64).cast(pl.Datetime("us")) + (pl.col("_local") - pl.lit(start)))
        .dt.replace_time_zone("UTC")
        .alias("arrival_time"),
        pl.col("_created").alias("arrival_raw"),
        pl.lit("shifted_datetime").alias("arrival_raw_unit"),
        pl.col("_prompt_length").alias("prompt_chars"),
        pl.col("_negative_prompt_length").alias("negative_prompt_chars"),
        pl.col("_status")
        .replace_strict(STATUS, default="unknown", return_dtype=pl.String)
        .alias("status"),
        pl.col("_status").alias("raw_status"),
        pl.col("_exec").alias("latency_s"),
        pl.lit("execution").alias("latency_kind"),
        pl.col("_num_images_per_prompt").cast(pl.Int32).alias("images"),
        pl.col("_num_inference_steps").cast(pl.Int32).alias("steps"),
        pl.col("_num_lora").cast(pl.Int32).alias("adapters"),
        *lineage(info, 1),
        pl.lit("relative").alias("time_basis"),
    )
    meta = {"time_basis": "relative", "trace_start_raw": str(start_raw or "")}
    bad = with_raw(info, frame.filter(pl.col(REASON).is_not_null()).select(LINE, REASON))
    ordered = good.select(pl.col("_local").is_sorted()).item()
    return requests_batch(SOURCE, dataset, info, bad, rows, meta, sort=not ordered)


class Gentd26Loader:
    """Loader for the GenTD26 ``lora_request_trace.csv``."""

    name = SOURCE
    version = "1"

    def batches(self, path: Path, **_: Any) -> Iterator[Batch]:
        """Yield the ``requests`` batch of the request trace."""
        for file in inputs(path):
            yield read(file)


@dataclass(frozen=True)
class Gentd26Options:
    """`gpu-trace ingest gentd26` takes no options (the format fixes its time basis)."""


PLUGIN = LoaderPlugin(
    name=SOURCE,
    loader=Gentd26Loader,
    help="Alibaba GenTD26 lora_request_trace.csv (Stable Diffusion + LoRA requests) -> requests.\n\nPATH: the CSV or the folder holding it.",
    options=Gentd26Options,
)
