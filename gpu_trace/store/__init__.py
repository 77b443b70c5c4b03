"""The local store: one Parquet writer (``parquet``) and one DuckDB catalog (``catalog``).

Layout: ``<store>/<table>/source=<source>/<dataset>.parquet``. One file per
(table, source, dataset) makes re-ingesting a dataset an atomic file replacement, and
``source=`` folders let DuckDB and polars prune by source from the path alone.
"""

from gpu_trace.store.parquet import (
    ROW_GROUP_SIZE,
    StoreTransaction,
    dataset_path,
    ensure_layout,
    kv_metadata,
)

__all__ = ["ROW_GROUP_SIZE", "StoreTransaction", "dataset_path", "ensure_layout", "kv_metadata"]
