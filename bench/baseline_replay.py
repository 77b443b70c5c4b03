"""The published PAI simulator's approach, reimplemented as the speed baseline.

``alibaba/clusterdata:cluster-trace-gpu-v2020/simulator`` advances a clock by one
second per loop iteration (``delta = 1``); every tick it releases finished jobs by
scanning the running list, admits the jobs submitted at that second, and walks the
pending list in FIFO order allocating from a flat GPU pool (``1n``: no topology).
This module does the same on the same job arrays our engine gets, so a benchmark can
time both on one input. It is deliberately the per-second, per-job-loop design - do
not optimise it.
"""

from __future__ import annotations

import time

import numpy as np
import numpy.typing as npt


def tick_fifo(
    submit_s: npt.NDArray[np.int64],
    duration_s: npt.NDArray[np.int64],
    gpus: npt.NDArray[np.int64],
    cluster_gpus: int,
    wall_limit_s: float = 300.0,
) -> dict[str, float]:
    """FIFO on a flat pool with a 1-s tick. Returns jobs done, simulated seconds, wall
    seconds and mean JCT of the finished jobs (stops early at ``wall_limit_s``)."""
    order = np.argsort(submit_s, kind="stable")
    sub = submit_s[order].tolist()
    dur = duration_s[order].tolist()
    need = gpus[order].tolist()
    n = len(sub)
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
            else:
                still.append((end, j))
        running = still
        while ptr < n and sub[ptr] <= now:
            pending.append(ptr)
            ptr += 1
        kept = []
        blocked = False
        for j in pending:
            if not blocked and need[j] <= free:
                free -= need[j]
                running.append((now + max(1, dur[j]), j))
            else:
                blocked = True
                kept.append(j)
        pending = kept
        now += 1
        if now % 1000 == 0 and time.perf_counter() - start > wall_limit_s:
            break
    wall = time.perf_counter() - start
    return {
        "jobs_done": done,
        "sim_s": now,
        "wall_s": round(wall, 3),
        "jobs_per_s": round(done / wall, 1) if wall else 0.0,
        "jct_mean_s": jct_sum / done if done else float("nan"),
    }
