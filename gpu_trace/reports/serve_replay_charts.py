"""Altair charts of the serving replay's pages (:mod:`gpu_trace.reports.serve_replay_section`),
each over an already-aggregated, small frame (at most a few thousand rows: the section
coarsens long runs before drawing).

Time on every axis is simulated seconds since the replayed window's first arrival, as
the engine records it (docs/serving-replay.md).
"""

from __future__ import annotations

import altair as alt
import polars as pl

from gpu_trace.reports.charts import WIDTH

LATENCY_ORDER = ["TTFT", "TPOT", "e2e"]
TIME_TITLE = "time since the window's first arrival (s)"


def _log_seconds(values: pl.Series, title: str) -> alt.X:
    """A log axis in seconds spanning the data (latencies run from milliseconds to
    minutes, so the round-duration ticks of the job charts do not fit).
    """
    span = values.to_frame().select(
        pl.col(values.name).filter(pl.col(values.name) > 0).min().alias("lo"),
        pl.col(values.name).filter(pl.col(values.name) > 0).max().alias("hi"),
    )
    lo = float(span["lo"][0] if span["lo"][0] is not None else 1e-3)
    hi = float(span["hi"][0] if span["hi"][0] is not None else 1.0)
    return alt.X(
        f"{values.name}:Q",
        scale=alt.Scale(type="log", domain=[lo, max(hi, lo * 10)], clamp=True),
        axis=alt.Axis(format="~g", grid=True),
        title=title,
    )


def latency_cdfs(points: pl.DataFrame, targets: pl.DataFrame, note: str = "") -> alt.LayerChart:
    """TTFT, TPOT and end-to-end latency CDFs (one line each, log seconds); dashed
    rules at the SLO targets in the colour of their metric.
    """
    colour = alt.Color("metric:N", title="latency", sort=LATENCY_ORDER)
    lines = (
        alt.Chart(points)
        .mark_line(interpolate="step-after")
        .encode(
            x=_log_seconds(points["seconds"], "seconds (log scale)"),
            y=alt.Y("share:Q", title="share of requests", axis=alt.Axis(format="%")),
            color=colour,
            tooltip=[
                "metric:N",
                alt.Tooltip("seconds:Q", format=".4g"),
                alt.Tooltip("share:Q", format=".1%"),
            ],
        )
    )
    chart = lines
    if targets.height:
        rules = (
            alt.Chart(targets)
            .mark_rule(strokeDash=[4, 4])
            .encode(
                x="seconds:Q",
                color=colour,
                tooltip=["target:N", alt.Tooltip("seconds:Q", format=".4g")],
            )
        )
        chart = lines + rules
    return chart.properties(
        width=WIDTH,
        title="Latency CDFs: TTFT, TPOT, end to end (dashed: the SLO targets)" + note,
    )


def attainment_over_time(
    bins: pl.DataFrame, overall: float | None, note: str = ""
) -> alt.LayerChart:
    """Per bin of arrival time (a bar over the bin), the share of the requests arriving
    in it that met every target; dashed: the run's attainment.
    """
    bars = (
        alt.Chart(bins)
        .mark_bar(opacity=0.85)
        .encode(
            x=alt.X("time_s:Q", title=TIME_TITLE, bin=alt.Bin(binned=True)),
            x2="time_end_s:Q",
            y=alt.Y(
                "attainment:Q",
                title="requests meeting every target",
                axis=alt.Axis(format="%"),
                scale=alt.Scale(domain=[0, 1]),
            ),
            tooltip=[
                alt.Tooltip("time_s:Q", title="arrivals from (s)", format=",.0f"),
                alt.Tooltip("time_end_s:Q", title="to (s)", format=",.0f"),
                "requests:Q",
                "met:Q",
                alt.Tooltip("attainment:Q", format=".1%"),
            ],
        )
    )
    rule_data = pl.DataFrame({"attainment": [overall]}, schema={"attainment": pl.Float64})
    rule = (
        alt.Chart(rule_data).mark_rule(strokeDash=[4, 4], color="#e45756").encode(y="attainment:Q")
    )
    return (bars + rule).properties(
        width=WIDTH, title="SLO attainment over time, by arrival bin (dashed: whole run)" + note
    )


def replica_heatmap(frame: pl.DataFrame, field: str, title: str, legend: str) -> alt.Chart:
    """Replica x time heatmap of a 0-1 share (utilisation, KV occupancy); blank cells:
    the replica was not serving in that bin.
    """
    replicas = frame["replica"].n_unique()
    role = pl.col("role").fill_null("mixed")
    data = frame.with_columns(  # split pools: the role beside the index
        pl.when(role == "mixed")
        .then(pl.col("replica").cast(pl.String))
        .otherwise(pl.format("{} ({})", "replica", role))
        .alias("row")
    )
    order = data.sort("replica")["row"].unique(maintain_order=True).to_list()
    return (
        alt.Chart(data)
        .mark_rect()
        .encode(
            x=alt.X("time_s:Q", title=TIME_TITLE, bin=alt.Bin(binned=True)),
            x2="time_end_s:Q",
            y=alt.Y("row:O", title="replica", sort=order),
            color=alt.Color(
                f"{field}:Q",
                title=legend,
                scale=alt.Scale(domain=[0, 1], scheme="blues", clamp=True),
                legend=alt.Legend(format="%"),
            ),
            tooltip=[
                "replica:O",
                "role:N",
                alt.Tooltip("time_s:Q", title="from (s)", format=",.0f"),
                alt.Tooltip("time_end_s:Q", title="to (s)", format=",.0f"),
                alt.Tooltip(f"{field}:Q", title=legend, format=".1%"),
            ],
        )
        .properties(width=WIDTH, height=max(60, min(14 * replicas, 420)), title=title)
    )


def queue_length(frame: pl.DataFrame, note: str = "") -> alt.Chart:
    """Requests waiting in the replicas' queues and running in their batches, summed
    over replicas, at each bin's end.
    """
    closing = frame.tail(1).with_columns(pl.col("time_end_s").alias("time_s"))
    long = (
        pl.concat([frame, closing])  # the last bin drawn to its end (a step line)
        .drop("time_end_s")
        .unpivot(
            index="time_s", on=["waiting", "running"], variable_name="state", value_name="requests"
        )
    )
    return (
        alt.Chart(long)
        .mark_line(interpolate="step-after")
        .encode(
            x=alt.X("time_s:Q", title=TIME_TITLE),
            y=alt.Y("requests:Q", title="requests (all replicas)"),
            color=alt.Color("state:N", title=None, sort=["waiting", "running"]),
            tooltip=[
                alt.Tooltip("time_s:Q", title="bin start (s)", format=",.0f"),
                "state:N",
                alt.Tooltip("requests:Q", format=",.1f"),
            ],
        )
        .properties(width=WIDTH, height=160, title="Queue length: waiting and running" + note)
    )


COMPARE_METRICS = (
    ("slo_attainment_ratio", "SLO attainment", "%"),
    ("ttft_p90_s", "p90 TTFT (s)", ".3~g"),
    ("gpu_seconds", "GPU-seconds", ",.0f"),
)


def comparison(runs: pl.DataFrame) -> alt.VConcatChart:
    """Runs side by side: SLO attainment, p90 TTFT and GPU-seconds, one bar per run."""
    height = max(40, 22 * runs.height)
    panels = []
    for field, title, fmt in COMPARE_METRICS:
        data = runs.select("run_id", pl.col(field).cast(pl.Float64)).drop_nulls(field)
        axis = alt.Axis(format=fmt)
        scale = alt.Scale(domain=[0, 1]) if field == "slo_attainment_ratio" else alt.Scale()
        panels.append(
            alt.Chart(data)
            .mark_bar()
            .encode(
                y=alt.Y("run_id:N", title=None, sort=None),
                x=alt.X(f"{field}:Q", title=title, axis=axis, scale=scale),
                tooltip=["run_id:N", alt.Tooltip(f"{field}:Q", format=fmt, title=title)],
            )
            .properties(width=WIDTH - 160, height=height, title=title)
        )
    return alt.vconcat(*panels).properties(title="Runs side by side")
