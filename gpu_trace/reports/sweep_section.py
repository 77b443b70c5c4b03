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

from gpu_trace.display import duration_text
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


def _value(metric: str, v: float | None, *, spread: bool = False) -> str:
    """One number in the metric's human unit: durations (``*_s``) as ``1 h 14 min``,
    shares (``*_ratio``) as ``45.3 %`` (a spread of a share in percentage points).
    """
    if v is None:
        return ""
    if metric.endswith("_s"):
        return duration_text(v)
    if metric.endswith("_ratio"):
        return f"{v * 100:.1f} pp" if spread else f"{v * 100:.1f} %"
    return _num(v)


def _interval(
    mean: float, half: float | None, n: int, metric: str = "", sd: float | None = None
) -> str:
    """``mean ± half (n=N)``; ``mean (n=1, no interval)`` for a single seed, and
    ``mean, deterministic (no spread)`` when every replicate gave the same value: a
    zero-width interval is no evidence of anything, so none is printed.
    """
    if half is None:
        return f"{_value(metric, mean)} (n={n}, no interval)"
    if not sd:
        return f"{_value(metric, mean)}, deterministic (no spread)"
    return f"{_value(metric, mean)} ± {_value(metric, half, spread=True)} (n={n})"


def _label(metric: str) -> str:
    """The metric's label without a unit suffix (values carry their unit)."""
    label = st.METRICS.get(metric, (metric, True))[0]
    return label.removesuffix(" (s)")


def _best(stats: pl.DataFrame, by: list[str], metrics: list[str]) -> dict[tuple[Any, ...], float]:
    """(load value, metric) -> best mean. Within one load (or inflation) only: a lighter
    load always has shorter waits, so a star across loads would only name the lightest.
    """
    x = next((c for c in CURVE_X if c in by), None)
    best: dict[tuple[Any, ...], float] = {}
    for m in metrics:
        lower = st.METRICS.get(m, (m, True))[1]
        sub = stats.filter(pl.col("metric") == m)
        if not sub.height:
            continue
        keys = [x] if x else []
        agg = pl.col("mean").min() if lower else pl.col("mean").max()
        per = sub.group_by(keys).agg(agg) if keys else sub.select(agg)
        for row in per.iter_rows(named=True):
            best[(row[x] if x else None, m)] = float(row["mean"])
    return best


def scorecard_html(stats: pl.DataFrame, by: list[str], metrics: list[str]) -> str:
    """Configuration x metric, each cell mean ± 95 % half-width; ★ marks the best mean
    of each metric among the configurations at the same load.
    """
    configs = stats.select(by).unique(maintain_order=True) if by else pl.DataFrame({"_": [0]})
    best = _best(stats, by, metrics)
    x = next((c for c in CURVE_X if c in by), None)
    cells: dict[tuple[Any, ...], dict[str, str]] = {}
    for row in stats.iter_rows(named=True):
        key = tuple(row[b] for b in by)
        metric = row["metric"]
        text = _interval(row["mean"], row["half"], row["n"], metric, row["sd"])
        top = best.get((row[x] if x else None, metric))
        starred = top is not None and row["mean"] == top
        text = f"<b>{esc(text)} ★</b>" if starred else esc(text)
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
        f"★ = best mean{' at each ' + x if x else ''})</caption>"
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
        )
        # Only where the replicates spread: a difference that is the same on every seed
        # (deterministic runs) has a zero-width interval that "excludes 0" by arithmetic,
        # not by evidence.
        flat = diffs.filter(pl.col("half").is_not_null() & (pl.col("sd").fill_null(0) == 0))
        diffs = diffs.filter(~(pl.col("half").is_not_null() & (pl.col("sd").fill_null(0) == 0)))
        diffs = diffs.head(MAX_PAIRED_ROWS)
        note = (
            f"<p>{flat.height:,} comparison(s) by {esc(axis)} left out: deterministic "
            "(no spread), the same difference on every seed.</p>"
            if flat.height
            else ""
        )
        if not diffs.height:
            parts.append(note)
            continue
        head = "".join(f"<th>{esc(b)}</th>" for b in rest)
        head += "<th>A</th><th>B</th><th>metric</th><th>mean A − B ± 95 %</th><th>interval</th>"
        rows = []
        for r in diffs.iter_rows(named=True):
            m = r["metric"]
            span = "" if r["half"] is None else f"[{_value(m, r['lo'])}, {_value(m, r['hi'])}]"
            if r["half"] is not None and (r["lo"] > 0 or r["hi"] < 0):
                span += " (excludes 0)"
            rows.append(
                "<tr>"
                + "".join(f"<td>{esc(r[b])}</td>" for b in rest)
                + f"<td>{esc(r['a'])}</td><td>{esc(r['b'])}</td><td>{esc(_label(r['metric']))}</td>"
                + f"<td>{esc(_interval(r['mean'], r['half'], r['n'], m, r['sd']))}</td>"
                + f"<td>{esc(span)}</td></tr>"
            )
        parts.append(
            note + f"<table><caption>Paired comparison by {esc(axis)} against {esc(values[0])} "
            "(same seeds, every other axis equal)</caption>"
            f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        )
    return "".join(parts) or "<p>No scheduler or placement axis with two values to pair.</p>"


def curve(stats: pl.DataFrame, by: list[str], metric: str) -> alt.Chart | None:
    """``metric`` against load (or inflation) with a band for the 95 % interval, one
    line per combination of the other axes (placement / policy / cluster).
    """
    axis_label = st.METRICS.get(metric, (metric, True))[0]  # the axis is in seconds
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
        y=alt.Y("mean:Q", title=axis_label, axis=alt.Axis(format=fmt)),
        tooltip=["series:N", "x:Q", alt.Tooltip("mean:Q", format=",.3f"), "lo:Q", "hi:Q", "n:Q"],
    )
    return (band + line).properties(
        width=WIDTH, title=f"{axis_label} vs {x} (band: 95 % interval across seeds)"
    )


def sweep_warnings(frame: pl.DataFrame, stats: pl.DataFrame) -> str:
    """Warnings over the whole sweep: runs in which no job waited (the cluster too
    large for the load to tell policies apart) and configurations whose replicates all
    gave the same values (no interval to draw).
    """
    notes = []
    if "queue_mean_s" in frame.columns and frame.height:
        idle = frame.filter(pl.col("queue_mean_s").fill_null(0) == 0).height
        if idle:
            notes.append(
                f"in {idle:,} of {frame.height:,} runs no job waited: the cluster is too "
                "large for those loads to tell policies apart"
            )
    multi = stats.filter(pl.col("n") > 1)
    if multi.height:
        flat = multi.filter(pl.col("sd").fill_null(0) == 0).height
        if flat:
            notes.append(
                f"{flat:,} of {multi.height:,} configuration x metric cells are "
                "deterministic (no spread across seeds): use --set resample=bootstrap "
                "(or jitter=D) for replicates that vary the workload"
            )
    return "".join(f'<p class="meta"><b>Warning:</b> {esc(t)}.</p>' for t in notes)


def fixed_text(fixed: dict[str, Any]) -> str:
    """`` Fixed: cluster = 32x8; load = 1.2.`` (escaped), or nothing when no field is
    held: an empty ``{}`` tells the reader nothing.
    """
    if not fixed:
        return ""
    return " Fixed: " + esc("; ".join(f"{k} = {v}" for k, v in fixed.items())) + "."


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
    name = spec.get("name")
    head = (
        f'<p class="meta">Sweep{" " + esc(name) if name and name != "sweep" else ""} of source '
        f"{esc(spec.get('source'))}: {len(ids):,} runs, {frame.height:,} in this store"
        + (
            f" ({len(ids) - frame.height:,} missing: not run yet or another store)"
            if len(ids) > frame.height
            else ""
        )
        + f"; {seeds} seed(s) per configuration. Grid: {esc(grid)}."
        + fixed_text(spec.get("fixed") or {})
        + "</p>"
    )
    if not frame.height:
        return [Section("Sweep", head + "<p>None of this sweep's runs is in the store.</p>")]
    metrics = st.metric_columns(frame)
    stats = st.summarize(frame, by, metrics)
    score = Section(
        "Sweep scorecard", head + sweep_warnings(frame, stats) + scorecard_html(stats, by, metrics)
    )
    for metric in CURVE_METRICS:
        chart = curve(stats, by, metric)
        if chart is not None:
            score.charts.append(chart)
    paired = Section("Paired comparisons", paired_html(frame, by, metrics))
    return [score, paired]
