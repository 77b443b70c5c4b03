"""A toy scheduling policy in one file: FIFO over the largest jobs first."""

from __future__ import annotations

from gpu_trace.plugins import PolicyPlugin
from gpu_trace.replay.scheduling.fifo import Fifo


class LargestFirst(Fifo):
    """Toy: FIFO, installed from a plugin package."""


PLUGIN = PolicyPlugin("scheduler", "toy-largest", LargestFirst)
