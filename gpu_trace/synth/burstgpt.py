"""Synthetic BurstGPT trace (HPMLL/BurstGPT, KDD'25) in the release CSV format.

Writes ``OUT/BurstGPT_1.csv`` with the columns of release v1.2, ``Timestamp,Session
ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type``, or with
``release="v1.1"`` (``gpu-trace synth burstgpt --release v1.1``) the older six,
without ``Session ID`` and ``Elapsed time`` (the README, "Schema" and "Data"); LF line
ends. ``gpu-trace ingest burstgpt OUT`` reads either.

No BurstGPT data file is in this repository (188-220 MB release assets), so the
calibration comes from what is published, and the rest is stated as assumed:

- **Rate.** The README: ``BurstGPT_1`` and ``_2`` hold ~5.29 M lines over 121
  consecutive days, a mean of 0.506 requests/s (:data:`RATE_PER_S`); ``n`` requests
  span ``n / RATE_PER_S`` seconds (10 M: 229 days).
- **Burstiness.** The paper (Wang et al., KDD'25, section 3) models inter-arrival
  times with a Gamma distribution; the upstream generator (``example/src/burstgpt/
  config.py``, ``gamma_shape = 0.5``) uses shape 0.5: coefficient of variation
  sqrt(2), burstier than Poisson. Gamma(0.5) gaps are laid in "busy time" and mapped
  onto the clock through a day/night and weekday profile (:data:`HOURLY`,
  :data:`WEEKDAY`): README figures 1-2 show weekly and daily periodicity but publish
  no values; the profile's shape is **assumed** (quiet nights, busy working hours,
  weekends at ~55 %), the first day a Monday (assumed).
- **Failures.** ``Response tokens`` 0 in 1.78 % of requests: README line counts,
  ``BurstGPT_1.csv`` 1,429.7 k lines vs ``BurstGPT_without_fails_1.csv`` 1,404.3 k.
  The failed rows visible in the release's first lines (the Hugging Face viewer of
  ``lzzmm/BurstGPT``) have ``Request tokens`` 0 as well; so do these.
- **Tokens.** Log-normal request and response lengths with the medians and log
  spreads of the first 32 successful rows of ``BurstGPT_1.csv`` as the Hugging Face
  viewer shows them (request median 529, sigma 1.41; response median 318, sigma 0.77)
  and capped at that viewer's column maxima (31.4 k and 12.5 k tokens). The paper
  describes the request lengths as Zipf-like; 32 rows are a small sample: **assumed**
  shape, published anchor points. ``Total tokens`` is their sum.
- **Model and log type.** GPT-4 in 23 % of requests (8 of the viewer's first 35
  rows); ``Conversation log`` vs ``API log`` 50 / 50 (**assumed**: not published).
- **v1.2 columns (assumed forms).** ``Session ID`` a decimal number, only on
  conversation rows (README: "only conversation mode have this"), sessions of 1 +
  geometric turns with mean 2, exponential think time with mean 60 s, a turn never
  before its predecessor; ``Elapsed time`` seconds with 3 decimals, 0.3 s plus 15 ms
  (ChatGPT) or 45 ms (GPT-4) per response token, times a log-normal factor (sigma
  0.3), 0.1-2 s for failures. ``Timestamp`` whole seconds (the viewer's column is
  int64).

Everything is numpy and one polars format: 10 M rows in well under a minute.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import polars as pl

from gpu_trace.synth.serving_common import order_in_time, session_layout, write_lines

RELEASES = ("v1.2", "v1.1")
V12 = "Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type"
V11 = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type"
FILE = "BurstGPT_1.csv"
RATE_PER_S = 5.29e6 / (121 * 86400)
GAMMA_SHAPE = 0.5
FAILED = 1 - 1404.3 / 1429.7
REQUEST_MEDIAN, REQUEST_SIGMA, REQUEST_MAX = 529, 1.41, 31_400
RESPONSE_MEDIAN, RESPONSE_SIGMA, RESPONSE_MAX = 318, 0.77, 12_500
GPT4_SHARE = 8 / 35
CONVERSATION_SHARE = 0.5
MEAN_TURNS, THINK_S = 2.0, 60.0
SECONDS_PER_TOKEN = {"ChatGPT": 0.015, "GPT-4": 0.045}
HOURLY = (
    0.35, 0.25, 0.2, 0.18, 0.18, 0.22, 0.35, 0.55, 0.8, 1.0, 1.0, 0.95,
    0.85, 0.95, 1.0, 1.0, 0.95, 0.85, 0.75, 0.7, 0.7, 0.65, 0.55, 0.45,
)  # fmt: skip
WEEKDAY = (1.0, 1.0, 1.0, 1.0, 0.95, 0.55, 0.55)


def arrivals(rng: np.random.Generator, n: int) -> npt.NDArray[np.int64]:
    """``n`` sorted whole-second offsets from the first midnight: Gamma(0.5) gaps in
    busy time, mapped through the hourly and weekday profile.
    """
    span_s = n / RATE_PER_S
    gaps = rng.gamma(GAMMA_SHAPE, 1 / (GAMMA_SHAPE * RATE_PER_S), size=n)
    busy = np.cumsum(gaps)
    hours = int(np.ceil(span_s / 3600)) + 1
    h = np.arange(hours)
    weight = np.asarray(HOURLY)[h % 24] * np.asarray(WEEKDAY)[(h // 24) % 7]
    # cumulative intensity at each hour boundary, scaled to the busy time drawn
    knots = np.concatenate(([0.0], np.cumsum(weight)))
    knots *= busy[-1] / knots[-1] if n else 1.0
    clock = np.interp(busy, knots, 3600.0 * np.arange(hours + 1))
    out: npt.NDArray[np.int64] = np.floor(clock).astype(np.int64)
    return out


def _lognormal(
    rng: np.random.Generator, n: int, median: float, sigma: float, top: int
) -> npt.NDArray[np.int64]:
    drawn = np.rint(rng.lognormal(np.log(median), sigma, size=n))
    out: npt.NDArray[np.int64] = np.clip(drawn, 1, top).astype(np.int64)
    return out


def _sessions(rng: np.random.Generator, conv: npt.NDArray[np.bool_], span_s: float) -> pl.Series:
    """The ``Session ID`` text of every row: the conversation rows (in time order)
    handed the turns of sessions in the order they arrive, numbered by first
    appearance; empty on API rows.
    """
    slots = np.flatnonzero(conv)
    ids = np.full(len(conv), -1, dtype=np.int64)
    if len(slots):
        session, turn = session_layout(rng, len(slots), MEAN_TURNS)
        order = order_in_time(rng, session, turn, span=span_s, think_mean=THINK_S)
        in_time = session[order]
        uniq, first, inverse = np.unique(in_time, return_index=True, return_inverse=True)
        rank = np.empty(len(uniq), dtype=np.int64)
        rank[np.argsort(first, kind="stable")] = np.arange(len(uniq), dtype=np.int64)
        ids[slots] = rank[inverse] + 1
    s = pl.Series("session", ids)
    return pl.select(
        pl.when(s >= 0).then(s.cast(pl.String)).otherwise(pl.lit("")).alias("session")
    ).to_series()


def frame(rng: np.random.Generator, n: int, release: str = "v1.2") -> pl.DataFrame:
    """``n`` requests as text columns in the release's order (v1.2 or older)."""
    stamp = arrivals(rng, n)
    gpt4 = rng.random(n) < GPT4_SHARE
    conv = rng.random(n) < CONVERSATION_SHARE
    failed = rng.random(n) < FAILED
    request = np.where(failed, 0, _lognormal(rng, n, REQUEST_MEDIAN, REQUEST_SIGMA, REQUEST_MAX))
    response = np.where(
        failed, 0, _lognormal(rng, n, RESPONSE_MEDIAN, RESPONSE_SIGMA, RESPONSE_MAX)
    )
    per_token = np.where(gpt4, SECONDS_PER_TOKEN["GPT-4"], SECONDS_PER_TOKEN["ChatGPT"])
    elapsed = np.where(
        failed,
        rng.uniform(0.1, 2.0, size=n),
        (0.3 + per_token * response) * rng.lognormal(0.0, 0.3, size=n),
    )
    df = pl.DataFrame(
        {
            "Timestamp": stamp,
            "Model": gpt4,
            "Request tokens": request,
            "Response tokens": response,
            "Total tokens": request + response,
            "Log Type": conv,
        }
    ).with_columns(
        pl.when("Model").then(pl.lit("GPT-4")).otherwise(pl.lit("ChatGPT")).alias("Model"),
        pl.when("Log Type")
        .then(pl.lit("Conversation log"))
        .otherwise(pl.lit("API log"))
        .alias("Log Type"),
    )
    if release == "v1.1":
        return df.select(pl.all().cast(pl.String))
    df = df.with_columns(
        _sessions(rng, conv, n / RATE_PER_S).alias("Session ID"),
        pl.Series("Elapsed time", np.round(elapsed, 3)),
    )
    return df.select(
        pl.col("Timestamp").cast(pl.String),
        "Session ID",
        pl.col("Elapsed time").map_batches(_three_decimals),
        *(pl.col(c).cast(pl.String) for c in V11.split(",")[1:]),
    )


def _three_decimals(s: pl.Series) -> pl.Series:
    """Seconds with exactly three decimals (``12.040``)."""
    ms = (s * 1000).round().cast(pl.Int64)
    return pl.select(
        pl.format("{}.{}", ms // 1000, (ms % 1000).cast(pl.String).str.zfill(3))
    ).to_series()


def write(out: Path, *, jobs: int, seed: int, release: str = "v1.2") -> list[Path]:
    """Write ``OUT/BurstGPT_1.csv`` with ``jobs`` requests in ``release``'s columns."""
    if release not in RELEASES:
        msg = f"unknown BurstGPT release {release!r}; choose from {', '.join(RELEASES)}"
        raise ValueError(msg)
    rng = np.random.default_rng(seed)
    header = V12 if release == "v1.2" else V11
    body = frame(rng, jobs, release).select(pl.concat_str(pl.all(), separator=",")).to_series()
    return [write_lines(out / FILE, pl.concat([pl.Series([header]), body]))]
