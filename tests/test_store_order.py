"""``loaders.store_order.in_store_order`` must give exactly the order the store writer
gives: polars' stable sort by the table's ``sort_by`` with nulls last
(``store/parquet.py``). The reference here is polars' own ``DataFrame.sort``.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import polars as pl
import pytest

from gpu_trace.loaders.store_order import in_store_order

KEYS = ["job_id", "task"]


def _random_frame(seed: int, n: int = 400) -> pl.DataFrame:
    rng = random.Random(seed)
    stems = ["", "a", "ab", "0" * 24, "f" * 24, "é", "éa", "x" * 30, "x" * 31]
    ids = [
        rng.choice(stems) + "".join(rng.choice("0af") for _ in range(rng.randint(0, 3)))
        for _ in range(n)
    ]
    return pl.DataFrame(
        {
            "job_id": [None if rng.random() < 0.05 else i for i in ids],
            "task": [rng.choice([None, "ps", "worker", "tensorflow", "tensorflowX"]) for _ in ids],
            "t": [
                None
                if rng.random() < 0.1
                else datetime(2020, 1, 1, tzinfo=UTC) + timedelta(seconds=rng.randint(0, 5))
                for _ in ids
            ],
            "row": list(range(n)),
        },
        schema_overrides={"t": pl.Datetime("us", "UTC")},
    )


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("keys", [KEYS, ["t", "job_id"]])
def test_same_order_as_the_writers_stable_sort(seed: int, keys: list[str]) -> None:
    frame = _random_frame(seed)
    want = frame.sort(keys, nulls_last=True, maintain_order=True)
    got = in_store_order(frame, keys)
    # None is allowed (the writer then sorts), a different order never is
    if got is not None:
        assert got.equals(want)


def test_long_hex_ids_are_ordered_without_the_writer() -> None:
    rng = random.Random(7)
    ids = ["".join(rng.choice("0123456789abcdef") for _ in range(24)) for _ in range(2000)]
    frame = pl.DataFrame({"job_id": ids * 2, "task": ["worker"] * 2000 + ["ps"] * 2000})
    got = in_store_order(frame, KEYS)
    assert got is not None
    assert got.equals(frame.sort(KEYS, nulls_last=True, maintain_order=True))


def test_ids_equal_in_the_first_24_bytes_still_sort_right() -> None:
    frame = pl.DataFrame({"job_id": ["p" * 24 + "b", "p" * 24 + "a", "a"], "task": ["t"] * 3})
    got = in_store_order(frame, KEYS)
    if got is not None:
        assert got["job_id"].to_list() == ["a", "p" * 24 + "a", "p" * 24 + "b"]
