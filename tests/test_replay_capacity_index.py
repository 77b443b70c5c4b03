"""The ordered free-capacity index (gpu_trace/replay/cluster/index.py) against brute
force: every query the placements make answers exactly what a scan over all buckets,
nodes and GPUs answers, on small nodes, multi-type clusters and nodes of thousands of
GPUs."""

from __future__ import annotations

import random

import pytest

from gpu_trace.replay.cluster import ANY_TYPE, MILLI, ClusterState, parse_spec
from gpu_trace.replay.cluster.bitmap import BitIndex
from gpu_trace.replay.cluster.index import SMALL_NODE, GpuList


@pytest.mark.parametrize("size", [1, 63, 64, 65, 4097, 300_000])
def test_bitindex_matches_a_set(size: int) -> None:
    rng = random.Random(size)
    idx = BitIndex(size)
    ref: set[int] = set()
    for step in range(3000):
        i = rng.randrange(size)
        if rng.random() < 0.55:
            idx.add(i)
            ref.add(i)
        else:
            idx.discard(i)
            ref.discard(i)
        q = rng.randrange(-1, size + 1)
        above = [x for x in ref if x >= q]
        below = [x for x in ref if x <= q]
        assert idx.first_from(q) == (min(above) if above else -1)
        assert idx.last_upto(q) == (max(below) if below else -1)
        assert len(idx) == len(ref)
        if step % 300 == 0:
            assert list(idx) == sorted(ref)
            assert idx.take(5) == sorted(ref)[:5]
            assert all((i in idx) == (i in ref) for i in range(0, size, max(1, size // 97)))


def test_gpulist_matches_a_set() -> None:
    # the batch node's free GPUs (a sorted list) answer as the bitmap does: membership,
    # the lowest k as items, no-op add / discard of a member / non-member
    rng = random.Random(5)
    lst, ref = GpuList(300), set(range(300))
    items = [f"gpu{g}" for g in range(300)]
    for _ in range(3000):
        g = rng.randrange(300)
        if rng.random() < 0.5:
            lst.add(g)
            ref.add(g)
        else:
            lst.discard(g)
            ref.discard(g)
        k = rng.choice([1, 2, 8])
        assert lst.pick(k, items) == [items[i] for i in sorted(ref)[:k]]
        assert (g in lst) == (g in ref) and len(lst) == len(ref)
    assert list(lst) == sorted(ref)


def test_bitindex_full_and_empty() -> None:
    full = BitIndex(130, full=True)
    assert len(full) == 130 and list(full) == list(range(130))
    assert full.take(3) == [0, 1, 2] and full.last_upto(10**6) == 129
    empty = BitIndex(0, full=True)
    assert len(empty) == 0 and empty.first_from(0) == -1 and empty.take(4) == []


def brute_node_with_whole(s: ClusterState, lo: int, hi: int, step: int, mask: int) -> int:
    """The documented rule (docs/replay.md): the first count from lo towards hi that any
    allowed node has, and among those nodes the lowest index (not a set's order)."""
    for k in range(lo, hi + step, step):
        nodes = [
            n
            for n in range(len(s.node_gpus))
            if mask >> s.node_type[n] & 1 and s.whole[n] == k and n not in s.down
        ]
        if nodes:
            return min(nodes)
    return -1


def brute_by_whole(s: ClusterState, mask: int) -> list[tuple[int, int]]:
    out = []
    for k in range(s.gmax, 0, -1):
        for t in s.types_of(mask):
            out.extend(
                (n, k) for n in range(len(s.node_gpus)) if s.node_type[n] == t and s.whole[n] == k
            )
    return out


@pytest.mark.parametrize(
    "spec",
    [
        "64x8",
        "40x8:A+300x100:B+20x4:A",
        "2000x1000",
        "1500x1500",
        "700x1",
        "800x8:A+100x4:B",  # > 64 nodes of <= 64 GPUs: first_with_whole reads the index
        "600x8+1000x100",  # > 64 nodes, one larger than 64 GPUs: its vectorized pass
    ],
)
def test_cluster_queries_match_brute_force_after_random_churn(spec: str) -> None:
    s = ClusterState(parse_spec(spec))
    rng = random.Random(spec)
    held: list[list[tuple[int, int, int]]] = []
    masks = [ANY_TYPE, 1, 2, 3]
    for step in range(400):
        if held and (rng.random() < 0.4 or s.used_milli > 0.9 * s.capacity_milli):
            s.release(held.pop(rng.randrange(len(held))))
        else:
            n = rng.randrange(len(s.node_gpus))
            row = s.free[n]
            free = [g for g in range(len(row)) if row[g] > 0]
            if not free:
                continue
            take = rng.sample(free, min(len(free), rng.choice([1, 2, 3, 8, 150])))
            parts = [(n, g, row[g] if rng.random() < 0.7 else max(1, row[g] // 2)) for g in take]
            s.allocate(parts)
            held.append(parts)
        for mask in masks:
            assert s.whole_free(mask) == sum(
                s.whole[n] for n in range(len(s.node_gpus)) if mask >> s.node_type[n] & 1
            )
            for ngpu in (1, 2, 7, s.gmax):
                # Tiresias' yarn: the first node by index with that many GPUs free
                assert s.first_with_whole(ngpu, mask) == next(
                    (
                        n
                        for n in range(len(s.node_gpus))
                        if mask >> s.node_type[n] & 1 and s.whole[n] >= ngpu
                    ),
                    -1,
                )
                assert s.node_with_whole(ngpu, s.gmax, 1, mask) == brute_node_with_whole(
                    s, ngpu, s.gmax, 1, mask
                )
                assert s.node_with_whole(s.gmax, ngpu, -1, mask) == brute_node_with_whole(
                    s, s.gmax, ngpu, -1, mask
                )
        if step % 40 == 0:
            for mask in masks:
                assert s.nodes_by_whole(mask) == brute_by_whole(s, mask)
            for n in rng.sample(range(len(s.node_gpus)), min(5, len(s.node_gpus))):
                lowest = [g for g, f in enumerate(s.free[n]) if f == MILLI]
                for k in (1, 3, 200):
                    assert s.whole_parts(n, k) == [(n, g, MILLI) for g in lowest[:k]]


def test_a_large_node_hands_out_its_lowest_free_gpus() -> None:
    # one node of 26,000 GPUs (quarter-GPU units of 6,500 GPUs), above SMALL_NODE:
    # take GPUs 0-9, give back 3 and 5, take a quarter of 12: the 5 lowest wholly free
    # GPUs are then 3, 5, 10, 11, 13.
    assert SMALL_NODE < 26_000
    s = ClusterState(parse_spec("26000x26000"))
    s.allocate([(0, g, MILLI) for g in range(10)])
    s.release([(0, 3, MILLI), (0, 5, MILLI)])
    s.allocate([(0, 12, 250)])  # a quarter taken: GPU 12 is no longer wholly free
    assert s.whole_parts(0, 5) == [(0, g, MILLI) for g in (3, 5, 10, 11, 13)]
    assert s.whole[0] == s.whole_free(ANY_TYPE) == 26_000 - 8 - 1
    assert s.node_with_whole(25_991, s.gmax, 1, ANY_TYPE) == 0
    assert s.node_with_whole(25_992, s.gmax, 1, ANY_TYPE) == -1
