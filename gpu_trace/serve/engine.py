"""The serving replay's event loop: requests through routers, replica queues, batched
iterations and a paged KV cache, in simulated time.

Events (one heap keyed ``(time, kind, replica, sequence)``, the replay kernel's
discipline, so one instant is processed in a fixed order): (1) iteration ends, replica
index order; (2) KV transfers that complete; (3) cold starts; (4) autoscaler ticks;
(5) arrivals, input order (read from the sorted arrival array, never pushed); (6) every
idle replica with work starts its next iteration, replica index order. No randomness but
the cold starts drawn from a latency file (seeded: :mod:`gpu_trace.serve.cold_start`).

The macro-step (why a month of requests replays in seconds): between events that change
a replica's batch, a decode-only batch is constant: the same requests each produce one
token per iteration and their KV lengths grow by one. So the engine plans the whole run
of decode iterations up to the first of (a) the step at which a request produces its
last token, (b) the step at which the batch needs a KV block it cannot get (computed
from the requests' KV phases, :class:`~gpu_trace.serve.kv.DecodeDemand`), with one
vectorized :meth:`LatencyModel.decode_steps_s` call and one ``cumsum``; an arrival
routed to that replica cuts the run at the first iteration that ends at or after it
(a ``bisect``). Times are summed sequentially from the run's start, exactly as stepping
one iteration at a time does: ``jump=False`` gives identical per-request times.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, Protocol

import numpy as np

from gpu_trace.errors import UsageError
from gpu_trace.replay import policy as registry
from gpu_trace.replay.kernel import job_table
from gpu_trace.serve import kv as kvmod
from gpu_trace.serve.autoscale import Autoscale, decide, parse_autoscale
from gpu_trace.serve.cold_start import ColdStarts
from gpu_trace.serve.config import ServeConfig, parse_disaggregate, parse_pairs
from gpu_trace.serve.latency.base import IterationShape, LatencyModel
from gpu_trace.serve.prefix_cache import PrefixCache
from gpu_trace.serve.replica import Replica
from gpu_trace.serve.request_table import RequestColumns
from gpu_trace.serve.result import (
    ServeResult,
)
from gpu_trace.serve.routing.least_tokens import least_loaded
from gpu_trace.serve.workload import RequestSet
from gpu_trace.values import unknown

INF = math.inf
ITER_END = 0
"""Heap event kinds, in the spec's order at one instant."""
TRANSFER = 1
COLD_START = 2
TICK = 3

NEW, QUEUED, PREFILLING, DECODING, DONE, DROPPED, SWAPPED, KV_ARRIVED, TRANSFERRING = range(9)
"""Request states (:attr:`RequestColumns.state`). KV_ARRIVED: its KV came from a prefill
replica and it waits in a decode replica's queue; TRANSFERRING: on the link."""

MAX_RUN = 1 << 16
"""Longest run of decode iterations planned at once (bounds one array)."""
SMALL_RUN = 48
"""Runs up to this long are summed in Python (cheaper than numpy's set-up)."""


class Batching(Protocol):
    """A replica scheduler (plugin kind ``batching``): starts a replica's next iteration."""

    def start(self, eng: Engine, rep: Replica, t: float) -> bool:
        """Start an iteration on idle ``rep`` at ``t`` if it has work; whether it did."""
        ...


class Router(Protocol):
    """A router (plugin kind ``router``): the replica an arriving request goes to."""

    def choose(self, eng: Engine, i: int, t: float, replicas: list[Replica]) -> Replica:
        """One of ``replicas`` (the routable ones, index order) for request ``i``."""
        ...


@dataclass(frozen=True)
class QueueOrder:
    """How a replica's queue is ordered (``ServeConfig.order``)."""

    name: str

    def key(self, output_tokens: int, i: int) -> int:
        """Sort key of an arrived request (lower first; ties impossible: ``i`` breaks)."""
        if self.name == "spf":
            return output_tokens
        return i


ORDERS = ("fcfs", "priority", "spf")


class Engine(RequestColumns):
    """One serving replay (build with :func:`build`, run with :meth:`run`)."""

    def __init__(
        self,
        requests: RequestSet,
        config: ServeConfig,
        latency: LatencyModel,
        batching: Batching,
        router: Router,
        *,
        jump: bool = True,
    ) -> None:
        job_table.fill(self, requests, None, table=RequestColumns)
        self.req = requests
        self.config = config
        self.latency = latency
        self.batching = batching
        self.router = router
        self.jump = jump
        self.decode_ends: Any = getattr(latency, "decode_ends", None)
        """The model's exact fast path for a run's end times (the roofline's), if any."""
        self.iteration_of: Any = getattr(latency, "iteration_of", None)
        """Its exact fast path for one iteration (no IterationShape), if any."""
        self.block = config.kv_block_tokens
        self.capacity = kvmod.capacity_blocks(
            latency.kv_capacity_tokens(config.memory_utilization), self.block
        )
        self.swap = config.kv_preemption == "swap"
        if config.kv_preemption not in ("recompute", "swap"):
            msg = f"--kv-preemption: {config.kv_preemption!r} is not recompute or swap"
            raise UsageError(msg)
        if config.order not in ORDERS:
            what = "queue order"
            raise unknown(what, config.order, ORDERS)
        self.order = QueueOrder(config.order)
        self.use_cache = bool(config.prefix_cache and requests.has_blocks)
        self.bin_s = config.bin_s
        self.kv_bytes = latency.model.kv_bytes_per_token
        self.heap: list[tuple[float, int, int, int, int]] = []
        self.seq = 0
        self.preempt_seq = 0
        self.replicas: list[Replica] = []
        self.snapped = 0
        self.scale: Autoscale | None = parse_autoscale(config.autoscale, config.replicas)
        prefill, decode = parse_disaggregate(config.disaggregate)
        if prefill and self.scale is not None:
            msg = "--autoscale with --disaggregate is not supported (scale one pool)"
            raise UsageError(msg)
        if prefill:
            for _ in range(prefill):
                self.add_replica("prefill")
            for _ in range(decode):
                self.add_replica("decode")
        else:
            for _ in range(self.scale.min if self.scale else config.replicas):
                self.add_replica("mixed")
        self.link_bytes_per_s = config.link_gbps * 1e9 / 8
        self.transfers = 0
        """KV transfers on the links now."""
        self.busy_mark: list[float] = []
        """Each replica's busy seconds at the last autoscaler tick."""
        self._next_arrival = 0
        self._routable: list[Replica] | None = None
        self.drop_reason: dict[int, str] = {}
        self.notes: list[str] = []
        self.horizon = 0.0
        self.max_used = 0
        self.cold_starts: ColdStarts | None = None
        """Each scale-up's delay (drawn only when the autoscaler starts a replica)."""
        if self.scale is not None:
            self.cold_starts = ColdStarts(config.cold_start_s, config.seed)
            self._push(self.scale.interval_s, TICK, 0, 0)

    # ---- set-up -------------------------------------------------------------------

    def add_replica(self, role: str) -> Replica:
        """A new (up) replica with an empty KV pool."""
        cache = (
            PrefixCache(self.req.block_tokens or self.block, self.block) if self.use_cache else None
        )
        rep = Replica(len(self.replicas), role, self.capacity, self.block, cache)
        rep.first_bin = self.snapped
        self.replicas.append(rep)
        self._routable = None
        return rep

    # ---- queue and KV helpers the replica schedulers call ----------------------------

    def front(self, rep: Replica) -> int:
        """The request at the head of ``rep``'s queue (-1: empty)."""
        return rep.queue[0][2] if rep.queue else -1

    def admission(self, rep: Replica, i: int) -> tuple[int, int]:
        """(KV blocks request ``i`` holds if admitted now, prompt tokens a prefix hit
        covers), without changing anything. A hit saves computing those tokens, not
        memory: the cached blocks it uses leave the free part of the pool (where the
        cache lives) for the request, the rest are allocated, so the request holds
        ``ceil(prompt / block)`` blocks either way (vLLM's allocation of a prompt).
        """
        hit = 0
        cache = rep.cache
        if cache is not None and cache.entries:
            blocks = self.req.blocks(i)
            n = cache.peek(blocks.tolist())
            if n:
                hit = min(n * self.req.block_tokens, self.prompt[i] - 1)
                hit = max(hit, 0)
        need = kvmod.blocks_for(self.target[i], self.block)
        return need, hit

    def admit(self, rep: Replica, i: int, t: float, need: int, hit: int) -> None:
        """Move the queue's head ``i`` into the batch: take its blocks, start its prompt
        (after the cached part).
        """
        heapq.heappop(rep.queue)
        if rep.cache is not None and hit:
            rep.cache.lookup(self.req.blocks(i).tolist())
        self.state[i] = PREFILLING
        self.computed[i] = hit
        self.held[i] = need
        rep.prefilling.append(i)
        if self.first_sched[i] == INF:
            self.first_sched[i] = t
            self.hit_tokens[i] = hit
            self.prefill_replica[i] = rep.index
        rep.out_tokens -= hit
        rep.kv.used += need
        self._track(rep)
        if rep.cache is not None:
            rep.cache.trim(rep.kv.free)

    def swap_in(self, rep: Replica, i: int) -> float:
        """Bring swapped-out request ``i`` (the queue's head) back into the decoding
        batch; the seconds the copy takes.
        """
        heapq.heappop(rep.queue)
        blocks = self.held[i]
        rep.kv.used += blocks
        self._track(rep)
        if rep.cache is not None:
            rep.cache.trim(rep.kv.free)
        arrived = self.state[i] == KV_ARRIVED
        self._join_decode(rep, i, self.prompt[i] + self.generated[i])
        return 0.0 if arrived else kvmod.swap_seconds(blocks, self.block, self.kv_bytes)

    def _track(self, rep: Replica) -> None:
        used = rep.kv.used
        if used > self.max_used:
            self.max_used = used
        assert used <= rep.kv.capacity, "KV over capacity"

    def _join_decode(self, rep: Replica, i: int, kv_len: int) -> None:
        """``i`` (KV length ``kv_len``) decodes from the replica's next step on."""
        lbase = kv_len - rep.step
        self.lbase[i] = lbase
        self.state[i] = DECODING
        rep.demand.add(lbase)
        rep.ctx += kv_len
        fin = rep.step + self.output[i] - self.generated[i]
        self.fin_step[i] = fin
        heapq.heappush(rep.fin, (fin, i))
        rep.running.append(i)

    def make_room(self, rep: Replica, t: float) -> float:
        """Preempt the last-arrived requests of the batch until the decoding requests'
        blocks for the next step fit (vLLM's policy); seconds of swap-out to add to the
        iteration.
        """
        extra = 0.0
        while rep.running and rep.demand.at(rep.step) > rep.kv.free:
            victim = max(max(rep.running), max(rep.prefilling, default=-1))
            extra += self.preempt(rep, victim)
        return extra

    def preempt(self, rep: Replica, i: int) -> float:
        """Evict ``i`` from the batch (recompute: to the queue's front, its prompt and
        the tokens kept recomputed at its next admission; swap: its blocks copied to
        host memory). Seconds of copying.
        """
        self.preemptions[i] += 1
        self.preempt_seq += 1
        extra = 0.0
        if self.state[i] == DECODING:
            kv_len = self.lbase[i] + rep.step
            rep.kv.used -= kvmod.held_blocks(kv_len, self.block)
            rep.running.remove(i)
            rep.demand.add(self.lbase[i], -1)
            rep.ctx -= kv_len
            self.generated[i] = kv_len - self.prompt[i]
            if self.swap:
                self.state[i] = SWAPPED
                self.held[i] = kvmod.held_blocks(kv_len, self.block)
                extra = kvmod.swap_seconds(self.held[i], self.block, self.kv_bytes)
            else:
                self.target[i] = self.prompt[i] + self.generated[i]
                rep.out_tokens += self.target[i]
        else:  # partly prefilled: its chunks are lost
            rep.kv.used -= self.held[i]
            rep.prefilling.remove(i)
            rep.out_tokens += self.computed[i]
        if self.state[i] != SWAPPED:
            self.state[i] = QUEUED
            self.computed[i] = 0
            self.held[i] = 0
        heapq.heappush(rep.queue, (0, -self.preempt_seq, i))
        return extra

    # ---- starting iterations --------------------------------------------------------

    def reserve_step(self, rep: Replica) -> int:
        """Take the blocks the decoding requests need before the next step (a mixed
        iteration takes them before admitting prompts); how many.
        """
        need = rep.demand.at(rep.step) if rep.running else 0
        rep.kv.used += need
        self._track(rep)
        return need

    def run_single(
        self,
        rep: Replica,
        t: float,
        prefills: list[tuple[int, int]],
        extra: float = 0.0,
        reserved: int = 0,
    ) -> None:
        """Start one iteration: prompt chunks ``prefills`` (request, tokens) plus, when
        the batch has decoding requests and the scheduler mixes them in (sarathi), one
        token each. vllm passes prefill-only batches (its ``running`` waits).
        """
        decode = bool(rep.running) and getattr(self.batching, "mixes", False)
        c = len(rep.running) if decode else 0
        need = reserved
        if self.iteration_of is not None:
            dt = self.iteration_of(prefills, self.computed, c, rep.ctx if decode else 0)
        else:
            shape = IterationShape(
                prefill_tokens=tuple(tok for _, tok in prefills),
                prefill_context=tuple(self.computed[i] for i, _ in prefills),
                decode_count=c,
                decode_context_sum=rep.ctx if decode else 0,
            )
            dt = self.latency.iteration_s(shape)
        dt += extra
        if need and rep.cache is not None:
            rep.cache.trim(rep.kv.free)
        self._begin(rep, t, [t + dt], 1, c, need, decode, prefills)

    def run_decode(self, rep: Replica, t: float, extra: float = 0.0) -> bool:
        """Start a run of decode-only iterations of the whole batch (one iteration when
        jumping is off or a swap copy is added); False when nothing is left to decode.
        """
        demand, kv = rep.demand, rep.kv
        if demand.count[(-rep.step) % demand.block] > kv.capacity - kv.used:
            extra += self.make_room(rep, t)
        c = len(rep.running)
        if not c:
            return False
        fin = rep.fin
        state, fin_step, at, r = self.state, self.fin_step, self.at, rep.index
        while True:
            top, j = fin[0]
            if state[j] == DECODING and fin_step[j] == top and at[j] == r:
                break
            heapq.heappop(fin)
        step = rep.step
        steps = top - step
        if not self.jump or extra or steps == 1:
            k = 1
            reserve = demand.count[(-step) % demand.block]
        else:
            k = steps if steps < MAX_RUN else MAX_RUN
            reserve = demand.taken(step, k)
            free = kv.capacity - kv.used
            if reserve > free:
                k = max(1, demand.steps_within(step, k, free))
                reserve = demand.taken(step, k)
        if self.decode_ends is not None and not extra:
            ends = self.decode_ends(c, rep.ctx, k, t)
        else:
            ends = self._sum_steps(c, rep.ctx, k, t, extra)
        used = kv.used = kv.used + reserve
        if used > self.max_used:  # _track, inline
            self.max_used = used
        assert used <= kv.capacity, "KV over capacity"
        if k == 1 and rep.cache is not None:
            rep.cache.trim(kv.capacity - used)
        self._begin(rep, t, ends, k, c, reserve, True, [])
        return True

    def _sum_steps(self, c: int, ctx: int, k: int, t: float, extra: float) -> list[float]:
        """End times of ``k`` decode steps from ``t``, summed sequentially (any model;
        ``extra``, a swap copy's seconds, only with ``k == 1``).
        """
        if k == 1:
            return [t + (float(self.latency.decode_steps_s(c, ctx, 1)[0]) + extra)]
        dts = self.latency.decode_steps_s(c, ctx, k)
        if k <= SMALL_RUN:  # sequential sums, as one step at a time adds them
            return list(accumulate(dts.tolist(), initial=t))[1:]
        acc = np.empty(k + 1)
        acc[0] = t
        acc[1:] = dts
        ends: list[float] = np.cumsum(acc, out=acc)[1:].tolist()
        return ends

    def _begin(
        self,
        rep: Replica,
        t: float,
        ends: list[float],
        k: int,
        c: int,
        reserved: int,
        decode: bool,
        prefills: list[tuple[int, int]],
    ) -> None:
        rep.busy = True
        rep.version += 1
        rep.seg_t0 = t
        rep.seg_ends = ends
        rep.seg_k = k
        rep.seg_c = c
        rep.seg_reserved = reserved
        rep.seg_step0 = rep.step
        rep.seg_decode = decode
        rep.seg_prefills = prefills
        self.seq += 1  # _push, inline
        heapq.heappush(self.heap, (ends[k - 1], ITER_END, rep.index, self.seq, rep.version))

    def _push(self, t: float, kind: int, r: int, version: int) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (t, kind, r, self.seq, version))

    def cut(self, rep: Replica, t: float) -> None:
        """An arrival at ``t`` joined ``rep`` during a run of decode iterations: the run
        ends with the iteration in progress (the first that ends at or after ``t``).
        """
        if not rep.busy or rep.seg_k <= 1:
            return
        j = bisect_left(rep.seg_ends, t, 0, rep.seg_k)
        if j >= rep.seg_k - 1:
            return
        keep = rep.demand.taken(rep.seg_step0, j + 1)
        rep.kv.used -= rep.seg_reserved - keep
        rep.seg_reserved = keep
        rep.seg_k = j + 1
        rep.version += 1
        self._push(rep.seg_ends[j], ITER_END, rep.index, rep.version)

    # ---- ending iterations -----------------------------------------------------------

    def end_iteration(self, rep: Replica, t: float) -> None:
        """The iteration (or run) in progress on ``rep`` ended at ``t``: tokens, first
        tokens, finishes, freed blocks, prefix-cache inserts, accounting.
        """
        k, c = rep.seg_k, rep.seg_c
        rep.busy = False
        prefills = rep.seg_prefills
        ptok = sum(tok for _, tok in prefills) if prefills else 0
        # _account's common case inline (the run within one existing bin): a call less
        # per event; the same operations in the same order
        b = self.bin_s
        t0 = rep.seg_t0
        tk = rep.seg_ends[k - 1]
        q = int(tk // b)
        if q == int(t0 // b) and q < len(rep.bin_busy):
            rep.busy_total += tk - t0
            rep.bin_prefill[q] += ptok
            rep.bin_busy[q] += tk - t0
            rep.bin_iters[q] += k
            rep.bin_decode[q] += c * k
        else:
            self._account(rep, k, c, ptok)
        if rep.seg_decode:
            step = rep.step = rep.step + k
            rep.ctx += c * k
            rep.out_tokens -= c * k
            if rep.cache is not None:  # free was lowest at the run's last step
                rep.cache.trim(rep.kv.free)
            fin = rep.fin
            if fin and fin[0][0] <= step:
                state, fin_step, at, r = self.state, self.fin_step, self.at, rep.index
                while fin and fin[0][0] <= step:
                    top, i = heapq.heappop(fin)
                    if state[i] == DECODING and fin_step[i] == top and at[i] == r:
                        self._finish_decoding(rep, i, t)
        if prefills:
            self._end_prefills(rep, prefills, t)
        rep.seg_prefills = []
        rep.seg_reserved = 0
        rep.seg_k = 0
        if rep.cache is not None:
            rep.cache.trim(rep.kv.free)

    def _end_prefills(self, rep: Replica, prefills: list[tuple[int, int]], t: float) -> None:
        """The ended iteration's prompt chunks: computed tokens, prompts completed."""
        for i, tok in prefills:
            if self.state[i] != PREFILLING or self.at[i] != rep.index:
                continue
            self.computed[i] += tok
            rep.out_tokens -= tok
            if self.computed[i] < self.target[i]:
                continue
            rep.prefilling.remove(i)
            self._prompt_done(rep, i, t)

    def _prompt_done(self, rep: Replica, i: int, t: float) -> None:
        """Request ``i``'s prompt is computed: the iteration gave it one token."""
        self.generated[i] += 1
        rep.out_tokens -= 1
        if self.first_token[i] == INF:
            self.first_token[i] = t
        done = self.generated[i] >= self.output[i]
        if done:  # its blocks are free before its prefix is cached
            rep.kv.used -= self.held[i]
            self.held[i] = 0
        if rep.cache is not None:
            rep.cache.insert(self.req.blocks(i).tolist(), rep.kv.free)
        if done:
            self._done(rep, i, t)
            return
        if rep.role == "prefill":  # its KV goes to a decode replica; blocks held till then
            self.state[i] = TRANSFERRING
            rep.out_tokens -= self.output[i] - self.generated[i]
            seconds = self.prompt[i] * self.kv_bytes / self.link_bytes_per_s
            self.kv_transfer[i] = seconds
            self.transfers += 1
            self._push(t + seconds, TRANSFER, rep.index, i)
            return
        self._join_decode(rep, i, self.target[i] + 1)

    def _finish_decoding(self, rep: Replica, i: int, t: float) -> None:
        kv_len = self.lbase[i] + rep.step
        rep.kv.used -= kvmod.held_blocks(kv_len, self.block)
        rep.running.remove(i)
        rep.demand.add(self.lbase[i], -1)
        rep.ctx -= kv_len
        self.generated[i] = self.output[i]
        self._done(rep, i, t)

    def transfer_done(self, rep: Replica, i: int, t: float, dirty: list[int]) -> None:
        """Request ``i``'s KV reached the decode pool: the prefill replica frees its blocks,
        the least-loaded decode replica queues it (admitted when its KV fits there).
        """
        self.transfers -= 1
        rep.kv.used -= self.held[i]
        pool = [r for r in self.replicas if r.role == "decode" and r.up]
        dest = least_loaded(pool, t)
        self.state[i] = KV_ARRIVED
        self.at[i] = dest.index
        self.held[i] = kvmod.held_blocks(self.prompt[i] + self.generated[i], self.block)
        dest.out_tokens += self.output[i] - self.generated[i]
        heapq.heappush(dest.queue, (1, self.order.key(self.output[i], i), i))
        self.cut(dest, t)
        dirty.append(rep.index)
        dirty.append(dest.index)

    def _done(self, rep: Replica, i: int, t: float) -> None:
        self.state[i] = DONE
        self.finish[i] = t
        self.replica[i] = rep.index
        rep.requests_done += 1
        if t > self.horizon:
            self.horizon = t

    def _account(self, rep: Replica, k: int, c: int, ptok: int) -> None:
        """Busy time, iterations and tokens of the ended run, into the bins of their
        ends (busy time split at bin edges).
        """
        b = self.bin_s
        t0 = rep.seg_t0
        tk = rep.seg_ends[k - 1]
        rep.busy_total += tk - t0
        b0 = int(t0 // b)
        b1 = int(tk // b)
        grow = b1 + 1 - len(rep.bin_busy)
        if grow > 0:
            rep.bin_busy.extend([0.0] * grow)
            rep.bin_iters.extend([0] * grow)
            rep.bin_prefill.extend([0] * grow)
            rep.bin_decode.extend([0] * grow)
        rep.bin_prefill[b1] += ptok
        if b0 == b1:
            rep.bin_busy[b0] += tk - t0
            rep.bin_iters[b0] += k
            rep.bin_decode[b0] += c * k
            return
        for q in range(b0, b1 + 1):
            lo = max(t0, q * b)
            hi = min(tk, (q + 1) * b)
            if hi > lo:
                rep.bin_busy[q] += hi - lo
        ends = np.asarray(rep.seg_ends[:k])
        counts = np.bincount((ends // b).astype(np.int64) - b0, minlength=b1 - b0 + 1)
        for q, n in enumerate(counts.tolist()):
            rep.bin_iters[b0 + q] += n
            rep.bin_decode[b0 + q] += c * n

    # ---- arrivals and routing ------------------------------------------------------

    def routable(self) -> list[Replica]:
        """Replicas that take new requests (up, not draining; prefill pool when split).
        Kept until a replica starts, comes up, drains or goes down.
        """
        if self._routable is None:
            self._routable = [
                r for r in self.replicas if r.up and not r.draining and r.role != "decode"
            ]
        return self._routable

    def arrive(self, i: int, t: float) -> Replica | None:
        """Route request ``i`` (or drop it when it can never fit a replica's KV)."""
        need = kvmod.held_blocks(self.prompt[i] + self.output[i], self.block)
        if need > self.capacity:
            self.state[i] = DROPPED
            self.drop_reason[i] = f"needs {need} KV blocks, the replica holds {self.capacity}"
            return None
        targets = self.routable()
        if not targets:
            self.state[i] = DROPPED
            self.drop_reason[i] = "no replica up"
            return None
        rep = self.router.choose(self, i, t, targets)
        self.enqueue(rep, i, t)
        return rep

    def enqueue(self, rep: Replica, i: int, t: float) -> None:
        """``i`` joins ``rep``'s queue (a decode run in progress there is cut)."""
        self.state[i] = QUEUED
        self.at[i] = rep.index
        self.target[i] = self.prompt[i]
        rep.out_tokens += self.prompt[i] + self.output[i]
        heapq.heappush(rep.queue, (1, self.order.key(self.output[i], i), i))
        self.cut(rep, t)

    def prefix_hit(self, rep: Replica, hashes: list[int], t: float) -> int:
        """Leading blocks of ``hashes`` (a request's, ``req.blocks(i).tolist()``) that
        ``rep``'s cache holds at ``t``.
        """
        cache = rep.cache
        if cache is None or not cache.entries or not hashes:
            return 0
        cache.trim(rep.kv.capacity - rep.used_at(t))
        return cache.peek(hashes)

    # ---- the loop ------------------------------------------------------------------

    def _snapshot(self, upto: float) -> None:
        """Running, waiting and KV blocks at every bin end before ``upto``."""
        b = self.bin_s
        while (self.snapped + 1) * b <= upto:
            edge = (self.snapped + 1) * b
            for rep in self.replicas:
                rep.snap.extend((rep.batch(), rep.waiting(), rep.used_at(edge)))
            self.snapped += 1

    def _pop_end(self, t: float, dirty: list[int]) -> None:
        """Handle the heap's first event (at ``t``)."""
        _, kind, r, _, version = heapq.heappop(self.heap)
        rep = self.replicas[r]
        if kind == ITER_END:
            if version == rep.version and rep.busy:
                self.end_iteration(rep, t)
                if rep.draining:
                    self._maybe_down(rep, t)
                dirty.append(r)
        elif kind == TRANSFER:
            self.transfer_done(rep, version, t, dirty)
        elif kind == COLD_START:
            rep.up = True
            self._routable = None
            dirty.append(r)
        else:
            self.tick(t)

    # ---- autoscaling -----------------------------------------------------------------

    def _busy_now(self, rep: Replica, t: float) -> float:
        """Busy seconds of ``rep`` up to ``t`` (the run in progress counted to ``t``)."""
        return rep.busy_total + (t - rep.seg_t0 if rep.busy else 0.0)

    def tick(self, t: float) -> None:
        """The autoscaler's look at the cluster: start, drain or leave replicas."""
        rule = self.scale
        assert rule is not None
        serving = [r for r in self.replicas if r.up and not r.draining]
        starting = sum(1 for r in self.replicas if not r.up and math.isnan(r.down_s))
        while len(self.busy_mark) < len(self.replicas):
            self.busy_mark.append(0.0)
        busy = [self._busy_now(r, t) for r in self.replicas]
        if rule.metric == "queue":
            signal = sum(r.waiting() for r in serving) / max(1, len(serving))
        else:
            spent = sum(busy[r.index] - self.busy_mark[r.index] for r in serving)
            signal = spent / (max(1, len(serving)) * rule.interval_s)
        self.busy_mark = busy
        step = decide(rule, signal, len(serving), starting)
        if step > 0:
            rep = self.add_replica("mixed")
            rep.up = False
            rep.start_s = t
            assert self.cold_starts is not None
            rep.up_s = t + self.cold_starts.next()
            self.busy_mark.append(0.0)
            self._push(rep.up_s, COLD_START, rep.index, 0)
        elif step < 0:
            rep = serving[-1]
            rep.draining = True
            self._routable = None
            self._maybe_down(rep, t)
        if self._work_left():
            self._push(t + rule.interval_s, TICK, 0, 0)

    def _maybe_down(self, rep: Replica, t: float) -> None:
        """A draining replica with nothing left goes down."""
        if not rep.busy and not rep.has_work() and rep.up:
            rep.up = False
            rep.down_s = t

    def _work_left(self) -> bool:
        """Whether any request is still to arrive or in flight (ticks stop after)."""
        if self._next_arrival < len(self.arrival) or self.transfers:
            return True
        return any(r.busy or r.has_work() for r in self.replicas)

    def run(self) -> ServeResult:
        """Replay every request; the result frames."""
        arrival = self.arrival
        n = len(arrival)
        heap = self.heap
        a = 0
        self._next_arrival = 0
        next_edge = self.bin_s
        while True:
            t_heap = heap[0][0] if heap else INF
            t_arr = arrival[a] if a < n else INF
            t = t_heap if t_heap < t_arr else t_arr
            if t == INF:
                break
            if t >= next_edge:
                self._snapshot(t)
                next_edge = (self.snapped + 1) * self.bin_s
            if t_heap < t_arr:
                if self._lone_end(t):
                    continue
            elif t_arr < t_heap and (a + 1 == n or arrival[a + 1] != t):
                a = self._lone_arrival(t, a)
                continue
            a = self._instant(t, a)
            self._next_arrival = a
        self._snapshot(self.horizon + self.bin_s)
        return self.result()

    def _lone_end(self, t: float) -> bool:
        """Fast path: the heap's first event is an iteration end alone at its instant
        (the common case); False (nothing done) otherwise.
        """
        heap = self.heap
        event = heapq.heappop(heap)
        if event[1] != ITER_END or (heap and heap[0][0] == t):
            heapq.heappush(heap, event)
            return False
        rep = self.replicas[event[2]]
        if event[4] == rep.version and rep.busy:
            self.end_iteration(rep, t)
            if rep.draining:
                self._maybe_down(rep, t)
            if rep.queue or rep.running or rep.prefilling:
                self.batching.start(self, rep, t)
        return True

    def _lone_arrival(self, t: float, a: int) -> int:
        """Fast path: arrival ``a`` alone at its instant; the next arrival's index."""
        if t > self.horizon:
            self.horizon = t
        got = self.arrive(a, t)
        self._next_arrival = a + 1
        if got is not None and not got.busy:
            self.batching.start(self, got, t)
        return a + 1

    def _instant(self, t: float, a: int) -> int:
        """Every event at ``t``, in the spec's order; the next arrival's index."""
        heap = self.heap
        arrival = self.arrival
        n = len(arrival)
        dirty: list[int] = []
        while heap and heap[0][0] == t:
            self._pop_end(t, dirty)
        while a < n and arrival[a] == t:
            got = self.arrive(a, t)
            if got is not None:
                dirty.append(got.index)
            a += 1
            if t > self.horizon:
                self.horizon = t
        # an arrival that cut a decode run at an iteration ending exactly now: that end
        # belongs before the arrivals; no request finishes or caches blocks at a cut, and
        # routing counted that iteration as ended, so ending it here is the same
        while heap and heap[0][0] == t:
            self._pop_end(t, dirty)
        if len(dirty) > 1:
            dirty = sorted(set(dirty))
        reps = self.replicas
        for r in dirty:
            rep = reps[r]
            if not rep.busy and rep.has_work():
                self.batching.start(self, rep, t)
        return a

    def result(self) -> ServeResult:
        """The per-request, per-bin and per-replica frames (the result contract)."""
        from gpu_trace.serve import frames

        return frames.result(self)


def _plugin(kind: str, name: str, options: str, flag: str) -> Any:
    """The ``kind`` plugin ``name`` built with its ``Config`` from ``options`` text."""
    cls = registry.get(kind, name)  # type: ignore[arg-type]
    config = registry.build_config(cls.Config, parse_pairs(options, flag))
    return cls(config)


def build(
    requests: RequestSet,
    config: ServeConfig,
    latency: LatencyModel,
    *,
    jump: bool = True,
    engine: type[Engine] = Engine,
) -> Engine:
    """The engine for one run, its plugins built from the config (one builder for
    tests and runs); ``engine`` a subclass that records more (``--events``:
    :class:`gpu_trace.serve.events.TracedEngine`), so the default run carries no hook.
    """
    batching = _plugin("batching", config.batching, config.batch, "--batch")
    router = _plugin("router", config.router, config.route, "--route")
    return engine(requests, config, latency, batching, router, jump=jump)


def simulate(requests: RequestSet, config: ServeConfig, latency: LatencyModel) -> ServeResult:
    """Replay ``requests`` on the cluster ``config`` describes; the run's frames."""
    return build(requests, config, latency).run()
