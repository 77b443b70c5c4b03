"""Slurm: unit tests (the ``sacct`` duration grammar as a polars expression; no store)."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_trace.loaders import slurm_values as sv


@given(
    d=st.integers(0, 400),
    h=st.integers(0, 23),
    m=st.integers(0, 59),
    s=st.integers(0, 59),
    ms=st.integers(0, 999),
)
@settings(max_examples=200, deadline=None)
def test_duration_forms(d: int, h: int, m: int, s: int, ms: int) -> None:
    """Each printed form gives days*86400 + h*3600 + m*60 + s (+ ms/1000)."""
    forms = {
        f"{d}-{h:02d}:{m:02d}:{s:02d}": d * 86400 + h * 3600 + m * 60 + s,
        f"{h:02d}:{m:02d}:{s:02d}": h * 3600 + m * 60 + s,
        f"{m:02d}:{s:02d}.{ms:03d}": m * 60 + s + ms / 1000,
    }
    frame = pl.DataFrame({"t": list(forms)})
    first, second = sv.duration_s(pl.col("t"), "_d")
    got = frame.with_columns(first).select(second["value"], second["bad"].alias("bad"))
    assert got["bad"].to_list() == [False] * 3
    assert got.to_series(0).to_list() == pytest.approx(list(forms.values()), abs=1e-9)


@pytest.mark.parametrize(
    ("body", "tasks"),
    [
        # job_array.html: "--array=0-31", "--array=1,3,5,7", "--array=1-7:2" (i.e. 1, 3,
        # 5 and 7), "--array=0-15%4" (at most 4 running at once: a throttle, no task)
        ("0-31", list(range(32))),
        ("1,3,5,7", [1, 3, 5, 7]),
        ("1-7:2", [1, 3, 5, 7]),
        ("0-15%4", list(range(16))),
        ("1-21:4", [1, 5, 9, 13, 17, 21]),
    ],
)
def test_array_task_ranges(body: str, tasks: list[int]) -> None:
    assert sv.array_tasks(body) == (tasks, None)


@pytest.mark.parametrize("body", ["7-5", "1-7:0", "a", "1-3%x", "", "1,,2"])
def test_array_task_ranges_malformed(body: str) -> None:
    found, why = sv.array_tasks(body)
    assert found == [] and why is not None


def test_array_task_cap() -> None:
    """More tasks than the cap is refused before any list is built."""
    assert sv.array_tasks("1-11", cap=10) == ([], "names more than 10 array tasks")
    assert sv.array_tasks("1-10", cap=10)[0] == list(range(1, 11))
