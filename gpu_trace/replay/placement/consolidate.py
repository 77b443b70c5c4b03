"""``consolidate``: fewest nodes, the fullest node that fits (best fit on wholly free
GPUs), in O(GPUs per node) through the free-count buckets; a fractional job takes the
fullest GPU that fits. The default placement.
"""

from __future__ import annotations

import numpy as np

from gpu_trace.plugins import PolicyPlugin
from gpu_trace.replay.cluster import MILLI
from gpu_trace.replay.placement.base import PlacementBase
from gpu_trace.replay.policy import Parts


class Consolidate(PlacementBase):
    """Fewest nodes; among single nodes the fullest one that fits."""

    def place(self, j: int, ngpu: int, milli: int, mask: int) -> Parts | None:
        """Whole GPUs: the fullest node that holds the job (fewest nodes if none does);
        fractional: the fullest GPU with room.
        """
        s = self.s
        if milli < MILLI:
            fits = self.fits_np(1, milli, mask, j)
            if not fits.any():
                return None
            free = np.where(fits[:, None] & (s.free_np >= milli), s.free_np, MILLI + 1)
            flat = int(np.argmin(free))
            node = flat // s.gmax
            return [(node, flat % s.gmax, milli)]
        if ngpu <= s.gmax and s.multi_resource and (self.e.cpu_req[j] or self.e.mem_req[j]):
            parts = self.fewest_whole_with_res(j, ngpu, mask)
            if parts is not None or ngpu <= self.max_single(mask):
                return parts
            return self.gather(ngpu, mask, j)  # larger than any allowed node
        if ngpu <= s.gmax:
            node = s.node_with_whole(ngpu, s.gmax, 1, mask)
            if node >= 0:
                return s.whole_parts(node, ngpu)
            if ngpu <= self.max_single(mask):
                return None
        return self.gather(ngpu, mask, j)

    def fewest_whole_with_res(self, j: int, ngpu: int, mask: int) -> Parts | None:
        """Multi-resource consolidate: among nodes where GPUs, CPU and memory all fit, the
        one with the fewest wholly free GPUs (ties: lowest index). Larger-than-a-node
        jobs are not affected (they gather whole nodes).
        """
        s = self.s
        node = s.node_with_whole(ngpu, s.gmax, 1, mask)  # the GPU-only choice, O(G)
        if node >= 0 and s.res_ok(node, self.e.cpu_req[j], self.e.mem_req[j]):
            return s.whole_parts(node, ngpu)
        fits = self.fits_np(ngpu, MILLI, mask, j)
        if not fits.any():
            return None
        whole = np.where(fits, (s.free_np == MILLI).sum(axis=1), s.gmax + 1)
        return s.whole_parts(int(np.argmin(whole)), ngpu)

    def max_single(self, mask: int) -> int:
        """GPUs on the largest node of the allowed types (cached per mask)."""
        cache: dict[int, int] = self.__dict__.setdefault("_max_single", {})
        got = cache.get(mask)
        if got is None:
            got = cache[mask] = self.s.capacity_for(mask)[0]
        return got


PLUGINS = (PolicyPlugin("placement", "consolidate", Consolidate, rank=0),)
