"""The ``yarn`` placement against the rule of the Tiresias simulator's ``ms_yarn``
(SymbioticLab/Tiresias, ``simulator/switch.py``: ``try_single_node_alloc`` scans the
node list in order and takes the first node with enough free GPUs;
``try_cross_node_alloc`` takes ``num_gpu // gpus_per_node`` wholly free nodes, the first
in the list, plus the first other node with ``num_gpu % gpus_per_node`` free; all or
nothing). Every start and end below is worked out by hand from that rule.

``8x4`` = nodes 0 and 1 of 4 GPUs; ``12x4`` = nodes 0, 1, 2 of 4 GPUs.
"""

from __future__ import annotations

from gpu_trace.replay.policy import names
from tests.test_replay_golden import first_nodes, preemptions, run, times

# (submit s, duration s, GPUs)
ROWS = [(0, 10, 2), (0, 100, 2), (0, 100, 3), (20, 10, 1), (21, 30, 2), (22, 5, 1)]


def test_yarn_is_listed_as_a_placement() -> None:
    assert "yarn" in names("placement")


def test_yarn_strict_fifo_takes_the_first_node_not_the_fullest() -> None:
    # j0 (2) -> node 0, 0..10 (first node that fits); j1 (2) -> node 0 (2 left), 0..100;
    # j2 (3): node 0 full -> node 1, 0..100 (1 left).
    # At 10 j0 ends: node 0 has 2 free, node 1 has 1.
    # j3 (1 GPU) at 20: first node with 1 free is node 0 (consolidate would take the
    # fuller node 1) -> 20..30. Node 0: 1 free, node 1: 1 free.
    # j4 (2) at 21 fits nowhere; strict FIFO holds j5 (1, at 22) behind it.
    # At 30 j3 ends: j4 -> node 0 (2 free), 30..60; j5 -> node 1 (node 0 now full), 30..35.
    result = run(ROWS, "8x4", placement="yarn")
    assert times(result) == {
        "j0": (0, 10),
        "j1": (0, 100),
        "j2": (0, 100),
        "j3": (20, 30),
        "j4": (30, 60),
        "j5": (30, 35),
    }
    assert first_nodes(result) == [[0], [0], [1], [0], [0], [1]]


def test_yarn_skip_fifo_lets_a_small_job_pass_on_the_first_node() -> None:
    # As above up to 21 (j4 waits: node 0 and node 1 have 1 free each).
    # j5 (1 GPU) at 22 skips past j4 and takes the first node with 1 free, node 0:
    # 22..27. At 27 it ends (node 0: 1 free again; j4 still fits nowhere).
    # At 30 j3 ends: node 0 has 2 free -> j4 30..60.
    result = run(ROWS, "8x4", scheduler="fifo-skip", placement="yarn")
    assert times(result) == {
        "j0": (0, 10),
        "j1": (0, 100),
        "j2": (0, 100),
        "j3": (20, 30),
        "j4": (30, 60),
        "j5": (22, 27),
    }
    assert first_nodes(result) == [[0], [0], [1], [0], [0], [0]]


MULTI = [(0, 100, 1), (1, 50, 6), (2, 10, 4), (3, 20, 5)]


def test_yarn_larger_than_a_node_takes_whole_nodes_plus_one_for_the_rest() -> None:
    # 12x4, FIFO. j0 (1) -> node 0 (3 left), 0..100.
    # j1 (6 GPUs) at 1: 6 // 4 = 1 whole free node, the first: node 1; remainder 2 on
    # the first other node with 2 free: node 0 (3 free, before node 2) -> nodes 0 and 1,
    # 1..51 (node 0: 1 free; node 1: 0).
    # j2 (4) at 2: first node with 4 free: node 2, 2..12.
    # j3 (5) at 3: needs 1 whole free node: none until 12. At 12 j2 ends: node 2 is the
    # whole node; remainder 1 on the first other node with 1 free: node 0 ->
    # nodes 0 and 2, 12..32.
    result = run(MULTI, "12x4", placement="yarn")
    assert times(result) == {"j0": (0, 100), "j1": (1, 51), "j2": (2, 12), "j3": (12, 32)}
    assert first_nodes(result) == [[0], [0, 1], [2], [0, 2]]


def test_yarn_multi_node_gpu_counts_per_node() -> None:
    # j1's 6 GPUs: all 4 of node 1 and 2 of node 0 (the first GPUs free there: 1 and 2,
    # since j0 holds GPU 0).
    result = run(MULTI, "12x4", placement="yarn")
    starts = {j: parts for _, kind, j, parts in result.engine.log if kind == "start"}
    assert sorted((n, g) for n, g, _ in starts[1]) == [(0, 1), (0, 2)] + [(1, g) for g in range(4)]


def test_yarn_fractional_first_node_fullest_gpu() -> None:
    # 8x4, FIFO, all jobs 100 s at 0 (no job ends in between):
    # j0 (0.5 GPU): node 0, every GPU has 1000 milli free -> GPU 0 (first) -> 500 left.
    # j1 (0.5): node 0 is the first node with room; its fullest GPU with room is GPU 0
    # (500) -> 0 left. j2 (0.3): node 0 again, GPU 0 full, GPUs 1-3 equal -> GPU 1.
    # j3 (4 GPUs): node 0 has only 2 wholly free GPUs -> node 1, GPUs 0-3.
    result = run(
        [(0, 100, 0.5), (0, 100, 0.5), (0, 100, 0.3), (0, 100, 4)], "8x4", placement="yarn"
    )
    starts = {j: parts for _, kind, j, parts in result.engine.log if kind == "start"}
    assert starts[0] == [(0, 0, 500)]
    assert starts[1] == [(0, 0, 500)]
    assert starts[2] == [(0, 1, 300)]
    assert sorted(starts[3]) == [(1, g, 1000) for g in range(4)]


def test_yarn_multi_node_needs_each_nodes_cpu_share() -> None:
    # 12x4 with 8 cores per node, FIFO, both jobs 100 s at 0.
    # j0 (1 GPU, 6 cores) -> node 0 (3 GPUs, 2 cores left).
    # j1 (6 GPUs, 12 cores): one whole free node, the first: node 1, holding 4/6 of the
    # cores = 8 (it has 8). The remainder (2 GPUs, 4 cores): node 0 has 3 GPUs free but
    # only 2 cores, so the first other node that has both is node 2.
    import polars as pl

    from gpu_trace.replay import ReplayConfig, replay
    from gpu_trace.replay.cluster import parse_spec
    from tests.replay_frames import jobs_frame

    frame = jobs_frame([(0, 100, 1), (0, 100, 6)]).with_columns(pl.Series("cpus", [6.0, 12.0]))
    cfg = ReplayConfig(source="t", placement="yarn", estimator="oracle")
    result = replay(frame, parse_spec("12x4,cpu=8"), cfg, record_log=True)
    assert first_nodes(result) == [[0], [1, 2]]
    assert times(result) == {"j0": (0, 100), "j1": (0, 100)}


def test_yarn_with_srtf_preempts_one_victim_and_restarts_it_on_the_first_node() -> None:
    # 8x4, SRTF (shortest remaining time first, preemptive), oracle durations.
    # j0 (2 GPUs, 100 s) at 0 -> node 0 (first fit), 0..100.
    # j1 (3, 200) at 0: node 0 has 2 free -> node 1 (1 left), 0..
    # j2 (2, 20) at 10: node 0 has 2 free -> node 0, 10..30, no preemption needed.
    # j3 (3, 10) at 15: free: node 0 none, node 1 one. Remaining: j0 85, j1 185, j2 15,
    # j3 10 (the shortest): it preempts the longest-remaining job, j1, which frees
    # node 1 (4 free) and is enough, so only j1 stops (minimal victims). yarn: first
    # node with 3 free = node 1 -> j3 15..25.
    # At 25 j3 ends; j1 (185 left) restarts on the first node with 3 free: node 0 holds
    # j0 + j2 (0 free) -> node 1, 25..210. j2 ends 30, j0 100.
    rows = [(0, 100, 2), (0, 200, 3), (10, 20, 2), (15, 10, 3)]
    result = run(rows, "8x4", scheduler="srtf", placement="yarn")
    assert times(result) == {
        "j0": (0, 100),
        "j1": (0, 210),
        "j2": (10, 30),
        "j3": (15, 25),
    }
    assert first_nodes(result) == [[0], [1], [0], [1]]
    assert preemptions(result) == {"j0": 0, "j1": 1, "j2": 0, "j3": 0}
    restarts = [(t, j, sorted({p[0] for p in parts})) for t, k, j, parts in result.engine.log
                if k == "start" and j == 1]  # fmt: skip
    assert restarts == [(0, 1, [1]), (25, 1, [1])]


def test_yarn_with_tiresias_defaults_demotes_preempts_and_orders_by_queue_entry() -> None:
    # 8x4, the `tiresias` preset: the Tiresias simulator's defaults (2D-LAS on attained
    # GPU-seconds, queue limits 3,250 and 7,200, 3 queues, no starvation rule;
    # SymbioticLab/Tiresias simulator/run_sim.py dlas_sim_jobs), yarn placement.
    # j0 (4 GPUs, 2000 s) at 0 -> node 0. j1 (4, 3000) at 50 -> node 1 (first fit).
    # j2 (4, 500) at 100: no free GPU; j0 and j1 are in queue 0 like j2 and keep their
    #   GPUs against a waiting job of their own queue: j2 waits.
    # 812.5: j0 reaches 4 x 812.5 = 3,250 GPU-s -> queue 1. j2 (queue 0) now outranks
    #   it: j0 stops, j2 takes node 0, 812.5..1312.5.
    # 862.5: j1 reaches 4 x 812.5 = 3,250 -> queue 1, entering it after j0 (812.5):
    #   within a queue the earlier entry goes first, and a job demoted at this instant
    #   does not keep its GPUs -> j1 stops, j0 restarts on node 1 with 2000 - 812.5 =
    #   1,187.5 s left: 862.5..2050.
    # 1312.5: j2 ends (2,000 GPU-s, still queue 0); j1 (3000 - 812.5 = 2,187.5 s left)
    #   takes node 0: 1312.5..3500. (j0 reaches 7,200 at 1850 and j1 at 2300: queue 2,
    #   with no one waiting.)
    rows = [(0, 2000, 4), (50, 3000, 4), (100, 500, 4)]
    result = run(rows, "8x4", scheduler="tiresias", placement="yarn")
    assert times(result) == {"j0": (0, 2050), "j1": (50, 3500), "j2": (812.5, 1312.5)}
    assert first_nodes(result) == [[0], [1], [0]]
    assert preemptions(result) == {"j0": 1, "j1": 1, "j2": 0}
    events = [(t, k, j) for t, k, j, _ in result.engine.log]
    assert events == [
        (0, "start", 0), (50, "start", 1), (812.5, "stop", 0), (812.5, "start", 2),
        (862.5, "stop", 1), (862.5, "start", 0), (1312.5, "stop", 2), (1312.5, "start", 1),
        (2050, "stop", 0), (3500, "stop", 1),
    ]  # fmt: skip
