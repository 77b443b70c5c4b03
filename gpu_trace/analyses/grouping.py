"""Accounting groups (``--by account|qos|partition|user|vc``): which jobs column each
key reads, and the refusal when a source in the selection does not have it.

Every column is in every store (the writer fills missing nullable columns with nulls),
so "a source has the column" means at least one of its jobs has a value there; a source
whose jobs all lack it (Philly and openb have no account) would otherwise show as one
silent ``null`` group holding all its work. ``user`` and ``vc``, which ``--by`` took
before these keys, keep their behaviour (a source without them is one null group, as
scripts and the report expect); the refusal is for the keys of :data:`CHECKED`. ``partition`` is the Slurm partition, which the
Slurm loader stores in ``vc``; other sources' ``vc`` is a virtual cluster, namespace or
pool, not a partition, so ``--by partition`` is refused for them (``--by vc`` works).
"""

from __future__ import annotations

import polars as pl

from gpu_trace.errors import GpuTraceError

GROUP_BY = ("account", "qos", "partition", "user", "vc")
"""The accounting keys every ``--by`` of users, queueing, failures, summary and
accounting accepts."""
CHECKED = ("account", "qos", "partition")
"""Keys refused for a source that does not record them."""
PARTITION_SOURCES = ("slurm",)
"""Sources whose ``vc`` column holds the Slurm partition (``sacct`` ``Partition``)."""


def group_column(by: str) -> str:
    """The jobs column a ``--by`` key reads (``partition`` is stored as ``vc``)."""
    return "vc" if by == "partition" else by


class MissingGroup(GpuTraceError):
    """A ``--by`` key that a selected source does not record (one line, exit 1)."""


def with_group(jobs: pl.LazyFrame, by: str) -> pl.LazyFrame:
    """``jobs`` with a column named ``by`` (the key's values), or :class:`MissingGroup`
    naming the sources whose jobs have no value in that column.

    Reads the ``source`` and key columns once (a group-by of the sources), so the refusal
    comes before any table is computed.
    """
    col = group_column(by)
    if by not in CHECKED:
        return jobs if col == by else jobs.with_columns(pl.col(col).alias(by))
    have = (
        jobs.group_by("source")
        .agg(pl.col(col).is_not_null().any().alias("has"))
        .sort("source")
        .collect()
    )
    lacking = [s for s, has in have.iter_rows() if not has]
    why = f"every job's {col} is empty"
    if by == "partition":
        other = [s for s in have.get_column("source") if s not in PARTITION_SOURCES]
        lacking = sorted({*lacking, *other})
        why = f"only {', '.join(PARTITION_SOURCES)} records a Slurm partition (its vc)"
    if lacking:
        names = ", ".join(lacking)
        msg = (
            f"--by {by}: source {names} has no {by} column ({why}); "
            f"pick another --by or select the sources that record it with --source"
        )
        raise MissingGroup(msg)
    return jobs if col == by else jobs.with_columns(pl.col(col).alias(by))
