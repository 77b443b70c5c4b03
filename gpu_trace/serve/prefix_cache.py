"""A replica's prefix cache: an LRU set over the trace's block hashes.

Why a set of hashes and not KV blocks with reference counts: the spec (docs/serving-
replay.md) places cached blocks in the *free* part of the paged KV pool, so the cache
holds at most the free blocks' worth of trace blocks and is evicted least recently used
first whenever a running request takes memory. A hit is the longest run of the request's
blocks, from its first, that the cache holds (Mooncake's block hashes chain the prefix,
so a hit at position k implies the prefix up to k).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable


class PrefixCache:
    """LRU over block hashes; ``limit`` (in trace blocks) follows the free KV blocks."""

    __slots__ = ("entries", "per_block")

    def __init__(self, trace_block_tokens: int, kv_block_tokens: int) -> None:
        self.entries: OrderedDict[int, None] = OrderedDict()
        self.per_block = max(1, -(-trace_block_tokens // kv_block_tokens))
        """KV blocks one trace block occupies."""

    def trim(self, free_kv_blocks: int) -> None:
        """Evict least recently used entries until the cache fits in the free blocks."""
        limit = max(0, free_kv_blocks) // self.per_block
        entries = self.entries
        while len(entries) > limit:
            entries.popitem(last=False)

    def peek(self, hashes: Iterable[int]) -> int:
        """Leading blocks present, without touching recency (routers look, not use)."""
        entries = self.entries
        n = 0
        for h in hashes:
            if h not in entries:
                break
            n += 1
        return n

    def lookup(self, hashes: Iterable[int]) -> int:
        """Leading blocks present; those become the most recently used."""
        entries = self.entries
        n = 0
        for h in hashes:
            if h not in entries:
                break
            entries.move_to_end(h)
            n += 1
        return n

    def insert(self, hashes: Iterable[int], free_kv_blocks: int) -> None:
        """A finished prefill's blocks become the most recently used, then the cache is
        trimmed to the free blocks.
        """
        entries = self.entries
        for h in hashes:
            entries[h] = None
            entries.move_to_end(h)
        self.trim(free_kv_blocks)
