"""``gpu-packing`` (GPU packing, the FGD paper's baseline): prefer partly used GPUs
(least free share first), then wholly free GPUs of a partly used node (fewest), then an
idle node (fewest GPUs), in the shared scoring frame
(:class:`~gpu_trace.replay.placement.base.ScoredPlacement`). Named ``packing`` before,
which also named the arrival-only scheduler; the old name still works, with a warning.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from gpu_trace.plugins import PolicyPlugin
from gpu_trace.replay.cluster import MILLI
from gpu_trace.replay.placement.base import F64, I64, ScoredPlacement


class GpuPacking(ScoredPlacement):
    """Partly used GPUs first, then free GPUs of used nodes, then idle nodes."""

    def score_whole(self, j: int, cand: I64, free: I64, ngpu: int) -> F64:
        """The simulator's packing score, negated: a used node above an idle one, and
        among idle nodes the one with fewest GPUs.
        """
        g = self.gpus_np[cand]
        whole = (free == MILLI).sum(axis=1)
        idle = whole == g
        # higher is better in the paper's integer scores; we minimise the negative
        used_node = np.maximum(50 - ngpu, 33)  # a whole-GPU task takes ngpu free GPUs
        idle_node = np.maximum(33 - whole, whole)
        score = np.where(idle, idle_node, used_node)
        out: F64 = -score.astype(np.float64)
        return out

    def score_fractional(self, j: int, cand: I64, free: I64, milli: int) -> F64:
        """The packing score on the one GPU per node the rule picks: a partly used GPU
        with room (least free first), else a free GPU, an idle node last.
        """
        g = self.gpus_np[cand]
        whole = (free == MILLI).sum(axis=1)
        idle = whole == g
        partly = (free >= milli) & (free < MILLI)
        # case 1: a partly used GPU has room: 100 - free%/10 of the GPU used, >= 50
        case1 = np.maximum(100 - (free * 100 // MILLI) // 10, 50)
        case2 = np.full(free.shape, 49)  # 50 - one free GPU, capped at 33
        case3 = np.maximum(33 - whole, whole)[:, None] * np.ones_like(free)
        score = np.where(idle[:, None], case3, np.where(partly, case1, case2))
        # on a node where some partly used GPU fits, the simulator uses it (min free first)
        has_partly: npt.NDArray[np.bool_] = np.asarray(partly.any(axis=1))
        use = np.where(has_partly[:, None], partly, free >= milli)
        # within a node only the GPU the packing rule picks: the least free one with room
        pick = np.where(use, free, MILLI + 1).argmin(axis=1)
        out = np.full(free.shape, np.inf)
        rows = np.arange(free.shape[0])
        out[rows, pick] = -score[rows, pick]
        return out


PLUGINS = (PolicyPlugin("placement", "gpu-packing", GpuPacking, rank=7, deprecated=("packing",)),)
