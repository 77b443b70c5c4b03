"""The local store: one Parquet writer (``parquet``) and one DuckDB catalog (``catalog``).

Layout: ``<store>/current -> gen-<N>`` and
``<store>/gen-<N>/<table>/source=<source>/<dataset>.parquet``. Each commit publishes a
whole new generation and swaps ``current`` atomically (``generations``); one file per
(table, source, dataset) makes re-ingesting a dataset a replacement of that file, and
``source=`` folders let DuckDB and polars prune by source from the path alone.
"""

from gpu_trace.store.generations import live_root, snapshot_root
from gpu_trace.store.parquet import (
    ROW_GROUP_SIZE,
    StoreTransaction,
    dataset_path,
    ensure_layout,
    kv_metadata,
)

__all__ = [
    "ROW_GROUP_SIZE",
    "StoreTransaction",
    "dataset_path",
    "ensure_layout",
    "kv_metadata",
    "live_root",
    "snapshot_root",
]
