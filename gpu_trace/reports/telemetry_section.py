"""The report's "GPU telemetry" section for one source's page: per host and metric the
number of samples, the share of nulls (N/A), mean and p95; utilization, memory and power
over time per cluster, host and GPU, and a GPU x time utilization heatmap (down-sampled:
:mod:`gpu_trace.analyses.telemetry_series`); energy from telemetry by job, user and
namespace for the page's jobs (telemetry of any source in the store joins them:
:mod:`gpu_trace.analyses.attribution`); and the device events (XID, ECC, lost GPUs,
driver reloads). Registered in ``site.EXTRA_SOURCE_SECTIONS``.
"""

from __future__ import annotations

import polars as pl

from gpu_trace.analyses import energy as en
from gpu_trace.analyses import power as pwr
from gpu_trace.analyses import telemetry_series as ts
from gpu_trace.analyses.idle import connection
from gpu_trace.analyses.inputs import Inputs
from gpu_trace.reports import charts
from gpu_trace.reports import telemetry_charts as tc
from gpu_trace.reports.page import Section, table_html
from gpu_trace.store.generations import snapshot_root
from gpu_trace.store.scan import scan

TOP_JOBS = 10


def _over_time(inp: Inputs, sec: Section) -> None:
    """Line charts per cluster, host and GPU and the heatmap, per time basis."""
    machines = (  # the whole inventory: a node's cluster, whichever source sampled it
        scan(snapshot_root(inp.store), "machines") if inp.store is not None else inp.machines
    )
    for b in ts.binned(inp.gpu_samples, machines=machines):
        where = "" if b.time_basis == "absolute" else " (relative time: no timestamps)"
        for level in ts.LEVELS:
            frame, note = ts.series(b, level)
            if frame.height:
                title = f"GPU telemetry per {level}, {b.every} bins{where}{note}"
                sec.charts.append(tc.series_lines(frame, level, title))
        grid, note = ts.heatmap(b)
        if grid.height:
            sec.charts.append(tc.heatmap(grid, f"Utilization per GPU over time{where}{note}"))
        if b.time_basis == "relative":
            sec.html += (
                "<p>Some samples have relative times (outputs without timestamps ingested "
                "without <code>--start</code>): they are charted apart, on hours since "
                "their first sample, and never joined to jobs.</p>"
            )


def _job_energy(inp: Inputs, sec: Section) -> None:
    """Energy from telemetry by job, user and namespace (VC), when any job has some."""
    if not inp.jobs.select(pl.len()).collect().item():
        return
    per_job = en.per_job_energy(inp.jobs, connection(inp), pwr.load())
    measured = per_job.filter(pl.col("basis") == "telemetry")
    if measured.height == 0:
        return
    kube = set(measured["source"].unique().to_list()) == {"kubernetes"}
    group = "namespace" if kube else "vc"
    top = measured.sort("energy_kwh", descending=True, nulls_last=True).head(TOP_JOBS)
    sec.html += table_html(
        top.select(
            "source", "cluster", "job_id", "user", "vc", "gpu_hours", "gpu_energy_kwh",
            "mean_gpu_power_w", "coverage",
        ),
        caption=f"Energy from GPU telemetry by job (top {TOP_JOBS})",
    )  # fmt: skip
    for by in ("user", group):
        table = en.energy_by(measured, by).sort("energy_kwh", descending=True)
        sec.html += table_html(table, caption=f"Energy from GPU telemetry by {by}")
        sec.charts.append(charts.energy_by_group(table.head(TOP_JOBS), by))


def telemetry_section(inp: Inputs) -> Section:
    """The section; a one-line note for sources without telemetry."""
    sec = Section("GPU telemetry")
    v = pl.col("value")
    metrics = (
        inp.gpu_samples.group_by("source", "host", "metric")
        .agg(
            pl.col("unit").first(),
            pl.len().alias("samples"),
            v.is_null().mean().round(3).alias("null_share"),
            v.mean().round(3).alias("mean"),
            v.quantile(0.95, interpolation="linear").round(3).alias("p95"),
            pl.col("time").min().alias("first"),
            pl.col("time").max().alias("last"),
        )
        .sort("source", "host", "metric")
        .collect()
    )
    _job_energy(inp, sec)
    if metrics.height == 0:
        sec.html += "<p>No GPU telemetry for this source.</p>"
        return sec
    events = (
        inp.events.group_by("source", "host", "kind", "code")
        .agg(pl.len().alias("events"))
        .sort("events", descending=True)
        .head(50)
        .collect()
    )
    sec.html += table_html(metrics, caption="GPU telemetry by source, host and metric")
    _over_time(inp, sec)
    sec.html += (
        table_html(events, caption="Device events (XID, ECC, lost GPUs, driver reloads)")
        if events.height
        else "<p>No device events recorded.</p>"
    )
    return sec
