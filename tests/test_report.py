"""The report site: pages, provenance, offline guarantee, escaping, size, image export,
and a real headless-Chromium render."""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import polars as pl
import pytest

from gpu_trace.reports import build_site
from gpu_trace.store.parquet import StoreTransaction

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# URL-shaped strings inside the vendored Vega bundle: XML namespace identifiers (never
# fetched) and text in error/help messages. Anything else is a failure.
BUNDLE_URLS = {
    "http://www.w3.org/2000/svg",
    "http://www.w3.org/1999/xlink",
    "http://www.w3.org/2000/xmlns/",
    "https://github.com/vega/vega-lite/issues/2415",
    "https://vega.github.io/schema/vega/v6.json",
    "https://vega.github.io/editor/",
}


@pytest.fixture(scope="module")
def site(openb_store: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    build_site(openb_store, out, title="demo", images=["svg"])
    return out


def test_pages_and_provenance(site: Path) -> None:
    index = (site / "index.html").read_text()
    page = (site / "openb.html").read_text()
    assert 'href="openb.html"' in index and 'href="index.html"' in page
    for text in (index, page):
        assert text.count("window.vegaEmbed=") == 1  # the runtime is inlined exactly once
        assert "openb_pod_list_default.csv" in text and "8152" in text  # provenance
        assert "Beware of Fragmentation" in text  # citation credited
    for title in (
        "Inventory and capacity",
        "Summary",
        "Utilization (allocation)",
        "Queueing",
        "Failures",
        "Jobs and users",
        "Arrivals",
        "GPU sharing and fragmentation",
        "Data provenance",
    ):
        assert f"<h2>{title}</h2>" in page


def test_no_external_urls(site: Path) -> None:
    for html in site.glob("*.html"):
        text = html.read_text()
        assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", text), html
        assert "@import" not in text and "url(http" not in text
        found = set(re.findall(r"""https?://[^\s"'\\)<>]+""", text))
        assert found <= BUNDLE_URLS, found - BUNDLE_URLS


def test_pages_stay_small(site: Path) -> None:
    for html in site.glob("*.html"):
        assert html.stat().st_size < 5 * 1024 * 1024


def test_svg_export(site: Path) -> None:
    svgs = sorted((site / "charts").glob("*.svg"))
    assert len(svgs) >= 10
    for svg in svgs:
        assert ET.parse(svg).getroot().tag.endswith("svg")


def hostile_store(root: Path) -> Path:
    evil = "<script>alert(1)</script>"
    now = dt.datetime(2020, 1, 1, tzinfo=dt.UTC)
    jobs = pl.DataFrame(
        {
            "source": ["evil"] * 2,
            "dataset": ["d"] * 2,
            "cluster": ["c"] * 2,
            "job_id": [evil, "j2"],
            "name": [evil, "</script><!--"],
            "user": [evil, '"><img src=x onerror=alert(2)>'],
            "vc": [evil, "v"],
            "gpus": [1.0, 2.0],
            "submit_time": [now, now],
            "start_time": [now, now],
            "end_time": [now + dt.timedelta(hours=1)] * 2,
            "queue_s": [0.0, 0.0],
            "run_s": [3600.0, 3600.0],
            "status": ["completed", "failed"],
            "time_basis": ["absolute"] * 2,
        }
    )
    ingests = pl.DataFrame(
        {
            "source": ["evil"],
            "dataset": ["d"],
            "table": ["jobs"],
            "file": [evil],
            "rows_read": [2],
            "rows_written": [2],
            "rows_quarantined": [0],
            "loader": ["test"],
            "gpu_trace_version": ["x"],
        }
    )
    with StoreTransaction(root) as tx:
        tx.write("jobs", jobs, source="evil", dataset="d")
        tx.write("ingests", ingests, source="evil", dataset="d")
    return root


def test_trace_strings_are_escaped(tmp_path: Path) -> None:
    store = hostile_store(tmp_path / "store")
    build_site(store, tmp_path / "site", title="<b>x</b>")
    for html in (tmp_path / "site").glob("*.html"):
        text = html.read_text()
        assert "<script>alert(1)" not in text
        assert "<img src=x" not in text
        assert "</script><!--" not in text
        assert "<b>x</b>" not in text
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text  # shown, escaped, in a table


def chromium_render(page: Path, tmp_path: Path) -> tuple[str, str]:
    assert CHROMIUM
    profile = tmp_path / "profile"
    proc = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            f"--user-data-dir={profile}",
            "--host-resolver-rules=MAP * ~NOTFOUND",  # any network access would fail
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=15000",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return proc.stdout, proc.stderr


@pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("CI"), reason="chromium not installed (CI installs it)"
)
@pytest.mark.parametrize("name", ["index.html", "openb.html"])
def test_charts_render_in_chromium(site: Path, tmp_path: Path, name: str) -> None:
    assert CHROMIUM, "CI must install chromium (.ci/run does)"
    dom, log = chromium_render(site / name, tmp_path)
    charts = re.findall(r'<div class="chart[^"]*" id="(chart-[0-9-]+)"', dom)
    assert charts, "no chart containers in the rendered DOM"
    for cid in charts:
        body = dom.split(f'id="{cid}"', 1)[1][:3000]
        assert "<svg" in body, f"{cid} did not render"
    console = [line for line in log.splitlines() if "CONSOLE" in line]
    assert not [c for c in console if "rror" in c], console


def test_replay_scorecard(store_copy: Path, tmp_path: Path) -> None:
    from gpu_trace.replay import ReplayConfig, run

    for scheduler in ("fifo", "sjf"):
        run(
            store_copy,
            ReplayConfig(
                source="openb", scheduler=scheduler, cluster="64x8", run_id=f"r-{scheduler}"
            ),
        )
    index = build_site(store_copy, tmp_path / "site", replay=["all"])
    text = index.read_text()
    assert "Policy scorecard" in text and "r-fifo" in text and "r-sjf" in text
    assert text.count("★") >= len(("jct_mean_s", "jct_p50_s"))  # best values marked
    assert "JCT CDF per run" in text and "Allocation over time per run" in text


# --------------------------------------------------------------------------- serving pages

SERVING_PAGES = ("azure-llm.html", "mooncake.html", "burstgpt.html", "gentd26.html")


@pytest.fixture(scope="module")
def serving_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled Azure and Mooncake files, and BurstGPT / GenTD26 files written to their
    READMEs' schemas (tests/test_serving_analyses.py): one page per serving source."""
    from tests.test_serving_analyses import SAMPLES, burstgpt_file, gentd26_file, ingest

    root = tmp_path_factory.mktemp("serving-site")
    store = root / "store"
    ingest(store, "azure-llm", SAMPLES / "azure-llm")
    ingest(store, "mooncake", SAMPLES / "mooncake")
    ingest(store, "burstgpt", burstgpt_file(root))
    ingest(store, "gentd26", gentd26_file(root))
    build_site(store, root / "site", title="serving")
    return root / "site"


def test_serving_pages_have_their_sections(serving_site: Path) -> None:
    index = (serving_site / "index.html").read_text()
    assert "<h2>Serving traces</h2>" in index and "No jobs in the store: its serving" in index
    moon = (serving_site / "mooncake.html").read_text()
    for title in ("Serving traces", "Request rate", "Burstiness", "Prefix reuse",
                  "Prefix cache hit rate (LRU)", "Inter-arrival fits"):  # fmt: skip
        assert f"<h2>{title}</h2>" in moon, title
    assert "<h2>Queueing</h2>" not in moon  # no job sections on a serving page
    assert "no absolute time, diurnal profile not meaningful" in moon
    assert "Nothing to show: no sessions in this trace" in moon
    burst = (serving_site / "burstgpt.html").read_text()
    assert "<h2>Sessions</h2>" in burst and "<h2>Observed latency</h2>" in burst
    assert "<h2>Prefix reuse</h2>" in burst and "no prefix-cache blocks" in burst


def rendered_marks(dom: str, cid: str) -> int:
    """Data marks (bars, lines, points, rules) drawn in one chart's SVG: paths and lines
    inside Vega's ``role-mark`` groups (axes, legends and titles have other roles)."""
    body = dom.split(f'id="{cid}"', 1)[1]
    end = body.find('<div class="chart')
    body = body[: end if end > 0 else len(body)]
    groups = re.findall(
        r'<g class="mark-(?:rect|line|symbol|rule|area) role-mark[^"]*"[^>]*>(.*?)</g>', body
    )
    return sum(len(re.findall(r"<(?:path|line)\b", g)) for g in groups)


@pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("CI"), reason="chromium not installed (CI installs it)"
)
@pytest.mark.parametrize("name", SERVING_PAGES)
def test_serving_charts_render_non_empty_in_chromium(
    serving_site: Path, tmp_path: Path, name: str
) -> None:
    assert CHROMIUM, "CI must install chromium (.ci/run does)"
    page = (serving_site / name).read_text()
    expected = re.findall(r'<div class="chart[^"]*" id="(chart-[0-9-]+)"', page)
    dom, log = chromium_render(serving_site / name, tmp_path)
    charts = re.findall(r'<div class="chart[^"]*" id="(chart-[0-9-]+)"', dom)
    assert charts == expected and len(charts) >= 5, charts  # rate, burstiness, profile, ...
    for cid in charts:
        assert rendered_marks(dom, cid) > 0, f"{name} {cid} drew no data"
    console = [line for line in log.splitlines() if "CONSOLE" in line]
    assert not [c for c in console if "rror" in c or "WARN" in c], console


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (CI installs it)")
@pytest.mark.parametrize("name", SERVING_PAGES)
def test_serving_layout_in_chromium(serving_site: Path, tmp_path: Path, name: str) -> None:
    """The serving pages keep the job pages' layout rules (tests/test_report_polish.py):
    no sideways scrolling at 1280 px, no two chart / facet / axis titles overlapping."""
    from tests.test_report_polish import assert_layout

    assert_layout(serving_site, tmp_path, name)
