"""Overlapping exports reconciled: one row per job, however many exports mention it.

Operators export ``sacct`` by day or month with overlapping windows and take ``kubectl``
snapshots again and again, so the same job arrives in several files of one ingest and
in successive ingests of one cluster. A loader whose exports overlap declares the key
that names one job (``merge_key = ("cluster", "job_id")`` on the loader class); the
ingest driver (:func:`gpu_trace.loaders.base.ingest`) then calls :func:`reconcile`
before it commits, and the store holds **one** ``jobs`` row per (source, key):

- **The most advanced record wins**: a finished state (completed, failed, oom,
  preempted, cancelled, timeout, node_fail) over running, over pending, over anything
  else (unknown).
- **Equal states: the later record**: the one whose latest instant (``as_of_time``,
  ``end_time``, ``start_time``, ``eligible_time``, ``submit_time``: the largest that is
  set) is later; then the later export: rows already in the store before this ingest's,
  this ingest's files in the order the loader reads them (a folder: by name); then the
  later row of one file.
- **Where rows live**: each winning row stays in the dataset of the export it came
  from (``jobs.file_sha256`` names that export); a row that loses is removed from its
  dataset in the same transaction, so the store never holds two rows of one job.
  Exports add to what the store knows about a cluster: re-ingesting a dataset merges
  into it rather than replacing it, so a job is never dropped because a later export no
  longer lists it (a ``kubectl`` snapshot after the pod was deleted).
- **Placements follow their job**: a job's ``placements`` are those of the export whose
  ``jobs`` record won (for a key without any ``jobs`` row: the latest export's).
- **Counted**: per (file, table), rows read = written + quarantined + merged, where
  merged are the file's rows that lost to another record of the same job. The
  ``ingests`` lines of a dataset whose rows were superseded are updated likewise, so
  every line always describes what the store holds.

Re-ingesting an export already in the store changes nothing: its records tie with
themselves, the new copy replaces the old one, and the counts come out the same.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq

from gpu_trace.errors import GpuTraceError
from gpu_trace.schemas import TABLES
from gpu_trace.store.generations import snapshot_root
from gpu_trace.store.parquet import Staged, StoreTransaction, conform

JOBS = "jobs"
PLACEMENTS = "placements"
MERGED_TABLES = (JOBS, PLACEMENTS)
"""``jobs`` rows are merged by key; ``placements`` follow the winning ``jobs`` row."""
ORIGIN = "file_sha256"
FINISHED = ("completed", "failed", "oom", "preempted", "cancelled", "timeout", "node_fail")
STAMPS = ("as_of_time", "end_time", "start_time", "eligible_time", "submit_time")
"""The instants of a record; the latest one set orders records of equal state."""
_OWN_META = ("table", "schema_version", "version", "source", "dataset")
"""Footer keys the writer sets itself (not carried over when a file is rewritten)."""


class MergeError(GpuTraceError):
    """The merged files do not hold the rows the merge decided to keep (a bug)."""


@dataclass
class Pending:
    """A staged ``jobs`` or ``placements`` file of this ingest, waiting for the merge."""

    index: int
    """Position of the file's batch in the ingest (the file order)."""
    table: str
    dataset: str
    sha: str
    staged: Staged
    metadata: dict[str, str]
    kept: int = 0
    merged: int = 0


@dataclass
class Outcome:
    """What the merge changed: final row counts per (table, dataset, export sha), and
    the datasets whose files were rewritten although no file of this ingest maps to
    them (rows superseded by this ingest).
    """

    counts: dict[tuple[str, str], dict[str | None, int]] = field(default_factory=dict)
    rewritten: set[str] = field(default_factory=set)


def rank() -> pl.Expr:
    """How advanced a record's state is: finished 3, running 2, pending 1, else 0."""
    status = pl.col("status")
    return (
        pl.when(status.is_in(FINISHED))
        .then(3)
        .when(status == "running")
        .then(2)
        .when(status == "pending")
        .then(1)
        .otherwise(0)
        .alias("_rank")
    )


def stamp() -> pl.Expr:
    """A record's latest instant (null when it has none)."""
    return pl.max_horizontal(*STAMPS).alias("_stamp")


def prior_files(tx: StoreTransaction, table: str, source: str) -> dict[str, Path]:
    """Dataset -> the current generation's file of ``table`` for ``source``."""
    folder = snapshot_root(tx.store) / table / f"source={source}"
    if not folder.is_dir():
        return {}
    return {p.stem: p for p in sorted(folder.glob("*.parquet")) if not p.name.startswith(".")}


def prior_lines(tx: StoreTransaction, source: str, dataset: str) -> pl.DataFrame | None:
    """The ``ingests`` rows of one dataset in the current generation, if any."""
    path = snapshot_root(tx.store) / "ingests" / f"source={source}" / f"{dataset}.parquet"
    if not path.exists():
        return None
    return pl.read_parquet(path)


def prior_quarantine(tx: StoreTransaction, source: str, dataset: str) -> pl.DataFrame | None:
    """The ``quarantine`` rows of one dataset in the current generation, if any."""
    path = snapshot_root(tx.store) / "quarantine" / f"source={source}" / f"{dataset}.parquet"
    if not path.exists():
        return None
    return pl.read_parquet(path)


def _scan(path: Path, fill: str | None) -> pl.LazyFrame:
    """One file with its row numbers and its export sha (a file written before the
    column existed, or by a loader that did not merge, takes its dataset's only export).
    A file written under an older schema version (before ``as_of_time`` or ``file_sha256``
    existed) is read with the columns it lacks as nulls, as the writer would fill them.
    """
    table = TABLES[path.parent.parent.name]
    lf = conform(pl.scan_parquet(path), table).with_row_index("_row")
    return lf.with_columns(pl.col(ORIGIN).fill_null(pl.lit(fill, dtype=pl.String)))


def _single_sha(tx: StoreTransaction, source: str, table: str, dataset: str) -> str | None:
    lines = prior_lines(tx, source, dataset)
    if lines is None:
        return None
    shas = lines.filter(pl.col("table") == table).get_column("file_sha256").unique().to_list()
    return shas[0] if len(shas) == 1 else None


@dataclass
class _Sources:
    """The files taking part in one table's merge, numbered in merge order."""

    paths: list[Path]
    datasets: list[str]
    fills: list[str | None]
    new: dict[int, Pending]
    """Source number -> this ingest's staged file."""


def _sources(tx: StoreTransaction, source: str, table: str, pending: list[Pending]) -> _Sources:
    """Every prior file of the table for the source (in dataset order), then this
    ingest's files (in file order).
    """
    prior = prior_files(tx, table, source)
    paths = list(prior.values())
    datasets = list(prior)
    fills = [_single_sha(tx, source, table, ds) for ds in datasets]
    new: dict[int, Pending] = {}
    for p in sorted((p for p in pending if p.table == table), key=lambda p: p.index):
        new[len(paths)] = p
        paths.append(p.staged.tmp)
        datasets.append(p.dataset)
        fills.append(p.sha)
    return _Sources(paths, datasets, fills, new)


def _candidates(src: _Sources, key: list[str], keys: pl.DataFrame, cols: list[str]) -> pl.DataFrame:
    """The rows of every source whose key is in ``keys``, with where they come from."""
    if not src.paths:
        empty = pl.LazyFrame(schema=keys.schema).with_columns(
            pl.lit(None, dtype=pl.String).alias("status"),
            *(pl.lit(None, dtype=pl.Datetime("us", "UTC")).alias(c) for c in STAMPS),
        )
        return empty.select(
            *key,
            *cols,
            pl.lit(None, dtype=pl.String).alias("_sha"),
            pl.lit(None, dtype=pl.String).alias("_ds"),
            pl.lit(None, dtype=pl.Boolean).alias("_new"),
            pl.lit(None, dtype=pl.Int64).alias("_src"),
            pl.lit(None, dtype=pl.UInt32).alias("_row"),
        ).collect()
    frames = [
        _scan(path, src.fills[i])
        .join(keys.lazy(), on=key, how="semi", nulls_equal=True)
        .select(
            *key,
            *cols,
            pl.col(ORIGIN).alias("_sha"),
            pl.lit(src.datasets[i]).alias("_ds"),
            pl.lit(i in src.new).alias("_new"),
            pl.lit(i, dtype=pl.Int64).alias("_src"),
            pl.col("_row"),
        )
        for i, path in enumerate(src.paths)
    ]
    return pl.concat(frames, how="vertical_relaxed").collect()


def _new_keys(sources: tuple[_Sources, ...], key: list[str]) -> pl.DataFrame:
    """The keys this ingest's files mention (the only keys whose rows can change)."""
    frames = [pl.scan_parquet(s.paths[i]).select(key) for s in sources for i in s.new]
    if not frames:
        return pl.DataFrame()
    return pl.concat(frames, how="vertical_relaxed").unique().collect()


def _drops(cands: pl.DataFrame, keep: pl.DataFrame) -> dict[int, pl.DataFrame]:
    """Source number -> the row numbers of its rows that lost."""
    lost = cands.join(keep.select("_src", "_row"), on=["_src", "_row"], how="anti")
    return {
        int(s): frame.select("_row")
        for (s,), frame in lost.partition_by("_src", as_dict=True).items()
    }


def _job_winners(cands: pl.DataFrame, key: list[str]) -> pl.DataFrame:
    """One row per key: the most advanced record, then the latest, then the last read."""
    ordered = cands.with_columns(rank(), stamp()).sort(
        ["_rank", "_stamp", "_src", "_row"], nulls_last=False
    )
    return ordered.unique(subset=key, keep="last", maintain_order=True)


def _placement_keep(cands: pl.DataFrame, winners: pl.DataFrame, key: list[str]) -> pl.DataFrame:
    """The placement rows of the export whose jobs record won (keys without a jobs row:
    the latest export holding placements for them).
    """
    by_job = winners.select(*key, _origin().alias("_w"))
    latest = (
        cands.sort("_src")
        .unique(subset=key, keep="last", maintain_order=True)
        .select(*key, _origin().alias("_l"))
    )
    joined = (
        cands.with_columns(_origin().alias("_o"))
        .join(by_job, on=key, how="left", nulls_equal=True)
        .join(latest, on=key, how="left", nulls_equal=True)
    )
    return joined.filter(pl.col("_o") == pl.coalesce("_w", "_l"))


def _origin() -> pl.Expr:
    """One number per export a row comes from (store or this ingest, dataset, sha256):
    a hash, compared within one process only.
    """
    return pl.struct("_new", "_ds", "_sha").hash(seed=0)


def _footer_metadata(path: Path) -> dict[str, str]:
    raw = pq.read_schema(path).metadata or {}
    out: dict[str, str] = {}
    for k, v in raw.items():
        name = k.decode()
        if name.startswith("gpu_trace.") and name[10:] not in _OWN_META:
            out[name[10:]] = v.decode()
    return out


def _rewrite(
    tx: StoreTransaction,
    source: str,
    table: str,
    src: _Sources,
    drops: dict[int, pl.DataFrame],
    outcome: Outcome,
) -> None:
    """Write each dataset the merge changes: its prior rows and this ingest's rows,
    less the rows that lost. A file of this ingest nothing changed stays as staged; the
    parts of a dataset staged by several files of this ingest become one file.
    """
    by_ds: dict[str, list[int]] = {}
    for i, ds in enumerate(src.datasets):
        by_ds.setdefault(ds, []).append(i)
    for ds, numbers in sorted(by_ds.items()):
        prior = [i for i in numbers if i not in src.new]
        new = [i for i in numbers if i in src.new]
        if not new and not any(i in drops for i in prior):
            continue
        # several staged parts of one dataset (snapshots in one ingest) are always joined
        if len(new) == 1 and (
            (not prior and new[0] not in drops) or _replaces_all(src, prior, new, drops)
        ):
            _count_staged(src.new[new[0]], outcome, table)
            continue
        staged = _write_dataset(tx, source, table, ds, numbers, src, drops)
        for i in new:
            src.new[i].staged = staged
        if not new:
            outcome.rewritten.add(ds)
        outcome.counts[(table, ds)] = _sha_counts(staged.tmp)


def _replaces_all(
    src: _Sources, prior: list[int], new: list[int], drops: dict[int, pl.DataFrame]
) -> bool:
    """This ingest's file keeps every row and every prior row of its dataset lost (an
    export ingested again, a snapshot superseding the last): the staged file is already
    the dataset's content.
    """
    if any(i in drops for i in new):
        return False
    return all(
        i in drops and drops[i].height == pq.read_metadata(src.paths[i]).num_rows for i in prior
    )


def _write_dataset(
    tx: StoreTransaction,
    source: str,
    table: str,
    dataset: str,
    numbers: list[int],
    src: _Sources,
    drops: dict[int, pl.DataFrame],
) -> Staged:
    """Stage one dataset's file anew from its sources ``numbers`` less their lost rows,
    and check that it holds exactly the rows kept.
    """
    parts: list[pl.LazyFrame] = []
    expected = 0
    for i in numbers:
        path = tx.withdraw(src.new[i].staged) if i in src.new else src.paths[i]
        lost = drops.get(i, pl.DataFrame(schema={"_row": pl.UInt32}))
        lf = _scan(path, src.fills[i]).join(lost.lazy(), on="_row", how="anti")
        parts.append(lf.drop("_row"))
        expected += pq.read_metadata(path).num_rows - lost.height
    new = [i for i in numbers if i in src.new]
    meta: dict[str, Any] = (
        src.new[new[-1]].metadata if new else _footer_metadata(src.paths[numbers[0]])
    )
    staged = tx.write(
        table,
        pl.concat(parts, how="diagonal_relaxed"),
        source=source,
        dataset=dataset,
        metadata=meta,
    )
    if staged.rows != expected:
        msg = f"{table}/{dataset}: the merge kept {expected} rows but {staged.rows} were written"
        raise MergeError(msg)
    return staged


def _sha_counts(path: Path) -> dict[str | None, int]:
    counts = pl.scan_parquet(path).group_by(ORIGIN).len().collect()
    return {r[ORIGIN]: int(r["len"]) for r in counts.iter_rows(named=True)}


def _count_staged(p: Pending, outcome: Outcome, table: str) -> None:
    outcome.counts[(table, p.dataset)] = {p.sha: p.staged.rows}


def _nothing_to_merge(jobs: _Sources, places: _Sources, key: list[str]) -> bool:
    """The common first ingest: no prior rows of the source, one file per table, and no
    key twice in the jobs file; nothing can lose, so nothing is scanned twice.
    """
    if len(jobs.paths) != len(jobs.new) or len(places.paths) != len(places.new):
        return False
    if len(jobs.new) > 1 or len(places.new) > 1:
        return False
    if not jobs.new:
        return True
    counts = pl.scan_parquet(jobs.paths[0]).select(
        pl.len().alias("rows"), pl.struct(key).n_unique().alias("keys")
    )
    rows, distinct = counts.collect().row(0)
    return bool(rows == distinct)


def reconcile(
    tx: StoreTransaction, source: str, merge_key: tuple[str, ...], pending: list[Pending]
) -> Outcome:
    """Merge this ingest's staged ``jobs`` / ``placements`` files with each other and
    with the store's rows of the same source (the rule of the module docstring); sets
    each pending file's ``kept`` and ``merged`` counts and restages what changed.
    """
    key = list(merge_key)
    outcome = Outcome()
    jobs = _sources(tx, source, JOBS, pending)
    places = _sources(tx, source, PLACEMENTS, pending)
    keys = _new_keys((jobs, places), key)
    parted = any(p.staged.part for p in pending)
    # No key to merge is no reason to skip: a staged file (even an empty one, from an
    # export whose records were all quarantined) replaces its dataset's prior file,
    # whose rows must be carried over.
    if not parted and _nothing_to_merge(jobs, places, key):
        for p in pending:
            p.kept = p.staged.rows
            _count_staged(p, outcome, p.table)
        return outcome
    job_cands = _candidates(jobs, key, keys, ["status", *STAMPS])
    winners = _job_winners(job_cands, key)
    job_drops = _drops(job_cands, winners)
    place_cands = _candidates(places, key, keys, [])
    place_drops = _drops(place_cands, _placement_keep(place_cands, winners, key))
    for src, drops in ((jobs, job_drops), (places, place_drops)):
        for i, p in src.new.items():
            p.merged = drops[i].height if i in drops else 0
            p.kept = p.staged.rows - p.merged
    _rewrite(tx, source, JOBS, jobs, job_drops, outcome)
    _rewrite(tx, source, PLACEMENTS, places, place_drops, outcome)
    return outcome
