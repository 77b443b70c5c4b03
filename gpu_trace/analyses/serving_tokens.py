"""Serving tokens: input (prompt) and output (generated) length distributions and their
correlation per trace / service / model, and the tokens per second the arrivals demand
over time, prefill (input) and decode (output) apart.

Percentiles are linear-interpolated (numpy's default); correlations are Pearson (on the
counts) and Spearman (on their ranks: lengths are heavy-tailed, one huge prompt moves
Pearson's alone). Demand puts every request's tokens in the bin it arrives in: what was
asked of the servers, not when they computed it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from gpu_trace.analyses.serving_common import (
    COMMON_GLOSSARY,
    MIN_FIT,
    RELATIVE_TIME,
    TRACE,
    binned,
    seconds,
)
from gpu_trace.plugins import AnalysisPlugin, option
from gpu_trace.values import choose

TOKEN_BY = ("trace", "service", "model")
"""Groupings of ``request-tokens --by``: the trace alone, or per service / model in it."""

QUANTILES = (0.5, 0.9, 0.99)

NO_TOKENS = "no token counts in this trace (diffusion requests: prompt characters, images, steps)"


def _stats(col: str) -> list[pl.Expr]:
    c = pl.col(col)
    out = [c.mean().alias(f"{col}_mean")]
    out += [c.quantile(q, "linear").alias(f"{col}_p{round(q * 100)}") for q in QUANTILES]
    return [*out, c.max().alias(f"{col}_max")]


def token_lengths(requests: pl.LazyFrame, by: str = "trace") -> pl.LazyFrame:
    """Per trace (and service / model with ``by``): requests, input and output token mean,
    p50 / p90 / p99 and max, their Pearson and Spearman correlation, and a ``caveat``
    (no token counts, too few requests for a correlation or a p99).
    """
    keys = [*TRACE, *([] if by == "trace" else [by])]
    i, o = pl.col("input_tokens"), pl.col("output_tokens")
    both = i.is_not_null() & o.is_not_null()
    n = pl.col("with_tokens")
    return (
        requests.group_by(keys)
        .agg(
            pl.len().alias("requests"),
            both.sum().alias("with_tokens"),
            *_stats("input_tokens"),
            *_stats("output_tokens"),
            pl.corr(i.filter(both), o.filter(both)).alias("pearson"),
            pl.corr(i.filter(both), o.filter(both), method="spearman").alias("spearman"),
        )
        .with_columns(
            pl.when(n == 0)
            .then(pl.lit(NO_TOKENS))
            .when(n < MIN_FIT)
            .then(
                pl.format("only {} requests with token counts: correlation and p99 unreliable", n)
            )
            .alias("caveat")
        )
        .sort(keys)
    )


@dataclass(frozen=True)
class TokensOptions:
    """`gpu-trace analyze request-tokens` options."""

    by: str = option(
        "trace", "One row per trace, or per service or model within it.", choices=TOKEN_BY
    )


def _tokens(inputs: Any, options: TokensOptions) -> pl.LazyFrame:
    choose("--by value", options.by, TOKEN_BY)
    return token_lengths(inputs.requests, options.by)


def token_demand(requests: pl.LazyFrame, freq: str = "1min") -> pl.LazyFrame:
    """Per trace and bin of ``freq``: requests, input (prefill) and output (decode)
    tokens arriving, and the same per second of the bin (empty bins: 0).
    """
    w = seconds(freq)
    lf = binned(
        requests,
        w,
        [
            pl.col("input_tokens").sum().alias("prefill_tokens"),
            pl.col("output_tokens").sum().alias("decode_tokens"),
            pl.col("input_tokens").is_not_null().any().alias("_has"),
            (pl.col("time_basis") == "relative").any().alias("_relative"),
        ],
    )
    return (
        lf.with_columns(
            pl.col("prefill_tokens", "decode_tokens").fill_null(0),
            pl.col("_has").fill_null(False).any().over(list(TRACE)).alias("_has"),
            pl.col("_relative").fill_null(False).any().over(list(TRACE)).alias("_relative"),
        )
        .filter(pl.col("_has"))  # a trace without token counts demands nothing we know
        .with_columns(
            pl.lit(freq).alias("resolution"),
            (pl.col("prefill_tokens") / w).alias("prefill_tokens_per_s"),
            (pl.col("decode_tokens") / w).alias("decode_tokens_per_s"),
            pl.when(pl.col("_relative")).then(pl.lit(RELATIVE_TIME)).alias("caveat"),
        )
        .select(
            *TRACE,
            "resolution",
            "time",
            "requests",
            "prefill_tokens",
            "decode_tokens",
            "prefill_tokens_per_s",
            "decode_tokens_per_s",
            "caveat",
        )
        .sort([*TRACE, "time"])
    )


@dataclass(frozen=True)
class DemandOptions:
    """`gpu-trace analyze token-demand` options."""

    freq: str = option("1min", "Bin width (30s, 1min, 10min, 1h).")


def _demand(inputs: Any, options: DemandOptions) -> pl.LazyFrame:
    return token_demand(inputs.requests, options.freq)


def _no_tokens(inputs: Any, options: Any) -> str | None:
    req = inputs.requests
    if req.select(pl.len()).collect().item() == 0:
        return None
    if req.filter(pl.col("input_tokens").is_not_null()).select(pl.len()).collect().item() == 0:
        return NO_TOKENS
    return None


def _stat_glossary(col: str, what: str) -> dict[str, tuple[str, str]]:
    out = {f"{col}_mean": (f"{what} mean", f"Mean {what} tokens.")}
    for q in QUANTILES:
        p = round(q * 100)
        out[f"{col}_p{p}"] = (f"{what} p{p}", f"{p}th percentile of {what} tokens (linear).")
    out[f"{col}_max"] = (f"{what} max", f"Largest {what} token count.")
    return out


PLUGINS = (
    AnalysisPlugin(
        name="request-tokens",
        title="Input and output lengths",
        help="Input and output token length distributions per serving trace (or service / "
        "model) and their correlation.",
        run=_tokens,
        options=TokensOptions,
        needs=("requests",),
        needs_jobs=False,
        empty=_no_tokens,
        rank=210,
        units={
            **{
                f"{c}_{s}": "tokens"
                for c in ("input_tokens", "output_tokens")
                for s in ("mean", "p50", "p90", "p99", "max")
            },
            "with_tokens": "count",
        },
        glossary={
            **COMMON_GLOSSARY,
            "with_tokens": ("with tokens", "Requests with both token counts."),
            **_stat_glossary("input_tokens", "input"),
            **_stat_glossary("output_tokens", "output"),
            "pearson": ("Pearson r", "Correlation of input and output tokens."),
            "spearman": ("Spearman rho", "Rank correlation of input and output tokens."),
        },
    ),
    AnalysisPlugin(
        name="token-demand",
        title="Token demand over time",
        help="Tokens per second the serving arrivals demand over time, prefill (input) and "
        "decode (output) apart, per trace.",
        run=_demand,
        options=DemandOptions,
        needs=("requests",),
        needs_jobs=False,
        empty=_no_tokens,
        rank=211,
        units={
            "prefill_tokens": "tokens",
            "decode_tokens": "tokens",
            "prefill_tokens_per_s": "tokens/s",
            "decode_tokens_per_s": "tokens/s",
        },
        glossary={
            **COMMON_GLOSSARY,
            "prefill_tokens": (
                "prefill tokens",
                "Input tokens of the requests arriving in the bin.",
            ),
            "decode_tokens": (
                "decode tokens",
                "Output tokens of the requests arriving in the bin.",
            ),
            "prefill_tokens_per_s": ("prefill tokens / s", "Prefill tokens / bin width."),
            "decode_tokens_per_s": ("decode tokens / s", "Decode tokens / bin width."),
        },
    ),
)
