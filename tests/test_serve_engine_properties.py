"""Properties of the serving engine on synthetic traffic: the macro-step equals stepping
one iteration at a time, requests are conserved, the KV cache never holds more blocks
than it has, Little's law links the queue lengths to the waiting times, and the
timeseries adds up to the per-request and per-replica figures.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal
from serve_engine_common import LinearLatency, config, requests, synthetic

from gpu_trace.serve.engine import Engine, build
from gpu_trace.serve.result import ServeResult
from gpu_trace.serve.workload import RequestSet


def sessions(n: int, seed: int = 3, rate: float = 40.0, convs: int = 12) -> RequestSet:
    """``n`` requests of ``convs`` conversations: each turn's prompt repeats its conversation's
    earlier blocks (16-token blocks) and adds 1-4 new ones, so prefixes are shared.
    """
    rng = np.random.default_rng(seed)
    arrival = np.cumsum(rng.exponential(1.0 / rate, n))
    arrival -= arrival[0]
    conv = rng.integers(0, convs, n)
    length = [0] * convs
    blocks: list[list[int]] = []
    prompt: list[int] = []
    for c in conv.tolist():
        length[c] = min(length[c] + int(rng.integers(1, 5)), 40)
        blocks.append([c * 1000 + k for k in range(length[c])])
        prompt.append(16 * length[c] - int(rng.integers(0, 8)))
    output = rng.integers(1, 200, n).tolist()
    return requests(arrival.tolist(), prompt, output, blocks, block_tokens=16)


CASES = [
    ("vllm", "", "recompute", "round-robin"),
    ("vllm", "max_tokens=512,max_seqs=8", "swap", "least-tokens"),
    ("sarathi", "chunk=256", "recompute", "least-tokens"),
    ("sarathi", "chunk=128,max_seqs=16", "swap", "prefix-affinity"),
    ("vllm", "", "recompute", "prefix-affinity"),
]


def run(reqs: RequestSet, *, jump: bool, capacity: int, **kw: object) -> tuple[Engine, ServeResult]:
    lat = LinearLatency(a=0.01, b=1e-4, c=1e-6, capacity_tokens=capacity)
    eng = build(reqs, config(**kw), lat, jump=jump)
    return eng, eng.run()


@pytest.mark.parametrize(("batching", "batch", "preemption", "router"), CASES)
def test_jumping_equals_stepping(batching: str, batch: str, preemption: str, router: str) -> None:
    reqs = sessions(400)
    kw = {
        "replicas": 3,
        "batching": batching,
        "batch": batch,
        "kv_preemption": preemption,
        "router": router,
        "kv_block_tokens": 16,
        "bin_s": 5.0,
    }
    eng_j, jumped = run(reqs, jump=True, capacity=2400, **kw)
    eng_s, stepped = run(reqs, jump=False, capacity=2400, **kw)
    jumped.check()
    # identical per-request times, bit for bit, and identical accounting
    assert_frame_equal(jumped.requests, stepped.requests)
    assert_frame_equal(jumped.timeseries, stepped.timeseries, check_exact=False, rel_tol=1e-9)
    assert_frame_equal(jumped.replicas, stepped.replicas, check_exact=False, rel_tol=1e-9)
    assert jumped.horizon_s == stepped.horizon_s
    # the case is not trivial: memory ran out and a run covered many iterations
    assert int(jumped.requests["preemptions"].sum()) > 0
    assert jumped.replicas["iterations"].sum() > 2 * len(reqs)
    assert eng_j.max_used <= eng_j.capacity and eng_j.max_used == eng_s.max_used


@pytest.mark.parametrize(
    "extra",
    [
        {"disaggregate": "1:2", "link_gbps": 10.0},
        {"disaggregate": "2:1", "link_gbps": 1.0, "batching": "sarathi", "kv_preemption": "swap"},
        {"autoscale": "queue,min=1,max=3,up=2,down=0.5,interval=2", "cold_start_s": 1.0},
        {"autoscale": "utilization,min=2,max=4,up=0.6,down=0.2,interval=3", "cold_start_s": 2.0},
    ],
)
def test_jumping_equals_stepping_on_split_and_scaled_clusters(extra: dict[str, object]) -> None:
    reqs = sessions(400)
    kw = {"router": "least-tokens", "kv_block_tokens": 16, "bin_s": 5.0, **extra}
    _, jumped = run(reqs, jump=True, capacity=2400, **kw)
    _, stepped = run(reqs, jump=False, capacity=2400, **kw)
    jumped.check()
    assert_frame_equal(jumped.requests, stepped.requests)
    assert_frame_equal(jumped.replicas, stepped.replicas, check_exact=False, rel_tol=1e-9)
    assert (jumped.requests["status"] == "finished").all()
    if "disaggregate" in extra:
        assert (jumped.requests["kv_transfer_s"] > 0).any()
    else:
        assert jumped.replicas.height > 1 + int("min=2" in str(extra["autoscale"]))


@pytest.mark.parametrize(("batching", "batch", "preemption", "router"), CASES)
def test_conservation_and_kv_capacity(
    batching: str, batch: str, preemption: str, router: str
) -> None:
    reqs = sessions(600, seed=5)
    # one request needs more than the whole KV: ceil((3,000 + 10) / 16) = 189 > 150 blocks
    reqs = requests(
        [*reqs.arrival_s.tolist(), float(reqs.arrival_s[-1]) + 1.0],
        [*reqs.input_tokens.tolist(), 3000],
        [*reqs.output_tokens.tolist(), 10],
        [*[reqs.blocks(i).tolist() for i in range(len(reqs))], []],
        block_tokens=16,
    )
    eng, result = run(
        reqs,
        jump=True,
        capacity=2400,
        replicas=2,
        batching=batching,
        batch=batch,
        kv_preemption=preemption,
        router=router,
        kv_block_tokens=16,
    )
    req = result.requests
    finished = int((req["status"] == "finished").sum())
    dropped = req.filter(pl.col("status") == "dropped")
    assert finished + dropped.height == len(reqs)
    assert dropped["drop_reason"].to_list() == ["needs 189 KV blocks, the replica holds 150"]
    assert req.filter(pl.col("status") == "finished")["drop_reason"].null_count() == finished
    ts = result.timeseries
    assert eng.max_used <= 150 and eng.max_used >= 140  # it was full
    assert (ts["kv_used_blocks"] <= ts["kv_capacity_blocks"]).all()
    ok = req.filter(pl.col("status") == "finished")
    assert (ok["queue_s"] >= 0).all() and (ok["ttft_s"] >= ok["queue_s"]).all()
    assert (ok["e2e_s"] >= ok["ttft_s"]).all()


def test_waiting_snapshots_and_littles_law() -> None:
    # No preemption (large KV), one replica, busy enough that requests queue.
    reqs = synthetic(3000, seed=2, rate=6.0)
    lat = LinearLatency(a=0.01, b=1e-4, c=1e-7, capacity_tokens=10**7)
    result = build(reqs, config(bin_s=1.0, batch="max_seqs=16"), lat).run()
    req = result.requests
    ts = result.timeseries
    arrival = req["arrival_s"].to_numpy()
    start = (req["arrival_s"] + req["queue_s"]).to_numpy()
    edges = ts["time_s"].to_numpy() + 1.0
    # the bin-end snapshot is exact: arrived before the edge, first computed at or after
    expect = [int(((arrival < e) & (start >= e)).sum()) for e in edges]
    assert ts["waiting"].to_list() == expect
    # Little's law: time-average queue length = arrival rate x mean wait
    horizon = edges[-1]
    mean_waiting = float(ts["waiting"].to_numpy().mean())
    rate = len(reqs) / horizon
    wait = float(req["queue_s"].to_numpy().mean())
    assert wait > 0.05  # requests did queue
    assert mean_waiting == pytest.approx(rate * wait, rel=0.05)


def test_timeseries_adds_up() -> None:
    reqs = synthetic(800, seed=4, rate=10.0)
    lat = LinearLatency(a=0.01, b=1e-4, c=1e-7, capacity_tokens=10**7)
    result = build(reqs, config(replicas=4, router="least-tokens"), lat).run()
    ts, rep, req = result.timeseries, result.replicas, result.requests
    # no preemption, no prefix cache: every prompt computed once, tokens 2..n decoded
    assert int(ts["prefill_tokens"].sum()) == int(req["input_tokens"].sum())
    assert int(ts["decode_tokens"].sum()) == int((req["output_tokens"] - 1).sum())
    by = ts.group_by("replica").agg(pl.col("busy_s").sum(), pl.col("iterations").sum())
    joined = rep.join(by, on="replica", suffix="_ts").sort("replica")
    assert np.allclose(joined["busy_s"], joined["busy_s_ts"])
    assert (joined["iterations"] == joined["iterations_ts"]).all()
    assert int(rep["requests"].sum()) == len(reqs)
    assert (ts["busy_s"] <= 10.0 + 1e-9).all()
    # the run's horizon is the last finish
    assert result.horizon_s == pytest.approx(float(req["finish_s"].to_numpy().max()))


def test_prefix_affinity_raises_the_hit_rate() -> None:
    reqs = sessions(600, seed=7, convs=60)
    hits = {}
    for router in ("round-robin", "prefix-affinity"):
        _, result = run(reqs, jump=True, capacity=10**6, replicas=4, router=router)
        hits[router] = int(result.requests["prefix_hit_tokens"].sum())
    assert hits["prefix-affinity"] > 1.5 * hits["round-robin"] > 0
