"""What the placement policies share: the rules for multi-node and fractional jobs
(:class:`PlacementBase`) and the FGD paper's scoring frame (:class:`ScoredPlacement`).

Shared rules: a job of at most one node's GPUs goes on one node (``split = true`` lets
spread / random / best-fit split it across nodes when no single node fits, paying the
engine's multi-node slowdown); a larger job takes the fewest nodes, biggest free first.
A fractional job (openb sharing, < 1 GPU) takes its share of one GPU.

The scoring frame (Weng et al., ATC'23, section 6, on the multi-resource node model: a
node's GPUs in milli-GPU, CPU and memory), all nodes scored at once with numpy (no Python
loop over nodes per decision):

- *feasible nodes*: GPU model allowed, CPU and memory free, and the GPUs: ``k`` wholly
  free GPUs for a whole-GPU task, one GPU with the share free for a fractional one;
- *options*: a whole-GPU task has one option per node (which wholly free GPUs it takes
  changes no score); a fractional task has one option per (node, GPU with room);
- *ties*: as ``ties`` says (the published simulator's seeded node order, uniformly at
  random, or the first), as the Kubernetes scheduler the paper's simulator runs on
  picks among equal node scores.

Multi-node tasks (more GPUs than any node has) fall back to the shared ``gather``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from gpu_trace.errors import GpuTraceError
from gpu_trace.replay.cluster import ANY_TYPE, MILLI, UNLIMITED, ClusterView
from gpu_trace.replay.policy import EngineView, HasView, NoConfig, Parts, view_of

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
EPS = 1e-9


@dataclass(frozen=True)
class SplitConfig:
    """Options of the placements that can split a job across nodes."""

    split: bool = field(
        default=False,
        metadata={"help": "Split a job across nodes when no single node can hold it."},
    )


TIES_HELP = (
    "Equal best scores: ordered (the published simulator's rule: the node first in a "
    "seeded random node order, then the lowest GPU index), random (uniform, seeded), "
    "first (lowest node and GPU index) or auto (ordered on a multi-resource cluster, "
    "first on a GPU-only one, so GPU-only replays stay as they were)."
)
SCORES_HELP = (
    "integer (each option scored 0-100 in whole numbers, as the simulator's Kubernetes "
    "score plugin returns it, so near-equal options tie), exact (unrounded) or auto "
    "(integer on a multi-resource cluster, exact on a GPU-only one)."
)


@dataclass(frozen=True)
class ScoreConfig:
    """Options every scored placement has: how ties are broken and how scores are
    rounded.
    """

    ties: str = field(default="auto", metadata={"help": TIES_HELP})
    scores: str = field(default="auto", metadata={"help": SCORES_HELP})


class PlacementBase:
    """Multi-node and fractional helpers shared by the placement policies."""

    Config: Any = NoConfig

    def __init__(self, config: Any, engine: EngineView | HasView) -> None:
        self.config = config
        self.e = view_of(engine)
        self.s: ClusterView = self.e.state

    @property
    def splits(self) -> bool:
        """Whether this placement may split a job across nodes when no single node
        fits (its ``split`` option; the what-ifs count room the same way).
        """
        return bool(getattr(self.config, "split", False))

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


class ScoredPlacement(PlacementBase):
    """The FGD paper's frame: feasible nodes, options, ties as its simulator breaks them;
    subclasses score the options (lower is better).
    """

    Config: Any = ScoreConfig
    places_cpu_only = True
    """It scores nodes for CPU-only tasks itself (the engine's first-fit is not used)."""

    def __init__(self, config: Any, engine: EngineView | HasView) -> None:
        super().__init__(config, engine)
        s = self.s
        self.gpus_np = np.asarray(s.node_gpus, dtype=np.int64)
        ties = getattr(config, "ties", "auto")
        if ties not in {"auto", "ordered", "random", "first"}:
            msg = f"placement option ties={ties!r}: use auto, ordered, random or first"
            raise GpuTraceError(msg)
        if ties == "auto":
            ties = "ordered" if s.multi_resource else "first"
        scores = getattr(config, "scores", "auto")
        if scores not in {"auto", "integer", "exact"}:
            msg = f"placement option scores={scores!r}: use auto, integer or exact"
            raise GpuTraceError(msg)
        self.integer = scores == "integer" or (scores == "auto" and s.multi_resource)
        """Score options in whole numbers 0-100 as the simulator's plugins do."""
        self.random_ties = ties == "random"
        self.rank: I64 | None = None
        """Tie-break rank of each node (``ordered``): the simulator prefixes node names
        with a seeded random permutation and its scheduler keeps the lowest name."""
        if ties == "ordered":
            self.rank = self.e.rng.permutation(len(s.node_gpus)).astype(np.int64)
        cap_cpu = s.cpu_cap.astype(np.float64)
        self.cpu_norm = np.where(s.cpu_cap >= UNLIMITED, np.inf, cap_cpu)

    def pick(self, cand: I64, score: F64, per_node: int = 1) -> int:
        """Index into ``score`` of a best (lowest) score; ties (see ``ties``) to the
        node of lowest rank and within it the first option, at random, or to the first.
        ``score`` holds ``per_node`` options per node of ``cand`` (row-major).
        """
        best = np.flatnonzero(score <= score.min() + EPS)
        if best.size == 1:
            return int(best[0])
        if self.rank is not None:
            r = self.rank[cand[best // per_node]]
            return int(best[np.flatnonzero(r == r.min())[0]])
        if not self.random_ties:
            return int(best[0])
        return int(best[self.e.rng.integers(best.size)])

    def place(self, j: int, ngpu: int, milli: int, mask: int) -> Parts | None:
        """The best-scored option among the feasible nodes (CPU-only, whole-GPU or
        fractional task); a task wider than any node is gathered over several; None
        when nothing fits.
        """
        s = self.s
        if ngpu == 0:
            cand = np.flatnonzero(self.fits_np(0, MILLI, mask, j))
            if not cand.size:
                return None
            return [(int(cand[self.pick(cand, self.score_cpu(j, cand))]), -1, 0)]
        if ngpu > s.gmax:
            return self.gather(ngpu, mask, j)
        cand = np.flatnonzero(self.fits_np(ngpu, milli, mask, j))
        if not cand.size:
            return None
        free = np.maximum(s.free_np[cand].astype(np.int64), 0)
        if milli < MILLI:
            score = self.score_fractional(j, cand, free, milli)  # (cand, G), inf = no room
            flat = self.pick(cand, score.ravel(), s.gmax)
            node, g = divmod(flat, s.gmax)
            return [(int(cand[node]), int(g), milli)]
        score1 = self.score_whole(j, cand, free, ngpu)
        return s.whole_parts(int(cand[self.pick(cand, score1)]), ngpu)

    def score_fractional(self, j: int, cand: I64, free: I64, milli: int) -> F64:
        """Score (lower is better) of a fractional task per feasible node and GPU,
        shape (cand, G), ``inf`` where the GPU has no room or is not the option.
        """
        raise NotImplementedError

    def score_cpu(self, j: int, cand: I64) -> F64:
        """Score of a CPU-only task (no GPU) on each feasible node; default: all equal
        (random among them), as the GPU packing and clustering scores give them.
        """
        return np.zeros(cand.size)

    def score_whole(self, j: int, cand: I64, free: I64, ngpu: int) -> F64:
        """Score (lower is better) of a whole-GPU task on each feasible node."""
        raise NotImplementedError
