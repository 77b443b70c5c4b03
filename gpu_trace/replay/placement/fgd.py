"""``fgd``: fragmentation gradient descent (Weng et al., ATC'23), as the paper defines it
and its published simulator scores it, on the multi-resource node model.

The option (node, GPU) minimising the growth of the node's *expected fragmentation*
(:func:`expected_fragmentation`) over the workload's typical task classes
(:func:`typical_classes`), in the shared scoring frame
(:class:`~gpu_trace.replay.placement.base.ScoredPlacement`). ``fgd-gpu``
(:mod:`~gpu_trace.replay.placement.fgd_gpu`) is an earlier, GPU-only reading of the
measure, kept under its own name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from gpu_trace.plugins import PolicyPlugin
from gpu_trace.replay.cluster import MILLI
from gpu_trace.replay.placement.base import (
    EPS,
    F64,
    I64,
    SCORES_HELP,
    TIES_HELP,
    ScoredPlacement,
)
from gpu_trace.replay.policy import EngineView, HasView
from gpu_trace.replay.workload import CLONE_TAG


@dataclass(frozen=True)
class FgdConfig:
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


class Fgd(ScoredPlacement):
    """FGD: the option that grows the node's expected fragmentation least.

    Scores depend only on a node's own state and the task's request, so they are kept
    per request key ((GPUs, share, CPU, memory) -> per-node deltas) and recomputed only
    for nodes whose state changed since that key was last scored (found by comparing a
    snapshot of the free arrays: any change, by any job, is seen). Still numpy over the
    changed nodes, never a Python loop over nodes.
    """

    Config = FgdConfig
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


PLUGINS = (PolicyPlugin("placement", "fgd", Fgd, rank=4),)
