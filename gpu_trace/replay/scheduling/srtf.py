"""``srtf``: shortest remaining time first (an oracle: it reads the true remaining
time), preempting running jobs with more work left (see
:class:`~gpu_trace.replay.scheduling.preemptive.Preemptive` for how a pass preempts).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpu_trace.plugins import PolicyPlugin
from gpu_trace.replay.scheduling.preemptive import Preemptive


@dataclass(frozen=True)
class SrtfConfig:
    """SRTF's options: how often preemption is considered."""

    quantum_s: float = field(
        default=0.0,
        metadata={"help": "Consider preemption only every quantum seconds (0 = at any event)."},
    )


class Srtf(Preemptive):
    """Shortest remaining time first (oracle), preemptive."""

    Config = SrtfConfig

    def wait_key(self, j: int) -> tuple[Any, ...]:
        """The remaining time (oracle)."""
        return (self.e.remaining[j], j)

    def run_key(self, j: int) -> tuple[Any, ...]:
        """The work left (the time left until its end at its placement's pace): on the
        same basis as :meth:`wait_key`. Time left would rank a job slowed by a
        multi-node placement behind itself waiting, and two such jobs would preempt
        each other forever within one instant.
        """
        e = self.e
        return ((e.end_time[j] - e.now) / e.slow[j], j)

    def heap_key(self, j: int) -> tuple[Any, ...]:
        """Latest end first: the order of remaining time, fixed while it runs."""
        return (-self.e.end_time[j], -j)


PLUGINS = (PolicyPlugin("scheduler", "srtf", Srtf, rank=4),)
