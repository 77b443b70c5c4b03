"""The report of a Kubernetes + dcgm-exporter store (tests/idle_common.py: pods and nodes
as the Kubernetes API returns them, dcgm-exporter series as Prometheus query_range
answers): every chart renders marks in headless Chromium (counted per chart), the
telemetry page has utilization / memory / power over time per cluster, host and GPU and
a GPU x time heatmap, the jobs page has idle GPU-hours and energy by user and namespace;
and the down-sampling bounds of :mod:`gpu_trace.analyses.telemetry_series`."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from gpu_trace.analyses import telemetry_series as ts
from gpu_trace.reports import build_site
from gpu_trace.schemas import TABLES
from gpu_trace.store.parquet import polars_schema
from tests.idle_common import k8s_store
from tests.test_report import CHROMIUM, chromium_render

NOT_MARKS = {"axis", "title", "visualization", "legend"}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("k8s-report")
    out = tmp / "site"
    build_site(k8s_store(tmp), out, title="k8s")
    return out


def marks_per_chart(dom: str) -> dict[str, int]:
    """Vega's SVG renderer labels every drawn item with an ``aria-roledescription`` (bar,
    point, line mark, rect mark ...); groups, axes, titles and legends are not marks.
    """
    ids = re.findall(r'<div class="chart[^"]*" id="(chart-[0-9-]+)"', dom)
    bodies = re.split(r'<div class="chart[^"]*" id="chart-[0-9-]+"', dom)[1:]
    out = {}
    for cid, body in zip(ids, bodies, strict=True):
        svg = body.split("</svg>")[0]
        roles = re.findall(r'aria-roledescription="([^"]*)"', svg)
        out[cid] = sum(1 for r in roles if r not in NOT_MARKS and "container" not in r)
    return out


def test_pages_have_the_telemetry_charts(site: Path) -> None:
    jobs_page = (site / "kubernetes.html").read_text()
    tele_page = (site / "prometheus-range.html").read_text()
    assert "Idle GPU-hours by job_id" in jobs_page
    assert "Energy from GPU telemetry by namespace" in jobs_page
    assert "Energy from GPU telemetry by user" in jobs_page
    for level in ("cluster", "host", "gpu"):
        # samples span 10:00-10:50: 3,000 s / 10 s = 300 bins (over 200), / 30 s = 100
        assert f"GPU telemetry per {level}, 30s bins" in tele_page
    assert "Utilization per GPU over time" in tele_page
    # the series name no cluster; node-a is in the Kubernetes inventory of cluster k1
    assert '"series": "k1"' in tele_page


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (CI installs it)")
def test_every_chart_has_marks_in_chromium(site: Path, tmp_path: Path) -> None:
    counts: dict[str, dict[str, int]] = {}
    for name in ("index.html", "kubernetes.html", "prometheus-range.html"):
        dom, _ = chromium_render(site / name, tmp_path / name)
        counts[name] = marks_per_chart(dom)
        assert counts[name], f"{name}: no charts rendered"
        empty = [c for c, n in counts[name].items() if n == 0]
        assert not empty, f"{name}: charts without marks: {empty}"
    tele = list(counts["prometheus-range.html"].values())
    # the four telemetry charts, by hand from the fixture (sparse lines draw a dot per
    # point): per cluster and per host one line per metric panel (3) and 6 ten-minute
    # points each for utilization, memory and power (18): 21; per GPU 9 lines (3 GPUs x
    # 3 metrics) and points: utilization 6 + 5 + 6 (GPU 1 has 5 samples), memory and
    # power 3 x 6 each: 9 + 17 + 18 + 18 = 62; the heatmap: 6 + 5 + 6 = 17 rects.
    assert tele[-4:] == [21, 21, 62, 17]


def samples(hosts: int, gpus: int, minutes: int) -> pl.LazyFrame:
    """Canonical gpu_samples rows: every GPU every minute, utilization = the GPU index x 10
    and power = 100 W, so means and sums are known by hand.
    """
    t0 = datetime(2026, 3, 1, tzinfo=UTC)
    times = [t0 + timedelta(minutes=m) for m in range(minutes)]
    frame = (
        pl.DataFrame({"time": times})
        .join(pl.DataFrame({"host": [f"h{h:02d}" for h in range(hosts)]}), how="cross")
        .join(pl.DataFrame({"gpu_index": list(range(gpus))}), how="cross")
        .join(pl.DataFrame({"metric": ["gpu_util_pct", "power_w"]}), how="cross")
        .with_columns(
            pl.col("time").dt.cast_time_unit("us").dt.replace_time_zone("UTC"),
            pl.col("gpu_index").cast(pl.Int16),
            pl.when(pl.col("metric") == "power_w")
            .then(100.0)
            .otherwise(pl.col("gpu_index").cast(pl.Float64) * 10)
            .alias("value"),
            pl.lit("src").alias("source"),
            pl.lit("c1").alias("cluster"),
        )
    )
    schema = polars_schema(TABLES["gpu_samples"])
    return frame.with_columns(
        pl.lit(None, dtype=t).alias(c) for c, t in schema.items() if c not in frame.columns
    ).lazy()


def test_downsampling_bounds_and_values() -> None:
    # 12 hosts x 8 GPUs, one week of 1-minute samples: 10,080 minutes per GPU
    (b,) = ts.binned(samples(12, 8, 7 * 24 * 60))
    assert b.every == "1h"  # 7 d / 1 h = 168 bins < 200; 30 min would give 336
    cluster, note = ts.series(b, "cluster")
    assert note == ""
    per_line = cluster.group_by("series", "label").len()
    assert per_line["len"].max() <= ts.MAX_BINS
    # cluster utilization: mean over GPUs of (index x 10) = (0 + ... + 70) / 8 = 35 %;
    # cluster power: 96 GPUs x 100 W = 9,600 W in every bin
    util = cluster.filter(pl.col("label") == "utilization (%)")["value"]
    power = cluster.filter(pl.col("label") == "power (W)")["value"]
    assert util.to_list() == pytest.approx([35.0] * 168)
    assert power.to_list() == pytest.approx([9600.0] * 168)
    hosts, note = ts.series(b, "host")
    assert hosts["series"].n_unique() == ts.MAX_SERIES and "10 of 12" in note
    assert hosts.filter(pl.col("label") == "power (W)")["value"].to_list() == pytest.approx(
        [800.0] * 168 * ts.MAX_SERIES  # 8 GPUs x 100 W per host
    )
    gpus, note = ts.series(b, "gpu")
    assert gpus["series"].n_unique() == ts.MAX_SERIES and "10 of 96" in note
    grid, note = ts.heatmap(b)
    assert grid["series"].n_unique() == ts.HEATMAP_ROWS and "40 of 96" in note
    assert grid.group_by("series").len()["len"].max() <= ts.HEATMAP_BINS  # 2 h bins: 84


def test_relative_samples_are_binned_apart_on_elapsed_time() -> None:
    absolute = samples(1, 1, 30)
    relative = samples(1, 1, 5).with_columns(
        pl.col("time") - pl.lit(datetime(2026, 3, 1, tzinfo=UTC) - datetime(1970, 1, 1, tzinfo=UTC))
    )
    binned = {b.time_basis: b for b in ts.binned(pl.concat([absolute, relative]))}
    assert set(binned) == {"absolute", "relative"}
    rel, _ = ts.series(binned["relative"], "gpu")
    assert "time" not in rel.columns
    # 5 one-minute samples from 00:00 (relative 1970): 1 s bins -> elapsed 0 .. 4 min
    assert sorted(set(rel["elapsed_h"].to_list())) == pytest.approx(
        [m / 60 for m in range(5)], abs=1e-4
    )
