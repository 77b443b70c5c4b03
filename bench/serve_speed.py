"""Serving replay speed, the child side of the ``serve_*`` cases of :mod:`bench.cases`.

``python -m bench.serve_speed simulate STORE --router R --batching B`` reads the Azure
conversation hour from STORE as ``serve run`` does (:func:`gpu_trace.serve.runs.load_requests`,
the latency model from :func:`gpu_trace.serve.runs.build_latency`) and times the
:func:`gpu_trace.serve.engine.simulate` call alone.

``python -m bench.serve_speed synthetic -n N --replicas R --rate X`` builds N conv-like
requests (seeded numpy: Poisson arrivals at X/s, lognormal prompt and output tokens with
the median and log-spread of the bundled Azure 2023 conversation file, clipped to that
file's range) and times ``simulate`` on R replicas with the roofline model.

Each prints one JSON line: the call's wall and CPU seconds (user + sys of this process
around the call), this process's peak RSS before and after it (``VmHWM`` of
``/proc/self/status``: the child's own high-water mark, not the parent's), and what the
run did (requests finished, replica utilisation).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

from gpu_trace.serve.config import ServeConfig
from gpu_trace.serve.result import ServeResult
from gpu_trace.serve.workload import RequestSet

CONV = Path("data/samples/azure-llm/AzureLLMInferenceTrace_conv.csv")


def vm_hwm_mib() -> float:
    """This process's peak resident set so far (``VmHWM``), MiB; 0 where /proc has none."""
    try:
        text = Path("/proc/self/status").read_text()
    except OSError:
        return 0.0
    for line in text.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def conv_shape(path: Path = CONV) -> dict[str, float]:
    """Median, spread (standard deviation of the log) and range of the conv file's
    prompt and output tokens: what the synthetic requests copy.
    """
    frame = pl.read_csv(path, columns=["ContextTokens", "GeneratedTokens"])
    out: dict[str, float] = {}
    for col, key in (("ContextTokens", "prompt"), ("GeneratedTokens", "output")):
        x = frame[col].to_numpy().astype(np.float64)
        out[f"{key}_median"] = float(np.median(x))
        out[f"{key}_log_sd"] = float(np.std(np.log(np.maximum(x, 1.0))))
        out[f"{key}_min"] = float(max(x.min(), 1.0))
        out[f"{key}_max"] = float(x.max())
    return out


def synthetic(n: int, rate: float, seed: int = 0, path: Path = CONV) -> RequestSet:
    """``n`` conv-like requests: Poisson arrivals at ``rate`` per second from 0,
    lognormal token counts with the conv file's medians and log-spreads.
    """
    shape = conv_shape(path)
    rng = np.random.default_rng(seed)
    arrival = np.cumsum(rng.exponential(1.0 / rate, n))
    arrival -= arrival[0]

    def tokens(key: str) -> np.ndarray:
        drawn = rng.lognormal(np.log(shape[f"{key}_median"]), shape[f"{key}_log_sd"], n)
        return np.clip(np.rint(drawn), shape[f"{key}_min"], shape[f"{key}_max"]).astype(np.int64)

    prompt = tokens("prompt")
    output = tokens("output")
    return RequestSet(
        request_id=np.arange(n, dtype=np.int64),
        arrival_s=arrival,
        input_tokens=prompt,
        output_tokens=output,
        session=np.full(n, -1, dtype=np.int64),
        block_offsets=np.zeros(n + 1, dtype=np.int64),
        block_hashes=np.zeros(0, dtype=np.int64),
        block_tokens=0,
        source="synthetic",
        dataset="conv-like",
        origin="",
    )


def timed_simulate(
    requests: RequestSet, config: ServeConfig, score: Path | None = None
) -> dict[str, object]:
    """Build the config's latency model, then time ``simulate`` alone; its figures.
    With ``score`` (a folder), also time what ``serve run`` does after the engine: the
    summary metrics (energy and cost included) and the run's three tables written as
    Parquet there (:func:`gpu_trace.serve.runs.write_dir`; the store's writer is the
    same Parquet plus a commit).
    """
    from gpu_trace.serve import metrics, runs, sanity
    from gpu_trace.serve.engine import simulate

    latency = runs.build_latency(config)
    before = vm_hwm_mib()
    wall, cpu = time.perf_counter(), time.process_time()
    result: ServeResult = simulate(requests, config, latency)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    reps = result.replicas  # utilisation as the run's summary defines it
    busy = float(reps["busy_s"].sum())
    up = float((reps["down_s"] - reps["up_s"]).clip(lower_bound=0.0).sum())
    finished = int((result.requests["status"] == "finished").sum())
    scored: dict[str, object] = {}
    if score is not None:
        wall_s, cpu_s = time.perf_counter(), time.process_time()
        summary = metrics.summary(
            result,
            metrics.Slo.parse(config.slo),
            energy=runs.energy_cost(result, config, latency),
        )
        notes = sanity.notes(summary, config.latency, result.notes)
        run = runs.ServeRun(config, config.resolved_run_id(), result, summary, notes)
        runs.write_dir(run, score, config.source)
        scored = {
            "score_write_s": round(time.perf_counter() - wall_s, 3),
            "score_write_cpu_s": round(time.process_time() - cpu_s, 3),
            "ttft_p50_s": round(summary["ttft_p50_s"], 3),
            "tpot_p50_ms": round(summary["tpot_p50_s"] * 1000, 2),
        }
    return {
        "requests": len(requests),
        "finished": finished,
        "iterations": int(reps["iterations"].sum()),
        "horizon_s": round(float(result.horizon_s), 1),
        "utilization": round(busy / up, 3) if up else None,
        "simulate_s": round(wall, 3),
        "simulate_cpu_s": round(cpu, 3),
        "rss_before_mib": round(before),
        "rss_peak_mib": round(vm_hwm_mib()),
        **scored,
    }


def main(argv: list[str]) -> None:
    """Run one measurement and print its JSON line."""
    ap = argparse.ArgumentParser(prog="python -m bench.serve_speed")
    sub = ap.add_subparsers(dest="what", required=True)
    st = sub.add_parser("simulate")
    st.add_argument("store", type=Path)
    st.add_argument("--router", default="round-robin")
    st.add_argument("--batching", default="vllm")
    st.add_argument("--replicas", type=int, default=16)
    sy = sub.add_parser("synthetic")
    sy.add_argument("-n", type=int, default=1_000_000)
    sy.add_argument("--replicas", type=int, default=16)
    sy.add_argument("--rate", type=float, required=True)
    sy.add_argument("--router", default="round-robin")
    sy.add_argument("--batching", default="vllm")
    sy.add_argument("--score", type=Path, help="also time the metrics and table writes here")
    args = ap.parse_args(argv)
    config = ServeConfig(
        source="azure-llm" if args.what == "simulate" else "synthetic",
        dataset="conv" if args.what == "simulate" else "conv-like",
        model="llama-2-7b",
        gpu="a100-80gb",
        replicas=args.replicas,
        router=args.router,
        batching=args.batching,
    )
    start = time.perf_counter()
    if args.what == "simulate":
        from gpu_trace.serve.runs import load_requests

        requests = load_requests(args.store, "azure-llm", "conv", 0.0, None).requests
    else:
        requests = synthetic(args.n, args.rate)
    made_s = time.perf_counter() - start
    score = getattr(args, "score", None)
    out = {"requests_built_s": round(made_s, 3), **timed_simulate(requests, config, score)}
    out["process_cpu_s"] = round(sum(os.times()[:2]), 3)
    sys.stdout.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
