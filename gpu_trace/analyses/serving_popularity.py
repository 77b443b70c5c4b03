"""Serving popularity: which models, adapters, services or users the requests go to, by
request share, with a Zipf fit of the rank-frequency curve.

**Zipf fit**: least squares of ln(requests) on ln(rank) over the items of a trace (rank 1
= most requested); the exponent is minus the slope and ``zipf_r2`` the coefficient of
determination of that line (1 = a perfect power law). With fewer than
:data:`MIN_ITEMS` items the line is not estimated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from gpu_trace.analyses.serving_common import COMMON_GLOSSARY, TRACE
from gpu_trace.plugins import AnalysisPlugin, option
from gpu_trace.values import choose

POPULARITY_BY = ("model", "adapter_ids", "adapters", "service", "user")

MIN_ITEMS = 3
"""Items below which no Zipf line is fitted (two points always lie on a line)."""


def popularity(requests: pl.LazyFrame, by: str = "model") -> pl.LazyFrame:
    """One row per trace and item of ``by``: its ``rank``, requests, share and
    cumulative share, the trace's Zipf exponent and R^2, and the share the fitted line
    gives that rank. Requests without the column (null) are left out and counted in
    ``unnamed_requests``.
    """
    items = (
        requests.group_by([*TRACE, by])
        .agg(pl.len().alias("requests"))
        .with_columns(pl.col(by).cast(pl.String).alias("item"))
    )
    unnamed = items.filter(pl.col(by).is_null()).select(
        *TRACE, pl.col("requests").alias("unnamed_requests")
    )
    named = items.filter(pl.col(by).is_not_null()).drop(by)
    ranked = named.sort([*TRACE, "requests", "item"], descending=[False, False, True, False])
    ranked = ranked.with_columns(pl.int_range(1, pl.len() + 1).over(list(TRACE)).alias("rank"))
    x = pl.col("rank").log()
    y = pl.col("requests").log()
    fit = ranked.group_by(list(TRACE)).agg(
        pl.len().alias("items"),
        (-pl.cov(x, y) / x.var()).alias("zipf_exponent"),
        (pl.corr(x, y) ** 2).alias("zipf_r2"),
        y.mean().alias("_ym"),
        x.mean().alias("_xm"),
    )
    few = pl.col("items") < MIN_ITEMS
    return (
        ranked.join(fit, on=list(TRACE))
        .join(unnamed, on=list(TRACE), how="left")
        .with_columns(
            pl.col("unnamed_requests").fill_null(0),
            (pl.col("requests") / pl.col("requests").sum().over(list(TRACE))).alias("share"),
            pl.when(few).then(None).otherwise(pl.col("zipf_exponent")).alias("zipf_exponent"),
            pl.when(few).then(None).otherwise(pl.col("zipf_r2")).alias("zipf_r2"),
        )
        .with_columns(
            pl.col("share").cum_sum().over(list(TRACE), order_by="rank").alias("cum_share"),
            # the fitted line's count at this rank
            (pl.col("_ym") - pl.col("zipf_exponent") * (x - pl.col("_xm"))).exp().alias("_fit"),
        )
        .with_columns(
            # the regression line itself, over the trace's requests (not renormalized:
            # the dashed line of the chart is the fitted line)
            (pl.col("_fit") / pl.col("requests").sum().over(list(TRACE))).alias("zipf_share"),
            pl.when(few)
            .then(pl.format("only {} distinct {}: no Zipf fit", pl.col("items"), pl.lit(by)))
            .alias("caveat"),
        )
        .select(
            *TRACE,
            pl.lit(by).alias("by"),
            "item",
            "rank",
            "requests",
            "share",
            "cum_share",
            "zipf_share",
            "zipf_exponent",
            "zipf_r2",
            "items",
            "unnamed_requests",
            "caveat",
        )
        .sort([*TRACE, "rank"])
    )


@dataclass(frozen=True)
class PopularityOptions:
    """`gpu-trace analyze popularity` options."""

    by: str = option(
        "model",
        "Rank models, adapter ids, adapter counts, services or users.",
        choices=POPULARITY_BY,
    )


def _run(inputs: Any, options: PopularityOptions) -> pl.LazyFrame:
    choose("--by value", options.by, POPULARITY_BY)
    return popularity(inputs.requests, options.by)


def _empty(inputs: Any, options: PopularityOptions) -> str | None:
    if inputs.requests.select(pl.len()).collect().item() == 0:
        return None
    return (
        f"no request names a {options.by} here (Azure and Mooncake publish no model; "
        "adapter ids are published by no trace yet: GenTD26 gives a count, --by adapters)"
    )


PLUGIN = AnalysisPlugin(
    name="popularity",
    title="Popularity",
    help="Models, adapters, services or users of serving requests by request share, with "
    "a Zipf fit (exponent, R^2) per trace.",
    run=_run,
    options=PopularityOptions,
    needs=("requests",),
    needs_jobs=False,
    empty=_empty,
    rank=230,
    units={
        "rank": "count",
        "share": "fraction",
        "cum_share": "fraction",
        "zipf_share": "fraction",
        "items": "count",
        "unnamed_requests": "count",
    },
    glossary={
        **COMMON_GLOSSARY,
        "by": ("ranked", "What the items are (model, adapter ids, ...)."),
        "item": ("item", "The model / adapter / service / user, as the trace writes it."),
        "rank": ("rank", "1 = the most requested item of the trace."),
        "cum_share": ("cumulative share", "Share of requests of this and more popular items."),
        "zipf_share": (
            "Zipf share",
            "The fitted log-log line at this rank, over the trace's requests.",
        ),
        "zipf_exponent": ("Zipf exponent", "s in requests ~ rank^-s (least squares, log-log)."),
        "zipf_r2": ("Zipf R^2", "R^2 of the log-log line (1 = exact power law)."),
        "items": ("items", "Distinct items of the trace."),
        "unnamed_requests": ("unnamed", "Requests without this column (left out)."),
    },
)
