"""``qssf``: quasi-shortest-service first (Helios): the smallest *predicted* GPU time,
the duration estimator's estimate x the GPUs asked for (``--estimator``).
"""

from __future__ import annotations

from gpu_trace.plugins import PolicyPlugin
from gpu_trace.replay.scheduling.ranked import Ranked


class Qssf(Ranked):
    """Quasi-shortest-service first: smallest estimated duration x GPUs."""

    needs_estimates = True

    def key(self, j: int) -> tuple[float, int]:
        """Predicted GPU time: the estimated duration times the GPUs asked for."""
        return (float(self.e.estimate_s[j]) * self.e.gpus[j], j)


PLUGINS = (PolicyPlugin("scheduler", "qssf", Qssf, rank=3),)
