"""``gpu-trace report``: build the report site from the store.

The site is one overview page (``index.html``: every trace side by side) and one page
per source (``<source>.html``) with the analysis sections of
:mod:`gpu_trace.reports.sections`. Every page names the data it was built from (files,
checksums, rows read / written / quarantined, schema and tool versions, build time) and
credits each trace's licence and citation. Charts can also be exported as SVG/PNG
(vl-convert) into ``charts/`` for papers.

The whole site is built in a hidden sibling folder and swapped in at the end
(:mod:`gpu_trace.reports.publish`), from one store snapshot, so neither a killed build
nor a concurrent ingest can leave pages from two different builds side by side.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

import duckdb
import vl_convert as vlc

from gpu_trace import __version__
from gpu_trace.analyses import charts
from gpu_trace.analyses import jobs as jb
from gpu_trace.analyses import sharing as shr
from gpu_trace.analyses.inputs import Inputs
from gpu_trace.analyses.summary import summary
from gpu_trace.datasets.registry import registry
from gpu_trace.reports.page import Section, esc, render_page, sql_frame, table_html
from gpu_trace.reports.publish import check_replaceable, recover, staging_folder, swap_in
from gpu_trace.reports.replay_section import replay_section, resolve_runs
from gpu_trace.reports.sections import SOURCE_SECTIONS, SUMMARY_COLUMNS, _rounded
from gpu_trace.reports.sweep_section import sweep_sections
from gpu_trace.reports.telemetry_section import telemetry_section
from gpu_trace.schemas import TABLES
from gpu_trace.store.catalog import connect
from gpu_trace.store.generations import snapshot_root
from gpu_trace.store.parquet import ensure_layout


def credit(source: str) -> str:
    """Licence and citation of a source, from the datasets registry (one place)."""
    known = registry()
    if source not in known:
        return "see the source's own documentation for its licence and citation"
    d = known[source]
    return f"{d.title}; licence: {d.license}. Cite {d.citation}."


def _inventory(con: duckdb.DuckDBPyConnection) -> Section:
    unions = " UNION ALL ".join(
        f"SELECT '{t}' AS \"table\", source, dataset, count(*) AS rows FROM {t} GROUP BY ALL"
        for t in TABLES
    )
    counts = sql_frame(con, f'SELECT * FROM ({unions}) ORDER BY "table", source, dataset')
    html = (
        table_html(counts, caption="Rows per table, source and dataset")
        if counts.height
        else "<p>The store is empty: run <code>gpu-trace ingest</code> first.</p>"
    )
    return Section("What the store holds", html)


def _footer(con: duckdb.DuckDBPyConnection, sources: Sequence[str]) -> str:
    credits = "".join(f"<li><b>{esc(src)}</b>: {esc(credit(src))}</li>" for src in sources)
    schema = ", ".join(f"{t.name} v{t.version}" for t in TABLES.values())
    return (
        f"<p>Data sources and licences:</p><ul>{credits}</ul>" if credits else ""
    ) + f"<p>Schemas: {esc(schema)}. Built with gpu-trace {esc(__version__)}.</p>"


def _where(sources: Sequence[str]) -> str:
    quoted = ", ".join("'" + s.replace("'", "''") + "'" for s in sources)
    return f"WHERE source IN ({quoted})"


def _provenance_for(con: duckdb.DuckDBPyConnection, sources: Sequence[str]) -> Section:
    where = _where(sources)
    ingests = sql_frame(
        con,
        'SELECT source, dataset, file, "table", rows_read, rows_written, rows_quarantined, '
        f"file_bytes, file_sha256, gpu_trace_version FROM ingests {where} "
        'ORDER BY source, dataset, file, "table"',
    )
    reasons = sql_frame(
        con,
        'SELECT source, dataset, file, "table", reason, count(*) AS rows FROM quarantine '
        f"{where} GROUP BY ALL ORDER BY rows DESC, source, dataset, file LIMIT 50",
    )
    html = table_html(ingests, caption="Ingested files: rows read = written + quarantined")
    html += (
        table_html(reasons, caption="Quarantined rows by reason (top 50)")
        if reasons.height
        else "<p>No rows were quarantined.</p>"
    )
    return Section("Data provenance", html)


def _page_name(source: str) -> str:
    return re.sub(r"[^a-z0-9_.-]", "-", source.lower()) + ".html"


def _nav(sources: Sequence[str], current: str | None) -> str:
    links = ['<a href="index.html">overview</a>' if current else "<b>overview</b>"]
    for src in sources:
        links.append(
            f"<b>{esc(src)}</b>"
            if src == current
            else f'<a href="{_page_name(src)}">{esc(src)}</a>'
        )
    return "<nav>" + " · ".join(links) + "</nav>"


def _overview_sections(inp: Inputs, sources: Sequence[str]) -> list[Section]:
    table = summary(inp.jobs).collect()
    overview = Section("Traces side by side")
    if table.height:
        overview.html = table_html(
            _rounded(table.select(SUMMARY_COLUMNS)), caption="Summary per trace"
        )
        overview.charts.append(charts.status_shares(table))
        overview.charts.append(charts.duration_cdf(jb.duration_cdf(inp.jobs).collect()))
        overview.charts.append(charts.size_shares(jb.size_shares(inp.jobs).collect()))
        overview.charts.append(charts.request_mix(shr.request_mix(inp.jobs).collect()))
    else:
        overview.html = "<p>No jobs in the store yet: run <code>gpu-trace ingest</code>.</p>"
    return [overview]


SectionBuilder = Callable[[Inputs], Section]
EXTRA_SOURCE_SECTIONS: list[SectionBuilder] = [telemetry_section]
"""Further per-source sections (telemetry, replay scorecards) registered by their modules."""


def _export_images(pages: dict[str, list[Section]], out: Path, formats: Sequence[str]) -> None:
    """Write every chart as SVG and/or PNG into ``out/charts/`` (names: page-section-n)."""
    if not formats:
        return
    folder = out / "charts"
    folder.mkdir(parents=True, exist_ok=True)
    for page, sections in pages.items():
        for i, sec in enumerate(sections):
            for j, chart in enumerate(sec.charts):
                spec = chart.to_dict()
                stem = f"{page}-{i}-{j}"
                if "svg" in formats:
                    _atomic_write(folder / f"{stem}.svg", vlc.vegalite_to_svg(spec).encode())
                if "png" in formats:
                    _atomic_write(folder / f"{stem}.png", vlc.vegalite_to_png(spec, scale=2))


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def build_site(
    store: Path,
    out: Path,
    *,
    title: str = "gpu-trace report",
    sources: Sequence[str] | None = None,
    images: Sequence[str] = (),
    extra_sections: Sequence[SectionBuilder] = (),
    replay: Sequence[str] = (),
    sweep: Path | None = None,
) -> Path:
    """Build the site and swap it in as ``out``; return the path of ``index.html``.

    ``out`` must be missing, empty or a site built here (else a one-line error). The
    build time comes from ``$SOURCE_DATE_EPOCH`` when set, so CI builds can be
    reproducible byte for byte.
    """
    out = out.resolve()
    recover(out)
    check_replaceable(out)
    ensure_layout(store)
    store = snapshot_root(store)  # every page from the same store generation
    con = connect(store)
    built_dir = staging_folder(out)
    try:
        _build(con, store, built_dir, title, sources, images, extra_sections, replay, sweep)
        swap_in(built_dir, out)
    except BaseException:
        shutil.rmtree(built_dir, ignore_errors=True)
        raise
    return out / "index.html"


def _build(
    con: duckdb.DuckDBPyConnection,
    store: Path,
    out: Path,
    title: str,
    sources: Sequence[str] | None,
    images: Sequence[str],
    extra_sections: Sequence[SectionBuilder],
    replay: Sequence[str],
    sweep: Path | None = None,
) -> None:
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    when = dt.datetime.fromtimestamp(int(epoch), dt.UTC) if epoch else dt.datetime.now(dt.UTC)
    built = when.strftime("%Y-%m-%d %H:%M UTC")
    present = [
        r[0] for r in con.execute("SELECT DISTINCT source FROM ingests ORDER BY 1").fetchall()
    ]
    chosen = [s for s in present if not sources or s in sources]
    pages: dict[str, list[Section]] = {}
    all_inputs = Inputs.from_store(store, chosen or None)
    index_sections = [_inventory(con), *_overview_sections(all_inputs, chosen)]
    run_ids = resolve_runs(con, replay) if replay else []
    if replay:
        index_sections.append(replay_section(con, run_ids))
    if sweep is not None:
        pages["sweep"] = sweep_sections(con, sweep)
        link = '<p>Means and 95 % intervals across seeds: <a href="sweep.html">sweep page</a>.</p>'
        index_sections.append(Section("Sweep", link))
        sweep_page = render_page(f"{title}: sweep", pages["sweep"], _footer(con, chosen), built)
        _write(out / "sweep.html", sweep_page)
    if chosen:
        index_sections.append(_provenance_for(con, chosen))
    pages["index"] = index_sections
    _write(
        out / "index.html",
        render_page(title, index_sections, _footer(con, chosen), built, nav=_nav(chosen, None)),
    )
    for src in chosen:
        inp = Inputs.from_store(store, [src])
        sections = [b(inp) for b in (*SOURCE_SECTIONS, *EXTRA_SOURCE_SECTIONS, *extra_sections)]
        sections.append(_provenance_for(con, [src]))
        name = _page_name(src)
        pages[name.removesuffix(".html")] = sections
        page = render_page(
            f"{title}: {src}", sections, _footer(con, [src]), built, nav=_nav(chosen, src)
        )
        _write(out / name, page)
    _export_images(pages, out, images)


def _write(path: Path, text: str) -> None:
    _atomic_write(path, text.encode("utf-8"))
