"""``sjf``: shortest job first, on the true duration (an oracle: no scheduler knows it)."""

from __future__ import annotations

from gpu_trace.plugins import PolicyPlugin
from gpu_trace.replay.scheduling.ranked import Ranked


class Sjf(Ranked):
    """Shortest job first (true duration, oracle)."""

    def key(self, j: int) -> tuple[float, int]:
        """The true duration (still all remaining: the job has not started)."""
        return (self.e.remaining[j], j)


PLUGINS = (PolicyPlugin("scheduler", "sjf", Sjf, rank=2),)
