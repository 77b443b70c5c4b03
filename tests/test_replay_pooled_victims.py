"""One pooled node: the preemptive pass counts room for a waiting job as free GPUs plus
those of the jobs it would stop (``Preemptive._victims_pooled``) instead of building a
per-GPU probe. The two must choose the same victims: these replays run both ways on the
same jobs and compare every start, end and preemption count.
"""

from __future__ import annotations

from typing import Any

import polars as pl
import pytest

from gpu_trace.replay import ReplayConfig, replay
from gpu_trace.replay.cluster import parse_spec
from gpu_trace.replay.scheduling.preemptive import Preemptive
from gpu_trace.replay.synthetic import pai_like_jobs

JOBS = pai_like_jobs(1500, cluster_gpus=64, utilization=1.3, seed=3)


def schedule(policy: str, restore_s: float) -> pl.DataFrame:
    config = ReplayConfig(source="t", scheduler=policy, estimator="oracle", restore_s=restore_s)
    r = replay(JOBS, parse_spec("64x64"), config)
    return r.jobs.select("job_id", "start_time_s", "finish_time_s", "preemptions")


@pytest.mark.parametrize("policy", ["srtf", "las", "tiresias", "las-lucid"])
@pytest.mark.parametrize("restore_s", [0.0, 30.0])
def test_pooled_count_chooses_the_victims_the_probe_does(
    policy: str, restore_s: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = {"pooled": 0}
    counted = Preemptive._victims_pooled

    def spy(self: Preemptive, b: int, bkey: Any) -> Any:
        calls["pooled"] += 1
        return counted(self, b, bkey)

    monkeypatch.setattr(Preemptive, "_victims_pooled", spy)
    pooled = schedule(policy, restore_s)
    assert calls["pooled"] > 100  # the count decided, many times
    assert pooled["preemptions"].sum() > 50

    init = Preemptive.__init__

    def per_gpu(self: Preemptive, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self.pooled = False

    monkeypatch.setattr(Preemptive, "__init__", per_gpu)
    calls["pooled"] = 0
    probed = schedule(policy, restore_s)
    assert calls["pooled"] == 0
    assert pooled.equals(probed)


def test_fractional_jobs_keep_the_per_gpu_probe() -> None:
    # a job sharing a GPU: room is no longer a count of whole GPUs
    jobs = JOBS.with_columns(
        pl.when(pl.int_range(pl.len()) == 7).then(0.5).otherwise(pl.col("gpus")).alias("gpus")
    )
    config = ReplayConfig(source="t", scheduler="srtf", estimator="oracle")
    r = replay(jobs, parse_spec("64x64"), config)
    assert r.engine.scheduler.pooled is False
    r = replay(JOBS, parse_spec("64x64"), config)
    assert r.engine.scheduler.pooled is True
