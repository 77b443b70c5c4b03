"""STAND-INS for the parts of the serving replay owned by other modules, for the tests of
the serving command line, store tables and metrics (tests/test_serve_cli*.py) ONLY.

They replace, for one test, ``gpu_trace.serve.engine.simulate`` (serve-engine) and
``gpu_trace.serve.latency.select.build_latency`` (serve-latency), and, only while those
modules are not merged, the price lookup and energy helpers of
``gpu_trace.serve.hardware`` / ``gpu_trace.serve.energy`` (serve-latency), so that the command line can be tested end to end before (and
independently of) the real engine: the tests check what the CLI, the metrics and the
store do with a contract-conforming :class:`ServeResult`, not what the engine computes
(its golden tests do that). Never imported by the package.

The stand-in engine is a deliberately simple FCFS queue: request k goes to replica
k mod R (round robin), each replica serves one request at a time, a prompt token costs
``PREFILL_S`` and an output token ``DECODE_S``; a request whose prompt is longer than
``MAX_PROMPT`` is dropped with a reason. With ``STEP_AT`` set, every request instead
gets TTFT 0.1 s when the layout has at least ``STEP_AT`` replicas, else 100 s: an SLO
attainment that is a known step function of replicas (for ``serve plan``'s search).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
import pytest

from gpu_trace.errors import GpuTraceError
from gpu_trace.replay import policy
from gpu_trace.serve.config import ServeConfig, parse_disaggregate
from gpu_trace.serve.latency.base import GpuSpec, ModelSpec
from gpu_trace.serve.result import (
    REPLICA_COLUMNS,
    REQUEST_COLUMNS,
    TIMESERIES_COLUMNS,
    ServeResult,
)

PREFILL_S = 0.0001
DECODE_S = 0.01
MAX_PROMPT = 100_000
GPU = GpuSpec("standin-gpu", 80e9, 1e15, 3e12, tdp_w=700.0, idle_w=100.0, link_bytes_per_s=1e11)
MODEL = ModelSpec("standin-model", 1, 64, 1, 1, 64, 100, 1e6, 2, max_context=1_000_000)
"""A context no test request exceeds (no sanity note from the stand-in)."""
PRICE = 2.0
"""USD per GPU-hour the stand-in price lookup answers."""


@dataclass
class Engine:
    """The stand-in engine's settings and the calls it saw."""

    step_at: int | None = None
    calls: int = 0
    fail_router: str | None = None
    """A router whose runs fail (a run's own error, as a GpuTraceError)."""

    def simulate(self, requests: Any, config: ServeConfig, latency: Any) -> ServeResult:
        """A contract-conforming :class:`ServeResult` for ``requests`` (see the module)."""
        self.calls += 1
        if config.router == self.fail_router:
            msg = f"stand-in failure for router {config.router}"
            raise GpuTraceError(msg)
        p, d = parse_disaggregate(config.disaggregate)
        n_rep = p + d if p else config.replicas
        n = len(requests)
        arrival = requests.arrival_s
        inp, out = requests.input_tokens, requests.output_tokens
        replica = (np.arange(n) % n_rep).astype(np.int32)
        dropped = inp > MAX_PROMPT
        queue = np.zeros(n)
        ttft = np.zeros(n)
        finish = np.zeros(n)
        busy = np.zeros(n_rep)
        free_at = np.zeros(n_rep)
        for i in range(n):  # stand-in only: a plain loop over a test's few requests
            if dropped[i]:
                continue
            r = replica[i]
            start = max(arrival[i], free_at[r])
            first = start + inp[i] * PREFILL_S + DECODE_S
            end = first + (out[i] - 1) * DECODE_S
            queue[i], ttft[i], finish[i] = start - arrival[i], first - arrival[i], end
            free_at[r] = end
            busy[r] += end - start
        if self.step_at is not None:
            ttft = np.where(dropped, 0.0, 0.1 if n_rep >= self.step_at else 100.0)
            queue = np.zeros(n)
            finish = arrival + ttft + (out - 1) * DECODE_S
        e2e = finish - arrival
        tpot = np.where(out > 1, (finish - (arrival + ttft)) / np.maximum(out - 1, 1), np.nan)
        horizon = float(finish[~dropped].max()) if (~dropped).any() else 0.0
        req = pl.DataFrame(
            {
                "request_id": requests.request_id,
                "arrival_s": arrival,
                "input_tokens": inp,
                "output_tokens": out,
                "replica": np.where(dropped, -1, replica).astype(np.int32),
                "prefill_replica": np.where(dropped, -1, replica).astype(np.int32),
                "prefix_hit_tokens": np.zeros(n, dtype=np.int64),
                "queue_s": queue,
                "ttft_s": ttft,
                "tpot_s": tpot,
                "e2e_s": e2e,
                "finish_s": finish,
                "kv_transfer_s": np.zeros(n),
                "preemptions": np.zeros(n, dtype=np.int32),
                "status": np.where(dropped, "dropped", "finished"),
                "drop_reason": [f"prompt over {MAX_PROMPT} tokens" if x else None for x in dropped],
            },
            schema=REQUEST_COLUMNS,
            nan_to_null=True,
        ).with_columns(
            pl.when(pl.col("status") == "dropped").then(None).otherwise(pl.col(c)).alias(c)
            for c in ("queue_s", "ttft_s", "tpot_s", "e2e_s", "finish_s")
        )
        ts = pl.DataFrame(
            {
                "time_s": np.zeros(n_rep),
                "replica": np.arange(n_rep, dtype=np.int32),
                "role": ["mixed"] * n_rep,
                "up": [True] * n_rep,
                "busy_s": busy,
                "iterations": np.zeros(n_rep, dtype=np.int64),
                "prefill_tokens": np.zeros(n_rep, dtype=np.int64),
                "decode_tokens": np.zeros(n_rep, dtype=np.int64),
                "running": np.zeros(n_rep, dtype=np.int32),
                "waiting": np.zeros(n_rep, dtype=np.int32),
                "kv_used_blocks": np.zeros(n_rep, dtype=np.int64),
                "kv_capacity_blocks": np.full(n_rep, 1000, dtype=np.int64),
            },
            schema=TIMESERIES_COLUMNS,
        )
        reps = pl.DataFrame(
            {
                "replica": np.arange(n_rep, dtype=np.int32),
                "role": ["mixed"] * n_rep,
                "gpus": np.full(n_rep, config.tp, dtype=np.int32),
                "start_s": np.zeros(n_rep),
                "up_s": np.zeros(n_rep),
                "down_s": np.full(n_rep, horizon),
                "busy_s": busy,
                "iterations": np.zeros(n_rep, dtype=np.int64),
                "requests": np.bincount(replica[~dropped], minlength=n_rep).astype(np.int64),
                "kv_capacity_blocks": np.full(n_rep, 1000, dtype=np.int64),
            },
            schema=REPLICA_COLUMNS,
        )
        result = ServeResult(req, ts, reps, horizon, notes=[])
        result.check()
        return result


class Latency:
    """A stand-in latency model: only what the CLI reads of one (its GPU's power, its
    model's context for the sanity note).
    """

    Config = policy.NoConfig

    def __init__(self, config: ServeConfig) -> None:
        self.gpu = GPU
        self.tp = config.tp
        self.model = MODEL


class Named:
    """A stand-in router / replica scheduler class: only its name is looked up."""

    Config = policy.NoConfig


STANDIN_PLUGINS = {
    "latency": ("standin",),
    "router": ("round-robin", "least-tokens", "prefix-affinity"),
    "batching": ("vllm", "sarathi"),
}


def build_latency(
    name: str, model: str, gpu: str, tp: int = 1, options: Any = None, profile: Any = None
) -> Latency:
    """Stand-in for ``gpu_trace.serve.latency.select.build_latency`` (serve-latency)."""
    return Latency(ServeConfig(latency=name, model=model, gpu=gpu, tp=tp))


@dataclass(frozen=True)
class EnergyCost:
    """Stand-in for ``gpu_trace.serve.energy.EnergyCost`` (serve-latency)."""

    gpu_seconds: float
    energy_kwh: float
    j_per_token: float | None
    price_usd_per_gpu_hour: float
    cost_usd: float
    usd_per_million_tokens: float | None


def served_tokens(requests: pl.DataFrame) -> int:
    """Stand-in for ``gpu_trace.serve.energy.served_tokens``."""
    done = requests.filter(pl.col("status") == "finished")
    return int(done.select(pl.col("input_tokens").sum() + pl.col("output_tokens").sum()).item())


def energy_cost(
    replicas: pl.DataFrame,
    gpu: GpuSpec,
    *,
    tokens: int,
    price_usd_per_gpu_hour: float,
) -> EnergyCost:
    """Stand-in for ``gpu_trace.serve.energy.energy_cost`` (replicas up from time 0)."""
    gpus = replicas["gpus"].cast(pl.Float64)
    alive = float((gpus * (replicas["down_s"] - replicas["up_s"])).sum())
    busy = float((gpus * replicas["busy_s"]).sum())
    joules = busy * gpu.tdp_w + (alive - busy) * gpu.idle_w
    cost = alive / 3600 * price_usd_per_gpu_hour
    return EnergyCost(
        alive,
        joules / 3.6e6,
        joules / tokens if tokens else None,
        price_usd_per_gpu_hour,
        cost,
        cost / tokens * 1e6 if tokens else None,
    )


def _patch(monkeypatch: pytest.MonkeyPatch, name: str, **attrs: Any) -> None:
    """Replace ``attrs`` of module ``name``, or stand the module in whole when absent."""
    if _missing(name):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    module = importlib.import_module(name)
    for key, value in attrs.items():
        monkeypatch.setattr(module, key, value, raising=False)


def _missing(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is None
    except ModuleNotFoundError:
        return True


@contextmanager
def standins(monkeypatch: pytest.MonkeyPatch, step_at: int | None = None) -> Iterator[Engine]:
    """Install the stand-in engine and latency model ``standin`` for one test (and the
    hardware price and energy helpers while serve-latency's are not merged); routers and
    schedulers the real plugins do not provide are registered by name. Everything is
    taken back afterwards.
    """
    engine = Engine(step_at=step_at)
    # the real modules keep their other names (the real plugins import them): only the
    # function is replaced; a module not merged yet is stood in whole
    _patch(monkeypatch, "gpu_trace.serve.engine", simulate=engine.simulate)
    _patch(monkeypatch, "gpu_trace.serve.latency.select", build_latency=build_latency)
    if _missing("gpu_trace.serve.energy"):
        _patch(
            monkeypatch,
            "gpu_trace.serve.energy",
            energy_cost=energy_cost,
            served_tokens=served_tokens,
        )
    if _missing("gpu_trace.serve.hardware"):
        _patch(monkeypatch, "gpu_trace.serve.hardware", price=lambda gpu, path=None: PRICE)
    added: list[tuple[Any, str]] = []
    for kind, names in STANDIN_PLUGINS.items():
        for name in names:
            if name not in policy.names(kind):  # type: ignore[arg-type]
                policy.register(kind, name, Latency if kind == "latency" else Named)  # type: ignore[arg-type]
                added.append((kind, name))
    try:
        yield engine
    finally:
        for kind, name in added:
            policy.unregister(kind, name)
