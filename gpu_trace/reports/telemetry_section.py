"""The report's "GPU telemetry" section for one source's page: per host and metric the
number of samples, the share of nulls (N/A), mean and p95, and the device events
(XID, ECC, lost GPUs, driver reloads). Registered in ``site.EXTRA_SOURCE_SECTIONS``.
"""

from __future__ import annotations

import polars as pl

from gpu_trace.analyses.inputs import Inputs
from gpu_trace.reports.page import Section, table_html


def telemetry_section(inp: Inputs) -> Section:
    """The section; a one-line note for sources without telemetry."""
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
    if metrics.height == 0:
        return Section("GPU telemetry", "<p>No GPU telemetry for this source.</p>")
    events = (
        inp.events.group_by("source", "host", "kind", "code")
        .agg(pl.len().alias("events"))
        .sort("events", descending=True)
        .head(50)
        .collect()
    )
    html = table_html(metrics, caption="GPU telemetry by source, host and metric")
    html += (
        table_html(events, caption="Device events (XID, ECC, lost GPUs, driver reloads)")
        if events.height
        else "<p>No device events recorded.</p>"
    )
    return Section("GPU telemetry", html)
