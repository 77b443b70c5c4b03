"""The serving summary metrics (gpu_trace/serve/metrics.py) worked by hand on five
requests, and the sanity notes.

Definitions checked (not our docs): SLO attainment and goodput as DistServe defines
them (Zhong et al., OSDI '24, section 2: goodput is "the maximum request rate that can
be served adhering to the SLO attainment goal"; per run, requests meeting both the TTFT
and TPOT targets per second), TPOT = (finish - first token) / (output tokens - 1), and
percentiles by linear interpolation between order statistics (numpy.percentile's
default "linear" method: value at position (n - 1) q of the sorted values).
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass

import polars as pl
import pytest

from gpu_trace.serve import metrics, sanity
from gpu_trace.serve.result import (
    REPLICA_COLUMNS,
    REQUEST_COLUMNS,
    TIMESERIES_COLUMNS,
    ServeResult,
    empty,
)

REASON = "needs 626 KV blocks, the replica holds 500"


def five() -> ServeResult:
    """Five requests on three replicas of 2 GPUs over a 10 s horizon.

    id arrival  in  out  queue  ttft  tpot   e2e = ttft + (out-1) x tpot   status
    1   0.0    100   11   0.0   0.5   0.1    0.5 + 10 x 0.1  = 1.5         finished
    2   1.0    200    1   0.2   1.0   null   1.0                           finished
    3   2.0     50   21   0.5   3.0   0.05   3.0 + 20 x 0.05 = 4.0         finished
    4   3.0    400    5   1.0   2.0   0.3    2.0 + 4 x 0.3   = 3.2         finished (2 preemptions)
    5   4.0  10000   10    -     -     -      -                            dropped
    Prefix hits: request 1 64 tokens, request 3 32 tokens.
    """
    req = pl.DataFrame(
        {
            "request_id": [1, 2, 3, 4, 5],
            "arrival_s": [0.0, 1.0, 2.0, 3.0, 4.0],
            "input_tokens": [100, 200, 50, 400, 10000],
            "output_tokens": [11, 1, 21, 5, 10],
            "replica": [0, 1, 0, 1, -1],
            "prefill_replica": [0, 1, 0, 1, -1],
            "prefix_hit_tokens": [64, 0, 32, 0, 0],
            "queue_s": [0.0, 0.2, 0.5, 1.0, None],
            "ttft_s": [0.5, 1.0, 3.0, 2.0, None],
            "tpot_s": [0.1, None, 0.05, 0.3, None],
            "e2e_s": [1.5, 1.0, 4.0, 3.2, None],
            "finish_s": [1.5, 2.0, 6.0, 6.2, None],
            "kv_transfer_s": [0.0, 0.0, 0.0, 0.0, 0.0],
            "preemptions": [0, 0, 0, 2, 0],
            "status": ["finished"] * 4 + ["dropped"],
            "drop_reason": [None, None, None, None, REASON],
        },
        schema=REQUEST_COLUMNS,
    )
    # replica 2 was started by the autoscaler at 1.0 s: serving from 6.0 s (a 5 s cold start)
    reps = pl.DataFrame(
        {
            "replica": [0, 1, 2],
            "role": ["mixed"] * 3,
            "gpus": [2, 2, 2],
            "start_s": [0.0, 0.0, 1.0],
            "up_s": [0.0, 0.0, 6.0],
            "down_s": [10.0, 10.0, 10.0],
            "busy_s": [4.0, 3.0, 0.5],
            "iterations": [40, 30, 5],
            "requests": [2, 2, 0],
            "kv_capacity_blocks": [500, 500, 500],
        },
        schema=REPLICA_COLUMNS,
    )
    result = ServeResult(req, empty(TIMESERIES_COLUMNS), reps, horizon_s=10.0)
    result.check()
    return result


def summary(energy: metrics.EnergyCost | None = None) -> dict[str, object]:
    return metrics.summary(five(), metrics.Slo.parse("ttft=2s,tpot=100ms"), energy=energy)


@dataclass(frozen=True)
class Figures:
    """GPU time, energy and cost as given to the summary (serve-latency's
    ``energy_cost`` computes them; the summary only files them under its columns).
    """

    gpu_seconds: float = 58.0
    energy_kwh: float = 0.5
    j_per_token: float | None = 3.0
    price_usd_per_gpu_hour: float = 2.0
    cost_usd: float = 4.0
    usd_per_million_tokens: float | None = 5.0


def test_percentiles_by_hand() -> None:
    s = summary()
    want = {
        # TTFT of the finished: 0.5 1.0 2.0 3.0; mean 6.5 / 4; p50 at position 1.5:
        # 1.0 + 0.5 x 1.0; p90 at 2.7: 2.0 + 0.7 x 1.0; p99 at 2.97: 2.0 + 0.97 x 1.0
        "ttft_mean_s": 1.625,
        "ttft_p50_s": 1.5,
        "ttft_p90_s": 2.7,
        "ttft_p99_s": 2.97,
        # TPOT (request 2 has one token: null): 0.05 0.1 0.3; mean 0.45 / 3; positions
        # 2q: p50 at 1.0 = 0.1; p90 at 1.8: 0.1 + 0.8 x 0.2; p99 at 1.98: 0.1 + 0.98 x 0.2
        "tpot_mean_s": 0.15,
        "tpot_p50_s": 0.1,
        "tpot_p90_s": 0.26,
        "tpot_p99_s": 0.296,
        # e2e: 1.0 1.5 3.2 4.0; mean 9.7 / 4; p50 at 1.5: 1.5 + 0.5 x 1.7;
        # p90 at 2.7: 3.2 + 0.7 x 0.8; p99 at 2.97: 3.2 + 0.97 x 0.8
        "e2e_mean_s": 2.425,
        "e2e_p50_s": 2.35,
        "e2e_p90_s": 3.76,
        "e2e_p99_s": 3.976,
        # queue: 0.0 0.2 0.5 1.0; mean 1.7 / 4; p50: 0.2 + 0.5 x 0.3; p90: 0.5 + 0.7 x
        # 0.5; p99: 0.5 + 0.97 x 0.5
        "queue_mean_s": 0.425,
        "queue_p50_s": 0.35,
        "queue_p90_s": 0.85,
        "queue_p99_s": 0.985,
    }
    for key, value in want.items():
        assert s[key] == pytest.approx(value), key


def test_attainment_goodput_and_counts_by_hand() -> None:
    s = summary()
    # SLO ttft <= 2 s and tpot <= 0.1 s (null meets): request 1 (0.5, 0.1) meets;
    # 2 (1.0, null) meets; 3 misses TTFT (3.0); 4 meets TTFT (2.0, equal) but misses TPOT
    # (0.3); 5 is dropped: a miss. 2 of 5 -> 0.4; goodput 2 requests / 10 s = 0.2 /s.
    assert s["slo_attainment_ratio"] == pytest.approx(0.4)
    assert s["goodput_rps"] == pytest.approx(0.2)
    assert (s["requests"], s["requests_finished"], s["requests_dropped"]) == (5, 4, 1)
    assert json.loads(str(s["drop_reasons"])) == {REASON: 1}
    assert s["preemptions"] == 2
    # finished tokens: prompts 100 + 200 + 50 + 400 = 750, outputs 11 + 1 + 21 + 5 = 38;
    # 788 / 10 s and 38 / 10 s; prefix hits (64 + 32) / 750
    assert s["tokens_per_second"] == pytest.approx(78.8)
    assert s["output_tokens_per_second"] == pytest.approx(3.8)
    assert s["prefix_hit_ratio"] == pytest.approx(0.128)
    assert (s["slo_ttft_s"], s["slo_tpot_s"], s["slo_e2e_s"]) == (2.0, 0.1, None)


def test_gpu_time_by_hand_and_energy_filed() -> None:
    s = summary()
    # GPU-seconds: 2 x 10 + 2 x 10 + 2 x (10 - (6 - 5)) = 58 (replica 2 from its start,
    # the cold start included). Utilisation: busy 4 + 3 + 0.5 over up 10 + 10 + 4 = 7.5 / 24.
    assert s["gpu_seconds"] == pytest.approx(58.0)
    assert s["utilization_ratio"] == pytest.approx(7.5 / 24)
    assert s["energy_kwh"] is None and s["cost_usd"] is None  # no energy figures given
    s = summary(Figures(gpu_seconds=57.0))
    assert (s["gpu_seconds"], s["energy_kwh"], s["energy_per_token_j"]) == (57.0, 0.5, 3.0)
    assert (s["usd_per_gpu_h"], s["cost_usd"], s["cost_per_mtok_usd"]) == (2.0, 4.0, 5.0)


@pytest.mark.skipif(
    importlib.util.find_spec("gpu_trace.serve.energy") is None,
    reason="serve-latency's energy helpers are not merged yet",
)
def test_energy_and_cost_of_the_five_by_hand() -> None:
    from gpu_trace.serve import energy
    from gpu_trace.serve.latency.base import GpuSpec

    result = five()
    gpu = GpuSpec("x", 80e9, 1e15, 2e12, tdp_w=700.0, idle_w=100.0, link_bytes_per_s=1e11)
    tokens = energy.served_tokens(result.requests)
    cost = energy.energy_cost(result.replicas, gpu, tokens=tokens, price_usd_per_gpu_hour=2.0)
    s = summary(cost)
    # busy GPU-seconds 8 + 6 + 1 = 15 at 700 W, the rest (20-8) + (20-6) + (18-1) = 43 at
    # 100 W: 10 500 + 4 300 = 14 800 J; tokens 750 + 38 = 788; 58 GPU-s x 2 USD / 3600
    assert s["gpu_seconds"] == pytest.approx(58.0)
    assert s["energy_kwh"] == pytest.approx(14800 / 3.6e6)
    assert s["energy_per_token_j"] == pytest.approx(14800 / 788)
    assert s["cost_usd"] == pytest.approx(58 / 3600 * 2)
    assert s["cost_per_mtok_usd"] == pytest.approx(58 / 3600 * 2 / 788 * 1e6)


def test_e2e_target() -> None:
    # with e2e <= 1.2 s too, request 1 (e2e 1.5) misses: only request 2 (1.0) meets, 1 of 5
    s = metrics.summary(five(), metrics.Slo.parse("ttft=2s,tpot=100ms,e2e=1.2s"))
    assert s["slo_attainment_ratio"] == pytest.approx(0.2)
    assert s["slo_e2e_s"] == 1.2


def test_sanity_notes() -> None:
    s = summary()
    notes = sanity.notes(s, "roofline", ["a replica was never used"])
    assert notes[0] == "a replica was never used"  # the engine's own, first
    assert any("only 5 requests" in n for n in notes)
    assert any("not measured" in n for n in notes)
    assert not any("idle cluster" in n for n in notes)  # utilisation 31 %
    assert sanity.notes(s, "profile", []) == [n for n in notes[1:] if "not measured" not in n]
    idle = {**s, "utilization_ratio": 0.01, "slo_attainment_ratio": 1.0}
    assert any("SLO attainment 100% on an idle cluster" in n for n in sanity.notes(idle, "x", []))
    dropped = {**s, "requests_finished": 0}
    assert any("every request (5) was dropped" in n for n in sanity.notes(dropped, "x", []))
    many = {**s, "requests": 1000}
    assert not any("requests in the window" in n for n in sanity.notes(many, "x", []))
