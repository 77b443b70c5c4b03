"""Disaggregated prefill/decode pools and autoscaling, on cases worked by hand.

Disaggregation as Splitwise (Patel et al., ISCA 2024) and DistServe (Zhong et al., OSDI
2024) describe it: a prefill replica computes the prompt and its first token, the KV
cache is sent to a decode replica over a link, which produces the remaining tokens.
Autoscaling with a cold start: a replica started at a tick serves ``cold_start_s`` later.
"""

from __future__ import annotations

import pytest
from serve_engine_common import LinearLatency, config, requests

from gpu_trace.errors import UsageError
from gpu_trace.serve.autoscale import parse_autoscale
from gpu_trace.serve.engine import simulate


def test_disaggregated_transfer_and_decode_pool() -> None:
    # 1 prefill + 1 decode replica. The toy model holds 2 x 2 layers x 4 heads x 16 dims x
    # 2 bytes = 512 B of KV per token; a 100-token prompt is 51,200 B = 409,600 bits, over
    # a 409,600 bit/s link (0.0004096 Gbit/s): 1 s. a = 1 s, b = 0.01 s per token.
    # A (0, prompt 100, 3 tokens): prefill on 0, 2 s -> 2 (token 1); transfer 2 -> 3;
    #   decode replica 1: 1.01 s per token -> 4.01 (token 2), 5.02 (token 3).
    # B (0.5, prompt 100, 1 token): prefill on 0 at 2 -> 4, done there (nothing to send).
    result = simulate(
        requests([0.0, 0.5], [100, 100], [3, 1]),
        config(disaggregate="1:1", link_gbps=0.0004096),
        LinearLatency(a=1.0, b=0.01),
    )
    result.check()
    a, b = result.requests.to_dicts()
    assert a["prefill_replica"] == 0 and a["replica"] == 1
    assert a["ttft_s"] == pytest.approx(2.0) and a["kv_transfer_s"] == pytest.approx(1.0)
    assert a["finish_s"] == pytest.approx(5.02) and a["tpot_s"] == pytest.approx(1.51)
    assert b["prefill_replica"] == 0 and b["replica"] == 0 and b["kv_transfer_s"] == 0.0
    assert b["finish_s"] == pytest.approx(4.0)
    reps = result.replicas.to_dicts()
    assert [r["role"] for r in reps] == ["prefill", "decode"]
    assert [r["requests"] for r in reps] == [1, 1]
    assert set(result.timeseries["role"].to_list()) == {"prefill", "decode"}


def test_decode_replica_waits_for_memory_for_the_transferred_kv() -> None:
    # 4-token blocks, 3 blocks per replica; free link (transfer ~0). a = 1 s.
    # A (0, prompt 4, 4 tokens) and B (0, prompt 4, 4 tokens) prefilled together on 0 -> 1.
    # On decode replica 1, each holds ceil(4 / 4) = 1 block + needs 1 for its next token
    # (slot 4 starts a block): A takes 2 of 3, B (2 more) must wait until A is done.
    # A: tokens 2, 3, 4 at 2, 3, 4 (+ transfer). B: joins at 4, tokens at 5, 6, 7.
    result = simulate(
        requests([0.0, 0.0], [4, 4], [4, 4]),
        config(disaggregate="1:1", link_gbps=1e9, kv_block_tokens=4),
        LinearLatency(a=1.0, capacity_tokens=12),
    )
    a, b = result.requests.to_dicts()
    assert a["finish_s"] == pytest.approx(4.0) and b["finish_s"] == pytest.approx(7.0)
    assert b["ttft_s"] == pytest.approx(1.0) and b["preemptions"] == 0


def test_autoscale_starts_a_replica_after_its_cold_start_and_drains_it() -> None:
    # min 1, max 2, queue metric: up when > 0.5 waiting per replica, down when < 0.1,
    # ticks every 10 s; cold start 5 s. a = 1 s, one request at a time (max_seqs 1).
    # Five requests at 0 (1 + 20 tokens: 20 s each on replica 0: 0-20, ..., 80-100), one
    # at 12 (replica 1 is not up yet -> 0; runs 100-120), one at 16 (least-tokens: replica 1,
    # up since 15, is empty -> 1: prefill 16 -> 17, done).
    # Tick 10: 4 waiting on 1 replica -> start replica 1 (serves at 15).
    # Tick 110: nothing waiting -> drain replica 1 (empty) -> down at 110.
    result = simulate(
        requests([0.0] * 5 + [12.0, 16.0], [1] * 7, [20] * 6 + [1]),
        config(
            autoscale="queue,min=1,max=2,up=0.5,down=0.1,interval=10",
            cold_start_s=5.0,
            router="least-tokens",
            batch="max_seqs=1",
        ),
        LinearLatency(a=1.0),
    )
    result.check()
    req = result.requests.to_dicts()
    assert [r["replica"] for r in req] == [0, 0, 0, 0, 0, 0, 1]
    assert req[6]["finish_s"] == 17.0 and req[5]["finish_s"] == 120.0
    reps = result.replicas.to_dicts()
    assert len(reps) == 2
    assert reps[1]["start_s"] == 10.0 and reps[1]["up_s"] == 15.0 and reps[1]["down_s"] == 110.0
    assert reps[0]["down_s"] == 120.0 == result.horizon_s
    up = result.timeseries.filter(replica=1)["up"].to_list()
    assert up[:3] == [False, True, True] and up[-1] is False


def test_autoscale_settings() -> None:
    rule = parse_autoscale("utilization,max=6,interval=20s", 2)
    assert rule is not None
    assert (rule.metric, rule.min, rule.max, rule.interval_s) == ("utilization", 2, 6, 20.0)
    assert parse_autoscale("", 2) is None
    assert parse_autoscale("metric=queue", 3) is not None
    with pytest.raises(UsageError, match="unknown --autoscale metric"):
        parse_autoscale("latency,min=1", 1)
    with pytest.raises(UsageError, match="min <= max"):
        parse_autoscale("queue,min=3,max=2", 1)
    with pytest.raises(UsageError, match="not supported"):
        simulate(
            requests([0.0], [1], [1]),
            config(disaggregate="1:1", autoscale="queue"),
            LinearLatency(),
        )


def test_autoscale_flag_takes_the_metric_as_a_bare_word() -> None:
    # the flag's own help: "queue or utilization, with min=,max=,..."
    from gpu_trace.plugins import option_specs
    from gpu_trace.serve.config import ServeConfig

    spec = next(o for o in option_specs(ServeConfig) if o.name == "autoscale")
    assert spec.parse is not None
    assert spec.parse("queue,min=1,max=4") == "queue,min=1,max=4"
    with pytest.raises(UsageError):
        spec.parse("queue,min=1,max=4,speed=2")
