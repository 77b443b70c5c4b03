"""``gpu-trace report``: build the report site from the store.

The first page shows what the store holds and where it came from: row counts per table,
source and dataset; every ingested file with its checksum and reconciliation; the
quarantine by reason; the job status mix and GPU inventory per source. Later sections
(analyses, telemetry, replay scorecards) plug in as further :class:`Section` builders.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import altair as alt
import duckdb
import polars as pl

from gpu_trace.reports.page import Section, esc, render_page, table_html
from gpu_trace.schemas import TABLES
from gpu_trace.store.catalog import connect

CREDITS: dict[str, str] = {
    "openb": (
        "Alibaba GPU-sharing trace 2023 (openb), alibaba/clusterdata cluster-trace-gpu-v2023; "
        "no licence file upstream. Cite Weng et al., ATC'23, “Beware of Fragmentation”."
    ),
    "philly": (
        "Microsoft Philly trace, msr-fiddle/philly-traces, CC BY 4.0. Cite Jeon et al., ATC'19, "
        "“Analysis of Large-Scale Multi-Tenant GPU Clusters for DNN Training Workloads”."
    ),
    "helios": (
        "SenseTime Helios trace, S-Lab-System-Group/HeliosData, CC BY 4.0. Cite Hu et al., SC'21, "
        "“Characterization and Prediction of Deep Learning Workloads in Large-Scale GPU Datacenters”."
    ),
    "pai2020": (
        "Alibaba PAI GPU trace 2020, alibaba/clusterdata cluster-trace-gpu-v2020, CC BY 4.0. "
        "Cite Weng et al., NSDI'22, “MLaaS in the Wild”."
    ),
}


def _frame(con: duckdb.DuckDBPyConnection, sql: str) -> pl.DataFrame:
    out = pl.from_arrow(con.sql(sql).to_arrow_table())
    assert isinstance(out, pl.DataFrame)
    return out


def _inventory(con: duckdb.DuckDBPyConnection) -> Section:
    unions = " UNION ALL ".join(
        f"SELECT '{t}' AS \"table\", source, dataset, count(*) AS rows FROM {t} GROUP BY ALL"
        for t in TABLES
    )
    counts = _frame(con, f'SELECT * FROM ({unions}) ORDER BY "table", source, dataset')
    html = (
        table_html(counts, caption="Rows per table, source and dataset")
        if counts.height
        else "<p>The store is empty: run <code>gpu-trace ingest</code> first.</p>"
    )
    return Section("What the store holds", html)


def _provenance(con: duckdb.DuckDBPyConnection) -> Section:
    ingests = _frame(
        con,
        'SELECT source, dataset, file, "table", rows_read, rows_written, rows_quarantined, '
        'file_bytes, file_sha256, gpu_trace_version FROM ingests ORDER BY source, dataset, file, "table"',
    )
    reasons = _frame(
        con,
        'SELECT source, dataset, file, "table", reason, count(*) AS rows FROM quarantine '
        "GROUP BY ALL ORDER BY rows DESC, source, dataset, file LIMIT 50",
    )
    html = table_html(ingests, caption="Ingested files: rows read = written + quarantined")
    html += (
        table_html(reasons, caption="Quarantined rows by reason (top 50)")
        if reasons.height
        else "<p>No rows were quarantined.</p>"
    )
    return Section("Data provenance", html)


def _jobs(con: duckdb.DuckDBPyConnection) -> Section:
    status = _frame(
        con,
        "SELECT source, dataset, status, count(*) AS jobs, round(sum(gpus), 2) AS gpus_requested "
        "FROM jobs GROUP BY ALL ORDER BY source, dataset, status",
    )
    sec = Section("Jobs by status")
    if status.height == 0:
        sec.html = "<p>No jobs ingested.</p>"
        return sec
    sec.html = table_html(status)
    sec.charts.append(
        alt.Chart(
            status.with_columns(pl.concat_str("source", pl.lit("/"), "dataset").alias("trace"))
        )
        .mark_bar()
        .encode(
            y=alt.Y("trace:N", title=None),
            x=alt.X("jobs:Q", stack="normalize", title="share of jobs"),
            color=alt.Color("status:N"),
            tooltip=[
                "trace:N",
                "status:N",
                "jobs:Q",
                alt.Tooltip("gpus_requested:Q", format=",.1f"),
            ],
        )
        .properties(width=600, title="Job status mix")
    )
    return sec


def _machines(con: duckdb.DuckDBPyConnection) -> Section:
    gpus = _frame(
        con,
        "SELECT source, dataset, coalesce(gpu_type, '(none)') AS gpu_type, count(*) AS machines, "
        "sum(gpus)::BIGINT AS gpus FROM machines GROUP BY ALL ORDER BY source, dataset, gpus DESC",
    )
    sec = Section("GPU inventory")
    if gpus.height == 0:
        sec.html = "<p>No machine inventory ingested.</p>"
        return sec
    sec.html = table_html(gpus)
    sec.charts.append(
        alt.Chart(
            gpus.with_columns(pl.concat_str("source", pl.lit("/"), "dataset").alias("inventory"))
        )
        .mark_bar()
        .encode(
            y=alt.Y("inventory:N", title=None),
            x=alt.X("gpus:Q", title="GPUs"),
            color=alt.Color("gpu_type:N", title="GPU type"),
            tooltip=["inventory:N", "gpu_type:N", "machines:Q", "gpus:Q"],
        )
        .properties(width=600, title="GPUs by type")
    )
    return sec


def _footer(con: duckdb.DuckDBPyConnection) -> str:
    sources = [r[0] for r in con.sql("SELECT DISTINCT source FROM ingests ORDER BY 1").fetchall()]
    credits = "".join(
        f"<li><b>{esc(s)}</b>: {esc(CREDITS.get(s, 'see the source documentation'))}</li>"
        for s in sources
    )
    return f"<p>Data sources and licences:</p><ul>{credits}</ul>" if credits else ""


def build_site(store: Path, out: Path, *, title: str = "gpu-trace report") -> Path:
    """Build the site into ``out`` and return the path of ``index.html``.

    The build time comes from ``$SOURCE_DATE_EPOCH`` when set, so CI builds can be
    reproducible byte for byte.
    """
    con = connect(store)
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    when = dt.datetime.fromtimestamp(int(epoch), dt.UTC) if epoch else dt.datetime.now(dt.UTC)
    built = when.strftime("%Y-%m-%d %H:%M UTC")
    sections = [_inventory(con), _jobs(con), _machines(con), _provenance(con)]
    page = render_page(title, sections, _footer(con), built)
    out.mkdir(parents=True, exist_ok=True)
    index = out / "index.html"
    tmp = out / ".index.html.tmp"
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(index)
    return index
