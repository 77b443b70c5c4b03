"""The event-driven replay core.

Time jumps from event to event; there is no per-second tick (the published Python
simulators advance one simulated second per loop iteration and manage a few hundred
jobs per second). Events are arrivals (read in order from the workload's sorted arrival
array, never pushed on the heap), completions and policy timers (queue demotions,
scheduling rounds, recorded start times) on one heap keyed by
``(time, priority, sequence)``: at one instant completions come first, then arrivals,
then timers, each in the order they were created, so a run is deterministic. After all
events of an instant the scheduling policy gets exactly one ``schedule()`` call.

Per-job state lives in flat Python lists (scalar access from Python is several times
faster on lists than on numpy arrays); the cluster state keeps its own indexes.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from gpu_trace.replay.cluster import ANY_TYPE, MILLI, ClusterSpec, ClusterState
from gpu_trace.replay.policies.base import (
    AdmissionPolicy,
    Parts,
    PlacementPolicy,
    SchedulingPolicy,
)
from gpu_trace.replay.workload import Workload

FINISH = 0
TIMER = 2
INF = math.inf


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


class Engine:
    """One replay: a workload on a cluster under (admission, scheduling, placement)."""

    def __init__(
        self,
        workload: Workload,
        spec: ClusterSpec,
        options: EngineOptions,
        estimate_s: npt.NDArray[np.float64] | None = None,
    ) -> None:
        w = workload
        n = w.n
        self.w = w
        self.spec = spec
        self.options = options
        self.state = ClusterState(spec)
        self.rng = np.random.default_rng(options.seed)
        self.now = 0.0
        self.estimate_s = estimate_s if estimate_s is not None else w.duration_s.copy()
        self.arrival: list[float] = w.arrival_s.tolist()
        self.duration: list[float] = w.duration_s.tolist()
        self.remaining: list[float] = list(self.duration)
        self.attained_gpu_s: list[float] = [0.0] * n
        self.ngpu: list[int] = w.ngpu.tolist()
        self.milli: list[int] = w.milli.tolist()
        self.gpus: list[float] = w.gpus.tolist()
        self.vc: list[int] = w.vc_code.tolist()
        self.gpu_type: list[str | None] = w.frame["gpu_type"].to_list()
        masks: dict[str | None, int] = {}
        self.mask: list[int] = [
            masks.setdefault(t, spec.type_mask(t)) if t else ANY_TYPE for t in self.gpu_type
        ]
        self.vc_quota_milli: dict[int, int] = {}
        for code, name in enumerate(w.vcs):
            if name in spec.vc_quota_gpus:
                self.vc_quota_milli[code] = round(spec.vc_quota_gpus[name] * MILLI)
        self.vc_used_milli: dict[int, int] = dict.fromkeys(self.vc_quota_milli, 0)
        self.first_start: list[float] = [INF] * n
        self.finish: list[float] = [INF] * n
        self.end_time: list[float] = [INF] * n
        self.seg_start: list[float] = [0.0] * n
        self.slow: list[float] = [1.0] * n
        self.preemptions: list[int] = [0] * n
        self.first_nodes: list[int] = [0] * n
        self.alloc: dict[int, Parts] = {}
        self.version: list[int] = [0] * n
        self.rejected: dict[int, str] = {}
        self.running: set[int] = set()
        self.waiting = 0
        self.waiting_milli = 0
        self.arrived_milli = 0
        self.total_preemptions = 0
        self.heap: list[tuple[float, int, int, int, int, int]] = []
        self.seq = 0
        self.log: list[tuple[float, str, int, Parts]] = []
        self.timeline = Timeline()
        self.scheduler: SchedulingPolicy
        self.placement: PlacementPolicy
        self.admission: AdmissionPolicy

    def bind(
        self,
        scheduler: SchedulingPolicy,
        placement: PlacementPolicy,
        admission: AdmissionPolicy,
    ) -> None:
        self.scheduler = scheduler
        self.placement = placement
        self.admission = admission

    # -- actions offered to policies ---------------------------------------------------

    def try_start(self, j: int) -> bool:
        now = self.now
        if now < self.arrival[j]:
            raise AssertionError(f"job {j} started before it arrived")
        ngpu, milli = self.ngpu[j], self.milli[j]
        demand = ngpu * milli
        quota = self.vc_quota_milli
        if quota:
            v = self.vc[j]
            if v in quota and self.vc_used_milli[v] + demand > quota[v]:
                return False
        parts = self.placement.place(j, ngpu, milli, self.mask[j])
        if parts is None:
            return False
        self.state.allocate(parts)
        if quota and self.vc[j] in quota:
            self.vc_used_milli[self.vc[j]] += demand
        nodes = 1 if ngpu == 1 else len({p[0] for p in parts})
        slow = self.options.multinode_slowdown if nodes > 1 else 1.0
        if self.first_start[j] == INF:
            self.first_start[j] = now
            self.first_nodes[j] = nodes
        self.slow[j] = slow
        self.seg_start[j] = now
        self.alloc[j] = parts
        self.running.add(j)
        self.waiting -= 1
        self.waiting_milli -= demand
        if self.options.departures:
            end = now + self.remaining[j] * slow
            self.end_time[j] = end
            self.seq += 1
            heapq.heappush(self.heap, (end, FINISH, self.seq, FINISH, j, self.version[j]))
        if self.options.record_log:
            self.log.append((now, "start", j, list(parts)))
        return True

    def _stop(self, j: int) -> None:
        parts = self.alloc.pop(j)
        self.state.release(parts)
        self.running.discard(j)
        if self.vc_quota_milli and self.vc[j] in self.vc_quota_milli:
            self.vc_used_milli[self.vc[j]] -= self.ngpu[j] * self.milli[j]
        elapsed = self.now - self.seg_start[j]
        self.attained_gpu_s[j] += elapsed * self.gpus[j]
        if self.options.record_log:
            self.log.append((self.now, "stop", j, parts))

    def preempt(self, j: int) -> None:
        elapsed = self.now - self.seg_start[j]
        self._stop(j)
        self.remaining[j] = max(0.0, self.remaining[j] - elapsed / self.slow[j])
        self.remaining[j] += self.options.restore_s
        self.version[j] += 1
        self.end_time[j] = INF
        self.preemptions[j] += 1
        self.total_preemptions += 1
        self.waiting += 1
        self.waiting_milli += self.ngpu[j] * self.milli[j]

    def set_timer(self, t: float, j: int, tag: int) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (max(t, self.now), TIMER, self.seq, tag, j, 0))

    def reject(self, j: int, reason: str) -> None:
        self.rejected[j] = reason
        self.waiting -= 1
        self.waiting_milli -= self.ngpu[j] * self.milli[j]

    # -- the loop ------------------------------------------------------------------------

    def run(self, until: float = INF) -> None:
        """Process events until none is left (or ``until``)."""
        arrival = self.arrival
        n = len(arrival)
        heap = self.heap
        heappop = heapq.heappop
        sched = self.scheduler
        admit = self.admission.admit
        version = self.version
        ngpu, milli = self.ngpu, self.milli
        record = self.options.record_timeline
        tl = self.timeline
        state = self.state
        ptr = 0
        while True:
            ta = arrival[ptr] if ptr < n else INF
            th = heap[0][0] if heap else INF
            now = ta if ta < th else th
            if now == INF or now > until:
                break
            self.now = now
            while heap and heap[0][0] <= now and heap[0][1] == FINISH:
                _, _, _, _, j, ver = heappop(heap)
                if ver == version[j]:
                    self.remaining[j] = 0.0
                    self._stop(j)
                    self.finish[j] = now
                    self.end_time[j] = INF
                    sched.on_finish(j)
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
                sched.on_arrival(j)
            while heap and heap[0][0] <= now:
                _, _, _, tag, j, _ = heappop(heap)
                sched.on_timer(j, tag)
            sched.schedule()
            if record:
                tl.time.append(now)
                tl.used_milli.append(state.used_milli)
                tl.frag_milli.append(state.frag_milli)
                tl.running.append(len(self.running))
                tl.waiting.append(self.waiting)
                tl.waiting_milli.append(self.waiting_milli)
                tl.arrived_milli.append(self.arrived_milli)

    def result_arrays(self) -> dict[str, Any]:
        """Per-job outcome arrays (NaN where a time does not exist)."""
        fs = np.asarray(self.first_start, dtype=np.float64)
        fin = np.asarray(self.finish, dtype=np.float64)
        fs[np.isinf(fs)] = np.nan
        fin[np.isinf(fin)] = np.nan
        return {
            "start": fs,
            "finish": fin,
            "preemptions": np.asarray(self.preemptions, dtype=np.int32),
            "nodes": np.asarray(self.first_nodes, dtype=np.int32),
        }
