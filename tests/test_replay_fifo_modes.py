"""FIFO's two named modes: strict head-of-line ``fifo`` and ``fifo-skip`` (the published
PAI simulator's scan, which starts every waiting job that fits), and the tick baseline
replica (``bench/baseline_replay.py``) agreeing with ``fifo-skip`` job by job."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
import pytest

from bench.baseline_replay import tick_fifo_jobs
from gpu_trace.replay import ReplayConfig, replay
from gpu_trace.replay import policy as base
from gpu_trace.replay.cluster import parse_spec
from gpu_trace.replay.synthetic import pai_like_jobs
from tests.replay_frames import jobs_frame

frame = jobs_frame


def times(result: Any) -> dict[str, tuple[float, float]]:
    j = result.jobs.filter(pl.col("outcome") == "finished")
    return {r["job_id"]: (r["start_time_s"], r["finish_time_s"]) for r in j.iter_rows(named=True)}


# One node of 4 GPUs. j0 (3 GPUs, 10 s) at 0; j1 (2 GPUs, 5 s) at 1 does not fit (1 free);
# j2 (1 GPU, 4 s) at 2; j3 (1 GPU, 2 s) at 3.
ROWS = [(0, 10, 3), (1, 5, 2), (2, 4, 1), (3, 2, 1)]


def test_strict_fifo_blocks_behind_the_head() -> None:
    # Strict: j1 blocks j2 and j3 until j0 ends at 10; then 2 + 1 + 1 = 4 GPUs all start.
    r = replay(frame(ROWS), parse_spec("4x4"), ReplayConfig(source="t", scheduler="fifo"))
    assert times(r) == {"j0": (0, 10), "j1": (10, 15), "j2": (10, 14), "j3": (10, 12)}
    assert r.runs["jct_mean_s"][0] == pytest.approx((10 + 14 + 12 + 9) / 4)


@pytest.mark.parametrize(
    ("scheduler", "options"), [("fifo-skip", {}), ("fifo", {"blocking": "false"})]
)
def test_fifo_skip_starts_every_job_that_fits(scheduler: str, options: dict[str, str]) -> None:
    # Skip: j2 takes the free GPU at 2 (2..6); j3 at 3 finds none free, j1 still does not
    # fit at 6, so j3 takes j2's GPU 6..8; j1 starts when j0 ends, 10..15.
    cfg = ReplayConfig(source="t", scheduler=scheduler, scheduler_options=options)
    r = replay(frame(ROWS), parse_spec("4x4"), cfg)
    assert times(r) == {"j0": (0, 10), "j1": (10, 15), "j2": (2, 6), "j3": (6, 8)}
    assert r.runs["jct_mean_s"][0] == pytest.approx((10 + 14 + 4 + 5) / 4)


def test_fifo_skip_is_named_and_has_no_blocking_option() -> None:
    assert "fifo-skip" in base.names("scheduler")
    assert base.get("scheduler", "fifo-skip").Config is base.NoConfig  # the one empty config
    with pytest.raises(Exception, match="unknown option"):
        base.build_config(base.get("scheduler", "fifo-skip").Config, {"blocking": "true"})


def quarter_gpu_jobs(n: int, seed: int) -> pl.DataFrame:
    """PAI-like jobs re-timed to 20 arrivals per minute, 1-GPU jobs cut to 1-4 quarters,
    at most 8 GPUs (the whole test cluster)."""
    jobs = pai_like_jobs(n, cluster_gpus=8, seed=seed)
    quarters = (pl.int_range(pl.len()) * 7 % 4 + 1).cast(pl.Float64) / 4
    return jobs.with_columns(
        (pl.col("submit_time").min() + pl.duration(seconds=pl.int_range(pl.len()) * 3)).alias(
            "submit_time"
        ),
        pl.col("run_s").clip(1, 2000),
        pl.when(pl.col("gpus") == 1)
        .then(quarters)
        .otherwise(pl.col("gpus").clip(0, 8))
        .alias("gpus"),
    )


@pytest.mark.parametrize("blocking", [False, True])
def test_baseline_replica_equals_our_fifo_job_by_job(blocking: bool) -> None:
    # 8 GPUs as 32 quarter-GPU units on one node (the peer's flat pool); jobs in units.
    jobs = quarter_gpu_jobs(400, seed=3)
    units = jobs.with_columns((pl.col("gpus") * 4).round().alias("gpus"))
    assert set(units["gpus"].to_list()) >= {1.0, 2.0, 3.0, 4.0, 8.0}
    scheduler = "fifo" if blocking else "fifo-skip"
    ours = replay(units, parse_spec("32x32"), ReplayConfig(source="t", scheduler=scheduler))
    sub = (jobs["submit_time"] - jobs["submit_time"].min()).dt.total_seconds().to_numpy()
    summary, finish = tick_fifo_jobs(
        sub.astype(np.int64),
        jobs["run_s"].to_numpy().astype(np.int64),
        units["gpus"].to_numpy().astype(np.int64),
        32,
        blocking=blocking,
    )
    assert summary["jobs_done"] == 400
    got = ours.jobs.sort(pl.col("job_id").cast(pl.Int64))["finish_time_s"].to_numpy()
    np.testing.assert_array_equal(got, finish)
    assert ours.runs["jct_mean_s"][0] == pytest.approx(float(np.mean(finish - sub)))


def test_skip_and_strict_differ_on_the_quarter_gpu_trace() -> None:
    jobs = quarter_gpu_jobs(400, seed=3)
    units = jobs.with_columns((pl.col("gpus") * 4).round().alias("gpus"))
    sub = (jobs["submit_time"] - jobs["submit_time"].min()).dt.total_seconds().to_numpy()
    args = (
        sub.astype(np.int64),
        jobs["run_s"].to_numpy().astype(np.int64),
        units["gpus"].to_numpy().astype(np.int64),
        32,
    )
    skip = tick_fifo_jobs(*args, blocking=False)[1]
    strict = tick_fifo_jobs(*args, blocking=True)[1]
    assert float(np.mean(skip - sub)) < float(np.mean(strict - sub))


def _cpu_rows() -> pl.DataFrame:
    from datetime import UTC, datetime, timedelta

    t0 = datetime(2020, 1, 1, tzinfo=UTC)
    return pl.DataFrame(
        {
            "source": "t",
            "dataset": "t",
            "cluster": "t",
            "job_id": ["0", "1", "2"],
            "submit_time": [t0, t0 + timedelta(seconds=1), t0 + timedelta(seconds=1)],
            "run_s": [100.0, 10.0, 10.0],
            "gpus": [1.0, 1.0, 1.0],
            "cpus": [6.0, 4.0, 2.0],
        }
    )


@pytest.mark.parametrize("policy", ["fifo-skip", "sjf"])
def test_a_job_refused_for_cpus_does_not_block_one_asking_fewer(policy: str) -> None:
    # The PAI simulator (alibaba/clusterdata cluster-trace-gpu-v2020/simulator,
    # scheduler.py: alloc_job scans every waiting job; try_allocate_job_to_cluster
    # returns 0, "try next", when a job's num_gpu or num_cpu exceeds the idle GPUs /
    # CPUs) tries each job against idle GPUs and idle CPUs. One node, 4 GPUs, 8 cores:
    # job 0 (1 GPU, 6 cores, 100 s) runs; at 1 s job 1 (1 GPU, 4 cores) does not fit
    # (6 + 4 > 8) but job 2 (1 GPU, 2 cores) does (6 + 2 = 8) and starts at 1 s.
    r = replay(_cpu_rows(), parse_spec("4x4,cpu=8"), ReplayConfig(source="t", scheduler=policy))
    assert times(r) == {"0": (0, 100), "1": (100, 110), "2": (1, 11)}
