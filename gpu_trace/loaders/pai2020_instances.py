"""``pai_instance_table.csv`` -> ``placements``: the big one (about 2 GB, 7 M lines), read
so that peak memory stays far below the file size.

The owners deduplicate instances by sorting on ``status, start_time, end_time`` and
keeping the last row per ``worker_name``, then drop rows whose ``worker_name`` is NaN
(``analysis/utils.py`` ``get_dfiw``). We apply the same rule, but every dropped row goes to
quarantine with its reason, so the file still reconciles line for line.

Doing that without holding 2 GB of strings in memory takes two full passes over the
lines plus a cheap one, none of which keeps a string column of the whole file:

1. parse and check every line, collecting only numbers: the line number, 64-bit hashes
   of ``worker_name``, of ``job_name`` (two seeds) and of ``machine``, the start time,
   and the reason of each bad line;
2. re-read, by line number *before* splitting, only the lines whose ``worker_name`` hash
   repeats and the bad lines: duplicates are resolved exactly on the real names (a hash
   collision between two different names is thereby harmless), rejects get their text;
3. stream the kept lines (dropped ones skipped by number), joined to their task's
   per-instance GPU request, to Parquet (the store writer runs this one).

Strings cut out of a line are views into the buffer of the whole chunk of lines, so the
few kept from passes 1 and 2 are copied (``owned``) lest they pin the file in memory.

The per-job aggregates the ``jobs`` table needs from instances (earliest start, distinct
machines) come from the numeric keys of pass 1, grouped by the two job-name hashes (a
128-bit key: a collision among a million jobs has probability around 1e-27); the task
join uses a 128-bit (job_name, task_name) hash the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from gpu_trace.loaders.base import Batch
from gpu_trace.loaders.pai2020_files import (
    CLUSTER,
    TRACE,
    Input,
    first,
    instant,
    metadata,
    owned,
    parse,
    provenance,
    rejects,
    seconds,
    status,
    time_checks,
)
from gpu_trace.loaders.textfile import LINE, RAW, REASON

SEED_A = 0x50414932
SEED_B = 0x30323032
"""Hash seeds; only ever compared within one process, so stability across polars
versions does not matter."""

DEDUP_ORDER = ["status", "start_time", "end_time", LINE]
"""The owners' sort (``status, start_time, end_time``; NaN last; a stable sort, so the
later line wins ties), on the raw values as written (before 0 becomes unknown)."""


def job_hash(col: str = "job_name") -> list[pl.Expr]:
    """The 128-bit job key shared by instance aggregates and the jobs table."""
    return [pl.col(col).hash(SEED_A).alias("_j1"), pl.col(col).hash(SEED_B).alias("_j2")]


def task_hash() -> list[pl.Expr]:
    """The 128-bit (job_name, task_name) key joining instances to their task: joining 7 M
    rows on two u64 costs a fifth of joining on the two strings.
    """
    key = pl.struct("job_name", "task_name")
    return [key.hash(SEED_A).alias("_t1"), key.hash(SEED_B).alias("_t2")]


@dataclass
class Instances:
    """The placements batch and what the jobs table takes from instances."""

    batch: Batch
    per_job: pl.DataFrame
    """``_j1, _j2`` (job-name hashes), ``inst_start_s`` (earliest known start, float
    seconds) and ``nodes`` (distinct machines) over the kept instances of each job."""


def read_instances(inp: Input, task_gpus: pl.DataFrame | None) -> Instances:
    """Build the placements batch. ``task_gpus`` (``_t1, _t2`` = :func:`task_hash`,
    ``gpus_per_instance``; one row per task) gives each instance its GPU count; without
    a task table the count stays null.
    """
    checked = parse(inp).with_columns(
        first(*time_checks(), (pl.col("worker_name").is_null(), "worker_name is missing"))
    )
    usable = pl.col(REASON).is_null()

    # pass 1 (every line parsed and checked): numbers, plus the reason of bad lines
    keys = checked.select(
        LINE,
        REASON,
        pl.when(usable).then(pl.col("worker_name").hash(SEED_A)).alias("_w"),
        *(pl.when(usable).then(h).alias(h.meta.output_name()) for h in job_hash()),
        pl.when(usable & pl.col("machine").is_not_null())
        .then(pl.col("machine").hash(SEED_A))
        .alias("_m"),
        pl.when(usable).then(seconds("start_time")).alias("_start_s"),
    ).collect(engine="streaming")
    bad = keys.filter(pl.col(REASON).is_not_null()).select(LINE, REASON)
    keys = keys.filter(pl.col(REASON).is_null()).drop(REASON)
    candidates = keys.filter(pl.col("_w").is_duplicated()).get_column(LINE)

    # pass 2 (only the lines picked by number are split): duplicates and rejects
    picked = (
        parse(inp, only=pl.concat([candidates, bad.get_column(LINE)]))
        .select(LINE, owned(RAW), owned("worker_name"), owned("status"), "start_time", "end_time")
        .collect(engine="streaming")
    )
    dup = picked.filter(pl.col(LINE).is_in(candidates.implode()))
    winners = dup.group_by("worker_name").agg(
        pl.col(LINE).sort_by(DEDUP_ORDER, nulls_last=True).last().alias("_winner")
    )
    losers = (
        dup.join(winners, on="worker_name")
        .filter(pl.col(LINE) != pl.col("_winner"))
        .select(
            LINE,
            pl.format("duplicate worker_name, superseded by line {}", "_winner").alias(REASON),
        )
    )
    dropped = pl.concat([bad, losers]).sort(LINE)
    rejected = rejects(
        dropped.join(picked.select(LINE, RAW), on=LINE, how="left", maintain_order="left"),
        inp,
        "placements",
        TRACE,
    ).collect()

    # pass 3 (run by the store writer): the kept lines, split again and streamed
    kept = parse(inp, skip_lines=dropped.get_column(LINE))
    if task_gpus is not None:
        kept = kept.with_columns(task_hash()).join(
            task_gpus.lazy(), on=["_t1", "_t2"], how="left", maintain_order="left"
        )
        gpu_count = pl.col("gpus_per_instance")
    else:
        gpu_count = pl.lit(None, dtype=pl.Float64)
    rows = kept.select(
        *provenance(TRACE),
        pl.col("job_name").alias("job_id"),
        pl.lit(0, dtype=pl.Int32).alias("attempt"),
        pl.col("task_name").alias("task"),
        pl.col("worker_name").alias("instance"),
        instant(seconds("start_time")).alias("start_time"),
        instant(seconds("end_time")).alias("end_time"),
        pl.col("machine").alias("machine_id"),
        gpu_count.alias("gpu_count"),
        status().alias("status"),
    )
    lost = losers.get_column(LINE).implode()

    per_job = (
        keys.filter(~pl.col(LINE).is_in(lost))
        .group_by("_j1", "_j2")
        .agg(
            pl.col("_start_s").min().alias("inst_start_s"),
            pl.col("_m").drop_nulls().n_unique().alias("nodes"),
        )
    )
    notes = {
        "instance": "worker_name (inst_name is not kept)",
        "dedup": (
            "owners' rule: sort by status,start_time,end_time (NaN last, stable), keep the "
            "last row per worker_name; earlier rows and rows without worker_name are "
            "quarantined"
        ),
        "gpu_count": (
            "task plan_gpu / 100 (pai_task_table.csv)"
            if task_gpus is not None
            else "null: pai_task_table.csv not read"
        ),
        "row_order": "file order (not sorted: the file is too large to sort in memory)",
        "duplicates_superseded": str(losers.height),
    }
    batch = Batch(
        "placements",
        TRACE,
        inp.info,
        rows,
        rejected,
        cluster=CLUSTER,
        metadata=metadata(inp, **notes),
        sort=False,
    )
    return Instances(batch, per_job)
