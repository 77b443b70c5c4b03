"""``serve plan``'s search (gpu_trace/serve/plan.py) on attainment functions known in
advance: a step at k replicas, and the choice among tensor-parallel widths.
"""

from __future__ import annotations

import pytest

from gpu_trace.serve.plan import Tried, best, smallest


def step(k: int, calls: list[int]) -> object:
    def attainment(r: int) -> float:
        calls.append(r)
        return 1.0 if r >= k else 0.5

    return attainment


@pytest.mark.parametrize(
    ("k", "cap", "answer", "tried"),
    [
        (1, 64, 1, [1]),
        (2, 64, 2, [1, 2]),
        (3, 64, 3, [1, 2, 4, 3]),
        (5, 64, 5, [1, 2, 4, 8, 6, 5]),
        (8, 64, 8, [1, 2, 4, 8, 6, 7]),
        (33, 64, 33, [1, 2, 4, 8, 16, 32, 64, 48, 40, 36, 34, 33]),
        (10, 10, 10, [1, 2, 4, 8, 10, 9]),  # the cap is tried even off the doubling
        (11, 10, None, [1, 2, 4, 8, 10]),  # never met: stops at the cap
        (1, 1, 1, [1]),
        (2, 1, None, [1]),
    ],
)
def test_smallest_on_a_step(k: int, cap: int, answer: int | None, tried: list[int]) -> None:
    calls: list[int] = []
    got, order = smallest(step(k, calls), 0.9, cap)  # type: ignore[arg-type]
    assert got == answer
    assert calls == tried == [r for r, _ in order]  # each count run once, in this order


def test_smallest_on_a_graded_curve() -> None:
    """Attainment r / 10 (0.1 per replica): 0.9 is first reached at 9 replicas."""
    got, order = smallest(lambda r: min(1.0, r / 10), 0.9, 64)
    assert got == 9
    assert [r for r, _ in order] == [1, 2, 4, 8, 16, 12, 10, 9]


def test_best_is_fewest_gpus_then_attainment_then_narrower() -> None:
    points = [
        Tried(1, 8, 0.95, {}),  # 8 GPUs
        Tried(2, 4, 0.97, {}),  # 8 GPUs, higher attainment: wins the tie
        Tried(4, 2, 0.97, {}),  # 8 GPUs, same attainment, wider: loses to tp 2
        Tried(2, 3, 0.80, {}),  # 6 GPUs but misses
    ]
    chosen = best(points, 0.9)
    assert chosen is not None and (chosen.tp, chosen.replicas) == (2, 4)
    assert best(points[3:], 0.9) is None
