"""The FGD paper's placement policies (Weng et al., ATC'23, section 6), on the
multi-resource node model: a node's GPUs (milli-GPU each), CPU and memory.

Every policy here shares one node and GPU-selection frame, all nodes scored at once with
numpy (no Python loop over nodes per decision):

- *feasible nodes*: GPU model allowed, CPU and memory free, and the GPUs: ``k`` wholly
  free GPUs for a whole-GPU task, one GPU with the share free for a fractional one;
- *options*: a whole-GPU task has one option per node (which wholly free GPUs it takes
  changes no score); a fractional task has one option per (node, GPU with room);
- *ties*: uniformly at random among the best options (seeded engine generator), as the
  Kubernetes scheduler the paper's simulator runs on picks among equal node scores.

Policies (the paper's definitions, as its published simulator scores them):

- ``fgd``: the option minimising the growth of the node's *expected fragmentation*
  (:func:`expected_fragmentation`) over the workload's typical task classes.
- ``dot-product`` (Tetris): the option minimising the dot product of the task's request
  and the node's free resources, both normalised by the node's capacity (CPU, GPU).
- ``packing`` (GPU packing): prefer using partly used GPUs (least free share first), then
  wholly free GPUs of a partly used node (fewest), then an idle node (fewest GPUs).
- ``clustering`` (GPU clustering): prefer nodes running only tasks of the same GPU
  request, then nodes that include it, then idle nodes, then others; within a tier the
  node with the least free GPU.
- ``best-fit`` (multi-resource): the node with the least weighted free CPU and GPU left
  after placement, 0.5 x CPU / max node CPU + 0.5 x GPU / max node GPU (the paper's
  BestFit); on a GPU-only cluster the original single-resource ``best-fit``.

Multi-node tasks (more GPUs than any node has) fall back to the shared ``gather``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from gpu_trace.errors import GpuTraceError
from gpu_trace.plugins import PolicyPlugin
from gpu_trace.replay.cluster import MILLI, UNLIMITED
from gpu_trace.replay.policies.placement import BestFit, PlacementBase, RandomFit
from gpu_trace.replay.policy import EngineView, HasView, Parts
from gpu_trace.replay.workload import CLONE_TAG

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
EPS = 1e-9


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
class NoConfig:
    """Options every paper policy has: how ties are broken and how scores are rounded."""

    ties: str = field(default="auto", metadata={"help": TIES_HELP})
    scores: str = field(default="auto", metadata={"help": SCORES_HELP})


@dataclass(frozen=True)
class BestFitConfig:
    """BestFit's options: the shared tie and score rules, and whether a job no single
    node can hold may be split (used by the single-resource ``best-fit``).
    """

    split: bool = field(
        default=False,
        metadata={"help": "Split a job across nodes when no single node can hold it."},
    )
    ties: str = field(default="auto", metadata={"help": TIES_HELP})
    scores: str = field(default="auto", metadata={"help": SCORES_HELP})


@dataclass(frozen=True)
class FgdPaperConfig:
    """FGD's options: the shared tie and score rules, and how the workload's typical
    task classes (the ones fragmentation is measured against) are chosen.
    """

    ties: str = field(default="auto", metadata={"help": TIES_HELP})
    scores: str = field(
        default="auto",
        metadata={"help": SCORES_HELP + " FGD's integer score: int(100 x sigmoid(-delta / 1000))."},
    )
    popularity_pct: float = field(
        default=95.0,
        metadata={
            "help": "Typical task classes: the most popular ones, class_step classes at a "
            "time, until they cover this share of tasks (95: the published runs' setting)."
        },
    )
    class_step: int = field(
        default=1, metadata={"help": "Typical classes are taken this many at a time (runs: 1)."}
    )
    cpu_classes: bool = field(
        default=True,
        metadata={
            "help": "CPU-only tasks are typical classes too (the published runs' setting); "
            "all free GPU of a node counts as a fragment for them."
        },
    )


@dataclass(frozen=True)
class TaskClasses:
    """The workload's typical task classes and their popularity (sums to 1)."""

    cpu: I64
    mem: I64
    k: I64
    """GPUs per task."""
    m: I64
    """Milli-GPU per GPU (1000 for whole-GPU tasks)."""
    mask: I64
    """Allowed GPU-type bit mask (ANY_TYPE = any)."""
    p: F64


def typical_classes(
    cpu: I64, mem: I64, ngpu: I64, milli: I64, mask: I64, pct: float = 95.0, step: int = 1
) -> TaskClasses:
    """Group tasks by (CPU, memory, GPUs, per-GPU share, type constraint), most popular
    first (equal counts: larger CPU, then share, GPUs, constraint first, as the
    simulator's reverse sort); keep the leading classes, ``step`` at a time, until they
    hold ``pct`` % of tasks (the FGD simulator's ``GetTypicalPods``), renormalised.
    """
    df = pl.DataFrame({"cpu": cpu, "mem": mem, "k": ngpu, "m": milli, "mask": mask})
    g = (
        df.group_by(["cpu", "mem", "k", "m", "mask"])
        .len()
        .sort(["len", "cpu", "m", "k", "mask", "mem"], descending=True)
    )
    cum = g["len"].cum_sum().to_numpy() / max(1, df.height)
    need = int(np.searchsorted(cum, pct / 100.0 - EPS) + 1)
    keep = min(g.height, -(-need // step) * step)
    g = g.head(keep)
    p = g["len"].to_numpy().astype(np.float64)
    return TaskClasses(
        g["cpu"].to_numpy().astype(np.int64),
        g["mem"].to_numpy().astype(np.int64),
        g["k"].to_numpy().astype(np.int64),
        g["m"].to_numpy().astype(np.int64),
        g["mask"].to_numpy().astype(np.int64),
        p / p.sum() if p.size else p,
    )


def expected_fragmentation(free: I64, cpu: I64, mem: I64, node_type: I64, tc: TaskClasses) -> F64:
    """Expected fragmented milli-GPU of each node row (the paper's F_n(M)).

    For one task class m: if m cannot run on the node at all (GPU model not allowed,
    too little CPU or memory, or fewer than k GPUs with m's per-GPU share free) every
    free milli-GPU of the node is a fragment; otherwise the free milli-GPU on GPUs whose
    free share is below m's per-GPU request are. F_n(M) = sum over classes of popularity
    x F_n(m). ``free``: nodes x GPUs (absent GPUs as 0).
    """
    total = free.sum(axis=-1)
    big = free[..., :, None] >= tc.m  # (..., G, C): GPU can host the class's share
    unusable = (free[..., :, None] * ~big).sum(axis=-2)
    count = big.sum(axis=-2)
    type_ok = ((tc.mask >> node_type[..., None]) & 1).astype(bool)
    ok = type_ok & (cpu[..., None] >= tc.cpu) & (mem[..., None] >= tc.mem) & (count >= tc.k)
    frag = np.where(ok & (tc.k > 0), unusable, total[..., None])
    out: F64 = frag @ tc.p
    return out


class PaperBase(PlacementBase):
    """Shared frame: feasible nodes, options, random ties; subclasses score options."""

    Config: Any = NoConfig
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


class FgdPaper(PaperBase):
    """FGD: the option that grows the node's expected fragmentation least.

    Scores depend only on a node's own state and the task's request, so they are kept
    per request key ((GPUs, share, CPU, memory) -> per-node deltas) and recomputed only
    for nodes whose state changed since that key was last scored (found by comparing a
    snapshot of the free arrays: any change, by any job, is seen). Still numpy over the
    changed nodes, never a Python loop over nodes.
    """

    Config = FgdPaperConfig
    CACHE_KEYS = 512

    def __init__(self, config: Any, engine: EngineView | HasView) -> None:
        super().__init__(config, engine)
        e = self.e
        w = e.w
        # the typical classes come from the trace's own tasks (as the simulator's, which
        # takes them from the workload before inflation), CPU-only ones when configured
        gpu = ~w.frame["job_id"].str.contains(CLONE_TAG, literal=True).to_numpy()
        if not config.cpu_classes:
            gpu &= w.ngpu > 0
        self.tc = typical_classes(
            np.asarray(e.cpu_req, dtype=np.int64)[gpu],
            np.zeros(int(gpu.sum()), dtype=np.int64),  # memory: not in the paper's measure
            w.ngpu[gpu],
            w.milli[gpu],
            np.asarray(e.mask, dtype=np.int64)[gpu],
            config.popularity_pct,
            config.class_step,
        )
        # CPU-only classes count every free milli-GPU of a node as a fragment whatever the
        # node's state (the simulator's XL / XR cases): one constant share p0 of the free
        # total, so only the GPU classes are evaluated per node
        tc = self.tc
        g = tc.k > 0
        self.p0 = float(tc.p[~g].sum())
        self.tcg = TaskClasses(tc.cpu[g], tc.mem[g], tc.k[g], tc.m[g], tc.mask[g], tc.p[g])
        # classes differing only in CPU (or model) share their GPU shape (k, share): the
        # per-GPU terms are computed once per shape (openb: 12 shapes for 30 classes)
        shapes, inv = np.unique(np.stack([self.tcg.k, self.tcg.m]), axis=1, return_inverse=True)
        self.sk, self.sm = shapes[0], shapes[1]
        self.onehot = np.zeros((self.tcg.p.size, shapes.shape[1]))
        self.onehot[np.arange(self.tcg.p.size), inv.ravel()] = 1.0
        self.ptot = float(self.tcg.p.sum())
        s = self.s
        self.types = s.type_np
        # per node type and CPU level, the weight of each shape's classes that can run:
        # wtab[t, i, s] over the classes of shape s allowed on type t needing at most
        # the i-th smallest class CPU (one lookup per node instead of rows x classes)
        tcg = self.tcg
        self.cpu_levels = np.unique(tcg.cpu)
        ntypes = int(self.types.max()) + 1 if self.types.size else 1
        self.wtab = np.zeros((ntypes, self.cpu_levels.size + 1, shapes.shape[1]))
        for t in range(ntypes):
            allowed = ((tcg.mask >> t) & 1).astype(bool)
            for i, level in enumerate(self.cpu_levels):
                take = allowed & (tcg.cpu <= level)
                self.wtab[t, i + 1] = (tcg.p * take) @ self.onehot
        self.snap_free = s.free_np.copy()
        self.snap_cpu = s.cpu_free.copy()
        n = len(s.node_gpus)
        self.tick = 0
        self.ver = np.zeros(n, dtype=np.int64)
        self.before_ver = np.full(n, -1, dtype=np.int64)
        self.before_val = np.zeros(n, dtype=np.float64)
        self.cache: dict[tuple[int, int, int], tuple[I64, F64]] = {}

    def _refresh(self) -> None:
        """Bump the version of every node whose state differs from the snapshot."""
        s = self.s
        # memory is not part of the measure, so a change of memory alone changes nothing
        changed = (self.snap_free != s.free_np).any(axis=1) | (self.snap_cpu != s.cpu_free)
        rows = np.flatnonzero(changed)
        if rows.size:
            self.tick += 1
            self.ver[rows] = self.tick
            self.snap_free[rows] = s.free_np[rows]
            self.snap_cpu[rows] = s.cpu_free[rows]

    def _deltas(self, j: int, cand: I64, ngpu: int, milli: int) -> F64:
        """Per node (whole-GPU: (N,)) or per node and GPU (fractional: (N, G)) score
        (:meth:`_q` of the growth of expected fragmentation), brought up to date for the
        changed nodes among ``cand`` (the feasible ones: the others are never read).
        """
        self._refresh()
        e = self.e
        # memory is not part of the measure (a typical class needs none), so the key
        # leaves it out: values are read only for nodes where the task fits anyway
        key = (ngpu, milli, e.cpu_req[j])
        got = self.cache.pop(key, None)
        n, g = self.snap_free.shape
        if got is None:
            got = (
                np.full(n, -1, dtype=np.int64),
                np.zeros(n if milli >= MILLI else (n, g), dtype=np.float64),
            )
        ver, vals = got
        rows = cand[ver[cand] != self.ver[cand]]
        if rows.size:
            vals[rows] = self._q(self._compute(rows, ngpu, milli, key[2]))
            ver[rows] = self.ver[rows]
        self.cache[key] = got
        if len(self.cache) > self.CACHE_KEYS:
            self.cache.pop(next(iter(self.cache)))
        out: F64 = vals[cand]
        return out

    def _weights(self, cpu: I64, types: I64) -> F64:
        """Per row and GPU shape: the popularity of the classes of that shape whose
        GPU model and CPU the node has ((R, S)).
        """
        level = np.searchsorted(self.cpu_levels, cpu, side="right")
        out: F64 = self.wtab[types, level]
        return out

    def _frag(self, free: I64, cpu: I64, types: I64) -> F64:
        """F_n(M) of node rows (= :func:`expected_fragmentation`, computed per GPU
        shape): everything free is a fragment, less, for each class that can run, the
        free GPU it can use; plus p0 x the free total for the CPU-only classes.
        """
        total = free.sum(axis=1)
        big = free[:, :, None] >= self.sm  # (R, G, S)
        unusable = (free[:, :, None] * ~big).sum(axis=1)  # (R, S)
        usable = (total[:, None] - unusable) * (big.sum(axis=1) >= self.sk)
        out: F64 = (self.ptot + self.p0) * total - (usable * self._weights(cpu, types)).sum(axis=1)
        return out

    def _before(self, rows: I64, free: I64, cpu: I64, types: I64) -> F64:
        """Current expected fragmentation of ``rows`` (kept per node, recomputed only
        where the node changed: it does not depend on the task).
        """
        stale = self.before_ver[rows] != self.ver[rows]
        if stale.any():
            idx = np.flatnonzero(stale)
            self.before_val[rows[idx]] = self._frag(free[idx], cpu[idx], types[idx])
            self.before_ver[rows[idx]] = self.ver[rows[idx]]
        out: F64 = self.before_val[rows]
        return out

    def _compute(self, rows: I64, ngpu: int, milli: int, cpu_req: int) -> F64:
        free = np.maximum(self.snap_free[rows].astype(np.int64), 0)
        cpu, types = self.snap_cpu[rows], self.types[rows]
        before = self._before(rows, free, cpu, types)
        cpu2 = cpu - cpu_req
        if milli >= MILLI:
            after = free.copy()
            whole = free == MILLI
            after[whole & (np.cumsum(whole, axis=1) <= ngpu)] = 0
            out: F64 = self._frag(after, cpu2, types) - before
            return out
        # fractional: one option per GPU, from per-class sums (rows x GPUs x classes,
        # not rows x GPUs x GPUs x classes): taking `milli` from GPU g changes only g's
        # own terms of the unusable sum and of the count of GPUs that can host a class
        big = free[:, :, None] >= self.sm  # (R, G, S)
        unusable = (free[:, :, None] * ~big).sum(axis=1)  # (R, S)
        count = big.sum(axis=1)
        f2 = free - milli
        big2 = f2[:, :, None] >= self.sm
        u2 = unusable[:, None, :] - free[:, :, None] * ~big + np.maximum(f2, 0)[:, :, None] * ~big2
        c2 = count[:, None, :] - big + big2
        total2 = free.sum(axis=1) - milli
        usable = (total2[:, None, None] - u2) * (c2 >= self.sk)
        w2 = self._weights(cpu2, types)
        frag2 = (self.ptot + self.p0) * total2[:, None] - (usable * w2[:, None, :]).sum(axis=2)
        delta: F64 = np.where(free >= milli, frag2 - before[:, None], np.inf)
        return delta

    def _q(self, delta: F64) -> F64:
        """FGD's score to minimise: the growth of fragmentation, or (integer scores)
        minus the plugin's int(100 x sigmoid(-growth / 1000)): 50 for no change, 49 for
        any growth under ~40 milli-GPU, 51 for a drop of 40 or more.
        """
        if not self.integer:
            return delta
        with np.errstate(over="ignore", invalid="ignore"):
            score = np.floor(100.0 / (1.0 + np.exp(delta / 1000.0)))
        out: F64 = np.where(np.isfinite(delta), -score, np.inf)
        return out

    def score_whole(self, j: int, cand: I64, free: I64, ngpu: int) -> F64:
        """Fragmentation growth of taking ``ngpu`` whole GPUs on each node."""
        return self._deltas(j, cand, ngpu, MILLI)

    def score_fractional(self, j: int, cand: I64, free: I64, milli: int) -> F64:
        """Fragmentation growth of taking ``milli`` on each GPU of each node."""
        return self._deltas(j, cand, 1, milli)

    def score_cpu(self, j: int, cand: I64) -> F64:
        """Fragmentation growth of the task's CPU alone (it can strand a node's GPUs)."""
        return self._deltas(j, cand, 0, MILLI)


class DotProduct(PaperBase):
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


class GpuPacking(PaperBase):
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


class GpuClustering(PaperBase):
    """Nodes already running the same GPU request first (homogeneous nodes)."""

    def __init__(self, config: Any, engine: EngineView | HasView) -> None:
        super().__init__(config, engine)
        w = self.e.w
        # the simulator's GPU affinity tag: "share-gpu" for every fractional request
        # (whatever the share), "<k>-gpu" for k whole GPUs
        key = np.where(w.milli < MILLI, 0, w.ngpu)
        _, self.cls = np.unique(key, return_inverse=True)
        self.ncls = int(self.cls.max()) + 1 if self.cls.size else 1
        self.counts = np.zeros((len(self.s.node_gpus), self.ncls), dtype=np.int64)
        self.placed: dict[int, int] = {}
        """Job -> node we last placed it on (confirmed against the running set)."""
        self.pending: tuple[int, int] | None = None
        self.total_cap = (self.gpus_np * MILLI).max()

    def _sync(self) -> None:
        """Forget jobs that stopped, or whose placement the engine did not start."""
        running = self.e.running
        if self.pending is not None:
            job, node = self.pending
            self.pending = None
            if job not in running or running[job][0][0] != node:
                self.counts[node, self.cls[job]] -= 1
                del self.placed[job]
        if len(running) >= len(self.placed):
            return
        for job, node in list(self.placed.items()):
            if job not in running or running[job][0][0] != node:
                self.counts[node, self.cls[job]] -= 1
                del self.placed[job]

    def _tier(self, j: int, cand: I64, free: I64) -> F64:
        self._sync()
        c = self.counts[cand]
        mine = c[:, self.cls[j]] > 0
        kinds = (c > 0).sum(axis=1)
        tier = np.where(mine, np.where(kinds == 1, 3, 2), np.where(kinds == 0, 1, 0))
        used = self.total_cap - free.sum(axis=1)
        if self.integer:  # the plugin's 25 x tier + 25 x used / largest node, in integers
            out: F64 = -(25 * tier + (25 * used) // self.total_cap).astype(np.float64)
            return out
        out = -(tier + used / self.total_cap / 4.0 * 0.999)
        return out

    def _record(self, j: int, parts: Parts | None) -> Parts | None:
        if parts and self.e.ngpu[j] > 0:
            node = parts[0][0]
            old = self.placed.pop(j, None)
            if old is not None:
                self.counts[old, self.cls[j]] -= 1
            self.placed[j] = node
            self.counts[node, self.cls[j]] += 1
            self.pending = (j, node)
        return parts

    def place(self, j: int, ngpu: int, milli: int, mask: int) -> Parts | None:
        """Place as every paper policy does, and count the job on its node's class
        tally (the tiers of later tasks depend on it).
        """
        self._sync()
        return self._record(j, super().place(j, ngpu, milli, mask))

    def score_whole(self, j: int, cand: I64, free: I64, ngpu: int) -> F64:
        """The node's affinity tier, the fuller node first within a tier."""
        return self._tier(j, cand, free)

    def score_fractional(self, j: int, cand: I64, free: I64, milli: int) -> F64:
        """The node's tier, on its tightest GPU with room only."""
        tier = self._tier(j, cand, free)
        pick = np.where(free >= milli, free, MILLI + 1).argmin(axis=1)
        out = np.full(free.shape, np.inf)
        rows = np.arange(free.shape[0])
        out[rows, pick] = tier
        return out


class PaperBestFit(PaperBase):
    """Multi-resource BestFit; the single-resource ``best-fit`` on GPU-only clusters."""

    Config = BestFitConfig

    def __init__(self, config: Any, engine: EngineView | HasView) -> None:
        super().__init__(config, engine)
        self.plain = BestFit(config, engine)
        s = self.s
        finite = s.cpu_cap[s.cpu_cap < UNLIMITED]
        self.max_cpu = float(finite.max()) if finite.size else 1.0
        self.max_gpu = float(self.gpus_np.max() * MILLI)

    def place(self, j: int, ngpu: int, milli: int, mask: int) -> Parts | None:
        """The multi-resource BestFit, or the original ``best-fit`` when the cluster
        models GPUs only (so GPU-only replays keep their results).
        """
        if not self.s.multi_resource:
            return self.plain.place(j, ngpu, milli, mask)
        return super().place(j, ngpu, milli, mask)

    def _left(self, j: int, cand: I64, free: I64, gpu_milli: int) -> F64:
        """Weighted free CPU and GPU left after placement (lower is better); with
        integer scores the plugin's: int(100 x (1 - left)), min-max normalised to 0-100
        over the feasible nodes in integers (the framework's NormalizeScore), negated.
        """
        s = self.s
        cpu_left = np.minimum(s.cpu_free[cand] - self.e.cpu_req[j], self.max_cpu)
        gpu_left = free.sum(axis=1) - gpu_milli
        out: F64 = 0.5 * cpu_left / self.max_cpu + 0.5 * gpu_left / self.max_gpu
        if not self.integer:
            return out
        raw = np.floor((1.0 - out) * 100.0).astype(np.int64)
        lo, hi = int(raw.min()), int(raw.max())
        norm = (raw - lo) * 100 // (hi - lo) if hi > lo else np.zeros_like(raw)
        score: F64 = -norm.astype(np.float64)
        return score

    def score_whole(self, j: int, cand: I64, free: I64, ngpu: int) -> F64:
        """What is left on each node after taking ``ngpu`` whole GPUs."""
        return self._left(j, cand, free, ngpu * MILLI)

    def score_cpu(self, j: int, cand: I64) -> F64:
        """What is left on each node after taking the CPU request only."""
        free = np.maximum(self.s.free_np[cand].astype(np.int64), 0)
        return self._left(j, cand, free, 0)

    def score_fractional(self, j: int, cand: I64, free: I64, milli: int) -> F64:
        """What is left on each node, on its tightest GPU with room only."""
        left = self._left(j, cand, free, milli)
        pick = np.where(free >= milli, free, MILLI + 1).argmin(axis=1)
        out = np.full(free.shape, np.inf)
        rows = np.arange(free.shape[0])
        out[rows, pick] = left
        return out


class PaperRandom(RandomFit):
    """``random``: a uniformly random feasible node (then GPU); CPU-only tasks too."""

    places_cpu_only = True

    def place(self, j: int, ngpu: int, milli: int, mask: int) -> Parts | None:
        """A random feasible node for a CPU-only task (no GPU), else ``random``'s pick."""
        if ngpu == 0:
            cand = np.flatnonzero(self.fits_np(0, MILLI, mask, j))
            if not cand.size:
                return None
            return [(int(cand[self.e.rng.integers(cand.size)]), -1, 0)]
        return super().place(j, ngpu, milli, mask)


PLUGINS = (
    PolicyPlugin("placement", "best-fit", PaperBestFit, rank=1),
    PolicyPlugin("placement", "random", PaperRandom, rank=3),
    PolicyPlugin("placement", "fgd", FgdPaper, rank=4),
    PolicyPlugin("placement", "dot-product", DotProduct, rank=6),
    PolicyPlugin("placement", "packing", GpuPacking, rank=7),
    PolicyPlugin("placement", "clustering", GpuClustering, rank=8),
)
