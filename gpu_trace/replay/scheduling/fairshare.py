"""Fair share across users or VCs (DRF-style).

Each entity (user or VC) has a dominant share: the GPUs it holds divided by its weight
(its VC quota when sharing by VC with quotas, else 1). With one scheduled resource
(GPUs) DRF reduces to max-min fairness: every pass repeatedly starts the oldest job of
the entity with the smallest dominant share among those whose oldest job fits.
Non-preemptive and work-conserving per entity line (an entity's own head blocks only
that entity).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from gpu_trace.errors import GpuTraceError
from gpu_trace.plugins import PolicyPlugin
from gpu_trace.replay.policy import EngineView, HasView, PolicyBase


@dataclass(frozen=True)
class FairShareConfig:
    """Fair share's option: the entity that shares (user or VC)."""

    by: str = field(default="user", metadata={"help": "Share between `user` or `vc`."})


class FairShare(PolicyBase):
    """Max-min (single-resource DRF) fair share between users or VCs."""

    Config = FairShareConfig

    def __init__(self, config: FairShareConfig, engine: EngineView | HasView) -> None:
        super().__init__(config, engine)
        if config.by not in {"user", "vc"}:
            msg = "fairshare by must be `user` or `vc`"
            raise GpuTraceError(msg)
        codes = self.e.w.user_code if config.by == "user" else self.e.w.vc_code
        self.entity: list[int] = codes.tolist()
        self.lines: dict[int, deque[int]] = {}
        self.held: dict[int, int] = {}
        self.weight: dict[int, float] = {}
        if config.by == "vc":
            for v, q in self.e.vc_quota_milli.items():
                self.weight[v] = max(q, 1) / 1000.0

    def on_arrival(self, j: int) -> None:
        """Append the job to its entity's own FIFO line."""
        k = self.entity[j]
        line = self.lines.get(k)
        if line is None:
            line = self.lines[k] = deque()
        line.append(j)

    def on_finish(self, j: int) -> None:
        """Take the job's milli-GPUs off its entity's held total (its share drops)."""
        k = self.entity[j]
        self.held[k] -= self.e.ngpu[j] * self.e.milli[j]

    def schedule(self) -> None:
        """Start the oldest job of the entity with the smallest dominant share, again
        and again; an entity whose oldest job does not fit is out for this pass (ties:
        the lower head job id).
        """
        e = self.e
        blocked: set[int] = set()
        while True:
            best, best_share = -1, 0.0
            for k, line in self.lines.items():
                if not line or k in blocked:
                    continue
                share = self.held.get(k, 0) / self.weight.get(k, 1.0)
                if (
                    best < 0
                    or share < best_share
                    or (share == best_share and line[0] < self.lines[best][0])
                ):
                    best, best_share = k, share
            if best < 0:
                return
            j = self.lines[best][0]
            if e.try_start(j):
                self.lines[best].popleft()
                self.held[best] = self.held.get(best, 0) + e.ngpu[j] * e.milli[j]
            else:
                blocked.add(best)


PLUGINS = (PolicyPlugin("scheduler", "fairshare", FairShare, rank=8),)
