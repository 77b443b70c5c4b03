"""The one Parquet writer of gpu-trace.

Every canonical table is written here and nowhere else, so every file in the store has
the same guarantees:

- validated against the canonical pyarrow schema (names, order, types, non-null columns);
- zstd compression, an explicit row-group size, column statistics on;
- key-value metadata: table, schema version, loader and its version, source, dataset,
  the input file's sha256 and the source time zone (no wall-clock times, so rebuilds
  are byte-stable);
- all-or-nothing: a :class:`StoreTransaction` stages its files in a private
  ``STORE/.tx-<pid>-<uuid>/`` folder; commit publishes them together with every
  unchanged file as the next generation ``STORE/gen-<N+1>/`` and swaps the
  ``STORE/current`` symlink with one atomic rename (see
  :mod:`gpu_trace.store.generations`). Readers resolve ``current`` once, so they see
  either all of a commit or none of it; a killed writer leaves the previous generation
  untouched and its leftovers are removed by the next run.
"""

from __future__ import annotations

import atexit
import os
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from types import TracebackType

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from gpu_trace.errors import SchemaMismatch, StoreError
from gpu_trace.schemas import TABLES, Table
from gpu_trace.store.generations import (
    clean_leftovers,
    commit_generation,
    is_generation,
    needs_repair,
    remove_tree,
    repair,
    snapshot_root,
    store_lock,
)
from gpu_trace.version import __version__

ROW_GROUP_SIZE = 256 * 1024
"""Rows per row group: large enough for good zstd ratios, small enough that DuckDB and
polars can prune by the min/max statistics of time columns."""
ZSTD_LEVEL = 1
"""zstd level of every store file: Arrow's own default. polars' default (3) spends ~25 %
more CPU on a 1 M-row jobs file (about half of an ingest's write) for files 7-25 %
smaller; an ingest is written once and read by scans that decompress either as fast."""

EMPTY_SOURCE = "_empty"
"""Partition holding one zero-row file per table, so views always bind with the right
types even before anything is ingested."""

_SLUG = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")


def _check_slug(kind: str, value: str) -> None:
    if not _SLUG.match(value):
        msg = f"{kind} {value!r} must be a lower-case slug (letters, digits, '_', '.', '-')"
        raise StoreError(msg)


def slug(text: str) -> str:
    """A name made acceptable as a ``source`` / ``dataset`` value: lower case, runs of
    other characters replaced by ``-`` (``Venus`` -> ``venus``).
    """
    return re.sub(r"[^a-z0-9_.-]+", "-", text.lower()).strip("-.") or "unnamed"


def dataset_relpath(table: str, source: str, dataset: str) -> PurePosixPath:
    """Where one (table, source, dataset) lives inside a generation."""
    return PurePosixPath(table, f"source={source}", f"{dataset}.parquet")


def dataset_path(store: Path, table: str, source: str, dataset: str) -> Path:
    """Where one (table, source, dataset) lives in the store's current generation."""
    return snapshot_root(store) / dataset_relpath(table, source, dataset)


def kv_metadata(table: Table, **extra: str | None) -> dict[str, str]:
    """The namespaced key-value metadata written into every Parquet footer."""
    meta = {
        "gpu_trace.table": table.name,
        "gpu_trace.schema_version": str(table.version),
        "gpu_trace.version": __version__,
    }
    for key, value in sorted(extra.items()):
        if value is not None:
            meta[f"gpu_trace.{key}"] = value
    return meta


def empty_table(table: Table) -> pa.Table:
    """A zero-row Arrow table with the canonical schema, built from no batches:
    ``Schema.empty_table`` would import pandas, which costs most of a second on every
    ingest.
    """
    return pa.Table.from_batches([], schema=table.schema)


def polars_schema(table: Table) -> pl.Schema:
    """The canonical schema as polars dtypes (derived from the Arrow schema)."""
    frame = pl.from_arrow(empty_table(table))
    assert isinstance(frame, pl.DataFrame)
    return frame.schema


def conform(frame: pl.LazyFrame | pl.DataFrame, table: Table) -> pl.LazyFrame:
    """Select, order and cast a loader's frame to the canonical schema.

    Missing nullable columns are added as nulls (a source simply lacks them); a missing
    non-nullable column or an unknown extra column is a loader bug and raises.
    """
    lf = frame.lazy()
    have = lf.collect_schema()
    extra = [c for c in have.names() if c not in table.column_names]
    if extra:
        msg = f"{table.name}: columns not in the canonical schema: {extra}"
        raise SchemaMismatch(msg)
    exprs: list[pl.Expr] = []
    for name, dtype in polars_schema(table).items():
        col = table.column(name)
        if name in have:
            exprs.append(pl.col(name).cast(dtype, strict=True))
        elif col.nullable:
            exprs.append(pl.lit(None, dtype=dtype).alias(name))
        else:
            msg = f"{table.name}: required column {name!r} is missing"
            raise SchemaMismatch(msg)
    return lf.select(exprs)


def _write_empty(table: Table, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(_empty_bytes(table))


_EMPTY_BYTES: dict[bytes, bytes] = {}
"""Serialized Arrow schema -> the bytes of its zero-row Parquet file. Every new store
writes one per table (~50); the bytes only depend on the schema and its metadata, so
each is encoded once per process instead of once per store."""


def _empty_bytes(table: Table) -> bytes:
    schema = table.schema.with_metadata(
        {
            **(table.schema.metadata or {}),
            **{k.encode(): v.encode() for k, v in kv_metadata(table).items()},
        }
    )
    key = schema.serialize().to_pybytes()
    data = _EMPTY_BYTES.get(key)
    if data is None:
        sink = pa.BufferOutputStream()
        pq.write_table(pa.Table.from_batches([], schema=schema), sink, compression="zstd")
        data = _EMPTY_BYTES[key] = sink.getvalue().to_pybytes()
    return data


_CHECKED_EMPTY: dict[tuple[int, int, int, int], int] = {}
"""(device, inode, size, mtime) of an ``_empty`` file whose footer was read -> the schema
version it holds. Generations hard-link unchanged files, so the same file shows up in
every new generation; every transaction would otherwise re-read one footer per table."""


def _empty_is_current(root: Path, table: Table) -> bool:
    path = root / dataset_relpath(table.name, EMPTY_SOURCE, "empty")
    try:
        st = path.stat()
    except (FileNotFoundError, NotADirectoryError):
        return False
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    version = _CHECKED_EMPTY.get(key)
    if version is None:
        try:
            meta = pq.read_schema(path).metadata or {}
        except (FileNotFoundError, NotADirectoryError):
            return False
        raw = meta.get(b"gpu_trace.schema_version", b"")
        version = int(raw) if raw.isdigit() else -1
        _CHECKED_EMPTY[key] = version
    return version == table.version


def ensure_layout(store: Path, *, publish: bool = True) -> list[Table]:
    """Make ``store`` readable: migrate an old layout, remove what killed runs left, and
    make sure the current generation has one zero-row ``_empty`` file per table (so views
    bind with the right types). Commits a generation only when one of those files is
    missing or has an old schema version; otherwise it only reads.

    With ``publish=False`` it commits nothing and returns the tables whose ``_empty``
    file is missing or old: a :class:`StoreTransaction` publishes them in its own
    generation, so the first ingest into a new store commits once, not twice (a
    generation's folders, links and fsyncs are most of a small ingest's cost).
    """
    if is_generation(store):
        return []
    store.mkdir(parents=True, exist_ok=True)
    if needs_repair(store):
        with store_lock(store):
            repair(store)
    clean_leftovers(store)
    root = snapshot_root(store)
    stale = [t for t in TABLES.values() if not _empty_is_current(root, t)]
    if not stale or not publish:
        return stale
    tx_dir = _new_tx_dir(store)
    try:
        files = {}
        for table in stale:
            rel = dataset_relpath(table.name, EMPTY_SOURCE, "empty")
            _write_empty(table, tx_dir / rel)
            files[rel] = tx_dir / rel
        commit_generation(store, files)
    finally:
        _remove_tx_dir(tx_dir)
    return []


_OPEN_TX_DIRS: set[Path] = set()
"""This process's staging folders not yet removed. Swept at interpreter exit: a Ctrl-C
can land while a transaction is leaving its ``with`` block, before its own clean-up."""


def _new_tx_dir(store: Path) -> Path:
    path = store / f".tx-{os.getpid()}-{uuid.uuid4().hex}"
    _OPEN_TX_DIRS.add(path)  # before mkdir: an interrupt between the two still sweeps it
    path.mkdir(parents=True)
    return path


def _remove_tx_dir(path: Path) -> None:
    try:
        remove_tree(path)
    finally:
        _OPEN_TX_DIRS.discard(path)


@atexit.register
def _sweep_open_tx_dirs() -> None:
    mine = f".tx-{os.getpid()}-"  # a forked child leaves its parent's folders alone
    for path in [p for p in _OPEN_TX_DIRS if p.name.startswith(mine)]:
        _remove_tx_dir(path)


@dataclass
class Staged:
    """A file written into the transaction's folder, waiting for commit."""

    table: str
    source: str
    dataset: str
    tmp: Path
    dest: PurePosixPath
    """Path inside a generation."""
    rows: int
    part: int = 0
    """Non-zero for one of several staged parts of a dataset that the ingest's merge
    joins into one file before commit (never published as such)."""


@dataclass
class StoreTransaction:
    """Stage every file of one ingest, then publish them all at once as a new generation.

    Use as a context manager: files are committed when the block exits normally and
    deleted when it raises, so a failed or interrupted ingest never leaves half a
    dataset behind. Staging runs in parallel with other writers; only commits take
    the store lock. Staging the same (table, source, dataset) twice raises: the second
    file would silently replace the first.
    """

    store: Path
    staged: list[Staged] = field(default_factory=list)
    _dir: Path | None = None
    _stale: list[Table] = field(default_factory=list)
    """Tables whose ``_empty`` file the store lacks (a new store): published with the
    staged files in the one generation this transaction commits."""

    def __enter__(self) -> StoreTransaction:
        self._stale = ensure_layout(self.store, publish=False)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()

    def write(
        self,
        table_name: str,
        frame: pl.LazyFrame | pl.DataFrame,
        *,
        source: str,
        dataset: str,
        metadata: Mapping[str, str | None] | None = None,
        sort: bool = True,
        part: int = 0,
    ) -> Staged:
        """Validate ``frame`` against the canonical table and stage it as
        ``<table>/source=<source>/<dataset>.parquet``. Returns the staged file with its
        row count (read back from the Parquet footer, not trusted from the frame).
        ``part`` > 0 stages a further part of a dataset already staged (several
        snapshots of one cluster in one ingest); the merge must join the parts into one
        file (:meth:`withdraw` each, write the whole) before commit, which refuses a part.
        """
        _check_slug("source", source)
        _check_slug("dataset", dataset)
        table = TABLES[table_name]
        dest = dataset_relpath(table.name, source, dataset)
        if part:
            dest = dest.with_name(f".part-{part}-{dest.name}")
        if any(s.dest == dest for s in self.staged):
            msg = (
                f"{dest} is written twice in one transaction: two inputs map to dataset "
                f"{dataset!r} of source {source!r}"
            )
            raise StoreError(msg)
        lf = conform(frame, table)
        if sort and table.sort_by:
            lf = lf.sort(list(table.sort_by), nulls_last=True, maintain_order=True)
        if self._dir is None:
            self._dir = _new_tx_dir(self.store)
        tmp = self._dir / dest
        tmp.parent.mkdir(parents=True, exist_ok=True)
        meta = kv_metadata(table, source=source, dataset=dataset, **dict(metadata or {}))
        try:
            lf.sink_parquet(
                tmp,
                compression="zstd",
                compression_level=ZSTD_LEVEL,
                row_group_size=ROW_GROUP_SIZE,
                statistics=True,
                metadata=meta,
                arrow_schema=writer_schema(table.schema),
            )
            rows = _check_written(tmp, table)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        staged = Staged(table.name, source, dataset, tmp, dest, rows, part)
        self.staged.append(staged)
        return staged

    def withdraw(self, staged: Staged) -> Path:
        """Take a staged file back (it will not be published) and return where it now
        lies in the transaction's folder, to be read while its replacement is written
        to the same destination: the ingest's merge rewrites a file whose rows lost to
        another export's records.
        """
        self.staged.remove(staged)
        scratch = staged.tmp.with_name(f".withdrawn-{uuid.uuid4().hex}.parquet")
        staged.tmp.rename(scratch)
        return scratch

    def commit(self) -> None:
        """Publish the staged files (nothing to publish: no new generation)."""
        try:
            parts = [str(s.dest) for s in self.staged if s.part]
            if parts:
                msg = f"staged parts were never merged into their dataset: {', '.join(parts)}"
                raise StoreError(msg)
            files = {s.dest: s.tmp for s in self.staged}
            if self._stale:
                if self._dir is None:
                    self._dir = _new_tx_dir(self.store)
                for table in self._stale:
                    rel = dataset_relpath(table.name, EMPTY_SOURCE, "empty")
                    _write_empty(table, self._dir / rel)
                    files.setdefault(rel, self._dir / rel)
            if files:
                commit_generation(self.store, files)
        finally:
            self.abort()

    def abort(self) -> None:
        """Drop the staged files and the transaction's folder."""
        self.staged.clear()
        if self._dir is not None:
            path, self._dir = self._dir, None
            _remove_tx_dir(path)


def _polars_arrow_type(t: pa.DataType) -> pa.DataType:
    if pa.types.is_string(t):
        return pa.large_string()
    if pa.types.is_list(t):
        return pa.large_list(_polars_arrow_type(t.value_type))
    return t


def writer_schema(schema: pa.Schema) -> pa.Schema:
    """The canonical schema as polars' writer takes it: polars' own string and list
    layouts, all fields nullable (polars tracks no nullability; :func:`_check_written`
    enforces the non-null columns), column descriptions and units kept as metadata.
    """
    return pa.schema(
        [pa.field(f.name, _polars_arrow_type(f.type), True, f.metadata) for f in schema],
        metadata=schema.metadata,
    )


def _canonical_type(t: pa.DataType) -> pa.DataType:
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_large_list(t) or pa.types.is_list(t):
        return pa.list_(_canonical_type(t.value_type))
    return t


def _check_written(path: Path, table: Table) -> int:
    """Read the footer back: the schema must be the canonical one and non-nullable
    columns must hold no nulls. Returns the row count.
    """
    meta = pq.read_metadata(path)
    schema = meta.schema.to_arrow_schema()
    got = [(f.name, _canonical_type(f.type)) for f in schema]
    want = [(f.name, f.type) for f in table.schema]
    if got != want:
        msg = f"{table.name}: written schema {got} differs from {want}"
        raise SchemaMismatch(msg)
    required = {c.name for c in table.columns if not c.nullable}
    for rg in range(meta.num_row_groups):
        group = meta.row_group(rg)
        for i in range(group.num_columns):
            chunk = group.column(i)
            name = chunk.path_in_schema.split(".")[0]
            stats = chunk.statistics
            if name in required and stats is not None and stats.null_count:
                msg = (
                    f"{table.name}: column {name!r} must not be null "
                    f"({stats.null_count} nulls in row group {rg})"
                )
                raise SchemaMismatch(msg)
    return int(meta.num_rows)


def read_table(store: Path, table_name: str, source: str | None = None) -> pa.Table:
    """Read one canonical table (optionally one source) into Arrow; for tests and small
    tables. Analyses should go through the DuckDB catalog or ``pl.scan_parquet``.
    """
    table = TABLES[table_name]
    root = snapshot_root(store) / table.name
    pattern = f"source={source}/*.parquet" if source else "source=*/*.parquet"
    files = sorted(p for p in root.glob(pattern) if not p.name.startswith("."))
    if not files:
        return empty_table(table)
    return pa.concat_tables([pq.read_table(f, schema=table.schema) for f in files])
