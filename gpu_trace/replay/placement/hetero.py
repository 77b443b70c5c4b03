"""``hetero``: heterogeneity-aware placement (prefer the fastest GPU model).

Among the nodes that can hold the job (GPUs, CPU, memory, allowed model), take those
whose GPU model runs this job's class fastest (the throughput table, see
:mod:`gpu_trace.replay.throughput`); among them consolidate: the fewest wholly free GPUs
that still fit (a fractional job: the fullest GPU with room), ties to the lowest index.
Without a throughput table every model is 1.0 and this is ``consolidate``'s choice.
All nodes are scored at once with numpy.
"""

from __future__ import annotations

import numpy as np

from gpu_trace.plugins import PolicyPlugin
from gpu_trace.replay.cluster import MILLI
from gpu_trace.replay.placement.base import PlacementBase
from gpu_trace.replay.policy import Parts


class Hetero(PlacementBase):
    """The fastest GPU model for the job's class, then the fullest node that fits."""

    def place(self, j: int, ngpu: int, milli: int, mask: int) -> Parts | None:
        """A node of the fastest feasible model, the fullest one that fits; a job
        wider than any node is gathered over several; None when nothing fits.
        """
        s = self.s
        if ngpu > s.gmax:
            return self.gather(ngpu, mask, j)
        fits = self.fits_np(ngpu, milli, mask, j)
        if not fits.any():
            return None
        w = self.e.w
        if w.speed_table is not None and w.speed_code is not None:
            speed = w.speed_table[int(w.speed_code[j])][s.type_np]
        else:
            speed = np.ones(len(s.node_gpus))
        speed = np.where(fits, speed, -np.inf)
        best = fits & (speed >= speed.max() - 1e-12)
        if milli < MILLI:
            free = np.where(best[:, None] & (s.free_np >= milli), s.free_np, MILLI + 1)
            flat = int(np.argmin(free))
            return [(flat // s.gmax, flat % s.gmax, milli)]
        whole = np.where(best, (s.free_np == MILLI).sum(axis=1), s.gmax + 1)
        return s.whole_parts(int(np.argmin(whole)), ngpu)


PLUGINS = (PolicyPlugin("placement", "hetero", Hetero, rank=9),)
