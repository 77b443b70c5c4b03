"""``las`` / ``tiresias`` / ``las-lucid``: 2D-LAS with discretized queues, modelled on
the Tiresias simulator (SymbioticLab/Tiresias ``run_sim.py`` ``dlas_sim_jobs``).

A job's queue is the number of thresholds its attained GPU time (GPU-seconds, since its
last promotion) has passed; lower queue first; within a queue, the order in which jobs
entered it (arrival, or demotion / promotion: the tail), and a running job keeps its GPUs
against the queue's waiting jobs unless it was demoted into the queue at this very
instant. A running job is demoted exactly when it crosses a threshold. Starvation
(``starve_factor`` > 0): a waiting job outside queue 0 is promoted to the tail of queue 0
once its pending seconds since its last promotion (every wait after it has run) reach
``starve_factor`` x the time it has run since then; both counts then restart.
``tiresias`` = the simulator's defaults (3,250 and 7,200 GPU-s, 3 queues); ``las-lucid``
= Lucid's setting (18,000 GPU-s, 60-s rounds). How a pass preempts:
:class:`~gpu_trace.replay.scheduling.preemptive.Preemptive`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpu_trace.plugins import PolicyPlugin
from gpu_trace.replay.policy import EngineView, HasView
from gpu_trace.replay.scheduling.preemptive import ROUND, Preemptive

DEMOTE = 2
"""Timer tag: a running job crosses its next threshold."""
STARVE = 3
"""Timer tag: a waiting job's starvation promotion is due."""


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


class Las(Preemptive):
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
        self.kept: dict[int, tuple[Any, ...]] = {}
        """Jobs stopped at :attr:`kept_at` -> the running rank they wait with for the rest
        of that instant (:meth:`stopped_key`); re-ranked as waiting jobs at the next."""
        self.kept_at = -1.0
        self.level: dict[int, int] = {}
        """A running job's queue, read by :meth:`run_key` (set by :meth:`heap_key`, which
        runs at every start and demotion: between those a running job's queue cannot
        change, its timer fires at the crossing, before the instant's pass)."""

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
        level = self.level.get(j)
        if level is None or j not in self.e.running:
            level = self._queue_of(self._attained_now(j))
        return (level, tier, entered)

    def stopped_key(self, j: int) -> tuple[Any, ...]:
        """A job stopped in this pass keeps its running rank until the instant ends, as in
        the simulator's pass, where every job holds its place in the queue while GPUs
        are handed out: it gets GPUs back before its queue's waiting jobs, and only a job
        it outranks may take them. Ranked as waiting, a job stopped for a first
        preemptor and not needed once a second one stopped a larger job would lose its
        GPUs to an older waiting job of its queue: a running job preempted by its own
        queue.
        """
        self.kept_at = self.e.now  # the pass re-ranked the earlier instant's jobs first
        key = self.run_key(j)
        self.kept[j] = key
        return key

    def schedule(self) -> None:
        """Re-rank the jobs stopped at an earlier instant and still waiting, then the
        base's pass.
        """
        if self.kept and self.kept_at != self.e.now:
            self._rekey()
        super().schedule()

    def _rekey(self) -> None:
        wait_key = self.wait_key  # each still waiting (a start drops it)
        self.queue.rekey([(key, wait_key(j), j) for j, key in self.kept.items()])
        self.kept.clear()

    def heap_key(self, j: int) -> tuple[Any, ...]:
        """Worst first: highest queue, then latest into it (fixed between demotions)."""
        t, moved, k = self._entered(j)
        level = self.level[j] = self._queue_of(self._attained_now(j))
        return (-level, -t, -moved, -k)

    def _entered(self, j: int) -> tuple[float, int, int]:
        got = self.entered.get(j)
        return got if got is not None else (self.e.arrival[j], 0, j)

    def started(self, j: int) -> None:
        """Add the wait that just ended to its starvation count and set the timer for
        its next demotion.
        """
        self.kept.pop(j, None)  # waiting no more: nothing to re-rank
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
        if self.kept and self.kept_at != self.e.now:
            self._rekey()
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
            self.entered[j] = (self.e.now, 1, j)
            self.rank_dropped(j)
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
    PolicyPlugin("scheduler", "las", Las, rank=5),
    PolicyPlugin("scheduler", "tiresias", Tiresias, rank=6),
    PolicyPlugin("scheduler", "las-lucid", LucidLas, rank=6),
)
