"""Kubernetes: CLI tests (the typer app: ingest, analysis, replay, a bad input)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from gpu_trace.cli import app
from tests.kubernetes_common import NODES, PODS

runner = CliRunner()


def test_cli_ingest_analyze_replay(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    res = runner.invoke(
        app, ["ingest", "kubernetes", str(PODS), str(NODES), "--cluster", "prod", "--store", store]
    )
    assert res.exit_code == 0, res.output
    assert "placements" in res.stdout and "prod-allocatable" in res.stdout
    res = runner.invoke(
        app, ["analyze", "queueing", "--source", "kubernetes", "--store", store, "--format", "csv"]
    )
    assert res.exit_code == 0, res.output
    # queue_s of the GPU jobs by size: train-a 30 s (1 GPU), llm-ft 2 s (16 GPUs)
    assert "30.0" in res.stdout and "2.0" in res.stdout
    res = runner.invoke(
        app, ["replay", "run", "--source", "kubernetes", "--cluster", "machines", "--store", store]
    )
    assert res.exit_code == 0, res.output
    # the capacity inventory: 8 + 8 GPUs on three nodes (largest inventory wins)
    assert "16 GPUs / 3 nodes" in res.stderr + res.stdout


def test_cli_bad_input_is_one_line(tmp_path: Path) -> None:
    f = tmp_path / "pods.json"
    f.write_text("[1, 2]\n")
    res = runner.invoke(app, ["ingest", "kubernetes", str(f), "--store", str(tmp_path / "s")])
    assert res.exit_code == 1
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "pods.json" in lines[0] and "Traceback" not in res.output
