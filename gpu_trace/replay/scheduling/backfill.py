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

import heapq
from collections import deque
from dataclasses import dataclass, field
from itertools import islice

from gpu_trace.plugins import PolicyPlugin
from gpu_trace.replay.policy import EngineView, HasView, PolicyBase


@dataclass(frozen=True)
class BackfillConfig:
    """Backfill's option: how far behind the head a pass looks (bounds its cost)."""

    depth: int = field(
        default=256,
        metadata={"help": "How many queued jobs behind the head may be tried per pass."},
    )


class EasyBackfill(PolicyBase):
    """FIFO + EASY backfilling on estimated durations."""

    Config = BackfillConfig
    needs_estimates = True

    def __init__(self, config: BackfillConfig, engine: EngineView | HasView) -> None:
        super().__init__(config, engine)
        self.queue: deque[int] = deque()
        self.est: tuple[float, ...] = tuple(self.e.estimate_s.tolist())
        """Estimated durations (fixed for the run; a tuple reads faster than numpy)."""

    def on_arrival(self, j: int) -> None:
        """Queue the job in arrival order (the head is the oldest)."""
        self.queue.append(j)

    def _reservation(self, head: int) -> tuple[float, list[tuple[int, int, int]]] | None:
        """(shadow time, the reserved placement's part free now) for the head, or None
        if it cannot be placed even once every running job has ended. Running jobs are
        released earliest estimated end first (a heap: only the ones released are
        ordered) until the head fits per node; then the placement says where.
        """
        e = self.e
        now = e.now
        est, seg = self.est, e.seg_start
        ends = [(max(now, seg[j] + est[j]), j) for j in e.running]
        heapq.heapify(ends)
        probe = e.fit_probe(head)
        groups: list[list[int]] = []
        times: list[float] = []
        while not probe.ok and ends:
            t, j = heapq.heappop(ends)
            group = [j]
            while ends and ends[0][0] == t:
                group.append(heapq.heappop(ends)[1])
            for r in group:
                probe.release(r)
            groups.append(group)
            times.append(t)
        if not probe.ok:
            return None
        found = e.placeable_after(head, groups)
        if found is None:  # a placement stricter than "fits on a node": release the rest
            rest = sorted(ends)
            groups += [[j] for _, j in rest]
            times += [t for t, _ in rest]
            found = e.placeable_after(head, groups)
            if found is None:
                return None
        shadow = now if found.groups == 0 else times[found.groups - 1]
        return shadow, found.hold

    def schedule(self) -> None:
        """Start jobs in FIFO order while they fit; then reserve for the head and
        backfill up to ``depth`` later jobs that do not delay that reservation.
        """
        e = self.e
        q = self.queue
        while q and e.try_start(q[0]):
            q.popleft()
        if len(q) < 2:
            return
        if e.state.free_milli < min(e.milli[j] for j in islice(q, 1, self.config.depth + 1)):
            return  # nothing behind the head could start now: no reservation needed
        got = self._reservation(q[0])
        if got is None:
            return
        shadow, hold = got
        started: list[int] = []
        for i, j in enumerate(q):
            if i == 0:
                continue
            if i > self.config.depth:
                break
            ends_before = e.now + self.est[j] <= shadow
            if e.try_start(j, () if ends_before else hold):
                started.append(j)
        if started:
            done = set(started)
            self.queue = deque(j for j in q if j not in done)


PLUGINS = (PolicyPlugin("scheduler", "backfill", EasyBackfill, rank=7),)
