"""``loaders.store_order.in_store_order`` must give exactly the order the store writer
gives: polars' stable sort by the table's ``sort_by`` with nulls last
(``store/parquet.py``). The reference here is polars' own ``DataFrame.sort``.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from gpu_trace.loaders import LOADERS, ingest
from gpu_trace.loaders.store_order import in_store_order
from gpu_trace.schemas import TABLES

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


def test_pai_tables_written_unsorted_are_in_the_store_order(tmp_path: Path) -> None:
    """PAI's jobs and tasks skip the writer's sort: their files must still be in
    ``sort_by`` order. Job names here are random hex, submit times repeat, and a task
    line is moved so that the file is out of order.
    """
    rng = random.Random(11)
    names = ["".join(rng.choice("0123456789abcdef") for _ in range(24)) for _ in range(300)]
    folder = tmp_path / "pai"
    folder.mkdir()
    jobs = [
        f"{n},i{i},u{i % 7},Terminated,{1000 + i // 3}.0,{2000 + i}.0" for i, n in enumerate(names)
    ]
    jobs.append(f"{names[5]}x,ix,u1,Waiting,0.0,0.0")  # unknown submit time: sorts last
    tasks = [f"{n},{t},1.0,Terminated,{1000 + i // 3}.0,{2000 + i}.0,100.0,1.0,50.0,T4"
             for i, n in enumerate(names) for t in ("worker", "ps")]  # fmt: skip
    tasks.insert(0, tasks.pop())
    (folder / "pai_job_table.csv").write_text("\n".join(jobs) + "\n")
    (folder / "pai_task_table.csv").write_text("\n".join(tasks) + "\n")
    ingest(LOADERS["pai2020"], folder, tmp_path / "store")
    for table in ("jobs", "tasks"):
        (written,) = (tmp_path / "store" / "current").glob(f"{table}/source=pai2020/*.parquet")
        frame = pl.read_parquet(written)
        assert frame.height == len(jobs if table == "jobs" else tasks)
        assert frame.equals(frame.sort(TABLES[table].sort_by, nulls_last=True, maintain_order=True))


@pytest.mark.parametrize("seed", range(20))
def test_rows_in_order_of_the_first_key_only(seed: int) -> None:
    """Submit times already in order, ids within a second not (a PAI job table): only
    the tie groups move, and the result is still the writer's order.
    """
    frame = _random_frame(seed).sort("t", nulls_last=True, maintain_order=True)
    keys = ["t", "job_id", "task"]
    got = in_store_order(frame, keys)
    if got is not None:
        assert got.equals(frame.sort(keys, nulls_last=True, maintain_order=True))
    # ASCII ids, no unknown times: the integer prefixes must vouch for this one
    without_nulls = frame.drop_nulls("t").filter(~pl.col("job_id").str.contains("é"))
    got = in_store_order(without_nulls, keys)
    assert got is not None
    assert got.equals(without_nulls.sort(keys, nulls_last=True, maintain_order=True))


@pytest.mark.parametrize("seed", range(20))
def test_first_key_without_nulls_sorted_by_its_first_prefix(seed: int) -> None:
    """A first key of strings without nulls (PAI's job names) is sorted by its first
    8 bytes, then only the rows sharing them with a neighbour by everything: ids here
    share long stems (``x`` * 30, 24 zeros), tasks repeat, some tasks are null.
    """
    frame = _random_frame(seed).drop_nulls("job_id")
    got = in_store_order(frame, KEYS)
    if got is not None:
        assert got.equals(frame.sort(KEYS, nulls_last=True, maintain_order=True))
    ascii_only = frame.filter(~pl.col("job_id").str.contains("é"))
    got = in_store_order(ascii_only, KEYS)
    assert got is not None
    assert got.equals(ascii_only.sort(KEYS, nulls_last=True, maintain_order=True))
