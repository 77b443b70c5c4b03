"""The wait queue of the work-conserving schedulers: waiting jobs grouped by request
shape, each group a heap by priority (FIFO skip mode, SJF / QSSF, SRTF, LAS).
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any

from gpu_trace.replay.policy import PolicyBase


class ClassedQueue:
    """Waiting jobs grouped by GPU request shape, each group a heap by priority.

    Within one scheduling pass resources only shrink, so once the best job of a group
    does not fit, no job of that group needing as much CPU and memory fits for the rest
    of the pass: on a GPU-only cluster (no CPU or memory enforced) the group is done, and
    a pass costs O(starts x groups), not O(queue). Where CPUs or memory are enforced a
    refused job rules out only the jobs of its group that ask at least as much of both;
    the group's best job not ruled out is tried next (the PAI simulator tries every
    waiting job; a job refused for its CPUs must not hold back one asking fewer).
    ``fill`` starts jobs best-first across groups and is work-conserving: after it
    returns, no waiting job fits the free capacity.
    """

    def __init__(
        self,
        key_of: Callable[[int], Hashable],
        need_of: Callable[[int], int] | None = None,
    ) -> None:
        self.key_of = key_of
        owner = getattr(key_of, "__self__", None)
        self.cpu: Sequence[int] | None = None
        self.mem: Sequence[int] | None = None
        """CPU and memory each job asks (the engine's; zeros where not enforced)."""
        if isinstance(owner, PolicyBase):
            self.cpu, self.mem = owner.e.cpu_req, owner.e.mem_req
        self.need_of = need_of
        """Milli-GPU a job needs in all (the same for every job of a group), so that
        :meth:`fill` can pass over a group that cannot fit the free capacity without a
        placement attempt; None = no such check."""
        self.groups: dict[Hashable, list[tuple[Any, int]]] = {}
        self.needs: list[int] = []
        """Every group's need, ascending (groups are never dropped), and beside it
        ``by_need`` the groups in that order: a pass reads only the groups that need
        at most the free capacity (a bisection), not every shape ever seen."""
        self.by_need: list[list[tuple[Any, int]]] = []
        self.size = 0

    def push(self, prio: Any, j: int) -> None:
        """Queue job ``j`` with priority ``prio`` (smaller runs first) in its group."""
        key = self.key_of(j)
        h = self.groups.get(key)
        if h is None:
            h = self.groups[key] = []
            if self.need_of is not None:
                want = self.need_of(j)
                at = bisect.bisect_right(self.needs, want)
                self.needs.insert(at, want)
                self.by_need.insert(at, h)
        heapq.heappush(h, (prio, j))
        self.size += 1

    def best(self) -> tuple[Any, int] | None:
        """The best (smallest) ``(priority, job)`` over all groups; None if empty."""
        top: tuple[Any, int] | None = None
        for h in self.groups.values():
            if h and (top is None or h[0] < top):
                top = h[0]
        return top

    def reprioritize(self, old: Any, new: Any, j: int) -> None:
        """Give waiting job ``j`` (pushed with priority ``old``) priority ``new``.
        Linear in the job's group; meant for rare events (starvation promotions).
        """
        h = self.groups[self.key_of(j)]
        h.remove((old, j))
        heapq.heapify(h)
        heapq.heappush(h, (new, j))

    def rekey(self, changes: Iterable[tuple[Any, Any, int]]) -> None:
        """Give each waiting job ``j`` of ``changes`` (old priority, new priority, j) its
        new priority: each entry is replaced in place and each group touched is
        re-heapified once (a pass that stopped many jobs re-ranks them together).
        """
        touched: dict[int, list[tuple[Any, int]]] = {}
        for old, new, j in changes:
            h = self.groups[self.key_of(j)]
            h[h.index((old, j))] = (new, j)
            touched[id(h)] = h
        for h in touched.values():
            heapq.heapify(h)

    def remove_best_of(self, j: int) -> None:
        """Drop the best job of ``j``'s group (``j`` must be it), e.g. after starting it."""
        h = self.groups[self.key_of(j)]
        heapq.heappop(h)
        self.size -= 1

    def fill(self, try_start: Callable[[int], bool], room: Callable[[], int] | None = None) -> int:
        """Start jobs best-first while any group's best job fits; returns starts.

        Runs once per scheduling pass: the groups still in play (non-empty, not yet
        blocked) sit in a heap keyed by their head, so each pick is one C-level heap
        operation, not one comparison per group (a trace with hundreds of request
        shapes, e.g. the PAI simulator's GPU counts up to 1,730, made the linear pick
        the cost of a whole SJF replay). Heads are unique (a job is in one group), so
        the key decides alone and the pick does not depend on the groups' order.
        ``try_start`` must not push to this queue (no policy's does: preemption
        requeues outside ``fill``).

        ``room`` (with ``need_of``): the free milli-GPU now. A group that needs more is
        blocked without calling ``try_start``, which would refuse it first thing (the
        engine's own check), so the outcome is the same; on a full cluster most
        attempts are such refusals.
        """
        if not self.size:
            return 0
        if room is not None and self.need_of is not None:
            free = room()
            n = bisect.bisect_right(self.needs, free)
            pairs = zip(self.needs[:n], self.by_need[:n], strict=True)
            return self._fill(try_start, [(h[0], w, h) for w, h in pairs if h], room)
        return self._fill(try_start, [(h[0], 0, h) for h in self.groups.values() if h], None)

    def _fill(
        self,
        try_start: Callable[[int], bool],
        live: list[tuple[tuple[Any, int], int, list[tuple[Any, int]]]],
        room: Callable[[], int] | None,
    ) -> int:
        """:meth:`fill` over ``live`` (each group's candidate, its milli-GPU need and
        the group): the groups in play sit in a heap keyed by their candidate
        (candidates are unique, so the key decides alone), one C-level operation per
        pick. With ``room`` a group needing more than is free is passed over without
        a placement attempt (the engine would refuse it first thing: same outcome).
        """
        heapq.heapify(live)
        free = room() if room is not None else None
        refused: dict[int, list[tuple[int, int]]] = {}
        started = 0
        heappop, heapreplace = heapq.heappop, heapq.heapreplace
        while live:
            item, want, group = live[0]
            if free is not None and want > free:
                heappop(live)  # no job of the group fits the free GPUs
                continue
            if try_start(item[1]):
                self._take(group, item)
                started += 1
                if room is not None:
                    free = room()
            else:
                asked = self._asked(item[1])
                if asked is None:  # refused for its GPUs alone: the group is done
                    heappop(live)
                    continue
                refused.setdefault(id(group), []).append(asked)
            nxt = self._candidate(group, refused.get(id(group)))
            if nxt is None:
                heappop(live)
            else:
                heapreplace(live, (nxt, want, group))
        return started

    def _take(self, group: list[tuple[Any, int]], item: tuple[Any, int]) -> None:
        """Remove a started job from its group (usually the head)."""
        if group[0] == item:
            heapq.heappop(group)
        else:
            group.remove(item)
            heapq.heapify(group)
        self.size -= 1

    def _asked(self, j: int) -> tuple[int, int] | None:
        """(CPU, memory) job ``j`` asks, where the cluster enforces them; None when it
        asks none of either (nothing smaller could fit where it did not).
        """
        if self.cpu is None or self.mem is None:
            return None
        c, m = self.cpu[j], self.mem[j]
        return (c, m) if c or m else None

    def _candidate(
        self, group: list[tuple[Any, int]], refused: list[tuple[int, int]] | None
    ) -> tuple[Any, int] | None:
        """The group's best job not ruled out by a refusal of this pass (a job asking
        at least the CPU and the memory of a refused one is refused too).
        """
        if not group:
            return None
        if not refused:
            return group[0]
        assert self.cpu is not None and self.mem is not None
        cpu, mem = self.cpu, self.mem
        best: tuple[Any, int] | None = None
        for item in group:
            c, m = cpu[item[1]], mem[item[1]]
            if any(c >= rc and m >= rm for rc, rm in refused):
                continue
            if best is None or item < best:
                best = item
        return best
