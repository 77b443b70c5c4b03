"""Free-capacity indexes that make every whole-GPU placement query O(log G) on any
cluster shape: thousands of small nodes, or one node of thousands of GPUs.

The cluster keeps, per GPU type t, the nodes with exactly k wholly free GPUs in
``buckets[t][k]`` (sets; their iteration order picks among equal nodes, as before).
Scanning k upward for "the fullest node that fits" costs O(GPUs per node), and scanning
a node's GPUs for its free ones O(node size): fine on 8-GPU nodes, minutes on one
6,500-GPU node. :class:`CapacityIndex` adds, kept in step by the cluster's
allocate / release:

- per type, one :class:`BitIndex` of (count, node) keys, ``(gmax - k) * nodes + n``:
  ascending keys are "most wholly free GPUs first, then node index" (the multi-node
  gather's order, without sorting a bucket), and the first key at or after / last key
  at or before a bound gives the next non-empty count above / below it, both in
  O(log_64 (nodes x GPUs per node)); a node's move between counts is one discard and
  one add;
- per type, the total of wholly free GPUs (O(1) instead of a sum over buckets);
- per node of more than :data:`SMALL_NODE` GPUs, a :class:`BitIndex` of its wholly free
  GPUs (the lowest free GPU indices in O(log_64 g) each), or, for such a node alone in
  its GPU type, an ascending list (``listed``; C slices and memmoves beat the bitmap's
  Python word walks there); smaller nodes are scanned, at most :data:`SMALL_NODE` slots.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")

SMALL_NODE = 64
"""Nodes of at most this many GPUs are scanned for free GPUs (a bounded constant)."""


class BitIndex:
    """A set of integers in ``[0, size)`` as a hierarchical bitmap of 64-bit words:
    membership changes and ordered queries (first member >= i, last member <= i) cost
    O(log_64 size) word operations.
    """

    __slots__ = ("count", "levels", "size")

    def __init__(self, size: int, full: bool = False) -> None:
        self.size = size
        full = full and size > 0
        self.count = size if full else 0
        self.levels: list[list[int]] = []
        n = max(size, 1)
        while True:  # level 0 holds the members; level L+1 one bit per non-zero word of L
            words = (n + 63) >> 6
            level = [0] * words
            if full:
                level = [(1 << 64) - 1] * words
                if n & 63:
                    level[-1] = (1 << (n & 63)) - 1
            self.levels.append(level)
            if words == 1:
                break
            n = words

    def __len__(self) -> int:
        return self.count

    def __contains__(self, i: int) -> bool:
        return bool(self.levels[0][i >> 6] >> (i & 63) & 1)

    def add(self, i: int) -> None:
        """Make ``i`` a member (no-op if it is one); O(log_64 size)."""
        lv0 = self.levels[0]
        w = i >> 6
        old = lv0[w]
        bit = 1 << (i & 63)
        if old & bit:
            return
        self.count += 1
        lv0[w] = old | bit
        if not old:  # the word was empty: one call in 64 adds at most
            self.word_filled(w)

    def discard(self, i: int) -> None:
        """Remove ``i`` (no-op if it is not a member); O(log_64 size)."""
        lv0 = self.levels[0]
        w = i >> 6
        old = lv0[w]
        bit = 1 << (i & 63)
        if not old & bit:
            return
        self.count -= 1
        new = old & ~bit
        lv0[w] = new
        if not new:
            self.word_emptied(w)

    def word_filled(self, w: int) -> None:
        """Level-0 word ``w`` went from zero to non-zero (the caller set its bits
        directly, a batch at a time, or through :meth:`add`): mark it in the upper levels.
        """
        for level in self.levels[1:]:
            i = w
            w = i >> 6
            old = level[w]
            level[w] = old | 1 << (i & 63)
            if old:
                return

    def word_emptied(self, w: int) -> None:
        """Level-0 word ``w`` went from non-zero to zero (the caller cleared its bits
        directly, or through :meth:`discard`): unmark it in the upper levels.
        """
        for level in self.levels[1:]:
            i = w
            w = i >> 6
            new = level[w] & ~(1 << (i & 63))
            level[w] = new
            if new:
                return

    def first_from(self, i: int) -> int:
        """The smallest member >= ``i``; -1 if none."""
        if i < 0:
            i = 0
        levels = self.levels
        depth = 0
        for level in levels:
            w = i >> 6
            if w >= len(level):
                return -1
            word = level[w] >> (i & 63)
            if word:
                p = i + ((word & -word).bit_length() - 1)
                while depth:  # down again: the lowest member under bit p
                    depth -= 1
                    x = levels[depth][p]
                    p = (p << 6) | ((x & -x).bit_length() - 1)
                return p
            i = w + 1
            depth += 1
        return -1

    def last_upto(self, i: int) -> int:
        """The largest member <= ``i``; -1 if none."""
        if i >= self.size:
            i = self.size - 1
        levels = self.levels
        depth = 0
        for level in levels:
            if i < 0:
                return -1
            w = i >> 6
            word = level[w] & ((2 << (i & 63)) - 1)
            if word:
                p = (w << 6) | (word.bit_length() - 1)
                while depth:  # down again: the highest member under bit p
                    depth -= 1
                    p = (p << 6) | (levels[depth][p].bit_length() - 1)
                return p
            i = w - 1
            depth += 1
        return -1

    def take(self, k: int) -> list[int]:
        """The ``k`` smallest members (fewer if there are fewer), reading whole words."""
        return self.pick(k, range(self.size))

    def pick(self, k: int, items: Sequence[T]) -> list[T]:
        """``items[i]`` for the ``k`` smallest members ``i`` (fewer if there are fewer),
        reading whole words: no second pass mapping indices to items.
        """
        out: list[T] = []
        lv0 = self.levels[0]
        i = self.first_from(0)
        while i >= 0:  # i starts a word's members: from 0 or a word boundary
            w = i >> 6
            word = lv0[w]
            base = w << 6
            while word:
                low = word & -word
                out.append(items[base | (low.bit_length() - 1)])
                if len(out) == k:
                    return out
                word ^= low
            i = self.first_from(base + 64)
        return out

    def __iter__(self) -> Iterator[int]:
        i = self.first_from(0)
        while i >= 0:
            yield i
            i = self.first_from(i + 1)


class CapacityIndex:
    """The cluster's ordered free-capacity indexes (see the module docstring). The
    cluster calls :meth:`move` when a node's count of wholly free GPUs changes and
    updates ``gpus_free[n]`` when a GPU of a large node becomes (un)wholly free.
    """

    __slots__ = (
        "gmax",
        "gpus_free",
        "keyed",
        "keys",
        "large",
        "listed",
        "n",
        "solo",
        "whole",
        "whole_total",
    )

    def __init__(
        self, node_gpus: Sequence[int], node_type: Sequence[int], types: int, gmax: int
    ) -> None:
        self.gmax = gmax
        self.n = n = len(node_gpus)
        self.keys = [BitIndex((gmax + 1) * n) for _ in range(types)]
        self.whole_total = [0] * types
        self.large = [g > SMALL_NODE for g in node_gpus]
        count = [0] * types
        for t in node_type:
            count[t] += 1
        self.listed: dict[int, list[int]] = {
            i: list(range(g))
            for i, (g, t) in enumerate(zip(node_gpus, node_type, strict=True))
            if g > SMALL_NODE and count[t] == 1
        }
        """A large node alone in its type (the PAI simulator's one 6,500-GPU node) keeps
        its wholly free GPUs in an ascending list instead of a bitmap: its lowest free
        GPUs are a slice, taking them a slice delete, giving one back a ``bisect``
        insert (C memmoves, O(g) in theory but cheaper than the bitmap's Python-level
        word walks at any realistic size)."""
        self.gpus_free: dict[int, BitIndex] = {
            i: BitIndex(g, full=True)
            for i, g in enumerate(node_gpus)
            if g > SMALL_NODE and i not in self.listed
        }
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

    def move(self, node: int, t: int, k_old: int, k_new: int) -> None:
        """Node ``node`` of type ``t`` went from ``k_old`` to ``k_new`` wholly free GPUs."""
        self.whole_total[t] += k_new - k_old
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

    def gpu_whole(self, n: int, g: int, whole: bool) -> None:
        """GPU ``g`` of large node ``n`` became wholly free (or stopped being)."""
        lst = self.listed.get(n)
        if lst is not None:
            i = bisect_left(lst, g)
            if whole and (i == len(lst) or lst[i] != g):
                lst.insert(i, g)
            elif not whole and i < len(lst) and lst[i] == g:
                del lst[i]
            return
        b = self.gpus_free[n]
        if whole:
            b.add(g)
        else:
            b.discard(g)

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

    def whole_gpus(self, n: int, k: int) -> list[int]:
        """The ``k`` lowest-index wholly free GPUs of large node ``n``."""
        lst = self.listed.get(n)
        if lst is not None:
            return lst[:k]
        return self.gpus_free[n].take(k)
