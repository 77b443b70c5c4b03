"""``packing``: arrival-only packing, the FGD paper's protocol (``replay --packing``).

Each job is placed when it arrives or is refused for good ("unschedulable at arrival");
nothing waits, and with ``departures = false`` nothing leaves, so the cluster fills up
and the placement policy alone decides how much of the arrived demand fits (the paper's
packing curve). The placement of the same name in earlier releases is ``gpu-packing``.
"""

from __future__ import annotations

from typing import Any

from gpu_trace.plugins import PolicyPlugin
from gpu_trace.replay.policy import EngineView, HasView, PolicyBase


class Packing(PolicyBase):
    """Arrival-only packing (the FGD paper's protocol): each job is placed when it
    arrives or fails for good; nothing waits. Use with ``departures = false``.
    """

    def __init__(self, config: Any, engine: EngineView | HasView) -> None:
        super().__init__(config, engine)
        self.pending: list[int] = []

    def on_arrival(self, j: int) -> None:
        """Remember the job: it is placed or refused in this instant's pass."""
        self.pending.append(j)

    def schedule(self) -> None:
        """Place every job that arrived now, or refuse it for good."""
        for j in self.pending:
            if not self.e.try_start(j):
                self.e.reject(j, "unschedulable at arrival")
        self.pending.clear()


PLUGINS = (PolicyPlugin("scheduler", "packing", Packing, rank=10),)
