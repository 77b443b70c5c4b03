"""The special case for a large node alone in its GPU type (gpu_trace/replay/cluster/index.py,
``CapacityIndex.batch``): its free GPUs live in a sorted list, whole-GPU parts on it are
taken and given back in one batch, and its index key moves lazily. Every check compares
with what the per-GPU state says (``free[n][g] == 1000`` marks a wholly free GPU), so the
special case must agree with the plain per-GPU bookkeeping."""

from __future__ import annotations

import random

import pytest

from gpu_trace.replay.cluster import ANY_TYPE, MILLI, ClusterState, parse_spec


def _free_gpus(s: ClusterState, n: int) -> list[int]:
    return [g for g, f in enumerate(s.free[n]) if f == MILLI]


def _consistent(s: ClusterState, n: int) -> None:
    """The sorted list, the whole count and the per-GPU slots tell one story."""
    free = _free_gpus(s, n)
    assert list(s.index.gpus_free[n]) == free
    assert s.whole[n] == len(free)
    assert s.index.whole_total[s.node_type[n]] == len(free)  # alone in its type


def test_one_big_node_is_solo_and_hands_out_its_lowest_free_gpus() -> None:
    s = ClusterState(parse_spec("100x100"))
    assert list(s.index.batch) == [0]
    s.allocate(s.whole_parts(0, 3))  # GPUs 0, 1, 2
    assert s.whole_parts(0, 2) == [(0, 3, MILLI), (0, 4, MILLI)]
    s.release([(0, 1, MILLI)])  # GPU 1 free again: now the lowest
    assert s.whole_parts(0, 2) == [(0, 1, MILLI), (0, 3, MILLI)]
    _consistent(s, 0)
    # 100 GPUs, 2 held (0 and 2): 98 wholly free, no partly used node
    assert s.used_milli == 2 * MILLI
    assert s.frag_milli == 98 * MILLI  # the node is partly used: all its free capacity


def test_parts_out_of_order_and_not_the_lowest_are_taken_exactly() -> None:
    s = ClusterState(parse_spec("100x100"))
    s.allocate([(0, 7, MILLI), (0, 3, MILLI), (0, 50, MILLI)])
    _consistent(s, 0)
    assert s.whole[0] == 97  # 100 - 3
    s.release([(0, 50, MILLI), (0, 7, MILLI)])
    _consistent(s, 0)
    assert s.whole_parts(0, 3) == [(0, 0, MILLI), (0, 1, MILLI), (0, 2, MILLI)]
    assert 3 not in s.index.gpus_free[0]


def test_fractional_parts_on_a_solo_node_go_part_by_part() -> None:
    s = ClusterState(parse_spec("100x100"))
    s.allocate([(0, 4, 250)])  # a quarter of GPU 4: no longer wholly free
    _consistent(s, 0)
    assert s.free[0][4] == 750
    s.allocate([(0, 4, 750), (0, 5, MILLI)])  # mixed: the batch refuses, nothing half-done
    _consistent(s, 0)
    assert s.free[0][4] == 0 and s.free[0][5] == 0
    s.release([(0, 4, 250)])
    s.release([(0, 4, 750), (0, 5, MILLI)])
    _consistent(s, 0)
    assert s.whole[0] == 100 and s.used_milli == 0


def test_a_bad_batch_changes_nothing_before_the_error() -> None:
    s = ClusterState(parse_spec("100x100"))
    s.allocate([(0, 0, MILLI)])
    with pytest.raises(AssertionError, match="over-allocation"):
        s.allocate([(0, 1, MILLI), (0, 1, MILLI)])  # the same GPU twice
    with pytest.raises(AssertionError, match="over-allocation"):
        s.allocate([(0, 2, MILLI), (0, 0, MILLI)])  # GPU 0 is taken
    with pytest.raises(AssertionError, match="beyond capacity"):
        s.release([(0, 0, MILLI), (0, 9, MILLI)])  # GPU 9 was never taken
    # The batch path undid its slot writes before handing over to the per-GPU path,
    # which then raised at the offending part: GPU 1 (first of the duplicate pair) and
    # GPU 2 (before the taken GPU 0) were taken part by part, GPU 0 was released.
    assert s.free[0][0] == MILLI and s.free[0][1] == 0 and s.free[0][2] == 0


def test_the_solo_nodes_index_key_is_current_when_a_query_reads_it() -> None:
    # One 100-GPU V100 node (solo) and eight 8-GPU T4 nodes: a gather over any type
    # lists nodes by wholly free GPUs, most first. After taking 95 V100 GPUs the V100
    # node has 5, fewer than the T4 nodes' 8, so it comes last.
    s = ClusterState(parse_spec("100x100:V100+64x8:T4"))
    assert list(s.index.batch) == [0]  # the T4 nodes are small
    assert s.nodes_by_whole(ANY_TYPE)[0] == (0, 100)
    s.allocate(s.whole_parts(0, 95))
    got = s.nodes_by_whole(ANY_TYPE)
    assert got == [(n, 8) for n in range(1, 9)] + [(0, 5)]
    assert s.whole_free(ANY_TYPE) == 5 + 64
    # consolidate's query: the fullest node with at least 4 wholly free GPUs, V100 only
    v100 = s.spec.type_mask("V100")
    assert s.node_with_whole(4, s.gmax, 1, v100) == 0
    assert s.node_with_whole(6, s.gmax, 1, v100) == -1
    # any type (reads the index): the fullest node with >= 4 is the V100 one (5), with
    # >= 6 the first T4 node (8; a set of small node ids iterates in ascending order)
    assert s.node_with_whole(4, s.gmax, 1, ANY_TYPE) == 0
    assert s.node_with_whole(6, s.gmax, 1, ANY_TYPE) == 1


def test_random_takes_and_gives_keep_the_solo_state_exact() -> None:
    # 400 seeded steps on one 300-GPU node: take the lowest free GPUs (as placements
    # do) or random free ones, give back random held jobs in shuffled order; after each
    # step the list, counts, index and lowest-k query must equal a scan of the slots.
    rng = random.Random(7)
    s = ClusterState(parse_spec("300x300"))
    held: list[list[tuple[int, int, int]]] = []
    for _ in range(400):
        if held and (rng.random() < 0.45 or s.whole[0] < 16):
            parts = held.pop(rng.randrange(len(held)))
            rng.shuffle(parts)
            s.release(parts)
        else:
            k = rng.choice([1, 1, 2, 4, 8, 16])
            if rng.random() < 0.7:
                parts = s.whole_parts(0, k)
            else:
                parts = [(0, g, MILLI) for g in rng.sample(_free_gpus(s, 0), k)]
            s.allocate(parts)
            held.append(list(parts))
        _consistent(s, 0)
        lowest = _free_gpus(s, 0)[:4]
        assert s.whole_parts(0, 4) == [(0, g, MILLI) for g in lowest]
        assert s.used_milli == MILLI * sum(len(p) for p in held)
        assert s.nodes_by_whole(ANY_TYPE) == ([(0, s.whole[0])] if s.whole[0] else [])
