"""Placement: which GPUs of which nodes a job gets.

Shared rules: a job of at most one node's GPUs goes on one node (``split = true`` lets
spread / random / best-fit split it across nodes when no single node fits, paying the
engine's multi-node slowdown); a larger job takes the fewest nodes, biggest free first.
A fractional job (openb sharing, < 1 GPU) takes its share of one GPU.

- ``consolidate``: fewest nodes, fullest node that fits (best fit on wholly free GPUs);
  O(GPUs per node) through the free-count buckets. Fractional: the fullest GPU that fits.
- ``best-fit``: the node left with the least free capacity after placement (the FGD
  paper's BestFit baseline, counting partly used GPUs).
- ``spread``: the emptiest node (load balance; the PAI simulator's non-packing mode).
- ``random``: a uniformly random node among those that fit (seeded).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from gpu_trace.plugins import PolicyPlugin
from gpu_trace.replay.cluster import ANY_TYPE, MILLI, ClusterView
from gpu_trace.replay.policy import EngineView, HasView, Parts, view_of


@dataclass(frozen=True)
class SplitConfig:
    """Options of the placements that can split a job across nodes."""

    split: bool = field(
        default=False,
        metadata={"help": "Split a job across nodes when no single node can hold it."},
    )


@dataclass(frozen=True)
class ConsolidateConfig:
    """Options of ``consolidate`` (none)."""

    pass


class PlacementBase:
    """Multi-node and fractional helpers shared by the placement policies."""

    Config: Any = ConsolidateConfig

    def __init__(self, config: Any, engine: EngineView | HasView) -> None:
        self.config = config
        self.e = view_of(engine)
        self.s: ClusterView = self.e.state

    def gather(self, need: int, mask: int, j: int = -1) -> Parts | None:
        """Fewest nodes: take wholly free GPUs from the nodes with the most of them
        (ties: lowest node index); with job ``j`` on a multi-resource cluster, only
        nodes with its CPU and memory share for what they give.
        """
        s = self.s
        if s.whole_free(mask) < need:
            return None
        parts: Parts = []
        rem = need
        cpu, mem = (self.e.cpu_req[j], self.e.mem_req[j]) if j >= 0 else (0, 0)
        for node, k in s.iter_by_whole(mask):
            take = min(k, rem)
            if cpu:  # at most the GPUs whose CPU share the node has free
                take = min(take, int(s.cpu_free[node]) * need // cpu)
            if mem:
                take = min(take, int(s.mem_free[node]) * need // mem)
            if take <= 0:
                continue
            parts.extend(s.whole_parts(node, take))
            rem -= take
            if rem == 0:
                return parts
        return None

    def fits_np(self, ngpu: int, milli: int, mask: int, j: int = -1) -> npt.NDArray[np.bool_]:
        """Per node: can it hold the request alone? With job ``j`` on a multi-resource
        cluster, also its CPU and memory (a job fits only where all of them fit).
        """
        s = self.s
        ok = s.node_ok_np(mask) if mask != ANY_TYPE else np.ones(len(s.node_gpus), dtype=bool)
        if j >= 0 and s.multi_resource:
            cpu, mem = self.e.cpu_req[j], self.e.mem_req[j]
            if cpu or mem:
                ok = ok & s.res_ok_np(cpu, mem)
        if milli >= MILLI:
            fit: npt.NDArray[np.bool_] = ok & ((s.free_np == MILLI).sum(axis=1) >= ngpu)
        else:
            fit = ok & (s.free_np >= milli).any(axis=1)
        return fit

    def on_node(self, node: int, ngpu: int, milli: int, best_gpu: bool = True) -> Parts:
        """The parts of the request on ``node``: whole GPUs, or the fullest (best_gpu)
        or emptiest GPU with room for a fractional share.
        """
        s = self.s
        if milli >= MILLI:
            return s.whole_parts(node, ngpu)
        row = s.free[node]
        pick, val = -1, -1
        for g, f in enumerate(row):
            if f >= milli and (pick < 0 or (f < val if best_gpu else f > val)):
                pick, val = g, f
        return [(node, pick, milli)]

    def place(self, j: int, ngpu: int, milli: int, mask: int) -> Parts | None:
        """Every placement policy decides where; the base class has no rule."""
        raise NotImplementedError


class Consolidate(PlacementBase):
    """Fewest nodes; among single nodes the fullest one that fits."""

    Config = ConsolidateConfig

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


class BestFit(PlacementBase):
    """The node with the least free capacity left after placement."""

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


class RandomFit(PlacementBase):
    """A uniformly random node among those that fit (the engine's seeded generator)."""

    Config = SplitConfig

    def place(self, j: int, ngpu: int, milli: int, mask: int) -> Parts | None:
        """A uniformly random node among those that hold the job (the run's seeded
        generator).
        """
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


PLUGINS = (
    PolicyPlugin("placement", "consolidate", Consolidate, rank=0),
    PolicyPlugin("placement", "spread", Spread, rank=2),
)
