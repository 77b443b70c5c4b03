"""The report's serving pages: one page per serving source (requests, not jobs), with a
section per serving analysis (its table, caveats included, and its chart) after a
summary of the source's traces; and the overview's serving table.

A serving analysis is one that reads ``requests`` (``AnalysisPlugin.needs``): the job
pages leave those out, the serving pages show only those. An analysis with nothing to
count on a source (no sessions, no latency, no model names) says why in one line
(:func:`gpu_trace.analyses.empty.why_empty`) instead of an empty table.
"""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

from gpu_trace import plugins
from gpu_trace.analyses.empty import why_empty
from gpu_trace.analyses.inputs import Inputs
from gpu_trace.analyses.summary import serving_summary
from gpu_trace.column_units import analysis_units
from gpu_trace.reports.analysis_charts import chart_of
from gpu_trace.reports.page import Section, esc, table_html
from gpu_trace.reports.sections import SECTION_ROWS, _rounded

SERVING_TABLES = frozenset({"requests", "request_blocks"})


def is_serving(plugin: plugins.AnalysisPlugin) -> bool:
    """Whether ``plugin`` analyses serving requests (it reads ``requests``)."""
    return bool(SERVING_TABLES & set(plugin.needs))


def has_requests(inp: Inputs) -> bool:
    """Whether the page's sources hold serving requests."""
    return bool(inp.requests.select(pl.len()).collect().item())


def serving_summary_section(inp: Inputs) -> Section:
    """Requests, span and mean / median tokens per trace of the page."""
    table = serving_summary(inp.requests).collect()
    if table.height == 0:
        return Section("Serving traces", "<p>No serving requests.</p>")
    summary = next(p for p in plugins.analyses() if p.name == "summary")
    units = analysis_units(summary, summary.options())
    html = table_html(
        _rounded(table, units=units), caption="Serving traces: requests and tokens", units=units
    )
    relative = table.filter(pl.col("time_basis") == "relative")["dataset"].to_list()
    if relative:
        html += (
            "<p>Relative time basis (" + esc(", ".join(relative)) + "): arrival times are "
            "offsets from the trace's start; dates and, where the caveat says so, hours of "
            "day are not real.</p>"
        )
    return Section("Serving traces", html)


def serving_plugin_section(plugin: plugins.AnalysisPlugin) -> Callable[[Inputs], Section]:
    """The section of one serving analysis with its default options."""
    options = plugin.options()

    def build(inp: Inputs) -> Section:
        title = plugin.title or plugin.name
        frame = plugin.run(inp, options).lazy().collect()
        if frame.height == 0:
            reason = why_empty(plugin, inp, options).split(": no rows: ", 1)[-1]
            return Section(title, f"<p>Nothing to show: {esc(reason)}.</p>")
        units = analysis_units(plugin, options)
        caption = plugin.help.split("\n")[0]
        shown = frame
        if frame.height > SECTION_ROWS:
            shown = frame.head(SECTION_ROWS)
            caption += (
                f" (first {SECTION_ROWS:,} of {frame.height:,} rows; all rows: "
                f"gpu-trace analyze {plugin.name})"
            )
        sec = Section(title, table_html(_rounded(shown, units=units), caption=caption, units=units))
        draw = chart_of(plugin)
        chart = draw(frame) if draw is not None else None
        if chart is not None:  # None: nothing to draw (the table's caveat says why)
            sec.charts.append(chart)
        return sec

    build.__name__ = f"{plugin.name}_section"
    return build


def serving_sections() -> tuple[Callable[[Inputs], Section], ...]:
    """The sections of a serving source's page, in order."""
    return (
        serving_summary_section,
        *(serving_plugin_section(p) for p in plugins.analyses() if is_serving(p)),
    )
