"""Altair chart builders for the analyses, used by the report.

Every builder takes an **already aggregated** frame (the output of the matching analysis)
so charts stay far below Vega's 5,000-row comfort zone and pages stay small; builders
that could receive long series thin them first (:func:`thin`).
"""

from __future__ import annotations

import datetime as dt
from html import escape

import altair as alt
import polars as pl

from gpu_trace.analyses.arrivals import CLOCK_SINCE_START

MAX_POINTS = 4000
WIDTH = 640
FACET_WIDTH = 260
FACET_COLUMNS = 3
"""Small multiples wrap after this many panels, so a page never scrolls sideways."""
MAX_SERIES = 10
"""At most this many colours in one chart (the palette has ten): more series are cut to
the largest ones, and the chart title says so."""

STATUS_ORDER = ["completed", "cancelled", "failed", "preempted", "unfinished"]
STATUS_COLOURS = ["#4c78a8", "#f58518", "#e45756", "#72b7b2", "#bab0ac"]

DURATION_TICKS: tuple[tuple[float, str], ...] = (
    (1, "1 s"),
    (10, "10 s"),
    (60, "1 min"),
    (600, "10 min"),
    (3600, "1 h"),
    (6 * 3600, "6 h"),
    (86400, "1 d"),
    (7 * 86400, "1 wk"),
    (30 * 86400, "30 d"),
    (365 * 86400, "1 y"),
)


def top_header() -> alt.Header:
    """Facet headers above each panel, horizontal: row labels written sideways overlap
    the y-axis title of short panels (and each other).
    """
    return alt.Header(
        labelOrient="top",
        labelAngle=0,
        labelAlign="left",
        labelAnchor="start",
        labelFontWeight="bold",
    )


def cap_series(
    frame: pl.DataFrame, weight: str | None = None, n: int = MAX_SERIES, by: str = "series"
) -> tuple[pl.DataFrame, str]:
    """Keep the ``n`` largest series (by the sum of ``weight``, else by rows) and a
    title note naming the cut, so colours never repeat and nothing is dropped silently.
    """
    if by not in frame.columns or frame[by].n_unique() <= n:
        return frame, ""
    size = pl.col(weight).sum() if weight else pl.len()
    ranked = frame.group_by(by).agg(size.alias("_w")).sort(["_w", by], descending=[True, False])
    total = ranked.height
    how = f"largest by {weight.replace('_', ' ')}" if weight else "first by name"
    ranked = ranked if weight else ranked.sort(by)
    keep = ranked[by].head(n)
    return frame.filter(pl.col(by).is_in(keep.implode())), f" ({n} of {total} shown, {how})"


def duration_axis(values: pl.Series, title: str) -> alt.X:
    """A log time axis with ticks at round durations (1 min, 1 h, 1 d...), labelled in
    words, spanning the data: readable ticks instead of 3 symlog ones or 1,048,576 s.
    """
    finite = values.drop_nulls()
    lo = float(finite.min()) if finite.len() else 1.0  # type: ignore[arg-type]
    hi = float(finite.max()) if finite.len() else 1.0  # type: ignore[arg-type]
    ticks = [t for t, _ in DURATION_TICKS if lo / 10 <= t <= hi * 10] or [1.0]
    label = "".join(f"datum.value == {t} ? '{name}' : " for t, name in DURATION_TICKS)
    return alt.X(
        f"{values.name}:Q",
        scale=alt.Scale(type="log", domain=[max(lo, 1.0), max(hi, 1.0)], clamp=True),
        axis=alt.Axis(values=ticks, labelExpr=label + "format(datum.value, ',')", grid=True),
        title=title,
    )


def thin(frame: pl.DataFrame, max_points: int = MAX_POINTS, by: str = "series") -> pl.DataFrame:
    """Keep at most ``max_points`` rows by taking every k-th row per ``by`` group."""
    if frame.height <= max_points:
        return frame
    groups = frame[by].n_unique() if by in frame.columns else 1
    step = -(-frame.height // (max_points // max(groups, 1) or 1) // max(groups, 1)) or 1
    if by in frame.columns:
        return frame.filter((pl.int_range(pl.len()).over(by) % step) == 0)
    return frame.gather_every(step)


def ordered(values: pl.Series) -> list[str]:
    """The distinct values of a category column in their declared order: an ``Enum``'s
    own order (size buckets 1, 2, 3-4, 5-8, ...), else first appearance. Not first
    appearance for an ``Enum``: with two traces, the second one's extra buckets would
    be appended after the first one's largest.
    """
    present = set(values.drop_nulls().cast(pl.String).to_list())
    if isinstance(values.dtype, pl.Enum):
        return [c for c in values.dtype.categories.to_list() if c in present]
    return values.cast(pl.String).unique(maintain_order=True).drop_nulls().to_list()


def _label(frame: pl.DataFrame, *cols: str) -> pl.DataFrame:
    present = [c for c in cols if c in frame.columns]
    return frame.with_columns(
        pl.concat_str([pl.col(c).cast(pl.String) for c in present], separator="/").alias("series")
    )


def _clock_axis(frame: pl.DataFrame, local: str) -> tuple[pl.DataFrame, str]:
    """Axis title for hour / weekday charts, and series labels that say "since trace
    start" for relative-time traces (whose 1970 "hours" are not a clock).
    """
    if "clock" not in frame.columns:
        return frame, local
    rel = pl.col("clock") == CLOCK_SINCE_START
    clocks = set(frame["clock"].unique().to_list())
    labelled = frame.with_columns(
        pl.when(rel)
        .then(pl.col("series") + pl.lit(" (since trace start)"))
        .otherwise(pl.col("series"))
        .alias("series")
    )
    if clocks == {CLOCK_SINCE_START}:
        return labelled, local.replace("local ", "") + " since trace start"
    if CLOCK_SINCE_START in clocks:
        return labelled, local + " (or since trace start, where marked)"
    return frame, local


def status_shares(summary: pl.DataFrame) -> alt.Chart:
    """Final-status shares of all GPU jobs and of all GPU time per trace, with
    ``unfinished`` (running, pending, unknown) as its own class: a trace that is mostly
    still running must not look mostly failed.
    """
    rows = []
    for status in STATUS_ORDER:
        rows.append(
            summary.select(
                pl.concat_str("source", pl.lit("/"), "cluster").alias("trace"),
                pl.lit(status).alias("status"),
                pl.col(f"{status}_gpu_job_share").alias("GPU jobs"),
                pl.col(f"{status}_gpu_hours_share").alias("GPU time"),
            )
        )
    long = pl.concat(rows).unpivot(
        index=["trace", "status"], variable_name="measure", value_name="share"
    )
    return (
        alt.Chart(long)
        .mark_bar()
        .encode(
            y=alt.Y("trace:N", title=None),
            x=alt.X("share:Q", stack="normalize", title="share", axis=alt.Axis(format="%")),
            color=alt.Color(
                "status:N",
                scale=alt.Scale(domain=STATUS_ORDER, range=STATUS_COLOURS),
                sort=STATUS_ORDER,
            ),
            order=alt.Order("status_rank:Q"),
            row=alt.Row("measure:N", title=None, header=top_header()),
            tooltip=["trace:N", "status:N", "measure:N", alt.Tooltip("share:Q", format=".1%")],
        )
        .transform_calculate(
            status_rank="indexof(" + str(STATUS_ORDER).replace(" ", "") + ", datum.status)"
        )
        .properties(width=WIDTH, title="Status of all GPU jobs and GPU time (unfinished apart)")
    )


CALENDAR_FROM = dt.datetime(1980, 1, 1, tzinfo=dt.UTC)
"""Series whose times all fall before this are offsets from their trace's start stored
on 1970-01-01 (``time_basis`` relative, e.g. openb, or hidden_epoch, PAI 2020): their
dates mean nothing, so they are drawn on an elapsed-time axis, never a calendar one."""


def split_clock(frame: pl.DataFrame, by: str = "series") -> tuple[pl.DataFrame, pl.DataFrame]:
    """(calendar series, elapsed-time series with ``elapsed_d``: days since the trace's
    start), split per ``by`` group (:data:`CALENDAR_FROM`).
    """
    if frame.height == 0 or "time" not in frame.columns:
        return frame, frame.clear()
    last = pl.col("time").max().over(by) if by in frame.columns else pl.col("time").max()
    relative = (last < CALENDAR_FROM).fill_null(False)  # no time: constant, calendar
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    elapsed = (pl.col("time") - pl.lit(epoch)).dt.total_seconds(fractional=True) / 86400
    return (
        frame.filter(~relative),
        frame.filter(relative).with_columns(elapsed.alias("elapsed_d")),
    )


INFERRED_NOTE = (
    "capacity inferred (no inventory): peak concurrent GPUs allocated, so 100 % = the "
    "busiest moment"
)
"""What the allocation chart and table say when a series has no inventory
(``capacity_basis`` = inferred, :mod:`gpu_trace.analyses.occupancy`)."""


def inferred_series(series: pl.DataFrame) -> list[str]:
    """The ``source/cluster`` labels whose capacity is inferred."""
    if "capacity_basis" not in series.columns:
        return []
    rows = series.filter(pl.col("capacity_basis") == "inferred")
    return sorted(_label(rows, "source", "cluster")["series"].unique().to_list())


def inferred_note_html(series: pl.DataFrame) -> str:
    """A paragraph naming the series whose capacity is inferred (empty when none)."""
    names = inferred_series(series)
    if not names:
        return ""
    return f"<p>{escape(', '.join(names))}: {escape(INFERRED_NOTE)}.</p>"


def allocation_series(series: pl.DataFrame, group: str = "cluster") -> alt.Chart:
    """Allocation (%) over time per cluster (or VC / GPU type), with a brush to zoom;
    traces with relative times on their own chart, in days since their start. Bins with
    no known share (capacity 0) are left out, not drawn as gaps of nothing; a series
    whose capacity is inferred is named in the subtitle.
    """
    inferred = inferred_series(series)
    if "allocation_pct" in series.columns:
        series = series.filter(pl.col("allocation_pct").is_not_null())
    labelled = _label(series, "source", group if group in series.columns else "cluster")
    labelled, note = cap_series(labelled, "allocated_gpus")
    calendar, relative = split_clock(thin(labelled))
    charts = []
    if calendar.height or not relative.height:
        charts.append(_allocation_chart(calendar, "time:T", None, note, inferred))
    if relative.height:
        charts.append(
            _allocation_chart(relative, "elapsed_d:Q", "days since trace start", note, inferred)
        )
    return charts[0] if len(charts) == 1 else alt.vconcat(*charts)  # type: ignore[return-value]


def _allocation_chart(
    frame: pl.DataFrame, x: str, title: str | None, note: str, inferred: list[str]
) -> alt.Chart:
    brush = alt.selection_interval(encodings=["x"])
    when = (
        alt.Tooltip("elapsed_d:Q", format=",.2f", title="days since start")
        if x.startswith("elapsed")
        else "time:T"
    )
    base = alt.Chart(frame).encode(
        x=alt.X(x, title=title),
        y=alt.Y("allocation_pct:Q", title="GPUs allocated (%)"),
        color=alt.Color("series:N", title=None),
        tooltip=[
            "series:N",
            when,
            alt.Tooltip("allocation_pct:Q", format=".1f"),
            alt.Tooltip("allocated_gpus:Q", format=",.1f"),
        ],
    )
    upper = (
        base.mark_line()
        .encode(x=alt.X(x, title=None, scale=alt.Scale(domain=brush)))
        .properties(
            width=WIDTH,
            height=220,
            title=alt.TitleParams(
                "GPU allocation over time" + note,
                subtitle=f"{', '.join(inferred)}: {INFERRED_NOTE}",
            )
            if inferred
            else "GPU allocation over time" + note,
        )
    )
    lower = base.mark_area(opacity=0.4).add_params(brush).properties(width=WIDTH, height=60)
    return alt.vconcat(upper, lower)  # type: ignore[return-value]


def diurnal(profile: pl.DataFrame, inferred: list[str] | None = None) -> alt.Chart:
    """Mean allocation by local hour of day, one line per trace; ``inferred`` names the
    series whose capacity is inferred (:func:`inferred_series` of the series profiled),
    said in the subtitle.
    """
    keys = ["series", "clock"] if "clock" in profile.columns else ["series"]
    frame = (
        _label(profile, "source", "cluster")
        .group_by(*keys, "hour")
        .agg(pl.col("allocation_pct").mean())
        .sort(*keys, "hour")
    )
    frame, title = _clock_axis(frame, "local hour of day")
    frame, note = cap_series(frame, "allocation_pct")
    return (
        alt.Chart(frame)
        .mark_line(point=True)
        .encode(
            x=alt.X("hour:O", title=title),
            y=alt.Y("allocation_pct:Q", title="GPUs allocated (%)"),
            color=alt.Color("series:N", title=None),
            tooltip=["series:N", "hour:O", alt.Tooltip("allocation_pct:Q", format=".1f")],
        )
        .properties(
            width=WIDTH,
            title=alt.TitleParams(
                "Diurnal allocation profile" + note,
                subtitle=f"{', '.join(inferred)}: {INFERRED_NOTE}",
            )
            if inferred
            else "Diurnal allocation profile" + note,
        )
    )


def duration_cdf(cdf: pl.DataFrame) -> alt.Chart:
    """CDF of run time at powers of two per trace, one panel per job class (GPU / CPU),
    on a log axis with round-duration ticks; at most :data:`MAX_SERIES` traces a panel.
    """
    if "job_class" not in cdf.columns:
        cdf = cdf.with_columns(pl.lit("all jobs").alias("job_class"))
    frame, note = cap_series(_label(cdf, "source", "cluster"), "n")
    sel = alt.selection_point(fields=["series"], bind="legend")
    return (
        alt.Chart(frame)
        .mark_line(point=True)
        .encode(
            x=duration_axis(frame["x_s"], "run time (log scale)"),
            y=alt.Y("cdf:Q", title="fraction of jobs", axis=alt.Axis(format="%")),
            color=alt.Color("series:N", title=None),
            opacity=alt.condition(sel, alt.value(1), alt.value(0.15)),
            tooltip=["series:N", "x_s:Q", alt.Tooltip("cdf:Q", format=".1%"), "n:Q"],
        )
        .add_params(sel)
        .properties(width=400, height=260)
        .facet(
            column=alt.Column("job_class:N", title=None, header=top_header()),
            title="Job duration CDF (click the legend)" + note,
        )
    )


def size_shares(sizes: pl.DataFrame) -> alt.Chart:
    """Share of GPU jobs vs share of GPU time per size bucket."""
    long = (
        _label(sizes, "source", "cluster")
        .select(
            "series",
            "size_bucket",
            pl.col("job_share").alias("jobs"),
            pl.col("gpu_time_share").alias("GPU time"),
        )
        .unpivot(index=["series", "size_bucket"], variable_name="measure", value_name="share")
    )
    order = ordered(sizes["size_bucket"])
    return (
        alt.Chart(long)
        .mark_bar()
        .encode(
            x=alt.X("size_bucket:N", sort=order, title="GPUs requested"),
            xOffset="measure:N",
            y=alt.Y("share:Q", axis=alt.Axis(format="%")),
            color=alt.Color("measure:N", title=None),
            facet=alt.Facet("series:N", title=None, columns=FACET_COLUMNS, header=top_header()),
            tooltip=[
                "series:N",
                "size_bucket:N",
                "measure:N",
                alt.Tooltip("share:Q", format=".1%"),
            ],
        )
        .properties(width=FACET_WIDTH, title="Jobs vs GPU time by job size")
    )


def queue_by(frame: pl.DataFrame, key: str) -> alt.Chart:
    """Median and p90 queueing delay per group."""
    long = (
        _label(frame, "source", "cluster")
        .select("series", pl.col(key).cast(pl.String).alias("group"), "median_s", "p90_s")
        .unpivot(index=["series", "group"], variable_name="stat", value_name="seconds")
    )
    order = ordered(frame[key])
    return (
        alt.Chart(long)
        .mark_bar()
        .encode(
            x=alt.X("group:N", sort=order, title=key),
            xOffset="stat:N",
            y=alt.Y("seconds:Q", title="queueing delay (s)"),
            color=alt.Color("stat:N", title=None),
            facet=alt.Facet("series:N", title=None, columns=FACET_COLUMNS, header=top_header()),
            tooltip=["series:N", "group:N", "stat:N", alt.Tooltip("seconds:Q", format=",.0f")],
        )
        .properties(width=FACET_WIDTH, title=f"Queueing delay by {key}")
    )


def lorenz(curve: pl.DataFrame) -> alt.Chart:
    """Cumulative share of GPU time vs share of users (top users first)."""
    labelled, note = cap_series(_label(curve, "source", "cluster"))
    frame = thin(labelled)
    return (
        alt.Chart(frame)
        .mark_line()
        .encode(
            x=alt.X(
                "user_share:Q", title="share of users (heaviest first)", axis=alt.Axis(format="%")
            ),
            y=alt.Y("value_share:Q", title="share of GPU time", axis=alt.Axis(format="%")),
            color=alt.Color("series:N", title=None),
            tooltip=[
                "series:N",
                alt.Tooltip("user_share:Q", format=".1%"),
                alt.Tooltip("value_share:Q", format=".1%"),
            ],
        )
        .properties(width=WIDTH, title="User concentration of GPU time" + note)
    )


def arrivals_heatmap(weekly: pl.DataFrame) -> alt.Chart:
    """Mean submissions per local weekday x hour (one panel per trace)."""
    frame, title = _clock_axis(_label(weekly, "source", "cluster"), "local hour")
    since_only = title.endswith("since trace start")
    return (
        alt.Chart(frame)
        .mark_rect()
        .encode(
            x=alt.X("hour:O", title=title),
            y=alt.Y(
                "weekday:O",
                title="day since trace start (mod 7, 1 = first)"
                if since_only
                else "weekday (1 = Mon)",
            ),
            color=alt.Color("jobs_per_hour:Q", title="jobs / hour"),
            row=alt.Row("series:N", title=None, header=top_header()),
            tooltip=[
                "series:N",
                "weekday:O",
                "hour:O",
                alt.Tooltip("jobs_per_hour:Q", format=",.1f"),
            ],
        )
        .properties(width=WIDTH, title="Submissions by weekday and hour")
    )


def request_mix(mix: pl.DataFrame) -> alt.Chart:
    """Share of jobs by request kind (CPU-only, fractional, whole, multi-GPU)."""
    frame = _label(mix, "source", "cluster")
    return (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            y=alt.Y("series:N", title=None),
            x=alt.X(
                "job_share:Q", stack="normalize", axis=alt.Axis(format="%"), title="share of jobs"
            ),
            color=alt.Color("request:N", title=None),
            tooltip=["series:N", "request:N", "jobs:Q", alt.Tooltip("job_share:Q", format=".1%")],
        )
        .properties(width=WIDTH, title="GPU request mix")
    )


def fragmentation(by_type: pl.DataFrame) -> alt.Chart:
    """Expected fragmented GPUs per GPU type."""
    frame = by_type.filter(pl.col("gpu_type") != "(all)")
    return (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            x=alt.X("gpu_type:N", title="GPU type"),
            y=alt.Y("fragmented_pct:Q", title="free GPU capacity fragmented (%)"),
            tooltip=[
                "gpu_type:N",
                "machines:Q",
                "gpus:Q",
                alt.Tooltip("fragmented_gpus:Q", format=".2f"),
            ],
        )
        .properties(width=WIDTH, title="Fragmentation given the request mix (FGD measure)")
    )


def capacity(cap: pl.DataFrame) -> alt.Chart:
    """Installed GPUs over time per cluster (step line); relative-time traces in days
    since their start (:func:`split_clock`).
    """
    labelled, note = cap_series(_label(cap, "source", "cluster"), "gpus")
    calendar, relative = split_clock(thin(labelled))
    charts = []
    if calendar.height or not relative.height:
        charts.append(_capacity_chart(calendar, alt.X("time:T", title=None), note))
    if relative.height:
        x = alt.X("elapsed_d:Q", title="days since trace start")
        charts.append(_capacity_chart(relative, x, note))
    return charts[0] if len(charts) == 1 else alt.vconcat(*charts)  # type: ignore[return-value]


def _capacity_chart(frame: pl.DataFrame, x: alt.X, note: str) -> alt.Chart:
    return (
        alt.Chart(frame)
        .mark_line(interpolate="step-after")
        .encode(
            x=x,
            y=alt.Y("gpus:Q", title="GPUs installed"),
            color=alt.Color("series:N", title=None),
            tooltip=["series:N", "time:T", "gpus:Q", "basis:N"],
        )
        .properties(width=WIDTH, title="GPU capacity over time" + note)
    )


def lost_by_cause(causes: pl.DataFrame) -> alt.Chart:
    """GPU hours lost per failure cause (``failures.by_cause``), one bar per cluster."""
    frame = _label(causes, "source", "cluster")
    return (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            y=alt.Y("series:N", title=None),
            x=alt.X("lost_gpu_hours:Q", stack="zero", title="GPU hours lost"),
            color=alt.Color("cause:N", title="cause"),
            tooltip=[
                "series:N",
                "cause:N",
                "jobs:Q",
                alt.Tooltip("lost_gpu_hours:Q", format=".2f"),
                alt.Tooltip("lost_share:Q", format=".1%"),
            ],
        )
        .properties(width=WIDTH, title="GPU hours lost by cause")
    )


def energy_by_group(table: pl.DataFrame, key: str) -> alt.Chart:
    """Energy (kWh) per user or VC (``energy.energy_by``), GPU and host parts stacked."""
    frame = table.unpivot(
        index=["source", "cluster", key, "basis"],
        on=["gpu_energy_kwh", "host_energy_kwh"],
        variable_name="part",
        value_name="kwh",
    ).with_columns(pl.col(key).fill_null("(none)"))
    return (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            y=alt.Y(f"{key}:N", title=key, sort="-x"),
            x=alt.X("kwh:Q", stack="zero", title="energy (kWh)"),
            color=alt.Color("part:N", title=None),
            tooltip=[f"{key}:N", "part:N", "basis:N", alt.Tooltip("kwh:Q", format=".3f")],
        )
        .properties(width=WIDTH, title=f"Energy by {key}")
    )


TOP_GROUPS = 15
"""Groups shown per panel of :func:`accounting_usage` (the largest by GPU hours)."""


def accounting_usage(frame: pl.DataFrame, key: str) -> alt.Chart:
    """GPU hours and GPU-weighted queue hours per account / user / ... group
    (``analyze accounting``), the :data:`TOP_GROUPS` largest per source and cluster.
    """
    top = (
        _label(frame, "source", "cluster")
        .with_columns(pl.col(key).cast(pl.String).fill_null("(none)").alias("group"))
        .sort("gpu_hours", descending=True, nulls_last=True)
        .group_by("series", maintain_order=True)
        .head(TOP_GROUPS)
    )
    long = top.select("series", "group", "gpu_hours", "gpu_queue_hours").unpivot(
        index=["series", "group"], variable_name="measure", value_name="hours"
    )
    return (
        alt.Chart(long)
        .mark_bar()
        .encode(
            y=alt.Y("group:N", title=key, sort="-x"),
            x=alt.X("hours:Q", title="GPU hours"),
            yOffset="measure:N",
            color=alt.Color("measure:N", title=None),
            facet=alt.Facet("series:N", title=None, columns=FACET_COLUMNS, header=top_header()),
            tooltip=["series:N", "group:N", "measure:N", alt.Tooltip("hours:Q", format=",.1f")],
        )
        .properties(
            width=FACET_WIDTH, title=f"GPU hours and GPU queue hours by {key} (top {TOP_GROUPS})"
        )
    )


def backlog_series(series: pl.DataFrame) -> alt.Chart:
    """GPUs demanded by pending jobs over time per cluster (step line: the backlog holds
    from one change to the next), from :func:`gpu_trace.analyses.backlog.backlog_series`.
    """
    groups = [c for c in ("partition", "vc", "user", "size_bucket") if c in series.columns]
    labelled, note = cap_series(_label(series, "source", "cluster", *groups), "pending_gpus")
    frame = thin(labelled)
    return (
        alt.Chart(frame)
        .mark_line(interpolate="step-after", point=frame.height <= 200)
        .encode(
            x=alt.X("time:T", title=None),
            y=alt.Y("pending_gpus:Q", title="GPUs pending"),
            color=alt.Color("series:N", title=None),
            tooltip=[
                "series:N",
                "time:T",
                alt.Tooltip("pending_jobs:Q", format=",.1f"),
                alt.Tooltip("pending_gpus:Q", format=",.1f"),
            ],
        )
        .properties(width=WIDTH, title="GPUs demanded by pending jobs over time" + note)
    )


def backlog_now(now: pl.DataFrame) -> alt.Chart:
    """GPUs pending at the as-of instant per group (bars; one panel per cluster), from
    :func:`gpu_trace.analyses.backlog.backlog_now`.
    """
    keys = ("partition", "vc", "user", "size_bucket")
    key = next((k for k in keys if k in now.columns), None)
    frame = _label(now, "source", "cluster")
    frame = frame.with_columns(
        (pl.col(key).cast(pl.String).fill_null("(none)") if key else pl.col("series")).alias(
            "group"
        )
    )
    order = frame["group"].unique(maintain_order=True).to_list()
    return (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            x=alt.X("group:N", sort=order, title=key or "cluster"),
            y=alt.Y("pending_gpus:Q", title="GPUs pending"),
            color=alt.Color("series:N", title=None),
            facet=alt.Facet("series:N", title=None, columns=FACET_COLUMNS, header=top_header()),
            tooltip=[
                "series:N",
                "group:N",
                "pending_jobs:Q",
                alt.Tooltip("pending_gpus:Q", format=",.1f"),
                alt.Tooltip("longest_wait_s:Q", format=",.0f"),
            ],
        )
        .properties(
            width=FACET_WIDTH, title=f"GPUs pending at the as-of instant by {key or 'cluster'}"
        )
    )
