"""The free-capacity index that makes every whole-GPU placement query O(log G) on any
cluster shape: thousands of small nodes, or one node of thousands of GPUs.

The allocation state (:mod:`~gpu_trace.replay.cluster.state`) counts each node's wholly
free GPUs; placements ask for "the fullest node that fits", "nodes by wholly free GPUs"
and "the lowest free GPUs of this node". Scanning counts, nodes or a node's GPUs for
those costs O(GPUs per node) or O(node size): fine on 8-GPU nodes, minutes on one
6,500-GPU node. :class:`CapacityIndex` keeps, in step with the state's allocate /
release (:meth:`CapacityIndex.move` once per node whose count changed):

- on clusters of nodes of at most :data:`SMALL_NODE` GPUs, per type t the nodes with
  exactly k wholly free GPUs (``buckets[t][k]``): a scan of these few counts finds the
  first non-empty one;
- per type, one :class:`~gpu_trace.replay.cluster.bitmap.BitIndex` of (count, node)
  keys, ``(gmax - k) * nodes + n``: ascending keys are "most wholly free GPUs first,
  then node index" (the multi-node gather's order, without sorting a bucket), and the
  first key at or after / last key at or before a bound gives the next non-empty count
  above / below it, both in O(log_64 (nodes x GPUs per node)); a node's move between
  counts is one discard and one add;
- per type, the total of wholly free GPUs (O(1) instead of a sum over nodes);
- per node of more than :data:`SMALL_NODE` GPUs, its wholly free GPUs (``gpus_free``:
  the lowest free GPU indices in O(log_64 g) each); smaller nodes are scanned, at most
  :data:`SMALL_NODE` slots.

One shape gets its own representation, invisible to the state's callers: a large node
alone in its GPU type (the PAI simulator's single 6,500-GPU node). Its free GPUs are an
ascending :class:`GpuList` (C slices and memmoves beat the bitmap's Python word walks),
its type's key moves are deferred to the next query that reads them, and it is offered
to the state as a batch node (``batch``): whole GPUs taken or given back on it move its
counts once per job, not once per GPU.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterator, Sequence
from typing import TypeVar

from gpu_trace.replay.cluster.bitmap import BitIndex

T = TypeVar("T")

SMALL_NODE = 64
"""Nodes of at most this many GPUs are scanned for free GPUs (a bounded constant)."""


class GpuList:
    """A large node's wholly free GPUs as an ascending list, with the queries the state
    makes of a :class:`BitIndex` (``add``, ``discard``, ``pick``): its lowest free GPUs
    are a slice, taking them a slice delete, giving one back a ``bisect`` insert (C
    memmoves: O(g) in theory but cheaper than the bitmap's Python-level word walks at
    any realistic size).
    """

    __slots__ = ("items",)

    def __init__(self, size: int) -> None:
        self.items = list(range(size))

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[int]:
        return iter(self.items)

    def __contains__(self, g: int) -> bool:
        lst = self.items
        i = bisect_left(lst, g)
        return i < len(lst) and lst[i] == g

    def add(self, g: int) -> None:
        """Make ``g`` a member (no-op if it is one)."""
        lst = self.items
        i = bisect_left(lst, g)
        if i == len(lst) or lst[i] != g:
            lst.insert(i, g)

    def discard(self, g: int) -> None:
        """Remove ``g`` (no-op if it is not a member)."""
        lst = self.items
        i = bisect_left(lst, g)
        if i < len(lst) and lst[i] == g:
            del lst[i]

    def pick(self, k: int, items: Sequence[T]) -> list[T]:
        """``items[g]`` for the ``k`` lowest members ``g`` (fewer if there are fewer)."""
        lst = self.items
        if k == 1:
            return [items[lst[0]]] if lst else []
        return [items[g] for g in lst[:k]]


class CapacityIndex:
    """The cluster's ordered free-capacity indexes (see the module docstring). The
    cluster calls :meth:`move` when a node's count of wholly free GPUs changes and
    updates ``gpus_free[n]`` when a GPU of a large node becomes (un)wholly free.
    """

    __slots__ = (
        "batch",
        "buckets",
        "gmax",
        "gpus_free",
        "keyed",
        "keys",
        "large",
        "n",
        "node_type",
        "solo",
        "whole",
        "whole_total",
    )

    def __init__(
        self, node_gpus: Sequence[int], node_type: Sequence[int], types: int, gmax: int
    ) -> None:
        self.gmax = gmax
        self.n = n = len(node_gpus)
        self.node_type = list(node_type)
        self.keys = [BitIndex((gmax + 1) * n) for _ in range(types)]
        self.whole_total = [0] * types
        self.buckets: list[list[set[int]]] = [
            [set() for _ in range(gmax + 1)] for _ in range(types if gmax <= SMALL_NODE else 0)
        ]
        """Per type t (only when no node has more than :data:`SMALL_NODE` GPUs): the nodes
        with exactly k wholly free GPUs in ``buckets[t][k]``. The state's placement
        queries scan these few counts for a non-empty one (cheaper than the keys at that
        size); ties within a count go to :meth:`lowest_node`, so their order is unread."""
        for i, (g, t) in enumerate(zip(node_gpus, node_type, strict=True)):
            if self.buckets:
                self.buckets[t][g].add(i)
        self.large = [g > SMALL_NODE for g in node_gpus]
        count = [0] * types
        for t in node_type:
            count[t] += 1
        self.batch: dict[int, GpuList] = {
            i: GpuList(g)
            for i, (g, t) in enumerate(zip(node_gpus, node_type, strict=True))
            if g > SMALL_NODE and count[t] == 1
        }
        """Large nodes alone in their GPU type, with their free-GPU lists: the state may
        take or give back whole GPUs on one of them as one batch and tell the index once
        (:meth:`batch_taken` / :meth:`batch_given`) instead of once per GPU."""
        self.gpus_free: dict[int, BitIndex | GpuList] = {
            i: self.batch[i] if i in self.batch else BitIndex(g, full=True)
            for i, g in enumerate(node_gpus)
            if g > SMALL_NODE
        }
        """Large node -> its wholly free GPUs (a bitmap, or the batch node's list)."""
        per_type = [0] * types
        self.solo = [-1] * types
        """Per type: its node when it has only one, else -1. Such a type's key moves
        are deferred to its next query (:meth:`_sync`): a 6,500-GPU node alone in the
        cluster moves twice per job, and its keys are rarely read."""
        for i, (g, t) in enumerate(zip(node_gpus, node_type, strict=True)):
            self.keys[t].add((gmax - g) * n + i)
            self.whole_total[t] += g
            per_type[t] += 1
            self.solo[t] = i
        self.solo = [node if per_type[t] == 1 else -1 for t, node in enumerate(self.solo)]
        self.whole = [node_gpus[node] if node >= 0 else 0 for node in self.solo]
        """Per solo type: its node's count of wholly free GPUs now."""
        self.keyed = list(self.whole)
        """Per solo type: the count its key in ``keys`` stands for."""

    def batch_taken(self, n: int, parts: Sequence[tuple[int, int, int]], k: int) -> None:
        """Batch node ``n`` lost the ``k`` wholly free GPUs of ``parts`` (each a member
        of its list, once): its list and its type's count (its key moves at the next query).
        The usual batch, the node's lowest free GPUs in order, is one slice delete.
        """
        lst = self.batch[n].items
        t = self.node_type[n]
        self.whole_total[t] -= k
        self.whole[t] -= k
        if k == 1:  # most jobs: one GPU
            g = parts[0][1]
            del lst[0 if lst[0] == g else bisect_left(lst, g)]
            return
        for i, p in enumerate(parts):
            if lst[i] != p[1]:
                break
        else:
            del lst[:k]
            return
        for _, g, _ in parts:
            del lst[bisect_left(lst, g)]

    def batch_given(self, n: int, parts: Sequence[tuple[int, int, int]], k: int) -> None:
        """:meth:`batch_taken` in reverse: the ``k`` GPUs of ``parts`` (none a member)
        are wholly free again.
        """
        lst = self.batch[n].items
        t = self.node_type[n]
        self.whole_total[t] += k
        self.whole[t] += k
        for _, g, _ in parts:
            insort(lst, g)

    def move(self, node: int, t: int, k_old: int, k_new: int) -> None:
        """Node ``node`` of type ``t`` went from ``k_old`` to ``k_new`` wholly free GPUs."""
        self.whole_total[t] += k_new - k_old
        if self.buckets:
            b = self.buckets[t]
            b[k_old].discard(node)
            b[k_new].add(node)
        if self.solo[t] >= 0:
            self.whole[t] = k_new
            return
        self._move_key(node, t, k_old, k_new)

    def _sync(self, types: Sequence[int]) -> None:
        """Bring the keys of solo types among ``types`` up to date (before reading them)."""
        for t in types:
            node = self.solo[t]
            if node >= 0 and self.keyed[t] != self.whole[t]:
                self._move_key(node, t, self.keyed[t], self.whole[t])
                self.keyed[t] = self.whole[t]

    def _move_key(self, node: int, t: int, k_old: int, k_new: int) -> None:
        """Move node ``node``'s key in ``keys[t]`` from count ``k_old`` to ``k_new``."""
        keys = self.keys[t]
        g, n = self.gmax, self.n
        i = (g - k_old) * n + node  # a member: its bit is set
        j = (g - k_new) * n + node  # not a member (a node has one count)
        lv0 = keys.levels[0]
        if i >> 6 == j >> 6:  # one word: it stays non-zero, no upper level changes
            lv0[i >> 6] = lv0[i >> 6] & ~(1 << (i & 63)) | 1 << (j & 63)
            return
        x = lv0[i >> 6] & ~(1 << (i & 63))
        if x:  # the common case, inlined: the word stays non-zero
            lv0[i >> 6] = x
            keys.count -= 1
        else:
            keys.discard(i)
        x = lv0[j >> 6]
        if x:
            lv0[j >> 6] = x | 1 << (j & 63)
            keys.count += 1
        else:
            keys.add(j)

    def first_count(self, types: Sequence[int], lo: int, hi: int, step: int) -> tuple[int, int]:
        """(type, k) of the first non-empty count from ``lo`` towards ``hi`` (inclusive)
        in direction ``step``; among types at the same k, the first in ``types``.
        (-1, -1) if none.
        """
        self._sync(types)
        g, n = self.gmax, self.n
        best_t, best_k = -1, -1
        for t in types:
            if step > 0:  # the smallest k >= lo: the largest key of a count >= lo
                key = self.keys[t].last_upto((g - lo) * n + n - 1)
                k = g - key // n if key >= 0 else -1
                if lo <= k <= hi and (best_k < 0 or k < best_k):
                    best_t, best_k = t, k
            else:  # the largest k <= lo: the smallest key of a count <= lo
                key = self.keys[t].first_from((g - lo) * n)
                k = g - key // n if key >= 0 else -1
                if hi <= k <= lo and k > best_k:
                    best_t, best_k = t, k
        return best_t, best_k

    def node_with_count(self, types: Sequence[int], lo: int, hi: int, step: int) -> int:
        """The lowest-index node of the given types whose count of wholly free GPUs is
        the first non-empty one from ``lo`` towards ``hi`` (inclusive) in direction
        ``step``; -1 if none. A type with one node answers from its count, without
        bringing its deferred key up to date.
        """
        if len(types) == 1:
            node = self.solo[types[0]]
            if node >= 0:
                k = self.whole[types[0]]
                return node if (lo <= k <= hi if step > 0 else hi <= k <= lo) else -1
        t, k = self.first_count(types, lo, hi, step)
        if t < 0:
            return -1
        return self.lowest_node(types, k)

    def lowest_node(self, types: Sequence[int], k: int) -> int:
        """The lowest-index node of the given types with exactly ``k`` wholly free GPUs
        (-1 if none): the documented tie rule among equal nodes, O(types x log G)
        instead of a set's iteration order.
        """
        self._sync(types)
        g, n = self.gmax, self.n
        lo = (g - k) * n
        best = -1
        for t in types:
            key = self.keys[t].first_from(lo)
            if 0 <= key < lo + n and (best < 0 or key - lo < best):
                best = key - lo
        return best

    def by_whole(self, types: Sequence[int]) -> Iterator[tuple[int, int]]:
        """(node, wholly free GPUs) of the given types with any, most free first, then
        by type order, then by node index; lazily, so a gather reads only what it
        takes (the keys are brought up to date now, not at the first item).
        """
        self._sync(types)
        return self._by_whole(types)

    def _by_whole(self, types: Sequence[int]) -> Iterator[tuple[int, int]]:
        g, n = self.gmax, self.n
        k = g
        while k > 0:
            nxt = -1
            for t in types:
                key = self.keys[t].first_from((g - k) * n)
                if key >= 0 and (nxt < 0 or key < nxt):
                    nxt = key
            if nxt < 0:
                return
            k = g - nxt // n
            if k <= 0:
                return
            lo = (g - k) * n
            for t in types:
                idx = self.keys[t]
                key = idx.first_from(lo)
                while 0 <= key < lo + n:
                    yield key - lo, k
                    key = idx.first_from(key + 1)
            k -= 1
