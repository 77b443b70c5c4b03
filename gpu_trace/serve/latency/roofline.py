"""``roofline``: iteration time from the GPU and model tables, no measurement needed.

One iteration of a replica (``tp`` GPUs, tensor parallel) is bounded by its compute and
by its memory traffic; it takes the longer of the two, plus the tensor-parallel
all-reduces and a fixed overhead:

    time = max(FLOPs / (tp x peak x mfu), bytes / (tp x hbm x bw_efficiency))
           + all-reduce + overhead_s + layers x layer_overhead_s

- FLOPs: the linear layers, ``2 x (params - vocab x hidden) x tokens`` (every weight but
  the input embedding, a lookup, is one multiply-add per token); attention,
  ``4 x layers x hidden`` per (query, key) pair (QK^T and softmax x V, each 2 FLOPs per
  pair and head dimension), with a prefill chunk of ``t`` tokens after ``c`` cached ones
  making ``t x c + t (t + 1) / 2`` pairs (causal) and a decode with ``L`` cached tokens
  ``L + 1``.
- bytes: the weights once per iteration (all requests of the batch share them: why
  batching pays), plus the KV cache read (the cached context of every request) and
  written (one entry per computed token). Activations are left out: they stay in
  on-chip memory or are small next to the weights.
- all-reduce: two per layer (after attention and after the MLP, Megatron-style tensor
  parallelism as vLLM runs it), each of ``tokens x hidden x dtype`` bytes, as a ring:
  ``2 (tp - 1) / tp x bytes / (link x link_efficiency) + allreduce_latency_s``.

So prefill is compute-bound (FLOPs grow with the prompt, the weights are read once) and
decode bandwidth-bound (one token per request per weight read) until the batch is large:
the roofline's ridge. Defaults of the efficiency factors are calibrated on vidur's
published A100 measurements (see :class:`RooflineConfig`); replace them with a profile
(``--latency profile``) for numbers measured on your hardware.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from gpu_trace.plugins import PolicyPlugin, option
from gpu_trace.serve.latency.base import GpuSpec, IterationShape, ModelSpec
from gpu_trace.serve.latency.memory import check_tp, kv_capacity_tokens
from gpu_trace.values import check_number


def _share(flag: str) -> Any:
    def check(value: float) -> float:
        return check_number(value, flag, gt=0, le=1)

    return check


def _nonnegative(flag: str) -> Any:
    def check(value: float) -> float:
        return check_number(value, flag, ge=0)

    return check


@dataclass(frozen=True)
class RooflineConfig:
    """Options of ``roofline``; the defaults and their sources follow.


    - ``mfu`` 0.7: vidur's A100 profile of Llama-2-7b (data/profiling/compute/a100/
      meta-llama/Llama-2-7b-hf/mlp.csv) times the MLP up-projection (4096 x 2 x 11008,
      bf16) at 4096 tokens in 3.32-3.37 ms: 2 x 4096 x 4096 x 22016 FLOPs / 3.34 ms =
      221 TFLOP/s, 0.71 of the A100's 312 (0.75 on H100: 740 of 989).
    - ``bw_efficiency`` 0.75: the same file at 1 token: the 180 MB up-projection weights
      in 0.111-0.116 ms, 1.55-1.62 TB/s of the A100's 2.039 (0.76; H100: 2.8 of 3.35).
    - ``link_efficiency`` 0.6 and ``allreduce_latency_s`` 30 us: vidur's all-reduce
      profile (data/profiling/network/a100_dgx/all_reduce.csv) reaches a bus bandwidth
      of 156-174 GB/s at 64 MiB on 2-8 A100s (0.52-0.58 of NVLink's 300 GB/s per
      direction; H100 0.6-0.8) and takes 7-62 us for 2 KiB.
    - ``layer_overhead_s`` 20 us: the small kernels per layer (two RMSNorms, rotary
      embedding, activation, residual add) sum to 0.019-0.025 ms at 1-64 tokens in the
      same A100 / H100 Llama-2-7b profiles.
    - ``overhead_s`` 0: per-iteration CPU work (scheduling, sampling) is left out by
      default, as vidur leaves it out (``skip_cpu_overhead_modeling`` defaults to true).
    - ``reserve_gib`` 1.5 per GPU: memory neither weights nor KV (activations of a
      forward pass, CUDA context, allocator slack); an assumption (vLLM measures it by
      profiling a forward pass, which this model cannot do).
    """

    mfu: float = option(
        0.7,
        "Share of the GPU's peak dense FLOP/s a matmul reaches (model FLOPs utilisation).",
        check=_share("--mfu"),
    )
    bw_efficiency: float = option(
        0.75, "Share of the datasheet memory bandwidth reached.", check=_share("--bw-efficiency")
    )
    link_efficiency: float = option(
        0.6,
        "Share of the NVLink per-direction bandwidth an all-reduce reaches.",
        check=_share("--link-efficiency"),
    )
    allreduce_latency_s: float = option(
        3e-5, "Fixed cost of one all-reduce (s).", check=_nonnegative("--allreduce-latency-s")
    )
    layer_overhead_s: float = option(
        2e-5,
        "Small kernels per layer (norms, rotary, activation, add), seconds.",
        check=_nonnegative("--layer-overhead-s"),
    )
    overhead_s: float = option(
        0.0,
        "Fixed cost per iteration (CPU scheduling, sampling), seconds.",
        check=_nonnegative("--overhead-s"),
    )
    reserve_gib: float = option(
        1.5,
        "GPU memory per GPU kept for activations and the CUDA context (GiB), not KV.",
        check=_nonnegative("--reserve-gib"),
    )


SHORT_RUN = 28
"""Runs of decode steps up to this long are computed in Python (numpy's set-up costs more)."""
MARGIN = 1.0 + 1e-9
"""How far one bound must exceed the other at a run's ends to skip computing the other."""


class Roofline:
    """Iteration time from FLOPs and bytes against the GPU's datasheet peaks, no measurement."""

    Config: ClassVar[type[RooflineConfig]] = RooflineConfig

    def __init__(self, config: RooflineConfig, model: ModelSpec, gpu: GpuSpec, tp: int = 1) -> None:
        check_tp(model, tp)
        for name in ("mfu", "bw_efficiency", "link_efficiency"):
            check_number(getattr(config, name), f"roofline option {name}", gt=0, le=1)
        for name in ("allreduce_latency_s", "layer_overhead_s", "overhead_s", "reserve_gib"):
            check_number(getattr(config, name), f"roofline option {name}", ge=0)
        self.config = config
        self.model = model
        self.gpu = gpu
        self.tp = tp
        self.flop_rate = tp * gpu.peak_flops * config.mfu
        self.byte_rate = tp * gpu.hbm_bytes_per_s * config.bw_efficiency
        self.linear_flops_per_token = 2.0 * (model.params - model.vocab * model.hidden)
        self.attention_flops_per_pair = 4.0 * model.layers * model.hidden
        self.weight_bytes = float(model.weight_bytes)
        self.kv_bytes = float(model.kv_bytes_per_token)
        allreduces = 2 * model.layers if tp > 1 else 0
        ring = 2.0 * (tp - 1) / tp
        link = gpu.link_bytes_per_s * config.link_efficiency
        self.allreduce_s_per_token = allreduces * ring * model.hidden * model.dtype_bytes / link
        self.fixed_s = (
            config.overhead_s
            + model.layers * config.layer_overhead_s
            + allreduces * config.allreduce_latency_s
        )

    def _seconds(self, tokens: float, pairs: float, kv_tokens: float) -> float:
        flops = self.linear_flops_per_token * tokens + self.attention_flops_per_pair * pairs
        moved = self.weight_bytes + self.kv_bytes * kv_tokens
        bound = max(flops / self.flop_rate, moved / self.byte_rate)
        return bound + self.allreduce_s_per_token * tokens + self.fixed_s

    def iteration_s(self, shape: IterationShape) -> float:
        """Seconds one iteration of ``shape`` takes (0 for an empty one)."""
        tokens = shape.tokens
        if tokens == 0:
            return 0.0
        pairs = shape.decode_context_sum + shape.decode_count
        for t, c in zip(shape.prefill_tokens, shape.prefill_context, strict=True):
            pairs += t * c + t * (t + 1) // 2
        kv_tokens = sum(shape.prefill_context) + shape.decode_context_sum + tokens
        return self._seconds(float(tokens), float(pairs), float(kv_tokens))

    def iteration_of(
        self,
        prefills: list[tuple[int, int]],
        computed: list[int],
        decode_count: int,
        decode_context_sum: int,
    ) -> float:
        """:meth:`iteration_s` of the engine's iteration without building its shape:
        prompt chunks ``prefills`` (request, tokens) after ``computed[request]`` cached
        tokens, plus ``decode_count`` decodes. The engine's fast path (one iteration per
        arriving request); every count is a whole number, summed exactly before the
        same float arithmetic, so the value is iteration_s's bit for bit.
        """
        tokens = decode_count
        context = 0
        pairs = decode_context_sum + decode_count
        for i, t in prefills:
            c = computed[i]
            tokens += t
            context += c
            pairs += t * c + t * (t + 1) // 2
        if tokens == 0:
            return 0.0
        kv_tokens = context + decode_context_sum + tokens
        return self._seconds(float(tokens), float(pairs), float(kv_tokens))

    def decode_steps_s(self, count: int, context_sum: int, steps: int) -> npt.NDArray[np.float64]:
        """Seconds of ``steps`` consecutive decode-only iterations (the same arithmetic
        as :meth:`iteration_s`, element-wise, so the two agree exactly).
        """
        if count <= 0 or steps <= 0:
            return np.zeros(max(steps, 0), dtype=np.float64)
        # In place, on two arrays: the engine calls this once per run of decode steps
        # (millions of times a month of traffic), a few hundred steps each, so numpy's
        # per-call cost, not the arithmetic, is what it pays. A decode step's attention
        # pairs and KV tokens are the same number, context + count: whole numbers,
        # exact in float64 as iteration_s's float() makes them; a + b == b + a and
        # x + 0.0 == x exactly, so every element is iteration_s's value bit for bit.
        first = float(context_sum + count)
        x = np.arange(first, first + steps * count, count, dtype=np.float64)
        tokens = float(count)
        flops = self.attention_flops_per_pair * x
        flops += self.linear_flops_per_token * tokens
        flops /= self.flop_rate
        x *= self.kv_bytes
        x += self.weight_bytes
        x /= self.byte_rate
        np.maximum(flops, x, out=x)
        allreduce = self.allreduce_s_per_token * tokens
        if allreduce:
            x += allreduce
        x += self.fixed_s
        return x

    def decode_ends(self, count: int, context_sum: int, steps: int, t0: float) -> list[float]:
        """End times of ``steps`` (>= 1) consecutive decode-only iterations from ``t0``:
        ``t0 + d1``, ``(t0 + d1) + d2``, ... with ``d`` :meth:`decode_steps_s`'s
        values, bit for bit (the engine's fast path; other models go through
        ``decode_steps_s`` and a ``cumsum``).

        Why it is faster, and still exact: one buffer holds ``t0`` and the steps, so the
        sum is one in-place ``cumsum``; and both bounds are linear in the context, so
        when one bound exceeds the other by a wide margin (1e-9 relative, far above the
        few ulps of rounding) at the run's first and last step, it does at every step,
        and the other bound is not computed at all (``max`` would discard it). Short
        runs are summed in Python: the same operations in the same order on float64.
        """
        tokens = float(count)
        first = float(context_sum + count)
        last = first + (steps - 1) * count
        attn, lin = self.attention_flops_per_pair, self.linear_flops_per_token * tokens
        kvb, wb = self.kv_bytes, self.weight_bytes
        fr, br = self.flop_rate, self.byte_rate
        allreduce = self.allreduce_s_per_token * tokens
        fixed = self.fixed_s
        if steps <= SHORT_RUN:
            ends: list[float] = []
            t = t0
            x = first
            for _ in range(steps):
                f = (attn * x + lin) / fr
                m = (x * kvb + wb) / br
                d = m if m > f else f
                if allreduce:
                    d += allreduce
                d += fixed
                t += d
                ends.append(t)
                x += count
            return ends
        f0, f1 = (attn * first + lin) / fr, (attn * last + lin) / fr
        m0, m1 = (first * kvb + wb) / br, (last * kvb + wb) / br
        acc = np.arange(first - count, last + count / 2, count, dtype=np.float64)
        if m0 > f0 * MARGIN and m1 > f1 * MARGIN:  # memory-bound throughout
            acc *= kvb
            acc += wb
            acc /= br
        elif f0 > m0 * MARGIN and f1 > m1 * MARGIN:  # compute-bound throughout
            acc *= attn
            acc += lin
            acc /= fr
        else:
            flops = attn * acc
            flops += lin
            flops /= fr
            acc *= kvb
            acc += wb
            acc /= br
            np.maximum(flops, acc, out=acc)
        if allreduce:
            acc += allreduce
        acc += fixed
        acc[0] = t0
        np.add.accumulate(acc, out=acc)  # cumsum's ufunc, without its wrapper
        out: list[float] = acc[1:].tolist()
        return out

    def kv_capacity_tokens(self, memory_utilization: float) -> int:
        """KV tokens the replica holds (:func:`~gpu_trace.serve.latency.memory.kv_capacity_tokens`,
        with this model's ``reserve_gib``).
        """
        return kv_capacity_tokens(
            self.model, self.gpu, self.tp, memory_utilization, self.config.reserve_gib
        )


PLUGINS = (PolicyPlugin("latency", "roofline", Roofline),)
