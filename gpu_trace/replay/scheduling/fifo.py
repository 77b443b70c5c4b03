"""First-in first-out, in two named modes.

- ``fifo`` (default ``blocking = true``) is *strict* FIFO: the oldest waiting job blocks
  everyone behind it until it fits (head-of-line blocking), so it is not
  work-conserving. This is *not* what the published Alibaba PAI simulator does.
- ``fifo-skip`` (the same as ``fifo -o blocking=false``) is the PAI simulator's FIFO
  (``alibaba/clusterdata:cluster-trace-gpu-v2020/simulator``, ``Scheduler.alloc_job``
  with the FIFO sort): every pass scans the waiting jobs in arrival order and starts
  every job that fits, skipping the ones that do not; work-conserving.

With VC quotas strict FIFO keeps one line per VC (a VC at its quota does not block the
others), as HeliosArtifact runs one FIFO per VC.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, ClassVar

from gpu_trace.plugins import PolicyPlugin
from gpu_trace.replay.policy import EngineView, HasView, NoConfig, PolicyBase
from gpu_trace.replay.scheduling.queue import ClassedQueue


@dataclass(frozen=True)
class FifoConfig:
    """Options of ``fifo``."""

    blocking: bool = field(
        default=True,
        metadata={
            "help": "Strict FIFO: the head job blocks the queue until it fits "
            "(false = fifo-skip, the PAI simulator's scan: start every job that fits)."
        },
    )


class Fifo(PolicyBase):
    """Start jobs in arrival order."""

    Config: ClassVar[type[Any]] = FifoConfig

    def __init__(self, config: Any, engine: EngineView | HasView) -> None:
        super().__init__(config, engine)
        self.blocking = self.is_blocking()
        self.lines: dict[int, deque[int]] = {}
        self.first_fit = ClassedQueue(self.shape_key, self.need_milli)

    def on_arrival(self, j: int) -> None:
        """Queue job ``j`` at the back of its line (or its shape group, skip mode)."""
        if not self.blocking:
            self.first_fit.push(j, j)
            return
        line = self.e.vc[j] if self.e.vc_quota_milli else -1
        q = self.lines.get(line)
        if q is None:
            q = self.lines[line] = deque()
        q.append(j)

    def schedule(self) -> None:
        """Start jobs in arrival order: the heads of the lines while they fit (strict), or
        every job that fits (skip).
        """
        start = self.e.try_start
        if not self.blocking:
            self.first_fit.fill(start, self.e.state.room_milli)
            return
        for q in self.lines.values():
            while q and start(q[0]):
                q.popleft()

    def is_blocking(self) -> bool:
        """Strict (head-of-line) or skip mode, from the options."""
        return bool(self.config.blocking)


class FifoSkip(Fifo):
    """The PAI simulator's FIFO: scan in arrival order, start every job that fits.

    Jobs of one request shape fit or not together within a pass, so the scan runs on
    :class:`~gpu_trace.replay.scheduling.queue.ClassedQueue` (one heap per shape) and
    costs O(starts x shapes) per pass, with the same outcome as scanning every job. No
    options: it is ``fifo -o blocking=false``.
    """

    Config = NoConfig

    def is_blocking(self) -> bool:
        """Always the skip mode."""
        return False


PLUGINS = (
    PolicyPlugin("scheduler", "fifo", Fifo, rank=0),
    PolicyPlugin("scheduler", "fifo-skip", FifoSkip, rank=1),
)
