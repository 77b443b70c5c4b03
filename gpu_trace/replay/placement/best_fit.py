"""``best-fit``: the node left with the least free capacity after placement.

On a GPU-only cluster the single-resource rule (:class:`GpuBestFit`: least free
milli-GPU left, partly used GPUs counted); on a multi-resource one the FGD paper's
BestFit baseline (:class:`BestFit`): the least weighted free CPU and GPU left,
0.5 x CPU / max node CPU + 0.5 x GPU / max node GPU.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpu_trace.plugins import PolicyPlugin
from gpu_trace.replay.cluster import MILLI, UNLIMITED
from gpu_trace.replay.placement.base import (
    F64,
    I64,
    SCORES_HELP,
    TIES_HELP,
    PlacementBase,
    ScoredPlacement,
    SplitConfig,
)
from gpu_trace.replay.policy import EngineView, HasView, Parts


@dataclass(frozen=True)
class BestFitConfig:
    """BestFit's options: the shared tie and score rules, and whether a job no single
    node can hold may be split (used by the single-resource ``best-fit``).
    """

    split: bool = field(
        default=False,
        metadata={"help": "Split a job across nodes when no single node can hold it."},
    )
    ties: str = field(default="auto", metadata={"help": TIES_HELP})
    scores: str = field(default="auto", metadata={"help": SCORES_HELP})


class GpuBestFit(PlacementBase):
    """The node with the least free capacity left after placement (GPUs only: the
    rule ``best-fit`` follows on a cluster that models GPUs alone).
    """

    Config = SplitConfig

    def place(self, j: int, ngpu: int, milli: int, mask: int) -> Parts | None:
        """The node left with the least free capacity once the job is placed."""
        s = self.s
        if ngpu > s.gmax:
            return self.gather(ngpu, mask, j)
        fits = self.fits_np(ngpu, milli, mask, j)
        if not fits.any():
            return self.gather(ngpu, mask, j) if self.config.split else None
        left = np.where(fits, s.node_free, np.iinfo(np.int64).max)
        return self.on_node(int(np.argmin(left)), ngpu, milli)


class BestFit(ScoredPlacement):
    """Multi-resource BestFit; the single-resource ``best-fit`` on GPU-only clusters."""

    Config = BestFitConfig

    def __init__(self, config: Any, engine: EngineView | HasView) -> None:
        super().__init__(config, engine)
        self.plain = GpuBestFit(config, engine)
        s = self.s
        finite = s.cpu_cap[s.cpu_cap < UNLIMITED]
        self.max_cpu = float(finite.max()) if finite.size else 1.0
        self.max_gpu = float(self.gpus_np.max() * MILLI)

    def place(self, j: int, ngpu: int, milli: int, mask: int) -> Parts | None:
        """The multi-resource BestFit, or the original ``best-fit`` when the cluster
        models GPUs only (so GPU-only replays keep their results).
        """
        if not self.s.multi_resource:
            return self.plain.place(j, ngpu, milli, mask)
        return super().place(j, ngpu, milli, mask)

    def _left(self, j: int, cand: I64, free: I64, gpu_milli: int) -> F64:
        """Weighted free CPU and GPU left after placement (lower is better); with
        integer scores the plugin's: int(100 x (1 - left)), min-max normalised to 0-100
        over the feasible nodes in integers (the framework's NormalizeScore), negated.
        """
        s = self.s
        cpu_left = np.minimum(s.cpu_free[cand] - self.e.cpu_req[j], self.max_cpu)
        gpu_left = free.sum(axis=1) - gpu_milli
        out: F64 = 0.5 * cpu_left / self.max_cpu + 0.5 * gpu_left / self.max_gpu
        if not self.integer:
            return out
        raw = np.floor((1.0 - out) * 100.0).astype(np.int64)
        lo, hi = int(raw.min()), int(raw.max())
        norm = (raw - lo) * 100 // (hi - lo) if hi > lo else np.zeros_like(raw)
        score: F64 = -norm.astype(np.float64)
        return score

    def score_whole(self, j: int, cand: I64, free: I64, ngpu: int) -> F64:
        """What is left on each node after taking ``ngpu`` whole GPUs."""
        return self._left(j, cand, free, ngpu * MILLI)

    def score_cpu(self, j: int, cand: I64) -> F64:
        """What is left on each node after taking the CPU request only."""
        free = np.maximum(self.s.free_np[cand].astype(np.int64), 0)
        return self._left(j, cand, free, 0)

    def score_fractional(self, j: int, cand: I64, free: I64, milli: int) -> F64:
        """What is left on each node, on its tightest GPU with room only."""
        left = self._left(j, cand, free, milli)
        pick = np.where(free >= milli, free, MILLI + 1).argmin(axis=1)
        out = np.full(free.shape, np.inf)
        rows = np.arange(free.shape[0])
        out[rows, pick] = left
        return out


PLUGINS = (PolicyPlugin("placement", "best-fit", BestFit, rank=1),)
