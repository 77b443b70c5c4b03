"""``random``: a uniformly random node among those that fit, then a random GPU with room
for a fractional job (the run's seeded generator); the FGD paper's Random baseline.
The module is not ``random.py``, which would shadow the standard library module for
tools that put this folder on the path.
"""

from __future__ import annotations

import numpy as np

from gpu_trace.plugins import PolicyPlugin
from gpu_trace.replay.cluster import MILLI
from gpu_trace.replay.placement.base import PlacementBase, SplitConfig
from gpu_trace.replay.policy import Parts


class RandomFit(PlacementBase):
    """A uniformly random feasible node (then GPU); CPU-only tasks too."""

    Config = SplitConfig
    places_cpu_only = True
    """It places CPU-only tasks itself (the engine's first-fit is not used)."""

    def place(self, j: int, ngpu: int, milli: int, mask: int) -> Parts | None:
        """A uniformly random node among those that hold the job (the run's seeded
        generator), for a CPU-only task (no GPU) too.
        """
        if ngpu == 0:
            cand = np.flatnonzero(self.fits_np(0, MILLI, mask, j))
            if not cand.size:
                return None
            return [(int(cand[self.e.rng.integers(cand.size)]), -1, 0)]
        s = self.s
        if ngpu > s.gmax:
            return self.gather(ngpu, mask, j)
        cand = np.flatnonzero(self.fits_np(ngpu, milli, mask, j))
        if not cand.size:
            return self.gather(ngpu, mask, j) if self.config.split else None
        node = int(cand[self.e.rng.integers(cand.size)])
        if milli < MILLI:
            row = s.free[node]
            gpus = [g for g, f in enumerate(row) if f >= milli]
            return [(node, gpus[int(self.e.rng.integers(len(gpus)))], milli)]
        return s.whole_parts(node, ngpu)


PLUGINS = (PolicyPlugin("placement", "random", RandomFit, rank=3),)
