"""``least-tokens``: the routable replica with the fewest outstanding tokens, ties to
the lowest index.

Outstanding tokens of a replica: over its queued and running requests, the prompt tokens
not yet computed plus the output tokens not yet produced, at the arrival's instant
(iterations that ended by then counted). A load signal that weighs a 4,000-token prompt
as the work it is, where a request count would not.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpu_trace.plugins import PolicyPlugin

if TYPE_CHECKING:
    from gpu_trace.serve.engine import Engine
    from gpu_trace.serve.replica import Replica


@dataclass(frozen=True)
class LeastTokensConfig:
    """``least-tokens`` has no options."""


def least_loaded(replicas: list[Replica], t: float) -> Replica:
    """The replica of ``replicas`` with the fewest outstanding tokens at ``t`` (first
    in list order on a tie).
    """
    best = replicas[0]
    low = best.outstanding(t)
    for rep in replicas:  # Replica.outstanding inlined: this runs per arrival x replica
        if rep.busy and rep.seg_k > 1:
            k = rep.seg_k
            load = rep.out_tokens - rep.seg_c * bisect_right(rep.seg_ends, t, 0, k)
        else:
            load = rep.out_tokens
        if load < low:
            best, low = rep, load
    return best


class LeastTokens:
    """Join the replica with the least outstanding work, in tokens."""

    Config = LeastTokensConfig

    def __init__(self, config: LeastTokensConfig) -> None:
        pass

    def choose(self, eng: Engine, i: int, t: float, replicas: list[Replica]) -> Replica:
        """The least-loaded replica."""
        return least_loaded(replicas, t)


PLUGINS = (PolicyPlugin("router", "least-tokens", LeastTokens, rank=20),)
