"""Multi-resource cluster model: nodes carry CPU and memory, jobs request them, a job
fits only where GPUs, CPU and memory all fit. Expected values are worked out by hand."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpu_trace.errors import GpuTraceError
from gpu_trace.replay.cluster import UNLIMITED, ClusterSpec, from_groups, load_file, parse_spec
from gpu_trace.replay.config import ReplayConfig
from gpu_trace.replay.simulate import replay, resolve_cluster

T0 = datetime(2024, 1, 1, tzinfo=UTC)
GIB = 1 << 30


def jobs(rows: list[dict[str, Any]]) -> pl.DataFrame:
    """Rows of (t, run_s, gpus, cpus, mem_gib, gpu_type) as canonical jobs."""
    n = len(rows)
    return pl.DataFrame(
        {
            "job_id": [f"j{i}" for i in range(n)],
            "user": ["u"] * n,
            "vc": ["vc"] * n,
            "name": ["job"] * n,
            "submit_time": [T0 + timedelta(seconds=r.get("t", i)) for i, r in enumerate(rows)],
            "start_time": [None] * n,
            "run_s": [float(r.get("run_s", 100.0)) for r in rows],
            "gpus": [float(r.get("gpus", 1.0)) for r in rows],
            "gpu_type": [r.get("type") for r in rows],
            "cpus": [r.get("cpus") for r in rows],
            "mem_bytes": [None if r.get("mem") is None else int(r["mem"] * GIB) for r in rows],
        },
        schema_overrides={
            "start_time": pl.Datetime("us", "UTC"),
            "gpu_type": pl.String,
            "cpus": pl.Float64,
            "mem_bytes": pl.Int64,
        },
    )


def starts(result: Any) -> list[tuple[int, list[tuple[int, int, int]]]]:
    return [(j, parts) for _, kind, j, parts in result.engine.log if kind == "start"]


def run(rows: list[dict[str, Any]], spec: ClusterSpec | str, **kw: Any) -> Any:
    cluster = parse_spec(spec) if isinstance(spec, str) else spec
    return replay(jobs(rows), cluster, ReplayConfig(source="t", **kw), record_log=True)


def test_spec_carries_cpu_and_memory_or_stays_unlimited() -> None:
    plain = parse_spec("16x8")
    assert not plain.multi_resource
    assert plain.node_cpu_milli is None  # CPU / memory: UNLIMITED on every node
    assert int(plain.cpu_np()[0]) == UNLIMITED
    spec = parse_spec("16x8,cpu=96,mem=768GiB+4x4:T4,cpu=32,mem=128G")
    assert spec.multi_resource
    assert spec.node_gpus == (8, 8, 4)
    assert spec.node_cpu_milli == (96_000, 96_000, 32_000)
    assert spec.node_mem_bytes == (768 * GIB, 768 * GIB, 128 * GIB)
    assert spec.describe()["cpu_milli"] == 224_000
    with pytest.raises(GpuTraceError, match="cpu=, mem= or gpumem="):
        parse_spec("16x8,disk=1")


def test_gpus_fit_but_cpu_does_not_so_the_job_goes_elsewhere() -> None:
    # two 4-GPU nodes with 8 cores each. j0 takes 1 GPU + 6 cores -> node 0 (consolidate:
    # fewest wholly free GPUs, ties lowest index). j1 wants 1 GPU + 4 cores: node 0 has
    # 3 GPUs free but only 2 cores -> node 1 although node 0 is the fuller one.
    r = run([{"cpus": 6}, {"cpus": 4}], "8x4,cpu=8,mem=64G")
    assert starts(r) == [(0, [(0, 0, 1000)]), (1, [(1, 0, 1000)])]
    # without CPU requests both consolidate onto node 0 (the old, GPU-only rule)
    r = run([{}, {}], "8x4,cpu=8,mem=64G")
    assert starts(r) == [(0, [(0, 0, 1000)]), (1, [(0, 1, 1000)])]


@pytest.mark.parametrize("placement", ["best-fit", "random", "spread", "fgd", "dot-product"])
def test_every_placement_respects_memory(placement: str) -> None:
    # node 0: 2 GPUs, 16 GiB; node 1: 2 GPUs, 64 GiB. j0 holds 12 GiB of node 0 (the only
    # node it is allowed on: type A). j1 (type any) wants 8 GiB: node 0 has 4 GiB left,
    # so every policy must put it on node 1.
    spec = from_groups(
        [(1, 2, "A"), (1, 2, "B")],
        resources=[(32_000, 16 * GIB, 0), (32_000, 64 * GIB, 0)],
    )
    r = run([{"mem": 12, "type": "A"}, {"mem": 8}], spec, placement=placement)
    got = starts(r)
    assert got[0][1][0][0] == 0
    assert got[1][1][0][0] == 1


def test_job_larger_than_any_node_is_rejected_with_a_reason() -> None:
    r = run([{"cpus": 200}], "8x4,cpu=96,mem=64G")
    assert r.engine.rejected == {
        0: "needs 200 CPUs and 0 GiB on one node; the cluster never has them"
    }
    # larger than a node: 8 GPUs and 200 cores over 4-GPU nodes with 96 cores hold at most
    # floor(96 x 8 / 200) = 3 GPUs each; 8 nodes x 3 = 24 >= 8 -> admitted (and placed)
    r = run([{"gpus": 8, "cpus": 200}], "32x4,cpu=96,mem=64G")
    assert not r.engine.rejected
    # with 2 nodes only 3 + 3 = 6 < 8 GPUs can come with their CPU share -> rejected
    r = run([{"gpus": 8, "cpus": 200}], "8x4,cpu=96,mem=64G")
    assert r.engine.rejected == {
        0: "needs 200 CPUs and 0 GiB on the nodes its GPUs need; the cluster never has them"
    }


def test_trace_without_cpu_replays_as_before() -> None:
    rows = [{"t": 0}, {"t": 1, "gpus": 2}, {"t": 2, "gpus": 0.5}, {"t": 3, "gpus": 4}]
    a = run(rows, "16x4")
    b = run(rows, "16x4,cpu=1,mem=1")  # requests are null -> 0: nothing to refuse
    assert starts(a) == starts(b)
    assert a.engine.log == b.engine.log


def test_multi_node_job_shares_its_cpu_by_gpus_per_node() -> None:
    # 6 GPUs on 4-GPU nodes: 4 on node 0 and 2 on node 1 (gather: most free first).
    # 12 cores split 4:2 -> 8 and 4 cores (rounded up).
    r = run([{"gpus": 6, "cpus": 12}], "8x4,cpu=8,mem=8G")
    assert [p[0] for p in starts(r)[0][1]] == [0, 0, 0, 0, 1, 1]
    st_ = r.engine.state
    # the job finished: everything is back
    assert list(st_.cpu_free) == [8000, 8000]
    # arrival-only: it never departs, so the split stays held
    r = run([{"gpus": 6, "cpus": 12}], "8x4,cpu=8,mem=8G", scheduler="packing", departures=False)
    assert list(r.engine.state.cpu_free) == [0, 4000]


def test_openb_node_list_and_toml_resources(tmp_path: Path) -> None:
    csv = tmp_path / "nodes.csv"
    csv.write_text(
        "sn,cpu_milli,memory_mib,gpu,model\n"
        "n0,32000,131072,0,\n"
        "n1,96000,786432,8,V100M32\n"
        "n2,64000,262144,2,P100\n",
        encoding="utf-8",
    )
    spec = load_file(csv)
    assert spec.node_gpus == (0, 8, 2)  # the CPU node is kept: it holds CPU-only tasks
    assert spec.node_cpu_milli == (32_000, 96_000, 64_000)
    assert spec.node_mem_bytes == (128 * GIB, 768 * GIB, 256 * GIB)
    toml = tmp_path / "c.toml"
    toml.write_text(
        'nodes = [{count = 2, gpus = 8, gpu_type = "A100", cpus = 128, mem = "1TiB"}]\n',
        encoding="utf-8",
    )
    spec = load_file(toml)
    assert spec.node_cpu_milli == (128_000, 128_000)
    assert spec.node_mem_bytes == (1 << 40, 1 << 40)
    bad = tmp_path / "bad.toml"
    bad.write_text('nodes = [{count = 2, gpus = 8, cpus = "many"}]\n', encoding="utf-8")
    with pytest.raises(GpuTraceError, match=r"bad.toml.*nodes\[0\]"):
        load_file(bad)


def test_cluster_from_the_store_machines_has_cpu_and_memory(openb_store: Path) -> None:
    # openb has two inventories with the same 6,212 GPUs: gpu_node (1,213 nodes, 107,018
    # cores; the FGD paper's node list) and all_node (+ 310 CPU-only nodes, 125,514
    # cores). from-trace takes the most GPUs, ties: the fewest machines -> gpu_node.
    spec = resolve_cluster("from-trace", openb_store, "openb")
    assert (spec.nodes, spec.gpus) == (1213, 6212)
    assert spec.node_cpu_milli is not None and sum(spec.node_cpu_milli) == 107_018_000
    spec = resolve_cluster("machines:all_node", openb_store, "openb")
    assert (spec.nodes, spec.gpus) == (1523, 6212)
    assert sum(1 for g in spec.node_gpus if g == 0) == 310
    assert spec.node_cpu_milli is not None and sum(spec.node_cpu_milli) == 125_514_000
    with pytest.raises(GpuTraceError, match="no machines dataset 'x'; known: all_node, gpu_node"):
        resolve_cluster("machines:x", openb_store, "openb")


# -- hypothesis: invariants on every resource -------------------------------------------

job_st = st.fixed_dictionaries(
    {
        "t": st.integers(0, 50),
        "run_s": st.integers(1, 200),
        "gpus": st.sampled_from([0.25, 0.5, 1.0, 2.0, 4.0, 8.0]),
        "cpus": st.one_of(st.none(), st.integers(0, 40)),
        "mem": st.one_of(st.none(), st.integers(0, 200)),
        "type": st.sampled_from([None, "A", "B", "A|B", "C"]),
    }
)


def _check_log(r: Any, rows: list[dict[str, Any]]) -> None:
    """Replay the start/stop log: no node ever holds more GPU, CPU or memory than it
    has, and no job runs on a GPU type its constraint excludes."""
    spec = r.engine.spec
    e = r.engine
    cpu_cap, mem_cap = spec.cpu_np(), spec.mem_np()
    gpu_used = np.zeros((spec.nodes, spec.max_node_gpus), dtype=np.int64)
    cpu_used = np.zeros(spec.nodes, dtype=np.int64)
    mem_used = np.zeros(spec.nodes, dtype=np.int64)
    for _, kind, j, parts in e.log:
        sign = 1 if kind == "start" else -1
        for n, g, m in parts:
            if g >= 0:
                gpu_used[n, g] += sign * m
        for n, c, m in e.state.res_split(parts, e.cpu_req[j], e.mem_req[j]):
            cpu_used[n] += sign * c
            mem_used[n] += sign * m
        assert (gpu_used <= 1000).all()
        assert (cpu_used <= cpu_cap).all() and (mem_used <= mem_cap).all()
        if kind == "start":
            allowed = rows[int(e.w.frame["job_id"][j][1:])]["type"]
            for n, _, _ in parts:
                t = spec.type_names[spec.node_type[n]]
                assert allowed is None or t in allowed.split("|")


PLACEMENTS = ["consolidate", "best-fit", "spread", "random", "fgd", "dot-product", "gpu-packing"]
PLACEMENTS.append("clustering")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.lists(job_st, min_size=1, max_size=25),
    placement=st.sampled_from(PLACEMENTS),
    scheduler=st.sampled_from(["fifo", "sjf", "packing"]),
    seed=st.integers(0, 3),
)
def test_no_node_ever_over_allocates_any_resource(
    rows: list[dict[str, Any]], placement: str, scheduler: str, seed: int
) -> None:
    spec = from_groups(
        [(2, 4, "A"), (1, 8, "B")],
        resources=[(32_000, 128 * GIB, 0), (64_000, 256 * GIB, 0)],
    )
    cfg: dict[str, Any] = {"placement": placement, "scheduler": scheduler, "seed": seed}
    if scheduler == "packing":
        cfg["departures"] = False
    r = run(rows, spec, **cfg)
    _check_log(r, rows)
    again = run(rows, spec, **cfg)
    assert again.engine.log == r.engine.log  # deterministic per seed


def test_multi_node_job_takes_fewer_gpus_where_memory_runs_short() -> None:
    # three 4-GPU nodes with 32 GiB each; a 6-GPU job with 60 GiB holds 10 GiB per GPU,
    # so a node can give at most floor(32 x 6 / 60) = 3 GPUs: 3 on node 0, 3 on node 1
    # (a node's 4 GPUs would need 40 GiB). Admission: 3 + 3 + 3 >= 6, admitted.
    r = run([{"gpus": 6, "mem": 60}], "12x4,cpu=64,mem=32G")
    assert [p[0] for p in starts(r)[0][1]] == [0, 0, 0, 1, 1, 1]
    assert not r.engine.rejected


def test_job_larger_than_its_models_nodes_is_gathered_with_cpu() -> None:
    # node 0: 8 GPUs of model A; nodes 1, 2: 2 GPUs of model B. A 4-GPU job on model B
    # with CPU fits no single B node (2 GPUs), so consolidate gathers 2 + 2 on nodes 1, 2
    # (it used to wait forever: no single node, and no fallback to gathering).
    spec = from_groups(
        [(1, 8, "A"), (2, 2, "B")],
        resources=[(64_000, 64 * GIB, 0), (16_000, 64 * GIB, 0), (16_000, 64 * GIB, 0)],
    )
    r = run([{"gpus": 4, "type": "B", "cpus": 2}], spec)
    assert [p[0] for p in starts(r)[0][1]] == [1, 1, 2, 2]
    assert r.jobs.filter(pl.col("outcome") == "finished").height == 1
