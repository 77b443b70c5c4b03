"""A defect found by the Tiresias side-by-side (issue 27): a job stopped for one arrival is restarted in the same instant because a
later arrival of the same pass preempted a bigger job (fewest victims) and freed more
than it needed. It was counted as preempted and paid ``--restore-s`` for no wait.

The truth is SRTF as the Tiresias simulator runs it (SymbioticLab/Tiresias
``simulator/run_sim.py``, ``shortest_first_sim_jobs``): at every event all jobs are
sorted by remaining time and given GPUs in that order while they fit; a running job
that gets none is preempted (``preempt`` + 1). Times worked by hand below.
"""

from __future__ import annotations

from tests.test_replay_preemption_golden import run

# one node of 8 GPUs; (submit s, run s, GPUs)
ROWS = [
    (0, 301, 4),  # j0 = A
    (0, 901, 1),  # j1 = B
    (0, 902, 1),  # j2 = C
    (0, 903, 1),  # j3 = D
    (0, 904, 1),  # j4 = E
    (1, 10, 4),  # j5 = X
    (1, 20, 1),  # j6 = Y
]


def test_srtf_two_arrivals_stop_only_the_jobs_left_without_gpus() -> None:
    # t=1, remaining: X 10, Y 20, A 300, B 900, C 901, D 902, E 903. In that order on 8
    # GPUs: X 4, Y 1 (3 left), A needs 4: preempted; B, C, D 1 each: keep running;
    # E: preempted. 2 preemptions. t=11 X ends: A (300 left) restarts, + 10 s restore
    # -> ends 11 + 310 = 321. t=21 Y ends: E restarts -> 21 + 903 + 10 = 934. B, C, D
    # never stop: 901, 902, 903.
    result = run(ROWS, "8x8", "srtf", restore_s=10.0)
    jobs = result.jobs.sort("job_id")
    assert jobs["finish_time_s"].to_list() == [321.0, 901.0, 902.0, 903.0, 934.0, 11.0, 21.0]
    assert jobs["preemptions"].to_list() == [1, 0, 0, 0, 1, 0, 0]
