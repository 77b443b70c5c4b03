"""``yarn``: the Tiresias simulator's default placement (``ms_yarn``), so a replay with
it can be set beside that simulator's schedules job for job.

The rule, read from SymbioticLab/Tiresias ``simulator/switch.py`` (``ms_yarn_alloc_res``,
``try_single_node_alloc``, ``try_cross_node_alloc``) and ``simulator/cluster.py``
(``ms_yarn_placement``), at commit 959f9b08f44fa1b4f2b3aed79b01e4d439264a94:

- a job of at most one node's GPUs takes the **first node by index** with that many free
  GPUs (no best fit: the node list is scanned in order and the first that fits wins);
- a larger job takes ``gpus // gpus_per_node`` **wholly free** nodes, the first ones by
  index, plus, for the remainder ``gpus % gpus_per_node``, the first node by index not
  already taken with that many free GPUs; all or nothing.

Tiresias keeps its nodes under switches and never spreads a job over two switches; the
replay clusters have no switches, so the whole cluster is one switch here. Its nodes are
alike; on a mixed cluster ``gpus_per_node`` is the largest node of the types the job may
use, and only nodes of that size count as whole nodes. On a multi-resource cluster a
node must also have the job's CPU and memory share for the GPUs it gives (Tiresias'
fixed 6 CPUs per GPU are not modelled). A fractional job (< 1 GPU) takes the first node
by index with a GPU that has room, on its fullest such GPU.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from gpu_trace.plugins import PolicyPlugin
from gpu_trace.replay.cluster import MILLI
from gpu_trace.replay.placement.base import PlacementBase
from gpu_trace.replay.policy import Parts


class Yarn(PlacementBase):
    """First node by index that fits; a multi-node job takes whole free nodes plus one
    node for the remainder (Tiresias' ``ms_yarn``).
    """

    def place(self, j: int, ngpu: int, milli: int, mask: int) -> Parts | None:
        """The first node by index that holds the job, or whole free nodes plus one for the
        remainder when the job is larger than a node.
        """
        if milli < MILLI:
            first = self._first(self.fits_np(1, milli, mask, j))
            return None if first < 0 else self.on_node(first, 1, milli)
        s = self.s
        per_node = s.capacity_for(mask)[0]
        if ngpu <= per_node:
            if not s.multi_resource:  # GPUs alone decide: the counts per node, no numpy
                first = s.first_with_whole(ngpu, mask)
                return None if first < 0 else s.whole_parts(first, ngpu)
            first = self._first(self.fits_np(ngpu, MILLI, mask, j))
            return None if first < 0 else s.whole_parts(first, ngpu)
        return self._cross_node(j, ngpu, per_node, mask)

    @staticmethod
    def _first(ok: npt.NDArray[np.bool_]) -> int:
        """The lowest index where ``ok`` holds; -1 if none."""
        hits = np.flatnonzero(ok)
        return int(hits[0]) if hits.size else -1

    def _share_ok(self, j: int, gpus: int, ngpu: int) -> npt.NDArray[np.bool_]:
        """Per node: free CPU and memory for a share of ``gpus`` of the job's ``ngpu``
        (rounded up, as the cluster shares a multi-node job's request).
        """
        s = self.s
        ok = np.ones(len(s.node_gpus), dtype=bool)
        if s.multi_resource:
            cpu, mem = self.e.cpu_req[j], self.e.mem_req[j]
            if cpu or mem:
                ok = s.res_ok_np(-(-cpu * gpus // ngpu), -(-mem * gpus // ngpu))
        return ok

    def _cross_node(self, j: int, ngpu: int, per_node: int, mask: int) -> Parts | None:
        """``try_cross_node_alloc``: the first ``ngpu // per_node`` wholly free nodes, then
        the first other node with the remainder free; None unless both are found.
        """
        s = self.s
        full, rest = divmod(ngpu, per_node)
        whole = (s.free_np == MILLI).sum(axis=1)
        sizes = np.asarray(s.node_gpus)
        allowed = s.node_ok_np(mask)
        idle = allowed & (sizes == per_node) & (whole == per_node)
        idle &= self._share_ok(j, per_node, ngpu)
        nodes = np.flatnonzero(idle)[:full]
        if nodes.size < full:
            return None
        parts: Parts = []
        for n in nodes.tolist():
            parts.extend(s.whole_parts(n, per_node))
        if rest:
            other = allowed & (whole >= rest) & self._share_ok(j, rest, ngpu)
            other[nodes] = False
            last = self._first(other)
            if last < 0:
                return None
            parts.extend(s.whole_parts(last, rest))
        return parts


PLUGINS = (PolicyPlugin("placement", "yarn", Yarn, rank=10),)
