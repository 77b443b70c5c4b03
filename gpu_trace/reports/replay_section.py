"""The replay scorecard: policy x metric for chosen replay runs, the best value of each
metric marked, JCT CDFs and allocation over time (``gpu-trace report --replay RUN``)."""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import duckdb
import polars as pl

from gpu_trace.analyses.charts import WIDTH, thin
from gpu_trace.reports.page import Section, esc

# metric column -> (label, True when lower is better)
SCORE_METRICS: dict[str, tuple[str, bool]] = {
    "jct_mean_s": ("JCT mean (s)", True),
    "jct_p50_s": ("JCT p50 (s)", True),
    "jct_p95_s": ("JCT p95 (s)", True),
    "jct_p99_s": ("JCT p99 (s)", True),
    "queue_mean_s": ("queue mean (s)", True),
    "bsld_mean": ("bounded slowdown", True),
    "makespan_s": ("makespan (s)", True),
    "alloc_mean_ratio": ("allocation", False),
    "unallocated_gpus_loaded": ("unallocated GPUs under load", True),
    "preemptions": ("preemptions", True),
    "jain_slowdown": ("Jain fairness", False),
}
CDF_POINTS = 200


def _frame(con: duckdb.DuckDBPyConnection, sql: str, params: dict[str, object]) -> pl.DataFrame:
    rel = con.sql(sql, params=params)
    assert rel is not None
    out = pl.from_arrow(rel.to_arrow_table())
    assert isinstance(out, pl.DataFrame)
    return out


def resolve_runs(con: duckdb.DuckDBPyConnection, wanted: Sequence[str]) -> list[str]:
    """Run ids to show: the given ones (``all`` = every run in the store)."""
    known = [
        r[0] for r in con.execute("SELECT DISTINCT run_id FROM replay_runs ORDER BY 1").fetchall()
    ]
    if "all" in wanted:
        return known
    return [r for r in wanted if r in known]


def scorecard_table(runs: pl.DataFrame) -> str:
    """HTML policy x metric table; the best value per metric is bold and starred."""
    head = "<th>run</th><th>scheduler</th><th>placement</th>" + "".join(
        f"<th>{esc(label)}</th>" for label, _ in SCORE_METRICS.values()
    )
    best: dict[str, float] = {}
    for col, (_, lower) in SCORE_METRICS.items():
        values = runs[col].drop_nulls()
        if values.len():
            best[col] = float(values.min() if lower else values.max())  # type: ignore[arg-type]
    rows = []
    for row in runs.iter_rows(named=True):
        cells = [
            f"<td>{esc(row['run_id'])}</td><td>{esc(row['scheduler'])}</td><td>{esc(row['placement'])}</td>"
        ]
        for col in SCORE_METRICS:
            v = row[col]
            if v is None:
                cells.append("<td></td>")
                continue
            text = f"{v:,.3f}" if isinstance(v, float) and abs(v) < 10 else f"{v:,.0f}"
            mark = col in best and float(v) == best[col]
            cells.append(f"<td><b>{text} ★</b></td>" if mark else f"<td>{text}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return (
        "<table><caption>Policy scorecard (★ = best value of each metric)</caption>"
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def replay_section(con: duckdb.DuckDBPyConnection, run_ids: Sequence[str]) -> Section:
    """The scorecard section for ``run_ids`` (already resolved)."""
    if not run_ids:
        return Section(
            "Replay scorecard",
            "<p>No replay run matched; run <code>gpu-trace replay run</code> first.</p>",
        )
    params: dict[str, object] = {"runs": list(run_ids)}
    runs = _frame(
        con,
        "SELECT * FROM replay_runs WHERE run_id IN (SELECT unnest($runs)) ORDER BY run_id",
        params,
    )
    sec = Section("Replay scorecard", scorecard_table(runs))
    qs = ", ".join(f"{i / CDF_POINTS:.4f}" for i in range(CDF_POINTS + 1))
    cdf = _frame(
        con,
        f"""
        SELECT run_id, unnest([{qs}]::DOUBLE[]) AS quantile,
               unnest(quantile_cont(jct_s, [{qs}]::DOUBLE[])) AS jct_s
        FROM replay_jobs
        WHERE run_id IN (SELECT unnest($runs)) AND outcome = 'finished'
        GROUP BY run_id ORDER BY run_id
        """,
        params,
    )
    if cdf.height:
        sec.charts.append(
            alt.Chart(cdf)
            .mark_line()
            .encode(
                x=alt.X("jct_s:Q", scale=alt.Scale(type="symlog"), title="job completion time (s)"),
                y=alt.Y("quantile:Q", title="fraction of jobs", axis=alt.Axis(format="%")),
                color=alt.Color("run_id:N", title="run"),
                tooltip=[
                    "run_id:N",
                    alt.Tooltip("jct_s:Q", format=",.0f"),
                    alt.Tooltip("quantile:Q", format=".0%"),
                ],
            )
            .properties(width=WIDTH, title="JCT CDF per run")
        )
    ts = _frame(
        con,
        "SELECT run_id, time_s, alloc_ratio, queued_jobs FROM replay_timeseries "
        "WHERE run_id IN (SELECT unnest($runs)) ORDER BY run_id, time_s",
        params,
    )
    if ts.height:
        sec.charts.append(
            alt.Chart(thin(ts.rename({"run_id": "series"})))
            .mark_line()
            .encode(
                x=alt.X("time_s:Q", title="time since run start (s)"),
                y=alt.Y("alloc_ratio:Q", title="GPUs allocated", axis=alt.Axis(format="%")),
                color=alt.Color("series:N", title="run"),
                tooltip=[
                    "series:N",
                    "time_s:Q",
                    alt.Tooltip("alloc_ratio:Q", format=".1%"),
                    "queued_jobs:Q",
                ],
            )
            .properties(width=WIDTH, title="Allocation over time per run")
        )
    return sec
