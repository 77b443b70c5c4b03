"""Altair charts of the serving analyses (:mod:`gpu_trace.analyses.serving_arrivals` and
its siblings), one builder per analysis output with its default options.

Relative-time traces (Mooncake, BurstGPT, GenTD26: 1970-01-01 + offset) get an axis of
minutes since the trace's start instead of dates from 1970, which would read as real.
"""

from __future__ import annotations

import altair as alt
import polars as pl

from gpu_trace.reports.charts import (
    CALENDAR_FROM,
    FACET_COLUMNS,
    FACET_WIDTH,
    MAX_POINTS,
    WIDTH,
    cap_series,
    top_header,
)

TRACE = ["source", "dataset"]


def _trace(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.with_columns(pl.concat_str("source", pl.lit("/"), "dataset").alias("trace"))


def _time_axis(frame: pl.DataFrame) -> tuple[pl.DataFrame, str, str]:
    """(frame, x field, x title): the bin start for dated traces, minutes since the
    trace's first bin for relative ones.
    """
    if frame["time"].min() is not None and frame["time"].min() >= CALENDAR_FROM:  # type: ignore[operator]
        return frame.with_columns(pl.col("time").dt.replace_time_zone(None)), "time:T", "time (UTC)"
    start = pl.col("time").min().over("trace")
    minutes = (pl.col("time") - start).dt.total_seconds() / 60
    return frame.with_columns(minutes.alias("minutes")), "minutes:Q", "minutes since trace start"


def _thin(frame: pl.DataFrame, by: str = "trace") -> pl.DataFrame:
    """At most :data:`MAX_POINTS` rows, every k-th row of each series."""
    if frame.height <= MAX_POINTS:
        return frame
    step = -(-frame.height // MAX_POINTS)
    return frame.filter(pl.int_range(pl.len()).over(by) % step == 0)


def request_rate(frame: pl.DataFrame) -> alt.Chart:
    """Requests per second over time, one panel per bin width."""
    data, note = cap_series(_trace(frame), "requests", by="trace")
    data, x, title = _time_axis(data)
    data = _thin(data, "resolution")
    return (
        alt.Chart(data)
        .mark_line(interpolate="step-after", point=alt.OverlayMarkDef(size=12))
        .encode(
            x=alt.X(x, title=title),
            y=alt.Y("requests_per_s:Q", title="requests / s"),
            color=alt.Color("trace:N", title="trace"),
            tooltip=["trace:N", "resolution:N", x, alt.Tooltip("requests_per_s:Q", format=".3f")],
        )
        .properties(width=WIDTH, height=140)
        .facet(
            row=alt.Row(
                "resolution:N",
                title=None,
                header=top_header(),
                sort=alt.EncodingSortField(field="resolution_s", op="min"),
            )
        )
        .resolve_scale(y="independent")
        .properties(title="Request rate at several bin widths" + note)
    )


def burstiness(frame: pl.DataFrame) -> alt.LayerChart | None:
    """Index of dispersion by count window, per trace (1 = Poisson)."""
    data, note = cap_series(_trace(frame), "requests", by="trace")
    data = data.filter(pl.col("dispersion_index") > 0)  # a log axis: one window has none
    if data.height == 0:
        return None
    base = alt.Chart(data).encode(
        x=alt.X("window_s:Q", scale=alt.Scale(type="log"), title="count window (s)"),
        y=alt.Y("dispersion_index:Q", scale=alt.Scale(type="log"), title="index of dispersion"),
        color=alt.Color("trace:N", title="trace"),
        tooltip=[
            "trace:N",
            "window:N",
            alt.Tooltip("dispersion_index:Q", format=".2f"),
            alt.Tooltip("interarrival_cv:Q", format=".2f", title="inter-arrival CV"),
        ],
    )
    poisson = alt.Chart(pl.DataFrame({"y": [1.0]})).mark_rule(strokeDash=[4, 4]).encode(y="y:Q")
    return (base.mark_line(point=True) + poisson).properties(
        width=WIDTH, title="Burstiness: index of dispersion of counts (dashed: Poisson)" + note
    )


def profile(frame: pl.DataFrame) -> alt.Chart:
    """Share of requests per hour of day, one panel per trace (the clock in its title)."""
    data = _trace(frame).with_columns(
        pl.concat_str("trace", pl.lit(" ("), "clock", pl.lit(")")).alias("panel")
    )
    return (
        alt.Chart(data)
        .mark_bar()
        .encode(
            x=alt.X("hour:O", title="hour"),
            y=alt.Y("share:Q", axis=alt.Axis(format="%"), title="share of requests"),
            tooltip=["panel:N", "hour:O", "requests:Q", alt.Tooltip("share:Q", format=".1%")],
        )
        .properties(width=FACET_WIDTH, height=140)
        .facet(facet=alt.Facet("panel:N", title=None, header=top_header()), columns=FACET_COLUMNS)
        .properties(title="Requests per hour of day (see the clock of each panel)")
    )


def fits(frame: pl.DataFrame) -> alt.Chart | None:
    """KS distance of each fitted law per trace (lower is a better fit)."""
    data = _trace(frame).filter(pl.col("ks_stat").is_not_null())
    if data.height == 0:  # every trace too small to fit: the table's caveat says so
        return None
    return (
        alt.Chart(data)
        .mark_bar()
        .encode(
            y=alt.Y("trace:N", title=None),
            x=alt.X("ks_stat:Q", title="KS distance to the fitted law"),
            color=alt.Color("distribution:N", title="law"),
            yOffset="distribution:N",
            tooltip=[
                "trace:N",
                "distribution:N",
                alt.Tooltip("ks_stat:Q", format=".3f"),
                alt.Tooltip("shape:Q", format=".3f"),
                alt.Tooltip("scale_s:Q", format=".4f", title="scale (s)"),
                "best:N",
            ],
        )
        .properties(width=WIDTH, title="Inter-arrival fits: KS distance (lower is better)")
    )


def tokens(frame: pl.DataFrame) -> alt.FacetChart | None:
    """Input and output tokens at p50 / p90 / p99 per trace."""
    rows = []
    for col, what in (("input_tokens", "input"), ("output_tokens", "output")):
        for p in ("p50", "p90", "p99"):
            rows.append(
                _trace(frame).select(
                    "trace",
                    pl.lit(what).alias("tokens"),
                    pl.lit(p).alias("percentile"),
                    pl.col(f"{col}_{p}").cast(pl.Float64).alias("value"),
                )
            )
    data = pl.concat(rows).drop_nulls("value").filter(pl.col("value") > 0)  # a log axis
    if data.height == 0:  # no token counts (diffusion traces): the table says so
        return None
    return (
        alt.Chart(data)
        .mark_point(filled=True, size=80)  # a dot per percentile: bars on a log axis start at 0
        .encode(
            y=alt.Y("trace:N", title=None),
            x=alt.X(
                "value:Q",
                scale=alt.Scale(type="log"),
                axis=alt.Axis(format="~s", tickCount=4),
                title="tokens",
            ),
            color=alt.Color("percentile:N", sort=["p50", "p90", "p99"]),
            shape=alt.Shape("percentile:N", sort=["p50", "p90", "p99"]),
            tooltip=["trace:N", "tokens:N", "percentile:N", alt.Tooltip("value:Q", format=",.0f")],
        )
        .properties(width=FACET_WIDTH)
        .facet(column=alt.Column("tokens:N", title=None, header=top_header()))
        .properties(title="Input and output lengths (tokens)")
    )


def demand(frame: pl.DataFrame) -> alt.FacetChart:
    """Prefill and decode tokens per second over time: one panel per phase (each its own
    linear scale: prefill is often 100 x decode), one colour per trace.
    """
    data, note = cap_series(_trace(frame), "requests", by="trace")
    data, x, title = _time_axis(data)
    long = data.unpivot(
        index=["trace", x.split(":")[0]],
        on=["prefill_tokens_per_s", "decode_tokens_per_s"],
        variable_name="phase",
        value_name="tokens_per_s",
    ).with_columns(pl.col("phase").str.replace("_tokens_per_s", ""))
    long = _thin(long, "phase")
    return (
        alt.Chart(long)
        .mark_line(interpolate="step-after")
        .encode(
            x=alt.X(x, title=title),
            y=alt.Y("tokens_per_s:Q", axis=alt.Axis(format="~s"), title="tokens / s"),
            color=alt.Color("trace:N", title="trace"),
            tooltip=["trace:N", "phase:N", x, alt.Tooltip("tokens_per_s:Q", format=",.0f")],
        )
        .properties(width=WIDTH, height=140)
        .facet(row=alt.Row("phase:N", title=None, header=top_header(), sort=["prefill"]))
        .resolve_scale(y="independent")
        .properties(title="Token demand: prefill (input) and decode (output) per second" + note)
    )


def sessions(frame: pl.DataFrame) -> alt.HConcatChart:
    """Share of sessions reaching each turn, and median input tokens by turn."""
    data = _trace(frame)
    share = (
        alt.Chart(data)
        .mark_line(point=True)
        .encode(
            x=alt.X("turn:Q", title="turn"),
            y=alt.Y("session_share:Q", axis=alt.Axis(format="%"), title="sessions reaching it"),
            color=alt.Color("trace:N", title="trace"),
            tooltip=["trace:N", "turn:Q", "sessions:Q"],
        )
        .properties(width=FACET_WIDTH, title="Turns per session")
    )
    growth = (
        alt.Chart(data)
        .mark_line(point=True)
        .encode(
            x=alt.X("turn:Q", title="turn"),
            y=alt.Y("input_tokens_p50:Q", title="median input tokens"),
            color=alt.Color("trace:N", title="trace"),
            tooltip=["trace:N", "turn:Q", "input_tokens_p50:Q", "think_s_p50:Q"],
        )
        .properties(width=FACET_WIDTH, title="Context growth")
    )
    return alt.hconcat(share, growth)


def popularity(frame: pl.DataFrame) -> alt.Chart | alt.LayerChart:
    """Request share by rank (log-log) with the fitted Zipf line, per trace."""
    data, note = cap_series(_trace(frame), "requests", by="trace")
    data = data.filter(pl.col("rank") <= 200)
    points = (
        alt.Chart(data)
        .mark_point()
        .encode(
            x=alt.X("rank:Q", scale=alt.Scale(type="log"), title="rank"),
            y=alt.Y("share:Q", scale=alt.Scale(type="log"), title="share of requests"),
            color=alt.Color("trace:N", title="trace"),
            tooltip=["trace:N", "item:N", "rank:Q", alt.Tooltip("share:Q", format=".2%")],
        )
    )
    fitted = data.drop_nulls("zipf_share")
    if fitted.height == 0:  # too few items for a fit: the points alone
        return points.properties(width=WIDTH, title="Popularity by rank (too few items to fit)")
    line = (
        alt.Chart(fitted)
        .mark_line(strokeDash=[4, 4])
        .encode(x="rank:Q", y="zipf_share:Q", color="trace:N")
    )
    return (points + line).properties(
        width=WIDTH, title="Popularity by rank (dashed: Zipf fit)" + note
    )


def latency(frame: pl.DataFrame) -> alt.Chart:
    """Observed latency p50 / p90 / p99 per trace and latency kind."""
    data = _trace(frame).with_columns(
        pl.concat_str("trace", pl.lit(" ("), "latency_kind", pl.lit(")")).alias("series")
    )
    long = data.unpivot(
        index=["series"],
        on=["latency_p50_s", "latency_p90_s", "latency_p99_s"],
        variable_name="percentile",
        value_name="seconds",
    ).with_columns(pl.col("percentile").str.extract(r"(p\d+)"))
    return (
        alt.Chart(long)
        .mark_bar()
        .encode(
            y=alt.Y("series:N", title=None),
            x=alt.X("seconds:Q", title="latency (s)"),
            color=alt.Color("percentile:N", sort=["p50", "p90", "p99"]),
            yOffset=alt.YOffset("percentile:N", sort=["p50", "p90", "p99"]),
            tooltip=["series:N", "percentile:N", alt.Tooltip("seconds:Q", format=".2f")],
        )
        .properties(width=WIDTH, title="Observed latency")
    )


def prefix_reuse(frame: pl.DataFrame) -> alt.Chart:
    """Reusable share of block references with an unlimited cache, per trace."""
    data = _trace(frame)
    return (
        alt.Chart(data)
        .mark_bar()
        .encode(
            y=alt.Y("trace:N", title=None),
            x=alt.X(
                "reusable_share:Q",
                axis=alt.Axis(format="%"),
                scale=alt.Scale(domain=[0, 1]),
                title="block references reusable with an unlimited cache",
            ),
            tooltip=[
                "trace:N",
                "block_refs:Q",
                "unique_blocks:Q",
                alt.Tooltip("reusable_share:Q", format=".1%"),
            ],
        )
        .properties(width=WIDTH, title="Prefix reuse (unlimited cache)")
    )


def prefix_cache(frame: pl.DataFrame) -> alt.Chart:
    """LRU hit rate by capacity (log blocks), per trace; dashed: the unlimited cache."""
    data, note = cap_series(_trace(frame), by="trace")
    curve = (
        alt.Chart(data)
        .mark_line(point=True)
        .encode(
            x=alt.X("capacity_blocks:Q", scale=alt.Scale(type="log"), title="capacity (blocks)"),
            y=alt.Y("hit_rate:Q", axis=alt.Axis(format="%"), title="hit rate"),
            color=alt.Color("trace:N", title="trace"),
            tooltip=[
                "trace:N",
                "capacity_blocks:Q",
                alt.Tooltip("hit_rate:Q", format=".1%"),
            ],
        )
    )
    limit = (
        alt.Chart(data.unique(["trace"]))
        .mark_rule(strokeDash=[4, 4])
        .encode(y="unlimited_hit_rate:Q", color="trace:N")
    )
    return (curve + limit).properties(
        width=WIDTH, title="LRU prefix-cache hit rate by capacity (dashed: unlimited)" + note
    )


BUILDERS = {
    "request-rate": request_rate,
    "request-burstiness": burstiness,
    "request-profile": profile,
    "interarrival-fit": fits,
    "request-tokens": tokens,
    "token-demand": demand,
    "sessions": sessions,
    "popularity": popularity,
    "request-latency": latency,
    "prefix-reuse": prefix_reuse,
    "prefix-cache": prefix_cache,
}
"""Serving analysis name -> the chart of its default output (None: nothing to draw,
e.g. token lengths of a diffusion trace; the section's table says why)."""
