"""A set of small integers as a hierarchical bitmap (:class:`BitIndex`): ordered queries
(first member >= i, last member <= i) in O(log_64 size) word operations.

The capacity index (:mod:`~gpu_trace.replay.cluster.index`) keeps in these its
(count, node) keys per GPU type and the wholly free GPUs of each large node; the
structure knows nothing of clusters, so it is tested against a plain ``set``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")


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
