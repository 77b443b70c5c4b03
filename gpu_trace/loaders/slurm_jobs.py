"""How sacct lines become jobs and placements when one line is not one job.

A pending array range (``123_[1-9%2]``) is several jobs; the requeued runs of a job
(``sacct -D``) and the components of a heterogeneous job (``123+0``, ``123+1``) are
several lines of one job; a step (``123.batch``) belongs to a job and, when the job ran
more than once, to one of its runs. These are the rare lines of an export, so Python or
small polars frames over them are fine; the million ordinary lines never pass here
except through the vectorised :func:`ids`.
"""

from __future__ import annotations

import polars as pl

from gpu_trace.loaders import slurm_nodes as nodelist
from gpu_trace.loaders import slurm_values as sv
from gpu_trace.loaders.merge import rank
from gpu_trace.loaders.textfile import LINE, REASON


def ids() -> list[pl.Expr]:
    """What a line's ``JobID`` says about where it belongs (sacct man page, ``JobID``:
    ``<jobid>[_<arraytask>][+<hetoffset>][.<step>]``): ``_key`` (the job: the id without
    a heterogeneous offset or step), ``_comp`` (the heterogeneous offset, ``+1`` ->
    ``1``), ``_step`` (``batch``, ``extern``, ``0``) and ``_range`` (the text between
    the brackets of a pending array range). The regexes run only on the lines that
    hold a ``.``, ``+`` or ``[`` (the input is nulled elsewhere).
    """
    jid = pl.col("_jobid")
    step = pl.col("_is_step")
    alloc = pl.when(step).then(jid).str.extract(sv.STEP_ID, 1).fill_null(jid)
    plus = pl.when(jid.str.contains("+", literal=True)).then(jid)
    key = (
        pl.when(alloc.str.contains("+", literal=True))
        .then(alloc.str.replace(r"\+\d+$", ""))
        .otherwise(alloc)
    )
    return [
        key.alias("_key"),
        plus.str.extract(r"\+(\d+)(?:\.|$)", 1).alias("_comp"),
        pl.when(step).then(jid).str.extract(sv.STEP_ID, 2).alias("_step"),
        pl.when(jid.str.contains("[", literal=True))
        .then(key)
        .str.extract(r"_\[([^\]]*)\]$", 1)
        .alias("_range"),
    ]


def expand_arrays(
    good: pl.DataFrame, budget: int = sv.MAX_ARRAY_TASKS
) -> tuple[pl.DataFrame, pl.DataFrame, int]:
    """Pending array ranges (``123_[13-20%4]``: the good range lines given) as one line
    per task (``123_13`` .. ``123_20``), each with the line's request, as
    ``sacct --array`` would print them; (task lines, bad lines with ``_reason``, tasks
    added beyond one per range line).
    A range that is malformed or names more than :data:`sv.MAX_ARRAY_TASKS` tasks is
    quarantined, and so is every range past the file's ``budget`` of tasks (a hostile
    export of many huge ranges). Python runs over the range lines only. A pending range
    has run nothing: its tasks carry no host list, so they get no placements.
    """
    ranges = good
    empty = pl.DataFrame(schema={LINE: pl.Int64, REASON: pl.String})
    if ranges.is_empty():
        return good, empty, 0
    tasks: list[list[int] | None] = []
    reasons: list[str | None] = []
    left = budget
    for jobid, body in ranges.select("_jobid", "_range").iter_rows():
        found, why = sv.array_tasks(body, cap=min(sv.MAX_ARRAY_TASKS, left))
        if why is not None and left < sv.MAX_ARRAY_TASKS and sv.array_tasks(body)[1] is None:
            why = f"takes the file past its budget of {budget} array tasks (a hostile export)"
        left -= len(found) if why is None else 0
        tasks.append(found if why is None else None)
        reasons.append(None if why is None else f"JobID {jobid!r} {why}")
    ranges = ranges.with_columns(
        pl.Series("_task", tasks, dtype=pl.List(pl.Int64)),
        pl.Series(REASON, reasons, dtype=pl.String),
    )
    bad = ranges.filter(pl.col(REASON).is_not_null()).select(LINE, REASON)
    ok = ranges.filter(pl.col(REASON).is_null())
    added = int(ok.select(pl.col("_task").list.len().sum() - pl.len()).item() or 0)
    prefix = pl.col("_key").str.replace(r"_\[[^\]]*\]$", "_")
    expanded = (
        ok.explode("_task")
        .with_columns((prefix + pl.col("_task").cast(pl.String)).alias("_key"))
        .with_columns(
            pl.when(pl.col("_comp").is_null())
            .then(pl.col("_key"))
            .otherwise(pl.col("_key") + "+" + pl.col("_comp"))
            .alias("_jobid"),
            pl.lit(None, dtype=pl.String).alias("_range"),
            pl.lit(None, dtype=ok.schema["_node_count"]).alias("_node_count"),
        )
        .drop("_task", REASON)
    )
    return expanded, bad, added


HELPERS = (LINE, "_comp")
"""Columns of the per-line job rows that are not canonical (dropped once folded)."""
DUPLICATE = -1
"""``_attempt`` of a line that repeats another line of its job exactly."""
SUMMED = ("gpus", "gpus_raw", "cpus", "mem_bytes", "nodes", "cpu_used_s")
"""Columns added up over a heterogeneous job's components."""
PEAKED = ("mem_peak_bytes",)
"""Columns whose largest value over a heterogeneous job's components is the job's."""


def fold(lines: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """One job of the lines that share a job key: (jobs, ``_line`` -> ``_attempt``).

    - Requeued runs (``sacct -D``: one line per run of a job id, in the order sacct
      prints them, the last being the job's current state) are attempts 0, 1, ...:
      ``attempts`` is their number; ``submit_time``, ``start_time`` and
      ``eligible_time`` are the first, ``end_time`` the last run's end (null while the
      last run has none), so ``queue_s`` runs to the first start and ``run_s`` (End -
      Start, gaps included, as the schema defines it) loses no run.
    - Heterogeneous components (``123+0``, ``123+1``; sacct man page: "the job's
      components") are one job ``123``: GPUs, CPUs, memory and nodes are summed over
      the components' current lines (so is ``cpu_used_s``; ``mem_peak_bytes`` is their
      largest), GPU models joined; status, user, limits and the
      other fields are those of the first component (the leader, ``+0``).

    - A line repeated exactly (two exports pasted into one file) is one run: the copy is
      folded away (its ``_attempt`` is :data:`DUPLICATE`, and it makes no placements).
    - So is the same run printed at two moments (overlapping exports pasted into one
      file: ``RUNNING`` with no End, later ``COMPLETED``): a run is a distinct
      (job, component, Start), since every run of a requeued job starts anew; of the
      lines of one run the most advanced state wins (:func:`gpu_trace.loaders.merge.rank`,
      as across files), then the later line. Lines without a Start (pending) are
      runs of their own, as before.

    Polars over the few folded lines only.
    """
    ordered = lines.with_columns(pl.col("_comp").cast(pl.Int64).alias("_comp_n")).sort(
        "job_id", "_comp_n", LINE, nulls_last=False
    )
    same = [c for c in ordered.columns if c != LINE]
    dropped = ordered.filter(~pl.struct(same).is_last_distinct()).select(
        LINE, pl.lit(DUPLICATE, dtype=pl.Int32).alias("_attempt")
    )
    ordered = ordered.filter(pl.struct(same).is_last_distinct())
    run = ["job_id", "_comp_n", "start_time"]
    best = pl.col(LINE).sort_by(rank().cast(pl.Int8), LINE).last().over(run)
    kept = pl.col("start_time").is_null() | (pl.col(LINE) == best)
    dropped = pl.concat(
        [
            dropped,
            ordered.filter(~kept).select(LINE, pl.lit(DUPLICATE, dtype=pl.Int32).alias("_attempt")),
        ]
    )
    ordered = ordered.filter(kept).with_columns(
        pl.int_range(pl.len()).over("job_id", "_comp_n").cast(pl.Int32).alias("_attempt")
    )
    attempts = pl.concat([ordered.select(LINE, "_attempt"), dropped])
    first = ordered.group_by("job_id").agg(
        pl.col("submit_time").min(),
        pl.col("start_time").min(),
        pl.col("eligible_time").min(),
        (pl.col("_attempt").max() + 1).alias("attempts"),
        pl.col("as_of_time").max().alias("_as_of_any"),
    )
    current = ordered.group_by("job_id", "_comp_n", maintain_order=True).agg(pl.all().last())
    others = [
        c
        for c in lines.columns
        if c
        not in (*SUMMED, *PEAKED, *HELPERS, "job_id", "submit_time", "start_time", "eligible_time")
        and c not in ("attempts", "end_time", "gpu_type", "as_of_time", "queue_s", "run_s")
    ]
    summed = [
        pl.when(pl.col(c).is_null().all()).then(None).otherwise(pl.col(c).sum()).alias(c)
        for c in SUMMED
    ]
    models = pl.col("gpu_type").drop_nulls().unique().sort().str.join("|")
    ended = pl.col("end_time").is_not_null().all()
    folded = (
        current.group_by("job_id", maintain_order=True)
        .agg(
            *(pl.col(c).first() for c in others),
            *summed,
            *(pl.col(c).max() for c in PEAKED),
            pl.when(models == "").then(None).otherwise(models).alias("gpu_type"),
            pl.when(ended).then(pl.col("end_time").max()).alias("end_time"),
        )
        .join(first, on="job_id", how="left")
        .with_columns(
            sv.seconds(pl.col("start_time") - pl.col("submit_time")).alias("queue_s"),
            sv.seconds(pl.col("end_time") - pl.col("start_time")).alias("run_s"),
            pl.coalesce("end_time", "_as_of_any").alias("as_of_time"),
        )
        .select(c for c in lines.columns if c not in HELPERS)
    )
    return folded, attempts


def task() -> pl.Expr:
    """A placement's ``task``: the step (``batch``, ``0``), the heterogeneous component
    (``+1``), or both (``+1.0``); null for the allocation of a plain job.
    """
    comp = pl.lit("+") + pl.col("_comp")
    step = pl.col("_step")
    return (
        pl.when(step.is_null())
        .then(comp)
        .when(pl.col("_comp").is_null())
        .then(step)
        .otherwise(comp + pl.lit(".") + step)
    )


def step_attempts(good: pl.DataFrame, attempts: pl.DataFrame) -> pl.DataFrame:
    """``_line`` -> ``_attempt`` for the steps of requeued jobs: the run that had
    started last when the step started (steps carry no run number in sacct).
    """
    runs = (
        good.join(attempts, on=LINE, how="inner")
        .filter(pl.col("_attempt") != DUPLICATE)
        .select("_key", pl.col("_comp").fill_null(""), "start_time", "_attempt")
        .drop_nulls("start_time")
        .sort("start_time")
    )
    keys = runs.get_column("_key").unique()
    steps = (
        good.filter(pl.col("_is_step") & pl.col("_key").is_in(keys.implode()))
        .select(LINE, "_key", pl.col("_comp").fill_null(""), "start_time")
        .drop_nulls("start_time")
        .sort("start_time")
    )
    if steps.is_empty():
        return attempts.clear()
    found = steps.join_asof(runs, on="start_time", by=["_key", "_comp"], strategy="backward")
    return found.select(LINE, "_attempt").drop_nulls()


def repeated_steps(good: pl.DataFrame) -> pl.DataFrame:
    """``_line`` -> :data:`DUPLICATE` for step lines that repeat another step line
    exactly (a job whose lines repeat, two exports pasted into one file, repeats its
    steps too): the same step on the same hosts at the same times is one placement.
    So is the same step printed at two moments (``RUNNING``, later ``COMPLETED``: the
    same step id and Start), the most advanced state winning as in :func:`fold`.
    """
    cols = ["_jobid", "start_time", "end_time", nodelist.NODES, "_gpus", "_t_state"]
    steps = good.filter(pl.col("_is_step")).select(LINE, *(c for c in cols if c in good.columns))
    again = steps.filter(~pl.struct(pl.exclude(LINE)).is_last_distinct()).select(LINE)
    if "_t_state" in steps.columns:
        best = pl.col(LINE).sort_by(rank().cast(pl.Int8), LINE).last().over("_jobid", "start_time")
        earlier = (
            steps.with_columns(sv.status(pl.col("_t_state")).alias("status"))
            .filter(pl.col("start_time").is_not_null() & (pl.col(LINE) != best))
            .select(LINE)
        )
        again = pl.concat([again, earlier]).unique(LINE, maintain_order=True)
    return again.select(LINE, pl.lit(DUPLICATE, dtype=pl.Int32).alias("_attempt"))
