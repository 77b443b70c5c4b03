"""``round-robin``: arrival k (0-based, over routed arrivals) goes to routable replica
``k mod n``, replicas in index order. Blind to load: the baseline every serving paper
compares against.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpu_trace.plugins import PolicyPlugin

if TYPE_CHECKING:
    from gpu_trace.serve.engine import Engine
    from gpu_trace.serve.replica import Replica


@dataclass(frozen=True)
class RoundRobinConfig:
    """``round-robin`` has no options."""


class RoundRobin:
    """Cycle over the routable replicas."""

    Config = RoundRobinConfig

    def __init__(self, config: RoundRobinConfig) -> None:
        self.k = 0

    def choose(self, eng: Engine, i: int, t: float, replicas: list[Replica]) -> Replica:
        """Replica ``k mod n`` for the k-th routed arrival."""
        rep = replicas[self.k % len(replicas)]
        self.k += 1
        return rep


PLUGINS = (PolicyPlugin("router", "round-robin", RoundRobin, rank=10),)
