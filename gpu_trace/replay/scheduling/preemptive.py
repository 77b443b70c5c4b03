"""The public base of preemptive schedulers (SRTF, LAS / Tiresias): subclass
:class:`Preemptive`, give it a rank, register it.

One file is a new preemptive policy::

    class Oldest(Preemptive):  # oldest job first, preempting younger ones
        def wait_key(self, j):
            return (self.e.arrival[j], j)

        def run_key(self, j):
            return (self.e.arrival[j], j)


    PLUGIN = PolicyPlugin("scheduler", "oldest", Oldest)

**The contract.** A subclass defines two ranks, lowest first, comparable with each other:

- :meth:`Preemptive.wait_key` (required): a waiting job's rank, read when it is queued
  (arrival, requeue after a preemption); its place in the wait queue. End it with the
  job id so that ranks are unique (the pass is then independent of queue order).
- :meth:`Preemptive.run_key` (required): a running job's rank *now*, compared with a
  waiting job's ``wait_key`` to decide whether the waiting job may preempt it.

and may override:

- :meth:`Preemptive.heap_key`: the order in which running jobs are offered as victims,
  worst first; read when a job starts (or :meth:`Preemptive.rank_dropped` is called) and
  must not change in between. Default: ``run_key`` negated element-wise (numbers only).
- :meth:`Preemptive.outranks`: whether a waiting rank may preempt a running one
  (default ``wait_key < run_key``; a margin or a hysteresis goes here).
- :meth:`Preemptive.stopped_key`: the rank a job stopped in this pass waits with until
  the instant ends (default ``wait_key``).
- :meth:`Preemptive.started` / :meth:`Preemptive.requeued`: hooks after a start and
  after a preempted job is back in the queue (timers, counters).
- ``dirty_nodes_check`` (class attribute): set False when ``run_key`` costs more than
  the what-if it spares (see :meth:`Preemptive._still_no_room`).
- ``on_timer``: call ``super().on_timer`` for tags it does not own; tag :data:`ROUND`
  is the base's own (scheduling rounds), so a subclass uses other tags.

A running job's ``run_key`` may only shrink (its rank improve: SRTF's time left) as time
passes; where it grows (its rank drops: LAS' demotion) the subclass calls
:meth:`Preemptive.rank_dropped`: the memo of waiting jobs known to have no room relies
on it.
A ``Config`` with ``quantum_s`` > 0 makes preemption happen only at multiples of it
(scheduling rounds); without the field, at every event.

**What the engine guarantees** (:class:`~gpu_trace.replay.policy.EngineView`): at each
instant it applies the completions (``on_finish``), then the arrivals (``on_arrival``,
admitted jobs only), then the timers (``on_timer``), then calls ``schedule`` once; a job
stopped by a node failure gets ``on_finish`` and, when retried, ``on_arrival`` again.
``try_start`` starts a job or changes nothing; ``preempt`` stops a running job now,
keeping its progress (``remaining`` less the work done, plus the restore time), and the
policy requeues it (the base does). The views are read-only and ``now`` never goes back.

**How a pass preempts.** One pass over the waiting jobs in rank order; each starts if it
fits, else preempts the fewest running jobs it outranks that make room for it, else is
passed over and the next ones still get their turn. A job started in a pass outranks
every job after it, so it is never stopped in the same pass. With ``quantum_s > 0``
arrivals and completions still start jobs that fit at once.
"""

from __future__ import annotations

import heapq
import math
from typing import TYPE_CHECKING, Any

from gpu_trace.replay.cluster import ANY_TYPE, MILLI
from gpu_trace.replay.policy import EngineView, HasView, PolicyBase
from gpu_trace.replay.scheduling.queue import ClassedQueue

if TYPE_CHECKING:
    from gpu_trace.replay.kernel.whatif import FitProbe

FEW_NODES = 4
"""Below this many nodes the dirty-node check (:meth:`Preemptive._still_no_room`) is
skipped."""

ROUND = 1
"""Timer tag of the base's scheduling rounds (``quantum_s``): subclasses use others."""


class Preemptive(PolicyBase):
    """A preemptive scheduler by rank (the module docstring is the contract)."""

    preemptive = True
    dirty_nodes_check = True
    """Whether :meth:`_still_no_room` looks at the dirty nodes of a cluster of several
    nodes (measured: it pays where a rank is cheap, SRTF; LAS's rank costs more than the
    what-if it spares, 23.7 s vs 27.9 s CPU on 100,000 jobs on ``2000x8``)."""

    def __init__(self, config: Any, engine: EngineView | HasView) -> None:
        super().__init__(config, engine)
        self.quantum_s = float(getattr(config, "quantum_s", 0.0))
        """Preemption only at multiples of this (0 = at any event), from the config."""
        self.queue = ClassedQueue(self.shape_key, self.need_milli)
        self.run_heap: list[tuple[Any, int, int]] = []
        self.stamp: dict[int, int] = {}
        self.round_set = False
        self.last_round = -math.inf
        self.epoch = 0
        """Bumped when a job ends or is preempted, or a running job's rank drops: the
        only events that can give a waiting job room it could not get by preemption (a
        start takes capacity, and if the job outranks it, releasing it gives no more)."""
        self.no_room: dict[int, tuple[Any, ...]] = {}
        """job -> (key, epoch, length of ``dirty``, ``state.ups``) when preempting could
        not place it: until the epoch moves (or its key changes), trying again gives the
        same answer."""
        self.memo_hits = 0
        """Times the memo spared a what-if (tests check it is used)."""
        self.dirty: list[int] = []
        """Nodes where capacity came free or a running job's rank dropped, in order (an
        epoch bump appends the nodes it concerns): a job memoed without room at position
        ``p`` can only have gained room on ``dirty[p:]`` (see :meth:`_still_no_room`)."""
        self.where: dict[int, list[int]] = {}
        """Running job -> its nodes (kept after it stops, until it starts again)."""
        self.on_node: dict[int, set[int]] = {}
        """Node -> the running jobs that hold part of it."""
        self.freed = 0
        """GPUs of the jobs stopped or demoted so far: on one node, room for a waiting job
        grows by at most this much between two looks (see :meth:`_still_no_room`)."""
        self.deficit = 0
        """GPUs the last :meth:`_victims_for` that found no room lacked on the one node
        of a one-node cluster (after counting every job it outranks as stopped)."""
        e = self.e
        self.pooled = (
            len(e.state.node_gpus) == 1
            and not e.state.multi_resource
            and all(m == MILLI for m in e.milli)
            and all(0 < g <= e.state.gmax for g in e.ngpu)
            and all(m == ANY_TYPE or (m >> e.state.node_type[0]) & 1 for m in e.mask)
        )
        """One node, every job whole GPUs (at least one, at most the node): room for a
        job is a count, free GPUs plus those of the jobs stopped (:meth:`_victims_pooled`,
        the same answer as the per-GPU probe without building one)."""

    def wait_key(self, j: int) -> tuple[Any, ...]:
        """The waiting job's rank, lowest first: its place in the wait queue (read when
        it is queued: arrival or requeue).
        """
        raise NotImplementedError

    def run_key(self, j: int) -> tuple[Any, ...]:
        """The running job's rank now, comparable with :meth:`wait_key` (it may only
        shrink with time, but where the subclass calls :meth:`rank_dropped`).
        """
        raise NotImplementedError

    def heap_key(self, j: int) -> tuple[Any, ...]:
        """Order of running jobs as victims, worst first; read at a start (and at
        :meth:`rank_dropped`), fixed in between. Default: ``run_key`` negated.
        """
        return tuple(-x for x in self.run_key(j))

    def stopped_key(self, j: int) -> tuple[Any, ...]:
        """The rank a job stopped in this pass waits with (default :meth:`wait_key`). A
        policy whose running jobs outrank waiting ones of the same rank (LAS: a running
        job keeps its GPUs against its queue's waiting jobs) returns its running rank
        here, for the rest of the instant, and re-ranks it at the next one.
        """
        return self.wait_key(j)

    def started(self, j: int) -> None:
        """Hook after a start (timers)."""

    def requeued(self, j: int) -> None:
        """Hook after a preempted job is back in the wait queue."""

    def rank_dropped(self, j: int) -> None:
        """Tell the base that running job ``j``'s rank dropped (a demotion): it may now
        be preempted by jobs that could not before, so the memo of waiting jobs without
        room is out of date, and it is re-filed in the victims' order (its
        :meth:`heap_key` is read again).
        """
        self.epoch += 1
        self.freed += self.e.ngpu[j]
        if self.dirty_nodes_check:
            self.dirty.extend(self.where.get(j, ()))
        self._push_running(j)

    def on_finish(self, j: int) -> None:
        """A finish frees capacity: a job that could not get room may fit now."""
        self.epoch += 1
        self._left(j)

    def _placed(self, j: int) -> None:
        """Record where started job ``j`` runs (for :meth:`_still_no_room`)."""
        parts = self.e.running[j]
        if self.pooled or len(parts) == 1:
            nodes = [parts[0][0]]
        else:
            nodes = list(dict.fromkeys(p[0] for p in parts))
        self.where[j] = nodes
        if not self.dirty_nodes_check:
            return
        on_node = self.on_node
        for n in nodes:
            got = on_node.get(n)
            if got is None:
                on_node[n] = {j}
            else:
                got.add(j)

    def _left(self, j: int) -> None:
        """Job ``j`` stopped: its nodes are dirty (capacity came free there)."""
        self.freed += self.e.ngpu[j]
        if not self.dirty_nodes_check:
            return
        nodes = self.where.get(j, ())
        self.dirty.extend(nodes)
        for n in nodes:
            self.on_node[n].discard(j)

    def _push_running(self, j: int) -> None:
        st = self.stamp.get(j, 0) + 1
        self.stamp[j] = st
        heapq.heappush(self.run_heap, (self.heap_key(j), j, st))

    def _start(self, j: int) -> bool:
        if self.e.try_start(j):
            self.no_room.pop(j, None)
            self._placed(j)
            self._push_running(j)
            self.started(j)
            return True
        return False

    def on_arrival(self, j: int) -> None:
        """Queue the job by its wait rank; it starts (or preempts) in :meth:`schedule`."""
        self.queue.push(self.wait_key(j), j)

    def on_timer(self, j: int, tag: int) -> None:
        """A round boundary: the next :meth:`schedule` may preempt again."""
        if tag == ROUND:
            self.round_set = False

    def _worst_running(self) -> int | None:
        h = self.run_heap
        running = self.e.running
        while h:
            _, j, st = h[0]
            if j in running and self.stamp.get(j) == st:
                return j
            heapq.heappop(h)
        return None

    def outranks(self, wkey: tuple[Any, ...], rkey: tuple[Any, ...]) -> bool:
        """Whether a waiting job of rank ``wkey`` may preempt a running one of ``rkey``."""
        return wkey < rkey

    def schedule(self) -> None:
        """One pass over the waiting jobs in rank order: each starts if it fits, else
        (at a round boundary when ``quantum_s`` > 0, else at once) preempts the fewest
        running jobs it outranks that make room for it, else is passed over while the
        next ones still get their turn (no priority inversion).

        Rank order means a job started in this pass is never a victim later in the
        same pass (it outranks every job that comes after it): no zero-length runs.
        """
        e = self.e
        q = self.quantum_s
        if q > 0:
            k = math.floor(e.now / q + 1e-9)
            if abs(e.now - k * q) > 1e-6:
                self.queue.fill(self._start, self.e.state.room_milli)
                if self.queue.size and not self.round_set:
                    self.round_set = True
                    e.set_timer((k + 1) * q, -1, ROUND)
                return
        self._preempting_pass()

    def _preempting_pass(self) -> None:  # noqa: C901  measured hot path (one frame per pass)
        """Walk the groups' heads best first (as :meth:`ClassedQueue.fill`): a head that
        cannot be placed even by preemption blocks its group for the rest of the pass
        (later jobs of the group outrank no more, and capacity only shrinks for them).
        """
        queue = self.queue
        if not queue.size:
            return
        e = self.e
        room_milli = e.state.room_milli
        ngpu, milli = e.ngpu, e.milli
        groups = queue.groups
        if self._nothing_to_do(room_milli()):
            return
        blocked: set[int] = set()
        while True:
            top: tuple[Any, int] | None = None
            heap: list[tuple[Any, int]] = []
            for h in groups.values():
                if h and (top is None or h[0] < top) and id(h) not in blocked:
                    top = h[0]
                    heap = h
            if top is None:
                # victims may have freed more than their preemptor took: what fits there
                break
            bkey, b = top
            # a job needing more than all free capacity cannot start (the engine's own
            # first refusal, asked here without the call)
            if ngpu[b] * milli[b] <= room_milli() and self._start_best(b):
                continue
            if self._known_no_room(b, bkey):
                blocked.add(id(heap))
                continue
            victims = self._victims_for(b, bkey)
            if victims is None:
                self.no_room[b] = self._memo(b, bkey)
                blocked.add(id(heap))
                continue
            if not self._preempt_and_start(b, victims):
                blocked.add(id(heap))
        queue.fill(self._start, room_milli)

    def _known_no_room(self, b: int, bkey: tuple[Any, ...]) -> bool:
        """Whether the memo already says that ``b`` (rank ``bkey``) cannot be placed even
        by preemption: the same epoch, or a look at what changed since
        (:meth:`_still_no_room`).
        """
        seen = self.no_room.get(b)
        if seen is None or seen[0] != bkey:
            return False
        if seen[1] == self.epoch:
            self.memo_hits += 1
            return True
        if self._still_no_room(b, bkey, seen):
            # still none as of now: the dirty list is read up to here; the room bound
            # keeps its own baseline
            self.no_room[b] = (bkey, self.epoch, len(self.dirty), *seen[3:])
            self.memo_hits += 1
            return True
        return False

    def _memo(self, b: int, bkey: tuple[Any, ...]) -> tuple[Any, ...]:
        """What :meth:`_still_no_room` needs to know of "no room for ``b`` now"."""
        return (bkey, self.epoch, len(self.dirty), self.e.state.ups, self.freed, self.deficit)

    def _nothing_to_do(self, room: int) -> bool:
        """Whether this pass can neither start nor preempt anything: every group's
        best job needs more than the free capacity (so no waiting job starts as things
        are) and the best waiting job outranks no running job (so none preempts).
        """
        e = self.e
        ngpu, milli = e.ngpu, e.milli
        top: tuple[Any, int] | None = None
        for h in self.queue.groups.values():
            if h:
                head = h[0]
                if ngpu[head[1]] * milli[head[1]] <= room:
                    return False
                if top is None or head < top:
                    top = head
        if top is None:
            return True
        return self._outranked_worst(top[0]) is None

    def _still_no_room(self, b: int, bkey: tuple[Any, ...], seen: tuple[Any, ...]) -> bool:
        """Whether waiting job ``b``, found without room (even by preemption) as its
        memo ``seen`` (key, epoch, length of the dirty list, nodes back in service) says, surely still has none, so the full what-if
        (:meth:`_victims_for`) would answer None again.

        For a job that must fit on one node (or one GPU), room is per node: free GPUs
        plus those held by running jobs it outranks. On a node where nothing stopped and
        no running job's rank dropped since, that room did not grow: a start takes free
        GPUs and adds at most as many outranked ones, and ranks only rise with time
        (SRTF: time left shrinks; LAS: a demotion is the one drop, and it marks its
        nodes). So only the dirty nodes need a look, releasing the outranked jobs there.
        A node back in service, a job spread over nodes, a long dirty list or a cluster
        of few nodes: no answer (False), the full what-if decides.
        """
        e = self.e
        if e.state.ups != seen[3]:
            return False
        nodes = len(e.state.node_gpus)
        if nodes == 1:  # one node: room grew by at most the GPUs of the jobs that left
            return e.milli[b] == MILLI and self.freed - seen[4] < seen[5]
        if nodes < FEW_NODES or not self.dirty_nodes_check:
            return False  # on a few large nodes every change dirties them all: no gain
        probe = e.fit_probe(b)
        if probe.ok or not probe.single or probe.split:
            return False
        fresh = self.dirty[seen[2] :]
        if len(fresh) > 64:
            return False
        on_node, run_key, outranks = self.on_node, self.run_key, self.outranks
        for n in set(fresh):
            for r in on_node.get(n, ()):
                if outranks(bkey, run_key(r)) and probe.release(r):
                    return False
        return True

    def _start_best(self, b: int) -> bool:
        """Start ``b`` (its group's head) if it fits as things are."""
        if self._start(b):
            self.queue.remove_best_of(b)
            return True
        return False

    def _victims_for(  # noqa: C901  measured hot path (heap walk inlined)
        self, b: int, bkey: tuple[Any, ...]
    ) -> list[tuple[Any, int, int]] | None:
        """The fewest running jobs to stop so that waiting job ``b`` fits, or ``None``
        if even stopping every job it outranks leaves no node that could hold it.

        Jobs it outranks are counted as stopped, worst first, until some node could hold
        it; of those, only the ones on the node it will get are kept. Then each kept
        one, best ranked first, is spared if the others still make room: no job is
        stopped that the waiting job did not need (a victim set without redundancy,
        preferring to stop the lowest ranked).
        """
        e = self.e
        if self._outranked_worst(bkey) is None:
            # it outranks no running job (and did not fit as things are)
            self.deficit = e.ngpu[b] - e.state.whole_free(e.mask[b])
            return None
        if self.pooled:
            return self._victims_pooled(b, bkey)
        probe = e.fit_probe(b)
        victims: list[tuple[Any, int, int]] = []
        heap, running, stamp = self.run_heap, e.running, self.stamp
        heappop, run_key, outranks, release = (
            heapq.heappop,
            self.run_key,
            self.outranks,
            probe.release,
        )
        while not probe.ok:
            while heap:  # _outranked_worst, inline: drop stale entries, read the worst
                _, w, st = heap[0]
                if w in running and stamp.get(w) == st:
                    break
                heappop(heap)
            if not heap or not outranks(bkey, run_key(w)):
                break
            victims.append(heappop(heap))
            release(w)
        if not probe.ok:
            for entry in victims:
                heapq.heappush(heap, entry)
            # wholly free GPUs with every job it outranks stopped: on one node, the
            # room it lacked
            self.deficit = e.ngpu[b] - probe.total
            return None
        keep, spared = self._needed(probe, victims)
        for i in range(len(keep) - 1, -1, -1):
            if len(keep) > 1 and self._fits_without(b, keep, i):
                spared.append(keep.pop(i))
        for entry in spared:
            heapq.heappush(self.run_heap, entry)
        return keep

    def _victims_pooled(self, b: int, bkey: tuple[Any, ...]) -> list[tuple[Any, int, int]] | None:
        """:meth:`_victims_for` on one node where every job takes whole GPUs: the job
        fits when the free GPUs plus those of the jobs stopped cover it, so the probe is
        a sum (every victim holds part of the one node: all are needed; the sparing
        loop is the same, on counts).
        """
        e = self.e
        ngpu = e.ngpu
        need = ngpu[b]
        have = e.state.whole_free(e.mask[b])
        victims: list[tuple[Any, int, int]] = []
        heap, worst = self.run_heap, self._worst_running
        heappop, run_key, outranks = heapq.heappop, self.run_key, self.outranks
        while have < need:
            w = worst()  # the worst running job, stale heap entries dropped
            if w is None or not outranks(bkey, run_key(w)):
                break
            victims.append(heappop(heap))
            have += ngpu[w]
        if have < need:
            for entry in victims:
                heapq.heappush(heap, entry)
            self.deficit = need - have
            return None
        for i in range(len(victims) - 1, -1, -1):
            if len(victims) > 1 and have - ngpu[victims[i][1]] >= need:
                have -= ngpu[victims[i][1]]
                heapq.heappush(heap, victims.pop(i))
        return victims

    def _needed(
        self, probe: FitProbe, victims: list[tuple[Any, int, int]]
    ) -> tuple[list[tuple[Any, int, int]], list[tuple[Any, int, int]]]:
        """``victims`` split into those that hold part of the room the probe found
        (:meth:`FitProbe.needed`) and the others, in order.
        """
        hit = probe.hit
        if hit is None:  # room over several nodes: every released job helped
            return victims, []
        if hit[1] < 0:  # whole GPUs on node hit[0]: the victims that hold part of it
            n, where = hit[0], self.where
            return [v for v in victims if n in where[v[1]]], [
                v for v in victims if n not in where[v[1]]
            ]
        return [v for v in victims if probe.needed(v[1])], [
            v for v in victims if not probe.needed(v[1])
        ]

    def _fits_without(self, b: int, victims: list[tuple[Any, int, int]], skip: int) -> bool:
        """Whether ``b`` would fit with every victim but the ``skip``-th stopped."""
        probe = self.e.fit_probe(b)
        for i, v in enumerate(victims):
            if i != skip and probe.release(v[1]):
                return True
        return probe.ok

    def _preempt_and_start(self, b: int, victims: list[tuple[Any, int, int]]) -> bool:
        """Stop ``victims`` (back to the wait queue) and start ``b``; whether it started."""
        e = self.e
        self.epoch += 1
        started = e.try_start(b) if not victims else False
        if not started:
            for _, victim, _ in victims:
                e.preempt(victim)
                self._left(victim)
                self.queue.push(self.stopped_key(victim), victim)
                self.requeued(victim)
            started = e.try_start(b)
        if started:
            self.no_room.pop(b, None)
            self.queue.remove_best_of(b)
            self._placed(b)
            self._push_running(b)
            self.started(b)
        return started

    def _outranked_worst(self, bkey: tuple[Any, ...]) -> int | None:
        """The worst running job if the waiting key ``bkey`` outranks it."""
        w = self._worst_running()
        if w is None or not self.outranks(bkey, self.run_key(w)):
            return None
        return w
