"""Two input files whose names slug to one dataset are refused, for every loader family
whose file names can collide, through the real CLI, and nothing is written.

(PAI 2020 and Philly read fixed file names, one per table, so their names cannot
collide; Helios refuses two members for one cluster itself.)"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpu_trace.cli import app
from gpu_trace.store.generations import snapshot_root
from gpu_trace.store.parquet import read_table
from tests.conftest import SAMPLES

runner = CliRunner()
TEL = SAMPLES / "telemetry"
CSV = "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n0,1,10,5,vgg,100,1\n"

CASES = [
    # (ingest command, options, sample to copy, (first name, second name), table, dataset)
    ("chronus", [], None, ("Trace.csv", "trace.csv"), "jobs", "trace"),
    (
        "gavel",
        [],
        SAMPLES / "processed" / "gavel" / "msr_seed0_103959.trace",
        ("My Trace.trace", "my-trace.trace"),
        "jobs",
        "my-trace",
    ),
    (
        "nvidia-smi",
        [],
        TEL / "nvidia-smi-query-gpu-h100.csv",
        ("node1.csv", "node1.txt"),
        "gpu_samples",
        "node1",
    ),
    (
        "dcgmi",
        ["--start", "2026-07-14T08:00:00Z"],
        TEL / "dcgmi-dmon-h800.txt",
        ("node1.log", "node1.txt"),
        "gpu_samples",
        "node1",
    ),
    (
        "prometheus",
        ["--time", "2026-07-14T08:00:00Z"],
        TEL / "dcgm-exporter-metrics-t4.prom",
        ("node1.metrics", "node1.prom"),
        "gpu_samples",
        "node1",
    ),
    (
        "openb",
        ["--variant", "all"],
        SAMPLES / "openb" / "openb_pod_list_default.csv",
        ("openb_pod_list_A.csv", "openb_pod_list_a.csv"),
        "jobs",
        "a",
    ),
]


def store_files(store: Path) -> dict[str, bytes]:
    root = snapshot_root(store)
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*.parquet")}


@pytest.mark.parametrize(("command", "options", "sample", "names", "table", "dataset"), CASES)
def test_colliding_names_refused_nothing_written(
    tmp_path: Path,
    command: str,
    options: list[str],
    sample: Path | None,
    names: tuple[str, str],
    table: str,
    dataset: str,
) -> None:
    store = tmp_path / "store"
    base = tmp_path / "base.csv"
    base.write_text(CSV)
    assert (
        runner.invoke(app, ["ingest", "chronus", str(base), "--store", str(store)]).exit_code == 0
    )
    before = store_files(store)
    link = (store / "current").readlink()

    folder = tmp_path / "in"
    folder.mkdir()
    for name in names:
        if sample is None:
            (folder / name).write_text(CSV)
        else:
            shutil.copyfile(sample, folder / name)
    result = runner.invoke(app, ["ingest", command, str(folder), *options, "--store", str(store)])

    assert result.exit_code == 1, result.output
    err = result.stderr.strip()
    assert "\n" not in err and "Traceback" not in err
    first, second = (str(folder / n) for n in names)
    assert f"{second}: maps to the same {table} dataset '{dataset}' as {first}" in err
    # nothing was written: same generation, same files, no staging left behind
    assert (store / "current").readlink() == link
    assert store_files(store) == before
    assert read_table(store, "jobs").column("dataset").to_pylist() == ["base"]
    assert sorted(p.name for p in store.iterdir() if p.name.startswith(".tx-")) == []


def test_distinct_names_still_ingest_together(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.csv").write_text(CSV)
    (folder / "b.csv").write_text(CSV + "1,2,20,5,vgg,50,1\n")
    store = tmp_path / "store"
    result = runner.invoke(app, ["ingest", "chronus", str(folder), "--store", str(store)])
    assert result.exit_code == 0, result.output
    jobs = read_table(store, "jobs", "chronus").to_pydict()
    assert sorted(zip(jobs["dataset"], jobs["job_id"], strict=True)) == [
        ("a", "0"),
        ("b", "0"),
        ("b", "1"),
    ]
