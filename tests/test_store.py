"""The Parquet writer: zstd, row groups, metadata, validation, atomicity, determinism."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

from gpu_trace.errors import SchemaMismatch, StoreError
from gpu_trace.schemas import TABLES
from gpu_trace.store.parquet import (
    ROW_GROUP_SIZE,
    StoreTransaction,
    dataset_path,
    ensure_layout,
    read_table,
)


def machines_frame(n: int = 3) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "source": ["test"] * n,
            "dataset": ["d"] * n,
            "machine_id": [f"m{i}" for i in range(n)],
            "gpus": [8] * n,
        }
    )


def test_write_zstd_metadata_and_missing_columns(store: Path) -> None:
    with StoreTransaction(store) as tx:
        staged = tx.write(
            "machines",
            machines_frame(),
            source="test",
            dataset="d",
            metadata={"source_sha256": "ab"},
        )
    path = dataset_path(store, "machines", "test", "d")
    assert path.exists() and staged.rows == 3
    meta = pq.read_metadata(path)
    kv = {k.decode(): v.decode() for k, v in meta.metadata.items()}
    assert kv["gpu_trace.table"] == "machines"
    assert kv["gpu_trace.schema_version"] == str(TABLES["machines"].version)
    assert kv["gpu_trace.source"] == "test"
    assert kv["gpu_trace.dataset"] == "d"
    assert kv["gpu_trace.source_sha256"] == "ab"
    for rg in range(meta.num_row_groups):
        for c in range(meta.row_group(rg).num_columns):
            assert meta.row_group(rg).column(c).compression == "ZSTD"
    table = read_table(store, "machines", "test")
    assert table.column("gpus").to_pylist() == [8, 8, 8]
    assert table.column("gpu_type").null_count == 3  # absent nullable column added as nulls
    # column descriptions travel in the file
    field = pq.read_schema(path).field("gpus")
    assert field.metadata[b"unit"] == b"gpu"


def test_row_group_size_is_explicit(store: Path) -> None:
    n = ROW_GROUP_SIZE + 10
    with StoreTransaction(store) as tx:
        tx.write("machines", machines_frame(n), source="test", dataset="big")
    meta = pq.read_metadata(dataset_path(store, "machines", "test", "big"))
    assert meta.num_row_groups == 2
    assert meta.row_group(0).num_rows == ROW_GROUP_SIZE


def test_required_nulls_and_unknown_columns_rejected(store: Path) -> None:
    bad = machines_frame().with_columns(pl.lit(None, dtype=pl.String).alias("machine_id"))
    with pytest.raises(SchemaMismatch, match="machine_id"), StoreTransaction(store) as tx:
        tx.write("machines", bad, source="test", dataset="d")
    with pytest.raises(SchemaMismatch, match="bogus"), StoreTransaction(store) as tx:
        tx.write("machines", machines_frame().with_columns(bogus=1), source="test", dataset="d")
    with pytest.raises(StoreError, match="slug"), StoreTransaction(store) as tx:
        tx.write("machines", machines_frame(), source="Bad Source", dataset="d")
    assert not dataset_path(store, "machines", "test", "d").exists()


def test_failed_ingest_leaves_previous_data_intact(store: Path) -> None:
    with StoreTransaction(store) as tx:
        tx.write("machines", machines_frame(), source="test", dataset="d")
    path = dataset_path(store, "machines", "test", "d")
    before = path.read_bytes()
    # A transaction whose first file is staged but whose second write fails: nothing moves.
    with pytest.raises(SchemaMismatch), StoreTransaction(store) as tx:
        tx.write("machines", machines_frame(5), source="test", dataset="d")
        tx.write("jobs", pl.DataFrame({"source": ["test"]}), source="test", dataset="d")
    assert path.read_bytes() == before
    leftovers = [p for p in store.rglob("*") if p.name.endswith(".tmp")]
    assert leftovers == []


def test_a_part_never_merged_is_never_published(store: Path) -> None:
    """Parts of one dataset (several snapshots in one ingest) exist only until the merge
    joins them; a transaction that commits with one left over publishes nothing."""
    with StoreTransaction(store) as tx:
        tx.write("machines", machines_frame(), source="test", dataset="d")
    path = dataset_path(store, "machines", "test", "d")
    before = path.read_bytes()
    with pytest.raises(StoreError, match="never merged"), StoreTransaction(store) as tx:
        tx.write("machines", machines_frame(5), source="test", dataset="d")
        tx.write("machines", machines_frame(2), source="test", dataset="d", part=1)
    assert path.read_bytes() == before
    assert not [p for p in store.rglob("*") if ".part-" in p.name]


def test_interrupted_write_cleans_temp(store: Path) -> None:
    """A frame that fails while streaming (strict cast) leaves no temp file behind."""
    frame = machines_frame().with_columns(pl.Series("gpus", ["8", "x", "8"]))
    with pytest.raises(Exception), StoreTransaction(store) as tx:  # noqa: B017
        tx.write("machines", frame, source="test", dataset="d")
    assert not any(p.name.endswith(".tmp") for p in store.rglob("*"))


def test_same_input_same_bytes(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    frame = pl.DataFrame(
        {
            "source": ["t", "t"],
            "dataset": ["d", "d"],
            "job_id": ["2", "1"],
            "status": ["completed", "failed"],
            "time_basis": ["absolute"] * 2,
            "submit_time": [
                dt.datetime(2020, 1, 2, tzinfo=dt.UTC),
                dt.datetime(2020, 1, 1, tzinfo=dt.UTC),
            ],
        }
    )
    for root in (a, b):
        with StoreTransaction(root) as tx:
            tx.write("jobs", frame, source="t", dataset="d")
    pa_, pb = dataset_path(a, "jobs", "t", "d"), dataset_path(b, "jobs", "t", "d")
    assert pa_.read_bytes() == pb.read_bytes()
    # sorted by submit_time on write
    assert read_table(a, "jobs").column("job_id").to_pylist() == ["1", "2"]


def test_ensure_layout_is_idempotent(store: Path) -> None:
    ensure_layout(store)
    first = {p: p.stat().st_mtime_ns for p in store.rglob("*.parquet")}
    ensure_layout(store)
    assert {p: p.stat().st_mtime_ns for p in store.rglob("*.parquet")} == first
    assert len(first) == len(TABLES)  # one zero-row file per table
    # ... inside the first generation, and a second call commits nothing new
    assert (store / "current").readlink().name == "gen-00000001"
    assert sorted(p.name for p in store.iterdir()) == [".lock", "current", "gen-00000001"]
