"""Serving sessions: turns per conversation, think time between turns and context growth,
for traces that name a session (BurstGPT v1.2 ``Session ID``, conversation logs).

A session's turns are its requests in arrival order. **Think time** before turn k is
the arrival of turn k minus the end of turn k-1: its arrival plus its observed end-to-end
latency where the trace has one (BurstGPT ``Elapsed time``), else its arrival alone
(then it includes the response time: ``think_basis`` says which). **Context growth** is
how the input tokens grow with the turn: a chat resends the conversation so far.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from gpu_trace.analyses.serving_common import COMMON_GLOSSARY, MIN_FIT, TRACE
from gpu_trace.plugins import AnalysisPlugin

NO_SESSIONS = (
    "no sessions in this trace (session ids: BurstGPT v1.2 conversation logs only; Azure, "
    "Mooncake and GenTD26 publish none)"
)


def turns(requests: pl.LazyFrame) -> pl.LazyFrame:
    """One row per request that names a session: its ``turn`` (1-based, arrival order)
    and ``think_s`` before it (null for turn 1).

    After the sort by session and arrival, a session's rows are contiguous: the previous
    row is the previous turn unless the row starts a session (its keys differ from the
    row before), so plain shifts and a forward fill do what per-session windows
    (``.over``) did, without hashing the keys three times (10 M requests: 20.5 -> 5.9 s
    CPU; BENCHMARKS.md, "Serving analyses on 10 M requests").
    """
    sess = [*TRACE, "session_id"]
    t = pl.col("arrival_time")
    first = pl.col("_first")
    prev_lat = pl.col("latency_s").shift(1)
    prev_end = t.shift(1) + pl.duration(
        microseconds=(prev_lat.fill_null(0) * 1e6).round().cast(pl.Int64)
    )
    row = pl.int_range(pl.len(), dtype=pl.Int64)
    return (
        requests.filter(pl.col("session_id").is_not_null())
        .select(*sess, "request_id", "arrival_time", "input_tokens", "latency_s", "latency_kind")
        .sort([*sess, "arrival_time", "request_id"])
        .with_columns(
            pl.any_horizontal(*(pl.col(c).ne_missing(pl.col(c).shift(1)) for c in sess))
            .fill_null(True)
            .alias("_first")
        )
        .with_columns(
            (row - pl.when(first).then(row).forward_fill() + 1).alias("turn"),
            pl.when(first)
            .then(None)
            .otherwise((t - prev_end).dt.total_microseconds() / 1e6)
            .alias("think_s"),
            pl.when(~first & prev_lat.is_not_null())
            .then(pl.lit("after the previous response"))
            .otherwise(pl.lit("after the previous arrival"))
            .alias("think_basis"),
        )
        .drop("_first")
    )


def sessions(requests: pl.LazyFrame) -> pl.LazyFrame:
    """Per trace and turn: sessions reaching that turn and their share of the trace's
    sessions (the turns-per-conversation survival curve), the input tokens at that turn
    (mean, median: context growth) and the think time before it (median, p90, and the
    share of negative ones: a next turn sent before the previous answer ended).
    """
    rows = turns(requests)
    think = pl.col("think_s")
    n = pl.col("sessions")
    return (
        rows.group_by([*TRACE, "turn"])
        .agg(
            pl.len().alias("sessions"),
            pl.col("input_tokens").mean().alias("input_tokens_mean"),
            pl.col("input_tokens").median().alias("input_tokens_p50"),
            think.median().alias("think_s_p50"),
            think.quantile(0.9, "linear").alias("think_s_p90"),
            pl.when(think.count() > 0)
            .then((think < 0).sum() / think.count())
            .alias("overlap_share"),
            pl.col("think_basis").filter(think.is_not_null()).mode().first().alias("think_basis"),
        )
        .with_columns(
            (n / n.filter(pl.col("turn") == 1).first().over(list(TRACE))).alias("session_share"),
            pl.when(n < MIN_FIT)
            .then(pl.format("only {} sessions reach this turn", n))
            .alias("caveat"),
        )
        .select(
            *TRACE,
            "turn",
            "sessions",
            "session_share",
            "input_tokens_mean",
            "input_tokens_p50",
            "think_s_p50",
            "think_s_p90",
            "overlap_share",
            "think_basis",
            "caveat",
        )
        .sort([*TRACE, "turn"])
    )


def _run(inputs: Any, options: Any) -> pl.LazyFrame:
    return sessions(inputs.requests)


def _empty(inputs: Any, options: Any) -> str | None:
    if inputs.requests.select(pl.len()).collect().item() == 0:
        return None
    return NO_SESSIONS


PLUGIN = AnalysisPlugin(
    name="sessions",
    title="Sessions",
    help="Turns per conversation, think time between turns and context growth, for serving "
    "traces with session ids (BurstGPT).",
    run=_run,
    needs=("requests",),
    needs_jobs=False,
    empty=_empty,
    rank=220,
    units={
        "sessions": "count",
        "session_share": "fraction",
        "input_tokens_mean": "tokens",
        "input_tokens_p50": "tokens",
        "think_s_p50": "s",
        "think_s_p90": "s",
        "overlap_share": "fraction",
    },
    glossary={
        **COMMON_GLOSSARY,
        "turn": ("turn", "Turn number within a session (1 = first request)."),
        "sessions": ("sessions", "Sessions with at least this many turns."),
        "session_share": ("share of sessions", "Sessions reaching this turn / all sessions."),
        "think_s_p50": ("think time p50", "Median think time before this turn."),
        "think_s_p90": ("think time p90", "90th percentile of think time before this turn."),
        "overlap_share": (
            "overlapping",
            "Share of turns sent before the previous response ended (negative think time).",
        ),
        "think_basis": ("think time from", "The previous turn's response end, or its arrival."),
    },
)
