"""Report sections built from the analyses: each takes the store's lazy inputs (already
restricted to the page's sources) and returns a :class:`Section` with escaped tables and
charts of aggregated data. A section with nothing to show says so instead of vanishing.

A section that shows one analysis is built from its declaration (:func:`plugin_section`:
its title, its run with the options the report wants, its chart); the composite sections
here (summary columns, utilization statistics, failures with energy, jobs with users,
arrivals, sharing with fragmentation, inventory) combine several analyses but draw each
chart through the analysis module that declares it, so a chart is defined once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import duckdb
import polars as pl

from gpu_trace import plugins
from gpu_trace.analyses import arrivals as arr
from gpu_trace.analyses import backlog as blg
from gpu_trace.analyses import energy as en
from gpu_trace.analyses import failures as fail
from gpu_trace.analyses import jobs as jb
from gpu_trace.analyses import occupancy as occ
from gpu_trace.analyses import power as pwr
from gpu_trace.analyses import queueing as que
from gpu_trace.analyses import sharing as shr
from gpu_trace.analyses import summary as smy
from gpu_trace.analyses import users as usr
from gpu_trace.analyses import utilization as utl
from gpu_trace.analyses.inputs import Inputs
from gpu_trace.column_units import analysis_units
from gpu_trace.display import unit_of
from gpu_trace.reports import charts
from gpu_trace.reports.analysis_charts import chart_of, declared_chart
from gpu_trace.reports.page import Section, esc, table_html

TOP_N = 10

SUMMARY_COLUMNS = (
    "source",
    "cluster",
    "jobs",
    "gpu_jobs",
    "med_run_s_gpu",
    "avg_run_s_gpu",
    "med_queue_s_gpu",
    "avg_queue_s_gpu",
    "avg_gpus",
    "max_gpus",
    "gpu_hours",
    "completed_gpu_job_share",
    "cancelled_gpu_job_share",
    "failed_gpu_job_share",
    "preempted_gpu_job_share",
    "unfinished_gpu_job_share",
)
"""Status shares are over *all* GPU jobs with unfinished (running, pending, unknown)
apart: the Helios-style rates over finished jobs alone (``analyze summary``) read as
"91 % failed" on openb, where three in four pods are still running or pending."""


def _rounded(
    frame: pl.DataFrame, digits: int = 3, units: Mapping[str, str] | None = None
) -> pl.DataFrame:
    """Floats rounded to ``digits`` for the table, except 0-1 shares (declared unit
    ``fraction``): those are shown as percentages with one decimal from the exact value
    (0.143 rounded to one digit first was shown as 10.0 %).
    """
    floats = [
        name
        for name, dtype in frame.schema.items()
        if dtype.is_float() and unit_of(name, units) != "fraction"
    ]
    return frame.with_columns(pl.col(floats).round(digits)) if floats else frame


def _empty(title: str, why: str) -> Section:
    return Section(title, f"<p>{why}</p>")


def has_jobs(inp: Inputs) -> bool:
    """Whether the page's sources hold any job (energy per VC needs some)."""
    return bool(inp.jobs.select(pl.len()).collect().item())


def summary_section(inp: Inputs) -> Section:
    """The summary table (status as shares of all GPU jobs) and its status chart."""
    table = smy.summary(inp.clipped_jobs).collect()  # running jobs up to as-of
    if table.height == 0:
        return _empty("Summary", "No jobs in the store.")
    sec = Section(
        "Summary",
        _as_of_line(inp)
        + table_html(
            _rounded(table.select(SUMMARY_COLUMNS)),
            caption="Summary (status as shares of all GPU jobs; unfinished is not failed)",
        ),
    )
    sec.charts.append(declared_chart(smy.PLUGIN, table))
    return sec


def _as_of_line(inp: Inputs) -> str:
    """One line naming the instant each cluster's figures describe (running jobs count
    up to it, pending ones wait until it): the export's own time, its latest timestamp,
    or ``--as-of``.
    """
    rows = (
        # Relative-time traces (openb) have no calendar instant to name.
        inp.clipped_jobs.filter(pl.col("time_basis").fill_null("absolute") != "relative")
        .group_by("source", "cluster")
        .agg(pl.col("as_of_time").max().alias("as_of"))
        .drop_nulls("as_of")
        .sort("source", "cluster")
        .collect()
    )
    if rows.height == 0:
        return ""
    parts = [
        f"{esc(r['cluster'] or r['source'])}: {r['as_of']:%Y-%m-%d %H:%M} UTC"
        for r in rows.iter_rows(named=True)
    ]
    return (
        "<p>As of (running jobs count up to it, pending ones have waited until it): "
        + "; ".join(parts)
        + ".</p>"
    )


def choose_freq(inp: Inputs, points: int = 2000) -> str:
    """A bin width giving about ``points`` bins over the jobs' time span."""
    span = (
        inp.clipped_jobs.select(
            (pl.col("end_time").max() - pl.col("start_time").min()).dt.total_seconds()
        )
        .collect()
        .item()
    )
    if span is None:
        return "1h"
    for freq, seconds in (("1min", 60), ("10min", 600), ("1h", 3600), ("1d", 86400)):
        if span / seconds <= points:
            return freq
    return "1d"


def utilization_section(inp: Inputs) -> Section:
    """Allocation statistics per cluster, the allocation series and its diurnal profile."""
    freq = choose_freq(inp)
    jobs = inp.clipped_jobs  # running jobs hold their GPUs until as-of
    series = occ.occupancy(jobs, inp.capacity, inp.machines, freq=freq).collect()
    if series.height == 0:
        return _empty("Utilization (allocation)", "No GPU job with both a start and an end time.")
    stats = (
        series.group_by("source", "cluster")
        .agg(
            pl.col("allocation_pct").mean().alias("mean_allocation_pct"),
            pl.col("allocation_pct").median().alias("median_allocation_pct"),
            pl.col("allocated_gpus").max().alias("peak_allocated_gpus"),
            pl.col("capacity_gpus").max().alias("capacity_gpus"),
            pl.col("capacity_basis").drop_nulls().unique().sort().str.join(", "),
        )
        .sort("source", "cluster")
    )
    sec = Section(
        "Utilization (allocation)",
        "<p>GPUs held by running jobs as a share of installed GPUs, time-weighted per "
        f"{freq} bin (allocation, not kernel activity; see the metric glossary).</p>"
        + charts.inferred_note_html(series)
        + table_html(_rounded(stats, 2)),
    )
    if series["allocation_pct"].is_null().all():
        # capacity 0 in every bin (every node unavailable in the inventory): no share to
        # draw, and an empty frame would look like "nothing ran"
        sec.html += (
            "<p>No allocation share to chart: the inventory lists no available GPU for "
            "the bins jobs ran in (capacity 0); GPUs held are in the table.</p>"
        )
        return sec
    sec.charts.append(declared_chart(utl.UTILIZATION, series))
    hourly = (
        series
        if freq in ("1min", "10min", "1h")
        else occ.occupancy(jobs, inp.capacity, inp.machines, freq="1h").collect()
    )
    sec.charts.append(
        charts.diurnal(
            occ.profiles(hourly.lazy(), inp.tz).collect(), charts.inferred_series(series)
        )
    )
    return sec


def queueing_section(inp: Inputs) -> Section:
    """Queueing delay by GPUs requested (with its chart) and by VC (top ones)."""
    by_size = que.queue_by(inp.clipped_jobs, "gpus").collect()  # pending: wait so far
    if by_size.height == 0:
        return _empty("Queueing", "No GPU job with a queueing delay.")
    note = que.censored_note(by_size)
    sec = Section(
        "Queueing",
        (f"<p>Note: {esc(note)}.</p>" if note else "")
        + table_html(_rounded(by_size, 1), caption="Queueing delay of GPU jobs by GPUs requested"),
    )
    sec.charts.append(declared_chart(que.PLUGIN, by_size))
    by_vc = que.queue_by(inp.clipped_jobs, "vc").collect()
    if by_vc.height > 1 or (by_vc.height == 1 and by_vc["vc"][0] is not None):
        top = by_vc.sort("jobs", descending=True).filter(
            pl.int_range(pl.len()).over("source", "cluster") < TOP_N
        )
        sec.html += table_html(
            _rounded(top, 1), caption=f"Queueing delay by virtual cluster (top {TOP_N} by jobs)"
        )
    return sec


def backlog_section(inp: Inputs) -> Section:
    """Pending GPU jobs: GPUs demanded over time (the exact step series, binned when
    long), the backlog at the as-of instant by partition, and the longest current waits.
    """
    title = blg.PLUGIN.title
    waits = blg.pending_intervals(inp.jobs).select(pl.len()).collect().item()
    if waits == 0:
        return _empty(title, "No GPU job waited to start (every job started as submitted).")
    # the exact steps (at most two rows a wait) while they fit a chart, else binned
    freq = choose_freq(inp) if 2 * waits > charts.MAX_POINTS else None
    series = blg.backlog_series(inp.jobs, freq=freq).collect()
    now = blg.backlog_now(inp.jobs, "partition").collect()
    sec = Section(
        title,
        "<p>GPU jobs submitted and not yet started, up to each cluster's as-of instant (its "
        "latest recorded time); waits of jobs still pending are waits so far.</p>",
    )
    sec.charts.append(charts.backlog_series(series))
    if now.height:
        sec.html += table_html(
            _rounded(now, 1), caption="Pending at the as-of instant, by partition"
        )
        sec.charts.append(declared_chart(blg.PLUGIN, now))
        top = blg.longest_waits(inp.jobs).collect()
        sec.html += table_html(_rounded(top, 1), caption=f"Longest current waits (top {blg.TOP_N})")
    else:
        sec.html += "<p>No GPU job pending at the as-of instant.</p>"
    return sec


def _energy_connection(inp: Inputs) -> duckdb.DuckDBPyConnection:
    """The page's placements and its power / utilization samples, for the energy SQL."""
    con = duckdb.connect(":memory:")
    samples = inp.gpu_samples.filter(pl.col("metric").is_in(["power_w", "gpu_util_pct"]))
    con.register("gpu_samples", samples.collect().to_arrow())
    con.register("placements", inp.placements.collect().to_arrow())
    return con


def failures_energy_section(inp: Inputs) -> Section:
    """Lost GPU hours by cause, MTBF, and energy by VC (telemetry where the GPUs were
    sampled, else the built-in power model) or per sampled GPU for telemetry sources.
    """
    title = "Failures by cause and energy"
    sec = Section(title)
    causes = fail.by_cause(inp.jobs, inp.placements, inp.events).collect()
    if causes.height:
        sec.html += table_html(
            _rounded(causes), caption="Failed, cancelled, preempted and retried jobs by cause"
        )
        sec.charts.append(charts.lost_by_cause(causes))
    rates = fail.mtbf(inp.jobs, inp.events, inp.gpu_samples).collect()
    if rates.height and (rates["node_hours"] > 0).any():
        sec.html += table_html(_rounded(rates), caption="Node-attributed failures and MTBF")
    con = _energy_connection(inp)
    if has_jobs(inp):
        per_job = en.per_job_energy(inp.jobs, con, pwr.load())
        by_vc = en.energy_by(per_job, "vc").sort("energy_kwh", descending=True, nulls_last=True)
        if by_vc.height:
            sec.html += table_html(
                _rounded(by_vc.head(TOP_N)),
                caption=f"Energy by VC (top {TOP_N}; basis: telemetry, model or mixed)",
            )
            sec.charts.append(charts.energy_by_group(by_vc.head(TOP_N), "vc"))
    devices = en.device_energy(con)
    if devices.height:
        sec.html += table_html(_rounded(devices), caption="Energy per sampled GPU (power_w)")
    if not sec.html:
        return _empty(title, "No failed jobs, GPU jobs or power telemetry.")
    return sec


def jobs_users_section(inp: Inputs) -> Section:
    """User concentration and top users; duration CDF, size shares and Lorenz charts."""
    sec = Section("Jobs and users")
    cdf = jb.duration_cdf(inp.jobs).collect()
    sizes = jb.size_shares(inp.jobs).collect()
    per_user = usr.per_user(inp.clipped_jobs)  # running jobs' GPU time up to as-of
    conc = usr.concentration(per_user).collect()
    if conc.height:
        sec.html += table_html(_rounded(conc), caption="Concentration of GPU time across users")
        top = per_user.filter(pl.int_range(pl.len()).over("source", "cluster") < TOP_N).collect()
        sec.html += table_html(
            _rounded(top, 2), caption=f"Top {TOP_N} users by GPU hours per cluster"
        )
    if cdf.height:
        sec.charts.append(charts.duration_cdf(cdf))
    if sizes.height:
        sec.charts.append(charts.size_shares(sizes))
    if conc.height:
        sec.charts.append(charts.lorenz(usr.lorenz(per_user).collect()))
    if not sec.html and not sec.charts:
        sec.html = "<p>No jobs.</p>"
    return sec


def arrivals_section(inp: Inputs) -> Section:
    """The weekday x hour heatmap of submissions, with each source's clock."""
    weekly = arr.arrivals(inp.scope.submitted(inp.jobs), inp.tz).collect()
    if weekly.height == 0:
        return _empty("Arrivals", "No submission times.")
    zones = ", ".join(
        f"{s}: {tz or 'relative times (hours since trace start)'}"
        for s, tz in sorted(inp.tz.items())
    )
    sec = Section("Arrivals", f"<p>Local time per source — {zones}.</p>")
    sec.charts.append(charts.arrivals_heatmap(weekly))
    return sec


def sharing_section(inp: Inputs) -> Section:
    """Request mix, GPU-type constraints and fragmentation on the largest inventory."""
    mix = shr.request_mix(inp.jobs).collect()
    if mix.height == 0:
        return _empty("GPU sharing and fragmentation", "No jobs.")
    sec = Section("GPU sharing and fragmentation", table_html(_rounded(mix), caption="Request mix"))
    sec.charts.append(declared_chart(shr.SHARING, mix))
    cons = shr.constraints(inp.jobs).collect()
    if cons.height and (cons["constrained"] > 0).any():
        sec.html += table_html(_rounded(cons), caption="GPU-type constraints")
    sizes = (
        inp.machines.group_by("dataset")
        .agg(pl.col("gpus").sum())
        .sort("gpus", "dataset", descending=[True, False])
        .collect()
    )
    if sizes.height:
        machines = inp.machines.filter(pl.col("dataset") == sizes["dataset"][0])
        frag = shr.fragmentation_by_type(
            shr.fragmentation(machines, shr.task_classes(inp.jobs))
        ).collect()
        sec.html += table_html(
            _rounded(frag),
            caption=f"Expected fragmented GPUs on the empty cluster ({sizes['dataset'][0]} inventory)",
        )
        sec.charts.append(charts.fragmentation(frag))
    return sec


def inventory_section(inp: Inputs) -> Section:
    """Machines and GPUs per inventory and GPU type; capacity over time where the source
    publishes it (Helios daily totals).
    """
    inv = shr.inventory(inp.machines).collect()
    cap = (
        inp.capacity.filter(pl.col("vc").is_null())
        .select("source", "cluster", "dataset", "time", "gpus", "basis")
        .sort("source", "cluster", "time")
        .collect()
    )
    if inv.height == 0 and cap.height == 0:
        return _empty(
            "Inventory and capacity",
            "No machine inventory or capacity published: allocation shares use the peak "
            "of GPUs held at once (inferred). Ingest a node inventory (sinfo, scontrol, "
            "nodes-csv, Kubernetes nodes) for the installed GPUs.",
        )
    sec = Section("Inventory and capacity")
    if inv.height:
        sec.html += table_html(inv, caption="Machines and GPUs per inventory and GPU type")
    if cap.height:
        per = cap.group_by("source", "cluster", "basis").agg(
            pl.len().alias("periods"),
            pl.col("gpus").min().alias("min_capacity_gpus"),
            pl.col("gpus").max().alias("max_capacity_gpus"),
        )
        sec.html += table_html(
            per.sort("source", "cluster", "basis"), caption="GPU capacity (cluster totals)"
        )
        dated = cap.filter(pl.col("time").is_not_null())
        if dated["time"].n_unique() > 1:
            sec.charts.append(charts.capacity(dated))
    return sec


SECTION_ROWS = 50
"""Rows a declared analysis' report table shows at most (the caption says how many it
has and which command prints them all); its chart still sees every row."""


def plugin_section(
    plugin: plugins.AnalysisPlugin,
    options: Any = None,
    caption: str | None = None,
    empty: str = "No rows.",
) -> Callable[[Inputs], Section]:
    """The report section of a declared analysis (:mod:`gpu_trace.plugins`): its result
    as a table, and its chart when it declares one. ``options`` (default: the declared
    defaults), ``caption`` (default: the first line of its help) and ``empty`` (what an
    empty result says) let a built-in section show the view the report wants.
    """
    chosen = plugin.options() if options is None else options

    def build(inp: Inputs) -> Section:
        title = plugin.title or plugin.name
        frame = plugin.run(inp, chosen).lazy().collect()
        if frame.height == 0:
            return _empty(title, empty)
        text = caption if caption is not None else plugin.help.split("\n")[0]
        units = analysis_units(plugin, chosen)
        shown = frame
        if frame.height > SECTION_ROWS:  # one row per job of a million-job store: a 20 MB page
            shown = frame.head(SECTION_ROWS)
            text += (
                f" (first {SECTION_ROWS:,} of {frame.height:,} rows, in the analysis' order; "
                f"all rows: gpu-trace analyze {plugin.name})"
            )
        sec = Section(title, table_html(_rounded(shown, units=units), caption=text, units=units))
        draw = chart_of(plugin)
        if draw is not None and options is None:  # the chart is of the defaults
            sec.charts.append(draw(frame))
        return sec

    build.__name__ = f"{plugin.name}_section"
    return build


failures_section = plugin_section(
    fail.PLUGIN,
    fail.FailuresOptions(by="gpus", lost=True),
    caption="GPU hours of jobs that ended failed, cancelled or preempted, by size",
    empty="No jobs.",
)
"""GPU hours lost to failed, cancelled and preempted jobs by size: ``analyze failures --lost
--by gpus``."""

SOURCE_SECTIONS_SHOWING: tuple[tuple[Callable[[Inputs], Section], tuple[str, ...]], ...] = (
    (inventory_section, ()),
    (summary_section, ("summary",)),
    (utilization_section, ("utilization",)),
    (queueing_section, ("queueing",)),
    (backlog_section, ("backlog",)),
    (failures_section, ("failures",)),
    (failures_energy_section, ("failures", "energy")),
    (jobs_users_section, ("jobs", "users")),
    (arrivals_section, ("arrivals",)),
    (sharing_section, ("sharing", "fragmentation")),
)
"""The built-in sections of a source page, in order, each with the analyses it shows:
the one declaration from which both the page and :data:`COMPOSED` follow."""

SOURCE_SECTIONS: tuple[Callable[[Inputs], Section], ...] = tuple(
    build for build, _ in SOURCE_SECTIONS_SHOWING
)
"""Analysis sections of a source page, in order."""

COMPOSED = frozenset(name for _, shows in SOURCE_SECTIONS_SHOWING for name in shows)
"""Analyses the built-in sections already show: their declared sections would repeat
them (derived from :data:`SOURCE_SECTIONS_SHOWING`, never kept by hand)."""


def plugin_sections() -> tuple[Callable[[Inputs], Section], ...]:
    """One section per declared analysis that has a chart and is not already shown by a
    built-in section, after the built-in ones.
    """
    return tuple(
        plugin_section(p)
        for p in plugins.analyses()
        # serving analyses (they read requests) have pages of their own
        if chart_of(p) is not None and p.name not in COMPOSED and "requests" not in p.needs
    )
