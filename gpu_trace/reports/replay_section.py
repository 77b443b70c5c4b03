"""The replay scorecard: policy x metric for chosen replay runs, JCT CDFs and allocation
over time (``gpu-trace report --replay RUN``).

One scorecard per experiment (``replay_runs.experiment_id``: same jobs, cluster, load,
seed), each headed by its description; the best value of a metric is starred only among
runs of one experiment, since runs on different job sets are not comparable.
"""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import duckdb
import polars as pl

from gpu_trace.replay import sanity
from gpu_trace.replay.experiment import describe
from gpu_trace.reports.charts import WIDTH, cap_series, duration_axis, thin
from gpu_trace.reports.page import Section, esc, sql_frame

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

# faults and energy columns of replay_runs -> label (shown only for runs that have them)
FAULT_ENERGY: dict[str, str] = {
    "node_failures": "node failures",
    "jobs_failed": "jobs failed",
    "lost_gpu_h_failure": "GPU-h lost to failures",
    "lost_gpu_h_restore": "GPU-h lost to restores",
    "lost_gpu_h_preemption": "GPU-h lost to preemption",
    "goodput_ratio": "goodput",
    "energy_kwh": "energy (kWh)",
    "power_mean_w": "mean power (W)",
    "energy_saved_kwh": "saved by power-off (kWh)",
    "node_boots": "node boots",
}


def resolve_runs(con: duckdb.DuckDBPyConnection, wanted: Sequence[str]) -> list[str]:
    """Run ids to show: the given ones (``all`` = every run in the store)."""
    known = [
        r[0] for r in con.execute("SELECT DISTINCT run_id FROM replay_runs ORDER BY 1").fetchall()
    ]
    if "all" in wanted:
        return known
    return [r for r in wanted if r in known]


def scorecard_table(runs: pl.DataFrame, rank: bool = True) -> str:
    """HTML policy x metric table for the runs of ONE experiment; with ``rank`` the best
    value per metric is bold and starred.
    """
    head = "<th>run</th><th>scheduler</th><th>placement</th>" + "".join(
        f"<th>{esc(label)}</th>" for label, _ in SCORE_METRICS.values()
    )
    best: dict[str, float] = {}
    for col, (_, lower) in SCORE_METRICS.items():
        values = runs[col].drop_nulls() if rank else runs[col].head(0)
        if values.dtype.is_float():
            values = values.drop_nans()
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
                cells.append("<td>no users</td>" if col == "jain_slowdown" else "<td></td>")
                continue
            text = f"{v:,.3f}" if isinstance(v, float) and abs(v) < 10 else f"{v:,.0f}"
            mark = col in best and float(v) == best[col]
            cells.append(f"<td><b>{text} ★</b></td>" if mark else f"<td>{text}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    caption = (
        "Policy scorecard (★ = best value of each metric in this experiment)"
        if best
        else "Policy scorecard (not ranked: a single run or no recorded experiment)"
    )
    return (
        f"<table><caption>{caption}</caption>"
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def scorecards(runs: pl.DataFrame, jobs: pl.DataFrame | None = None) -> str:
    """One described, separately ranked scorecard per experiment. Runs written before
    experiments were recorded (no ``experiment_id``) each stand alone, unranked. With
    the runs' ``jobs``, each experiment's sanity warnings (no job waited, the same
    schedule everywhere, jobs dropped as unfit) come under its description.
    """
    if "experiment_id" not in runs.columns:
        runs = runs.with_columns(pl.lit(None, pl.String).alias("experiment_id"))
    keyed = runs.with_columns(
        pl.coalesce("experiment_id", pl.lit("unrecorded:") + pl.col("run_id")).alias("_exp")
    )
    parts = []
    for key in keyed["_exp"].unique().sort().to_list():
        group = keyed.filter(pl.col("_exp") == key).drop("_exp").sort("run_id")
        known = group["experiment_id"][0] is not None
        notes = sanity.warnings(group, jobs) if jobs is not None else []
        parts.append(
            f"<h3>{esc(key if known else 'experiment not recorded')}</h3>"
            f'<p class="meta">{esc(describe(group.row(0, named=True)))}</p>'
            + "".join(f'<p class="meta"><b>Warning:</b> {esc(t)}.</p>' for t in notes)
            + scorecard_table(group, rank=known and group.height > 1)
        )
    return "".join(parts)


def faults_energy_table(runs: pl.DataFrame) -> str:
    """Failures and energy of the runs that recorded them (``--faults``, ``--power``);
    empty when none did. Not ranked: runs with other fault models are not comparable.
    """
    cols = [c for c in FAULT_ENERGY if c in runs.columns]
    shown = (
        runs.filter(pl.any_horizontal(pl.col(c).is_not_null() for c in cols))
        if cols
        else runs.head(0)
    )
    if not shown.height:
        return ""
    head = "<th>run</th>" + "".join(f"<th>{esc(FAULT_ENERGY[c])}</th>" for c in cols)
    rows = []
    for row in shown.iter_rows(named=True):
        cells = [f"<td>{esc(row['run_id'])}</td>"]
        for c in cols:
            v = row[c]
            if v is None:
                cells.append("<td></td>")
            elif isinstance(v, float):
                cells.append(f"<td>{v:,.3f}</td>" if abs(v) < 10 else f"<td>{v:,.1f}</td>")
            else:
                cells.append(f"<td>{v:,}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return (
        "<h3>Failures and energy</h3><table><caption>Lost GPU time by cause, goodput "
        "(useful / consumed GPU time) and energy, per run (definitions: docs/replay.md)"
        f"</caption><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def replay_section(con: duckdb.DuckDBPyConnection, run_ids: Sequence[str]) -> Section:
    """The scorecard section for ``run_ids`` (already resolved)."""
    if not run_ids:
        return Section(
            "Replay scorecard",
            "<p>No replay run matched; run <code>gpu-trace replay run</code> first.</p>",
        )
    params: dict[str, object] = {"runs": list(run_ids)}
    runs = sql_frame(
        con,
        "SELECT * FROM replay_runs WHERE run_id IN (SELECT unnest($runs)) ORDER BY run_id",
        params,
    )
    cols = ", ".join(sanity.JOB_COLUMNS)
    jobs = sql_frame(
        con, f"SELECT {cols} FROM replay_jobs WHERE run_id IN (SELECT unnest($runs))", params
    )
    sec = Section("Replay scorecard", scorecards(runs, jobs) + faults_energy_table(runs))
    qs = ", ".join(f"{i / CDF_POINTS:.4f}" for i in range(CDF_POINTS + 1))
    cdf = sql_frame(
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
        # a log axis needs positive times: a JCT under one second is drawn at 1 s
        cdf = cdf.with_columns(pl.col("jct_s").clip(lower_bound=1.0))
        cdf, note = cap_series(cdf, by="run_id")
        sec.charts.append(
            alt.Chart(cdf)
            .mark_line()
            .encode(
                x=duration_axis(cdf["jct_s"], "job completion time (log scale)"),
                y=alt.Y("quantile:Q", title="fraction of jobs", axis=alt.Axis(format="%")),
                color=alt.Color("run_id:N", title="run"),
                tooltip=[
                    "run_id:N",
                    alt.Tooltip("jct_s:Q", format=",.0f"),
                    alt.Tooltip("quantile:Q", format=".0%"),
                ],
            )
            .properties(width=WIDTH, title="JCT CDF per run" + note)
        )
    ts = sql_frame(
        con,
        "SELECT run_id, time_s, alloc_ratio, queued_jobs FROM replay_timeseries "
        "WHERE run_id IN (SELECT unnest($runs)) ORDER BY run_id, time_s",
        params,
    )
    if ts.height:
        ts, ts_note = cap_series(ts.rename({"run_id": "series"}))
        sec.charts.append(
            alt.Chart(thin(ts))
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
            .properties(width=WIDTH, title="Allocation over time per run" + ts_note)
        )
    power = sql_frame(
        con,
        "SELECT run_id AS series, time_s, power_w FROM replay_timeseries "
        "WHERE run_id IN (SELECT unnest($runs)) AND power_w IS NOT NULL ORDER BY 1, 2",
        params,
    )
    if power.height:
        power, power_note = cap_series(power)
        sec.charts.append(
            alt.Chart(thin(power))
            .mark_line()
            .encode(
                x=alt.X("time_s:Q", title="time since run start (s)"),
                y=alt.Y("power_w:Q", title="cluster power (W)"),
                color=alt.Color("series:N", title="run"),
                tooltip=["series:N", "time_s:Q", alt.Tooltip("power_w:Q", format=",.0f")],
            )
            .properties(width=WIDTH, title="Cluster power over time per run" + power_note)
        )
    return sec
