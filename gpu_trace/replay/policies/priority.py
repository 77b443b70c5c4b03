"""Priority schedulers: SJF, QSSF (non-preemptive) and SRTF, LAS / Tiresias
(preemptive).

All are work-conserving: the wait queue is a :class:`ClassedQueue` and every pass starts
every waiting job that fits, best priority first (no head-of-line blocking).

- ``sjf``: shortest job first on the true duration (oracle).
- ``qssf``: quasi-shortest-service first (Helios): smallest *predicted* GPU time
  (estimated duration x GPUs).
- ``srtf``: shortest remaining time first (oracle), preempting longer-remaining jobs.
- ``las`` / ``tiresias`` / ``las-lucid``: 2D-LAS with discretized queues, modelled on
  the Tiresias simulator (SymbioticLab/Tiresias ``run_sim.py`` ``dlas_sim_jobs``): a
  job's queue is the number of thresholds its attained GPU time (GPU-seconds, since its
  last promotion) has passed; lower queue first; within a queue, the order in which
  jobs entered it (arrival, or demotion / promotion: the tail), and a running job keeps
  its GPUs against the queue's waiting jobs unless it was demoted into the queue at
  this very instant. A running job is demoted exactly when it crosses a threshold.
  Starvation (``starve_factor`` > 0): a waiting job outside queue 0 is promoted to the
  tail of queue 0 once its pending seconds since its last promotion (every wait after
  it has run) reach ``starve_factor`` x the time it has run since then; both counts
  then restart. ``tiresias`` = the simulator's defaults (3,250 and 7,200 GPU-s, 3
  queues); ``las-lucid`` = Lucid's setting (18,000 GPU-s, 60-s rounds).

Preemption: one pass over the waiting jobs in rank order; each starts if it fits, else
preempts the fewest running jobs it outranks that make room for it, else is passed over
and the next ones still get their turn. A job started in a pass outranks every job
after it, so it is never stopped in the same pass. With ``quantum_s > 0`` preemption is
only considered at multiples of the quantum (scheduling rounds); arrivals and
completions still start jobs that fit at once.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpu_trace.plugins import PolicyPlugin
from gpu_trace.replay.cluster import MILLI
from gpu_trace.replay.policy import ClassedQueue, EngineView, HasView, PolicyBase

if TYPE_CHECKING:
    from gpu_trace.replay.engine import FitProbe

FEW_NODES = 4
"""Below this many nodes the dirty-node check (:meth:`_Preemptive._still_no_room`) is
skipped."""

ROUND = 1
DEMOTE = 2
STARVE = 3


@dataclass(frozen=True)
class NoOptions:
    """The options of a policy that has none (``-o`` is refused for it)."""


class _NonPreemptive(PolicyBase):
    def __init__(self, config: Any, engine: EngineView | HasView) -> None:
        super().__init__(config, engine)
        self.queue = ClassedQueue(self.shape_key, self.need_milli)

    def key(self, j: int) -> tuple[float, int]:
        """The job's fixed rank, lowest first (the job id breaks ties)."""
        raise NotImplementedError

    def on_arrival(self, j: int) -> None:
        """Queue the job by its rank; it only starts in :meth:`schedule`."""
        self.queue.push(self.key(j), j)

    def schedule(self) -> None:
        """Start every waiting job that fits, best rank first (work-conserving)."""
        self.queue.fill(self.e.try_start, self.e.state.room_milli)


class Sjf(_NonPreemptive):
    """Shortest job first (true duration, oracle)."""

    Config = NoOptions

    def key(self, j: int) -> tuple[float, int]:
        """The true duration (still all remaining: the job has not started)."""
        return (self.e.remaining[j], j)


class Qssf(_NonPreemptive):
    """Quasi-shortest-service first: smallest estimated duration x GPUs."""

    Config = NoOptions
    needs_estimates = True

    def key(self, j: int) -> tuple[float, int]:
        """Predicted GPU time: the estimated duration times the GPUs asked for."""
        return (float(self.e.estimate_s[j]) * self.e.gpus[j], j)


@dataclass(frozen=True)
class SrtfConfig:
    """SRTF's options: how often preemption is considered."""

    quantum_s: float = field(
        default=0.0,
        metadata={"help": "Consider preemption only every quantum seconds (0 = at any event)."},
    )


@dataclass(frozen=True)
class LasConfig:
    """2D-LAS's options: the queue thresholds, the round length and the starvation
    rule.
    """

    thresholds_gpu_s: tuple[float, ...] = field(
        default=(3600.0, 36000.0, 360000.0),
        metadata={"help": "Queue thresholds on attained GPU-seconds (comma-separated)."},
    )
    quantum_s: float = field(
        default=0.0,
        metadata={"help": "Consider preemption only every quantum seconds (0 = at any event)."},
    )
    starve_factor: float = field(
        default=0.0,
        metadata={
            "help": "Promote a job to queue 0 once its wait reaches this x its run time "
            "since the last promotion (Tiresias' starvation rule; 0 = off)."
        },
    )


@dataclass(frozen=True)
class TiresiasConfig(LasConfig):
    """LAS's options with the Tiresias simulator's defaults (SymbioticLab/Tiresias,
    ``simulator/jobs.py``: 3 queues, ``queue_limit`` 3,250 and 7,200 GPU-seconds, the
    last queue unbounded; ``run_sim.py`` schedules at every event, starvation off
    unless ``--solve_starvation``).
    """

    thresholds_gpu_s: tuple[float, ...] = field(
        default=(3250.0, 7200.0),
        metadata={"help": "Queue thresholds on attained GPU-seconds (Tiresias: 3250,7200)."},
    )


@dataclass(frozen=True)
class LucidLasConfig(LasConfig):
    """LAS's options as Lucid's simulator configures its "tiresias" baseline (one
    threshold at 18,000 GPU-s, 60-s rounds).
    """

    thresholds_gpu_s: tuple[float, ...] = field(
        default=(18000.0,),
        metadata={"help": "Queue thresholds on attained GPU-seconds (Lucid's setting: 18000)."},
    )
    quantum_s: float = field(
        default=60.0,
        metadata={"help": "Scheduling round: preemption every 60 s as in Lucid's simulator."},
    )


class _Preemptive(PolicyBase):
    preemptive = True
    dirty_nodes_check = True
    """Whether :meth:`_still_no_room` looks at the dirty nodes of a cluster of several
    nodes (measured: it pays where a rank is cheap, SRTF; LAS's rank costs more than the
    what-if it spares, 23.7 s vs 27.9 s CPU on 100,000 jobs on ``2000x8``)."""

    def __init__(self, config: Any, engine: EngineView | HasView) -> None:
        super().__init__(config, engine)
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

    def wait_key(self, j: int) -> tuple[Any, ...]:
        """The waiting job's rank, lowest first: its place in the wait queue."""
        raise NotImplementedError

    def run_key(self, j: int) -> tuple[Any, ...]:
        """The running job's rank now, comparable with :meth:`wait_key`."""
        raise NotImplementedError

    def heap_key(self, j: int) -> tuple[Any, ...]:
        """Order of running jobs, worst first (static between stamps)."""
        return tuple(-x for x in self.run_key(j))

    def started(self, j: int) -> None:
        """Hook after a start (timers)."""

    def requeued(self, j: int) -> None:
        """Hook after a preempted job is back in the wait queue."""

    def on_finish(self, j: int) -> None:
        """A finish frees capacity: a job that could not get room may fit now."""
        self.epoch += 1
        self._left(j)

    def _placed(self, j: int) -> None:
        """Record where started job ``j`` runs (for :meth:`_still_no_room`)."""
        nodes = list(dict.fromkeys(p[0] for p in self.e.running[j]))
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
        q = float(self.config.quantum_s)
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
                self.queue.push(self.wait_key(victim), victim)
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


class Srtf(_Preemptive):
    """Shortest remaining time first (oracle), preemptive."""

    Config = SrtfConfig

    def wait_key(self, j: int) -> tuple[Any, ...]:
        """The remaining time (oracle)."""
        return (self.e.remaining[j], j)

    def run_key(self, j: int) -> tuple[Any, ...]:
        """The work left (the time left until its end at its placement's pace): on the
        same basis as :meth:`wait_key`. Time left would rank a job slowed by a
        multi-node placement behind itself waiting, and two such jobs would preempt
        each other forever within one instant.
        """
        e = self.e
        return ((e.end_time[j] - e.now) / e.slow[j], j)

    def heap_key(self, j: int) -> tuple[Any, ...]:
        """Latest end first: the order of remaining time, fixed while it runs."""
        return (-self.e.end_time[j], -j)


class Las(_Preemptive):
    """2D-LAS with discretized queues on attained GPU time (Tiresias), with optional
    starvation promotion.
    """

    Config = LasConfig
    dirty_nodes_check = False

    def __init__(self, config: Any, engine: EngineView | HasView) -> None:
        super().__init__(config, engine)
        self.armed: dict[int, float] = {}
        self.offset: dict[int, float] = {}
        """Attained GPU-seconds at the job's last promotion (service before it does not
        count towards its queue)."""
        self.waited: dict[int, float] = {}
        """Seconds waited since the last promotion, after having run."""
        self.wait_since: dict[int, float] = {}
        self.starve_at: dict[int, float] = {}
        self.entered: dict[int, tuple[float, int, int]] = {}
        """(time, 1, job) when the job entered its current queue by a demotion or a
        promotion; absent = (arrival, 0, job). The order within a queue: a moved job
        goes to the tail, behind the jobs that arrived in the same second (Tiresias'
        loop appends arrivals, then walks the runnable jobs in arrival order to move
        them)."""

    def _queue_of(self, attained: float) -> int:
        q = 0
        for t in self.config.thresholds_gpu_s:
            if attained >= t - 1e-9:
                q += 1
        return q

    def _attained_now(self, j: int) -> float:
        """GPU-seconds that count towards the job's queue (since its last promotion)."""
        e = self.e
        a = e.attained_gpu_s[j] - self.offset.get(j, 0.0)
        if j in e.running:
            a += (e.now - e.seg_start[j]) * e.gpus[j]
        return a

    def wait_key(self, j: int) -> tuple[Any, ...]:
        """(queue by attained GPU time since the last promotion, 1, time it entered
        that queue, input order): FIFO within a queue, a demoted or promoted job at the
        tail of its new queue (Tiresias ``run_sim.py`` ``dlas_sim_jobs`` appends it to
        the new queue's list).
        """
        counted = self.e.attained_gpu_s[j] - self.offset.get(j, 0.0)
        return (self._queue_of(counted), 1, self._entered(j))

    def run_key(self, j: int) -> tuple[Any, ...]:
        """(queue now, 0, entered, input order) for a job already running in its queue
        before this instant: ahead of the queue's waiting jobs (``dlas_sim_jobs`` moves
        pending jobs behind running ones after every pass). A job demoted at this very
        instant gets 1 instead: it sits at the tail, behind the jobs already waiting
        there, which may preempt it.
        """
        entered = self._entered(j)
        tier = 1 if entered[0] >= self.e.now else 0
        return (self._queue_of(self._attained_now(j)), tier, entered)

    def heap_key(self, j: int) -> tuple[Any, ...]:
        """Worst first: highest queue, then latest into it (fixed between demotions)."""
        t, moved, k = self._entered(j)
        return (-self._queue_of(self._attained_now(j)), -t, -moved, -k)

    def _entered(self, j: int) -> tuple[float, int, int]:
        got = self.entered.get(j)
        return got if got is not None else (self.e.arrival[j], 0, j)

    def started(self, j: int) -> None:
        """Add the wait that just ended to its starvation count and set the timer for
        its next demotion.
        """
        since = self.wait_since.pop(j, None)
        if since is not None:
            self.waited[j] = self.waited.get(j, 0.0) + self.e.now - since
        self.starve_at.pop(j, None)
        self._arm(j)

    def requeued(self, j: int) -> None:
        """A preempted job that has run since its last promotion counts this wait
        towards starvation, whatever its queue (Tiresias ``dlas_sim_jobs``: pending time
        adds up while ``executed_time`` > 0). With ``starve_factor`` > 0 a job outside
        queue 0 gets a timer for when its waits reach ``starve_factor`` x its run (then
        it is promoted).
        """
        e = self.e
        counted = e.attained_gpu_s[j] - self.offset.get(j, 0.0)
        if counted <= 0:
            return
        self.wait_since[j] = e.now
        factor = float(self.config.starve_factor)
        if factor <= 0 or self._queue_of(counted) == 0:
            return
        ran_s = counted / max(e.gpus[j], 1e-9)
        at = e.now + max(0.0, factor * ran_s - self.waited.get(j, 0.0))
        self.starve_at[j] = at
        e.set_timer(at, j, STARVE)

    def _promote(self, j: int) -> None:
        old = self.wait_key(j)
        self.offset[j] = self.e.attained_gpu_s[j]
        self.entered[j] = (self.e.now, 1, j)
        self.waited[j] = 0.0
        self.wait_since.pop(j, None)
        self.starve_at.pop(j, None)
        self.queue.reprioritize(old, self.wait_key(j), j)

    def _arm(self, j: int) -> None:
        e = self.e
        a = self._attained_now(j)
        for t in self.config.thresholds_gpu_s:
            if a < t - 1e-9:
                at = e.now + (t - a) / max(e.gpus[j], 1e-9)
                self.armed[j] = at
                e.set_timer(at, j, DEMOTE)
                return
        self.armed.pop(j, None)

    def on_timer(self, j: int, tag: int) -> None:
        """A round boundary, a running job crossing a threshold (demoted: re-ranked
        in the run heap) or a waiting job's starvation promotion; stale timers are
        ignored.
        """
        if tag == ROUND:
            self.round_set = False
        elif tag == DEMOTE and j in self.e.running and self.armed.get(j) == self.e.now:
            self.epoch += 1
            self.freed += self.e.ngpu[j]
            self.entered[j] = (self.e.now, 1, j)
            self._push_running(j)
            self._arm(j)
        elif tag == STARVE and self.starve_at.get(j) == self.e.now:
            self._promote(j)


class Tiresias(Las):
    """Tiresias' discretized 2D-LAS with the Tiresias simulator's defaults."""

    Config = TiresiasConfig


class LucidLas(Las):
    """2D-LAS as Lucid's simulator runs its Tiresias baseline (2 queues, 60-s rounds)."""

    Config = LucidLasConfig


PLUGINS = (
    PolicyPlugin("scheduler", "sjf", Sjf, rank=2),
    PolicyPlugin("scheduler", "qssf", Qssf, rank=3),
    PolicyPlugin("scheduler", "srtf", Srtf, rank=4),
    PolicyPlugin("scheduler", "las", Las, rank=5),
    PolicyPlugin("scheduler", "tiresias", Tiresias, rank=6),
    PolicyPlugin("scheduler", "las-lucid", LucidLas, rank=6),
)
