"""Report polish: human headers, unfinished pods not shown as failures, at most ten
series a chart, readable duration ticks, synthetic samples labelled, and in a real
headless Chromium: no page wider than the window, no overlapping chart titles.

Expected figures are worked out from the raw files with the stdlib csv module."""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
from pathlib import Path

import polars as pl
import pytest

from gpu_trace.loaders import LOADERS, ingest
from gpu_trace.reports import build_site, charts
from gpu_trace.synth.bundled import bundled, sha256
from tests.conftest import OPENB, SAMPLES

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def site(openb_store: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("polish-site")
    build_site(openb_store, out, title="demo")
    return out


def _gpu_pod_phases() -> dict[str, int]:
    """pod_phase counts of GPU pods (num_gpu x gpu_milli > 0; empty gpu_milli = 1000,
    as the loader reads it) in the raw default pod list."""
    counts: dict[str, int] = {}
    with (OPENB / "openb_pod_list_default.csv").open(newline="") as f:
        for row in csv.DictReader(f):
            if int(row["num_gpu"]) * int(row["gpu_milli"] or 1000) > 0:
                counts[row["pod_phase"]] = counts.get(row["pod_phase"], 0) + 1
    return counts


def _summary_row(page: str) -> dict[str, str]:
    table = page.split("<caption>Summary (status", 1)[1].split("</table>", 1)[0]
    heads = re.findall(r"<th[^>]*>([^<]*)</th>", table)
    cells = re.findall(r"<td>([^<]*)</td>", table)
    return dict(zip(heads, cells, strict=True))


def test_unfinished_pods_are_not_failures(site: Path) -> None:
    phases = _gpu_pod_phases()
    total = sum(phases.values())
    row = _summary_row((site / "openb.html").read_text())
    failed = 100 * phases["Failed"] / total
    unfinished = 100 * (phases["Running"] + phases["Pending"]) / total
    assert row["failed"] == f"{failed:.1f} %"
    assert row["unfinished (running, pending, unknown)"] == f"{unfinished:.1f} %"
    assert failed < 50 < unfinished  # the Helios-style rate over finished pods says 91 %


def test_human_headers_with_raw_names_in_tooltips(site: Path) -> None:
    page = (site / "openb.html").read_text()
    assert '<th title="med_run_s_gpu: median of run_s over GPU jobs">' in page
    assert ">median run time, GPU jobs</th>" in page
    for raw in ("med_run_s_gpu", "avg_queue_s_gpu", "rows_quarantined", "size_bucket"):
        assert f"<th>{raw}</th>" not in page and f'">{raw}</th>' not in page


def _colour_count(spec: dict[str, object]) -> int:
    """Distinct values of the colour field over the spec's inline datasets."""
    enc = spec.get("encoding") or (spec.get("spec") or {}).get("encoding", {})  # type: ignore[union-attr]
    field = (enc.get("color") or {}).get("field")  # type: ignore[union-attr]
    rows = [r for d in spec.get("datasets", {}).values() for r in d]  # type: ignore[union-attr]
    return len({r.get(field) for r in rows}) if field else 0


def test_at_most_ten_series_per_chart() -> None:
    """13 traces x 2 job classes at 3 edges: the CDF keeps the 10 with most jobs
    (trace k has k + 1 jobs, so traces 3..12 stay) and says so in its title."""
    cdf = pl.DataFrame(
        {
            "source": [f"t{k:02d}" for k in range(13) for _ in range(6)],
            "cluster": ["c"] * 78,
            "job_class": (["cpu"] * 3 + ["gpu"] * 3) * 13,
            "x_s": [1.0, 60.0, 3600.0] * 26,
            "n": [k + 1 for k in range(13) for _ in range(6)],
            "cdf": [0.2, 0.5, 1.0] * 26,
        }
    )
    spec = charts.duration_cdf(cdf).to_dict()
    assert _colour_count(spec) == 10
    kept = {r["series"] for d in spec["datasets"].values() for r in d}
    assert kept == {f"t{k:02d}/c" for k in range(3, 13)}
    assert "10 of 13 shown" in json.dumps(spec["title"])


def test_duration_ticks_are_round_times() -> None:
    """Data from 5 s to 40 days: ticks from 1 s (5 s / 10 rounds down to the 1 s tick)
    to 1 y (40 d x 10 = 400 d >= 365 d), i.e. all ten round durations."""
    axis = charts.duration_axis(pl.Series("jct_s", [5.0, 40 * 86400.0]), "t").to_dict()
    assert axis["scale"]["type"] == "log"
    assert axis["axis"]["values"] == [t for t, _ in charts.DURATION_TICKS]
    assert "'1 h'" in axis["axis"]["labelExpr"] and "'30 d'" in axis["axis"]["labelExpr"]


def test_bundled_synthetic_samples_are_registered() -> None:
    """Every data file under data/samples/*/synthetic/ is listed with its sha256 (the
    .header files are the upstream column lists, byte for byte, and not listed), both in
    bundled.toml and in the manifest of its folder (which is what the report reads)."""
    files = sorted(
        p
        for p in SAMPLES.glob("*/synthetic/**/*")
        if p.is_file() and p.suffix != ".header" and not p.name.startswith("gpu-trace-synth-")
    )
    assert {p.relative_to(SAMPLES.parent.parent).as_posix() for p in files} == {
        f.path for f in bundled().values()
    }
    for p in files:
        assert sha256(p) in bundled(), p
    assert {f.family for f in bundled().values()} == {"philly", "helios", "pai2020"}
    listed = {}
    for family in ("philly", "helios", "pai2020"):
        folder = SAMPLES / family / "synthetic"
        doc = json.loads((folder / f"gpu-trace-synth-{family}.json").read_text())
        assert doc["command"] == f"gpu-trace synth {family} --jobs 500 --seed 0"
        listed.update({folder / f["path"]: f["sha256"] for f in doc["files"]})
    assert listed == {p: sha256(p) for p in files}


def test_synthetic_jobs_are_labelled(tmp_path: Path) -> None:
    store = tmp_path / "store"
    ingest(LOADERS["helios"], SAMPLES / "helios", store)  # real capacity files
    ingest(LOADERS["helios"], SAMPLES / "helios" / "synthetic", store)
    ingest(LOADERS["philly"], SAMPLES / "philly" / "synthetic", store)
    build_site(store, tmp_path / "site")
    helios = (tmp_path / "site" / "helios.html").read_text()
    assert "<h2>Synthetic data</h2>" in helios
    assert "<title>gpu-trace report: helios (synthetic jobs)</title>" in helios
    assert "gpu-trace synth helios --jobs 500 --seed 0" in helios
    assert "earth, saturn, uranus, venus" in helios
    assert "No jobs" not in helios  # every section has something to show
    # the real capacity files are the trace's; the generated jobs are not credited to it
    assert "for its real files only" in helios
    index = (tmp_path / "site" / "index.html").read_text()
    assert "philly (synthetic jobs)" in index and "helios (synthetic jobs)" in index


def test_real_trace_is_not_labelled_synthetic(site: Path) -> None:
    for page in site.glob("*.html"):
        assert "Synthetic data" not in page.read_text()


MEASURE = """<script>
setTimeout(function () {
  var out = {width: document.documentElement.scrollWidth, window: window.innerWidth,
             overlaps: []};
  document.querySelectorAll('.chart svg').forEach(function (svg, n) {
    var boxes = [];
    svg.querySelectorAll('g[class*="title"] text, g[class*="header"] text').forEach(
      function (t) { if (t.textContent) boxes.push([t.textContent, t.getBoundingClientRect()]); });
    for (var i = 0; i < boxes.length; i++) for (var j = i + 1; j < boxes.length; j++) {
      var a = boxes[i][1], b = boxes[j][1];
      var w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
      var h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
      if (w > 1 && h > 1) out.overlaps.push([n, boxes[i][0], boxes[j][0]]);
    }
  });
  var pre = document.createElement('pre'); pre.id = 'measured';
  pre.textContent = JSON.stringify(out); document.body.appendChild(pre);
}, 8000);
</script></body>"""


def assert_layout(built: Path, tmp_path: Path, name: str) -> None:
    """Page ``name`` of the site in ``built`` at 1280 px in headless Chromium: it never
    scrolls sideways (wide tables scroll inside their own box) and no two chart / facet /
    axis titles overlap (:data:`MEASURE` measures it in the page).
    """
    assert CHROMIUM
    page = tmp_path / name
    head, _, tail = (built / name).read_text().rpartition("</body>")  # the bundle has one too
    page.write_text(head + MEASURE + tail)
    proc = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--window-size=1280,900",
            "--virtual-time-budget=20000",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    found = re.search(r'<pre id="measured">(.*?)</pre>', proc.stdout)
    assert found, proc.stderr[-2000:]
    measured = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert measured["width"] <= measured["window"], measured
    assert measured["overlaps"] == [], measured["overlaps"]


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (CI installs it)")
@pytest.mark.parametrize("name", ["index.html", "openb.html"])
def test_layout_in_chromium(site: Path, tmp_path: Path, name: str) -> None:
    """A 1280 px window: the page never scrolls sideways (wide tables scroll inside
    their own box) and no two chart / facet / axis titles overlap."""
    assert_layout(site, tmp_path, name)
