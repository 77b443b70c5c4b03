"""Which chart the report draws for each analysis: the report owns this mapping.

An analysis computes a table and knows nothing of altair; the report decides how to
draw it. :data:`BUILT_IN` maps each built-in analysis that has a chart of its default
output to the builder in :mod:`gpu_trace.reports.charts`. A third-party analysis plugin
(one file, outside this package) may still declare ``chart=`` itself: :func:`chart_of`
falls back to that, so a new analysis needs no edit here to get a report section.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import polars as pl

from gpu_trace import plugins
from gpu_trace.analyses.grouping import GROUP_BY
from gpu_trace.reports import charts, serving_charts, telemetry_charts

Builder = Callable[[pl.DataFrame], Any]


def _accounting(frame: pl.DataFrame) -> Any:
    key = next(k for k in GROUP_BY if k in frame.columns)
    return charts.accounting_usage(frame, key)


BUILT_IN: dict[str, Builder] = {
    "accounting": _accounting,
    "backlog": charts.backlog_now,  # the report adds the series over time itself
    "idle": telemetry_charts.idle_bars,
    "queueing": lambda frame: charts.queue_by(frame, "size_bucket"),
    "sharing": charts.request_mix,
    "summary": charts.status_shares,
    "utilization": charts.allocation_series,
    **serving_charts.BUILDERS,
}
"""Analysis name -> the chart of its output with default options."""


def chart_of(plugin: plugins.AnalysisPlugin) -> Builder | None:
    """The chart builder for ``plugin``'s default output: the report's own for a
    built-in analysis, else the one the plugin declares (None: a table only).
    """
    return BUILT_IN.get(plugin.name, plugin.chart)


def declared_chart(plugin: plugins.AnalysisPlugin, frame: pl.DataFrame) -> Any:
    """The chart of ``frame`` (``plugin``'s output with default options)."""
    build = chart_of(plugin)
    if build is None:
        msg = f"analysis {plugin.name!r} has no chart"
        raise plugins.PluginError(msg)
    return build(frame)
