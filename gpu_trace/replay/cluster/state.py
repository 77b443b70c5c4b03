"""The cluster's mutable allocation state (:class:`ClusterState`): free capacity per GPU
and per node, allocate / release, nodes out of service, and the cluster-wide counters the
timeline records (used, fragmented and down milli-GPU).

Only the engine changes it (policies get a read-only
:class:`~gpu_trace.replay.cluster.views.ClusterView`). Every job start and end passes
through :meth:`ClusterState.allocate` / :meth:`ClusterState.release`, so this is the
replay's hot path: the per-part loops work on locals and write the cluster-wide sums once.
The placement queries (fullest node that fits, nodes by wholly free GPUs, the lowest free
GPUs of a node) are answered by the capacity index
(:mod:`~gpu_trace.replay.cluster.index`) in O(log G) on any node size; how the index
keeps a node's free GPUs is its own business. A numpy mirror of the per-GPU free matrix
serves the vectorized policies (random, best-fit, FGD) that score every node at once.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import numpy.typing as npt

from gpu_trace.replay.cluster.index import SMALL_NODE, CapacityIndex
from gpu_trace.replay.cluster.spec import ANY_TYPE, MILLI, ClusterSpec

FEW_NODES = 64
"""Clusters of at most this many nodes are scanned node by node in Python (cheaper than
one numpy pass at that size)."""


class ClusterState:
    """Mutable allocation state of a cluster (the engine's; policies see a
    :class:`~gpu_trace.replay.cluster.views.ClusterView`).

    ``free[n][g]`` is the free milli-GPU of GPU g on node n: ``memoryview`` rows over
    the matrix ``free_np`` that the vectorized policies score (-1 marks GPU slots a
    smaller node does not have), so an allocation writes each value once and the two can
    never disagree (scalar access through a memoryview is as cheap as through an
    ``array``).
    ``whole[n]`` counts wholly free GPUs; ``index`` (:class:`CapacityIndex`) orders the
    nodes by that count and keeps large nodes' free GPUs.
    """

    def __init__(self, spec: ClusterSpec) -> None:
        self.spec = spec
        n, gmax = spec.nodes, spec.max_node_gpus
        self.gmax = gmax
        self.node_gpus = list(spec.node_gpus)
        self.node_type = list(spec.node_type)
        self.free_np: npt.NDArray[np.int32] = np.full((n, gmax), -1, dtype=np.int32)
        for i, g in enumerate(spec.node_gpus):
            self.free_np[i, :g] = MILLI
        self.free: list[memoryview] = [
            self.free_np[i, :g].data for i, g in enumerate(spec.node_gpus)
        ]
        """Per-node rows *of* ``free_np`` (one write updates both)."""
        self.whole = list(spec.node_gpus)
        self.node_free = [g * MILLI for g in spec.node_gpus]
        self.type_np = np.asarray(spec.node_type, dtype=np.int64)
        self.capacity_milli = spec.gpus * MILLI
        self.used_milli = 0
        self.frag_milli = 0
        """Free capacity on nodes that are partly used (see :meth:`_frag`)."""
        self.multi_resource = spec.multi_resource
        """Whether CPU / memory can refuse a job (else those checks are skipped)."""
        self.cpu_cap = spec.cpu_np()
        self.mem_cap = spec.mem_np()
        self.cpu_free = self.cpu_cap.copy()
        """Free CPU milli-cores per node (numpy: checked for all nodes at once)."""
        self.mem_free = self.mem_cap.copy()
        """Free host memory bytes per node."""
        self.types_for_mask: dict[int, tuple[int, ...]] = {}
        self.max_whole_for_mask: dict[int, int] = {}
        self.bucket_rows: dict[int, list[list[set[int]]]] = {}
        self.capacity_of_mask: dict[int, tuple[int, int]] = {}
        self.index = CapacityIndex(spec.node_gpus, spec.node_type, len(spec.type_names), gmax)
        self.batch = self.index.batch
        """Nodes the index takes whole-GPU batches on (see :meth:`allocate`)."""
        self.whole_part_of: dict[int, list[tuple[int, int, int]]] = {}
        """Large node -> its whole-GPU parts ``(n, g, MILLI)`` by GPU (see
        :meth:`whole_parts`)."""
        self.down: dict[int, list[tuple[int, int, int]]] = {}
        """Nodes out of service (failed, powered off) -> the pseudo-allocation that
        holds all their GPUs so no placement uses them."""
        self.down_milli = 0
        self.ups = 0
        """Nodes put back in service so far (a policy that remembers "no room" must look
        again after one: it frees capacity without any job ending)."""

    def set_down(self, n: int) -> None:
        """Take node ``n`` out of service: hold its free capacity (its jobs must have
        been stopped first).
        """
        if n in self.down:
            return
        parts = [(n, g, f) for g, f in enumerate(self.free[n]) if f > 0]
        self.allocate(parts)
        self.down[n] = parts
        self.down_milli += sum(p[2] for p in parts)

    def set_up(self, n: int) -> None:
        """Put node ``n`` back in service."""
        parts = self.down.pop(n, None)
        if parts is None:
            return
        self.release(parts)
        self.down_milli -= sum(p[2] for p in parts)
        self.ups += 1

    def types_of(self, mask: int) -> tuple[int, ...]:
        """Type codes allowed by ``mask`` (cached)."""
        got = self.types_for_mask.get(mask)
        if got is None:
            got = tuple(t for t in range(len(self.spec.type_names)) if mask >> t & 1)
            self.types_for_mask[mask] = got
        return got

    def node_ok_np(self, mask: int) -> npt.NDArray[np.bool_]:
        """Boolean per node: its type is allowed by ``mask``."""
        if mask == ANY_TYPE:
            return np.ones(len(self.node_gpus), dtype=bool)
        return ((mask >> self.type_np) & 1).astype(bool)

    def capacity_for(self, mask: int) -> tuple[int, int]:
        """(GPUs on the largest allowed node, GPUs on all allowed nodes); node sizes
        never change, so the answer is kept per mask (placements ask it per attempt).
        """
        got = self.capacity_of_mask.get(mask)
        if got is None:
            ok = self.node_ok_np(mask)
            gpus = np.asarray(self.node_gpus)[ok]
            got = (int(gpus.max()), int(gpus.sum())) if gpus.size else (0, 0)
            self.capacity_of_mask[mask] = got
        return got

    def first_with_whole(self, ngpu: int, mask: int) -> int:
        """The lowest-index node of an allowed type with at least ``ngpu`` wholly free
        GPUs; -1 if none (first fit by index, as Tiresias' ``yarn`` scans its nodes).
        Few nodes: a scan of the per-node counts; nodes of at most ``SMALL_NODE``
        GPUs: the lowest node of each count from ``ngpu`` up (O(gmax x log G)); else
        one vectorized pass.
        """
        whole = self.whole
        if len(whole) <= FEW_NODES:
            ntype = self.node_type
            for n, k in enumerate(whole):
                if k >= ngpu and (mask == ANY_TYPE or (mask >> ntype[n]) & 1):
                    return n
            return -1
        if self.gmax <= SMALL_NODE:
            rows = self.bucket_rows.get(mask)
            if rows is None:
                rows = self.bucket_rows[mask] = [self.index.buckets[t] for t in self.types_of(mask)]
            types = self.types_of(mask)
            best = -1
            for k in range(max(ngpu, 0), self.gmax + 1):
                if any(row[k] for row in rows):
                    n = self.index.lowest_node(types, k)
                    if best < 0 or n < best:
                        best = n
            return best
        ok = self.node_ok_np(mask) & (np.asarray(whole) >= ngpu)
        hits = np.flatnonzero(ok)
        return int(hits[0]) if hits.size else -1

    def node_with_whole(self, lo: int, hi: int, step: int, mask: int) -> int:
        """The first node of an allowed type whose count of wholly free GPUs is ``lo``,
        else ``lo + step``, ... up to ``hi`` (inclusive); -1 if none. ``step = 1`` from
        ``ngpu`` gives the fullest node that fits, ``step = -1`` from ``gmax`` the
        emptiest. Within one count the lowest node index wins (across the allowed
        types), as docs/replay.md states. Nodes of at most ``SMALL_NODE`` GPUs:
        a scan of at most that many counts; larger: O(types x log G) in the index.
        """
        if self.gmax <= SMALL_NODE:
            rows = self.bucket_rows.get(mask)
            if rows is None:
                rows = self.bucket_rows[mask] = [self.index.buckets[t] for t in self.types_of(mask)]
            for k in range(lo, hi + step, step):
                for row in rows:
                    if row[k]:
                        return self.index.lowest_node(self.types_of(mask), k)
            return -1
        types = self.types_for_mask.get(mask) or self.types_of(mask)  # a call fewer
        return self.index.node_with_count(types, lo, hi, step)

    def nodes_by_whole(self, mask: int) -> list[tuple[int, int]]:
        """(node, wholly free GPUs) of the allowed types with any, most free first, then
        by node index.
        """
        return list(self.iter_by_whole(mask))

    def iter_by_whole(self, mask: int) -> Iterator[tuple[int, int]]:
        """:meth:`nodes_by_whole`, lazily: each item costs O(log nodes)."""
        return self.index.by_whole(self.types_of(mask))

    def whole_free(self, mask: int) -> int:
        """Wholly free GPUs on nodes of the allowed types (O(types))."""
        total = self.index.whole_total
        return sum(total[t] for t in self.types_of(mask))

    def room_milli(self) -> int:
        """Free milli-GPU, cluster-wide: a job needing more fits nowhere (the engine
        refuses it before asking the placement).
        """
        return self.capacity_milli - self.used_milli

    def _frag(self, n: int) -> int:
        f = self.node_free[n]
        return f if 0 < f < self.node_gpus[n] * MILLI else 0

    def allocate(self, parts: Sequence[tuple[int, int, int]]) -> None:
        """Take ``milli`` on GPU ``g`` of node ``n`` for each part (checked).

        Whole GPUs on one node that the index batches (see
        :attr:`CapacityIndex.batch <gpu_trace.replay.cluster.index.CapacityIndex.batch>`)
        are taken at once: per GPU only its slot changes, and the node's counts and index
        entry move once (:meth:`_move_whole`). If any part is not a wholly
        free GPU of that node, the slots written are put back and everything goes part
        by part (:meth:`_allocate_each`, which raises at a bad part).
        """
        if parts:
            n = parts[0][0]
            if n in self.batch:  # inline, not a helper: one frame fewer per job start
                row = self.free[n]
                if len(parts) == 1:  # most jobs: one GPU, without the loop
                    g = parts[0][1]
                    if parts[0][2] == MILLI and row[g] == MILLI:
                        row[g] = 0
                        self._move_whole(n, parts, -1)
                        return
                    self._allocate_each(parts)
                    return
                for i, (m, g, milli) in enumerate(parts):
                    if m != n or milli != MILLI or row[g] != MILLI:
                        for _, h, _ in parts[:i]:
                            row[h] = MILLI
                        break
                    row[g] = 0
                else:
                    self._move_whole(n, parts, -len(parts))
                    return
        self._allocate_each(parts)

    def release(self, parts: Sequence[tuple[int, int, int]]) -> None:
        """Give back what :meth:`allocate` took (the same batch rule: every part a wholly
        used GPU of a batch node, else part by part).
        """
        if parts:
            n = parts[0][0]
            if n in self.batch:
                row = self.free[n]
                if len(parts) == 1:
                    g = parts[0][1]
                    if parts[0][2] == MILLI and row[g] == 0:
                        row[g] = MILLI
                        self._move_whole(n, parts, 1)
                        return
                    self._release_each(parts)
                    return
                for i, (m, g, milli) in enumerate(parts):
                    if m != n or milli != MILLI or row[g] != 0:
                        for _, h, _ in parts[:i]:
                            row[h] = 0
                        break
                    row[g] = MILLI
                else:
                    self._move_whole(n, parts, len(parts))
                    return
        self._release_each(parts)

    def _move_whole(self, n: int, parts: Sequence[tuple[int, int, int]], d: int) -> None:
        """Batch node ``n`` gained ``d`` (< 0: lost) wholly free GPUs, those of
        ``parts``: its free and fragmented capacity, the used total, and the index (its
        free-GPU list and count).
        """
        cap = self.node_gpus[n] * MILLI
        f = self.node_free[n]
        frag = self.frag_milli
        if 0 < f < cap:
            frag -= f
        f += d * MILLI
        if 0 < f < cap:
            frag += f
        self.frag_milli = frag
        self.node_free[n] = f
        self.used_milli -= d * MILLI
        self.whole[n] += d
        if d < 0:
            self.index.batch_taken(n, parts, -d)
        else:
            self.index.batch_given(n, parts, d)

    def _allocate_each(self, parts: Sequence[tuple[int, int, int]]) -> None:  # noqa: C901  measured hot path (one frame per call)
        """:meth:`allocate`, part by part.

        Runs for every part of every start (a job on one big node has one part per GPU),
        so it works on locals and writes the cluster-wide sums once, and tells the
        index once per node whose count of wholly free GPUs changed.
        """
        moved: dict[int, int] | None = None
        index = self.index
        large, gpus_free = index.large, index.gpus_free
        node_free, whole, free = self.node_free, self.whole, self.free
        node_type, node_gpus = self.node_type, self.node_gpus
        frag = self.frag_milli
        used = 0
        try:
            for n, g, milli in parts:
                if g < 0 and milli == 0:
                    continue  # a CPU-only job's part: it names the node, holds no GPU
                row = free[n]
                before = row[g]
                if milli <= 0 or before < milli:
                    msg = f"over-allocation of node {n} GPU {g}"
                    raise AssertionError(msg)
                cap = node_gpus[n] * MILLI
                f = node_free[n]
                if 0 < f < cap:
                    frag -= f
                f -= milli
                if 0 < f < cap:
                    frag += f
                node_free[n] = f
                row[g] = before - milli
                used += milli
                if before == MILLI:
                    k = whole[n]
                    whole[n] = k - 1
                    if moved is None:
                        moved = {n: k}
                    elif n not in moved:
                        moved[n] = k
                    if large[n]:  # GPU g is no longer wholly free
                        gpus_free[n].discard(g)
        finally:
            self.frag_milli = frag
            self.used_milli += used
        if moved is not None:
            for n, k in moved.items():
                index.move(n, node_type[n], k, whole[n])

    def _release_each(self, parts: Sequence[tuple[int, int, int]]) -> None:  # noqa: C901  measured hot path (one frame per call)
        """Give back what :meth:`_allocate_each` took (the same per-part order)."""
        moved: dict[int, int] | None = None
        index = self.index
        large, gpus_free = index.large, index.gpus_free
        node_free, whole, free = self.node_free, self.whole, self.free
        node_type, node_gpus = self.node_type, self.node_gpus
        frag = self.frag_milli
        used = 0
        try:
            for n, g, milli in parts:
                if g < 0 and milli == 0:
                    continue
                row = free[n]
                after = row[g] + milli
                if after > MILLI:
                    msg = f"release beyond capacity on node {n} GPU {g}"
                    raise AssertionError(msg)
                cap = node_gpus[n] * MILLI
                f = node_free[n]
                if 0 < f < cap:
                    frag -= f
                f += milli
                if 0 < f < cap:
                    frag += f
                node_free[n] = f
                row[g] = after
                used += milli
                if after == MILLI:
                    k = whole[n]
                    whole[n] = k + 1
                    if moved is None:
                        moved = {n: k}
                    elif n not in moved:
                        moved[n] = k
                    if large[n]:  # GPU g is wholly free again
                        gpus_free[n].add(g)
        finally:
            self.frag_milli = frag
            self.used_milli -= used
        if moved is not None:
            for n, k in moved.items():
                index.move(n, node_type[n], k, whole[n])

    def res_ok_np(self, cpu: int, mem: int) -> npt.NDArray[np.bool_]:
        """Per node: whether ``cpu`` milli-cores and ``mem`` bytes are free."""
        ok: npt.NDArray[np.bool_] = (self.cpu_free >= cpu) & (self.mem_free >= mem)
        return ok

    def res_ok(self, n: int, cpu: int, mem: int) -> bool:
        """Node ``n`` has ``cpu`` milli-cores and ``mem`` bytes free."""
        return bool(self.cpu_free[n] >= cpu and self.mem_free[n] >= mem)

    @staticmethod
    def res_split(
        parts: Sequence[tuple[int, int, int]], cpu: int, mem: int
    ) -> list[tuple[int, int, int]]:
        """(node, CPU, memory) a job of ``cpu`` / ``mem`` holds on each node of its parts:
        all of it on its node; a multi-node job's request is shared out in proportion to
        its GPU share on each node (rounded up, so a node never holds less than its
        share).
        """
        n0 = parts[0][0]
        if len(parts) == 1 or all(p[0] == n0 for p in parts):
            return [(n0, cpu, mem)]
        per: dict[int, int] = {}
        for n, _, milli in parts:
            per[n] = per.get(n, 0) + milli
        if len(per) == 1 or not sum(per.values()):
            return [(n, cpu, mem) for n in per]
        total = sum(per.values())
        return [(n, -(-cpu * k // total), -(-mem * k // total)) for n, k in sorted(per.items())]

    def res_fits(self, parts: Sequence[tuple[int, int, int]], cpu: int, mem: int) -> bool:
        """Whether the nodes of ``parts`` have the job's CPU and memory free."""
        if not (cpu or mem):
            return True
        return all(
            self.cpu_free[n] >= c and self.mem_free[n] >= m
            for n, c, m in self.res_split(parts, cpu, mem)
        )

    def try_take_res(self, parts: Sequence[tuple[int, int, int]], cpu: int, mem: int) -> bool:
        """Take a job's CPU and memory on the nodes of its parts if all of them have it;
        False (nothing taken) otherwise.
        """
        cf, mf = self.cpu_free, self.mem_free
        if len(parts) == 1:  # the common case, without building a split
            n = parts[0][0]
            if cf[n] < cpu or mf[n] < mem:
                return False
            cf[n] -= cpu
            mf[n] -= mem
            return True
        split = self.res_split(parts, cpu, mem)
        for n, c, m in split:
            if cf[n] < c or mf[n] < m:
                return False
        for n, c, m in split:
            cf[n] -= c
            mf[n] -= m
        return True

    def take_res(self, parts: Sequence[tuple[int, int, int]], cpu: int, mem: int) -> None:
        """Take a job's CPU and memory on the nodes of its parts (checked: never more
        than a node has).
        """
        if not (cpu or mem):
            return
        for n, c, m in self.res_split(parts, cpu, mem):
            if self.cpu_free[n] < c or self.mem_free[n] < m:
                msg = f"over-allocation of CPU or memory on node {n}"
                raise AssertionError(msg)
            self.cpu_free[n] -= c
            self.mem_free[n] -= m

    def give_res(self, parts: Sequence[tuple[int, int, int]], cpu: int, mem: int) -> None:
        """Give back what :meth:`take_res` took."""
        if not (cpu or mem):
            return
        cf, mf = self.cpu_free, self.mem_free
        for n, c, m in (
            self.res_split(parts, cpu, mem) if len(parts) > 1 else ((parts[0][0], cpu, mem),)
        ):
            a, b = cf[n] + c, mf[n] + m
            if a > self.cpu_cap[n] or b > self.mem_cap[n]:
                msg = f"CPU or memory released beyond capacity on node {n}"
                raise AssertionError(msg)
            cf[n] = a
            mf[n] = b

    def whole_parts(self, n: int, k: int) -> list[tuple[int, int, int]]:
        """The first ``k`` wholly free GPUs of node ``n`` as allocation parts (a large
        node: from its free-GPU index, O(k log g); a small one: a scan of its slots).
        """
        index = self.index
        if index.large[n]:
            items = self.whole_part_of.get(n)
            if items is None:  # built on first use: one tuple per GPU, shared by all jobs
                items = self.whole_part_of[n] = [(n, g, MILLI) for g in range(self.node_gpus[n])]
            return index.gpus_free[n].pick(k, items)
        out: list[tuple[int, int, int]] = []
        for g, f in enumerate(self.free[n]):
            if f == MILLI:
                out.append((n, g, MILLI))
                if len(out) == k:
                    break
        return out
