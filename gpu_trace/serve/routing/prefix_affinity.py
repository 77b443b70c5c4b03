"""``prefix-affinity``: send a request where its prompt's prefix is already cached.

The routable replica whose prefix cache holds the longest run of the request's blocks
(from its first block) wins; on a tie, or when no replica holds any, the least-tokens
rule picks among the tied (all replicas when none hits). ``max_ratio`` > 0 bounds the
load: a replica whose outstanding tokens exceed ``max_ratio`` x the mean over the
routable replicas is skipped for affinity (it can still win the least-tokens fallback).
Without block hashes in the trace (Azure) this is least-tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpu_trace.plugins import PolicyPlugin, option
from gpu_trace.serve.routing.least_tokens import least_loaded

if TYPE_CHECKING:
    from gpu_trace.serve.engine import Engine
    from gpu_trace.serve.replica import Replica


@dataclass(frozen=True)
class PrefixAffinityConfig:
    """Options of ``--router prefix-affinity`` (``--route max_ratio=2``)."""

    max_ratio: float = option(
        0.0, "Skip replicas loaded above this x the mean outstanding tokens (0: no bound)."
    )


class PrefixAffinity:
    """Longest cached prefix first, least outstanding tokens among ties."""

    Config = PrefixAffinityConfig

    def __init__(self, config: PrefixAffinityConfig) -> None:
        self.max_ratio = config.max_ratio

    def choose(self, eng: Engine, i: int, t: float, replicas: list[Replica]) -> Replica:
        """The replica with the longest cached prefix of request ``i``."""
        pool = replicas
        if self.max_ratio > 0:
            loads = [r.outstanding(t) for r in replicas]
            bound = self.max_ratio * sum(loads) / len(loads)
            pool = [r for r, load in zip(replicas, loads, strict=True) if load <= bound] or replicas
        best = 0
        tied: list[Replica] = []
        hashes = eng.req.blocks(i).tolist()
        for rep in pool:
            hit = eng.prefix_hit(rep, hashes, t)
            if hit > best:
                best, tied = hit, [rep]
            elif hit == best and best:
                tied.append(rep)
        return least_loaded(tied if best else replicas, t)


PLUGINS = (PolicyPlugin("router", "prefix-affinity", PrefixAffinity, rank=30),)
