"""Altair charts of GPU telemetry: idle GPU-hours, utilization / memory / power over
time (per cluster, host and GPU) and a GPU x time heatmap.

Every builder takes a frame already aggregated and down-sampled by
:mod:`gpu_trace.analyses.telemetry_series` (at most ``MAX_BINS`` time points per line,
``MAX_SERIES`` lines per chart, ``HEATMAP_ROWS`` GPUs in the heatmap), so a week of
1-minute samples for 1,000 GPUs draws a few thousand marks, not ten million.
"""

from __future__ import annotations

import altair as alt
import polars as pl

from gpu_trace.reports.charts import FACET_WIDTH, WIDTH, top_header

TOP_IDLE = 20
"""Bars in the idle chart (the largest idle GPU-hours)."""


def idle_bars(frame: pl.DataFrame) -> alt.Chart:
    """Idle and busy GPU-hours of the jobs (users, accounts) with the most idle hours."""
    key = next((k for k in ("job_id", "user", "account") if k in frame.columns), "job_id")
    top = (
        frame.with_columns(pl.col(key).cast(pl.String).fill_null("(none)").alias("who"))
        .sort("idle_gpu_hours", descending=True, nulls_last=True)
        .head(TOP_IDLE)
        .with_columns(
            (pl.col("measured_gpu_hours") - pl.col("idle_gpu_hours")).alias("busy"),
            pl.col("idle_gpu_hours").alias("idle"),
        )
        .unpivot(index=["who"], on=["idle", "busy"], variable_name="part", value_name="hours")
    )
    return (
        alt.Chart(top)
        .mark_bar()
        .encode(
            y=alt.Y("who:N", title=key, sort="-x"),
            x=alt.X("hours:Q", stack="zero", title="measured GPU-hours"),
            color=alt.Color(
                "part:N",
                title=None,
                scale=alt.Scale(domain=["idle", "busy"], range=["#e45756", "#4c78a8"]),
            ),
            tooltip=["who:N", "part:N", alt.Tooltip("hours:Q", format=",.2f")],
        )
        .properties(width=WIDTH, title=f"Idle GPU-hours by {key} (top {TOP_IDLE})")
    )


SPARSE = 30
"""Lines with at most this many points also draw a dot per point, so a series of one
bin (one scrape) is visible, not a line of zero length."""


def series_lines(frame: pl.DataFrame, level: str, title: str) -> alt.Chart:
    """Mean value per time bin, one line per ``series`` (a cluster, host or GPU), one
    panel per metric (utilization %, memory GiB, power W): ``telemetry_series.series``.
    Relative-time frames (``elapsed_h``) are drawn on hours since the first sample,
    never on a 1970 calendar.
    """
    relative = "elapsed_h" in frame.columns
    x = (
        alt.X("elapsed_h:Q", title="hours since the first sample")
        if relative
        else alt.X("time:T", title="time (UTC)")
    )
    longest = frame.group_by("series", "label").len().select(pl.col("len").max()).item()
    points = (longest or 0) <= SPARSE
    return (
        alt.Chart(frame)
        .mark_line(point=points)
        .encode(
            x=x,
            y=alt.Y("value:Q", title=None),
            color=alt.Color("series:N", title=level),
            tooltip=[
                "series:N",
                "label:N",
                "elapsed_h:Q" if relative else alt.Tooltip("time:T", format="%Y-%m-%d %H:%M"),
                alt.Tooltip("value:Q", format=",.2f"),
            ],
        )
        .properties(width=FACET_WIDTH, height=160)
        .facet(facet=alt.Facet("label:N", title=None, header=top_header()), columns=3)
        .resolve_scale(y="independent")
        .properties(title=title)
    )


def heatmap(frame: pl.DataFrame, title: str) -> alt.Chart:
    """GPU (host/index) x time bin, coloured by mean utilization (0-100 %)."""
    xs = (
        alt.X("elapsed_h:O", title="hours since the first sample")
        if "elapsed_h" in frame.columns
        else alt.X("time:T", title="time (UTC)")
    )
    return (
        alt.Chart(frame)
        .mark_rect()
        .encode(
            x=xs,
            y=alt.Y("series:N", title="GPU (host/index)"),
            color=alt.Color("value:Q", title="utilization %", scale=alt.Scale(domain=[0, 100])),
            tooltip=["series:N", alt.Tooltip("value:Q", format=".1f")],
        )
        .properties(width=WIDTH, title=title)
    )
