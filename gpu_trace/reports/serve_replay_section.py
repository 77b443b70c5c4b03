"""The report's serving-replay pages: one page per stored serve run (``gpu-trace serve
run`` / ``serve compare``) and, for a source with several runs, a page that sets them
side by side. A store without serve runs gets none of them (and no error).

A run's page has a header (its configuration, SLO targets and summary: attainment,
goodput, latency percentiles, GPU-seconds, utilisation, energy per token, cost), its
sanity notes (the run's own and the report's checks; always shown, never folded away),
latency CDFs, SLO attainment over time, replica utilisation and KV occupancy heatmaps,
queue length, and a glossary of every metric on it.

The summary shows the run's stored figures (``serve_runs``: what ``serve run`` printed);
a figure the run did not store is computed from its requests and marked so
(:mod:`gpu_trace.reports.serve_replay_figures`). The requests' SLO attainment is always
recomputed, and a disagreement with the stored one becomes a note.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from gpu_trace.display import duration_text
from gpu_trace.reports import serve_replay_charts as charts
from gpu_trace.reports import serve_replay_figures as fig
from gpu_trace.reports import serve_replay_frames as frames
from gpu_trace.reports.page import Section, esc
from gpu_trace.reports.serve_replay_figures import Run
from gpu_trace.store.parquet import slug

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
        "(time of the last token - time of the first) / (output tokens - 1): the mean gap "
        "between a request's later tokens; none for a one-token answer",
    ),
    "e2e": ("end-to-end latency", "arrival -> the last output token"),
    "percentile": (
        "p50 / p90 / p99",
        "percentiles over the finished requests, interpolated linearly between the two "
        "nearest requests",
    ),
    "slo": (
        "SLO targets",
        "the run's latency targets (serve run --slo ttft=,tpot=[,e2e=]); a target not set "
        "does not constrain",
    ),
    "slo_attainment": (
        "SLO attainment",
        "share of the window's requests meeting every target: TTFT <= the TTFT target, "
        "TPOT <= the TPOT target (a one-token answer has no TPOT and meets it), end to "
        "end <= its target when set; dropped requests count as missing",
    ),
    "attainment_over_time": (
        "SLO attainment over time",
        "per time bin: of the requests that arrived in the bin, the share that met every "
        "target (a bin can be low because its requests queued behind earlier ones)",
    ),
    "goodput": (
        "goodput",
        "requests per second that meet every SLO target, as DistServe defines it (Zhong "
        "et al., OSDI 2024): requests meeting every target / the run's horizon (first "
        "arrival -> last event), seconds",
    ),
    "preemptions": (
        "preemptions",
        "times a running request was evicted from a full KV cache (recomputed or "
        "swapped), summed over requests",
    ),
    "gpu_seconds": (
        "GPU-seconds",
        "sum over replicas of GPUs (tensor-parallel width) x the time from the replica's "
        "start (cold start included) to its stop",
    ),
    "utilisation_run": (
        "utilisation (whole run)",
        "replica-seconds spent in iterations / replica-seconds up",
    ),
    "energy_per_token": (
        "energy per token",
        "the GPUs' energy (busy seconds at TDP, the rest of each replica's life at idle "
        "power: a two-level power model) / (prompt + output tokens of the finished "
        "requests), joules",
    ),
    "cost": (
        "cost per million tokens",
        "GPU-hours x the price per GPU-hour of the run's price table / (prompt + output "
        "tokens of the finished requests) x 1e6, USD",
    ),
    "utilisation": (
        "replica utilisation",
        "per replica and time bin: seconds spent in iterations / the bin's length, over "
        "the bins in which the replica was serving (blank: not started, cold starting or "
        "scaled down)",
    ),
    "kv_occupancy": (
        "KV occupancy",
        "per replica: KV-cache blocks held by requests / the replica's KV capacity in "
        "blocks, at each bin's end",
    ),
    "queue_length": (
        "queue length",
        "requests waiting in the replicas' queues (not yet admitted) and running in their "
        "batches, summed over replicas, at each bin's end",
    ),
}
"""Every metric the serving-replay pages show: key -> (term, definition)."""

SUMMARY_ROWS: tuple[tuple[str, str, str], ...] = (
    ("slo_ttft_s", "TTFT target", "slo"),
    ("slo_tpot_s", "TPOT target", "slo"),
    ("slo_e2e_s", "end-to-end target", "slo"),
    ("slo_attainment_ratio", "SLO attainment", "slo_attainment"),
    ("goodput_rps", "goodput", "goodput"),
    ("ttft_p50_s", "TTFT p50", "ttft"),
    ("ttft_p90_s", "TTFT p90", "ttft"),
    ("ttft_p99_s", "TTFT p99", "ttft"),
    ("tpot_p50_s", "TPOT p50", "tpot"),
    ("tpot_p90_s", "TPOT p90", "tpot"),
    ("e2e_p50_s", "end-to-end p50", "e2e"),
    ("e2e_p90_s", "end-to-end p90", "e2e"),
    ("preemptions", "preemptions", "preemptions"),
    ("gpu_seconds", "GPU-seconds", "gpu_seconds"),
    ("utilization_ratio", "utilisation (whole run)", "utilisation_run"),
    ("energy_per_token_j", "energy per token", "energy_per_token"),
    ("cost_per_mtok_usd", "cost per million tokens", "cost"),
)
"""(summary column, label, glossary key) of the header's summary table, in order."""

LABELS = {column: label for column, label, _ in SUMMARY_ROWS}
RUN_GLOSSARY = ("requests", "ttft", "tpot", "e2e", "percentile", "slo", "slo_attainment",
                "attainment_over_time", "goodput", "preemptions", "gpu_seconds",
                "utilisation_run", "energy_per_token", "cost", "utilisation", "kv_occupancy",
                "queue_length")  # fmt: skip
COMPARE_GLOSSARY = ("slo", "slo_attainment", "ttft", "percentile", "gpu_seconds", "goodput",
                    "cost")  # fmt: skip


@dataclass
class ServePage:
    """One serving-replay page: its file stem, title, source and sections."""

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
    """One summary figure in its unit (a target not set: ``none``)."""
    if v is None or math.isnan(v) or math.isinf(v):
        return "none" if column.startswith("slo_") and column.endswith("_s") else "not recorded"
    if column.endswith("_ratio"):
        return f"{v * 100:.1f} %"
    if column.endswith("_s"):
        return seconds_text(v)
    formats = {
        "goodput_rps": f"{v:,.3f} requests/s",
        "gpu_seconds": f"{v:,.1f} GPU-s",
        "energy_per_token_j": f"{v:,.3f} J",
        "cost_per_mtok_usd": f"{v:,.4f} USD",
        "preemptions": f"{v:,.0f}",
    }
    return formats.get(column, f"{v:,.3f}")


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


def _trace(run: Run) -> str:
    return f"{run.get('source')}/{run.get('trace_dataset') or 'every dataset'}"


def _pools(run: Run) -> str:
    """The prefill:decode pools of a disaggregated run, else ``not split``."""
    split = run.get("disaggregate")
    return str(split) if split not in (None, "", "0") else "not split"


def _config_line(run: Run) -> str:
    layout = f"TP {run.get('tp')} x {run.get('replicas')} replicas"
    if _pools(run) != "not split":
        layout += f" (prefill:decode {_pools(run)})"
    parts = [
        _trace(run),
        f"model {run.get('model')}",
        f"GPU {run.get('gpu')}",
        layout,
        f"batching {run.get('batching')}",
        f"router {run.get('router')}",
        f"latency model {run.get('latency_model') or 'not recorded'}",
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
    finished = int(computed["requests_finished"] or 0)
    rows = [
        (
            "requests",
            f"{total:,} ({finished:,} finished, {total - finished:,} dropped)",
            GLOSSARY["requests"][1],
        )
    ]
    for column, label, key in SUMMARY_ROWS:
        text = value_text(column, shown[column])
        if column in derived:
            text += " (from the requests)"
        rows.append((label, text, GLOSSARY[key][1]))
    body = "".join(
        f'<tr><td title="{esc(c)}">{esc(a)}</td><td data-metric="{esc(a)}">{esc(b)}</td></tr>'
        for a, b, c in rows
    )
    return (
        "<table><caption>Summary (definitions: the glossary below)</caption>"
        f"<thead><tr><th>metric</th><th>value</th></tr></thead><tbody>{body}</tbody></table>"
    )


def _notes_html(notes: Sequence[str]) -> str:
    if not notes:
        return (
            '<p class="notes">Sanity notes: none (the run recorded no caveat and the report '
            "found none).</p>"
        )
    items = "".join(f"<li>{esc(n)}</li>" for n in notes)
    return (
        "<div class=\"notes\"><p><b>Sanity notes</b> (the run's and the report's):</p>"
        f"<ul>{items}</ul></div>"
    )


def _figures(
    root: Path, run: Run
) -> tuple[dict[str, float | None], dict[str, float | None], list[str]]:
    """(shown summary, computed from the requests, columns computed here) of a run."""
    computed = fig.request_summary(frames.requests(root, str(run["run_id"])), run)
    shown, derived = fig.summary_figures(run, computed, [c for c, _, _ in SUMMARY_ROWS])
    return shown, computed, derived


def _latency_section(reqs: pl.LazyFrame, run: Run) -> Section:
    sec = Section("Latency")
    points, note = fig.cdf_points(reqs)
    if not points.height:
        sec.html = "<p>Nothing to draw: no finished request.</p>"
        return sec
    targets = pl.DataFrame(
        [
            {"metric": m, "target": f"{m} target", "seconds": run.get(c)}
            for m, c in (("TTFT", "slo_ttft_s"), ("TPOT", "slo_tpot_s"), ("e2e", "slo_e2e_s"))
            if run.get(c) is not None and math.isfinite(run[c])
        ],
        schema={"metric": pl.String, "target": pl.String, "seconds": pl.Float64},
    )
    sec.charts.append(charts.latency_cdfs(points, targets, note))
    return sec


def _replica_section(ts: pl.LazyFrame, bin_s: float) -> Section:
    sec = Section("Replicas: utilisation, KV occupancy, queue")
    cells, note = fig.replica_cells(ts, bin_s)
    if not cells.height:
        sec.html = "<p>Nothing to draw: no timeseries of a serving replica stored for this run.</p>"
        return sec
    sec.charts.append(
        charts.replica_heatmap(
            cells, "utilisation", "Replica utilisation: busy share of each bin" + note, "busy"
        )
    )
    kv = cells.drop_nulls("kv_occupancy")
    if kv.height:
        sec.charts.append(
            charts.replica_heatmap(
                kv, "kv_occupancy", "KV occupancy: blocks used / capacity" + note, "KV used"
            )
        )
    queue, q_note = fig.queue_bins(ts, bin_s)
    sec.charts.append(charts.queue_length(queue, q_note))
    return sec


def run_sections(root: Path, run: Run) -> list[Section]:
    """The sections of one run's page."""
    reqs = frames.requests(root, str(run["run_id"]))
    ts = frames.timeseries(root, str(run["run_id"]))
    ts_rows = int(ts.select(pl.len()).collect().item())
    shown, computed, derived = _figures(root, run)
    notes = fig.sanity_notes(run, computed, [LABELS[c] for c in derived], ts_rows)
    bin_s = fig.bin_width(run, ts)
    notes += fig.timeseries_notes(ts, bin_s, computed["last_finish_s"])
    header = Section(
        f"Serve run {run['run_id']}",
        f'<p class="meta">{esc(_config_line(run))}</p>'
        + _notes_html(notes)
        + _summary_table(shown, computed, derived)
        + _config_table(run),
    )
    attain = Section("SLO attainment over time")
    if computed["requests"]:
        bins, note = fig.attainment_bins(reqs, run, bin_s)
        overall = shown["slo_attainment_ratio"]
        attain.charts.append(charts.attainment_over_time(bins, overall, note))
    else:
        attain.html = "<p>Nothing to draw: no requests stored for this run.</p>"
    return [
        header,
        _latency_section(reqs, run),
        attain,
        _replica_section(ts, bin_s),
        glossary_section(RUN_GLOSSARY),
    ]


def _window(run: Run) -> str:
    """The replayed window from the run's configuration (``--start``, ``--duration``)."""
    cfg = frames.config_of(run.get("config_json"))
    start, length = cfg.get("start_s"), cfg.get("duration_s")
    start_text = f"{start:g} s" if isinstance(start, int | float) else "the start"
    return f"from {start_text}, " + (
        f"{length:g} s" if isinstance(length, int | float) else "to the end"
    )


def _targets(run: Run) -> str:
    parts = [
        f"{name} {seconds_text(run[c])}"
        for name, c in (("TTFT", "slo_ttft_s"), ("TPOT", "slo_tpot_s"), ("e2e", "slo_e2e_s"))
        if run.get(c) is not None and math.isfinite(run[c])
    ]
    return ", ".join(parts) or "none"


COMPARE_FIGURES = ("slo_attainment_ratio", "ttft_p90_s", "gpu_seconds", "goodput_rps",
                   "cost_per_mtok_usd")  # fmt: skip


def compare_sections(root: Path, runs: pl.DataFrame, pages: dict[str, str]) -> list[Section]:
    """One section per replayed dataset of a source: its runs side by side."""
    out = []
    keyed = runs.with_columns(pl.col("trace_dataset").fill_null("every dataset").alias("_trace"))
    for trace in keyed["_trace"].unique(maintain_order=True).to_list():
        group = list(keyed.filter(pl.col("_trace") == trace).iter_rows(named=True))
        shown = [_figures(root, r)[0] for r in group]
        head = ["run", "window", "model", "GPU", "TP", "replicas", "prefill:decode", "batching",
                "router", "SLO targets", *(LABELS[c] for c in COMPARE_FIGURES)]  # fmt: skip
        rows = []
        for r, s in zip(group, shown, strict=True):
            cells = [f'<a href="{esc(pages[r["run_id"]])}">{esc(r["run_id"])}</a>']
            cells += [esc(_window(r))]
            cells += [esc(r.get(c)) for c in ("model", "gpu", "tp", "replicas")]
            cells += [esc(_pools(r))]
            cells += [esc(r.get(c)) for c in ("batching", "router")]
            cells += [esc(_targets(r))]
            cells += [esc(value_text(c, s[c])) for c in COMPARE_FIGURES]
            rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
        html = (
            f'<p class="meta">Runs replaying {esc(trace)}: the same traffic only when their '
            "windows are equal; SLO attainment compares fairly only under the same targets. "
            "Figures a run did not store are computed from its requests.</p>"
            "<table><caption>Runs side by side</caption><thead><tr>"
            + "".join(f"<th>{esc(h)}</th>" for h in head)
            + f"</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        )
        sec = Section(f"Runs of {runs['source'][0]}/{trace}", html)
        bars = pl.DataFrame(
            {
                "run_id": [r["run_id"] for r in group],
                **{c: [s[c] for s in shown] for c, _, _ in charts.COMPARE_METRICS},
            },
            schema={"run_id": pl.String, **{c: pl.Float64 for c, _, _ in charts.COMPARE_METRICS}},
        )
        sec.charts.append(charts.comparison(bars))
        out.append(sec)
    return [*out, glossary_section(COMPARE_GLOSSARY)]


def page_names(runs: pl.DataFrame) -> dict[str, str]:
    """Run id -> its page's file name (``serve-<run id>.html``, distinct)."""
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
    """The file name of the page comparing a source's runs."""
    return f"serve-compare-{slug(source)}.html"


def _nav(compare: str | None) -> str:
    links = ['<a href="index.html">overview</a>']
    if compare:
        links.append(f'<a href="{esc(compare)}">runs side by side</a>')
    return "<nav>" + " · ".join(links) + "</nav>"


def serve_pages(
    root: Path, sources: Sequence[str] | None = None
) -> tuple[list[Section], list[ServePage]]:
    """The overview's serving-replay section and the pages; neither when generation
    ``root`` holds no serve run of ``sources`` (every source when None).
    """
    runs = frames.runs(root).filter(pl.col("run_id").is_not_null())
    if sources is not None:
        runs = runs.filter(pl.col("source").is_in(list(sources)))
    if not runs.height:
        return [], []
    names = page_names(runs)
    counts = runs.group_by("source").len()
    compared = set(counts.filter(pl.col("len") > 1)["source"].to_list())
    pages: list[ServePage] = []
    for run in runs.iter_rows(named=True):
        src = str(run["source"])
        pages.append(
            ServePage(
                names[run["run_id"]].removesuffix(".html"),
                f"serve run {run['run_id']}",
                src,
                run_sections(root, run),
                _nav(compare_name(src) if src in compared else None),
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
    head = ["run", "trace", "model", "GPU", "TP", "replicas", "batching", "router",
            "SLO attainment"]  # fmt: skip
    rows = []
    for r in runs.iter_rows(named=True):
        cells = [f'<a href="{esc(names[r["run_id"]])}">{esc(r["run_id"])}</a>', esc(_trace(r))]
        cells += [esc(r[c]) for c in ("model", "gpu", "tp", "replicas", "batching", "router")]
        cells.append(esc(value_text("slo_attainment_ratio", r["slo_attainment_ratio"])))
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    links = "".join(
        f'<li><a href="{esc(compare_name(s))}">runs of {esc(s)} side by side</a></li>'
        for s in sorted(compared)
    )
    html = (
        "<table><caption>Serving replay runs (gpu-trace serve run): one page each</caption>"
        "<thead><tr>"
        + "".join(f"<th>{esc(h)}</th>" for h in head)
        + f"</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        + (f"<ul>{links}</ul>" if links else "")
    )
    return Section("Serving replay", html)
