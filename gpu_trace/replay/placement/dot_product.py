"""``dot-product``: Tetris as the FGD paper's published runs configure it, in the shared
scoring frame (:class:`~gpu_trace.replay.placement.base.ScoredPlacement`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpu_trace.plugins import PolicyPlugin
from gpu_trace.replay.cluster import MILLI, UNLIMITED
from gpu_trace.replay.placement.base import F64, I64, ScoredPlacement
from gpu_trace.replay.policy import EngineView, HasView


class DotProduct(ScoredPlacement):
    """Tetris as the published runs configure it (``-dimext merge -norm max``): the
    smallest dot product of the request (CPU, GPUs) and the node's free (CPU, GPUs),
    both divided by the largest node's; a fractional task goes on the node's tightest
    GPU with room. Integer scores: int(100 x (1 - dot / 2)), higher better.
    """

    def __init__(self, config: Any, engine: EngineView | HasView) -> None:
        super().__init__(config, engine)
        s = self.s
        finite = s.cpu_cap[s.cpu_cap < UNLIMITED]
        self.max_cpu = float(finite.max()) if finite.size else 0.0
        self.max_gpu = float(self.gpus_np.max() * MILLI) or 1.0

    def _dot(self, j: int, cand: I64, free: I64, gpu_milli: int) -> F64:
        s = self.s
        cpu: F64 = np.zeros(cand.size)
        if self.max_cpu > 0:
            cpu_free = np.minimum(s.cpu_free[cand], self.max_cpu)
            cpu = (self.e.cpu_req[j] / self.max_cpu) * (cpu_free / self.max_cpu)
        dot: F64 = cpu + (gpu_milli / self.max_gpu) * (free.sum(axis=1) / self.max_gpu)
        if not self.integer:
            return dot
        out: F64 = -np.floor(100.0 * (1.0 - dot / 2.0))
        return out

    def score_whole(self, j: int, cand: I64, free: I64, ngpu: int) -> F64:
        """The dot product with ``ngpu`` whole GPUs requested."""
        return self._dot(j, cand, free, ngpu * MILLI)

    def score_fractional(self, j: int, cand: I64, free: I64, milli: int) -> F64:
        """The node's dot product, on its tightest GPU with room only."""
        node = self._dot(j, cand, free, milli)
        pick = np.where(free >= milli, free, MILLI + 1).argmin(axis=1)
        out = np.full(free.shape, np.inf)
        rows = np.arange(free.shape[0])
        out[rows, pick] = node
        return out

    def score_cpu(self, j: int, cand: I64) -> F64:
        """The dot product of the CPU request alone."""
        free = np.maximum(self.s.free_np[cand].astype(np.int64), 0)
        return self._dot(j, cand, free, 0)


PLUGINS = (PolicyPlugin("placement", "dot-product", DotProduct, rank=6),)
