"""Sanity warnings on replay results: signs that a comparison cannot show what its
reader will take it to show.

- **No job waited** (none queued before its first start, none preempted) in any run
  of an experiment: the cluster is so large for the
  workload that every policy starts every job on arrival (openb on its own inventory
  ran at 0.3 % allocation and all 12 policy x placement runs were identical).
- **Every run produced the same schedule** (each job's start and end equal in every
  run): whatever the table says, the policies made no difference here.
- **Jobs dropped as unfit**: jobs rejected because they fit no node, with how many
  and why, so a mean over the others is not read as one over all jobs.

The same functions serve the command line (stderr, after the tables) and the report
(under each experiment's scorecard); they read ``replay_runs`` / ``replay_jobs`` rows.
"""

from __future__ import annotations

import polars as pl

JOB_COLUMNS = ("run_id", "job_id", "outcome", "reason", "queue_s", "start_time_s", "finish_time_s")
"""The ``replay_jobs`` columns the checks read."""


def _schedule(jobs: pl.DataFrame, run_id: str) -> pl.DataFrame:
    return (
        jobs.filter(pl.col("run_id") == run_id)
        .select("job_id", "start_time_s", "finish_time_s")
        .sort("job_id", "start_time_s", nulls_last=True)
    )


def warnings(runs: pl.DataFrame, jobs: pl.DataFrame) -> list[str]:
    """The warnings for the runs of ONE experiment (``runs``: their ``replay_runs``
    rows; ``jobs``: their ``replay_jobs`` rows, at least :data:`JOB_COLUMNS`).
    """
    out: list[str] = []
    ids = runs["run_id"].to_list()
    mine = jobs.filter(pl.col("run_id").is_in(ids))
    placed = mine.filter(pl.col("outcome").is_in(["finished", "unfinished"]))
    waited = placed.filter(pl.col("queue_s") > 0).height
    # queue_s ends at a job's first start: a preempted job waits after it (SRTF, LAS
    # start every arrival at once and preempt), so preemptions are waits too
    preempted = runs["preemptions"].sum() if "preemptions" in runs.columns else 0
    if placed.height and not waited and not preempted:
        alloc = runs["alloc_mean_ratio"].mean() if "alloc_mean_ratio" in runs.columns else None
        at = f" (mean allocation {alloc:.1%})" if isinstance(alloc, float) else ""
        out.append(
            f"no job waited in any of the {len(ids)} run(s){at}: the cluster is too large "
            "for this workload to tell policies apart (fewer --gpus or a higher --load)"
        )
    if len(ids) > 1:
        first = _schedule(mine, ids[0])
        if first.height and all(_schedule(mine, r).equals(first) for r in ids[1:]):
            out.append(
                f"all {len(ids)} runs produced the same schedule (every job's start and end "
                "equal): the policies made no difference on this workload and cluster"
            )
    out.extend(_unfit(mine, ids))
    return out


def _unfit(jobs: pl.DataFrame, ids: list[str]) -> list[str]:
    """``N jobs dropped as unfit (reason: count, ...)``, once when every run dropped
    the same, else per run.
    """
    texts: dict[str, str] = {}
    for run_id in ids:
        rejected = jobs.filter((pl.col("run_id") == run_id) & (pl.col("outcome") == "rejected"))
        if not rejected.height:
            texts[run_id] = ""
            continue
        why = rejected.group_by("reason").len().sort("len", "reason", descending=[True, False])
        reasons = ", ".join(f"{r or 'no reason'}: {n:,}" for r, n in why.iter_rows())
        texts[run_id] = f"{rejected.height:,} job(s) dropped as unfit ({reasons})"
    distinct = set(texts.values())
    if distinct == {""}:
        return []
    if len(distinct) == 1:
        return [f"{distinct.pop()} in every run"]
    return [f"run {r}: {t}" for r, t in texts.items() if t]


def by_experiment(runs: pl.DataFrame, jobs: pl.DataFrame) -> list[str]:
    """:func:`warnings` per experiment (``experiment_id``; a run without one alone),
    each text once.
    """
    key = (
        pl.coalesce("experiment_id", pl.col("run_id"))
        if "experiment_id" in runs.columns
        else pl.col("run_id")
    )
    keyed = runs.with_columns(key.alias("_exp"))
    seen: list[str] = []
    for exp in keyed["_exp"].unique(maintain_order=True).to_list():
        for text in warnings(keyed.filter(pl.col("_exp") == exp), jobs):
            if text not in seen:
                seen.append(text)
    return seen
