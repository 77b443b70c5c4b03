"""Telemetry: CLI tests (the typer app: ``telemetry sample`` without a driver,
``telemetry jobs``).

Expected values are read from the raw sample files here with the standard library (or
hand-copied with the line they come from), never from our own output."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpu_trace.analyses import job_usage as tj
from gpu_trace.cli import app
from gpu_trace.errors import InputError
from gpu_trace.telemetry.fake_nvml import Clock, FakeNvml, eight_gpus
from gpu_trace.telemetry.nvml import NvmlUnavailable, Sampler
from tests.telemetry_common import run_sampler


def test_no_driver_one_line_exit_1(tmp_path: Path) -> None:
    clock = Clock()
    with pytest.raises(NvmlUnavailable, match="no NVIDIA driver/NVML found"):
        Sampler(FakeNvml([], clock, no_driver=True), store=tmp_path, host="h").open()
    try:
        import pynvml

        pynvml.nvmlInit()
        pytest.skip("a real NVIDIA driver is present")
    except ImportError:
        pass
    except Exception:  # any NVML error means no driver here
        pass
    result = CliRunner().invoke(
        app, ["telemetry", "sample", "--duration", "1s", "--store", str(tmp_path)]
    )
    assert result.exit_code == 1
    assert "no NVIDIA driver/NVML found" in result.output
    assert len(result.output.strip().splitlines()) == 1


# -- per-job usage -----------------------------------------------------------------------


def test_jobs_file_usage(store: Path, tmp_path: Path) -> None:
    run_sampler(store, eight_gpus()[:4], 6)
    jobs = tmp_path / "jobs.csv"
    jobs.write_text(
        "job_id,host,gpu_indices,start,end\n"
        "a,node-1,1;2,2026-01-01T00:00:00Z,2026-01-01T00:00:03Z\n"
        "b,node-1,3,2026-01-01T00:00:02,2026-01-01T00:00:10\n"
        "c,other,0,2026-01-01T00:00:00Z,2026-01-01T00:00:10Z\n"
    )
    out = tj.usage_from_file(store, jobs).sort("job_id")
    # job a: GPUs 1 (util 10) and 2 (util 20) at ticks 0,1,2 -> 6 samples, mean 15
    a = out.row(0, named=True)
    assert (a["job_id"], a["gpu_util_pct_samples"], a["gpu_util_pct_mean"]) == ("a", 6, 15.0)
    assert a["power_w_p95"] == 300.0 and a["mem_used_bytes_p50"] == 4 * 1024**3
    b = out.row(1, named=True)
    assert (b["gpu_util_pct_samples"], b["gpu_util_pct_p50"]) == (4, 30.0)
    assert out["job_id"].to_list() == ["a", "b"]  # c's host has no samples
    bad = tmp_path / "bad.csv"
    bad.write_text("job_id,host,gpu_indices,start,end\nx,h,0;y,2026-01-01,2026-01-02\n")
    with pytest.raises(InputError, match="line 2"):
        tj.usage_from_file(store, bad)
    result = CliRunner().invoke(
        app, ["telemetry", "jobs", "--jobs", str(jobs), "--store", str(store), "-f", "csv"]
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[1].startswith("jobs-file,a,6,15.0")
