"""Priority schedulers: SJF, QSSF (non-preemptive) and SRTF, LAS / Tiresias
(preemptive).

All are work-conserving: the wait queue is a :class:`ClassedQueue` and every pass starts
every waiting job that fits, best priority first (no head-of-line blocking).

- ``sjf``: shortest job first on the true duration (oracle).
- ``qssf``: quasi-shortest-service first (Helios): smallest *predicted* GPU time
  (estimated duration x GPUs).
- ``srtf``: shortest remaining time first (oracle), preempting longer-remaining jobs.
- ``las`` / ``tiresias``: 2D-LAS with discretized queues: a job's queue is the number of
  thresholds its attained GPU time (GPU-seconds) has passed; lower queue first, FIFO
  within a queue. A running job is demoted exactly when it crosses a threshold.
  Starvation (Tiresias' rule, ``starve_factor`` > 0): a job outside queue 0 that has
  run is promoted back to queue 0 once the time it has waited since its last
  promotion reaches ``starve_factor`` x the time it has run since then; both counts
  then restart from zero (its total attained service is kept for the metrics).

Preemption (head-of-line): while the best waiting job outranks the worst running job,
running jobs ranked below it are stopped, worst first, until it fits. With
``quantum_s > 0`` preemption is only considered at multiples of the quantum
(scheduling rounds); arrivals and completions still start jobs that fit at once.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from typing import Any

from gpu_trace.plugins import PolicyPlugin
from gpu_trace.replay.policies.base import ClassedQueue, EngineView, HasView, PolicyBase

ROUND = 1
DEMOTE = 2
STARVE = 3


@dataclass(frozen=True)
class NoOptions:
    """The options of a policy that has none (``-o`` is refused for it)."""


class _NonPreemptive(PolicyBase):
    def __init__(self, config: Any, engine: EngineView | HasView) -> None:
        super().__init__(config, engine)
        self.queue = ClassedQueue(self.shape_key)

    def key(self, j: int) -> tuple[float, int]:
        """The job's fixed rank, lowest first (the job id breaks ties)."""
        raise NotImplementedError

    def on_arrival(self, j: int) -> None:
        """Queue the job by its rank; it only starts in :meth:`schedule`."""
        self.queue.push(self.key(j), j)

    def schedule(self) -> None:
        """Start every waiting job that fits, best rank first (work-conserving)."""
        self.queue.fill(self.e.try_start)


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
    """LAS's options with Lucid's Tiresias defaults (one threshold, 60-s rounds)."""

    thresholds_gpu_s: tuple[float, ...] = field(
        default=(18000.0,),
        metadata={"help": "Queue thresholds on attained GPU-seconds (Lucid's Tiresias: 18000)."},
    )
    quantum_s: float = field(
        default=60.0,
        metadata={"help": "Scheduling round: preemption every 60 s as Lucid's Tiresias."},
    )


class _Preemptive(PolicyBase):
    preemptive = True

    def __init__(self, config: Any, engine: EngineView | HasView) -> None:
        super().__init__(config, engine)
        self.queue = ClassedQueue(self.shape_key)
        self.run_heap: list[tuple[Any, int, int]] = []
        self.stamp: dict[int, int] = {}
        self.round_set = False
        self.last_round = -math.inf
        self.epoch = 0
        """Bumped when a job ends or is preempted, or a running job's rank drops: the
        only events that can give a waiting job room it could not get by preemption (a
        start takes capacity, and if the job outranks it, releasing it gives no more)."""
        self.no_room: tuple[Any, ...] | None = None
        """(job, key, epoch) of the last best job that preempting could not place: until
        the epoch moves, trying again gives the same answer."""

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

    def _push_running(self, j: int) -> None:
        st = self.stamp.get(j, 0) + 1
        self.stamp[j] = st
        heapq.heappush(self.run_heap, (self.heap_key(j), j, st))

    def _start(self, j: int) -> bool:
        if self.e.try_start(j):
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

    def schedule(self) -> None:
        """Start what fits, then (at a round boundary when ``quantum_s`` > 0, else at
        once) preempt lower-ranked running jobs for the best waiting one.
        """
        e = self.e
        self.queue.fill(self._start)
        if not self.queue.size:
            return
        q = float(self.config.quantum_s)
        if q > 0:
            k = math.floor(e.now / q + 1e-9)
            if abs(e.now - k * q) > 1e-6:
                if not self.round_set:
                    self.round_set = True
                    e.set_timer((k + 1) * q, -1, ROUND)
                return
        self._preempt_for_best()

    def _preempt_for_best(self) -> None:
        """Preempt for the best waiting job while that gets it started, then fill."""
        while True:
            best = self.queue.best()
            if best is None:
                return
            bkey, b = best
            memo = (b, bkey, self.epoch)
            if memo == self.no_room:
                return
            victims = self._victims_for(b, bkey)
            if victims is None:
                self.no_room = memo
                return
            if not self._preempt_and_start(b, victims):
                return

    def _victims_for(self, b: int, bkey: tuple[Any, ...]) -> list[tuple[Any, int, int]] | None:
        """The running jobs to stop so that waiting job ``b`` fits, or ``None`` if even
        stopping every job it outranks leaves no node that could hold it.

        Jobs it outranks are counted as stopped, worst first, until some node could hold
        it; of those, only the ones on the node it will get are kept as victims, the
        rest go back on the run heap untouched.
        """
        probe = self.e.fit_probe(b)
        victims: list[tuple[Any, int, int]] = []
        while not probe.ok:
            w = self._outranked_worst(bkey)
            if w is None:
                break
            victims.append(heapq.heappop(self.run_heap))
            probe.release(w)
        if probe.ok:
            spared = [v for v in victims if not probe.needed(v[1])]
            victims = [v for v in victims if probe.needed(v[1])]
        else:
            spared = victims
        for entry in spared:
            heapq.heappush(self.run_heap, entry)
        return victims if probe.ok else None

    def _preempt_and_start(self, b: int, victims: list[tuple[Any, int, int]]) -> bool:
        """Stop ``victims`` (back to the wait queue), start ``b``, fill what else fits;
        whether ``b`` started.
        """
        e = self.e
        self.epoch += 1
        for _, victim, _ in victims:
            e.preempt(victim)
            self.queue.push(self.wait_key(victim), victim)
            self.requeued(victim)
        started = e.try_start(b)
        if started:
            self.queue.remove_best_of(b)
            self._push_running(b)
            self.started(b)
        self.queue.fill(self._start)
        return started

    def _outranked_worst(self, bkey: tuple[Any, ...]) -> int | None:
        """The worst running job if the waiting key ``bkey`` outranks it."""
        w = self._worst_running()
        if w is None or not bkey < self.run_key(w):
            return None
        return w


class Srtf(_Preemptive):
    """Shortest remaining time first (oracle), preemptive."""

    Config = SrtfConfig

    def wait_key(self, j: int) -> tuple[Any, ...]:
        """The remaining time (oracle)."""
        return (self.e.remaining[j], j)

    def run_key(self, j: int) -> tuple[Any, ...]:
        """The time left until the running job's end."""
        e = self.e
        return ((e.end_time[j] - e.now) / 1.0, j)

    def heap_key(self, j: int) -> tuple[Any, ...]:
        """Latest end first: the order of remaining time, fixed while it runs."""
        return (-self.e.end_time[j], -j)


class Las(_Preemptive):
    """2D-LAS with discretized queues on attained GPU time (Tiresias), with optional
    starvation promotion.
    """

    Config = LasConfig

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
        """(queue by attained GPU time since the last promotion, arrival): FIFO
        within a queue.
        """
        counted = self.e.attained_gpu_s[j] - self.offset.get(j, 0.0)
        return (self._queue_of(counted), self.e.arrival[j], j)

    def run_key(self, j: int) -> tuple[Any, ...]:
        """As :meth:`wait_key`, counting the service of the current run so far."""
        return (self._queue_of(self._attained_now(j)), self.e.arrival[j], j)

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
        """With ``starve_factor`` > 0, a preempted job outside queue 0 gets a timer
        for when its wait reaches ``starve_factor`` x its run (then it is promoted).
        """
        factor = float(self.config.starve_factor)
        if factor <= 0:
            return
        e = self.e
        counted = self._attained_now(j)
        if counted <= 0 or self._queue_of(counted) == 0:
            return
        ran_s = counted / max(e.gpus[j], 1e-9)
        self.wait_since[j] = e.now
        at = e.now + max(0.0, factor * ran_s - self.waited.get(j, 0.0))
        self.starve_at[j] = at
        e.set_timer(at, j, STARVE)

    def _promote(self, j: int) -> None:
        old = self.wait_key(j)
        self.offset[j] = self.e.attained_gpu_s[j]
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
            self._push_running(j)
            self._arm(j)
        elif tag == STARVE and self.starve_at.get(j) == self.e.now:
            self._promote(j)


class Tiresias(Las):
    """Tiresias' discretized 2D-LAS with Lucid's defaults (2 queues, 60-s rounds)."""

    Config = TiresiasConfig


PLUGINS = (
    PolicyPlugin("scheduler", "sjf", Sjf, rank=2),
    PolicyPlugin("scheduler", "qssf", Qssf, rank=3),
    PolicyPlugin("scheduler", "srtf", Srtf, rank=4),
    PolicyPlugin("scheduler", "las", Las, rank=5),
    PolicyPlugin("scheduler", "tiresias", Tiresias, rank=6),
)
