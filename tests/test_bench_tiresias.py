"""The Tiresias side-by-side helpers: the trace is in the simulator's own CSV format
and the baseline skips with a reason when the simulator is not there.

Format from SymbioticLab/Tiresias ``simulator/README.md``: "Job trace file, with the
following necessary fields: ``job_id,num_gpu,submit_time,iterations,model_name,
duration,interval``"; ``submit_time`` "starts from 0, and in second-scale";
``interval``: "job submission interval from this job to the next job"; model names
from its ``models.py`` (``vgg19`` ... ``resnet50``).
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from bench import baseline_tiresias
from bench.tiresias_trace import write

README_FIELDS = [
    "job_id",
    "num_gpu",
    "submit_time",
    "iterations",
    "model_name",
    "duration",
    "interval",
]
MODELS_PY = {
    "vgg19",
    "vgg16",
    "vgg11",
    "alexnet",
    "resnet152",
    "resnet101",
    "resnet50",
    "inception4",
    "inception3",
}


def test_trace_has_the_simulators_fields_and_meanings(tmp_path: Path) -> None:
    out = tmp_path / "t.csv"
    write(out, jobs=300, gpus=64, seed=3)
    with out.open() as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == README_FIELDS
    assert len(rows) == 300
    submit = [int(r["submit_time"]) for r in rows]
    assert submit[0] == 0
    assert submit == sorted(submit)
    for i, r in enumerate(rows[:-1]):
        assert int(r["interval"]) == submit[i + 1] - submit[i]
    assert {r["model_name"] for r in rows} <= MODELS_PY
    assert all(int(r["num_gpu"]) >= 1 and int(r["duration"]) >= 1 for r in rows)


def test_trace_is_seeded(tmp_path: Path) -> None:
    write(tmp_path / "a.csv", jobs=50, seed=1)
    write(tmp_path / "b.csv", jobs=50, seed=1)
    write(tmp_path / "c.csv", jobs=50, seed=2)
    assert (tmp_path / "a.csv").read_text() == (tmp_path / "b.csv").read_text()
    assert (tmp_path / "a.csv").read_text() != (tmp_path / "c.csv").read_text()


def test_baseline_skips_with_a_reason_without_the_simulator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TIRESIAS_SIM", raising=False)
    got = baseline_tiresias.run(tmp_path / "t.csv", tmp_path / "out", "fifo", "yarn")
    assert "TIRESIAS_SIM is not set" in str(got["skipped"])
    monkeypatch.setenv("TIRESIAS_SIM", str(tmp_path))
    got = baseline_tiresias.run(tmp_path / "t.csv", tmp_path / "out", "fifo", "yarn")
    assert "has no run_sim.py" in str(got["skipped"])
