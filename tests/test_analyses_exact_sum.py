"""``definitions.exact_sum``: float totals that are the same bytes on every run.

Floating-point addition is not associative: 0.1 + 0.2 + 0.3 is 0.6000000000000001 added
left to right and 0.6 right to left, so a sum whose partial sums combine in a thread-
dependent order (polars' group-by) moved in the last digit between runs of
``failures --by cause`` and ``fragmentation``. Summed as integer micro-units, the order
cannot matter: 100000 + 200000 + 300000 = 600000 micro-units = 0.6 exactly.
"""

from __future__ import annotations

import polars as pl

from gpu_trace.analyses.definitions import exact_sum


def test_exact_sum_does_not_depend_on_order() -> None:
    forward = pl.DataFrame({"x": [0.1, 0.2, 0.3]})
    backward = pl.DataFrame({"x": [0.3, 0.2, 0.1]})
    a = forward.select(exact_sum(pl.col("x"))).item()
    b = backward.select(exact_sum(pl.col("x"))).item()
    assert a == b == 0.6
    # in Python, the two orders of the plain float sum differ (the reason for exact_sum)
    assert (0.1 + 0.2) + 0.3 != (0.3 + 0.2) + 0.1


def test_exact_sum_per_group_keeps_the_name_and_rounds_to_the_scale() -> None:
    frame = pl.DataFrame({"g": ["a", "a", "b"], "lost_gpu_s": [1.0000004, 2.0, 0.5]})
    out = frame.group_by("g").agg(exact_sum(pl.col("lost_gpu_s"))).sort("g")
    # a: 1.0000004 -> 1000000 micro-units (rounded), + 2000000 = 3000000 -> 3.0; b: 0.5
    assert out.columns == ["g", "lost_gpu_s"]
    assert out["lost_gpu_s"].to_list() == [3.0, 0.5]
    # scale 1e9 keeps the 0.4 micro-unit: 1000000400 + 2000000000 nano-units
    fine = frame.filter(pl.col("g") == "a").select(exact_sum(pl.col("lost_gpu_s"), 1e9)).item()
    assert fine == 3.0000004
