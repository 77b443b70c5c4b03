"""The contract between the serving engine and a latency model.

A replica runs iterations: in each, some requests compute a chunk of their prompt
(prefill) and the others produce one token each (decode). How long that takes is all
the engine needs from hardware; a :class:`LatencyModel` answers it. Two shapes of the
question:

- :meth:`LatencyModel.iteration_s`: one iteration of any mix (:class:`IterationShape`);
- :meth:`LatencyModel.decode_steps_s`: ``steps`` consecutive decode-only iterations of
  the same batch, vectorized, so that the engine can jump over a stretch of iterations
  in which nothing arrives, finishes or runs out of KV memory (the reason a month of
  requests replays in seconds). It must equal ``iteration_s`` called step by step.

Specs (:class:`ModelSpec`, :class:`GpuSpec`) are plain data read from the tables in
``gpu_trace/serve/*.toml`` (sources cited there).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only transformer, as its published config states it (Hugging Face
    ``config.json`` names in the comments).
    """

    name: str
    layers: int  # num_hidden_layers
    hidden: int  # hidden_size
    heads: int  # num_attention_heads
    kv_heads: int  # num_key_value_heads (GQA; = heads without GQA)
    ffn: int  # intermediate_size
    vocab: int  # vocab_size
    params: float  # parameters, count
    dtype_bytes: int  # bytes per weight and per KV element (2 for fp16 / bf16)
    max_context: int  # max_position_embeddings

    @property
    def head_dim(self) -> int:
        """Dimension of one attention head."""
        return self.hidden // self.heads

    @property
    def kv_bytes_per_token(self) -> int:
        """KV-cache bytes one token holds on the whole replica (all tensor-parallel
        shards together): K and V, every layer, every KV head.
        """
        return 2 * self.layers * self.kv_heads * self.head_dim * self.dtype_bytes

    @property
    def weight_bytes(self) -> float:
        """Bytes of the weights (all shards together)."""
        return self.params * self.dtype_bytes


@dataclass(frozen=True)
class GpuSpec:
    """One GPU model: its datasheet peaks (dense, no sparsity) and power."""

    name: str
    memory_bytes: float
    peak_flops: float  # dense fp16/bf16 tensor FLOP/s
    hbm_bytes_per_s: float
    tdp_w: float
    idle_w: float
    link_bytes_per_s: float  # GPU-to-GPU within a node (NVLink), for tensor parallelism


@dataclass(frozen=True)
class IterationShape:
    """What one iteration of a replica computes.

    ``prefill_tokens[i]`` prompt tokens of prefilling request i are computed this
    iteration (a whole prompt, or one chunk of it under chunked prefill), after
    ``prefill_context[i]`` tokens of it already in the KV cache (earlier chunks, or a
    prefix-cache hit). ``decode_count`` requests produce one token each; their KV
    lengths (tokens already cached, prompt + tokens generated so far) sum to
    ``decode_context_sum``.
    """

    prefill_tokens: tuple[int, ...] = ()
    prefill_context: tuple[int, ...] = ()
    decode_count: int = 0
    decode_context_sum: int = 0

    @property
    def tokens(self) -> int:
        """Tokens computed this iteration (prefill chunk tokens + one per decode)."""
        return sum(self.prefill_tokens) + self.decode_count


class LatencyModel(Protocol):
    """How long a replica of one model on ``tp`` GPUs of one kind takes per iteration."""

    model: ModelSpec
    gpu: GpuSpec
    tp: int

    def iteration_s(self, shape: IterationShape) -> float:
        """Seconds one iteration of ``shape`` takes (> 0 for a non-empty shape)."""
        ...

    def decode_steps_s(self, count: int, context_sum: int, steps: int) -> npt.NDArray[np.float64]:
        """Seconds of each of ``steps`` consecutive decode-only iterations of ``count``
        requests whose KV lengths sum to ``context_sum`` at the first (each iteration
        adds ``count`` tokens to the sum). Equal, element by element, to
        ``iteration_s(IterationShape(decode_count=count, decode_context_sum=context_sum
        + k * count))`` for k = 0 .. steps - 1.
        """
        ...

    def kv_capacity_tokens(self, memory_utilization: float) -> int:
        """Tokens of KV cache the replica holds: ``memory_utilization`` of its GPUs'
        memory minus the weights (and any activation reserve the model states), over
        :attr:`ModelSpec.kv_bytes_per_token`. 0 when the weights do not fit.
        """
        ...
