"""Synthetic Alibaba GenTD26 ``lora_request_trace.csv`` (Stable Diffusion + LoRA serving).

Writes ``OUT/lora_request_trace.csv`` with the header and value forms of the dataset
README ("Request-Level Performance Data", alibaba/clusterdata
``cluster-trace-v2026-GenAI``): ``gmt_create`` ``2024-11-15 16:57:50``, the float
columns written ``32.0``, ``num_lora`` an integer, the negative prompt length empty
when there is none, LF line ends; ``gpu-trace ingest gentd26 OUT`` reads it.

Calibration (every figure computed from the real file, 26,823 requests, not bundled:
no licence upstream; the quantiles at
:data:`~gpu_trace.synth.serving_common.PERCENTILES`):

- ``gmt_create``: starts at the real first time, 2024-11-15 16:57:50; gaps (whole
  seconds) from the real gaps' table :data:`GAP_S` (median 15 s, 3.3 % zero). The
  real file's day/night profile (almost no requests 11:00-15:00) is not reproduced:
  gaps are drawn independently;
- ``predict_type``, ``predict_status``, ``num_images_per_prompt``, ``num_lora`` and
  ``num_inference_steps`` (its 12 most common values, 99.5 % of rows): the real
  counts (:data:`TYPES`, ...), so the shares are the file's;
- ``exec_time_seconds`` (whole seconds, median 23), ``prompt_length`` (median 52)
  and the non-empty ``negative_prompt_length`` (median 26; empty in 6,215 rows, 23.2 %)
  from their tables;
- ``groupId`` (``G0000``..) over the real 4,247 groups and
  ``checkpoint_model_version_id`` (``M0000``..) over the real 87 models, Zipf by rank
  with exponents 0.80 and 1.26, fitted so the most popular one has the real top share
  (G0264: 1,207 requests, 4.5 %; M0002: 8,234, 30.7 %);
- ``PENDING`` requests (unfinished when the trace was cut) are written as the real
  ones mostly are: ``exec_time_seconds`` 0.0 and empty prompt, negative prompt,
  images, steps and model (25 of the 30 real ones).

Columns are drawn independently of one another (in the real file execution time grows
with steps and images; that is not modelled).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from gpu_trace.synth.serving_common import (
    categorical,
    whole_from_quantiles,
    write_lines,
    zipf_ranks,
)

HEADER = (
    "gmt_create,predict_type,predict_status,exec_time_seconds,groupId,prompt_length,"
    "negative_prompt_length,num_images_per_prompt,num_inference_steps,"
    "checkpoint_model_version_id,num_lora"
)
START_S = 1_731_689_870
"""2024-11-15 16:57:50 (naive; written as local text)."""
GAP_S = (0, 0, 1, 2, 4, 7, 10, 15, 21, 29, 41, 69, 118, 666, 9491, 47958)
EXEC_S = (0, 7, 11, 13, 15, 18, 20, 23, 26, 30, 37, 53, 69, 106, 159, 567)
PROMPT_CHARS = (0, 1, 5, 10, 24, 40, 47, 52, 56, 62, 70, 90, 126, 253, 655, 1288)
NEGATIVE_CHARS = (0, 22, 26, 26, 26, 26, 26, 26, 26, 26, 26, 26, 27, 50, 138, 290)
NEGATIVE_EMPTY = 6215 / 26823
TYPES = {"TXT_2_IMG": 24438, "IMG_2_IMG": 2199, "INPAINTING": 186}
STATUSES = {"SUCCEED": 26392, "FAILED": 398, "PENDING": 30, "PROCESSING": 3}
IMAGES = {"1": 15494, "4": 5132, "8": 3968, "2": 2191, "3": 9}
STEPS = {
    "30": 24305, "40": 1362, "28": 194, "50": 145, "35": 131, "25": 107, "38": 100,
    "20": 67, "100": 47, "33": 35, "60": 34, "44": 31,
}  # fmt: skip
LORAS = {"0": 22329, "1": 4195, "2": 255, "3": 35, "6": 6, "4": 3}
GROUPS, GROUP_EXPONENT = 4247, 0.80
MODELS, MODEL_EXPONENT = 87, 1.26


def frame(rng: np.random.Generator, n: int) -> pl.DataFrame:
    """``n`` requests as the text of each column, in creation order."""
    gaps = whole_from_quantiles(rng, n, GAP_S)
    gaps[0] = 0
    status = categorical(rng, n, STATUSES)
    negative = whole_from_quantiles(rng, n, NEGATIVE_CHARS)
    no_negative = rng.random(n) < NEGATIVE_EMPTY
    df = pl.DataFrame(
        {
            "s": START_S + np.cumsum(gaps),
            "type": categorical(rng, n, TYPES),
            "status": status,
            "exec": whole_from_quantiles(rng, n, EXEC_S),
            "group": zipf_ranks(rng, n, GROUPS, GROUP_EXPONENT),
            "prompt": whole_from_quantiles(rng, n, PROMPT_CHARS),
            "negative": negative,
            "images": categorical(rng, n, IMAGES),
            "steps": categorical(rng, n, STEPS),
            "model": zipf_ranks(rng, n, MODELS, MODEL_EXPONENT),
            "lora": categorical(rng, n, LORAS),
        }
    ).with_columns(
        pl.col("exec", "prompt").cast(pl.String),
        pl.when(pl.Series(no_negative))
        .then(pl.lit(""))
        .otherwise(pl.col("negative").cast(pl.String))
        .alias("negative"),
    )
    pending = pl.col("status") == "PENDING"

    def real(name: str) -> pl.Expr:
        """``32`` -> ``32.0`` (the README's float columns), empty for a pending row."""
        text = pl.when(pl.col(name) == "").then(pl.lit("")).otherwise(pl.col(name) + ".0")
        return pl.when(pending).then(pl.lit("")).otherwise(text).alias(name)

    return df.select(
        pl.from_epoch("s", time_unit="s").dt.strftime("%Y-%m-%d %H:%M:%S").alias("gmt_create"),
        "type",
        "status",
        pl.when(pending).then(pl.lit("0.0")).otherwise(pl.col("exec") + ".0").alias("exec"),
        pl.format("G{}", pl.col("group").cast(pl.String).str.zfill(4)).alias("group"),
        real("prompt"),
        real("negative"),
        real("images"),
        real("steps"),
        pl.when(pending)
        .then(pl.lit(""))
        .otherwise(pl.format("M{}", pl.col("model").cast(pl.String).str.zfill(4)))
        .alias("model"),
        "lora",
    )


def write(out: Path, *, jobs: int, seed: int) -> list[Path]:
    """Write ``OUT/lora_request_trace.csv`` with ``jobs`` requests."""
    rng = np.random.default_rng(seed)
    body = frame(rng, jobs).select(pl.concat_str(pl.all(), separator=",")).to_series()
    return [write_lines(out / "lora_request_trace.csv", pl.concat([pl.Series([HEADER]), body]))]
