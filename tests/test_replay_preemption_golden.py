"""Correct preemption (issue 27): hand cases for SRTF and LAS / Tiresias, every start
and end worked out by hand in the comments (never read back from the engine).

The independent truth for LAS / Tiresias semantics is the Tiresias simulator
(SymbioticLab/Tiresias, ``simulator/run_sim.py``, ``dlas_sim_jobs``):

- each queue is a list; a new job is appended to queue 0, a demoted job to the tail
  of its new queue, a promoted job to the tail of queue 0;
- every pass walks the queues in order and gives each job its GPUs if they are free,
  otherwise passes it over (the jobs after it still get their turn); a running job that
  gets no GPUs is preempted;
- after the pass, waiting jobs move behind running ones in each list: within a queue a
  running job keeps its GPUs, unless it entered the queue (demotion) at this very event,
  behind jobs already waiting there;
- ``last_pending_time`` (the starvation counter) adds every pending second while
  ``executed_time`` > 0 and is reset only at a promotion; a waiting job outside queue 0
  is promoted once it reaches ``solve_starvation`` x ``executed_time``;
- ``simulator/jobs.py``: 3 queues, ``queue_limit`` 3,250 and 7,200 (GPU-seconds with
  ``dlas-gpu``), the last queue unbounded.

Cluster specs are ``TOTALxPER_NODE``: ``4x4`` = one node of 4 GPUs, ``1x1`` = one GPU.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from gpu_trace.replay import ReplayConfig, replay
from gpu_trace.replay.cluster import parse_spec
from tests.replay_frames import jobs_frame


def run(rows: list[tuple[float, float, float]], spec: str, scheduler: str, **cfg: Any) -> Any:
    config = ReplayConfig(source="t", scheduler=scheduler, estimator="oracle", **cfg)
    return replay(jobs_frame(rows), parse_spec(spec), config, record_log=True)


def times(result: Any) -> dict[str, tuple[float, float]]:
    j = result.jobs.filter(pl.col("outcome") == "finished")
    return {r["job_id"]: (r["start_time_s"], r["finish_time_s"]) for r in j.iter_rows(named=True)}


def preemptions(result: Any) -> dict[str, int]:
    return dict(zip(result.jobs["job_id"], result.jobs["preemptions"], strict=True))


def zero_length_runs(result: Any) -> list[int]:
    """Jobs started and stopped at the same instant (from the engine's start/stop log)."""
    opened: dict[int, float] = {}
    zero = []
    for t, kind, j, _ in result.engine.log:
        if kind == "start":
            opened[j] = t
        elif opened.pop(j) == t:
            zero.append(j)
    return zero


# -- SRTF ------------------------------------------------------------------------------


def test_srtf_stops_only_the_victims_it_needs() -> None:
    # The first hand case. 4x4, restore 10. j0 (2 GPUs, 50 s) on GPUs 0-1 and j1
    # (1 GPU, 100 s) on GPU 2 start at 0. At 1, j2 (3 GPUs, 40 s) beats both (49 and 99
    # s left); one GPU is free, so stopping j0 alone gives it 3: only j0 stops, with
    # 49 + 10 = 59 s to go. j2 1..41; j0 restarts at 41: 41 + 59 = 100. j1 never stops:
    # 0..100. (Worst first then restarting the unneeded: j1 stopped too, ended at 110.)
    r = run([(0, 50, 2), (0, 100, 1), (1, 40, 3)], "4x4", "srtf", restore_s=10)
    assert times(r) == {"j0": (0, 100), "j1": (0, 100), "j2": (1, 41)}
    assert preemptions(r) == {"j0": 1, "j1": 0, "j2": 0}


def test_srtf_a_cpu_only_job_frees_no_gpu() -> None:
    # One node of 2 GPUs and 8 CPUs (CPU-only jobs are replayed on the CPU dimension).
    # j0 (1 GPU, 100 s) on GPU 0 and j1 (no GPU, 1 CPU, 1000 s) start at 0. At 1, j2
    # (2 GPUs, 10 s) beats both (99 and 999 s left). GPU 1 is free; stopping j1 frees no
    # GPU, stopping j0 frees the second: only j0 stops. j2 1..11, j0 resumes with 99 s
    # left: 11..110; j1 0..1000 untouched. (Counting j1's GPU-less part as a freed GPU,
    # the what-if chose j1 alone, the start then failed, and j2 waited until 100.)
    jobs = jobs_frame([(0, 100, 1), (0, 1000, 0), (1, 10, 2)]).with_columns(
        pl.lit(1.0).alias("cpus")
    )
    config = ReplayConfig(source="t", scheduler="srtf", estimator="oracle")
    r = replay(jobs, parse_spec("2x2,cpu=8"), config)
    assert times(r) == {"j0": (0, 110), "j1": (0, 1000), "j2": (1, 11)}
    assert preemptions(r) == {"j0": 1, "j1": 0, "j2": 0}


def test_srtf_a_blocked_best_job_does_not_stop_the_next_one() -> None:
    # The second hand case. 4x4. j0 (2 GPUs, 100 s) and j1 (2 GPUs, 1000 s) run
    # from 0. At 10 j2 (4 GPUs, 150 s) and j3 (2 GPUs, 200 s) arrive. j2 is best but
    # cannot be placed even by preempting: j0 has 90 s left (< 150), it outranks j2.
    # j3 (200 s) outranks j1 (990 s left): j1 stops, j3 10..210. At 100 j0 ends: j2
    # still cannot preempt j3 (110 s left) and 2 free GPUs are not 4; j1 (990 left) fits
    # them: 100..; at 210 j3 ends and j2 (150) outranks j1 (880 left): j1 stops, j2
    # 210..360, j1 360 + 880 = 1240. (Head-of-line: j3 waited and ran only at 250.)
    r = run([(0, 100, 2), (0, 1000, 2), (10, 150, 4), (10, 200, 2)], "4x4", "srtf")
    assert times(r) == {"j0": (0, 100), "j1": (0, 1240), "j2": (210, 360), "j3": (10, 210)}
    assert preemptions(r) == {"j0": 0, "j1": 2, "j2": 0, "j3": 0}
    assert zero_length_runs(r) == []


def test_srtf_never_starts_and_stops_a_job_in_one_pass() -> None:
    # 4x4. j0 (3 GPUs, 1000 s) from 0. At 10 j1 (4 GPUs, 100 s) and j2 (1 GPU, 500 s)
    # arrive. In rank order: j1 first, it preempts j0 (990 left) and takes the node
    # 10..110; j2 then finds no GPU and cannot preempt j1 (100 < 500): it waits. At 110
    # j2 (500) and j0 (990) both fit: j2 110..610, j0 110..1100. j2's start is its first
    # real run: 110, queueing 100 s. (Starting what fits first put j2 on the free GPU
    # at 10 and stopped it at once: a zero-length run reported as its start.)
    r = run([(0, 1000, 3), (10, 100, 4), (10, 500, 1)], "4x4", "srtf")
    assert times(r) == {"j0": (0, 1100), "j1": (10, 110), "j2": (110, 610)}
    assert preemptions(r) == {"j0": 1, "j1": 0, "j2": 0}
    assert zero_length_runs(r) == []


# -- LAS -------------------------------------------------------------------------------

ONE_QUEUE = {"thresholds_gpu_s": "100000"}


def test_las_within_a_queue_a_running_job_keeps_its_gpus() -> None:
    # 4x4, one queue in practice (threshold 100,000 GPU-s). j0 (2 GPUs, 100 s) from 0;
    # j1 (4 GPUs, 50 s) at 1 does not fit and may not preempt j0 (same queue); j2 (2
    # GPUs, 300 s) at 2 fits the 2 free GPUs: 2..302. At 100 j0 ends; j1 is ahead of j2
    # in queue 0 by arrival, but j2 is running and waiting jobs move behind running
    # ones (dlas_sim_jobs): j2 keeps its GPUs, j1 waits until 302: 302..352.
    # (Ranking by arrival alone, j1 preempted j2 at 100.)
    r = run([(0, 100, 2), (1, 50, 4), (2, 300, 2)], "4x4", "las", scheduler_options=ONE_QUEUE)
    assert times(r) == {"j0": (0, 100), "j1": (302, 352), "j2": (2, 302)}
    assert preemptions(r) == {"j0": 0, "j1": 0, "j2": 0}


def test_las_demoted_job_goes_to_the_tail_and_the_waiting_one_preempts_it() -> None:
    # (Held on 983d317 too, by arrival order; kept as the tier rule's plain case.)
    # 1x1, threshold 50 GPU-s. j0 (200 s) is demoted at 50 (queue 1, entered at 50). j1
    # (100 s, queue 0) preempts it at 60 (j0: 140 left). j1 reaches 50 GPU-s at 110 and
    # is appended to queue 1 behind j0, which is waiting there: j0 takes the GPU back,
    # 110..250; j1's last 50 s 250..300.
    r = run([(0, 200, 1), (60, 100, 1)], "1x1", "las", scheduler_options={"thresholds_gpu_s": "50"})
    assert times(r) == {"j0": (0, 250), "j1": (60, 300)}
    assert preemptions(r) == {"j0": 1, "j1": 1}


def test_las_demotion_order_not_arrival_order_within_a_queue() -> None:
    # One node of 5 GPUs, threshold 120 GPU-s. A = j0 (2 GPUs, 1000 s) from 0 reaches
    # 120 GPU-s at 60; B = j1 (3 GPUs, 1000 s) from 10 reaches it at 10 + 40 = 50: B
    # enters queue 1 first (50), A behind it (60). At 100 C = j2 (5 GPUs, 20 s) and
    # D = j3 (2 GPUs, 30 s) arrive in queue 0: C preempts both (A ran 100 s: 900 left;
    # B ran 90: 910 left), 100..120; D finds no GPU and may not preempt C (same queue).
    # At 120 the node is free: D (queue 0) 120..150, then queue 1 in list order: B
    # (3 GPUs) fits the 3 left: 120 + 910 = 1030; A (2) waits until D ends: 150 + 900 =
    # 1050. (Ordered by arrival, A went first and B waited for it until 1020.)
    r = run(
        [(0, 1000, 2), (10, 1000, 3), (100, 20, 5), (100, 30, 2)],
        "5x5",
        "las",
        scheduler_options={"thresholds_gpu_s": "120"},
    )
    assert times(r) == {"j0": (0, 1050), "j1": (10, 1030), "j2": (100, 120), "j3": (120, 150)}
    assert preemptions(r) == {"j0": 1, "j1": 1, "j2": 0, "j3": 0}


def test_las_promoted_job_goes_to_the_tail_of_queue_0() -> None:
    # 1x1, threshold 50 GPU-s, starve_factor 1. j0 (200 s) demoted at 50; j1 (100 s) at
    # 60 preempts it (j0 ran 60 s: 140 left). j1 is demoted at 110 behind j0, which
    # preempts it (j0 waited 60..110 = 50; j1 ran 50 s, 50 left, promotion due once it
    # has waited 50: at 160). j2 (30 s) at 150 preempts j0 (ran 110..150: 100 left; j0
    # ran 100 s in all and waited 50, so its promotion is due at 150 + 50 = 200).
    # j2 150..180. At 160 j1 is promoted to the tail of queue 0, behind j2, which runs:
    # no preemption. At 180 j2 ends: j1 (queue 0) 180..230. At 200 j0 is promoted to
    # the tail of queue 0, behind running j1: it waits. At 230 j1 ends: j0 230..330 (its
    # demotion at 280 changes nothing, nobody waits).
    # (Promoted jobs ranked by arrival went to the head: j1 preempted j2 at 160 and j0
    # preempted j1 at 200.)
    r = run(
        [(0, 200, 1), (60, 100, 1), (150, 30, 1)],
        "1x1",
        "las",
        scheduler_options={"thresholds_gpu_s": "50", "starve_factor": "1"},
    )
    assert times(r) == {"j0": (0, 330), "j1": (60, 230), "j2": (150, 180)}
    assert preemptions(r) == {"j0": 2, "j1": 1, "j2": 0}


def test_las_starvation_counter_adds_every_wait_since_the_last_promotion() -> None:
    # 1x1, threshold 50 GPU-s, starve_factor 1. j0 (200 s) demoted at 50.
    # j1 (30 s) at 60 preempts j0 (ran 60, 140 left): 60..90; j0 back 90 (waited 30).
    # j2 (30 s) at 120 preempts j0 (ran 90, 110 left): 120..150; j0 back 150 (waited 60).
    # j3 (100 s) at 160 preempts j0 (ran 100, 100 left). The counter keeps the 60 s
    # already waited: promotion due at 160 + (1 x 100 - 60) = 200, not 260. At 200 j0
    # goes to the tail of queue 0 behind running j3 (queue 0 until 210). At 210 j3 is
    # demoted and j0 (queue 0) preempts it (j3: 50 left): j0 210..; j0 (counts restarted)
    # reaches 50 GPU-s at 260 and is appended to queue 1 behind j3 (waiting there since
    # 210), which takes the GPU back: j3 260..310. j0 (50 left) 310..360.
    r = run(
        [(0, 200, 1), (60, 30, 1), (120, 30, 1), (160, 100, 1)],
        "1x1",
        "las",
        scheduler_options={"thresholds_gpu_s": "50", "starve_factor": "1"},
    )
    assert times(r) == {"j0": (0, 360), "j1": (60, 90), "j2": (120, 150), "j3": (160, 310)}
    assert preemptions(r) == {"j0": 4, "j1": 0, "j2": 0, "j3": 1}


def test_las_jobs_stopped_in_a_pass_keep_their_rank_until_it_ends() -> None:
    # One node of 8 GPUs, LAS with one threshold at 12 GPU-s (queues 0 and 1). Jobs:
    # B j0 (4 GPUs, 100 s), W j1 (3, 100 s), X j2 (4, 1 s) at 5, S3 j3 (2, 30 s), S1 j4
    # (1, 30 s), S2 j5 (1, 30 s) at 6, A1 j6 (4, 5 s) and A2 j7 (1, 5 s) at 20.
    # 0: B, W start (1 free). B reaches 12 GPU-s at 3 (queue 1, entered 3), W at 4.
    # 5: X (queue 0) needs 3 more; the worst running job is W (latest into queue 1):
    #    W stops (95 s left), X 5..6.
    # 6: S3, S1, S2 start (queue 0 outranks W); S3 enters queue 1 at 12, S1 and S2 at
    #    18 (then S2 after S1: job order). At 12 and 18 W (3 GPUs) outranks the jobs
    #    demoted at that instant, but they hold 2 GPUs: no room.
    # 20: A1 then A2 (queue 0). A1 stops the fewest worst jobs that make 4 GPUs: S2,
    #    S1, S3. A2 stops the next worst, B (4 GPUs, 80 s left): 3 GPUs are free. The
    #    jobs stopped in this pass keep their running rank until it ends, ahead of W
    #    (waiting in queue 1 since 5): B needs 4, no; S3 gets 2, S1 1 (both restarted
    #    in the same instant: reassigned, not preempted); S2 and W wait. This is the
    #    Tiresias simulator's pass (every job of a queue in order, running ones first,
    #    given its GPUs if they fit): B does not fit, S3 and S1 do, S2 and W do not.
    #    (Ranked as waiting jobs, W took the 3 GPUs and S3, S1, S2 all stayed stopped:
    #    W, a waiting job of queue 1, preempted the running jobs of its own queue.)
    # 23: A1 reaches 12 GPU-s: demoted at this instant, it is behind B (waiting since
    #    3): B (80 s left) preempts it (2 s left). B 23..103.
    # 25: A2 ends; S2 (16 s left) 25..41. 36: S3 and S1 end (6 + 30); W (95 s left)
    #    36..131. 103: B ends; A1 103..105.
    rows = [(0, 100, 4), (0, 100, 3), (5, 1, 4), (6, 30, 2), (6, 30, 1), (6, 30, 1)]
    rows += [(20, 5, 4), (20, 5, 1)]
    r = run(rows, "8x8", "las", scheduler_options={"thresholds_gpu_s": "12"})
    assert times(r) == {
        "j0": (0, 103),
        "j1": (0, 131),
        "j2": (5, 6),
        "j3": (6, 36),
        "j4": (6, 36),
        "j5": (6, 41),
        "j6": (20, 105),
        "j7": (20, 25),
    }
    assert preemptions(r) == {
        "j0": 1,
        "j1": 1,
        "j2": 0,
        "j3": 0,
        "j4": 0,
        "j5": 1,
        "j6": 1,
        "j7": 0,
    }
    assert zero_length_runs(r) == []


# -- presets ---------------------------------------------------------------------------


def test_tiresias_preset_has_the_tiresias_simulators_queues() -> None:
    # 1x1, `tiresias` = jobs.py's defaults: queue limits 3,250 and 7,200 GPU-s, events
    # (no rounds), no starvation rule. j0 (10,000 s) enters queue 1 at 3,250. j1 (100 s)
    # at 3,300 (queue 0) preempts it: 3,300..3,400; j0 back at 3,400 (attained 3,300).
    # j2 (5,000 s) at 7,250: j0 has 3,300 + 3,850 = 7,150 (< 7,200: queue 1); j2 in
    # queue 0 preempts it (2,850 left). j2 reaches 3,250 at 10,500 and is appended to
    # queue 1 behind j0: j0 preempts it (j2: 1,750 left) and runs 10,500..; at 10,550 j0
    # reaches 7,200 (queue 2): j2 (queue 1) preempts it (j0: 2,800 left): j2
    # 10,550..12,300; j0 12,300..15,100.
    # (Lucid's setting, one threshold at 18,000 GPU-s: j1 waited for j0 to end.)
    r = run([(0, 10000, 1), (3300, 100, 1), (7250, 5000, 1)], "1x1", "tiresias")
    assert times(r) == {"j0": (0, 15100), "j1": (3300, 3400), "j2": (7250, 12300)}
    assert preemptions(r) == {"j0": 3, "j1": 0, "j2": 1}
