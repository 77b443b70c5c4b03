"""A replica's paged KV cache: capacity, allocation, and the decode-step block demand.

Rules (docs/serving-replay.md, "KV cache"): a prompt of P tokens (a recomputed one
includes the tokens kept) holds ``ceil(P / block)`` blocks from its admission (a
prefix hit's blocks included: they move from the cache, in the free part of the pool,
to the request); a running request of L tokens (prompt + produced) writes KV slot
L - 1 in its next iteration and takes one more block before it when
``(L - 1) % block == 0``. So a decoding request holds ``ceil((L - 1) / block)`` blocks, and which requests need a block
before decode step ``D`` depends only on ``(L - D) mod block``: :class:`DecodeDemand`
counts requests by that phase, so the blocks a batch takes over the next K decode steps
are one periodic array (the macro-step's KV limit), with no per-request work.
"""

from __future__ import annotations

SWAP_BYTES_PER_S = 25e9
"""Host <-> GPU bandwidth of a swap (PCIe 4.0 x16 order), bytes/s (the spec's figure)."""


def blocks_for(tokens: int, block: int) -> int:
    """Blocks holding ``tokens`` tokens."""
    return -(-tokens // block)


def held_blocks(kv_len: int, block: int) -> int:
    """Blocks a request of ``kv_len`` tokens (prompt + tokens produced) holds: the newest
    token's KV is written by the iteration that feeds it, so ``kv_len - 1`` slots are
    filled (vLLM allocates ``ceil(prompt / block)`` for a prompt and a slot per decode
    step; vidur the same, ``vllm_replica_scheduler.py`` at 7d47513).
    """
    return blocks_for(kv_len - 1, block)


def capacity_blocks(kv_capacity_tokens: int, block: int) -> int:
    """Whole blocks in the replica's KV memory."""
    return max(0, kv_capacity_tokens) // block


def swap_seconds(blocks: int, block: int, kv_bytes_per_token: int) -> float:
    """Seconds to move ``blocks`` blocks between GPU and host memory."""
    return blocks * block * kv_bytes_per_token / SWAP_BYTES_PER_S


class KvPool:
    """Block counts of one replica (which blocks is never needed: only how many)."""

    __slots__ = ("capacity", "used")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.used = 0

    @property
    def free(self) -> int:
        """Blocks not held by a running (or prefilling) request."""
        return self.capacity - self.used


class DecodeDemand:
    """Decoding requests counted by KV phase, so block demand per step is a lookup.

    A request with ``L = lbase + D`` tokens (prompt + produced; D: the replica's
    decode-step counter) writes KV slot ``L - 1`` at step D, so it needs a block before
    step D when ``(lbase + D - 1) % block == 0``.
    """

    __slots__ = ("block", "count", "total")

    def __init__(self, block: int) -> None:
        self.block = block
        self.count = [0] * block
        self.total = 0

    def add(self, lbase: int, k: int = 1) -> None:
        """A request joins (k=1) or leaves (k=-1) the decoding batch."""
        self.count[(lbase - 1) % self.block] += k
        self.total += k

    def at(self, step: int) -> int:
        """Blocks the batch takes before decode step ``step``."""
        return self.count[(-step) % self.block]

    def taken(self, step: int, steps: int) -> int:
        """Blocks the batch takes before steps ``step .. step + steps - 1``: every
        ``block`` consecutive steps take one block per request (each phase comes round
        once), the remaining ``r`` steps one per request of the ``r`` phases they reach.
        """
        b = self.block
        full, r = divmod(steps, b)
        count = self.count
        total = full * self.total
        if r:
            # the last r steps s reach phases (-s) % b: a window ending at ``hi``
            hi = (-(step + full * b)) % b
            lo = hi - r + 1
            total += (
                sum(count[lo : hi + 1]) if lo >= 0 else sum(count[: hi + 1]) + sum(count[b + lo :])
            )
        return total

    def steps_within(self, step: int, steps: int, free: int) -> int:
        """The most steps (<= ``steps``) whose blocks fit in ``free`` (0 if the first's
        do not): where a run of decode iterations must stop for memory.
        """
        if self.taken(step, steps) <= free:
            return steps
        lo, hi = 0, steps  # taken(lo) <= free < taken(hi)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self.taken(step, mid) <= free:
                lo = mid
            else:
                hi = mid
        return lo
