"""``clustering`` (GPU clustering, the FGD paper's baseline): prefer nodes running only
tasks of the same GPU request, then nodes that include it, then idle nodes, then others;
within a tier the node with the least free GPU, in the shared scoring frame
(:class:`~gpu_trace.replay.placement.base.ScoredPlacement`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpu_trace.plugins import PolicyPlugin
from gpu_trace.replay.cluster import MILLI
from gpu_trace.replay.placement.base import F64, I64, ScoredPlacement
from gpu_trace.replay.policy import EngineView, HasView, Parts


class GpuClustering(ScoredPlacement):
    """Nodes already running the same GPU request first (homogeneous nodes)."""

    def __init__(self, config: Any, engine: EngineView | HasView) -> None:
        super().__init__(config, engine)
        w = self.e.w
        # the simulator's GPU affinity tag: "share-gpu" for every fractional request
        # (whatever the share), "<k>-gpu" for k whole GPUs
        key = np.where(w.milli < MILLI, 0, w.ngpu)
        _, self.cls = np.unique(key, return_inverse=True)
        self.ncls = int(self.cls.max()) + 1 if self.cls.size else 1
        self.counts = np.zeros((len(self.s.node_gpus), self.ncls), dtype=np.int64)
        self.placed: dict[int, int] = {}
        """Job -> node we last placed it on (confirmed against the running set)."""
        self.pending: tuple[int, int] | None = None
        self.total_cap = (self.gpus_np * MILLI).max()

    def _sync(self) -> None:
        """Forget jobs that stopped, or whose placement the engine did not start."""
        running = self.e.running
        if self.pending is not None:
            job, node = self.pending
            self.pending = None
            if job not in running or running[job][0][0] != node:
                self.counts[node, self.cls[job]] -= 1
                del self.placed[job]
        if len(running) >= len(self.placed):
            return
        for job, node in list(self.placed.items()):
            if job not in running or running[job][0][0] != node:
                self.counts[node, self.cls[job]] -= 1
                del self.placed[job]

    def _tier(self, j: int, cand: I64, free: I64) -> F64:
        self._sync()
        c = self.counts[cand]
        mine = c[:, self.cls[j]] > 0
        kinds = (c > 0).sum(axis=1)
        tier = np.where(mine, np.where(kinds == 1, 3, 2), np.where(kinds == 0, 1, 0))
        used = self.total_cap - free.sum(axis=1)
        if self.integer:  # the plugin's 25 x tier + 25 x used / largest node, in integers
            out: F64 = -(25 * tier + (25 * used) // self.total_cap).astype(np.float64)
            return out
        out = -(tier + used / self.total_cap / 4.0 * 0.999)
        return out

    def _record(self, j: int, parts: Parts | None) -> Parts | None:
        if parts and self.e.ngpu[j] > 0:
            node = parts[0][0]
            old = self.placed.pop(j, None)
            if old is not None:
                self.counts[old, self.cls[j]] -= 1
            self.placed[j] = node
            self.counts[node, self.cls[j]] += 1
            self.pending = (j, node)
        return parts

    def place(self, j: int, ngpu: int, milli: int, mask: int) -> Parts | None:
        """Place as every paper policy does, and count the job on its node's class
        tally (the tiers of later tasks depend on it).
        """
        self._sync()
        return self._record(j, super().place(j, ngpu, milli, mask))

    def score_whole(self, j: int, cand: I64, free: I64, ngpu: int) -> F64:
        """The node's affinity tier, the fuller node first within a tier."""
        return self._tier(j, cand, free)

    def score_fractional(self, j: int, cand: I64, free: I64, milli: int) -> F64:
        """The node's tier, on its tightest GPU with room only."""
        tier = self._tier(j, cand, free)
        pick = np.where(free >= milli, free, MILLI + 1).argmin(axis=1)
        out = np.full(free.shape, np.inf)
        rows = np.arange(free.shape[0])
        out[rows, pick] = tier
        return out


PLUGINS = (PolicyPlugin("placement", "clustering", GpuClustering, rank=8),)
