"""A public base for non-preemptive schedulers that order the wait queue by a fixed rank
(SJF, QSSF): subclass :class:`Ranked`, define :meth:`Ranked.key`, register it.

Work-conserving: the wait queue is a :class:`~gpu_trace.replay.scheduling.queue.ClassedQueue`
and every pass starts every waiting job that fits, best rank first (no head-of-line
blocking).
"""

from __future__ import annotations

from typing import Any

from gpu_trace.replay.policy import EngineView, HasView, PolicyBase
from gpu_trace.replay.scheduling.queue import ClassedQueue


class Ranked(PolicyBase):
    """Non-preemptive, work-conserving: waiting jobs start best :meth:`key` first."""

    def __init__(self, config: Any, engine: EngineView | HasView) -> None:
        super().__init__(config, engine)
        self.queue = ClassedQueue(self.shape_key, self.need_milli)

    def key(self, j: int) -> tuple[float, int]:
        """The job's fixed rank, lowest first (end it with the job id to break ties):
        read once, at arrival.
        """
        raise NotImplementedError

    def on_arrival(self, j: int) -> None:
        """Queue the job by its rank; it only starts in :meth:`schedule`."""
        self.queue.push(self.key(j), j)

    def schedule(self) -> None:
        """Start every waiting job that fits, best rank first (work-conserving)."""
        self.queue.fill(self.e.try_start, self.e.state.room_milli)
