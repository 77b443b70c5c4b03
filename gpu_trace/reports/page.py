"""Page assembly: one HTML document with the Vega runtime inlined once and one
``<div>`` + JSON spec per chart. Everything that comes from a trace is escaped.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache

import altair as alt
import duckdb
import polars as pl
import vl_convert as vlc

from gpu_trace.display import readable
from gpu_trace.reports.headers import header
from gpu_trace.version import __version__


@cache
def vega_bundle() -> str:
    """The Vega + Vega-Lite + vega-embed JavaScript, from vl-convert (no CDN)."""
    bundle: str = vlc.javascript_bundle()  # type: ignore[call-arg]
    return bundle.replace("</script", "<\\/script")


def esc(value: object) -> str:
    """HTML-escape text and attribute values (None as empty): every trace-supplied
    string goes through it before reaching a page.
    """
    return html.escape("" if value is None else str(value), quote=True)


def spec_json(chart: alt.TopLevelMixin) -> str:
    """The chart's Vega-Lite spec as JSON safe inside a ``<script>``: no ``$schema`` URL
    (nothing on the page refers to the network) and ``<``, ``>``, ``&`` escaped so
    trace-supplied strings cannot close the script or open a comment.
    """
    spec = chart.to_dict()
    spec.pop("$schema", None)
    text = json.dumps(spec, sort_keys=True, ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def table_html(
    frame: pl.DataFrame, *, caption: str | None = None, units: Mapping[str, str] | None = None
) -> str:
    """An HTML table of an already-small frame, every cell escaped: human headers (the
    raw column name and its meaning in the tooltip) and numbers shown for reading
    (:mod:`gpu_trace.display`: fixed decimals, durations, sizes, percentages, each from
    the column's declared unit; ``units`` are the producer's, by exact name).
    """
    cells: list[str] = []
    for name in frame.columns:
        label, tip = header(name)
        cells.append(f'<th title="{esc(tip)}">{esc(label)}</th>')
    head = "".join(cells)
    shown = readable(frame, units)
    body = "".join(
        "<tr>" + "".join(f"<td>{esc(v)}</td>" for v in row) + "</tr>" for row in shown.iter_rows()
    )
    cap = f"<caption>{esc(caption)}</caption>" if caption else ""
    cls = ' class="long"' if frame.height > 25 else ""
    return f"<table{cls}>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


@dataclass
class Section:
    """One ``<section>`` of a report page: its heading, its HTML and the charts drawn
    below it.
    """

    title: str
    html: str = ""
    charts: list[alt.TopLevelMixin] = field(default_factory=list)


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:70rem;
color:#222;padding:0 1rem}
h1{font-size:1.6rem}h2{font-size:1.25rem;border-bottom:1px solid #ddd;padding-bottom:.2rem;margin-top:2rem}
table{border-collapse:collapse;margin:.5rem 0;font-size:.85rem;display:block;max-width:100%;
overflow-x:auto}
table.long{max-height:32rem;overflow-y:auto}
th,td{border:1px solid #ddd;padding:.2rem .5rem;text-align:left}th{background:#f5f5f5}
caption{text-align:left;font-weight:600;padding:.2rem 0}
.chart{margin:1rem 0;max-width:100%;overflow-x:auto}
.synthetic{border:2px solid #e45756;background:#fff4f2;padding:.5rem 1rem;font-weight:600}.meta{color:#555;font-size:.85rem}footer{margin-top:3rem;font-size:.8rem;color:#555}
code{font-size:.85em}nav{font-size:.9rem;margin-bottom:1rem}
"""


def render_page(
    title: str, sections: Sequence[Section], footer_html: str, built: str, nav: str = ""
) -> str:
    """The whole HTML document."""
    parts: list[str] = []
    specs: list[tuple[str, str]] = []
    for i, sec in enumerate(sections):
        parts.append(f"<section><h2>{esc(sec.title)}</h2>{sec.html}")
        for j, chart in enumerate(sec.charts):
            cid = f"chart-{i}-{j}"
            spec = spec_json(chart)
            specs.append((cid, spec))
            parts.append(f'<div class="chart" id="{cid}"></div>')
        parts.append("</section>")
    embeds = "\n".join(
        f'vegaEmbed("#{cid}", {spec}, {{"renderer": "svg", "actions": false}})'
        f".catch(function(e){{console.error(e);}});"
        for cid, spec in specs
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="generator" content="gpu-trace {esc(__version__)}">'
        f"<title>{esc(title)}</title><style>{_CSS}</style>"
        f"<script>{vega_bundle()}</script></head><body>"
        f'{nav}<h1>{esc(title)}</h1><p class="meta">Built {esc(built)} by gpu-trace {esc(__version__)}.</p>'
        + "".join(parts)
        + f"<footer>{footer_html}</footer><script>{embeds}</script></body></html>\n"
    )


def sql_frame(
    con: duckdb.DuckDBPyConnection, sql: str, params: dict[str, object] | None = None
) -> pl.DataFrame:
    """A query's result as a polars frame (every report section reads the store so)."""
    rel = con.sql(sql, params=params)
    assert rel is not None
    out = pl.from_arrow(rel.to_arrow_table())
    assert isinstance(out, pl.DataFrame)
    return out
