"""One serving replica's state: its queue, its batch, its KV pool and prefix cache, the
iteration (or run of decode iterations) in progress, and its per-bin accounting.

Plain slots, no behaviour beyond small queries: the event loop
(:mod:`gpu_trace.serve.engine`) and the replica schedulers
(:mod:`gpu_trace.serve.batching`) change it.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right

from gpu_trace.serve.kv import DecodeDemand, KvPool
from gpu_trace.serve.prefix_cache import PrefixCache


class Replica:
    """One replica (tensor-parallel group) of the serving cluster."""

    __slots__ = (
        "bin_busy",
        "bin_decode",
        "bin_iters",
        "bin_prefill",
        "busy",
        "busy_total",
        "cache",
        "ctx",
        "demand",
        "down_s",
        "draining",
        "fin",
        "first_bin",
        "index",
        "kv",
        "out_tokens",
        "prefilling",
        "queue",
        "requests_done",
        "role",
        "running",
        "seg_c",
        "seg_decode",
        "seg_ends",
        "seg_k",
        "seg_prefills",
        "seg_reserved",
        "seg_step0",
        "seg_t0",
        "snap",
        "start_s",
        "step",
        "up",
        "up_s",
        "version",
    )

    def __init__(
        self, index: int, role: str, capacity: int, block: int, cache: PrefixCache | None
    ) -> None:
        self.index = index
        self.role = role
        self.up = True
        self.draining = False
        self.up_s = 0.0
        self.start_s = 0.0
        """When it was started (before its cold start; 0 for the initial replicas)."""
        self.first_bin = 0
        """The first timeseries bin it exists in."""
        self.busy_total = 0.0
        self.down_s = float("nan")
        self.queue: list[tuple[int, int, int]] = []
        """Heap of (class, key, request): class 0 = preempted (front), 1 = arrived."""
        self.running: list[int] = []
        """Decoding requests, in the order they joined."""
        self.prefilling: list[int] = []
        """Admitted requests whose prompt is partly computed (chunked prefill)."""
        self.fin: list[tuple[int, int]] = []
        """Heap of (decode step of the last token, request); stale entries skipped."""
        self.step = 0
        """Decode steps this replica has run (every decoding request advances by one)."""
        self.ctx = 0
        """KV lengths of the decoding requests, summed."""
        self.demand = DecodeDemand(block)
        self.kv = KvPool(capacity)
        self.cache = cache
        self.out_tokens = 0
        """Prompt tokens not yet computed + output tokens not yet produced (at the
        start of the iteration or decode run in progress)."""
        self.busy = False
        self.version = 0
        self.seg_t0 = 0.0
        self.seg_ends: list[float] = []
        self.seg_k = 0
        self.seg_c = 0
        self.seg_reserved = 0
        """KV blocks the iteration or run in progress reserved at its start."""
        self.seg_step0 = 0
        self.seg_decode = False
        self.seg_prefills: list[tuple[int, int]] = []
        self.requests_done = 0
        self.bin_busy: list[float] = []
        self.bin_iters: list[int] = []
        self.bin_prefill: list[int] = []
        self.bin_decode: list[int] = []
        self.snap = array("q")
        """(running, waiting, KV blocks used) at each bin's end, flat (3 per bin)."""

    def done_steps(self, t: float) -> int:
        """Iterations of the run in progress that ended at or before ``t``."""
        if not self.busy:
            return 0
        return bisect_right(self.seg_ends, t, 0, self.seg_k)

    def outstanding(self, t: float) -> int:
        """Outstanding tokens at ``t`` (least-tokens routing)."""
        if self.busy and self.seg_k > 1:
            k = self.seg_k
            return self.out_tokens - self.seg_c * bisect_right(self.seg_ends, t, 0, k)
        return self.out_tokens

    def used_at(self, t: float) -> int:
        """KV blocks held at ``t`` (a decode run reserves its whole run's blocks at its
        start; those of iterations not started by ``t`` are not held yet).
        """
        used = self.kv.used
        if self.busy and self.seg_k > 1:
            started = min(self.seg_k, 1 + bisect_left(self.seg_ends, t, 0, self.seg_k))
            used += self.demand.taken(self.seg_step0, started) - self.seg_reserved
        return used

    def waiting(self) -> int:
        """Requests queued here (preempted ones included)."""
        return len(self.queue)

    def batch(self) -> int:
        """Requests in the batch (decoding + partly prefilled)."""
        return len(self.running) + len(self.prefilling)

    def has_work(self) -> bool:
        """Whether an idle replica would start an iteration now (queue or batch)."""
        return bool(self.queue or self.running or self.prefilling)
