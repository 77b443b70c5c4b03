"""EASY backfilling: FIFO with a reservation for the head job.

When the oldest waiting job does not fit, it gets a reservation at the *shadow time*:
the earliest time enough GPUs free up if running jobs end when their **estimates** say
(estimated end = start + estimated duration; an overrun job is assumed to end now).
Later jobs may start now ("backfill") if they fit and either end, by their own estimate,
before the shadow time or use only GPUs the head job will not need then. Estimates come
from the duration estimator (``--estimator``); with the oracle they are the true
durations. Not work-conserving: a job that fits may wait to protect the reservation.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from gpu_trace.replay.policies.base import EngineView, PolicyBase


@dataclass(frozen=True)
class BackfillConfig:
    depth: int = field(
        default=256,
        metadata={"help": "How many queued jobs behind the head may be tried per pass."},
    )


class EasyBackfill(PolicyBase):
    """FIFO + EASY backfilling on estimated durations."""

    Config = BackfillConfig
    needs_estimates = True

    def __init__(self, config: BackfillConfig, engine: EngineView) -> None:
        super().__init__(config, engine)
        self.queue: deque[int] = deque()

    def on_arrival(self, j: int) -> None:
        self.queue.append(j)

    def _est_end(self, j: int) -> float:
        e = self.e
        return max(e.now, e.seg_start[j] + float(e.estimate_s[j]))

    def schedule(self) -> None:
        e = self.e
        q = self.queue
        while q and e.try_start(q[0]):
            q.popleft()
        if len(q) < 2:
            return
        head = q[0]
        need = e.ngpu[head] * e.milli[head]
        free = e.state.capacity_milli - e.state.used_milli
        shadow, extra = e.now, free - need
        if extra < 0:
            for end, j in sorted((self._est_end(j), j) for j in e.running):
                free += e.ngpu[j] * e.milli[j]
                if free >= need:
                    shadow, extra = end, free - need
                    break
            else:
                return
        started: list[int] = []
        for i, j in enumerate(q):
            if i == 0:
                continue
            if i > self.config.depth:
                break
            d = e.ngpu[j] * e.milli[j]
            ends_before = e.now + float(e.estimate_s[j]) <= shadow
            if not ends_before and d > extra:
                continue
            if e.try_start(j):
                started.append(j)
                if not ends_before:
                    extra -= d
        if started:
            done = set(started)
            self.queue = deque(j for j in q if j not in done)
