"""SRTF with a multi-node slowdown: a running job is ranked by its work left, the same
basis as a waiting job's, so a job slowed by its split placement is not ranked behind
itself waiting (with time left, two jobs preempted each other forever in one instant).

Hand case, two nodes of 4 GPUs, multi-node slowdown 1.3:
- j0 (8 GPUs, 100 s of work) arrives at 0 and runs split over both nodes: 1.3 s of wall
  time per second of work, so it ends at 130.
- j1 (4 GPUs, 110 s) arrives at 10. j0's work left is 100 - 10 / 1.3 = 92.3 s < 110 s,
  so j1 waits (its time left, 120 s, would have made j1 preempt it, and then j0,
  waiting with 92.3 s, preempt j1 back, forever).
- j1 starts when j0 ends, at 130, on one node: ends at 240. No preemption.
"""

from __future__ import annotations

import multiprocessing as mp
from typing import Any

from gpu_trace.replay import ReplayConfig, replay
from gpu_trace.replay.cluster import parse_spec
from tests.replay_frames import jobs_frame


def _run(out: Any) -> None:
    cfg = ReplayConfig(
        source="t",
        scheduler="srtf",
        placement="spread",
        placement_options={"split": True},
        multinode_slowdown=1.3,
    )
    r = replay(jobs_frame([(0, 100, 8), (10, 110, 4)]), parse_spec("8x4"), cfg)
    rows = r.jobs.select("job_id", "start_time_s", "finish_time_s", "preemptions").rows()
    out.put(sorted(rows))


def test_slowed_job_is_ranked_by_its_work_left() -> None:
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    child = ctx.Process(target=_run, args=(out,))
    child.start()
    child.join(300)  # a hang detector, not a speed threshold: the old ranks never end
    if child.is_alive():
        child.kill()
        raise AssertionError("the SRTF pass never ended")
    got = out.get(timeout=10)
    assert got == [("j0", 0.0, 130.0, 0), ("j1", 130.0, 240.0, 0)]
