"""KV-cache capacity of a replica, shared by the latency models.

vLLM sizes its paged KV cache the same way: of ``gpu_memory_utilization`` x the GPUs'
memory, what the weights and the activations of a profiling forward pass leave is KV
blocks. We have no forward pass to profile, so the activation part is a stated reserve
per GPU (an option of each latency model).
"""

from __future__ import annotations

import math

from gpu_trace.errors import UsageError
from gpu_trace.serve.latency.base import GpuSpec, ModelSpec

GIB = 1024**3


def kv_capacity_tokens(
    model: ModelSpec, gpu: GpuSpec, tp: int, memory_utilization: float, reserve_gib: float
) -> int:
    """Tokens of KV cache a replica of ``tp`` GPUs holds: ``floor((tp x memory x
    utilization - weights - tp x reserve) / kv_bytes_per_token)``, 0 when the weights
    (and reserve) do not fit.
    """
    if not 0 < memory_utilization <= 1:
        msg = f"memory utilization {memory_utilization} is not in (0, 1]"
        raise UsageError(msg)
    free = tp * gpu.memory_bytes * memory_utilization - model.weight_bytes - tp * reserve_gib * GIB
    if free <= 0:
        return 0
    return math.floor(free / model.kv_bytes_per_token)


def check_tp(model: ModelSpec, tp: int) -> None:
    """Tensor parallelism splits attention heads across GPUs: ``tp`` must be >= 1 and
    divide the heads (vLLM refuses the same).
    """
    if tp < 1 or model.heads % tp:
        msg = f"tensor-parallel width {tp} does not divide {model.name}'s {model.heads} attention heads"
        raise UsageError(msg)
