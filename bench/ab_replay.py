"""A/B driver for refactors: CPU seconds of replay cases for the checkout on PYTHONPATH.

``cd CHECKOUT && PYTHONPATH=$PWD python bench/ab_replay.py pai20k,t5k,philly100k,fgd,fifo1m``
prints one JSON line (case -> [CPU s, mean JCT or result]); run it for the old and the new
tree alternately, in the same minutes (BENCHMARKS.md, "The kernel reshape against the old
main"). Only names that exist in both trees are used.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpu_trace.replay import ReplayConfig, replay
from gpu_trace.replay.cluster import parse_spec


def timed(fn: Callable[..., Any], *args: Any) -> tuple[float, Any]:
    """CPU seconds of ``fn(*args)`` and its result."""
    start = time.process_time()
    result = fn(*args)
    return round(time.process_time() - start, 3), result


def jct(result: Any) -> float:
    """A run's mean JCT (the schedule's fingerprint beside the timing)."""
    return round(float(result.runs["jct_mean_s"][0]), 3)


def main(which: set[str]) -> dict[str, Any]:
    """The cases named in ``which``."""
    out: dict[str, Any] = {}
    if "pai20k" in which:
        from bench.cases import _pai_20k

        jobs = _pai_20k()
        spec = parse_spec("6500x6500")
        replay(jobs.head(500), spec, ReplayConfig(source="synthetic", scheduler="fifo-skip"))
        for pol in ("fifo-skip", "sjf"):
            cfg = ReplayConfig(source="synthetic", scheduler=pol)
            s, r = timed(replay, jobs, spec, cfg)
            out[f"pai20k_{pol}"] = (s, jct(r))
    if "t5k" in which:
        from bench.tiresias_trace import write
        from gpu_trace.replay.interchange import read_chronus

        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "t5000.csv"
            write(path)
            jobs = read_chronus(path)
        for pol, shape, place in (
            ("fifo", "256x8", "yarn"),
            ("tiresias", "256x256", "yarn"),
            ("srtf", "256x256", "yarn"),
            ("srtf", "256x8", "consolidate"),
        ):
            cfg = ReplayConfig(source="chronus", scheduler=pol, placement=place, estimator="oracle")
            replay(jobs.head(200), parse_spec(shape), cfg)
            s, r = timed(replay, jobs, parse_spec(shape), cfg)
            out[f"t5k_{pol}_{shape}_{place}"] = (s, jct(r))
    if "philly100k" in which:
        from gpu_trace.replay.synthetic import philly_like_jobs

        jobs = philly_like_jobs(100_000, cluster_gpus=2000, utilization=1.2, seed=0)
        for pol in ("srtf", "tiresias"):
            cfg = ReplayConfig(source="synthetic", scheduler=pol, estimator="oracle")
            s, r = timed(replay, jobs, parse_spec("2000x8"), cfg)
            out[f"philly100k_{pol}"] = (s, jct(r))
    if "fgd" in which:
        from bench.cases import SAMPLES
        from gpu_trace.loaders import LOADERS, ingest
        from gpu_trace.replay.fidelity import fgd_check

        with tempfile.TemporaryDirectory() as tmp:
            store = Path(tmp) / "store"
            ingest(LOADERS["openb"], SAMPLES / "openb", store)
            for name in ("fgd", "best-fit"):
                s, rows = timed(fgd_check, store, [0, 1, 2], (name,))
                out[f"fgd3_{name}"] = (s, rows[0].ours)
    if "fifo1m" in which:
        from bench.cases import replay_fifo_1m

        got = replay_fifo_1m()
        out["fifo1m"] = {k: v for k, v in got.items() if "cpu" in k or k.endswith("_s")}
    return out


if __name__ == "__main__":
    print(json.dumps(main(set(sys.argv[1].split(",")))))
