"""The report's serving-replay pages (issue 30): one page per serve run, a comparison
page per source with several runs, drawn from the serve tables of a store built by hand
(tests/serve_report_common.py: the rows and every expected figure worked out there).

Definitions checked (the metrics of the issue and /work/notes/serve_spec.md "Metrics"):
SLO attainment counts dropped requests as missing and a one-token answer (no TPOT) as
meeting the TPOT target; goodput is DistServe's (Zhong et al., OSDI 2024, section 2:
"the maximum request rate that can be served adhering to the SLO attainment goal"; per
run here: requests meeting both targets / horizon); percentiles the report computes
interpolate linearly (numpy's default, DuckDB quantile_cont).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from gpu_trace.reports import build_site
from gpu_trace.reports import serve_replay_charts as charts
from gpu_trace.reports import serve_replay_figures as fig
from gpu_trace.reports import serve_replay_frames as frames
from gpu_trace.reports.page import render_page
from gpu_trace.reports.serve_replay_section import serve_pages
from gpu_trace.store.generations import snapshot_root
from gpu_trace.store.parquet import StoreTransaction
from tests.serve_report_common import DROP_REASON, RR_NOTE, RR_RUN, serve_store
from tests.test_report import BUNDLE_URLS, CHROMIUM, chromium_render, rendered_marks

RUN_PAGES = ("serve-rr.html", "serve-lt.html")
COMPARE_PAGE = "serve-compare-azure-llm.html"

# Hand-computed in tests/serve_report_common.py's docstring.
RR_HEADER = {
    "requests": "5 (4 finished, 1 dropped)",
    "TTFT target": "2.000 s",
    "TPOT target": "100.0 ms",
    "end-to-end target": "none",
    "SLO attainment": "40.0 %",  # 2 of 5
    "goodput": "0.114 requests/s",  # 2 / 17.5 s
    "TTFT p50": "1.250 s",
    "TTFT p90": "2.550 s",
    "TTFT p99": "2.955 s",
    "TPOT p50": "50.0 ms",
    "TPOT p90": "170.0 ms",
    "end-to-end p50": "2.050 s",
    "end-to-end p90": "3.380 s",
    "preemptions": "0",
    "GPU-seconds": "40.0 GPU-s",
    "utilisation (whole run)": "47.5 %",
    "energy per token": "12.500 J",
    "cost per million tokens": "0.0123 USD",
}
FROM = " (from the requests)"
LT_HEADER = {  # the run stored its targets and GPU-seconds: the rest from its requests
    "requests": "3 (3 finished, 0 dropped)",
    "TTFT target": "2.000 s",
    "TPOT target": "100.0 ms",
    "end-to-end target": "1.500 s",
    "SLO attainment": "33.3 %" + FROM,  # 1 of 3: request 1 is over the e2e target
    "goodput": "0.073 requests/s" + FROM,  # 1 / 13.65 s (the last finish)
    "TTFT p50": "2.000 s" + FROM,
    "TTFT p90": "2.400 s" + FROM,  # 2.0 + 0.8 x (2.5 - 2.0)
    "TTFT p99": "2.490 s" + FROM,
    "TPOT p50": "75.0 ms" + FROM,  # (0.1 + 0.05) / 2
    "TPOT p90": "95.0 ms" + FROM,
    "end-to-end p50": "2.000 s" + FROM,
    "end-to-end p90": "2.520 s" + FROM,
    "preemptions": "not recorded",
    "GPU-seconds": "30.0 GPU-s",
    "utilisation (whole run)": "not recorded",
    "energy per token": "not recorded",
    "cost per million tokens": "not recorded",
}


@pytest.fixture(scope="module")
def serve_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("serve-report")
    store = serve_store(root / "store")
    build_site(store, root / "site", title="serve", images=["svg"])
    return root / "site"


def header_values(html: str) -> dict[str, str]:
    """The summary table's (metric -> shown value) cells of a run page."""
    cells = re.findall(r'<td data-metric="([^"]*)">([^<]*)</td>', html)
    return {k.replace("&#x27;", "'"): v for k, v in cells}


def chart_specs(html: str) -> dict[str, dict[str, Any]]:
    """Chart id -> its Vega-Lite spec, from the page's embed calls."""
    found = re.findall(r'vegaEmbed\("#(chart-[0-9-]+)", (.*?), \{"renderer"', html)
    return {cid: json.loads(spec) for cid, spec in found}


def titled(specs: dict[str, dict[str, Any]], words: str) -> dict[str, Any]:
    """The one spec whose title starts with ``words``."""
    hits = [s for s in specs.values() if str(s.get("title", "")).startswith(words)]
    assert len(hits) == 1, [s.get("title") for s in specs.values()]
    return hits[0]


def rows_of(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Every inlined data row of a spec (altair puts them in ``datasets``)."""
    return [row for rows in spec.get("datasets", {}).values() for row in rows]


def test_pages_are_offline_and_export_their_charts(serve_site: Path) -> None:
    for name in (*RUN_PAGES, COMPARE_PAGE):
        text = (serve_site / name).read_text()
        assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", text), name
        assert set(re.findall(r"""https?://[^\s"'\\)<>]+""", text)) <= BUNDLE_URLS
    svgs = {p.name.rsplit("-", 2)[0] for p in (serve_site / "charts").glob("serve-*.svg")}
    assert svgs == {"serve-rr", "serve-lt", "serve-compare-azure-llm"}


def test_pages_exist_and_are_linked(serve_site: Path) -> None:
    index = (serve_site / "index.html").read_text()
    assert "<h2>Serving replay</h2>" in index
    for name in (*RUN_PAGES, COMPARE_PAGE):
        assert (serve_site / name).is_file()
        assert f'href="{name}"' in index
    for name in RUN_PAGES:
        assert f'href="{COMPARE_PAGE}"' in (serve_site / name).read_text()


@pytest.mark.parametrize(
    ("name", "expected"), [("serve-rr.html", RR_HEADER), ("serve-lt.html", LT_HEADER)]
)
def test_header_equals_hand_figures(serve_site: Path, name: str, expected: dict[str, str]) -> None:
    assert header_values((serve_site / name).read_text()) == expected


def test_sanity_notes_are_shown(serve_site: Path) -> None:
    rr = (serve_site / "serve-rr.html").read_text()
    assert RR_NOTE in rr  # the run's own note
    assert "1 of 5 requests were dropped: they count as missing the SLO targets" in rr
    assert f"dropped: 1 x {DROP_REASON}" in rr
    lt = (serve_site / "serve-lt.html").read_text()
    assert (
        "not stored by the run, computed here from its requests: SLO attainment, goodput, "
        "TTFT p50, TTFT p90, TTFT p99, TPOT p50, TPOT p90, end-to-end p50, end-to-end p90"
    ) in lt
    for text in (rr, lt):
        assert "<details" not in text  # never folded away


def test_chart_data_is_the_fixture(serve_site: Path) -> None:
    specs = chart_specs((serve_site / "serve-rr.html").read_text())
    assert len(specs) == 5
    attain = rows_of(titled(specs, "SLO attainment over time"))
    bins = sorted(
        (r["time_s"], r["requests"], r["met"], r["attainment"]) for r in attain if "met" in r
    )
    assert bins == [(0.0, 2, 2, 1.0), (10.0, 3, 0, 0.0)]  # arrivals 0, 2 | 12, 14, 15
    util = rows_of(titled(specs, "Replica utilisation"))
    assert sorted((r["replica"], r["time_s"], r["utilisation"]) for r in util) == [
        (0, 0.0, 0.4), (0, 10.0, 0.6), (1, 0.0, 0.1), (1, 10.0, 0.8),
    ]  # fmt: skip
    kv = rows_of(titled(specs, "KV occupancy"))
    assert sorted((r["replica"], r["time_s"], r["kv_occupancy"]) for r in kv) == [
        (0, 0.0, 0.1), (0, 10.0, 0.3), (1, 0.0, 0.05), (1, 10.0, 0.5),
    ]  # fmt: skip
    queue = rows_of(titled(specs, "Queue length"))
    waiting = sorted((r["time_s"], r["requests"]) for r in queue if r["state"] == "waiting")
    assert waiting == [(0.0, 0.0), (10.0, 1.0), (20.0, 1.0)]  # 20: the last bin's end
    cdf = rows_of(titled(specs, "Latency CDFs"))
    ttft = sorted(
        (r["seconds"], r["share"]) for r in cdf if r.get("metric") == "TTFT" and "share" in r
    )
    # the four finished requests, each a quarter, from 0 % at the shortest
    assert ttft == [(0.5, 0.0), (0.5, 0.25), (1.0, 0.5), (1.5, 0.75), (3.0, 1.0)]


def test_comparison_page(serve_site: Path) -> None:
    page = (serve_site / COMPARE_PAGE).read_text()
    rows = re.findall(r"<tr><td><a [^>]*>(\w+)</a></td>(.*?)</tr>", page)
    cells = {run: re.findall(r"<td>([^<]*)</td>", rest) for run, rest in rows}
    # attainment, p90 TTFT, GPU-seconds of each run (hand figures above)
    assert cells["rr"][-5:-2] == ["40.0 %", "2.550 s", "40.0 GPU-s"]
    assert cells["lt"][-5:-2] == ["33.3 %", "2.400 s", "30.0 GPU-s"]
    bars = rows_of(titled(chart_specs(page), "Runs side by side"))
    attained = {r["run_id"]: r["slo_attainment_ratio"] for r in bars if "slo_attainment_ratio" in r}
    assert attained == pytest.approx({"rr": 0.4, "lt": 1 / 3})


def test_stored_attainment_that_disagrees_is_a_note(tmp_path: Path) -> None:
    store = serve_store(tmp_path / "store", rr_run={**RR_RUN, "slo_attainment_ratio": 0.5})
    _, pages = serve_pages(snapshot_root(store))
    rr = next(p for p in pages if p.name == "serve-rr")
    html = render_page("t", rr.sections, "", "now")
    assert "the stored SLO attainment (50.0 %) differs from its requests&#x27; (40.0 %)" in html
    assert header_values(html)["SLO attainment"] == "50.0 %"  # the run's figure, not replaced


def test_runs_sharing_a_file_are_told_apart(tmp_path: Path) -> None:
    """Rows of several runs in one file (not named after a run): each page reads its
    own run's rows by run_id."""
    store = serve_store(tmp_path / "store", one_file=True)
    _, pages = serve_pages(snapshot_root(store))
    by_name = {p.name: render_page("t", p.sections, "", "now") for p in pages}
    assert header_values(by_name["serve-rr"]) == RR_HEADER
    assert header_values(by_name["serve-lt"]) == LT_HEADER


def test_run_without_timeseries_or_requests_says_so(tmp_path: Path) -> None:
    store = serve_store(tmp_path / "store")
    root = snapshot_root(store)
    (root / "serve_timeseries" / "source=azure-llm" / "lt.parquet").unlink()
    (root / "serve_requests" / "source=azure-llm" / "rr.parquet").unlink()
    _, pages = serve_pages(root)
    by_name = {p.name: render_page("t", p.sections, "", "now") for p in pages}
    lt = by_name["serve-lt"]
    assert "no timeseries is stored for this run: no utilisation, KV or queue chart" in lt
    assert "Nothing to draw: no timeseries of a serving replica stored for this run." in lt
    assert len(chart_specs(lt)) == 2  # latency CDFs and attainment over time only
    rr = by_name["serve-rr"]
    assert "no requests are stored for this run: no latency or attainment chart" in rr
    assert "the run counted 5 requests but serve_requests holds 0" in rr
    assert header_values(rr)["SLO attainment"] == "40.0 %"  # the stored figure stays
    assert len(chart_specs(rr)) == 3  # the replicas' charts only


def test_run_strings_are_escaped(tmp_path: Path) -> None:
    evil = "<script>alert(1)</script>"
    run = {
        **RR_RUN,
        "notes": evil,
        "drop_reasons": json.dumps({"<img src=x onerror=alert(2)>": 1}),
        "config_json": json.dumps({"profile": "</table><script>alert(3)</script>"}),
        "model": evil,
    }
    store = serve_store(tmp_path / "store", rr_run=run)
    index, pages = serve_pages(snapshot_root(store))
    for page in pages:
        html = render_page("t", [*index, *page.sections], "", "now")
        _, _, tail = html.partition("</head>")  # the Vega bundle is in the head
        assert "<script>alert" not in tail and "<img src=x" not in tail, page.name
    rr = next(p for p in pages if p.name == "serve-rr")
    text = render_page("t", rr.sections, "", "now")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "&lt;img src=x onerror=alert(2)&gt;" in text


def test_split_pools_name_the_role_of_each_replica() -> None:
    cells = pl.DataFrame(
        {
            "time_s": [0.0, 0.0, 0.0],
            "time_end_s": [10.0] * 3,
            "replica": [0, 1, 2],
            "role": ["prefill", "decode", "decode"],
            "utilisation": [0.5, 0.2, 0.1],
        }
    )
    spec = charts.replica_heatmap(cells, "utilisation", "t", "busy").to_dict()
    assert spec["encoding"]["y"]["sort"] == ["0 (prefill)", "1 (decode)", "2 (decode)"]


def _jobs_store(root: Path) -> Path:
    now = dt.datetime(2020, 1, 1, tzinfo=dt.UTC)
    jobs = pl.DataFrame(
        {
            "source": ["s"], "dataset": ["d"], "cluster": ["c"], "job_id": ["1"], "gpus": [1.0],
            "submit_time": [now], "start_time": [now], "end_time": [now + dt.timedelta(hours=1)],
            "queue_s": [0.0], "run_s": [3600.0], "status": ["completed"], "time_basis": ["absolute"],
        }
    )  # fmt: skip
    with StoreTransaction(root) as tx:
        tx.write("jobs", jobs, source="s", dataset="d")
    return root


def test_store_without_serve_runs_has_no_serving_replay_pages(tmp_path: Path) -> None:
    store = _jobs_store(tmp_path / "store")
    # a zero-row serve_runs placeholder (how the store keeps empty tables) is no run;
    # the store writes it itself once the serve tables are registered
    empty = snapshot_root(store) / "serve_runs" / "source=_empty" / "empty.parquet"
    if not empty.exists():
        empty.parent.mkdir(parents=True)
        pl.DataFrame(schema={"run_id": pl.String, "source": pl.String}).write_parquet(empty)
    build_site(store, tmp_path / "site")
    assert not list((tmp_path / "site").glob("serve-*.html"))
    assert "Serving replay" not in (tmp_path / "site" / "index.html").read_text()


needs_chromium = pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("CI"), reason="chromium not installed (CI installs it)"
)


@needs_chromium
@pytest.mark.parametrize("name", [*RUN_PAGES, COMPARE_PAGE])
def test_charts_render_non_empty_in_chromium(serve_site: Path, tmp_path: Path, name: str) -> None:
    assert CHROMIUM, "CI must install chromium (.ci/run does)"
    page = (serve_site / name).read_text()
    expected = re.findall(r'<div class="chart[^"]*" id="(chart-[0-9-]+)"', page)
    dom, log = chromium_render(serve_site / name, tmp_path)
    charts = re.findall(r'<div class="chart[^"]*" id="(chart-[0-9-]+)"', dom)
    assert charts == expected and len(charts) == (1 if name == COMPARE_PAGE else 5), charts
    for cid in charts:
        assert rendered_marks(dom, cid) > 0, f"{name} {cid} drew no data"
    console = [line for line in log.splitlines() if "CONSOLE" in line]
    assert not [c for c in console if "rror" in c or "WARN" in c], console
    if name != COMPARE_PAGE:  # the header as the browser shows it: the hand figures
        assert header_values(dom) == (RR_HEADER if name == "serve-rr.html" else LT_HEADER)


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (CI installs it)")
@pytest.mark.parametrize("name", [*RUN_PAGES, COMPARE_PAGE, "index.html"])
def test_layout_in_chromium(serve_site: Path, tmp_path: Path, name: str) -> None:
    """The job pages' layout rules (tests/test_report_polish.py): no sideways scrolling
    at 1280 px, no two chart / facet / axis titles overlapping."""
    from tests.test_report_polish import assert_layout

    assert_layout(serve_site, tmp_path, name)


def test_timeseries_that_breaks_the_contract_is_a_note() -> None:
    """busy_s is "seconds of the bin spent in iterations" and bins run "from 0 to the
    last finish" (gpu_trace/serve/result.py TIMESERIES_COLUMNS): a row busier than its
    bin, KV use above capacity or bins stopping early are said, not drawn silently."""
    ts = pl.DataFrame(
        {
            "time_s": [0.0, 0.0, 10.0],
            "busy_s": [25.0, 4.0, 10.0],  # 25 s in a 10 s bin
            "kv_used_blocks": [120.0, 5.0, 10.0],  # 120 of 100
            "kv_capacity_blocks": [100.0, 100.0, 100.0],
        }
    )
    notes = fig.timeseries_notes(ts.lazy(), 10.0, last_finish_s=95.0)  # bins end at 20 s
    assert notes == [
        "busy_s exceeds the 10 s bin in 1 (bin, replica) rows (up to 25.0 s): utilisation "
        "is drawn capped at 100 %",
        "KV blocks used exceed the capacity in 1 (bin, replica) rows: occupancy is drawn "
        "capped at 100 %",
        "the timeseries ends at 20 s but the last request finished at 95 s: the charts of "
        "replicas cover only that part",
    ]
    assert fig.timeseries_notes(ts.lazy().with_columns(pl.col("busy_s").clip(0, 10),
                                                pl.col("kv_used_blocks").clip(0, 100)),
                                10.0, last_finish_s=20.0) == []  # fmt: skip


def test_runs_of_older_and_newer_files_line_up(tmp_path: Path) -> None:
    """A serve_runs file without a column (written before it existed) read first, one
    with it after: each run keeps its own values, the missing one reads as null."""
    store = serve_store(tmp_path / "store")
    first = snapshot_root(store) / "serve_runs" / "source=azure-llm" / "lt.parquet"
    pl.read_parquet(first).drop("cost_per_mtok_usd", "notes").write_parquet(first)
    runs = frames.runs(snapshot_root(store))
    assert dict(zip(runs["run_id"], runs["cost_per_mtok_usd"], strict=True)) == {
        "lt": None,
        "rr": 0.0123,
    }
    assert dict(zip(runs["run_id"], runs["notes"], strict=True)) == {"lt": None, "rr": RR_NOTE}
