"""Golden cases of the serving replay, every token time worked out by hand.

Written from the semantics (docs/serving-replay.md; vLLM's scheduler as the vLLM paper,
Kwon et al. SOSP'23 §4.2-4.5, and vidur's model of it describe: prefill-prioritised
iterations, blocks allocated for a prompt when it is scheduled, one slot per decode
step, the last-arrived running request preempted when a slot is missing; Sarathi-Serve,
Agrawal et al. OSDI'24 §4: a token budget per iteration that decodes and prompt chunks
share), independently of the engine's code. The latency model here is the tests' own,
chosen so that the arithmetic is easy to follow:

    iteration = 0.05 s + 0.001 s x prompt tokens computed + 0.01 s x decoding requests

(the context a chunk or a decode attends to costs nothing here, so a prefix hit shows
only as fewer prompt tokens computed).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pytest

from gpu_trace.serve.config import ServeConfig
from gpu_trace.serve.engine import simulate
from gpu_trace.serve.latency.base import GpuSpec, IterationShape, ModelSpec
from gpu_trace.serve.workload import RequestSet

# kv bytes per token = 2 x layers x kv_heads x head_dim x dtype = 2 x 1 x 1 x 500 x 1 = 1,000
MODEL = ModelSpec(
    name="golden",
    layers=1,
    hidden=500,
    heads=1,
    kv_heads=1,
    ffn=1000,
    vocab=1000,
    params=1e6,
    dtype_bytes=1,
    max_context=100_000,
)
GPU = GpuSpec(
    name="golden-gpu",
    memory_bytes=1e9,
    peak_flops=1e12,
    hbm_bytes_per_s=1e11,
    tdp_w=300.0,
    idle_w=100.0,
    link_bytes_per_s=1e10,
)


@dataclass
class Linear:
    """The tests' own latency model (see the module docstring)."""

    kv_tokens: int = 1_000_000
    model: ModelSpec = MODEL
    gpu: GpuSpec = GPU
    tp: int = 1

    def iteration_s(self, shape: IterationShape) -> float:
        return 0.05 + 0.001 * sum(shape.prefill_tokens) + 0.01 * shape.decode_count

    def decode_steps_s(self, count: int, context_sum: int, steps: int) -> npt.NDArray[np.float64]:
        return np.full(steps, 0.05 + 0.01 * count)

    def kv_capacity_tokens(self, memory_utilization: float) -> int:
        return self.kv_tokens


def requests(
    arrival: list[float],
    inputs: list[int],
    outputs: list[int],
    blocks: list[list[int]] | None = None,
    block_tokens: int = 0,
) -> RequestSet:
    blocks = blocks or [[] for _ in arrival]
    offsets = np.concatenate([[0], np.cumsum([len(b) for b in blocks])]).astype(np.int64)
    return RequestSet(
        request_id=np.arange(len(arrival), dtype=np.int64),
        arrival_s=np.asarray(arrival, dtype=np.float64),
        input_tokens=np.asarray(inputs, dtype=np.int64),
        output_tokens=np.asarray(outputs, dtype=np.int64),
        session=np.full(len(arrival), -1, dtype=np.int64),
        block_offsets=offsets,
        block_hashes=np.asarray([h for b in blocks for h in b], dtype=np.int64),
        block_tokens=block_tokens,
        source="golden",
        dataset="",
        origin="",
    )


def run(reqs: RequestSet, latency: Linear | None = None, **options: object) -> dict[str, list]:
    config = ServeConfig(source="golden", **options)  # type: ignore[arg-type]
    result = simulate(reqs, config, latency or Linear())
    result.check()
    return result.requests.sort("request_id").to_dict(as_series=False)


def close(got: list, want: list) -> None:
    assert got == pytest.approx(want, abs=1e-9), (got, want)


def test_vllm_prefill_first_then_decode_together() -> None:
    # R0 arrives 0.00 (100 prompt, 3 out), R1 arrives 0.05 (200 prompt, 2 out); one replica.
    # 0.00-0.15 prefill R0 (0.05 + 0.100): R0 token 1 at 0.15
    # 0.15-0.40 prefill R1 (0.05 + 0.200; prefill first, R0 waits): R1 token 1 at 0.40
    # 0.40-0.47 decode R0, R1 (0.05 + 2 x 0.01): R0 token 2, R1 token 2 -> R1 done at 0.47
    # 0.47-0.53 decode R0 (0.05 + 0.01): R0 token 3 -> done at 0.53
    out = run(requests([0.0, 0.05], [100, 200], [3, 2]), batching="vllm")
    close(out["ttft_s"], [0.15, 0.35])
    close(out["finish_s"], [0.53, 0.47])
    close(out["e2e_s"], [0.53, 0.42])
    close(out["tpot_s"], [(0.53 - 0.15) / 2, 0.07])
    close(out["queue_s"], [0.0, 0.10])
    assert out["status"] == ["finished", "finished"]
    assert out["preemptions"] == [0, 0]


def test_one_output_token_ends_at_prefill_and_has_no_tpot() -> None:
    out = run(requests([0.0], [10], [1]), batching="vllm")
    close(out["ttft_s"], [0.06])
    close(out["finish_s"], [0.06])
    assert out["tpot_s"] == [None]


def test_sarathi_chunks_share_the_token_budget() -> None:
    # chunk=128 tokens per iteration, decodes included. R0 (300 prompt, 2 out) and R1
    # (50 prompt, 3 out) both arrive at 0.
    # 0.000-0.178 R0 chunk 128 (0.05 + 0.128)
    # 0.178-0.356 R0 chunk 128 (256 of 300 done)
    # 0.356-0.500 R0 last 44 + R1 50 (budget 128 - 44 = 84 >= 50): 0.05 + 0.094;
    #             both prompts complete: token 1 of each at 0.500
    # 0.500-0.570 decode R0, R1: R0 token 2 -> done at 0.57
    # 0.570-0.630 decode R1: token 3 -> done at 0.63
    out = run(requests([0.0, 0.0], [300, 50], [2, 3]), batching="sarathi", batch="chunk=128")
    close(out["ttft_s"], [0.5, 0.5])
    close(out["finish_s"], [0.57, 0.63])
    close(out["queue_s"], [0.0, 0.356])
    close(out["tpot_s"], [0.07, 0.065])


def test_kv_full_preempts_the_last_arrived_and_recomputes() -> None:
    # KV: 4-token blocks, 12 tokens = 3 blocks. R0, R1 arrive at 0 (4 prompt, 4 out).
    # 0.000-0.058 prefill both (one block each; 0.05 + 0.008): token 1 of each; KV holds 4 each
    # 0.058: decode needs a slot at position 4 for each (4 % 4 == 0): R0 takes the last
    #        free block; none left for R1 -> R1 (arrived last) preempted, its block freed,
    #        back to the front of the queue with 4 + 1 = 5 tokens to recompute (2 blocks).
    # 0.058-0.118 decode R0 (token 2); 1 block free < 2: R1 cannot be admitted
    # 0.118-0.178 decode R0 (token 3); 0.178-0.238 decode R0 (token 4) -> done, 2 blocks freed
    # 0.238-0.293 recompute R1's 5 tokens (0.05 + 0.005): R1 token 2
    # 0.293-0.353 decode R1 (token 3); 0.353-0.413 decode R1 (token 4) -> done
    out = run(
        requests([0.0, 0.0], [4, 4], [4, 4]),
        latency=Linear(kv_tokens=12),
        batching="vllm",
        kv_block_tokens=4,
    )
    close(out["ttft_s"], [0.058, 0.058])
    close(out["finish_s"], [0.238, 0.413])
    assert out["preemptions"] == [0, 1]
    close(out["tpot_s"], [0.06, (0.413 - 0.058) / 3])


def test_prefix_hit_computes_only_the_rest_of_the_prompt() -> None:
    # Trace blocks of 4 tokens. R0 (8 prompt: blocks 11, 12; 1 out) at 0; R1 (10 prompt:
    # blocks 11, 12, 13; 1 out) at 1.0. R0's prefill (0.05 + 0.008) caches 11, 12.
    # R1: 11 and 12 hit -> 8 tokens reused, 2 computed: 0.05 + 0.002 = 0.052.
    reqs = requests([0.0, 1.0], [8, 10], [1, 1], [[11, 12], [11, 12, 13]], block_tokens=4)
    out = run(reqs, batching="vllm", kv_block_tokens=4)
    assert out["prefix_hit_tokens"] == [0, 8]
    close(out["ttft_s"], [0.058, 0.052])
    cold = run(reqs, batching="vllm", kv_block_tokens=4, prefix_cache=False)
    assert cold["prefix_hit_tokens"] == [0, 0]
    close(cold["ttft_s"], [0.058, 0.06])


def test_disaggregated_prefill_then_kv_transfer_then_decode() -> None:
    # 1 prefill + 1 decode replica. R0 (100 prompt, 3 out) at 0.
    # 0.00-0.15 prefill on the prefill replica (0.05 + 0.100): token 1 at 0.15
    # KV transfer: 100 tokens x 1,000 B = 1e5 B over 0.008 Gbit/s = 1e6 B/s: 0.10 s -> 0.25
    # 0.25-0.31 decode (token 2), 0.31-0.37 decode (token 3) on the decode replica
    out = run(
        requests([0.0], [100], [3]),
        batching="vllm",
        disaggregate="1:1",
        link_gbps=0.008,
    )
    close(out["ttft_s"], [0.15])
    close(out["kv_transfer_s"], [0.10])
    close(out["finish_s"], [0.37])
    close(out["tpot_s"], [0.11])
    assert out["prefill_replica"] != out["replica"]


def test_round_robin_and_least_tokens_choose_differently() -> None:
    # Two replicas. R0 (100 prompt, 10 out) at 0.00, R1 (10, 1) at 0.01, R2 (10, 1) at 0.02.
    # round-robin: 0, 1, 0.
    # least-tokens at 0.02: replica 0 owes R0's 100 + 10 tokens (its prefill runs to
    # 0.15), replica 1 owes R1's 10 + 1 (prefill runs to 0.06): R2 -> replica 1.
    reqs = requests([0.0, 0.01, 0.02], [100, 10, 10], [10, 1, 1])
    assert run(reqs, replicas=2, router="round-robin")["replica"] == [0, 1, 0]
    assert run(reqs, replicas=2, router="least-tokens")["replica"] == [0, 1, 1]


def test_prefix_affinity_sends_a_shared_prefix_where_it_is_cached() -> None:
    # Two replicas, trace blocks of 4 tokens. R0 (blocks 1, 2) at 0 -> replica 0 (no hit
    # anywhere, both idle: lowest index). R1 (blocks 1, 2, 3) at 1.0: replica 0 holds 1, 2
    # -> replica 0 with 8 tokens reused; round-robin sends it to replica 1, cold.
    reqs = requests([0.0, 1.0], [8, 12], [1, 1], [[1, 2], [1, 2, 3]], block_tokens=4)
    aff = run(reqs, replicas=2, router="prefix-affinity", kv_block_tokens=4)
    assert aff["replica"] == [0, 0]
    assert aff["prefix_hit_tokens"] == [0, 8]
    rr = run(reqs, replicas=2, router="round-robin", kv_block_tokens=4)
    assert rr["replica"] == [0, 1]
    assert rr["prefix_hit_tokens"] == [0, 0]


def test_a_request_larger_than_the_whole_kv_is_dropped_with_its_reason() -> None:
    # 12 KV tokens; R0 needs 20 + 5 -> can never fit: dropped, R1 served.
    out = run(
        requests([0.0, 0.0], [20, 4], [5, 1]),
        latency=Linear(kv_tokens=12),
        kv_block_tokens=4,
    )
    assert out["status"] == ["dropped", "finished"]
    assert out["drop_reason"][0]
    assert out["finish_s"][0] is None
    close(out["finish_s"][1:], [0.054])
