"""Build the latency model a run names: ``--latency NAME`` with its options, for one
model on ``tp`` GPUs of one kind. The one place the engine, ``serve plan`` and the tests
get a :class:`~gpu_trace.serve.latency.base.LatencyModel` from.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from gpu_trace.errors import UsageError
from gpu_trace.plugins import lookup, policies
from gpu_trace.replay.policy import build_config
from gpu_trace.serve import hardware
from gpu_trace.serve.latency.base import GpuSpec, LatencyModel, ModelSpec


def latency_names() -> list[str]:
    """The declared latency models (built-in and installed), in listing order."""
    return [p.name for p in policies("latency")]


def build_latency(
    name: str,
    model: ModelSpec | str,
    gpu: GpuSpec | str,
    tp: int = 1,
    options: Mapping[str, Any] | None = None,
    profile: str | None = None,
) -> LatencyModel:
    """The latency model ``name`` (``roofline``, ``profile``, or an installed one) with
    ``options`` (``name=value`` texts or values, checked against its ``Config``);
    ``profile`` is ``ServeConfig.profile`` (the ``profile`` model's ``path`` option).
    Model and GPU may be given by name (the tables of :mod:`gpu_trace.serve.hardware`).
    """
    plugin = lookup("latency model", name, {p.name: p for p in policies("latency")})
    given = dict(options or {})
    if profile is not None:
        if "path" not in {f.name for f in dataclasses.fields(plugin.policy.Config)}:
            msg = f"--profile is for --latency profile, not {name!r}"
            raise UsageError(msg)
        given.setdefault("path", profile)
    config = build_config(plugin.policy.Config, given)
    spec = hardware.model(model) if isinstance(model, str) else model
    kind = hardware.gpu(gpu) if isinstance(gpu, str) else gpu
    built: LatencyModel = plugin.policy(config, spec, kind, tp)
    return built
