"""The openb generator: its files read back through the real loader with nothing
quarantined, the format matches the bundled upstream files byte for byte where it must,
and its distributions stay close to the real default pod list (computed here with the
standard library's csv module, not taken from the generator's tables)."""

from __future__ import annotations

import csv
import hashlib
from collections import Counter
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from gpu_trace.cli import app
from gpu_trace.loaders import LOADERS, ingest
from gpu_trace.store.parquet import read_table
from gpu_trace.synth import get_writer
from gpu_trace.synth.openb import write
from tests.conftest import OPENB

REAL_PODS = OPENB / "openb_pod_list_default.csv"
REAL_NODES = OPENB / "openb_node_list_all_node.csv"
SENTINEL = 12_902_960  # max deletion_time of the real default list (docs 4.3)


def rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def digest(files: list[Path]) -> dict[str, str]:
    return {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in files}


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return write(tmp_path_factory.mktemp("synth"), jobs=20_000, seed=11)


def shares(pods: list[dict[str, str]], key: str) -> dict[str, float]:
    counts = Counter(p[key] for p in pods)
    return {k: v / len(pods) for k, v in counts.items()}


def test_files_and_headers_match_upstream(synth: list[Path]) -> None:
    names = [f.name for f in synth]
    assert names == [
        "openb_pod_list_default.csv",
        "openb_node_list_all_node.csv",
        "openb_node_list_gpu_node.csv",
    ]
    for f in synth:
        real = OPENB / f.name
        data = f.read_bytes()
        assert data.split(b"\n", 1)[0] == real.read_bytes().split(b"\n", 1)[0]
        assert b"\r" not in data and data.endswith(b"\n") and b'"' not in data


def test_pod_list_quirks(synth: list[Path]) -> None:
    pods = rows(synth[0])
    assert len(pods) == 20_000
    assert [p["name"] for p in pods[:2]] == ["openb-pod-00000", "openb-pod-00001"]
    assert pods[-1]["name"] == "openb-pod-19999"
    created = [int(p["creation_time"]) for p in pods]
    assert created[0] == 0 and created == sorted(created)
    assert all(p["gpu_spec"] == "" for p in pods)
    for p in pods:
        assert (p["scheduled_time"] == "") == (p["pod_phase"] == "Pending")
        if p["scheduled_time"]:
            assert int(p["creation_time"]) <= int(p["scheduled_time"]) <= int(p["deletion_time"])
        if int(p["num_gpu"]) > 1:
            assert p["gpu_milli"] == "1000"
        if p["num_gpu"] == "0":
            assert p["gpu_milli"] == "0"
    deletion = [int(p["deletion_time"]) for p in pods]
    assert max(deletion) == SENTINEL
    at_end = {p["pod_phase"] for p in pods if int(p["deletion_time"]) == SENTINEL}
    assert at_end == {"Running"}
    assert sum(1 for d in deletion if d == SENTINEL) >= 20


def test_names_are_zero_padded_to_at_least_four_digits(tmp_path: Path) -> None:
    pods = rows(write(tmp_path, jobs=10_000, seed=3)[0])
    assert pods[0]["name"] == "openb-pod-0000" and pods[-1]["name"] == "openb-pod-9999"
    pods = rows(write(tmp_path, jobs=10_001, seed=3)[0])
    assert pods[0]["name"] == "openb-pod-00000" and pods[-1]["name"] == "openb-pod-10000"
    one = rows(write(tmp_path / "one", jobs=1, seed=3)[0])
    assert [p["name"] for p in one] == ["openb-pod-0000"]


def test_distributions_close_to_the_real_file(synth: list[Path]) -> None:
    real, fake = rows(REAL_PODS), rows(synth[0])

    def sharing(pods: list[dict[str, str]]) -> float:
        return sum(p["num_gpu"] == "1" and int(p["gpu_milli"]) < 1000 for p in pods) / len(pods)

    assert sharing(fake) == pytest.approx(sharing(real), abs=0.02)
    for key in ("num_gpu", "qos", "pod_phase"):
        want, got = shares(real, key), shares(fake, key)
        assert set(got) <= set(want), key
        for value, share in want.items():
            assert got.get(value, 0.0) == pytest.approx(share, abs=0.02), (key, value)
    milli_real = shares([p for p in real if p["num_gpu"] == "1"], "gpu_milli")
    milli_fake = shares([p for p in fake if p["num_gpu"] == "1"], "gpu_milli")
    assert set(milli_fake) <= set(milli_real)
    for level in ("1000", "810", "470", "320"):
        assert milli_fake[level] == pytest.approx(milli_real[level], abs=0.02)

    def mean(pods: list[dict[str, str]], key: str) -> float:
        return sum(int(p[key]) for p in pods) / len(pods)

    for key in ("cpu_milli", "memory_mib"):
        assert mean(fake, key) == pytest.approx(mean(real, key), rel=0.05)

    def median_life(pods: list[dict[str, str]], phase: str) -> int:
        life = sorted(
            int(p["deletion_time"]) - int(p["creation_time"])
            for p in pods
            if p["pod_phase"] == phase and int(p["creation_time"]) >= 9_964_972
        )
        return life[len(life) // 2]

    for phase in ("Running", "Failed"):
        assert median_life(fake, phase) == pytest.approx(median_life(real, phase), rel=0.2)
    window = [int(p["creation_time"]) for p in fake if int(p["creation_time"]) >= 9_964_972]
    assert len(window) / len(fake) == pytest.approx(
        sum(int(p["creation_time"]) >= 9_964_972 for p in real) / len(real), abs=0.01
    )


def test_node_lists_have_the_real_cluster_composition(synth: list[Path]) -> None:
    real = rows(REAL_NODES)
    all_node, gpu_node = rows(synth[1]), rows(synth[2])

    def kinds(nodes: list[dict[str, str]]) -> Counter[tuple[str, ...]]:
        return Counter((n["cpu_milli"], n["memory_mib"], n["gpu"], n["model"]) for n in nodes)

    assert kinds(all_node) == kinds(real)
    assert Counter(n["model"] for n in gpu_node) == Counter(n["model"] for n in real if n["model"])
    assert sum(int(n["gpu"]) for n in all_node) == 6212
    assert [n["sn"] for n in gpu_node[:1]] == ["openb-node-0000"]
    assert [{k: v for k, v in n.items() if k != "sn"} for n in gpu_node] == [
        {k: v for k, v in n.items() if k != "sn"} for n in all_node if n["gpu"] != "0"
    ]
    assert [n["sn"] for n in all_node] == [f"openb-node-{i:04d}" for i in range(len(real))]


def test_same_seed_same_bytes_other_seed_differs(tmp_path: Path) -> None:
    a = digest(write(tmp_path / "a", jobs=2_000, seed=5))
    b = digest(write(tmp_path / "b", jobs=2_000, seed=5))
    c = digest(write(tmp_path / "c", jobs=2_000, seed=6))
    assert a == b
    assert a["openb_pod_list_default.csv"] != c["openb_pod_list_default.csv"]
    assert a["openb_node_list_all_node.csv"] != c["openb_node_list_all_node.csv"]


def test_round_trip_through_the_loader(synth: list[Path], tmp_path: Path) -> None:
    report = ingest(LOADERS["openb"], synth[0].parent, tmp_path / "store")
    read, written, quarantined = report.totals
    assert quarantined == 0
    assert read == written == 20_000 + 1523 + 1213
    jobs = pl.from_arrow(read_table(tmp_path / "store", "jobs", "openb"))
    assert isinstance(jobs, pl.DataFrame)
    pods = {p["name"]: p for p in rows(synth[0])}
    assert jobs["start_time"].null_count() == sum(p["scheduled_time"] == "" for p in pods.values())
    for job in jobs.sample(100, seed=1).iter_rows(named=True):
        p = pods[job["job_id"]]
        assert job["submit_time"].timestamp() == int(p["creation_time"])
        assert job["end_time"].timestamp() == int(p["deletion_time"])
        assert job["gpus"] == pytest.approx(int(p["num_gpu"]) * int(p["gpu_milli"]) / 1000)
        assert job["raw_status"] == p["pod_phase"] and job["qos"] == p["qos"]


def test_cli_and_registry(tmp_path: Path) -> None:
    assert get_writer("openb") is write
    result = CliRunner().invoke(
        app, ["synth", "openb", "--jobs", "50", "--seed", "2", "--out", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.split() == [
        str(tmp_path / "openb_pod_list_default.csv"),
        str(tmp_path / "openb_node_list_all_node.csv"),
        str(tmp_path / "openb_node_list_gpu_node.csv"),
    ]
    assert len(rows(tmp_path / "openb_pod_list_default.csv")) == 50
