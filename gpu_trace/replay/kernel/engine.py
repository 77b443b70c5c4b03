"""The event-driven replay core.

Time jumps from event to event; there is no per-second tick (the published Python
simulators advance one simulated second per loop iteration and manage a few hundred
jobs per second). Events are arrivals (read in order from the workload's sorted arrival
array, never pushed on the heap), completions and policy timers (queue demotions,
scheduling rounds, recorded start times) on one heap keyed by
``(time, priority, sequence)``: at one instant completions come first, then arrivals,
then timers, each in the order they were created, so a run is deterministic. After all
events of an instant the scheduling policy gets exactly one ``schedule()`` call.

Per-job state lives in flat Python tuples (static columns) and ``array`` buffers
(mutable columns; scalar access from Python is several times faster on these than on
numpy arrays, and they can be exported read-only); the cluster state keeps its own
indexes. Policies get a :class:`~gpu_trace.replay.kernel.view.PolicyView` of all of it, never
the engine itself.

One loop (:meth:`Engine.run`) serves simulated time and the live executor. What differs
is the :class:`Clock`: :class:`SimClock` jumps to the next event and ends jobs at their
expected finish (heap events); the live executor's clock sleeps until the next event or
a worker exit on the wall clock, and a job ends when its process does.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from heapq import heappush
from typing import Any

import numpy as np
import numpy.typing as npt

from gpu_trace.replay.cluster import MILLI, ClusterSpec, ClusterState
from gpu_trace.replay.kernel import job_table, whatif
from gpu_trace.replay.kernel.clock import Clock, SimClock
from gpu_trace.replay.kernel.job_table import EngineColumns, FloatArray
from gpu_trace.replay.kernel.view import PolicyView, set_now
from gpu_trace.replay.kernel.whatif import Asking, FitProbe, Placeable
from gpu_trace.replay.policy import (
    AdmissionPolicy,
    Parts,
    PlacementPolicy,
    SchedulingPolicy,
)
from gpu_trace.replay.workload import Workload

FINISH = 0
"""Kind of a finish event (kept apart from the heap: see ``Engine.ends``)."""
HOOK = 1
"""A generic timed event (:meth:`Engine.at`): after completions, before timers."""
TIMER = 2
INF = math.inf

STOP_FINISH = 0
"""How a run segment ended (:attr:`Engine.watchers`): the job's work is done."""
STOP_PREEMPT = 1
"""Stopped by the scheduler (:meth:`Engine.preempt`), progress kept."""
STOP_FAIL = 2
"""Killed: its node failed (:mod:`gpu_trace.replay.faults`)."""


@dataclass(frozen=True)
class EngineOptions:
    """Mechanism settings shared by every policy."""

    seed: int = 0
    restore_s: float = 0.0
    """Added to a preempted job's remaining time when it restarts (checkpoint restore)."""
    multinode_slowdown: float = 1.0
    """A job placed on more than one node runs this many times slower (1 = no penalty)."""
    departures: bool = True
    """False = arrival-only packing (FGD): jobs never finish."""
    record_log: bool = False
    """Keep the start/stop log (for invariant checks)."""
    record_timeline: bool = True


@dataclass
class Timeline:
    """Cluster state after each instant's scheduling pass (step function samples)."""

    time: list[float] = field(default_factory=list)
    used_milli: list[int] = field(default_factory=list)
    frag_milli: list[int] = field(default_factory=list)
    running: list[int] = field(default_factory=list)
    waiting: list[int] = field(default_factory=list)
    waiting_milli: list[int] = field(default_factory=list)
    arrived_milli: list[int] = field(default_factory=list)
    down_milli: list[int] = field(default_factory=list)
    """Capacity of nodes out of service (failed, powered off): not allocated work."""


class Engine(EngineColumns[FloatArray]):
    """One replay: a workload on a cluster under (admission, scheduling, placement).

    Its per-job columns (``arrival``, ``remaining``, ``first_start`` ...) are declared
    once in :mod:`gpu_trace.replay.kernel.job_table` and set by :func:`job_table.fill`.
    """

    reassign_in_instant = True
    """A job stopped and restarted in one instant only had its GPUs reassigned (not a
    preemption). False in the live executor: there the stop killed a worker."""

    def __init__(
        self,
        workload: Workload,
        spec: ClusterSpec,
        options: EngineOptions,
        estimate_s: npt.NDArray[np.float64] | None = None,
        clock: Clock | None = None,
    ) -> None:
        w = workload
        self.w = w
        self.spec = spec
        self.options = options
        self.state = ClusterState(spec)
        self.rng = np.random.default_rng(options.seed)
        self.now = 0.0
        self.estimate_s = estimate_s if estimate_s is not None else w.duration_s.copy()
        job_table.fill(self, w, spec)  # every per-job column (see job_table)
        self.vc_quota_milli: dict[int, int] = {}
        for code, name in enumerate(w.vcs):
            if name in spec.vc_quota_gpus:
                self.vc_quota_milli[code] = round(spec.vc_quota_gpus[name] * MILLI)
        self.vc_used_milli: dict[int, int] = dict.fromkeys(self.vc_quota_milli, 0)
        self.speed_table = w.speed_table
        self.stopped_now: dict[int, float] = {}
        """Job -> instant of its last preemption: in simulation a job restarted in the
        instant it was stopped was not preempted (see :meth:`try_start`); the live
        executor, whose stop kills a real worker, keeps nothing here."""
        self.alloc: dict[int, Parts] = {}
        """Running jobs -> their allocation (keys = the running set)."""
        self.running = self.alloc
        self.rejected: dict[int, str] = {}
        self.waiting = 0
        self.waiting_milli = 0
        self.arrived_milli = 0
        self.total_preemptions = 0
        self.heap: list[tuple[float, int, int, int, int, int]] = []
        """Timers and hooks, keyed ``(time, kind, sequence)``."""
        self.seq = 0
        self.ends: list[float] = []
        """Distinct expected finish times of running jobs (a heap of plain floats, cheaper
        to order than the event tuples; jobs of one trace often end in the same second)."""
        self.ending: dict[float, list[tuple[int, int]]] = {}
        """Finish time -> (job, version) ending then, in start order: the order the one
        heap's ``(time, FINISH, sequence)`` keys gave, and finishes still come before
        the instant's arrivals, timers and hooks."""
        self.log: list[tuple[float, str, int, Parts]] = []
        self.timeline = Timeline()
        self.clock: Clock = clock if clock is not None else SimClock()
        self.scheduler: SchedulingPolicy
        self.placement: PlacementPolicy
        self.admission: AdmissionPolicy
        self._finish_events = True
        self._departures = options.departures
        self._record_log = options.record_log
        self._slowdown = options.multinode_slowdown
        self._splits = False
        """Whether the bound placement splits jobs across nodes (read by the what-ifs)."""
        """``options`` read once (it is frozen): the start / stop path runs per job."""
        """Push a finish event per start (a simulated clock; set again by :meth:`run`)."""
        self.view = PolicyView(self)
        """What policies get (read-only); see :mod:`gpu_trace.replay.kernel.view`."""
        self.hooks: list[Callable[[int], None]] = []
        """Callbacks of timed events (:meth:`at`): node failures, repairs, power."""
        self.segments: list[tuple[int, float, float, int]] | None = None
        """(job, start, end, first node) per ended run segment, when a list is set
        (energy accounting); None = not recorded."""
        self.watchers: list[Callable[[int, float, Parts, int], None]] = []
        """Called as ``fn(job, segment start, parts, how)`` when a run segment ends, at
        ``now``, ``how`` one of ``STOP_FINISH`` / ``STOP_PREEMPT`` / ``STOP_FAIL``: the
        event trace (:mod:`gpu_trace.replay.events`). Empty (the default): one truth
        test per stop, nothing recorded."""

    def bind(
        self,
        scheduler: SchedulingPolicy,
        placement: PlacementPolicy,
        admission: AdmissionPolicy,
    ) -> None:
        """Attach the three policies (built with this engine's view) before :meth:`run`."""
        self.scheduler = scheduler
        self.placement = placement
        self.admission = admission
        self._splits = whatif.splits(placement)

    def set_now(self, t: float) -> None:
        """Move the engine's and the policies' clock to ``t``."""
        self.now = t
        set_now(self.view, t)

    # -- actions offered to policies ---------------------------------------------------

    def try_start(self, j: int, hold: Sequence[tuple[int, int, int]] = ()) -> bool:  # noqa: C901  measured hot path (one frame per call)
        """Place and start job ``j`` now; False (and nothing changed) if it cannot.
        ``hold``: capacity the placement must not use (a reservation; parts of it
        already taken are ignored).
        """
        now = self.now
        if now < self.arrival[j]:
            msg = f"job {j} started before it arrived"
            raise AssertionError(msg)
        alloc = self.alloc
        if j in alloc:
            msg = f"job {j} is already running"
            raise AssertionError(msg)
        ngpu, milli = self.ngpu[j], self.milli[j]
        demand = ngpu * milli
        state = self.state
        if demand > state.capacity_milli - state.used_milli:
            return False  # more than all free capacity: no placement can hold it
        quota = self.vc_quota_milli
        if quota:
            v = self.vc[j]
            if v in quota and self.vc_used_milli[v] + demand > quota[v]:
                return False
        if hold:
            parts = self._place_holding(j, hold)
        elif ngpu == 0 and not getattr(self.placement, "places_cpu_only", False):
            parts = self._cpu_only_parts(j)
        else:
            parts = self.placement.place(j, ngpu, milli, self.mask[j])
        if parts is None:
            return False
        parts = list(parts)
        cpu, mem = self.cpu_req[j], self.mem_req[j]
        if (cpu or mem) and not state.try_take_res(parts, cpu, mem):
            return False  # a GPU-only placement chose a node without the CPU / memory
        state.allocate(parts)
        if quota and self.vc[j] in quota:
            self.vc_used_milli[self.vc[j]] += demand
        if ngpu == 1:
            nodes, slow = 1, 1.0
        else:
            nodes = len({p[0] for p in parts})
            slow = self._slowdown if nodes > 1 else 1.0
        speed = 1.0
        if self.speed_table is not None:
            row = self.speed_table[self.speed_code[j]]
            types = state.node_type
            speed = float(min(row[types[p[0]]] for p in parts))  # the slowest model gates
            slow /= speed
        if self.first_start[j] == INF:
            self.first_start[j] = now
            self.first_nodes[j] = nodes
            self.first_speed[j] = speed
        self.slow[j] = slow
        self.seg_start[j] = now
        alloc[j] = parts
        self.waiting -= 1
        self.waiting_milli -= demand
        if self.stopped_now.pop(j, None) == now:
            # stopped and restarted in one instant (a later job of the same pass freed
            # more than it needed): its GPUs were only reassigned, as in the Tiresias
            # simulator's re-placement at every event; no preemption, no restore
            self.remaining[j] -= self.options.restore_s
            self.overhead[j] -= self.options.restore_s
            self.preemptions[j] -= 1
            self.total_preemptions -= 1
        if self._departures:
            end = now + self.remaining[j] * slow
            self.end_time[j] = end
            if self._finish_events:
                same = self.ending.get(end)
                if same is None:
                    self.ending[end] = [(j, self.version[j])]
                    heappush(self.ends, end)
                else:
                    same.append((j, self.version[j]))
        if self._record_log:
            self.log.append((now, "start", j, list(parts)))
        return True

    def _cpu_only_parts(self, j: int) -> Parts | None:
        """A CPU-only job (no GPU) under a GPU placement that has no rule for one: the
        first node by index of an allowed type with its CPU and memory free, as a part
        that names the node and holds no GPU.
        """
        state = self.state
        ok = state.node_ok_np(self.mask[j]) & state.res_ok_np(self.cpu_req[j], self.mem_req[j])
        hits = np.flatnonzero(ok)
        return [(int(hits[0]), -1, 0)] if hits.size else None

    def _place_holding(self, j: int, hold: Sequence[tuple[int, int, int]]) -> Parts | None:
        """The placement of ``j`` with the free part of ``hold`` taken meanwhile."""
        free = self.state.free
        held = [(n, g, min(m, free[n][g])) for n, g, m in hold if free[n][g] > 0]
        self.state.allocate(held)
        try:
            return self.placement.place(j, self.ngpu[j], self.milli[j], self.mask[j])
        finally:
            self.state.release(held)

    def placeable_after(
        self, j: int, groups: Sequence[Sequence[int]], where: bool = True
    ) -> Placeable | None:
        """What-if for reservations and preemption: the fewest leading ``groups`` of
        running jobs whose end lets waiting job ``j`` be placed (ignoring VC quotas);
        None if not even all of them. With ``where``, also where the placement policy
        would put it then (see :func:`gpu_trace.replay.kernel.whatif.placeable_after`).
        """
        return whatif.placeable_after(self.state, self.alloc, self._job(j), groups, where)

    def fit_probe(self, j: int) -> FitProbe:
        """A what-if counter for waiting job ``j``: release running jobs into it one by
        one (nothing changes in the cluster) and read whether ``j`` would fit.
        """
        return FitProbe(
            self.state, self.alloc, self.ngpu[j], self.milli[j], self.mask[j], self._splits
        )

    def _job(self, j: int) -> Asking:
        """What waiting job ``j`` asks, as the what-ifs read it."""
        return Asking(
            j, self.ngpu[j], self.milli[j], self.mask[j], self.cpu_req, self.mem_req, self.placement
        )

    def _stop(self, j: int, how: int = STOP_FINISH) -> None:
        parts = self.alloc.pop(j)
        state = self.state
        state.release(parts)
        cpu, mem = self.cpu_req[j], self.mem_req[j]
        if cpu or mem:
            state.give_res(parts, cpu, mem)
        quota = self.vc_quota_milli
        if quota and self.vc[j] in quota:
            self.vc_used_milli[self.vc[j]] -= self.ngpu[j] * self.milli[j]
        now = self.now
        elapsed = now - self.seg_start[j]
        self.attained_gpu_s[j] += elapsed * self.gpus[j]
        if self.segments is not None:
            self.segments.append((j, self.seg_start[j], now, parts[0][0]))
        if self.watchers:
            for fn in self.watchers:
                fn(j, self.seg_start[j], parts, how)
        if self._record_log:
            self.log.append((now, "stop", j, parts))

    def finished(self, j: int) -> None:
        """Job ``j`` completed now (its work is done): for clocks that end jobs
        themselves (the simulated loop does the same inline).
        """
        self.remaining[j] = 0.0
        self._stop(j)
        self.finish[j] = self.now
        self.end_time[j] = INF
        self.scheduler.on_finish(j)

    def preempt(self, j: int) -> None:
        """Stop running job ``j`` now, keeping its progress (minus nothing: the restore time
        is added to what is left); the caller requeues it.
        """
        if j not in self.alloc:
            msg = f"job {j} is not running"
            raise AssertionError(msg)
        elapsed = self.now - self.seg_start[j]
        self._stop(j, STOP_PREEMPT)
        self.remaining[j] = max(0.0, self.remaining[j] - elapsed / self.slow[j])
        self.remaining[j] += self.options.restore_s
        if self.reassign_in_instant:
            self.stopped_now[j] = self.now
        paid = min(self.overhead[j], elapsed / self.slow[j])
        self.overhead[j] += self.options.restore_s - paid
        self.version[j] += 1
        self.end_time[j] = INF
        self.preemptions[j] += 1
        self.total_preemptions += 1
        self.waiting += 1
        self.waiting_milli += self.ngpu[j] * self.milli[j]

    def set_timer(self, t: float, j: int, tag: int) -> None:
        """Call the scheduler's ``on_timer(j, tag)`` at ``t`` (never in the past)."""
        self.seq += 1
        heapq.heappush(self.heap, (max(t, self.now), TIMER, self.seq, tag, j, 0))

    def add_hook(self, fn: Callable[[int], None]) -> int:
        """Register a timed-event callback; its id for :meth:`at`."""
        self.hooks.append(fn)
        return len(self.hooks) - 1

    def at(self, t: float, hook: int, arg: int) -> None:
        """Call ``hooks[hook](arg)`` at time ``t`` (after that instant's completions
        and arrivals, before its timers and its scheduling pass).
        """
        self.seq += 1
        heapq.heappush(self.heap, (max(t, self.now), HOOK, self.seq, hook, arg, 0))

    def reject(self, j: int, reason: str) -> None:
        """Give up on waiting job ``j`` for good, with the reason the results show."""
        if j in self.alloc or j in self.rejected:
            msg = f"job {j} is not waiting"
            raise AssertionError(msg)
        self.rejected[j] = reason
        self.waiting -= 1
        self.waiting_milli -= self.ngpu[j] * self.milli[j]

    # -- the loop ------------------------------------------------------------------------

    def run(self, until: float = INF) -> None:  # noqa: C901  measured hot path (one frame per call)
        """Process events until none is left (or ``until``). At each instant: the
        clock's completions, then arrivals, then timers, then one scheduling pass.
        """
        arrival = self.arrival
        n = len(arrival)
        heap = self.heap
        heappop = heapq.heappop
        sched = self.scheduler
        admit = self.admission.admit
        ngpu, milli = self.ngpu, self.milli
        record = self.options.record_timeline
        tl = self.timeline
        t_time, t_used, t_frag = tl.time.append, tl.used_milli.append, tl.frag_milli.append
        t_running, t_waiting = tl.running.append, tl.waiting.append
        t_waiting_milli, t_arrived = tl.waiting_milli.append, tl.arrived_milli.append
        t_down = tl.down_milli.append
        alloc = self.alloc
        schedule, on_finish, on_arrival = sched.schedule, sched.on_finish, sched.on_arrival
        state = self.state
        clock = self.clock
        sim = clock.simulated
        self._finish_events = sim
        wait, complete, after_pass = clock.wait, clock.complete, clock.after_pass
        version, remaining, finish, end_time = (
            self.version,
            self.remaining,
            self.finish,
            self.end_time,
        )
        stop = self._stop
        view = self.view
        ends, ending = self.ends, self.ending
        ptr = 0
        while True:
            ta = arrival[ptr] if ptr < n else INF
            th = heap[0][0] if heap else INF
            due = ta if ta < th else th
            if ends and ends[0] < due:
                due = ends[0]
            if due > until:
                due = INF
            if sim:
                if due == INF:
                    break
                now = due
            else:
                got = wait(due, ptr < n)
                if got is None:
                    break
                now = got
            self.now = now
            set_now(view, now)
            if sim:
                while ends and ends[0] <= now:
                    for j, ver in ending.pop(heappop(ends)):
                        if ver == version[j]:  # else: preempted since, a stale event
                            remaining[j] = 0.0
                            stop(j)
                            finish[j] = now
                            end_time[j] = INF
                            on_finish(j)
            else:
                complete()
            while ptr < n and arrival[ptr] <= now:
                j = ptr
                ptr += 1
                d = ngpu[j] * milli[j]
                self.arrived_milli += d
                reason = admit(j)
                if reason is not None:
                    self.rejected[j] = reason
                    continue
                self.waiting += 1
                self.waiting_milli += d
                on_arrival(j)
            while heap and heap[0][0] <= now:
                _, kind, _, tag, j, _ = heappop(heap)
                if kind == TIMER:
                    sched.on_timer(j, tag)
                elif kind == HOOK:
                    self.hooks[tag](j)
            schedule()
            if record:
                t_time(now)
                t_used(state.used_milli)
                t_frag(state.frag_milli)
                t_running(len(alloc))
                t_waiting(self.waiting)
                t_waiting_milli(self.waiting_milli)
                t_arrived(self.arrived_milli)
                t_down(state.down_milli)
            if not sim:
                after_pass()

    def result_arrays(self) -> dict[str, Any]:
        """Per-job outcome arrays (NaN where a time does not exist): the outcome
        columns of :mod:`~gpu_trace.replay.kernel.job_table` that name a result field.
        """
        return job_table.result_arrays(self)
