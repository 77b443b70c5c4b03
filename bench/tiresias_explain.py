"""Every difference between our ``tiresias`` and the Tiresias simulator's ``dlas-gpu``,
accounted for.

``python -m bench.tiresias_explain TRACE.csv`` (with ``TIRESIAS_SIM`` and
``TIRESIAS_PYTHON`` set as for ``bench.baseline_tiresias``) runs:

1. the published simulator, as is;
2. a scratch copy of it (a temporary folder, deleted after) with its two defects fixed:
   (a) a multi-GPU job's demotion event is scheduled from GPU-seconds
   (``ceil((limit - executed_s x GPUs) / GPUs)``; it divides the limit minus seconds
   by the GPUs), (b) each queue is ordered, after every pass, running jobs first, then
   by queue entry (arrival in queue 0, or demotion: the time, a moved job after an
   arrival of the same second, then the job id) instead of running jobs by their
   latest start and a job preempted in the pass ahead of older waiting ones;

and compares every job's first start and end with two replays of ours on one pooled
node (``--gpus 256x256 --policy tiresias``):

- ours as shipped: each waiting job, best first, stops the fewest lowest-ranked
  running jobs that make room for it; the jobs stopped keep their running rank until
  the pass ends;
- ours with the simulator's pass (:func:`readmit_pass`, here only, as a cross-check):
  every job, running or waiting, in rank order gets its GPUs if they fit, else is
  skipped (a running job skipped is stopped).

On ``bench/tiresias_trace.py``'s 5,000 jobs (seed 0) the fixed copy agrees with both
on all 5,000 jobs and on the preemptions. Before the stopped jobs kept their rank, 42
jobs differed: a job stopped for a first preemptor, and not needed once a second one
stopped a larger job, went back ranked as waiting and an older waiting job of its
queue took its GPUs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

from bench.baseline_tiresias import run as run_simulator
from bench.baseline_tiresias import skip_reason
from gpu_trace.replay import ReplayConfig, replay
from gpu_trace.replay.cluster import parse_spec
from gpu_trace.replay.interchange import read_chronus
from gpu_trace.replay.scheduling.las import Las

EDITS = (
    # (a): the demotion event from GPU-seconds
    (
        "jump_time = int(math.ceil((JOBS.queue_limit[qid] - rjob['executed_time'])"
        "/rjob['num_gpu']) + event_time)",
        "jump_time = int(math.ceil((JOBS.queue_limit[qid] - rjob['executed_time'] * "
        "rjob['num_gpu']) / float(rjob['num_gpu'])) + event_time)",
    ),
    # (b): queue entry recorded at arrival ...
    (
        "JOBS.queues[0].append(s_job)\n",
        "JOBS.queues[0].append(s_job)\n                s_job['q_enter'] = event_time; "
        "s_job['q_moved'] = 0\n",
    ),
    # ... and at demotion ...
    (
        "JOBS.queues[rjob['q_id']].append(rjob)\n",
        "JOBS.queues[rjob['q_id']].append(rjob)\n                        "
        "rjob['q_enter'] = event_time; rjob['q_moved'] = 1\n",
    ),
    # ... and each queue ordered by it after the pass, running jobs first
    (
        "queue.extend(pending_job)\n",
        "queue.extend(pending_job); queue.sort(key=lambda e: (0 if e['status'] == "
        "'RUNNING' else 1, e['q_enter'], e['q_moved'], e['job_idx']))\n",
    ),
)
"""Search and replace in ``dlas_sim_jobs`` of ``run_sim.py`` (each text must occur in
that function, once)."""


def fixed_copy(sim: Path, dst: Path) -> Path:
    """A copy of the simulator folder with (a) and (b) applied in ``dlas_sim_jobs``."""
    shutil.copytree(sim, dst)
    path = dst / "run_sim.py"
    text = path.read_text()
    at = text.index("def dlas_sim_jobs")
    head, body = text[:at], text[at:]
    end = body.find("\ndef ", 1)
    func, rest = (body, "") if end < 0 else (body[:end], body[end:])
    for old, new in EDITS:
        if func.count(old) != 1:
            msg = f"edit not applicable (found {func.count(old)} times): {old!r}"
            raise SystemExit(msg)
        func = func.replace(old, new)
    path.write_text(head + func + rest)
    return dst


def readmit_pass(self: Las) -> None:
    """The simulator's pass on one pooled node: every job in rank order (running ones by
    :meth:`Las.run_key`, waiting ones by their queued key) gets its GPUs if they fit,
    else is skipped; running jobs skipped are stopped (worst last), then the waiting
    ones admitted start, in rank order.
    """
    e = self.e
    groups = self.queue.groups.values()
    ranked = sorted(
        [(self.run_key(j), 0, j) for j in e.running] + [(k, 1, j) for h in groups for k, j in h]
    )
    free = e.state.capacity_milli // 1000
    admitted: set[int] = set()
    for _, _, j in ranked:
        if e.ngpu[j] <= free:
            free -= e.ngpu[j]
            admitted.add(j)
    stop = [j for _, w, j in ranked if w == 0 and j not in admitted]
    start = [(k, j) for k, w, j in ranked if w == 1 and j in admitted]
    if not stop and not start:
        return
    self.epoch += 1
    for j in stop:
        e.preempt(j)
        self._left(j)
        self.queue.push(self.wait_key(j), j)
        self.requeued(j)
    for key, j in start:
        if not e.try_start(j):
            msg = f"job {j} admitted but not placed"
            raise AssertionError(msg)
        group = self.queue.groups[self.queue.key_of(j)]
        group.remove((key, j))
        group.sort()  # a sorted list is a heap
        self.queue.size -= 1
        self._placed(j)
        self._push_running(j)
        self.started(j)


def ours(trace: Path, passes: Callable[[Las], None] | None) -> pl.DataFrame:
    """Our ``tiresias`` on one pooled node (``passes``: the pass used instead of ours)."""
    shipped = Las._preempting_pass
    if passes is not None:
        Las._preempting_pass = passes  # type: ignore[method-assign]
    try:
        cfg = ReplayConfig(source="chronus", scheduler="tiresias", estimator="oracle")
        r = replay(read_chronus(trace), parse_spec("256x256"), cfg)
    finally:
        Las._preempting_pass = shipped  # type: ignore[method-assign]
    return r.jobs.select(
        pl.col("job_id").cast(pl.Int64),
        pl.col("start_time_s").alias("start"),
        pl.col("finish_time_s").alias("end"),
        "preemptions",
    )


def agreement(a: pl.DataFrame, sim_csv: Path) -> dict[str, Any]:
    """Jobs with the same first start and end, and the preemption totals."""
    sim = pl.read_csv(sim_csv).select(
        "job_id",
        pl.col("start_time").cast(pl.Float64).alias("sim_start"),
        pl.col("end_time").cast(pl.Float64).alias("sim_end"),
        pl.col("preempt").alias("sim_preempt"),
    )
    both = a.join(sim, on="job_id", how="full", coalesce=True)
    same = both.filter(
        (pl.col("start") == pl.col("sim_start")) & (pl.col("end") == pl.col("sim_end"))
    )
    return {
        "jobs": both.height,
        "same_start_and_end": same.height,
        "preemptions_ours": int(a["preemptions"].sum()),
        "preemptions_sim": int(sim["sim_preempt"].sum()),
    }


def main() -> None:
    """Command line: see the module docstring."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("trace", type=Path)
    a = p.parse_args()
    reason = skip_reason()
    if reason:
        raise SystemExit(reason)
    shipped, readmit = ours(a.trace, None), ours(a.trace, readmit_pass)
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        published = run_simulator(a.trace, t / "published", "dlas-gpu", "yarn")
        sim = Path(os.environ["TIRESIAS_SIM"])
        os.environ["TIRESIAS_SIM"] = str(fixed_copy(sim, t / "fixed-sim"))
        try:
            fixed = run_simulator(a.trace, t / "fixed", "dlas-gpu", "yarn")
        finally:
            os.environ["TIRESIAS_SIM"] = str(sim)
        for name, run in (("published", published), ("fixed", fixed)):
            if "skipped" in run:
                msg = f"{name}: {run['skipped']}"
                raise SystemExit(msg)
            csv = t / name / "job.csv"
            out[f"{name} simulator vs ours"] = agreement(shipped, csv)
            out[f"{name} simulator vs ours with its pass"] = agreement(readmit, csv)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
