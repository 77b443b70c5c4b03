"""Capacity planning (``serve plan``): the fewest GPUs whose layout meets an SLO
attainment target on the trace.

For a fixed layout (model, GPU kind, tensor-parallel width, scheduler, router),
attainment does not fall when replicas are added (more replicas never lengthen a
queue under the built-in routers), so the smallest replica count that meets the target
is found by a search on replicas alone: doubling from 1 until the target is met (or the
cap is reached), then bisection between the last miss and the first hit, about
2 log2(answer) runs instead of one per count. Each tensor-parallel width of the list is
searched so; the answer is the fewest GPUs (tp x replicas) over them, ties to the
higher attainment then the narrower width.

Every point tried is kept (the table ``serve plan`` prints), so a reader sees the
evidence, including a non-monotone point if the model ever produced one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gpu_trace.serve.config import ServeConfig


@dataclass(frozen=True)
class Tried:
    """One layout run during the search."""

    tp: int
    replicas: int
    attainment: float
    summary: dict[str, object]

    @property
    def gpus(self) -> int:
        """GPUs of the layout."""
        return self.tp * self.replicas


def smallest(
    attainment: Callable[[int], float], target: float, max_replicas: int
) -> tuple[int | None, list[tuple[int, float]]]:
    """The smallest replica count in ``1..max_replicas`` whose ``attainment`` is at
    least ``target`` (None when even ``max_replicas`` misses), assuming attainment is
    non-decreasing in replicas, and every (replicas, attainment) evaluated, in order.
    Each count is evaluated at most once.
    """
    seen: dict[int, float] = {}
    order: list[tuple[int, float]] = []

    def meets(r: int) -> bool:
        if r not in seen:
            seen[r] = attainment(r)
            order.append((r, seen[r]))
        return seen[r] >= target

    miss, hit, r = 0, None, 1
    while True:
        if meets(r):
            hit = r
            break
        miss = r
        if r >= max_replicas:
            return None, order
        r = min(2 * r, max_replicas)
    while hit - miss > 1:
        mid = (miss + hit) // 2
        if meets(mid):
            hit = mid
        else:
            miss = mid
    return hit, order


def best(points: list[Tried], target: float) -> Tried | None:
    """The fewest-GPU point meeting ``target`` (ties: higher attainment, then the
    narrower tensor-parallel width); None when none does.
    """
    ok = [p for p in points if p.attainment >= target]
    if not ok:
        return None
    return min(ok, key=lambda p: (p.gpus, -p.attainment, p.tp))


def search(
    store: Path,
    base: ServeConfig,
    tps: list[int],
    target: float,
    max_replicas: int,
    on_point: Callable[[Tried], None] | None = None,
) -> list[Tried]:
    """Search every tensor-parallel width of ``tps`` on the store's trace (the window
    read once, nothing written): the points tried, in order.
    """
    from gpu_trace.serve import runs

    runs.check_source(store, base.source, base.dataset)
    runs.check_names(base)
    window = runs.load_requests(store, base.source, base.dataset, base.start_s, base.duration_s)
    tried: list[Tried] = []
    for tp in tps:

        def attainment(replicas: int, tp: int = tp) -> float:
            config = dataclasses.replace(base, tp=tp, replicas=replicas, run_id=None)
            run = runs.execute(window, config)
            value = run.summary["slo_attainment_ratio"]
            point = Tried(tp, replicas, float(value or 0.0), run.summary)
            tried.append(point)
            if on_point is not None:
                on_point(point)
            return point.attainment

        smallest(attainment, target, max_replicas)
    return tried
