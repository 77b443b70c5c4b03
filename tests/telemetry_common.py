"""Helpers shared by tests/test_telemetry_integration.py and tests/test_telemetry_cli.py
(split from test_telemetry.py)."""

from __future__ import annotations

from pathlib import Path

from gpu_trace.telemetry.fake_nvml import Clock, FakeGpu, FakeNvml
from gpu_trace.telemetry.nvml import Sampler


def run_sampler(store: Path, gpus: list[FakeGpu], seconds: float, **fake: object) -> Sampler:
    clock = Clock()
    nvml = FakeNvml(gpus, clock, **fake)  # type: ignore[arg-type]
    s = Sampler(nvml, store=store, host="node-1", flush_s=4, clock=clock, sleep=clock.sleep)
    s.open()
    s.run(seconds)
    return s
