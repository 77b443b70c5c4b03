"""``gpu-trace analyze ...``: the characterization analyses, printed as tables or
written as CSV / JSON / Parquet.

Every command is generated from an analysis declaration (:mod:`gpu_trace.plugins`: a
module-level ``PLUGIN`` / ``PLUGINS`` in :mod:`gpu_trace.analyses`, or an installed
plugin): ``--store``, ``--source`` (unless the analysis reads the whole store), the
scope options (``--as-of``, ``--since``, ``--until``, ``--cluster``, ``--partition``,
and ``--period`` where the analysis has periods), the analysis' options, then the output
options. Nothing here is specific to one analysis,
so adding one is adding its module.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Annotated, Any

import polars as pl
import typer

from gpu_trace import plugins
from gpu_trace.analyses.empty import why_empty
from gpu_trace.analyses.inputs import Inputs
from gpu_trace.cli._boundary import err
from gpu_trace.cli.generated import add_command
from gpu_trace.cli.options import (
    SCOPE_OPTIONS,
    PeriodOpt,
    ReadStoreOpt,
    check_sources,
    number,
    scope_from,
)
from gpu_trace.cli.output import Format, FormatOpt, emit
from gpu_trace.column_units import analysis_units
from gpu_trace.errors import GpuTraceError
from gpu_trace.settings import resolve_store
from gpu_trace.values import split_list

app = typer.Typer(help="Characterization analyses over the store.", no_args_is_help=True)

SourceOpt = Annotated[
    list[str] | None, typer.Option("--source", "-s", help="Only these sources (a,b or repeated).")
]
OutputOpt = Annotated[Path | None, typer.Option("--output", "-o", help="Write to this file.")]
MaxRowsOpt = Annotated[
    int, typer.Option("--max-rows", callback=number(ge=0), help="Rows shown as a table (0 = all).")
]


def _sources(store: Path | None, source: list[str] | None) -> list[str] | None:
    """``--source`` as a list (a,b or repeated), each checked against the store."""
    return check_sources(resolve_store(store), split_list(source)) or None


def _inputs(
    store: Path | None,
    source: list[str] | None,
    needs_jobs: bool = True,
    scope: dict[str, Any] | None = None,
) -> Inputs:
    """The store's lazy inputs for ``--source`` and the scope options (``scope``: their
    values by parameter name); with ``needs_jobs``, sources that select no jobs are
    refused (an empty table would read as "nothing happened").
    """
    wanted = _sources(store, source)
    root = resolve_store(store)
    chosen = scope_from(root, sources=wanted, **(scope or {}))
    inputs = Inputs.from_store(root, wanted, chosen)
    # a serving trace has requests, not jobs: its analyses (and summary) answer
    if (
        needs_jobs
        and wanted
        and inputs.jobs.select(pl.len()).collect().item() == 0
        and inputs.requests.select(pl.len()).collect().item() == 0
    ):
        msg = f"no jobs in the store for source(s) {', '.join(wanted)}"
        raise GpuTraceError(msg)
    return inputs


def _run(
    frame: pl.LazyFrame | pl.DataFrame,
    fmt: Format,
    output: Path | None,
    max_rows: int,
    shown: tuple[plugins.AnalysisPlugin, Inputs, Any] | None = None,
) -> None:
    """Collect and write ``frame``; with ``shown`` (the analysis, its inputs and
    options) the table gets the analysis' declared units and an empty result prints one
    stderr line saying why (:mod:`gpu_trace.analyses.empty`), still exit 0.
    """
    result = frame.lazy().collect()
    units = analysis_units(shown[0], shown[2]) if shown else None
    if shown and result.height == 0:
        err.print(why_empty(*shown), markup=False)
    emit(result, fmt, output, max_rows, units)


def _parameters(plugin: plugins.AnalysisPlugin) -> tuple[list[Any], list[Any]]:
    """The fixed parameters before and after the analysis' options."""
    kw = inspect.Parameter.KEYWORD_ONLY
    head = [inspect.Parameter("store", kw, default=None, annotation=ReadStoreOpt)]
    if plugin.sources:
        head.append(inspect.Parameter("source", kw, default=None, annotation=SourceOpt))
    head += [inspect.Parameter(n, kw, default=None, annotation=a) for n, a in SCOPE_OPTIONS]
    if plugin.periods:
        head.append(inspect.Parameter("period", kw, default=None, annotation=PeriodOpt))
    tail = [
        inspect.Parameter("fmt", kw, default=Format.table, annotation=FormatOpt),
        inspect.Parameter("output", kw, default=None, annotation=OutputOpt),
        inspect.Parameter("max_rows", kw, default=100, annotation=MaxRowsOpt),
    ]
    return head, tail


def add_analysis(plugin: plugins.AnalysisPlugin) -> None:
    """Register ``analyze NAME`` for a declared analysis."""
    head, tail = _parameters(plugin)

    def body(given: dict[str, Any], options: Any) -> None:
        names = [n for n, _ in SCOPE_OPTIONS] + (["period"] if plugin.periods else [])
        scope = {n: given[n] for n in names}
        inputs = _inputs(given["store"], given.get("source"), plugin.needs_jobs, scope)
        frame = plugin.run(inputs, options)
        _run(frame, given["fmt"], given["output"], given["max_rows"], (plugin, inputs, options))

    add_command(app, plugin.name, plugin.help, head, plugin.options, body, after=tail)


for _plugin in plugins.analyses():
    add_analysis(_plugin)
