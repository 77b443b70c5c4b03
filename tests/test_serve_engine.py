"""The serving engine on cases worked by hand (every prefill end, token time and finish
written in the comments), from the semantics in docs/serving-replay.md: vLLM v0's
prefill-first continuous batching (vLLM ``core/scheduler.py``: waiting prompts are
scheduled before running decodes, a prefill step carries no decodes), Sarathi-Serve's
chunked prefill (decodes first, then chunks within a token budget: Agrawal et al., OSDI
2024, section 4), vLLM's preemption of the last-arrived request when KV blocks run out
(recompute or swap), a prefix-cache hit, and each router's choice.

Times use a linear latency model of the tests' own (``serve_engine_common``): every
iteration is ``a + b x tokens + c x decode context`` seconds.
"""

from __future__ import annotations

import pytest
from serve_engine_common import LinearLatency, config, requests

from gpu_trace.errors import GpuTraceError, UsageError
from gpu_trace.serve.engine import build, simulate
from gpu_trace.serve.latency.base import IterationShape
from gpu_trace.serve.result import ServeResult


def rows(result: ServeResult) -> list[dict[str, object]]:
    """Per-request rows, checked against the contract first."""
    result.check()
    return result.requests.to_dicts()


def test_vllm_two_requests_every_token_time() -> None:
    # a = 1 s, b = 0.1 s per token. A: arrives 0, prompt 4, 3 tokens; B: arrives 0.5,
    # prompt 6, 2 tokens.
    # t=0    A prefill (4 tokens): 1.4 s -> ends 1.4, A's token 1 (ttft 1.4).
    # t=0.5  B queues (replica busy).
    # t=1.4  prefill first: B alone (6 tokens), 1.6 s -> ends 3.0, B's token 1 (ttft 2.5);
    #        A waits (a vLLM prefill step carries no decodes).
    # t=3.0  decode A+B (2 tokens): 1.2 s -> 4.2: A token 2, B token 2 = done at 4.2.
    # t=4.2  decode A (1 token): 1.1 s -> 5.3: A token 3 = done at 5.3.
    lat = LinearLatency(a=1.0, b=0.1)
    result = simulate(requests([0.0, 0.5], [4, 6], [3, 2]), config(kv_block_tokens=4), lat)
    a, b = rows(result)
    assert a["queue_s"] == 0.0 and a["ttft_s"] == pytest.approx(1.4)
    assert a["finish_s"] == pytest.approx(5.3)
    assert a["tpot_s"] == pytest.approx((5.3 - 1.4) / 2)
    assert b["queue_s"] == pytest.approx(0.9) and b["ttft_s"] == pytest.approx(2.5)
    assert b["finish_s"] == pytest.approx(4.2) and b["tpot_s"] == pytest.approx(1.2)
    assert a["replica"] == b["replica"] == 0 and a["status"] == "finished"
    # the two prefill iterations went to the latency model as written above
    assert lat.calls == [
        IterationShape(prefill_tokens=(4,), prefill_context=(0,)),
        IterationShape(prefill_tokens=(6,), prefill_context=(0,)),
    ]
    reps = result.replicas.to_dicts()
    assert reps[0]["iterations"] == 4 and reps[0]["busy_s"] == pytest.approx(5.3)
    assert reps[0]["requests"] == 2


def test_vllm_token_budget_batches_prompts_and_takes_a_long_one_alone() -> None:
    # max_tokens = 10, a = 1, b = 0. Three arrive at 0: prompts 6, 4, 12; one token each.
    # t=0: 6 + 4 = 10 <= 10 -> prefill [6, 4], ends 1 (both done: 1 token).
    # t=1: 12 > 10 but nothing else taken -> alone, ends 2.
    lat = LinearLatency(a=1.0)
    out = rows(
        simulate(
            requests([0.0, 0.0, 0.0], [6, 4, 12], [1, 1, 1]),
            config(batch="max_tokens=10"),
            lat,
        )
    )
    assert [r["finish_s"] for r in out] == [1.0, 1.0, 2.0]
    assert [r["tpot_s"] for r in out] == [None, None, None]
    assert [c.prefill_tokens for c in lat.calls] == [(6, 4), (12,)]


def test_vllm_max_seqs_holds_a_request_back() -> None:
    # max_seqs = 1, a = 1: A (prompt 2, 3 tokens) and B (prompt 2, 1 token) at 0.
    # t=0 A prefill -> 1 (token 1). t=1: B cannot join (1 running), decode A -> 2, 3:
    # A done at 3. t=3: B prefill -> 4.
    out = rows(
        simulate(requests([0.0, 0.0], [2, 2], [3, 1]), config(batch="max_seqs=1"), LinearLatency())
    )
    assert [r["finish_s"] for r in out] == [3.0, 4.0]
    assert out[1]["queue_s"] == 3.0


def test_sarathi_chunks_with_decodes_first() -> None:
    # chunk = 4 tokens per iteration, a = 1, b = 0.1. A: 0, prompt 4, 3 tokens;
    # B: 0.5, prompt 6, 2 tokens.
    # t=0    A's prompt in one chunk (4): 1.4 -> 1.4, A token 1.
    # t=1.4  A decode (1) + B chunk of 3 (budget 4 - 1): 4 tokens, 1.4 -> 2.8 (A token 2).
    # t=2.8  A decode + B's last 3: 1.4 -> 4.2: A token 3 (done), B token 1 (ttft 3.7).
    # t=4.2  B decode: 1.1 -> 5.3, B done.
    lat = LinearLatency(a=1.0, b=0.1)
    a, b = rows(
        simulate(
            requests([0.0, 0.5], [4, 6], [3, 2]),
            config(batching="sarathi", batch="chunk=4", kv_block_tokens=4),
            lat,
        )
    )
    assert a["ttft_s"] == pytest.approx(1.4) and a["finish_s"] == pytest.approx(4.2)
    assert b["queue_s"] == pytest.approx(0.9) and b["ttft_s"] == pytest.approx(3.7)
    assert b["finish_s"] == pytest.approx(5.3)
    assert lat.calls[1] == IterationShape(
        prefill_tokens=(3,), prefill_context=(0,), decode_count=1, decode_context_sum=5
    )
    assert lat.calls[2] == IterationShape(
        prefill_tokens=(3,), prefill_context=(3,), decode_count=1, decode_context_sum=6
    )


def _kv_full(preemption: str) -> list[dict[str, object]]:
    # KV: 4-token blocks, 3 blocks. a = 1 s, b = 0. A: prompt 3, 6 tokens; B: prompt 3,
    # 3 tokens; both at 0 (A first in input order).
    # t=0 prefill A, B: ceil(3/4) = 1 block each (2 used) -> 1: token 1 each (4 tokens).
    # t=1 decode writes slot 3 (in block 1): -> 2, token 2 each (5 tokens).
    # t=2 decode writes slot 4: 2 new blocks, 1 free: preempt the last arrived (B, 1 block
    #     freed); A takes one (A holds 2).
    return rows(
        simulate(
            requests([0.0, 0.0], [3, 3], [6, 3]),
            config(kv_block_tokens=4, kv_preemption=preemption),
            LinearLatency(a=1.0, capacity_tokens=12),
        )
    )


def test_kv_full_preempts_the_last_arrival_and_recomputes() -> None:
    # recompute: B to the queue's front with prompt 3 + 2 kept tokens = 5 (2 blocks).
    # t=2..5: B needs 2 blocks, 1 free: A decodes (slots 4..7, its second block): tokens
    # 3..6 at 3, 4, 5, 6. t=6 A done (2 blocks freed): B prefill of 5 tokens -> 7 (B token
    # 3), done. B's first token stays at 1: TPOT (7 - 1) / 2 = 3.
    a, b = _kv_full("recompute")
    assert a["finish_s"] == 6.0 and a["preemptions"] == 0 and a["ttft_s"] == 1.0
    assert b["ttft_s"] == 1.0 and b["finish_s"] == 7.0 and b["preemptions"] == 1
    assert b["tpot_s"] == pytest.approx(3.0)


def test_kv_full_swaps_out_and_back() -> None:
    # swap: B's block (4 tokens x 512 B of KV per token of the toy model) goes to host
    # memory at 25 GB/s: s = 2048 / 25e9 s, added to A's decode at t=2 (ends 3 + s).
    # B comes back when its block and its next token's block (slot 4) fit: after A is
    # done (6 + s), with another s of copying: decode -> 7 + 2s (token 3), done.
    s = 4 * 512 / 25e9
    a, b = _kv_full("swap")
    assert a["finish_s"] == pytest.approx(6.0 + s, abs=1e-12)
    assert b["finish_s"] == pytest.approx(7.0 + 2 * s, abs=1e-12)
    assert b["preemptions"] == 1 and b["ttft_s"] == 1.0


def test_prefix_hit_skips_cached_blocks() -> None:
    # Trace blocks of 4 tokens (= KV blocks). a = 1, b = 0.1. A at 0: prompt 8, blocks
    # [1, 2], one token: prefill 8 -> 1.8, done; its blocks are cached. B at 5: prompt
    # 10, blocks [1, 2, 3]: blocks 1, 2 hit -> 8 tokens cached (<= 10 - 1), 2 computed:
    # 1.2 s -> 6.2.
    lat = LinearLatency(a=1.0, b=0.1)
    a, b = rows(
        simulate(
            requests([0.0, 5.0], [8, 10], [1, 1], [[1, 2], [1, 2, 3]], block_tokens=4),
            config(kv_block_tokens=4),
            lat,
        )
    )
    assert a["prefix_hit_tokens"] == 0 and a["finish_s"] == pytest.approx(1.8)
    assert b["prefix_hit_tokens"] == 8 and b["finish_s"] == pytest.approx(6.2)
    assert lat.calls[1] == IterationShape(prefill_tokens=(2,), prefill_context=(8,))
    # off: the whole prompt is computed
    off = rows(
        simulate(
            requests([0.0, 5.0], [8, 10], [1, 1], [[1, 2], [1, 2, 3]], block_tokens=4),
            config(kv_block_tokens=4, prefix_cache=False),
            LinearLatency(a=1.0, b=0.1),
        )
    )
    assert off[1]["prefix_hit_tokens"] == 0 and off[1]["finish_s"] == pytest.approx(7.0)


def test_a_request_that_never_fits_is_dropped_with_its_reason() -> None:
    # 4-token blocks, 3 blocks: prompt 10 + 5 tokens needs ceil(15 / 4) = 4 blocks.
    out = rows(
        simulate(
            requests([0.0, 1.0], [10, 2], [5, 1]),
            config(kv_block_tokens=4),
            LinearLatency(capacity_tokens=12),
        )
    )
    assert out[0]["status"] == "dropped" and out[0]["replica"] == -1
    assert out[0]["drop_reason"] == "needs 4 KV blocks, the replica holds 3"
    assert out[0]["ttft_s"] is None and out[0]["finish_s"] is None
    assert out[1]["status"] == "finished" and out[1]["drop_reason"] is None


def test_round_robin_cycles_over_replicas() -> None:
    out = rows(
        simulate(
            requests([0.0, 0.1, 0.2, 0.3, 0.4], [2] * 5, [1] * 5),
            config(replicas=3),
            LinearLatency(),
        )
    )
    assert [r["replica"] for r in out] == [0, 1, 2, 0, 1]


def test_least_tokens_picks_the_least_outstanding_work() -> None:
    # 2 replicas, all at 0. A (10 + 100 tokens) -> 0 (tie: lowest index). B (10 + 5) -> 1
    # (0 holds 110). C (1 + 1) -> 1 (110 vs 15). D (200 + 1) -> 1 (110 vs 17).
    # E (1 + 1) -> 0 (110 vs 218).
    out = rows(
        simulate(
            requests([0.0] * 5, [10, 10, 1, 200, 1], [100, 5, 1, 1, 1]),
            config(replicas=2, router="least-tokens"),
            LinearLatency(),
        )
    )
    assert [r["replica"] for r in out] == [0, 1, 1, 1, 0]


def test_least_tokens_counts_tokens_produced_mid_run() -> None:
    # 2 replicas, a = 1 s. A (prompt 1, 100 tokens) at 0 -> 0 (tie); B (prompt 1, 20
    # tokens) at 0 -> 1 (101 vs 0). A: token 1 at 1, then one per second (token k at k).
    # At 50.5: replica 0 has produced 50 of A's tokens (50 left), replica 1 finished B at
    # 20 (0 left): C (prompt 1, 1 token) -> 1, done at 51.5.
    # At 60.5 D (prompt 1, 60 tokens): replica 0 has 40 left, replica 1 0: D -> 1.
    # At 61.5 E: replica 0 has 39 left; replica 1's iteration ends at 61.5 first (D's
    # token 1): 59 left -> E -> 0.
    out = rows(
        simulate(
            requests([0.0, 0.0, 50.5, 60.5, 61.5], [1] * 5, [100, 20, 1, 60, 1]),
            config(replicas=2, router="least-tokens"),
            LinearLatency(),
        )
    )
    assert [r["replica"] for r in out] == [0, 1, 1, 1, 0]


def test_prefix_affinity_follows_the_cached_prefix() -> None:
    # 2 replicas, a = 1 s, 4-token trace blocks. A (prompt 8, 50 tokens, blocks [1, 2])
    # at 0 -> 0 (no hit anywhere: least-tokens, tie -> 0); its blocks are cached at 1.
    # B (blocks [9, 10], 1 token) at 5 -> 1 (no hit; 0 is loaded). C (blocks [1, 2]) at
    # 10 -> 0: 2 blocks cached there, although 0 is the loaded one; hit = min(8, 8 - 1).
    out = rows(
        simulate(
            requests(
                [0.0, 5.0, 10.0],
                [8, 8, 8],
                [50, 1, 1],
                [[1, 2], [9, 10], [1, 2]],
                block_tokens=4,
            ),
            config(replicas=2, router="prefix-affinity", kv_block_tokens=4),
            LinearLatency(),
        )
    )
    assert [r["replica"] for r in out] == [0, 1, 0]
    assert out[2]["prefix_hit_tokens"] == 7
    ls = rows(
        simulate(
            requests(
                [0.0, 5.0, 10.0],
                [8, 8, 8],
                [50, 1, 1],
                [[1, 2], [9, 10], [1, 2]],
                block_tokens=4,
            ),
            config(replicas=2, router="least-tokens", kv_block_tokens=4),
            LinearLatency(),
        )
    )
    assert [r["replica"] for r in ls] == [0, 1, 1]


def test_arrival_at_an_iteration_end_joins_the_next_iteration() -> None:
    # a = 1 s. A (prompt 1, 10 tokens) at 0: token 1 at 1, decodes end at 2, 3, ...
    # B (prompt 1, 1 token) arrives at exactly 3: iteration ends come first at an
    # instant, so B's prefill starts at 3 and ends at 4 (A waits: prefill first).
    out = rows(simulate(requests([0.0, 3.0], [1, 1], [10, 1]), config(), LinearLatency()))
    assert out[1]["queue_s"] == 0.0 and out[1]["finish_s"] == 4.0
    assert out[0]["finish_s"] == 11.0  # 10 tokens + B's 1 s


def test_spf_orders_the_queue_by_output_tokens() -> None:
    # a = 1, max_seqs = 1. A (1 token) runs at 0; B (5 tokens), C (2 tokens) queue.
    # spf: C (2) first -> prefill at 1, decode -> 3; then B 3 .. 8.
    out = rows(
        simulate(
            requests([0.0, 0.1, 0.2], [1, 1, 1], [1, 5, 2]),
            config(order="spf", batch="max_seqs=1"),
            LinearLatency(),
        )
    )
    assert [r["finish_s"] for r in out] == [1.0, 8.0, 3.0]


def test_unknown_options_are_one_line_errors() -> None:
    reqs = requests([0.0], [1], [1])
    with pytest.raises(UsageError, match="unknown option 'max_tokns'"):
        build(reqs, config(batch="max_tokns=3"), LinearLatency())
    with pytest.raises(UsageError, match="unknown batching policy"):
        build(reqs, config(batching="orca2"), LinearLatency())
    with pytest.raises(UsageError, match="queue order"):
        build(reqs, config(order="lifo"), LinearLatency())
    with pytest.raises(GpuTraceError, match="not a valid value"):
        build(reqs, config(batch="chunk=x", batching="sarathi"), LinearLatency())


def test_vllm_vidur_options_padded_budget_and_watermark() -> None:
    # vidur (vllm_replica_scheduler.py) costs a prefill batch len(batch) x longest prompt
    # and keeps watermark x blocks free at admission (notes/vidur_semantics.md, 4).
    # max_tokens 10, padded: prompts 6 and 4 cost 2 x 6 = 12 > 10 -> two iterations.
    lat = LinearLatency(a=1.0)
    out = rows(
        simulate(
            requests([0.0, 0.0], [6, 4], [1, 1]),
            config(batch="max_tokens=10,padded=true"),
            lat,
        )
    )
    assert [r["finish_s"] for r in out] == [1.0, 2.0]
    # watermark 0.25 of 8 blocks (4-token blocks) = 2 kept free. A (prompt 11: 3
    # blocks) is admitted into the empty replica; B (prompt 11) would leave 8 - 6 = 2 >= 2:
    # both in one prefill. C (prompt 3: 1 block) would leave 1 < 2: it waits for A and B.
    out = rows(
        simulate(
            requests([0.0, 0.0, 0.0], [11, 11, 3], [1, 1, 1]),
            config(batch="watermark=0.25", kv_block_tokens=4),
            LinearLatency(a=1.0, capacity_tokens=32),
        )
    )
    assert [r["finish_s"] for r in out] == [1.0, 1.0, 2.0]


def test_a_prefix_hit_saves_compute_not_memory() -> None:
    # 4-token blocks (trace and KV), 3 KV blocks. a = 1 s. A (0, prompt 8, blocks [1, 2],
    # 1 token): prefill -> 1, done, blocks 1, 2 cached. At 5: B (prompt 8, blocks [1, 2],
    # 4 tokens) hits 7 tokens (8 cached, at most 8 - 1) and computes 1, but holds
    # ceil(8 / 4) = 2 blocks: the cached ones move from the free part of the pool to it.
    # C (prompt 8, 1 token, 2 blocks) finds 1 free: it waits. B: token 1 at 6, its third
    # block before writing slot 8 (t=6), tokens 2..4 at 7, 8, 9. C: prefill 9 -> 10.
    out = rows(
        simulate(
            requests([0.0, 5.0, 5.0], [8, 8, 8], [1, 4, 1], [[1, 2], [1, 2], []], block_tokens=4),
            config(kv_block_tokens=4),
            LinearLatency(a=1.0, capacity_tokens=12),
        )
    )
    assert out[1]["prefix_hit_tokens"] == 7 and out[1]["finish_s"] == 9.0
    assert out[2]["queue_s"] == 4.0 and out[2]["finish_s"] == 10.0
