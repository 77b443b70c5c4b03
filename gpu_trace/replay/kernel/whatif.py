"""What-ifs on the cluster state, answered without changing the engine.

Would a waiting job fit if some running jobs ended, and where would the placement
policy put it then? Reservations (backfill) and preemption (SRTF, LAS, Tiresias) ask
these questions many times per scheduling pass, so they are answered on the side, from
the cluster state and the running jobs' allocations:

- :class:`FitProbe` counts released capacity beside the state (no change at all);
- :func:`placeable_after` asks the placement policy itself where the job would go, so it
  releases the running jobs' allocations from the cluster state inside
  :func:`released`, which puts every one back exactly (integer milli-GPU) whatever
  happens, before the answer is returned.

Fits = some allowed node has room for the job (a job larger than a node, or any job
under a placement that splits: the allowed nodes' wholly free GPUs together), the rule
every built-in placement follows. Kept apart from the engine's event loop so that the
loop holds only what happens, and the serving simulator of the plan can ask the same
questions of its own cluster state.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple

from gpu_trace.replay.cluster import ANY_TYPE, MILLI, ClusterState
from gpu_trace.replay.policy import Parts


class Asking(NamedTuple):
    """What a waiting job asks, as the what-ifs read it."""

    job: int
    ngpu: int
    milli: int
    mask: int
    cpu_req: Sequence[int]
    """CPU per job (all jobs: released running jobs give theirs back)."""
    mem_req: Sequence[int]
    placement: Any
    """The placement policy (its ``place`` and, if it has one, ``splits``)."""


class Placeable(NamedTuple):
    """Answer of :func:`placeable_after`."""

    groups: int
    """How many of the given groups of running jobs must end first (0 = fits now)."""
    parts: Parts
    """Where the placement policy would put the job then."""
    hold: Parts
    """The part of that placement that is free *now*: GPUs a job started now must leave
    alone not to delay it (pass as ``try_start(j, hold)``)."""


def splits(placement: Any) -> bool:
    """Whether ``placement`` may split a job across nodes when no single node fits (its
    ``splits`` attribute; a placement without one does not).
    """
    return bool(getattr(placement, "splits", False))


class FitProbe:
    """Whether a waiting job would fit if some running jobs ended, counted on the side
    from per-GPU free capacity (no state change).
    """

    __slots__ = (
        "alloc",
        "gain",
        "hit",
        "mask",
        "milli",
        "ngpu",
        "ok",
        "rel",
        "s",
        "single",
        "split",
        "total",
    )

    def __init__(
        self,
        state: ClusterState,
        alloc: Mapping[int, Parts],
        ngpu: int,
        milli: int,
        mask: int,
        split: bool,
    ) -> None:
        """Probe for a job of ``ngpu`` x ``milli`` on GPU types ``mask``, under a
        placement that ``split``s jobs across nodes or not (plain values, not an
        :class:`Asking`: preemptive passes build one per attempt).
        """
        s = state
        self.s = s
        self.alloc = alloc
        self.ngpu, self.milli, self.mask = ngpu, milli, mask
        self.single = ngpu <= s.gmax
        self.split = split
        self.rel: dict[tuple[int, int], int] = {}
        self.gain: dict[int, int] = {}
        self.total = 0
        self.hit: tuple[int, int] | None = None
        """(node, GPU or -1) that first made room on one node; None if not one node."""
        if self.milli < MILLI:
            self.ok = bool((s.free_np[s.node_ok_np(self.mask)] >= self.milli).any())
        else:
            self.total = s.whole_free(self.mask)
            self.ok = (self.single and s.node_with_whole(self.ngpu, s.gmax, 1, self.mask) >= 0) or (
                (not self.single or self.split) and self.total >= self.ngpu
            )

    def release(self, r: int) -> bool:
        """Count running job ``r`` as ended; whether the job fits now."""
        if self.ok:
            return True
        s = self.s
        free, whole, ntype = s.free, s.whole, s.node_type
        mask, milli, ngpu = self.mask, self.milli, self.ngpu
        rel, gain = self.rel, self.gain
        ok = False
        for n, g, m in self.alloc[r]:
            if m <= 0 or (mask != ANY_TYPE and not (mask >> ntype[n]) & 1):
                continue  # a CPU-only job's part (GPU -1) frees no GPU
            if m == MILLI:  # a whole GPU of r: wholly free once r ends
                f = MILLI
            else:
                v = rel.get((n, g), 0) + m
                rel[(n, g)] = v
                f = free[n][g] + v
            if milli < MILLI:
                if not ok and f >= milli:
                    ok, self.hit = True, (n, g)
            elif f == MILLI:
                c = gain.get(n, 0) + 1
                gain[n] = c
                self.total += 1
                if not ok and self.single and whole[n] + c >= ngpu:
                    ok, self.hit = True, (n, -1)
                elif not ok and (not self.single or self.split) and self.total >= ngpu:
                    ok = True
        self.ok = ok
        return ok

    def needed(self, r: int) -> bool:
        """Whether released job ``r`` helped make the room: it holds part of the node
        (or GPU) that first could take the job; every released job when the room is
        several nodes'.
        """
        hit = self.hit
        if hit is None:
            return True
        n, g = hit
        return any(pn == n and (g < 0 or pg == g) for pn, pg, _ in self.alloc[r])


def feasible_after(
    state: ClusterState, alloc: Mapping[int, Parts], job: Asking, groups: Sequence[Sequence[int]]
) -> int | None:
    """The fewest leading ``groups`` of running jobs whose end lets ``job`` fit (0 = fits
    now; None = not even all of them), counted by a :class:`FitProbe`.
    """
    probe = FitProbe(state, alloc, job.ngpu, job.milli, job.mask, splits(job.placement))
    if probe.ok:
        return 0
    for k, group in enumerate(groups, 1):
        for r in group:
            probe.release(r)
        if probe.ok:
            return k
    return None


@contextmanager
def released(
    state: ClusterState, alloc: Mapping[int, Parts], job: Asking, out: list[int]
) -> Iterator[list[int]]:
    """Inside the block, the running jobs appended to ``out`` (by the caller, through
    :func:`release`) are released from ``state``; on leaving, every one is put back in
    reverse order, exactly (integer milli-GPU, CPU and memory), even on an exception.
    """
    try:
        yield out
    finally:
        cpu, mem = job.cpu_req, job.mem_req
        for r in reversed(out):
            p = alloc[r]
            state.allocate(p)
            state.take_res(p, cpu[r], mem[r])


def release(
    state: ClusterState, alloc: Mapping[int, Parts], job: Asking, out: list[int], r: int
) -> None:
    """Release running job ``r`` inside :func:`released` (recorded in ``out``)."""
    p = alloc[r]
    out.append(r)
    state.release(p)
    state.give_res(p, job.cpu_req[r], job.mem_req[r])


def placeable_after(
    state: ClusterState,
    alloc: Mapping[int, Parts],
    job: Asking,
    groups: Sequence[Sequence[int]],
    where: bool = True,
) -> Placeable | None:
    """The fewest leading ``groups`` of running jobs whose end lets ``job`` be placed
    (ignoring VC quotas); None if not even all of them. With ``where``, also where the
    placement policy would put it then and the part of that free now; without, only the
    count, from per-node free GPUs (no state change: cheap enough to call before every
    preemption).
    """
    k = feasible_after(state, alloc, job, groups)
    if k is None:
        return None
    if not where:
        return Placeable(k, [], [])
    place = job.placement.place
    j, ngpu, milli, mask = job.job, job.ngpu, job.milli, job.mask
    with released(state, alloc, job, []) as out:
        for group in groups[:k]:
            for r in group:
                release(state, alloc, job, out, r)
        parts = place(j, ngpu, milli, mask)
        for group in groups[k:]:
            if parts is not None:
                break
            k += 1
            for r in group:
                release(state, alloc, job, out, r)
            parts = place(j, ngpu, milli, mask)
        if parts is None:
            return None
        parts = list(parts)
        future = [state.free[n][g] for n, g, _ in parts]
    return Placeable(k, parts, _free_now(state, parts, future))


def _free_now(state: ClusterState, parts: Parts, future: list[int]) -> Parts:
    """The part of a future placement ``parts`` that is free now (``future``: each
    part's GPU free capacity once the released jobs ended).
    """
    hold: Parts = []
    for (n, g, m), fut in zip(parts, future, strict=True):
        free_now = state.free[n][g]
        take = min(free_now, max(0, m - (fut - free_now)))
        if take > 0:
            hold.append((n, g, take))
    return hold
