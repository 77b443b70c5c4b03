"""The sweep page (``gpu-trace report --sweep SWEEP_DIR``): a scorecard with means and
95 % intervals across seeds per configuration, paired comparisons of policies and
placements on the same seeds, and allocation / JCT against load with interval bands
(the FGD paper's allocation-vs-load view).

The grid comes from the sweep's manifest, the numbers from the store's ``replay_runs``
rows of its runs; statistics are defined in :mod:`gpu_trace.replay.sweep_stats`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import altair as alt
import duckdb
import polars as pl

from gpu_trace.replay import sweep as sw
from gpu_trace.replay import sweep_stats as st
from gpu_trace.reports.charts import WIDTH
from gpu_trace.reports.page import Section, esc, sql_frame

MAX_PAIRED_ROWS = 300
PAIRED_AXES = ("scheduler", "placement")
CURVE_METRICS = ("alloc_mean_ratio", "jct_mean_s")
CURVE_X = ("load", "inflate_to")


def _num(v: float | None) -> str:
    if v is None:
        return ""
    return f"{v:,.3f}" if abs(v) < 10 else f"{v:,.0f}"


def _interval(mean: float, half: float | None, n: int) -> str:
    """``mean ± half (n)``; ``mean (n=1, no interval)`` for a single seed."""
    if half is None:
        return f"{_num(mean)} (n={n}, no interval)"
    return f"{_num(mean)} ± {_num(half)} (n={n})"


def _label(metric: str) -> str:
    return st.METRICS.get(metric, (metric, True))[0]


def scorecard_html(stats: pl.DataFrame, by: list[str], metrics: list[str]) -> str:
    """Configuration x metric, each cell mean ± 95 % half-width; ★ marks the best mean
    of each metric.
    """
    configs = stats.select(by).unique(maintain_order=True) if by else pl.DataFrame({"_": [0]})
    best: dict[str, float] = {}
    for m in metrics:
        sub = stats.filter(pl.col("metric") == m)["mean"]
        if sub.len():
            lower = st.METRICS.get(m, (m, True))[1]
            best[m] = float(sub.min() if lower else sub.max())  # type: ignore[arg-type]
    cells: dict[tuple[Any, ...], dict[str, str]] = {}
    for row in stats.iter_rows(named=True):
        key = tuple(row[b] for b in by)
        text = _interval(row["mean"], row["half"], row["n"])
        if row["metric"] in best and row["mean"] == best[row["metric"]]:
            text = f"<b>{esc(text)} ★</b>"
        else:
            text = esc(text)
        cells.setdefault(key, {})[row["metric"]] = text
    head = "".join(f"<th>{esc(b)}</th>" for b in by) + "".join(
        f"<th>{esc(_label(m))}</th>" for m in metrics
    )
    rows = []
    for cfg in configs.iter_rows():
        key = tuple(cfg) if by else ()
        got = cells.get(key, {})
        rows.append(
            "<tr>"
            + "".join(f"<td>{esc(v)}</td>" for v in key)
            + "".join(f"<td>{got.get(m, '')}</td>" for m in metrics)
            + "</tr>"
        )
    return (
        "<table><caption>Scorecard: mean ± 95 % interval across seeds (Student t; "
        "★ = best mean)</caption>"
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def paired_html(frame: pl.DataFrame, by: list[str], metrics: list[str]) -> str:
    """For scheduler and placement: each other value against the first, A - B per seed
    with every other axis equal.
    """
    parts = []
    for axis in PAIRED_AXES:
        if axis not in by:
            continue
        values = frame[axis].unique(maintain_order=True).to_list()
        if len(values) < 2:
            continue
        rest = [b for b in by if b != axis]
        diffs = pl.concat(
            [st.paired(frame, axis, v, values[0], rest, metrics) for v in values[1:]],
            how="vertical_relaxed",
        ).head(MAX_PAIRED_ROWS)
        head = "".join(f"<th>{esc(b)}</th>" for b in rest)
        head += "<th>A</th><th>B</th><th>metric</th><th>mean A − B ± 95 %</th><th>interval</th>"
        rows = []
        for r in diffs.iter_rows(named=True):
            span = "" if r["half"] is None else f"[{_num(r['lo'])}, {_num(r['hi'])}]"
            if r["half"] is not None and (r["lo"] > 0 or r["hi"] < 0):
                span += " (excludes 0)"
            rows.append(
                "<tr>"
                + "".join(f"<td>{esc(r[b])}</td>" for b in rest)
                + f"<td>{esc(r['a'])}</td><td>{esc(r['b'])}</td><td>{esc(_label(r['metric']))}</td>"
                + f"<td>{esc(_interval(r['mean'], r['half'], r['n']))}</td><td>{esc(span)}</td></tr>"
            )
        parts.append(
            f"<table><caption>Paired comparison by {esc(axis)} against {esc(values[0])} "
            "(same seeds, every other axis equal)</caption>"
            f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        )
    return "".join(parts) or "<p>No scheduler or placement axis with two values to pair.</p>"


def curve(stats: pl.DataFrame, by: list[str], metric: str) -> alt.Chart | None:
    """``metric`` against load (or inflation) with a band for the 95 % interval, one
    line per combination of the other axes (placement / policy / cluster).
    """
    x = next((c for c in CURVE_X if c in by), None)
    sub = stats.filter(pl.col("metric") == metric)
    if x is None or not sub.height:
        return None
    rest = [b for b in by if b != x]
    series = (
        pl.concat_str([pl.col(b).cast(pl.String) for b in rest], separator=" / ")
        if rest
        else pl.lit("all")
    )
    data = sub.select(
        pl.col(x).cast(pl.Float64).alias("x"), series.alias("series"), "mean", "lo", "hi", "n"
    )
    base = alt.Chart(data).encode(
        x=alt.X("x:Q", title=x, scale=alt.Scale(zero=False)),
        color=alt.Color("series:N", title=" / ".join(rest) or "runs"),
    )
    fmt = "%" if metric.endswith("_ratio") else ",.0f"
    band = base.mark_area(opacity=0.2).encode(y="lo:Q", y2="hi:Q")
    line = base.mark_line(point=True).encode(
        y=alt.Y("mean:Q", title=_label(metric), axis=alt.Axis(format=fmt)),
        tooltip=["series:N", "x:Q", alt.Tooltip("mean:Q", format=",.3f"), "lo:Q", "hi:Q", "n:Q"],
    )
    return (band + line).properties(
        width=WIDTH, title=f"{_label(metric)} vs {x} (band: 95 % interval across seeds)"
    )


def sweep_sections(con: duckdb.DuckDBPyConnection, sweep_dir: Path) -> list[Section]:
    """The sections of the sweep page."""
    manifest = sw.read_manifest(sweep_dir)
    ids = [r["run_id"] for r in manifest["runs"]]
    runs = sql_frame(
        con,
        "SELECT * FROM replay_runs WHERE run_id IN (SELECT unnest($runs)) ORDER BY run_id",
        {"runs": ids},
    )
    frame = st.with_points(manifest, runs)
    spec = manifest.get("spec", {})
    # an axis with one value (``--gpus 32x8``) names no difference: shown in the grid line
    by = [a for a in st.config_axes(manifest) if a in frame.columns and frame[a].n_unique() > 1]
    seeds = frame["seed"].n_unique() if "seed" in frame.columns else 1
    axes = spec.get("grid", {})
    order = [a for a in manifest.get("axes", []) if a in axes] or list(axes)
    grid = "; ".join(f"{k}: {', '.join(map(str, axes[k]))}" for k in order)
    head = (
        f'<p class="meta">sweep {esc(spec.get("name", "sweep"))} of source '
        f"{esc(spec.get('source'))}: {len(ids):,} runs, {frame.height:,} in this store"
        + (
            f" ({len(ids) - frame.height:,} missing: not run yet or another store)"
            if len(ids) > frame.height
            else ""
        )
        + f"; {seeds} seed(s) per configuration. Grid: {esc(grid)}. "
        f"Fixed: {esc(spec.get('fixed') or {})}.</p>"
    )
    if not frame.height:
        return [Section("Sweep", head + "<p>None of this sweep's runs is in the store.</p>")]
    metrics = st.metric_columns(frame)
    stats = st.summarize(frame, by, metrics)
    score = Section("Sweep scorecard", head + scorecard_html(stats, by, metrics))
    for metric in CURVE_METRICS:
        chart = curve(stats, by, metric)
        if chart is not None:
            score.charts.append(chart)
    paired = Section("Paired comparisons", paired_html(frame, by, metrics))
    return [score, paired]
