"""Serving arrivals: request rate over time, burstiness, daily / weekly profiles and
fitted inter-arrival distributions, per serving trace (source, dataset).

Definitions (glossary in each declaration):

- **Inter-arrival time**: the gap between consecutive arrivals of one trace, in arrival
  order (ties: 0).
- **Coefficient of variation** (CV) of inter-arrival times: population standard deviation
  / mean. 1 for a Poisson process; above 1 is burstier than Poisson.
- **Index of dispersion** of counts for a window ``w``: variance / mean of the number of
  arrivals in consecutive windows of ``w`` from the first arrival (empty windows count,
  population variance). 1 for Poisson at every ``w``; growing with ``w`` means bursts
  that last longer than ``w``.
- **Fits**: maximum-likelihood exponential, gamma and Weibull (location fixed at 0,
  ``scipy.stats``) of the positive inter-arrival times, with the Kolmogorov-Smirnov
  statistic against the fitted law (its p-value is optimistic: the parameters come from
  the same sample).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from gpu_trace.analyses.serving_common import (
    CLOCK_DAY_ONE,
    CLOCK_LOCAL,
    COMMON_GLOSSARY,
    MIN_FIT,
    MIN_WINDOWS,
    NO_CALENDAR,
    NO_CLOCK,
    RELATIVE_TIME,
    TRACE,
    clock,
    local_arrival,
    parse_resolutions,
    seconds,
    zones,
)
from gpu_trace.plugins import AnalysisPlugin, option

IntArray = np.ndarray[Any, np.dtype[np.int64]]

ZERO_SHARE = 0.05
"""Share of zero gaps above which the timestamps are coarse or batched (Mooncake's
conversation trace: 3 s steps) and a gap statistic reads the clock, not the load."""

# ----------------------------------------------------------------------------- rate


def arrival_offsets(requests: pl.LazyFrame) -> list[tuple[str, str, int, IntArray, bool]]:
    """(source, dataset, first arrival in epoch microseconds, sorted offsets from it in
    microseconds, whether its times are relative) of every trace: the one pass over the arrivals that rate and burstiness
    count from (10 M arrivals: a sort and a few numpy calls, not a window expression per
    bin width).
    """
    per_trace = (
        requests.group_by(list(TRACE))
        .agg(
            pl.col("arrival_time").dt.epoch("us").sort().alias("us"),
            (pl.col("time_basis") == "relative").any().alias("relative"),
        )
        .sort(list(TRACE))
        .collect()
    )
    out = []
    for source, dataset, us, relative in per_trace.iter_rows():
        arr = np.asarray(us, dtype=np.int64)
        out.append((source, dataset, int(arr[0]), arr - arr[0], bool(relative)))
    return out


def _counts(offsets: IntArray, width_s: int) -> IntArray:
    """Arrivals per window of ``width_s`` from the first arrival, empty windows included."""
    return np.bincount(offsets // (width_s * 1_000_000))


def request_rate(requests: pl.LazyFrame, resolutions: tuple[str, ...]) -> pl.DataFrame:
    """Requests and requests per second in bins of each width of ``resolutions``, every
    bin of each trace's span present (long form: one ``resolution`` per block of rows).
    """
    frames = []
    traces = arrival_offsets(requests)
    for width in resolutions:
        w = seconds(width)
        for source, dataset, first, offsets, relative in traces:
            counts = _counts(offsets, w)
            starts = first + np.arange(counts.size, dtype=np.int64) * w * 1_000_000
            frames.append(
                pl.DataFrame(
                    {
                        "source": source,
                        "dataset": dataset,
                        "resolution": width,
                        "resolution_s": w,
                        "time": pl.Series(starts).cast(pl.Datetime("us", "UTC")),
                        "requests": counts,
                        "requests_per_s": counts / w,
                        "caveat": RELATIVE_TIME if relative else None,
                    },
                    schema=RATE_SCHEMA,
                )
            )
    if not frames:
        return pl.DataFrame(schema=RATE_SCHEMA)
    return pl.concat(frames).sort([*TRACE, "resolution_s", "time"])


RATE_SCHEMA: dict[str, Any] = {
    "source": pl.String,
    "dataset": pl.String,
    "resolution": pl.String,
    "resolution_s": pl.Int64,
    "time": pl.Datetime("us", "UTC"),
    "requests": pl.Int64,
    "requests_per_s": pl.Float64,
    "caveat": pl.String,
}


@dataclass(frozen=True)
class RateOptions:
    """`gpu-trace analyze request-rate` options."""

    resolutions: tuple[str, ...] = option(
        "1min,10min,1h",
        "Bin widths, a comma list (30s, 1min, 10min, 1h, 1d).",
        parse=parse_resolutions,
        metavar="WIDTHS",
        repeat=True,
    )


def _rate(inputs: Any, options: RateOptions) -> pl.DataFrame:
    return request_rate(inputs.requests, options.resolutions)


# ----------------------------------------------------------------------------- burstiness


def _caveat(requests: int, windows: int, zero_share: float) -> str | None:
    if requests < MIN_FIT:
        return f"too few requests ({requests}) for burstiness statistics"
    if windows < MIN_WINDOWS:
        return f"only {windows} windows of this width in the span: dispersion unreliable"
    if zero_share > ZERO_SHARE:
        return "many equal timestamps (coarse time resolution): CV inflated"
    return None


def burstiness(requests: pl.LazyFrame, windows: tuple[str, ...]) -> pl.DataFrame:
    """Per trace and count window: requests, span, mean rate, inter-arrival mean and CV,
    the share of zero gaps, and the index of dispersion of counts per window, with a
    ``caveat`` where the sample is too small to read.
    """
    rows: list[dict[str, Any]] = []
    for source, dataset, _first, offsets, _relative in arrival_offsets(requests):
        n = int(offsets.size)
        span = float(offsets[-1]) / 1e6
        gaps = np.diff(offsets) / 1e6
        mean = float(gaps.mean()) if gaps.size else None
        cv = float(gaps.std() / gaps.mean()) if gaps.size and gaps.mean() > 0 else None
        zero = float((gaps == 0).mean()) if gaps.size else 0.0
        for width in windows:
            w = seconds(width)
            counts = _counts(offsets, w)
            per = float(counts.mean())
            rows.append(
                {
                    "source": source,
                    "dataset": dataset,
                    "requests": n,
                    "span_s": span,
                    "rate_per_s": n / span if span > 0 else None,
                    "interarrival_mean_s": mean,
                    "interarrival_cv": cv,
                    "zero_gap_share": zero if gaps.size else None,
                    "window": width,
                    "window_s": w,
                    "windows": int(counts.size),
                    "mean_per_window": per,
                    "dispersion_index": float(counts.var()) / per,
                    "caveat": _caveat(n, int(counts.size), zero),
                }
            )
    return pl.DataFrame(rows, schema=BURSTINESS_SCHEMA).sort([*TRACE, "window_s"])


BURSTINESS_SCHEMA = {
    "source": pl.String,
    "dataset": pl.String,
    "requests": pl.Int64,
    "span_s": pl.Float64,
    "rate_per_s": pl.Float64,
    "interarrival_mean_s": pl.Float64,
    "interarrival_cv": pl.Float64,
    "zero_gap_share": pl.Float64,
    "window": pl.String,
    "window_s": pl.Int64,
    "windows": pl.Int64,
    "mean_per_window": pl.Float64,
    "dispersion_index": pl.Float64,
    "caveat": pl.String,
}


@dataclass(frozen=True)
class BurstinessOptions:
    """`gpu-trace analyze request-burstiness` options."""

    windows: tuple[str, ...] = option(
        "1s,10s,1min,10min",
        "Count windows for the index of dispersion, a comma list.",
        parse=parse_resolutions,
        metavar="WIDTHS",
        repeat=True,
    )


def _burstiness(inputs: Any, options: BurstinessOptions) -> pl.DataFrame:
    return burstiness(inputs.requests, options.windows)


# ----------------------------------------------------------------------------- profiles


def _weekday(local: pl.Expr) -> pl.Expr:
    """Weekday 1-7 (1 = Monday) on a local clock; on any other, days since the trace's
    first day mod 7 + 1 (1970-01-01 was a Thursday, not day 1 of anything).
    """
    since = (local.dt.date().cast(pl.Int64) % 7 + 1).cast(pl.Int8)
    real = local.dt.weekday().cast(pl.Int8)
    return pl.when(pl.col("clock") == CLOCK_LOCAL).then(real).otherwise(since).alias("weekday")


def profile(requests: pl.LazyFrame, weekly: bool = False) -> pl.LazyFrame:
    """Mean requests per hour of day (and weekday with ``weekly``): counts over the
    number of such hours in the trace's span (hours without requests included), and the
    share of the trace's requests. ``clock`` says what the hour means; ``caveat`` says
    when the profile is not a diurnal / weekly one (relative times, a span under a day
    or a week).
    """
    tz = zones(requests)
    lf = requests.select(*TRACE, "arrival_time", local_arrival(tz), clock()).with_columns(
        pl.col("local_arrival").dt.hour().alias("hour"),
        pl.col("local_arrival").dt.truncate("1h").alias("_hour_start"),
    )
    keys = [*TRACE, "clock"]
    slot = ["hour"]
    if weekly:
        lf = lf.with_columns(_weekday(pl.col("local_arrival")))
        slot = ["weekday", "hour"]
    # every hour of the span, for the number of times each slot occurred
    hours = (
        lf.group_by(keys)
        .agg(
            pl.datetime_ranges(
                pl.col("_hour_start").min(), pl.col("_hour_start").max(), "1h"
            ).first().alias("_h"),
        )
        .explode("_h")
        .with_columns(pl.col("_h").dt.hour().alias("hour"), _weekday(pl.col("_h")))
        .group_by([*keys, *slot])
        .agg(pl.len().alias("hours_in_span"))
    )  # fmt: skip
    span_h = (
        lf.group_by(keys)
        .agg(((pl.col("arrival_time").max() - pl.col("arrival_time").min()).dt.total_seconds()
              / 3600).alias("_span_h"))
    )  # fmt: skip
    c = pl.col("clock")
    caveat = (
        pl.when(c == CLOCK_LOCAL)
        .then(None)
        .when(c == CLOCK_DAY_ONE)
        .then(pl.lit(NO_CALENDAR) if weekly else None)
        .otherwise(pl.lit(NO_CLOCK))
    )
    short = 24 * 7 if weekly else 24
    return (
        lf.group_by([*keys, *slot])
        .agg(pl.len().alias("requests"))
        .join(hours, on=[*keys, *slot], how="full", coalesce=True)
        .join(span_h, on=keys)
        .with_columns(
            pl.col("requests").fill_null(0),
            pl.col("hours_in_span").fill_null(0),
        )
        .with_columns(
            (pl.col("requests") / pl.col("hours_in_span")).alias("requests_per_hour"),
            (pl.col("requests") / pl.col("requests").sum().over(keys)).alias("share"),
            pl.coalesce(
                caveat,
                pl.when(pl.col("_span_h") < short).then(
                    pl.format(
                        "the trace spans {} h, under a {}: the profile covers part of one",
                        pl.col("_span_h").round(1),
                        pl.lit("week" if weekly else "day"),
                    )
                ),
            ).alias("caveat"),
        )
        .select(*keys, *slot, "requests", "hours_in_span", "requests_per_hour", "share", "caveat")
        .sort([*TRACE, *slot])
    )


@dataclass(frozen=True)
class ProfileOptions:
    """`gpu-trace analyze request-profile` options."""

    weekly: bool = option(False, "Weekday x hour instead of hour of day.")


def _profile(inputs: Any, options: ProfileOptions) -> pl.LazyFrame:
    return profile(inputs.requests, options.weekly)


# ----------------------------------------------------------------------------- fits

DISTRIBUTIONS = ("exponential", "gamma", "weibull")

MAX_FIT_SAMPLES = 200_000
"""Inter-arrival times a fit uses at most: beyond, an evenly spaced subsample (every
k-th gap in arrival order; the Weibull likelihood is optimized numerically, and a month
of 10 M requests would take minutes for no visible change in the parameters)."""


def _fit_one(gaps: np.ndarray[Any, Any], dist: str) -> dict[str, float]:
    """Maximum-likelihood fit of ``dist`` (location 0) and its KS statistic."""
    from scipy import stats  # ~0.3 s to import: only when a fit is asked for

    law: Any
    if dist == "exponential":
        _, scale = stats.expon.fit(gaps, floc=0)
        shape = 1.0
        law = stats.expon(loc=0, scale=scale)
    elif dist == "gamma":
        shape, _, scale = stats.gamma.fit(gaps, floc=0)
        law = stats.gamma(shape, loc=0, scale=scale)
    else:
        shape, _loc, scale = stats.weibull_min.fit(gaps, floc=0)
        law = stats.weibull_min(shape, loc=0, scale=scale)
    loglik = float(np.sum(law.logpdf(gaps)))
    ks = stats.kstest(gaps, law.cdf)
    params = 1 if dist == "exponential" else 2
    return {
        "shape": float(shape),
        "scale_s": float(scale),
        "fitted_mean_s": float(law.mean()),
        "loglik": loglik,
        "aic": 2 * params - 2 * loglik,
        "ks_stat": float(ks.statistic),
        "ks_pvalue": float(ks.pvalue),
    }


FIT_SCHEMA = {
    "source": pl.String,
    "dataset": pl.String,
    "distribution": pl.String,
    "gaps": pl.Int64,
    "zero_gaps": pl.Int64,
    "sample_mean_s": pl.Float64,
    "shape": pl.Float64,
    "scale_s": pl.Float64,
    "fitted_mean_s": pl.Float64,
    "loglik": pl.Float64,
    "aic": pl.Float64,
    "ks_stat": pl.Float64,
    "ks_pvalue": pl.Float64,
    "best": pl.Boolean,
    "caveat": pl.String,
}


def interarrival_fits(requests: pl.LazyFrame) -> pl.DataFrame:
    """One row per trace and distribution: the MLE parameters (``shape``: 1 for the
    exponential; gamma shape k; Weibull shape c), log-likelihood, AIC, the KS statistic
    and p-value, ``best`` (lowest AIC of the trace) and a ``caveat`` (too few gaps, a
    subsample, zero gaps left out).
    """
    rows: list[dict[str, Any]] = []
    for source, dataset, _first, offsets, _relative in arrival_offsets(requests):
        x = np.diff(offsets) / 1e6
        positive = x[x > 0]
        zero = int(x.size - positive.size)
        notes = []
        if zero > ZERO_SHARE * x.size:
            notes.append(
                f"{zero} of {x.size} gaps are 0 (batched or coarse timestamps): the fit "
                "describes the positive gaps only, not the arrival process"
            )
        elif zero:
            notes.append(f"{zero} zero gaps (equal timestamps) left out")
        if positive.size > MAX_FIT_SAMPLES:
            step = math.ceil(positive.size / MAX_FIT_SAMPLES)
            positive = positive[::step]
            notes.append(f"fitted on every {step}th gap ({positive.size})")
        base = {
            "source": source,
            "dataset": dataset,
            "gaps": int(x.size),
            "zero_gaps": zero,
            "sample_mean_s": float(positive.mean()) if positive.size else None,
        }
        if positive.size < MIN_FIT:
            note = f"too few inter-arrival times ({positive.size}) for a fit"
            rows.extend({**base, "distribution": d, "caveat": note} for d in DISTRIBUTIONS)
            continue
        fitted: list[dict[str, Any]] = [
            {**base, "distribution": d, **_fit_one(positive, d)} for d in DISTRIBUTIONS
        ]
        best = min(fitted, key=lambda r: r["aic"])
        for r in fitted:
            r["best"] = r is best
            r["caveat"] = "; ".join(notes) or None
        rows.extend(fitted)
    return pl.DataFrame(rows, schema=FIT_SCHEMA).sort([*TRACE, "distribution"])


def _fits(inputs: Any, options: Any) -> pl.DataFrame:
    return interarrival_fits(inputs.requests)


# ----------------------------------------------------------------------------- declarations


PLUGINS = (
    AnalysisPlugin(
        name="request-rate",
        title="Request rate",
        help="Serving requests per second over time, at several bin widths, per trace "
        "(empty bins count as 0).",
        run=_rate,
        options=RateOptions,
        needs=("requests",),
        needs_jobs=False,
        rank=200,
        units={"resolution_s": "s", "requests_per_s": "1/s"},
        glossary={
            **COMMON_GLOSSARY,
            "resolution": ("bin width", "Width of the time bins of these rows."),
            "resolution_s": ("bin width (s)", "Bin width in seconds."),
            "time": ("bin start", "Start of the bin (relative traces: 1970-01-01 + offset)."),
            "requests_per_s": ("requests / s", "Requests in the bin / bin width."),
        },
    ),
    AnalysisPlugin(
        name="request-burstiness",
        title="Burstiness",
        help="Burstiness of serving arrivals per trace: inter-arrival CV and the index of "
        "dispersion of counts per window (1 = Poisson).",
        run=_burstiness,
        options=BurstinessOptions,
        needs=("requests",),
        needs_jobs=False,
        rank=201,
        units={
            "span_s": "s",
            "rate_per_s": "1/s",
            "interarrival_mean_s": "s",
            "zero_gap_share": "fraction",
            "window_s": "s",
        },
        glossary={
            **COMMON_GLOSSARY,
            "span_s": ("span", "Last arrival - first arrival."),
            "rate_per_s": ("mean rate", "Requests / span."),
            "interarrival_mean_s": ("mean inter-arrival", "Mean gap between arrivals."),
            "interarrival_cv": (
                "inter-arrival CV",
                "Population standard deviation / mean of the gaps (Poisson: 1).",
            ),
            "zero_gap_share": ("zero gaps", "Share of gaps that are 0 (equal timestamps)."),
            "window": ("window", "Count window of the dispersion index."),
            "window_s": ("window (s)", "Count window in seconds."),
            "windows": ("windows", "Windows of this width in the span (empty ones included)."),
            "mean_per_window": ("mean per window", "Mean arrivals per window."),
            "dispersion_index": (
                "index of dispersion",
                "Variance / mean of arrivals per window (Poisson: 1; > 1 bursty).",
            ),
        },
    ),
    AnalysisPlugin(
        name="request-profile",
        title="Daily and weekly profile",
        help="Serving requests per hour of day (and day of week) per trace; relative-time "
        "traces say the profile is not a diurnal one (`caveat`).",
        run=_profile,
        options=ProfileOptions,
        needs=("requests",),
        needs_jobs=False,
        rank=202,
        units={"share": "fraction", "requests_per_hour": "1/h"},
        glossary={
            **COMMON_GLOSSARY,
            "clock": (
                "clock",
                "What hour / weekday mean: local time, local time of day from the first "
                "day's midnight (BurstGPT), or hours since trace start.",
            ),
            "weekday": ("weekday", "1 = Monday (relative traces: days since start mod 7 + 1)."),
            "hour": ("hour", "Hour of day (0-23) on the row's clock."),
            "hours_in_span": ("hours", "Times this slot occurs in the trace's span."),
            "requests_per_hour": ("requests / hour", "Requests / hours in span."),
            "share": ("share", "Share of the trace's requests in this slot."),
        },
    ),
    AnalysisPlugin(
        name="interarrival-fit",
        title="Inter-arrival fits",
        help="Exponential, gamma and Weibull maximum-likelihood fits of serving "
        "inter-arrival times per trace, with the KS goodness of fit and AIC.",
        run=_fits,
        needs=("requests",),
        needs_jobs=False,
        rank=203,
        units={"sample_mean_s": "s", "scale_s": "s", "fitted_mean_s": "s"},
        glossary={
            **COMMON_GLOSSARY,
            "distribution": ("law", "Fitted distribution (location fixed at 0)."),
            "gaps": ("gaps", "Inter-arrival times of the trace."),
            "zero_gaps": ("zero gaps", "Gaps of 0 (equal timestamps), left out of the fit."),
            "sample_mean_s": ("sample mean", "Mean of the positive gaps fitted."),
            "shape": ("shape", "Gamma k / Weibull c (exponential: 1)."),
            "scale_s": ("scale", "Scale parameter (exponential: the mean)."),
            "fitted_mean_s": ("fitted mean", "Mean of the fitted law."),
            "loglik": ("log-likelihood", "Log-likelihood of the gaps under the fit."),
            "aic": ("AIC", "2 x parameters - 2 x log-likelihood (lower is better)."),
            "ks_stat": ("KS D", "Kolmogorov-Smirnov distance to the fitted CDF."),
            "ks_pvalue": (
                "KS p",
                "KS p-value (optimistic: parameters estimated from the same sample).",
            ),
            "best": ("best", "Lowest AIC of the trace's fits."),
        },
    ),
)
