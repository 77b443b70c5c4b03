"""The FGD paper's placement policies, its fragmentation measure, its workload
inflation, seeds, and ``replay fidelity``. Every expected value is worked out by hand
in the test from the paper's definitions (Weng et al., ATC'23, sections 3 and 6)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from gpu_trace.cli import app
from gpu_trace.replay.build import build_engine
from gpu_trace.replay.cluster import ClusterSpec, from_groups, parse_spec
from gpu_trace.replay.config import ReplayConfig
from gpu_trace.replay.experiment import UsageError
from gpu_trace.replay.placement.fgd import (
    TaskClasses,
    expected_fragmentation,
    typical_classes,
)
from gpu_trace.replay.seeds import parse_points, parse_seeds
from gpu_trace.replay.simulate import _inflate_paper, replay
from gpu_trace.replay.workload import Workload

T0 = datetime(2024, 1, 1, tzinfo=UTC)
GIB = 1 << 30
runner = CliRunner()


def jobs(rows: list[dict[str, Any]]) -> pl.DataFrame:
    n = len(rows)
    return pl.DataFrame(
        {
            "job_id": [f"j{i}" for i in range(n)],
            "user": ["u"] * n,
            "vc": ["vc"] * n,
            "name": ["job"] * n,
            "submit_time": [T0 + timedelta(seconds=i) for i in range(n)],
            "start_time": [None] * n,
            "run_s": [100.0] * n,
            "gpus": [float(r.get("gpus", 1.0)) for r in rows],
            "gpu_type": [r.get("type") for r in rows],
            "cpus": [r.get("cpus") for r in rows],
            "mem_bytes": [None] * n,
        },
        schema_overrides={
            "start_time": pl.Datetime("us", "UTC"),
            "gpu_type": pl.String,
            "cpus": pl.Float64,
            "mem_bytes": pl.Int64,
        },
    )


def engine(rows: list[dict[str, Any]], spec: ClusterSpec, placement: str, **opts: Any) -> Any:
    """An engine with ``placement`` bound (arrival-only), to set up a state by hand."""
    w = Workload.from_jobs(jobs(rows), cpu_only=True)
    config = ReplayConfig(
        source="fgd",
        scheduler="packing",
        placement=placement,
        placement_options=opts,
        departures=False,
    )
    return build_engine(config, w, spec, record_log=True)


def place(e: Any, j: int) -> Any:
    return e.placement.place(j, e.ngpu[j], e.milli[j], e.mask[j])


# -- the fragmentation measure ------------------------------------------------------------


def test_expected_fragmentation_matches_the_papers_definition() -> None:
    # One node, 4 GPUs free [1.0, 0.5, 0.2, 0.0] GPU, 8 cores free. Task classes:
    #   A: 1 x 0.3 GPU, 2 cores, p = 0.5 -> it fits (GPUs with >= 0.3 free: two);
    #      fragments = free GPU on GPUs below 0.3: 0.2 + 0.0 = 200 milli
    #   B: 1 whole GPU, 4 cores, p = 0.3 -> fits (one wholly free GPU);
    #      fragments = partly free GPUs: 0.5 + 0.2 = 700
    #   C: 2 whole GPUs, 4 cores, p = 0.2 -> cannot run (one whole GPU): all 1,700 free
    # F = 0.5 x 200 + 0.3 x 700 + 0.2 x 1700 = 100 + 210 + 340 = 650 milli-GPU.
    tc = TaskClasses(
        cpu=np.array([2000, 4000, 4000]),
        mem=np.zeros(3, dtype=np.int64),
        k=np.array([1, 1, 2]),
        m=np.array([300, 1000, 1000]),
        mask=np.array([-1, -1, -1]),
        p=np.array([0.5, 0.3, 0.2]),
    )
    free = np.array([[1000, 500, 200, 0]])
    types = np.array([0])
    got = expected_fragmentation(free, np.array([8000]), np.zeros(1, np.int64), types, tc)
    assert got.tolist() == pytest.approx([650.0])
    # with only 3 cores free B no longer fits (CPU): all 1,700 -> 100 + 510 + 340 = 950
    got = expected_fragmentation(free, np.array([3000]), np.zeros(1, np.int64), types, tc)
    assert got.tolist() == pytest.approx([950.0])
    # a class whose GPU model the node does not have: all free GPU is a fragment
    tc2 = TaskClasses(tc.cpu, tc.mem, tc.k, tc.m, np.array([2, -1, -1]), tc.p)  # A: type 1
    got = expected_fragmentation(free, np.array([8000]), np.zeros(1, np.int64), types, tc2)
    assert got.tolist() == pytest.approx([0.5 * 1700 + 210 + 340])


def test_a_cpu_only_class_counts_every_free_gpu_as_a_fragment() -> None:
    # The simulator's measure with CPU-only tasks among the typical classes (its runs'
    # isInvolvedCpuPods=true): for such a class the node's whole free GPU counts, whether
    # its CPU fits (XL) or not (XR). Same node as above (free [1.0, 0.5, 0.2, 0], 8
    # cores); classes A (0.3 GPU, 2 cores, p 0.5) and D (CPU-only, 4 cores, p 0.5):
    #   A fits: 200 fragmented; D: all 1,700 -> 0.5 x 200 + 0.5 x 1700 = 950,
    #   and with 3 cores free (D's CPU no longer fits) still 950.
    tc = TaskClasses(
        cpu=np.array([2000, 4000]),
        mem=np.zeros(2, dtype=np.int64),
        k=np.array([1, 0]),
        m=np.array([300, 1000]),
        mask=np.array([-1, -1]),
        p=np.array([0.5, 0.5]),
    )
    free = np.array([[1000, 500, 200, 0]])
    for cores in (8000, 3000):
        got = expected_fragmentation(
            free, np.array([cores]), np.zeros(1, np.int64), np.array([0]), tc
        )
        assert got.tolist() == pytest.approx([950.0])


def test_fgd_per_shape_measure_equals_the_definition() -> None:
    # FGD evaluates F_n(M) per GPU shape (classes sharing GPUs x share) for speed; on
    # random node states (two GPU models, one class restricted to one of them) it must
    # equal expected_fragmentation over all the classes (CPU-only ones included), and so
    # must the per-GPU deltas of a fractional task.
    rng = np.random.default_rng(7)
    rows = [
        {"gpus": g, "cpus": c}
        for g, c in [(0.5, 4), (0.5, 8), (1.0, 4), (2.0, 16), (0.25, 2), (0, 12), (0, 30)]
        for _ in range(3)
    ] + [{"gpus": 1.0, "cpus": 8, "type": "B"}] * 3  # a class only model B can run
    spec = parse_spec("16x4:A,cpu=32,mem=256G+16x8:B,cpu=64,mem=512G")
    e = engine(rows, spec, "fgd")
    f = e.placement
    assert f.tc.k.tolist().count(0) == 2  # both CPU-only classes are typical
    free = rng.choice([0, 100, 250, 500, 750, 1000], size=(50, 8))
    cpu = rng.integers(0, 64_000, size=50)
    types = rng.integers(0, 2, size=50)
    want = expected_fragmentation(free, cpu, np.zeros(50, np.int64), types, f.tc)
    assert f._frag(free, cpu, types) == pytest.approx(want)
    # a 0.25-GPU, 2-core task on GPU g of each row: the definition on the changed state
    rows_ = np.arange(2)
    f.types = types  # rows 0-1 of this state stand for nodes 0-1
    f.snap_free[:2] = free[:2]
    f.snap_cpu[:2] = cpu[:2] + 2000
    f.ver[:2] += 1
    delta = f._compute(rows_, 1, 250, 2000)
    for r in range(2):
        for g in range(8):
            if free[r, g] < 250:
                assert delta[r, g] == np.inf
                continue
            after = free[r].copy()
            after[g] -= 250
            new = expected_fragmentation(
                after[None], cpu[r : r + 1], np.zeros(1, np.int64), types[r : r + 1], f.tc
            )
            old = expected_fragmentation(
                free[r][None], cpu[r : r + 1] + 2000, np.zeros(1, np.int64), types[r : r + 1], f.tc
            )
            assert delta[r, g] == pytest.approx(float(new[0] - old[0]))


def test_typical_classes_of_the_published_runs_take_one_at_a_time_to_95_pct() -> None:
    # counts 30,20,10,8,8,6,5,4,3,2,2,2 (100 tasks), one class at a time until 95 %:
    # cumulative 30,50,60,68,76,82,87,91,94,96 -> 10 classes (96 tasks), p(first) = 30/96.
    counts = [30, 20, 10, 8, 8, 6, 5, 4, 3, 2, 2, 2]
    milli = np.repeat(np.arange(100, 100 + 12 * 50, 50), counts)
    n = milli.size
    z = np.zeros(n, dtype=np.int64)
    tc = typical_classes(z, z, np.ones(n, dtype=np.int64), milli, np.full(n, -1), 95.0, 1)
    assert tc.m.size == 10 and tc.p[0] == pytest.approx(30 / 96)
    # at 60 %, one at a time: 30,50,60 -> the top 3 (60 tasks), p(first) = 30 / 60
    tc = typical_classes(z, z, np.ones(n, dtype=np.int64), milli, np.full(n, -1), 60.0, 1)
    assert tc.m.size == 3 and tc.p[0] == pytest.approx(0.5)


def test_typical_classes_take_the_popular_ones_ten_at_a_time() -> None:
    # 12 classes (all 1 x share s) with counts 30,20,10,8,8,6,5,4,3,2,2,2 (100 tasks).
    # 60 %: the top 3 already hold 60 %, classes are taken 10 at a time -> the top 10
    # (96 tasks), renormalised: p(first) = 30 / 96. Of the three count-2 classes (shares
    # 550, 600, 650) the largest share comes first, as the simulator sorts equal counts.
    counts = [30, 20, 10, 8, 8, 6, 5, 4, 3, 2, 2, 2]
    milli = np.repeat(np.arange(100, 100 + 12 * 50, 50), counts)
    n = milli.size
    z = np.zeros(n, dtype=np.int64)
    tc = typical_classes(z, z, np.ones(n, dtype=np.int64), milli, np.full(n, -1), 60.0, 10)
    assert sorted(tc.m.tolist()) == [*range(100, 550, 50), 650]
    assert tc.p[0] == pytest.approx(30 / 96)
    assert tc.p.sum() == pytest.approx(1.0)
    # 99 %: 11 classes hold 98 % < 99 % -> the next step of 10 takes all 12: p = 30 / 100
    tc = typical_classes(z, z, np.ones(n, dtype=np.int64), milli, np.full(n, -1), 99.0, 10)
    assert tc.m.size == 12 and tc.p[0] == pytest.approx(0.30)


# -- each policy on a state whose right answer is known ------------------------------------


def test_fgd_scores_the_whole_node_and_picks_the_gpu() -> None:
    # Workload classes: 0.5 GPU (p = 1/2) and 1 whole GPU (p = 1/2). Node 0: GPUs free
    # [600, 1000]; node 1: [500, 1000, 1000]. Task: 0.5 GPU.
    # node 0: F = 0 (0.5 class: no GPU below 500) + 1/2 x 600 (whole class) = 300
    #   GPU0 -> [100, 1000]: 1/2 x 100 + 1/2 x 100 = 100: delta -200
    #   GPU1 -> [600, 500]: no whole GPU left -> whole class: all 1,100: 550: +250
    # node 1: F = 1/2 x 500 = 250
    #   GPU0 -> [0, 1000, 1000]: 0: delta -250   <- the best option
    #   GPU1 -> [500, 500, 1000]: 1/2 x 1000 = 500: +250
    # FGD -> node 1, GPU 0; best-fit (least free GPU after) -> node 0 (1,100 vs 2,000).
    spec = from_groups([(1, 2, "gpu"), (1, 3, "gpu")])
    rows = [{"gpus": 0.5}, {"gpus": 1.0}]
    for name, want in (("fgd", [(1, 0, 500)]), ("best-fit", [(0, 0, 500)])):
        e = engine(rows, spec, name)
        e.state.allocate([(0, 0, 400), (1, 0, 500)])
        assert place(e, 0) == want, name
    # the simulator's integer score int(100 sigmoid(-delta / 1000)): -250 -> 56 beats
    # -200 -> 54 (and +250 -> 43): the same choice
    e = engine(rows, spec, "fgd", scores="integer")
    e.state.allocate([(0, 0, 400), (1, 0, 500)])
    assert place(e, 0) == [(1, 0, 500)]


def test_dot_product_prefers_the_smallest_request_free_product() -> None:
    # Two 1-GPU nodes with 10 cores; node 1 has 8 cores taken. Task: 1 GPU, 2 cores.
    # node 0: (2/10) x (10/10) + (1/1) x (1/1) = 1.20; node 1: 0.2 x 0.2 + 1 = 1.04 -> 1.
    spec = parse_spec("2x1,cpu=10,mem=64G")
    e = engine([{"cpus": 2}], spec, "dot-product")
    e.state.take_res([(1, 0, 1000)], 8000, 0)
    assert place(e, 0) == [(1, 0, 1000)]


def test_gpu_packing_uses_shared_gpus_then_used_nodes_then_idle_ones() -> None:
    # node 0 idle (2 GPUs); node 1: GPU0 has 600 free, GPU1 whole.
    # 0.5 GPU: node 1 can use its partly used GPU0 -> score 100 - 60 / 10 = 94; node 0 is
    #   idle -> 33 - 2 = 31. -> node 1, GPU 0.
    # 1 whole GPU: node 1 is used -> 50 - 1 = 49; node 0 idle 31 -> node 1, GPU 1.
    spec = parse_spec("4x2")
    e = engine([{"gpus": 0.5}, {"gpus": 1.0}], spec, "gpu-packing")
    e.state.allocate([(1, 0, 400)])
    assert place(e, 0) == [(1, 0, 500)]
    assert place(e, 1) == [(1, 1, 1000)]


def test_gpu_clustering_keeps_equal_requests_together() -> None:
    # nodes with 1, 2 and 4 GPUs (largest: 4,000 milli). Jobs in order 0.5, 1, 0.5, 0.5.
    # j0: all idle (tier 1), the fullest (1 - free / 4000) wins: node 0 (0.75).
    # j1 (whole GPU): node 0 has no whole GPU; idle node 1 (0.5) beats idle node 2 (0).
    # j2 (0.5): node 0 runs only 0.5-GPU tasks -> tier 3 -> node 0, GPU 0 again.
    # j3 (0.5): node 0 is full; node 1 runs a different request (tier 0), node 2 is idle
    #   (tier 1) -> node 2.
    spec = from_groups([(1, 1, "gpu"), (1, 2, "gpu"), (1, 4, "gpu")])
    rows = [{"gpus": 0.5}, {"gpus": 1.0}, {"gpus": 0.5}, {"gpus": 0.5}]
    r = replay(
        jobs(rows),
        spec,
        ReplayConfig(source="t", scheduler="packing", placement="clustering", departures=False,
                     inflate_mode="gpu-clones"),
        record_log=True,
    )  # fmt: skip
    got = [parts for _, kind, _, parts in r.engine.log if kind == "start"]
    assert got == [[(0, 0, 500)], [(1, 0, 1000)], [(0, 0, 500)], [(2, 0, 500)]]


def test_gpu_clustering_groups_every_fractional_share_together() -> None:
    # The simulator's affinity tag is "share-gpu" for any fractional request. Two idle
    # 2-GPU nodes; j0 = 0.3 GPU: both tier 1 (idle), equal fill -> node 0, GPU 0.
    # j1 = 0.5 GPU: node 0 runs only share-gpu tasks -> tier 3 -> node 0, on the fullest
    # GPU with room (GPU 0, 700 free). Keyed by the exact share, node 0 would be "other
    # requests" (tier 0) and j1 would go to the idle node 1.
    spec = from_groups([(1, 2, "gpu"), (1, 2, "gpu")])
    rows = [{"gpus": 0.3}, {"gpus": 0.5}]
    r = replay(
        jobs(rows),
        spec,
        ReplayConfig(source="t", scheduler="packing", placement="clustering", departures=False,
                     inflate_mode="gpu-clones"),
        record_log=True,
    )  # fmt: skip
    got = [parts for _, kind, _, parts in r.engine.log if kind == "start"]
    assert got == [[(0, 0, 300)], [(0, 0, 500)]]


def test_best_fit_counts_cpu_on_a_multi_resource_cluster() -> None:
    # node 0: 2 GPUs, 64 cores; node 1: 4 GPUs, 8 cores. Task: 1 GPU, 4 cores.
    # score = 0.5 x CPU left / 64 cores + 0.5 x GPU left / 4 GPUs (the largest node):
    #   node 0: 0.5 x 60/64 + 0.5 x 1/4 = 0.59375; node 1: 0.5 x 4/64 + 0.5 x 3/4 = 0.40625
    # -> node 1. GPU-only best-fit (least GPU left) would take node 0.
    spec = from_groups(
        [(1, 2, "gpu"), (1, 4, "gpu")], resources=[(64_000, 64 * GIB, 0), (8_000, 64 * GIB, 0)]
    )
    assert place(engine([{"cpus": 4}], spec, "best-fit"), 0) == [(1, 0, 1000)]
    assert place(engine([{"cpus": 4}], parse_spec("2x2+4x4"), "best-fit"), 0) == [(0, 0, 1000)]


def test_random_picks_only_feasible_nodes_and_cpu_only_tasks_hold_no_gpu() -> None:
    # a CPU-only task (0 GPUs, 30 cores): only node 1 (a CPU node with 32 cores) has them
    spec = from_groups(
        [(1, 2, "gpu"), (1, 0, "cpu")], resources=[(16_000, 64 * GIB, 0), (32_000, 64 * GIB, 0)]
    )
    for seed in range(5):
        e = engine([{"gpus": 0, "cpus": 30}], spec, "random")
        e.rng = np.random.default_rng(seed)
        assert place(e, 0) == [(1, -1, 0)]
        assert e.try_start(0)
        assert e.state.cpu_free.tolist() == [16_000, 2_000]
        assert e.state.used_milli == 0


def test_ties_follow_a_seeded_node_order_on_multi_resource_clusters() -> None:
    # The published simulator names nodes "<i>-<name>" with i a seeded random
    # permutation and its scheduler keeps the lowest name among equal scores. 8 identical
    # empty nodes, four 1-GPU / 4-core tasks, the only task class: no placement changes
    # any node's fragmentation (FGD score 50 everywhere), so every task goes to the node
    # first in the order, and they pile onto it. Another seed, another order; the same
    # seed, the same choices.
    spec = parse_spec("64x8,cpu=96,mem=512G")
    rows = [{"gpus": 1.0, "cpus": 4}] * 4
    picked = set()
    for seed in range(6):
        cfg = ReplayConfig(
            source="t", scheduler="packing", placement="fgd", departures=False, seed=seed
        )
        r = replay(jobs(rows), spec, cfg, record_log=True)
        a = [parts for _, kind, _, parts in r.engine.log if kind == "start"]
        b = [
            p
            for _, k, _, p in replay(jobs(rows), spec, cfg, record_log=True).engine.log
            if k == "start"
        ]
        assert a == b
        rank = r.engine.placement.rank
        first = int(np.argmin(rank))
        assert [p[0][0] for p in a] == [first] * 4
        assert [p[0][1] for p in a] == [0, 1, 2, 3]  # lowest free GPU index first
        picked.add(first)
    assert len(picked) > 1


def test_best_fit_integer_scores_tie_where_exact_ones_differ() -> None:
    # Nodes A (2 GPUs, 64 cores) and B (2 GPUs, 63 cores); task: 1 GPU, no CPU. Largest
    # node: 64 cores, 2 GPUs. left = 0.5 x CPU left / 64 + 0.5 x GPU left / 2:
    #   A: 0.5 + 0.25 = 0.75 -> int(100 x (1 - 0.75)) = 25
    #   B: 0.5 x 63/64 + 0.25 = 0.7421875 -> int(25.78) = 25: a tie (exact: B is better)
    # exact scores -> B always; integer scores -> the node first in the seeded order.
    spec = from_groups(
        [(1, 2, "gpu"), (1, 2, "gpu")], resources=[(64_000, 64 * GIB, 0), (63_000, 64 * GIB, 0)]
    )
    seen = set()
    for seed in range(8):
        e = engine([{"gpus": 1.0}], spec, "best-fit", scores="exact")
        assert place(e, 0) == [(1, 0, 1000)]
        e = engine([{"gpus": 1.0}], spec, "best-fit")
        e.placement.rank = np.random.default_rng(seed).permutation(2)
        want = int(np.argmin(e.placement.rank))
        assert place(e, 0) == [(want, 0, 1000)]
        seen.add(want)
    assert seen == {0, 1}


# -- workload inflation and seeds ----------------------------------------------------------


def test_paper_inflation_shuffles_and_samples_with_replacement() -> None:
    # 10 pods of 1 GPU + 2 CPU pods, 8 GPUs, target 2.0: arrived GPU demand must reach
    # 16 GPUs: the 10 originals + 6 one-GPU clones (CPU-pod clones add no GPU, so more
    # draws may be needed); pod i arrives at second i.
    rows = [{"gpus": 1.0}] * 10 + [{"gpus": 0, "cpus": 4}] * 2
    frame = jobs(rows)
    out = _inflate_paper(frame, 8, 2.0, seed=3)
    assert out["gpus"].sum() == 16.0
    assert sorted(out["job_id"].head(12).to_list()) == sorted(frame["job_id"].to_list())
    assert out["job_id"].head(12).to_list() != frame["job_id"].to_list()  # shuffled
    base_ids = set(frame["job_id"].to_list())
    assert all(i.split("#clone")[0] in base_ids for i in out["job_id"].to_list())
    gaps = out["submit_time"].diff().drop_nulls().dt.total_seconds().to_list()
    assert gaps == [1] * (out.height - 1)
    again = _inflate_paper(frame, 8, 2.0, seed=3)
    assert again.equals(out)
    assert not _inflate_paper(frame, 8, 2.0, seed=4)["job_id"].equals(out["job_id"])


def test_seed_and_point_syntax() -> None:
    assert parse_seeds("0-9") == list(range(10))
    assert parse_seeds("0-2,7,1") == [0, 1, 2, 7]
    with pytest.raises(UsageError):
        parse_seeds("9-0")
    assert parse_points("1.3") == (1.3, (0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3))
    target, pts = parse_points("0.5:1.4:0.05")
    assert target == 1.4 and len(pts) == 19 and pts[0] == 0.5 and pts[-1] == 1.4
    with pytest.raises(UsageError):
        parse_points("1.4:0.5:0.1")


def test_run_over_seeds_prints_mean_and_spread(openb_store: Path, tmp_path: Path) -> None:
    store = tmp_path / "s"
    import shutil

    shutil.copytree(openb_store, store)
    res = runner.invoke(
        app,
        ["replay", "run", "--source", "openb", "--store", str(store), "--placement", "best-fit",
         "--packing", "--inflate-to", "1.0:1.3:0.3", "--seeds", "0-1", "--gpus", "64x8"],
    )  # fmt: skip
    assert res.exit_code == 0, res.stderr
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("| best-fit")]
    # one row per curve point (1.0 and 1.3 of capacity: arrived_ratio, a ratio that
    # exceeds 1, so a plain number, not a share: docs/metrics.md "display units"), each
    # a mean over 2 seeds
    assert [ln.split("|")[2].strip() for ln in lines] == ["1.00", "1.30"]
    assert all(ln.rstrip("| ").endswith("2") for ln in lines)


# -- replay fidelity --------------------------------------------------------------------


def test_fidelity_skips_checks_without_data_and_exits_0(openb_store: Path) -> None:
    res = runner.invoke(
        app,
        ["replay", "fidelity", "--store", str(openb_store), "--checks", "pai-fifo-sjf,philly-qssf"],
    )  # fmt: skip
    assert res.exit_code == 0, res.stderr
    assert "skipped: no pai2020 jobs in the store" in res.stdout
    assert "skipped: no philly jobs in the store" in res.stdout


def test_fidelity_fgd_point_is_within_tolerance(openb_store: Path) -> None:
    # The judged placements at 130 % on seed 0 (docs/replay.md: the 10-seed means are
    # within 0.5 pp of the published 95.39 / 93.08 / 87.47 %, seed-to-seed sd <= 0.3 pp):
    # each within the 1.5 pp tolerance, and FGD above best-fit above random.
    from gpu_trace.replay.fidelity import fgd_check

    rows = {r.policy: r for r in fgd_check(openb_store, [0], ("fgd", "best-fit", "random"))}
    assert all(r.status == "ok" for r in rows.values()), rows
    assert rows["fgd"].ours > rows["best-fit"].ours > rows["random"].ours  # type: ignore[operator]


def test_fidelity_flags_a_value_out_of_tolerance_and_exits_1(
    openb_store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # random lands near 87.5 % on openb; against a (made-up) published 99 % it is out of
    # the 1.5 pp tolerance: one line naming it, exit 1.
    from gpu_trace.replay import fidelity

    monkeypatch.setattr(fidelity, "FGD_PUBLISHED", {"random": 99.0})
    res = runner.invoke(
        app,
        ["replay", "fidelity", "--store", str(openb_store), "--checks", "fgd-openb-130",
         "--seeds", "0"],
    )  # fmt: skip
    assert res.exit_code == 1
    assert "out of tolerance: fgd-openb-130/random" in res.stderr
    row = next(ln for ln in res.stdout.splitlines() if ln.startswith("| fgd-openb-130 | random "))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert float(cells[3]) == 99.0 and "OUT" in cells


def test_unknown_fidelity_check_is_a_usage_error(openb_store: Path) -> None:
    res = runner.invoke(app, ["replay", "fidelity", "--store", str(openb_store), "--checks", "x"])
    assert res.exit_code == 2
    assert "unknown check 'x'" in res.stderr


def test_fidelity_pai_relation_runs_on_pai_jobs(tmp_path: Path) -> None:
    # 300 synthetic PAI jobs at 1,000 arrivals/min on 6,500 GPUs never queue, so FIFO
    # and SJF have the same mean JCT: a tie, which does not reproduce the published
    # strict SJF (5,988.61 s) < FIFO (7,918 s), so the check says OUT and why.
    from gpu_trace.loaders import LOADERS, ingest
    from gpu_trace.replay.fidelity import pai_check
    from gpu_trace.synth import get_writer

    raw, jobs_only = tmp_path / "raw", tmp_path / "jobs"
    jobs_only.mkdir()
    for f in get_writer("pai2020")(raw, jobs=300, seed=1):
        if f.name.startswith(("pai_job_table", "pai_task_table")):
            f.rename(jobs_only / f.name)  # the job and task tables are all a replay needs
    ingest(LOADERS["pai2020"], jobs_only, tmp_path / "store")
    rows = pai_check(tmp_path / "store")
    assert [(r.policy, r.status, r.published) for r in rows] == [
        ("sjf", "OUT", 5988.61),
        ("fifo", "OUT", 7918.0),
    ]
    assert rows[0].ours == rows[1].ours
    assert rows[0].note.startswith("tie where the published ordering is strict: sjf = fifo")
