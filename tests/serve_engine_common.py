"""Shared pieces of the serving-engine tests: a linear latency model whose every
iteration time is written down by hand, and RequestSets built from plain lists.

The latency model is the tests' own (the real roofline and profile models are another
part of issue 30): iteration = ``a + b x tokens + c x decode context``, so a test can
write every iteration's time in a comment and check the engine's token times against
it. ``decode_steps_s`` is computed in closed form (vectorized), the way a real model
would, and must equal ``iteration_s`` step by step (the contract).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from gpu_trace.serve.config import ServeConfig
from gpu_trace.serve.latency.base import GpuSpec, IterationShape, ModelSpec
from gpu_trace.serve.workload import RequestSet

MODEL = ModelSpec(
    name="toy",
    layers=2,
    hidden=64,
    heads=4,
    kv_heads=4,
    ffn=128,
    vocab=100,
    params=1e6,
    dtype_bytes=2,
    max_context=1 << 20,
)
GPU = GpuSpec(
    name="toy-gpu",
    memory_bytes=1e9,
    peak_flops=1e12,
    hbm_bytes_per_s=1e11,
    tdp_w=300.0,
    idle_w=50.0,
    link_bytes_per_s=1e11,
)


@dataclass
class LinearLatency:
    """iteration_s = a + b x tokens + c x decode_context_sum; KV capacity fixed."""

    a: float = 1.0
    b: float = 0.0
    c: float = 0.0
    capacity_tokens: int = 1 << 20
    model: ModelSpec = MODEL
    gpu: GpuSpec = GPU
    tp: int = 1
    calls: list[IterationShape] = field(default_factory=list)

    def iteration_s(self, shape: IterationShape) -> float:
        """One iteration."""
        self.calls.append(shape)
        return self.a + self.b * shape.tokens + self.c * shape.decode_context_sum

    def decode_steps_s(self, count: int, context_sum: int, steps: int) -> npt.NDArray[np.float64]:
        """``steps`` decode iterations, vectorized."""
        ctx = np.arange(context_sum, context_sum + count * steps, count, dtype=np.float64)
        return (self.a + self.b * count) + self.c * ctx

    def kv_capacity_tokens(self, memory_utilization: float) -> int:
        """Fixed capacity (tests choose it)."""
        return self.capacity_tokens


def requests(
    arrival: list[float],
    prompt: list[int],
    output: list[int],
    blocks: list[list[int]] | None = None,
    block_tokens: int = 0,
) -> RequestSet:
    """A RequestSet from lists (already in arrival order)."""
    n = len(arrival)
    blocks = blocks or [[] for _ in range(n)]
    offsets = np.zeros(n + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(b) for b in blocks])
    flat = [h for b in blocks for h in b]
    return RequestSet(
        request_id=np.arange(n, dtype=np.int64) + 100,
        arrival_s=np.asarray(arrival, dtype=np.float64),
        input_tokens=np.asarray(prompt, dtype=np.int64),
        output_tokens=np.asarray(output, dtype=np.int64),
        session=np.full(n, -1, dtype=np.int64),
        block_offsets=offsets,
        block_hashes=np.asarray(flat, dtype=np.int64),
        block_tokens=block_tokens,
        source="test",
        dataset="",
        origin="",
    )


def synthetic(n: int, seed: int = 0, rate: float = 20.0) -> RequestSet:
    """``n`` requests, Poisson arrivals at ``rate``/s, Azure-conv-like token counts
    (lognormal around 1,000 prompt / 130 output tokens).
    """
    rng = np.random.default_rng(seed)
    arrival = np.cumsum(rng.exponential(1.0 / rate, n))
    arrival -= arrival[0]
    prompt = np.clip(rng.lognormal(np.log(1000), 0.9, n), 2, 8000).astype(np.int64)
    output = np.clip(rng.lognormal(np.log(130), 1.0, n), 1, 2000).astype(np.int64)
    return requests(arrival.tolist(), prompt.tolist(), output.tolist())


def config(**kw: object) -> ServeConfig:
    """A ServeConfig with test defaults (1 replica, vllm, round-robin)."""
    return ServeConfig(**kw)  # type: ignore[arg-type]
