"""Relative-time telemetry (outputs without timestamps, ingested without ``--start``) is
never mixed with absolute series of the same host: energy per GPU reported a single
series from 1970-01-01 to 2026 with a "gap" of 20,648 days before. Both files are the
real captures in data/samples/telemetry (PROVENANCE.md there)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SAMPLES
from tests.idle_common import app, runner

TELEMETRY = SAMPLES / "telemetry"
HOST = "ub20-a100-k8s"  # the Hostname label of the dcgm-exporter sample


def ingest(store: Path, *args: str) -> None:
    result = runner.invoke(app, ["ingest", *args, "--store", str(store)])
    assert result.exit_code == 0, result.output


@pytest.fixture
def mixed(tmp_path: Path) -> Path:
    """``nvidia-smi dmon`` (no timestamps: relative) and two dcgm-exporter scrapes of the
    same host at 08:00 and 08:01 UTC (``--time``: absolute), all GPU 0."""
    store = tmp_path / "store"
    ingest(store, "nvidia-smi", str(TELEMETRY / "nvidia-smi-dmon-h100.txt"), "--host", HOST)
    for minute in ("00", "01"):
        copy = tmp_path / f"scrape-08{minute}.prom"
        shutil.copyfile(TELEMETRY / "dcgm-exporter-a100-mig.prom", copy)
        ingest(store, "prometheus", str(copy), "--time", f"2026-07-14T08:{minute}:00Z")
    return store


def energy_by_gpu(store: Path) -> tuple[list[dict[str, Any]], str]:
    result = runner.invoke(
        app, ["analyze", "energy", "--by", "gpu", "--store", str(store), "-f", "json"]
    )
    assert result.exit_code == 0, result.output
    rows: list[dict[str, Any]] = json.loads(result.stdout)
    return rows, result.stderr


def test_relative_and_absolute_series_are_apart(mixed: Path) -> None:
    rows, err = energy_by_gpu(mixed)
    assert all(r["gap_s"] < 86400 for r in rows), rows  # never a 1970 -> 2026 "gap"
    by_basis = {r["time_basis"]: r for r in rows}
    assert set(by_basis) == {"relative", "absolute"}
    rel, absolute = by_basis["relative"], by_basis["absolute"]
    # dmon pwr column 631, 634, 633, 634, 636 W one tick (1 s) apart: trapezoid
    # 632.5 + 633.5 + 633.5 + 635 = 2534.5 J over 4 s, no gap.
    assert rel["energy_kwh"] * 3.6e6 == pytest.approx(2534.5)
    assert rel["covered_s"] == pytest.approx(4.0) and rel["gap_s"] == pytest.approx(0.0)
    # DCGM_FI_DEV_POWER_USAGE 409.692 W at 08:00 and 08:01: 409.692 x 60 = 24,581.52 J.
    assert absolute["energy_kwh"] * 3.6e6 == pytest.approx(409.692 * 60)
    assert absolute["gap_s"] == pytest.approx(0.0)  # was 1,784,016,056 s (20,648 days)
    lines = [line for line in err.splitlines() if line.startswith("warning:")]
    assert len(lines) == 1 and HOST in lines[0] and "--start" in lines[0]


def test_aligned_with_start_is_one_series(tmp_path: Path) -> None:
    """With ``--start`` the dmon capture is absolute: one series, no warning."""
    store = tmp_path / "store"
    ingest(
        store, "nvidia-smi", str(TELEMETRY / "nvidia-smi-dmon-h100.txt"),
        "--host", HOST, "--start", "2026-07-14T07:59:56Z",
    )  # fmt: skip
    copy = tmp_path / "scrape.prom"
    shutil.copyfile(TELEMETRY / "dcgm-exporter-a100-mig.prom", copy)
    ingest(store, "prometheus", str(copy), "--time", "2026-07-14T08:00:00Z")
    rows, err = energy_by_gpu(store)
    assert [r["time_basis"] for r in rows] == ["absolute"]
    assert "relative" not in err
    # 07:59:56..08:00:00 dmon (2534.5 J over 4 s) then 08:00:00 (636 W) -> 08:00:00
    # (409.692 W) is the same instant: readings at one instant are averaged, so the last
    # dmon tick and the scrape become (636 + 409.692) / 2 = 522.846 W at 08:00:00;
    # trapezoid 632.5 + 633.5 + 633.5 + (634 + 522.846) / 2 = 2477.923 J.
    assert rows[0]["energy_kwh"] * 3.6e6 == pytest.approx(632.5 + 633.5 + 633.5 + 578.423)
