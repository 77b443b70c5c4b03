"""``fgd-gpu``: an earlier, GPU-only reading of FGD (Weng et al., ATC'23); the paper's
own definition, on CPU, memory and GPUs with its simulator's scores, is ``fgd``
(:mod:`~gpu_trace.replay.placement.fgd`).

The fragmentation of a node is the measure of :func:`gpu_trace.analyses.sharing.fragmentation`:
for each task class of the workload (GPUs per task, per-GPU share, allowed types;
popularity from :func:`gpu_trace.analyses.sharing.task_classes`), the node's free GPU
capacity that class could not use (all of it if the class cannot be placed on the node
at all, else the partly free GPUs whose free share is below the class's per-GPU
request), weighted by popularity. FGD puts a task on the node whose fragmentation
grows the least, choosing within a node the fullest GPU with room (fractional) or any
wholly free GPUs (whole-GPU tasks).

Here the measure is re-expressed on the engine's milli-GPU matrix and evaluated for all
candidate nodes at once with numpy (nodes x GPUs x classes), so a placement costs a few
array operations instead of a Python loop over nodes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from gpu_trace.plugins import PolicyPlugin
from gpu_trace.replay.cluster import MILLI
from gpu_trace.replay.placement.base import PlacementBase
from gpu_trace.replay.policy import EngineView, HasView, Parts


def class_arrays(
    jobs: pl.DataFrame, type_mask: Any
) -> tuple[
    npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64]
]:
    """(GPUs per task, per-GPU milli, type mask, popularity) of the workload's classes."""
    # Imported here: the analyses package is not needed by any other policy, and
    # loading it at registry time cost every `replay run` start-up ~0.1 s.
    from gpu_trace.analyses.sharing import task_classes

    cls = task_classes(jobs.lazy().select("gpus", "gpu_type")).collect()
    k = cls["task_gpus"].to_numpy().astype(np.int64)
    m = np.rint(cls["per_gpu"].to_numpy() * MILLI).astype(np.int64)
    masks = np.asarray([type_mask(t) for t in cls["gpu_type"].to_list()], dtype=np.int64)
    pop = cls["popularity"].to_numpy().astype(np.float64)
    return k, m, masks, pop


def node_fragmentation(
    free: npt.NDArray[np.int64],
    node_type: npt.NDArray[np.int64],
    k: npt.NDArray[np.int64],
    m: npt.NDArray[np.int64],
    masks: npt.NDArray[np.int64],
    pop: npt.NDArray[np.float64],
) -> npt.NDArray[np.float64]:
    """Expected fragmented milli-GPU per node row of ``free`` (absent GPUs as 0)."""
    total = free.sum(axis=1)
    whole = (free == MILLI).sum(axis=1)
    maxf = free.max(axis=1)
    below = free[:, :, None] < m[None, None, :]
    unusable = (free[:, :, None] * below).sum(axis=1)
    type_ok = ((masks[None, :] >> node_type[:, None]) & 1).astype(bool)
    placeable = type_ok & np.where(
        (k > 1)[None, :] | (m >= MILLI)[None, :],
        whole[:, None] >= k[None, :],
        maxf[:, None] >= m[None, :],
    )
    frag = np.where(placeable, unusable, total[:, None])
    out: npt.NDArray[np.float64] = frag @ pop
    return out


class FgdGpu(PlacementBase):
    """Place on the node whose GPU-only fragmentation increases least.

    No options: the task classes come from the workload.
    """

    def __init__(self, config: Any, engine: EngineView | HasView) -> None:
        super().__init__(config, engine)
        self.k, self.m, self.masks, self.pop = class_arrays(self.e.w.frame, self.s.spec.type_mask)
        self.types = self.s.type_np

    def place(self, j: int, ngpu: int, milli: int, mask: int) -> Parts | None:
        """The feasible node whose fragmentation grows least when it takes the task
        (first such node on ties); a job wider than any node is gathered.
        """
        s = self.s
        if ngpu > s.gmax:
            return self.gather(ngpu, mask, j)
        fits = self.fits_np(ngpu, milli, mask, j)
        cand = np.flatnonzero(fits)
        if not cand.size:
            return None
        free = np.maximum(s.free_np[cand].astype(np.int64), 0)
        before = node_fragmentation(free, self.types[cand], self.k, self.m, self.masks, self.pop)
        after = free.copy()
        rows = np.arange(cand.size)
        if milli < MILLI:
            room = np.where(free >= milli, free, MILLI + 1)
            g = np.argmin(room, axis=1)
            after[rows, g] -= milli
        else:
            # take the first `ngpu` wholly free GPUs of each candidate
            whole = free == MILLI
            order = np.cumsum(whole, axis=1)
            after[whole & (order <= ngpu)] = 0
        delta = node_fragmentation(after, self.types[cand], self.k, self.m, self.masks, self.pop)
        best = int(np.argmin(delta - before))
        node = int(cand[best])
        return self.on_node(node, ngpu, milli)


PLUGINS = (PolicyPlugin("placement", "fgd-gpu", FgdGpu, rank=5),)
