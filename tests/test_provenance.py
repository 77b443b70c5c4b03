"""Synthetic data is labelled from the store, whatever its seed or size: ``gpu-trace synth``
writes a manifest beside its files, ingest records it (``ingests.generator`` and the
Parquet footer) when the file's sha256 still matches, and the report labels the data
synthetic and never credits the real trace's authors for it.

Checksums are computed here with hashlib; the citation checked for is the one the
HeliosData README asks for (Hu et al., SC'21, "Characterization and Prediction of Deep
Learning Workloads in Large-Scale GPU Datacenters")."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from gpu_trace.cli import app
from gpu_trace.reports import build_site
from gpu_trace.store.parquet import dataset_path
from tests.conftest import SAMPLES

runner = CliRunner()
FIXTURES = Path(__file__).parent / "fixtures" / "helios" / "data"
HELIOS_PAPER = "Characterization and Prediction of Deep Learning Workloads"
CLUSTERS = ("Venus", "Earth", "Saturn", "Uranus")


def synth(out: Path, jobs: int = 37, seed: int = 11) -> None:
    made = runner.invoke(
        app, ["synth", "helios", "--jobs", str(jobs), "--seed", str(seed), "--out", str(out)]
    )
    assert made.exit_code == 0, made.output


def ingest(folder: Path, store: Path) -> str:
    """Ingest with the CLI; returns its stderr (warnings)."""
    result = runner.invoke(app, ["ingest", "helios", str(folder), "--store", str(store)])
    assert result.exit_code == 0, result.output
    return result.stderr


def generators(store: Path) -> dict[str, str | None]:
    """file (cluster folder / name) -> ingests.generator, read straight from Parquet."""
    rows = duckdb.sql(
        "SELECT dataset, file, generator FROM read_parquet("
        f"'{dataset_path(store, 'ingests', 'helios', '*')}', union_by_name = true)"
    ).fetchall()
    return {f"{ds}/{f}": gen for ds, f, gen in rows}


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_synth_of_any_seed_and_size_is_labelled(tmp_path: Path) -> None:
    out = tmp_path / "raw"
    synth(out)
    manifest = json.loads((out / "gpu-trace-synth-helios.json").read_text())
    assert (manifest["generator"], manifest["family"]) == ("gpu-trace synth", "helios")
    assert (manifest["jobs"], manifest["seed"]) == (37, 11)
    log = out / "data" / "Earth" / "cluster_log.csv"
    assert {"path": "data/Earth/cluster_log.csv", "sha256": sha(log)} in manifest["files"]

    store = tmp_path / "store"
    ingest(out / "data", store)
    got = generators(store)
    recorded = json.loads(got["earth/cluster_log.csv"] or "null")
    assert recorded["command"] == "gpu-trace synth helios --jobs 37 --seed 11"
    assert (recorded["file"], recorded["sha256"]) == ("data/Earth/cluster_log.csv", sha(log))
    assert all(g is not None for g in got.values()), got  # the capacity files were made too
    footer = pq.read_metadata(dataset_path(store, "jobs", "helios", "earth")).metadata or {}
    assert json.loads(footer[b"gpu_trace.generator"]) == recorded

    site = tmp_path / "site"
    build_site(store, site)
    page = (site / "helios.html").read_text()
    assert "<h2>Synthetic data</h2>" in page
    assert "gpu-trace synth helios --jobs 37 --seed 11" in page
    assert "<title>gpu-trace report: helios (synthetic jobs)</title>" in page
    for html in (page, (site / "index.html").read_text()):
        assert HELIOS_PAPER not in html
        assert "Hu et al." not in html


def test_real_format_file_without_manifest_is_not_labelled(tmp_path: Path) -> None:
    """The Helios-format fixture (no manifest anywhere above it) is real data: no
    generator recorded, no banner, and the trace's citation in the credits."""
    data = tmp_path / "data"
    shutil.copytree(FIXTURES, data)
    store = tmp_path / "store"
    ingest(data, store)
    assert set(generators(store).values()) == {None}
    build_site(store, tmp_path / "site")
    page = (tmp_path / "site" / "helios.html").read_text()
    assert "Synthetic data" not in page and "(synthetic jobs)" not in page
    assert HELIOS_PAPER in page


def test_changed_file_is_not_the_generators(tmp_path: Path) -> None:
    """A file edited after synth (its sha256 no longer the manifest's) is not recorded as
    generated, with one warning line naming the manifest; the untouched ones still are."""
    out = tmp_path / "raw"
    synth(out)
    log = out / "data" / "Venus" / "cluster_log.csv"
    lines = log.read_text().splitlines(keepends=True)
    log.write_text("".join(lines[:-1]))  # one job fewer: other bytes
    store = tmp_path / "store"
    stderr = ingest(out / "data", store)
    warned = [ln for ln in stderr.splitlines() if ln.startswith("warning:")]
    assert len(warned) == 1, stderr
    assert "gpu-trace-synth-helios.json" in warned[0]
    assert "data/Venus/cluster_log.csv" in warned[0]
    got = generators(store)
    assert got["venus/cluster_log.csv"] is None
    assert got["earth/cluster_log.csv"] is not None


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("{not json", "not JSON"),
        ('{"generator": "someone else"}', "not a manifest"),
        ("[" * 200_000, "not JSON"),  # nested past Python's recursion limit, under 1 MiB
    ],
    ids=["broken", "other-generator", "deep-nesting"],
)
def test_a_broken_manifest_is_ignored_with_a_warning(tmp_path: Path, text: str, why: str) -> None:
    out = tmp_path / "raw"
    synth(out)
    (out / "gpu-trace-synth-helios.json").write_text(text)
    store = tmp_path / "store"
    stderr = ingest(out / "data", store)
    warned = [ln for ln in stderr.splitlines() if ln.startswith("warning:")]
    assert len(warned) == 1 and why in warned[0], stderr
    assert set(generators(store).values()) == {None}


def test_label_survives_a_later_real_ingest_of_the_same_dataset(tmp_path: Path) -> None:
    """Generated jobs first, then the real Helios capacity files (the bundled
    ``Earth_cluster_gpu_number.csv`` / ``Venus_...``, datasets earth and venus): the
    second ingest rewrites those datasets' ``ingests`` rows, but the jobs stay generated
    and stay labelled (their Parquet footers say so); the real capacity is credited."""
    out = tmp_path / "raw"
    synth(out)
    store = tmp_path / "store"
    ingest(out / "data", store)
    ingest(SAMPLES / "helios", store)
    assert generators(store)["earth/Earth_cluster_gpu_number.csv"] is None
    assert "earth/cluster_log.csv" not in generators(store)  # replaced in ingests
    build_site(store, tmp_path / "site")
    page = (tmp_path / "site" / "helios.html").read_text()
    assert "<h2>Synthetic data</h2>" in page
    assert "earth, saturn, uranus, venus" in page
    assert HELIOS_PAPER in page and "for its real files only" in page
