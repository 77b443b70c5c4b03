"""The published PAI simulator's approach, reimplemented as the speed baseline.

``alibaba/clusterdata:cluster-trace-gpu-v2020/simulator`` advances a clock by one
second per loop iteration (``delta = 1``); every tick it releases finished jobs, admits
the jobs submitted by then, and runs ``Scheduler.alloc_job``: with the FIFO policy
(``alloc_policy = 8``) it sorts the waiting jobs by (submit time, job id) and tries each
in turn; a job that does not fit is *skipped* (``try_allocate_job_to_cluster`` returns
0 and the scan goes on), and the scan stops early only when no GPU is idle (it returns
-1). So the peer's FIFO does not block the queue: it is our ``fifo-skip``. Its demo
cluster is one node of 6,500 GPUs (``6500g_1n``), a flat pool, which this replica uses.

This module reads none of the peer's code at run time; it does the same on the same job
arrays our engine gets, so a benchmark can time both on one input. It is deliberately
the per-second, per-job-loop design - do not optimise it. ``blocking = True`` gives a
strict head-of-line variant to compare with our strict ``fifo``.
"""

from __future__ import annotations

import time

import numpy as np
import numpy.typing as npt


def tick_fifo_jobs(
    submit_s: npt.NDArray[np.int64],
    duration_s: npt.NDArray[np.int64],
    gpus: npt.NDArray[np.int64],
    cluster_gpus: int,
    wall_limit_s: float = 300.0,
    blocking: bool = False,
) -> tuple[dict[str, float], npt.NDArray[np.float64]]:
    """FIFO on a flat pool of ``cluster_gpus`` units with a 1-s tick: the summary and
    each job's finish second (NaN if it did not finish before ``wall_limit_s``), in the
    input order. Jobs of equal submit time go in input order (the peer's job id).
    """
    order = np.argsort(submit_s, kind="stable")
    sub = submit_s[order].tolist()
    dur = duration_s[order].tolist()
    need = gpus[order].tolist()
    n = len(sub)
    finish = [float("nan")] * n
    free = cluster_gpus
    pending: list[int] = []
    running: list[tuple[int, int]] = []  # (end, job)
    done = 0
    jct_sum = 0.0
    ptr = 0
    now = 0
    start = time.perf_counter()
    while done < n:
        still = []
        for end, j in running:
            if end <= now:
                free += need[j]
                done += 1
                jct_sum += now - sub[j]
                finish[j] = now
            else:
                still.append((end, j))
        running = still
        while ptr < n and sub[ptr] <= now:
            pending.append(ptr)
            ptr += 1
        kept = []
        stop = False
        for j in pending:
            if stop or free <= 0:  # the peer's -1: nothing idle, stop the scan
                stop = True
                kept.append(j)
            elif need[j] <= free:
                free -= need[j]
                running.append((now + max(1, dur[j]), j))
            else:  # the peer's 0: skip this job, try the next
                kept.append(j)
                stop = blocking
        pending = kept
        now += 1
        if now % 1000 == 0 and time.perf_counter() - start > wall_limit_s:
            break
    wall = time.perf_counter() - start
    out = np.empty(n, dtype=np.float64)
    out[order] = finish
    summary = {
        "jobs_done": done,
        "sim_s": now,
        "wall_s": round(wall, 3),
        "jobs_per_s": round(done / wall, 1) if wall else 0.0,
        "jct_mean_s": jct_sum / done if done else float("nan"),
    }
    return summary, out


def tick_fifo(
    submit_s: npt.NDArray[np.int64],
    duration_s: npt.NDArray[np.int64],
    gpus: npt.NDArray[np.int64],
    cluster_gpus: int,
    wall_limit_s: float = 300.0,
    blocking: bool = False,
) -> dict[str, float]:
    """:func:`tick_fifo_jobs` without the per-job finish times."""
    return tick_fifo_jobs(submit_s, duration_s, gpus, cluster_gpus, wall_limit_s, blocking)[0]
