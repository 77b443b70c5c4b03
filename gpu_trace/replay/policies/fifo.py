"""First-in first-out, and arrival-only packing.

``fifo`` is *strict* by default: the oldest waiting job blocks everyone behind it
(head-of-line blocking, as the Helios and PAI simulators do), so it is not
work-conserving. With ``blocking = false`` it becomes first-fit FIFO: jobs are tried
in arrival order and any that fits starts, which is work-conserving.

With VC quotas each VC has its own line (a VC at its quota does not block the others),
as HeliosArtifact runs one FIFO per VC.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from gpu_trace.replay.policies.base import ClassedQueue, EngineView, HasView, PolicyBase


@dataclass(frozen=True)
class FifoConfig:
    blocking: bool = field(
        default=True,
        metadata={"help": "Strict FIFO: the head job blocks the queue until it fits."},
    )


class Fifo(PolicyBase):
    """Start jobs in arrival order."""

    Config = FifoConfig

    def __init__(self, config: FifoConfig, engine: EngineView | HasView) -> None:
        super().__init__(config, engine)
        self.lines: dict[int, deque[int]] = {}
        self.first_fit = ClassedQueue(self.shape_key)

    def on_arrival(self, j: int) -> None:
        if not self.config.blocking:
            self.first_fit.push(j, j)
            return
        line = self.e.vc[j] if self.e.vc_quota_milli else -1
        q = self.lines.get(line)
        if q is None:
            q = self.lines[line] = deque()
        q.append(j)

    def schedule(self) -> None:
        start = self.e.try_start
        if not self.config.blocking:
            self.first_fit.fill(start)
            return
        for q in self.lines.values():
            while q and start(q[0]):
                q.popleft()


@dataclass(frozen=True)
class PackingConfig:
    pass


class Packing(PolicyBase):
    """Arrival-only packing (the FGD paper's protocol): each job is placed when it
    arrives or fails for good; nothing waits. Use with ``departures = false``."""

    Config = PackingConfig

    def __init__(self, config: Any, engine: EngineView | HasView) -> None:
        super().__init__(config, engine)
        self.pending: list[int] = []

    def on_arrival(self, j: int) -> None:
        self.pending.append(j)

    def schedule(self) -> None:
        for j in self.pending:
            if not self.e.try_start(j):
                self.e.reject(j, "unschedulable at arrival")
        self.pending.clear()
