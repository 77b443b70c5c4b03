"""``spread``: the emptiest node that fits (load balance; the PAI simulator's non-packing
mode); ``split = true`` lets a job no single node holds take several.
"""

from __future__ import annotations

import numpy as np

from gpu_trace.plugins import PolicyPlugin
from gpu_trace.replay.cluster import MILLI
from gpu_trace.replay.placement.base import PlacementBase, SplitConfig
from gpu_trace.replay.policy import Parts


class Spread(PlacementBase):
    """The emptiest node that fits (load balancing)."""

    Config = SplitConfig

    def place(self, j: int, ngpu: int, milli: int, mask: int) -> Parts | None:
        """The node with the most wholly free GPUs that holds the job (fractional: the most
        free capacity).
        """
        s = self.s
        if milli >= MILLI and ngpu <= s.gmax and s.multi_resource:
            fits = self.fits_np(ngpu, milli, mask, j)
            if fits.any():
                whole = np.where(fits, (s.free_np == MILLI).sum(axis=1), -1)
                return s.whole_parts(int(np.argmax(whole)), ngpu)
        elif milli >= MILLI and ngpu <= s.gmax:
            node = s.node_with_whole(s.gmax, ngpu, -1, mask)
            if node >= 0:
                return s.whole_parts(node, ngpu)
        elif milli < MILLI:
            fits = self.fits_np(1, milli, mask, j)
            if fits.any():
                node = int(np.argmax(np.where(fits, s.node_free, -1)))
                return self.on_node(node, 1, milli, best_gpu=False)
            return None
        if ngpu > s.gmax or self.config.split:
            return self.gather(ngpu, mask, j)
        return None


PLUGINS = (PolicyPlugin("placement", "spread", Spread, rank=2),)
