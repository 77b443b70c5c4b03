"""The report's serving-replay pages: one page per stored serve run (``gpu-trace serve
run``) and, for a source with several runs, a page that sets them side by side.

A run's page has a header (its configuration, SLO targets and summary: attainment,
goodput, latency percentiles, GPU-seconds, energy per token, cost), its sanity notes
(the run's own and the report's checks; always shown, never folded away), latency CDFs,
SLO attainment over time, replica utilisation and KV occupancy heatmaps, queue length,
and a glossary of every metric on it. A store without serve runs gets no such page.

The summary shows the run's stored figures (``serve_runs``: what ``serve run``
printed); a figure the run did not store is computed here from its requests, marked
so, with the definitions of the glossary (percentiles by linear interpolation). The
requests' own SLO attainment is always recomputed and a disagreement with the stored
one becomes a note.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from gpu_trace.display import duration_text
from gpu_trace.reports import serve_replay_charts as charts
from gpu_trace.reports import serve_replay_frames as frames
from gpu_trace.reports.page import Section, esc
from gpu_trace.store.parquet import slug

MAX_BINS = 300
"""Most time bins a chart draws: longer runs are shown in coarser bins (k of the run's
bins merged, said in the chart's title)."""
MAX_CELLS = 6000
"""Most replica x time cells of a heatmap."""
CDF_POINTS = 300
"""Most points of one latency CDF line (every k-th request of the sorted values, and
the last)."""
ATTAINMENT_TOLERANCE = 1e-6

Run = dict[str, Any]
"""One ``serve_runs`` row under the report's names (:mod:`~gpu_trace.reports.serve_replay_frames`)."""

GLOSSARY: dict[str, tuple[str, str]] = {
    "requests": (
        "requests",
        "requests of the replayed window: finished + dropped (a request whose prompt and "
        "output can never fit a replica's KV cache is dropped at arrival, with a reason)",
    ),
    "ttft": (
        "TTFT (time to first token)",
        "arrival -> the end of the iteration that computes the prompt's last token, which "
        "produces the first output token (queueing and prefill included)",
    ),
    "tpot": (
        "TPOT (time per output token)",
        "(time of the last token - time of the first) / (output tokens - 1): the mean "
        "gap between a request's later tokens; none for a one-token answer",
    ),
    "e2e": ("end-to-end latency", "arrival -> the last output token"),
    "percentile": (
        "p50 / p90",
        "median and 90th percentile over the finished requests; figures computed by the "
        "report interpolate linearly between the two nearest requests",
    ),
    "slo": (
        "SLO targets",
        "the run's latency targets (serve run --slo): TTFT target and TPOT target",
    ),
    "slo_attainment": (
        "SLO attainment",
        "share of the window's requests with TTFT <= the TTFT target and TPOT <= the TPOT "
        "target (a one-token answer has no TPOT and meets that target); dropped requests "
        "count as missing both",
    ),
    "attainment_over_time": (
        "SLO attainment over time",
        "per time bin: of the requests that arrived in the bin, the share that met both "
        "targets (so a late bin can be low because its requests queued)",
    ),
    "goodput": (
        "goodput",
        "requests per second that meet both SLO targets, as DistServe defines it (Zhong "
        "et al., OSDI 2024): requests meeting both / the run's horizon (first arrival -> "
        "last event) in seconds",
    ),
    "gpu_seconds": (
        "GPU-seconds",
        "sum over replicas of GPUs (tensor-parallel width) x the time from the replica's "
        "start (cold start included) to its stop",
    ),
    "energy_per_token": (
        "energy per token",
        "the replicas' energy (GPUs x (busy time x TDP + idle time x idle power): a "
        "two-level power model) / (prompt + output tokens), joules",
    ),
    "cost": (
        "cost per million tokens",
        "GPU-hours x the price per GPU-hour of the run's price table / tokens x 1e6, USD",
    ),
    "utilisation": (
        "replica utilisation",
        "per replica and time bin: seconds spent in iterations / the bin's length, "
        "over the bins in which the replica was serving (blank: not started, cold "
        "starting or scaled down)",
    ),
    "kv_occupancy": (
        "KV occupancy",
        "per replica: KV-cache blocks held by requests / the replica's KV capacity in "
        "blocks, at each bin's end",
    ),
    "queue_length": (
        "queue length",
        "requests waiting in the replicas' queues (not yet admitted) and running in "
        "their batches, summed over replicas, at each bin's end",
    ),
}
"""Every metric the serving-replay pages show: key -> (term, definition)."""

SUMMARY_ROWS: tuple[tuple[str, str, str], ...] = (
    ("ttft_slo_s", "TTFT target", "slo"),
    ("tpot_slo_s", "TPOT target", "slo"),
    ("slo_attainment", "SLO attainment", "slo_attainment"),
    ("goodput_rps", "goodput", "goodput"),
    ("ttft_p50_s", "TTFT p50", "ttft"),
    ("ttft_p90_s", "TTFT p90", "ttft"),
    ("tpot_p50_s", "TPOT p50", "tpot"),
    ("e2e_p50_s", "end-to-end p50", "e2e"),
    ("gpu_seconds", "GPU-seconds", "gpu_seconds"),
    ("energy_j_per_token", "energy per token", "energy_per_token"),
    ("usd_per_mtok", "cost per million tokens", "cost"),
)
"""(summary column, label, glossary key) of the header's summary table, in order."""


@dataclass
class ServePage:
    """One serving-replay page: its file stem, title, sections and the source it shows."""

    name: str
    title: str
    source: str
    sections: list[Section] = field(default_factory=list)
    nav: str = ""


def seconds_text(v: float) -> str:
    """A latency for reading: ``85.0 ms`` under a second, ``1.250 s`` under two
    minutes, a duration (``2 min 05 s``) above.
    """
    if v < 1:
        return f"{v * 1000:.1f} ms"
    if v < 120:
        return f"{v:.3f} s"
    return duration_text(v)


def value_text(column: str, v: float | None) -> str:
    """One summary figure in its unit."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "not recorded"
    if column == "slo_attainment":
        return f"{v * 100:.1f} %"
    if column.endswith("_s"):
        return seconds_text(v)
    if column == "goodput_rps":
        return f"{v:,.3f} requests/s"
    if column == "gpu_seconds":
        return f"{v:,.1f} GPU-s"
    if column == "energy_j_per_token":
        return f"{v:,.3f} J"
    if column == "usd_per_mtok":
        return f"{v:,.4f} USD"
    return f"{v:,.3f}"


def _met(ttft_slo: float, tpot_slo: float) -> pl.Expr:
    """A request met both targets (finished, TTFT and TPOT within; no TPOT meets it)."""
    return (
        (pl.col("status") == "finished")
        & (pl.col("ttft_s") <= ttft_slo)
        & (pl.col("tpot_s").is_null() | (pl.col("tpot_s") <= tpot_slo))
    ).fill_null(False)


def request_summary(
    reqs: pl.LazyFrame, ttft_slo: float | None, tpot_slo: float | None
) -> dict[str, float | None]:
    """The summary figures the requests define: counts, attainment and goodput (when the
    run has both targets), latency percentiles over the finished requests.
    """
    done = pl.col("status") == "finished"
    exprs = [
        pl.len().alias("requests"),
        done.sum().alias("finished"),
        pl.col("finish_s").max().alias("horizon_s"),
        pl.col("ttft_s").filter(done).quantile(0.5, "linear").alias("ttft_p50_s"),
        pl.col("ttft_s").filter(done).quantile(0.9, "linear").alias("ttft_p90_s"),
        pl.col("tpot_s").filter(done).quantile(0.5, "linear").alias("tpot_p50_s"),
        pl.col("e2e_s").filter(done).quantile(0.5, "linear").alias("e2e_p50_s"),
    ]
    if ttft_slo is not None and tpot_slo is not None:
        exprs.append(_met(ttft_slo, tpot_slo).sum().alias("met"))
    row = reqs.select(exprs).collect().row(0, named=True)
    out: dict[str, float | None] = {k: (None if v is None else float(v)) for k, v in row.items()}
    total = out["requests"] or 0.0
    met = out.get("met")
    out["slo_attainment"] = met / total if met is not None and total else None
    horizon = out["horizon_s"]
    out["goodput_rps"] = met / horizon if met is not None and horizon else None
    return out


def summary_figures(
    run: Run, computed: dict[str, float | None]
) -> tuple[dict[str, float | None], list[str]]:
    """Stored figure, else the one computed from the requests; and the names of those
    computed here.
    """
    shown: dict[str, float | None] = {}
    derived: list[str] = []
    for column, label, _ in SUMMARY_ROWS:
        stored = run.get(column)
        if stored is not None:
            shown[column] = float(stored)
        elif computed.get(column) is not None:
            shown[column] = computed[column]
            derived.append(label)
        else:
            shown[column] = None
    return shown, derived


def sanity_notes(
    run: Run, computed: dict[str, float | None], derived: Sequence[str], ts_rows: int
) -> list[str]:
    """The run's own caveats, then what the report finds in its rows."""
    notes = frames.notes_of(run.get("notes"))
    total = int(computed["requests"] or 0)
    finished = int(computed["finished"] or 0)
    if total == 0:
        notes.append("no requests are stored for this run: latency and attainment charts are empty")
    elif finished == 0:
        notes.append(f"every request was dropped ({total:,}): nothing finished")
    elif finished < total:
        notes.append(
            f"{total - finished:,} of {total:,} requests were dropped: they count as missing the SLO targets"
        )
    if run.get("ttft_slo_s") is None or run.get("tpot_slo_s") is None:
        notes.append("the run stored no TTFT and TPOT targets: attainment is not computed here")
    stored = run.get("slo_attainment")
    mine = computed.get("slo_attainment")
    if stored is not None and mine is not None and abs(float(stored) - mine) > ATTAINMENT_TOLERANCE:
        notes.append(
            f"the stored SLO attainment ({float(stored) * 100:.1f} %) differs from its requests' "
            f"({mine * 100:.1f} %)"
        )
    if derived:
        notes.append(
            "not stored by the run, computed here from its requests: " + ", ".join(derived)
        )
    if ts_rows == 0:
        notes.append("no timeseries is stored for this run: no utilisation, KV or queue chart")
    return notes


def _bin_s(run: Run, ts: pl.DataFrame) -> float:
    """The run's bin width: its configuration's ``bin_s``, else the timeseries' step,
    else 10 s (the serve run default).
    """
    cfg = frames.config_of(run.get("config_json"))
    value = cfg.get("bin_s")
    if isinstance(value, int | float) and value > 0:
        return float(value)
    diff = pl.col("time_s").unique().sort().diff()
    step = ts.select(diff.filter(diff > 0).min()).item() if ts.height else None
    return float(step) if step is not None else 10.0


def _coarse(n_bins: int, limit: int) -> int:
    """How many of the run's bins make one drawn bin (1 = as stored)."""
    return max(1, -(-n_bins // max(limit, 1)))


def _merged_note(k: int, bin_s: float) -> str:
    return f" ({k} bins of {bin_s:g} s merged per point)" if k > 1 else ""


def cdf_points(reqs: pl.LazyFrame) -> tuple[pl.DataFrame, str]:
    """(metric, seconds, share) of the finished requests' TTFT, TPOT and e2e, at most
    :data:`CDF_POINTS` per metric; and a note when non-positive values were left out
    (a log axis).
    """
    parts = []
    left_out = 0
    done = reqs.filter(pl.col("status") == "finished")
    cols = {"TTFT": "ttft_s", "TPOT": "tpot_s", "e2e": "e2e_s"}
    values = done.select(cols.values()).collect()
    for metric, col in cols.items():
        vals = values[col].drop_nulls().drop_nans()
        left_out += int((vals <= 0).sum())
        vals = vals.filter(vals > 0).sort()
        n = vals.len()
        if not n:
            continue
        step = max(1, n // CDF_POINTS)
        part = (
            pl.DataFrame({"seconds": vals})
            .with_row_index("i")
            .filter(((pl.col("i") + 1) % step == 0) | (pl.col("i") == n - 1))
            .select(
                pl.lit(metric).alias("metric"),
                "seconds",
                ((pl.col("i") + 1) / n).alias("share"),
            )
        )
        start = pl.DataFrame({"metric": [metric], "seconds": [vals[0]], "share": [0.0]})
        parts.append(pl.concat([start, part]))  # the step starts at 0 %
    empty = pl.DataFrame(schema={"metric": pl.String, "seconds": pl.Float64, "share": pl.Float64})
    note = f" ({left_out:,} zero latencies not drawn on the log axis)" if left_out else ""
    return (pl.concat(parts) if parts else empty), note


def attainment_bins(
    reqs: pl.LazyFrame, ttft_slo: float, tpot_slo: float, bin_s: float
) -> tuple[pl.DataFrame, str]:
    """Per arrival bin: requests, those meeting both targets and their share."""
    last = reqs.select(pl.col("arrival_s").max()).collect().item()
    k = _coarse(int((last or 0.0) // bin_s) + 1, MAX_BINS)
    width = bin_s * k
    out = (
        reqs.group_by(((pl.col("arrival_s") // width) * width).alias("time_s"))
        .agg(pl.len().alias("requests"), _met(ttft_slo, tpot_slo).sum().alias("met"))
        .with_columns(
            (pl.col("met") / pl.col("requests")).alias("attainment"),
            (pl.col("time_s") + width).alias("time_end_s"),
        )
        .sort("time_s")
        .collect()
    )
    return out, _merged_note(k, bin_s)


def replica_cells(ts: pl.DataFrame, bin_s: float) -> tuple[pl.DataFrame, str]:
    """Per (drawn bin, replica) while serving: utilisation and KV occupancy."""
    up = ts.filter(pl.col("up").fill_null(True))
    if not up.height:
        return up, ""
    replicas = max(up["replica"].n_unique(), 1)
    n_bins = int(float(up.select(pl.col("time_s").max()).item()) // bin_s) + 1
    k = _coarse(n_bins, min(MAX_BINS, MAX_CELLS // replicas))
    width = bin_s * k
    kv = pl.when(pl.col("kv_capacity_blocks") > 0).then(
        pl.col("kv_used_blocks") / pl.col("kv_capacity_blocks")
    )
    cells = (
        up.group_by(((pl.col("time_s") // width) * width).alias("time_s"), "replica")
        .agg(
            pl.col("role").first(),
            (pl.col("busy_s").sum() / (pl.len() * bin_s)).alias("utilisation"),
            kv.mean().alias("kv_occupancy"),
        )
        .with_columns((pl.col("time_s") + width).alias("time_end_s"))
        .sort("replica", "time_s")
    )
    return cells, _merged_note(k, bin_s)


def queue_bins(ts: pl.DataFrame, bin_s: float) -> tuple[pl.DataFrame, str]:
    """Per drawn bin: waiting and running requests summed over replicas (a mean over
    the merged bins when a long run is coarsened).
    """
    per_bin = ts.group_by("time_s").agg(
        pl.col("waiting").sum().cast(pl.Float64), pl.col("running").sum().cast(pl.Float64)
    )
    n_bins = int(float(per_bin.select(pl.col("time_s").max()).item()) // bin_s) + 1
    k = _coarse(n_bins, MAX_BINS)
    width = bin_s * k
    out = (
        per_bin.group_by(((pl.col("time_s") // width) * width).alias("time_s"))
        .agg(pl.col("waiting").mean(), pl.col("running").mean())
        .with_columns((pl.col("time_s") + width).alias("time_end_s"))
        .sort("time_s")
    )
    return out, _merged_note(k, bin_s)


def glossary_section(keys: Sequence[str]) -> Section:
    """The definitions of the metrics a page shows."""
    rows = "".join(
        f"<tr><td>{esc(GLOSSARY[k][0])}</td><td>{esc(GLOSSARY[k][1])}</td></tr>" for k in keys
    )
    return Section(
        "Glossary",
        "<table><caption>The metrics on this page (docs/serving-replay.md)</caption>"
        f"<thead><tr><th>term</th><th>definition</th></tr></thead><tbody>{rows}</tbody></table>",
    )


def _config_line(run: Run) -> str:
    parts = [
        f"{run.get('source')}/{run.get('dataset')}",
        f"model {run.get('model')}",
        f"GPU {run.get('gpu')}",
        f"TP {run.get('tp')} x {run.get('replicas')} replicas",
        f"batching {run.get('batching')}",
        f"router {run.get('router')}",
    ]
    return " · ".join(parts)


def _config_table(run: Run) -> str:
    cfg = frames.config_of(run.get("config_json"))
    if not cfg:
        return "<p>The run's full configuration was not stored.</p>"
    rows = "".join(f"<tr><td>{esc(k)}</td><td>{esc(v)}</td></tr>" for k, v in sorted(cfg.items()))
    return (
        '<table class="long"><caption>Configuration (serve_runs.config_json)</caption>'
        f"<thead><tr><th>setting</th><th>value</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def _summary_table(
    shown: dict[str, float | None], computed: dict[str, float | None], derived: Sequence[str]
) -> str:
    total = int(computed["requests"] or 0)
    finished = int(computed["finished"] or 0)
    rows = [
        (
            "requests",
            f"{total:,} ({finished:,} finished, {total - finished:,} dropped)",
            GLOSSARY["requests"][1],
        )
    ]
    for column, label, key in SUMMARY_ROWS:
        text = value_text(column, shown[column])
        if label in derived:
            text += " (from the requests)"
        rows.append((label, text, GLOSSARY[key][1]))
    body = "".join(
        f'<tr><td title="{esc(c)}">{esc(a)}</td><td data-metric="{esc(a)}">{esc(b)}</td></tr>'
        for a, b, c in rows
    )
    return (
        "<table><caption>Summary (definitions: the glossary below; hover a metric)</caption>"
        f"<thead><tr><th>metric</th><th>value</th></tr></thead><tbody>{body}</tbody></table>"
    )


def _notes_html(notes: Sequence[str]) -> str:
    if not notes:
        return '<p class="notes">Sanity notes: none (the run recorded no caveat and the report found none).</p>'
    items = "".join(f"<li>{esc(n)}</li>" for n in notes)
    return f"<div class=\"notes\"><p><b>Sanity notes</b> (the run's and the report's):</p><ul>{items}</ul></div>"


def run_sections(root: Path, run: Run) -> list[Section]:
    """The sections of one run's page."""
    run_id = str(run["run_id"])
    ttft_slo = run.get("ttft_slo_s")
    tpot_slo = run.get("tpot_slo_s")
    reqs = frames.requests(root, run_id)
    ts = frames.timeseries(root, run_id).collect()
    computed = request_summary(reqs, ttft_slo, tpot_slo)
    shown, derived = summary_figures(run, computed)
    notes = sanity_notes(run, computed, derived, ts.height)
    header = Section(
        f"Serve run {run_id}",
        f'<p class="meta">{esc(_config_line(run))}</p>'
        + _notes_html(notes)
        + _summary_table(shown, computed, derived)
        + _config_table(run),
    )
    latency = Section("Latency")
    points, note = cdf_points(reqs)
    if points.height:
        targets = pl.DataFrame(
            [
                {"metric": m, "target": f"{m} target", "seconds": v}
                for m, v in (("TTFT", ttft_slo), ("TPOT", tpot_slo))
                if v is not None
            ],
            schema={"metric": pl.String, "target": pl.String, "seconds": pl.Float64},
        )
        latency.charts.append(charts.latency_cdfs(points, targets, note))
    else:
        latency.html = "<p>Nothing to draw: no finished request.</p>"
    bin_s = _bin_s(run, ts)
    attain = Section("SLO attainment over time")
    if ttft_slo is not None and tpot_slo is not None and computed["requests"]:
        bins, note = attainment_bins(reqs, float(ttft_slo), float(tpot_slo), bin_s)
        attain.charts.append(charts.attainment_over_time(bins, computed["slo_attainment"], note))
    else:
        attain.html = "<p>Nothing to draw: no requests or no SLO targets stored.</p>"
    replicas = Section("Replicas: utilisation, KV occupancy, queue")
    cells, cell_note = replica_cells(ts, bin_s) if ts.height else (ts, "")
    if cells.height:
        replicas.charts.append(
            charts.replica_heatmap(
                cells,
                "utilisation",
                "Replica utilisation: busy share of each bin" + cell_note,
                "busy",
            )
        )
        kv = cells.drop_nulls("kv_occupancy")
        if kv.height:
            replicas.charts.append(
                charts.replica_heatmap(
                    kv,
                    "kv_occupancy",
                    "KV occupancy: blocks used / capacity" + cell_note,
                    "KV used",
                )
            )
        queue, q_note = queue_bins(ts, bin_s)
        replicas.charts.append(charts.queue_length(queue, q_note))
    else:
        replicas.html = "<p>Nothing to draw: no timeseries stored for this run.</p>"
    keys = ["requests", "ttft", "tpot", "e2e", "percentile", "slo", "slo_attainment",
            "attainment_over_time", "goodput", "gpu_seconds", "energy_per_token", "cost",
            "utilisation", "kv_occupancy", "queue_length"]  # fmt: skip
    return [header, latency, attain, replicas, glossary_section(keys)]


def _run_row(root: Path, run: Run) -> Run:
    """The comparison figures of one run: stored, else from its requests."""
    computed = request_summary(
        frames.requests(root, str(run["run_id"])),
        run.get("ttft_slo_s"),
        run.get("tpot_slo_s"),
    )
    shown, _ = summary_figures(run, computed)
    cfg = frames.config_of(run.get("config_json"))
    window = f"from {cfg.get('start_s', 0)} s, {cfg.get('duration_s') or 'whole trace'}"
    if cfg.get("duration_s"):
        window += " s"
    return {**run, **shown, "window": window}


def compare_sections(root: Path, runs: pl.DataFrame, pages: dict[str, str]) -> list[Section]:
    """One section per dataset of a source: its runs side by side (table and bars)."""
    out = []
    for dataset in runs["dataset"].unique(maintain_order=True).to_list():
        group = [
            _run_row(root, r)
            for r in runs.filter(pl.col("dataset") == dataset).iter_rows(named=True)
        ]
        head = ["run", "window", "model", "GPU", "TP", "replicas", "batching", "router",
                "TTFT target", "TPOT target", "SLO attainment", "TTFT p90", "GPU-seconds",
                "goodput", "cost per million tokens"]  # fmt: skip
        cols = ["window", "model", "gpu", "tp", "replicas", "batching", "router"]
        figures = ["ttft_slo_s", "tpot_slo_s", "slo_attainment", "ttft_p90_s", "gpu_seconds",
                   "goodput_rps", "usd_per_mtok"]  # fmt: skip
        rows = []
        for r in group:
            link = f'<a href="{esc(pages[str(r["run_id"])])}">{esc(r["run_id"])}</a>'
            cells = [link] + [esc(r.get(c)) for c in cols]
            cells += [esc(value_text(c, r.get(c))) for c in figures]
            rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
        html = (
            f'<p class="meta">Runs of {esc(dataset)}. They replay the same traffic only when their '
            "windows are equal; SLO attainment compares fairly only under the same targets.</p>"
            "<table><caption>Runs side by side</caption><thead><tr>"
            + "".join(f"<th>{esc(h)}</th>" for h in head)
            + f"</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        )
        sec = Section(f"Runs of {dataset}", html)
        sec.charts.append(
            charts.comparison(
                pl.DataFrame(
                    {
                        "run_id": [str(r["run_id"]) for r in group],
                        **{c: [r.get(c) for r in group] for c, _, _ in charts.COMPARE_METRICS},
                    },
                    schema={
                        "run_id": pl.String,
                        **{c: pl.Float64 for c, _, _ in charts.COMPARE_METRICS},
                    },
                )
            )
        )
        out.append(sec)
    keys = ["slo", "slo_attainment", "ttft", "percentile", "gpu_seconds", "goodput", "cost"]
    return [*out, glossary_section(keys)]


def page_names(runs: pl.DataFrame) -> dict[str, str]:
    """Run id -> its page's file name (``serve-<run id>.html``; distinct)."""
    names: dict[str, str] = {}
    taken: set[str] = set()
    for run_id in runs["run_id"].to_list():
        stem = base = f"serve-{slug(run_id)}"
        n = 2
        while stem in taken:
            stem, n = f"{base}-{n}", n + 1
        taken.add(stem)
        names[run_id] = f"{stem}.html"
    return names


def compare_name(source: str) -> str:
    """The comparison page of a source's runs."""
    return f"serve-compare-{slug(source)}.html"


def _nav(compare: str | None) -> str:
    links = ['<a href="index.html">overview</a>']
    if compare:
        links.append(f'<a href="{esc(compare)}">runs side by side</a>')
    return "<nav>" + " · ".join(links) + "</nav>"


def serve_pages(
    root: Path, sources: Sequence[str] | None = None
) -> tuple[list[Section], list[ServePage]]:
    """The overview's serving-replay section and the pages (none of either when the
    generation ``root`` holds no serve run of ``sources``; all sources when None).
    """
    runs = frames.runs(root)
    if sources is not None:
        runs = runs.filter(pl.col("source").is_in(list(sources)))
    runs = runs.filter(pl.col("run_id").is_not_null())
    if not runs.height:
        return [], []
    names = page_names(runs)
    counts = runs.group_by("source").len()
    compared = set(counts.filter(pl.col("len") > 1)["source"].to_list())
    pages: list[ServePage] = []
    for run in runs.iter_rows(named=True):
        src = str(run["source"])
        compare = compare_name(src) if src in compared else None
        pages.append(
            ServePage(
                names[run["run_id"]].removesuffix(".html"),
                f"serve run {run['run_id']}",
                src,
                run_sections(root, run),
                _nav(compare),
            )
        )
    for src in sorted(compared):
        pages.append(
            ServePage(
                compare_name(src).removesuffix(".html"),
                f"serve runs of {src} side by side",
                src,
                compare_sections(root, runs.filter(pl.col("source") == src), names),
                _nav(None),
            )
        )
    return [_index_section(runs, names, compared)], pages


def _index_section(runs: pl.DataFrame, names: dict[str, str], compared: set[str]) -> Section:
    rows = []
    for r in runs.iter_rows(named=True):
        link = f'<a href="{esc(names[r["run_id"]])}">{esc(r["run_id"])}</a>'
        cells = [
            link,
            *(
                esc(r[c])
                for c in (
                    "source",
                    "dataset",
                    "model",
                    "gpu",
                    "tp",
                    "replicas",
                    "batching",
                    "router",
                )
            ),
        ]
        cells.append(esc(value_text("slo_attainment", r["slo_attainment"])))
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    head = [
        "run",
        "source",
        "dataset",
        "model",
        "GPU",
        "TP",
        "replicas",
        "batching",
        "router",
        "SLO attainment",
    ]
    links = "".join(
        f'<li><a href="{esc(compare_name(s))}">runs of {esc(s)} side by side</a></li>'
        for s in sorted(compared)
    )
    html = (
        "<table><caption>Serving replay runs (gpu-trace serve run): one page each</caption><thead><tr>"
        + "".join(f"<th>{esc(h)}</th>" for h in head)
        + f"</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        + (f"<ul>{links}</ul>" if links else "")
    )
    return Section("Serving replay", html)
