"""EASY backfilling: FIFO with a reservation for the head job.

When the oldest waiting job (the head) does not fit, it gets a reservation: the
*shadow time* is the earliest time the placement policy could actually place it
(per node, under the placement's own rules) if running jobs end when their
**estimates** say (estimated end = start + estimated duration; an overrun job is
assumed to end now), and the *reserved placement* is where it would go then. Later
jobs, in arrival order, may start now ("backfill") if they fit and either end, by their
own estimate, at or before the shadow time, or leave alone the part of the reserved
placement that is free now (the engine places them with those GPUs held), so that no
backfilled job delays the head's reservation. Estimates come from the duration estimator
(``--estimator``); with the oracle they are the true durations. Not work-conserving: a
job that fits may wait to protect the reservation.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from gpu_trace.replay.policies.base import EngineView, HasView, PolicyBase


@dataclass(frozen=True)
class BackfillConfig:
    depth: int = field(
        default=256,
        metadata={"help": "How many queued jobs behind the head may be tried per pass."},
    )


class EasyBackfill(PolicyBase):
    """FIFO + EASY backfilling on estimated durations."""

    Config = BackfillConfig

    def __init__(self, config: BackfillConfig, engine: EngineView | HasView) -> None:
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
        groups: list[list[int]] = []
        ends: list[float] = []
        for end, j in sorted((self._est_end(j), j) for j in e.running):
            if ends and end == ends[-1]:
                groups[-1].append(j)
            else:
                groups.append([j])
                ends.append(end)
        found = e.placeable_after(head, groups)
        if found is None:
            return
        shadow = e.now if found.groups == 0 else ends[found.groups - 1]
        hold = found.hold
        started: list[int] = []
        for i, j in enumerate(q):
            if i == 0:
                continue
            if i > self.config.depth:
                break
            ends_before = e.now + float(e.estimate_s[j]) <= shadow
            if e.try_start(j, () if ends_before else hold):
                started.append(j)
        if started:
            done = set(started)
            self.queue = deque(j for j in q if j not in done)
