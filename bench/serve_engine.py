"""Serving-engine speed: the Azure conversation hour (19,366 requests) on 16 replicas,
and a million synthetic requests, with a linear latency model (the engine's cost, not a
latency model's).

``python -m bench.serve_engine conv|million [--router R] [--batching B] [--no-jump]``
prints CPU seconds (user+sys) and peak RSS. The latency model is
``iteration = 5 ms + 0.05 ms x tokens + 2e-7 s x decode context`` (a 7B-class replica's
order of magnitude), KV capacity 200,000 tokens per replica.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from serve_engine_common import LinearLatency, config, requests

from gpu_trace.serve.engine import build
from gpu_trace.serve.workload import RequestSet

CONV = (
    Path(__file__).resolve().parents[1] / "data/samples/azure-llm/AzureLLMInferenceTrace_conv.csv"
)


def conv() -> RequestSet:
    """The bundled Azure conv file (2023), as a RequestSet."""
    frame = pl.read_csv(CONV).with_columns(
        pl.col("TIMESTAMP").str.to_datetime("%Y-%m-%d %H:%M:%S%.f")
    )
    t = frame["TIMESTAMP"].dt.epoch("us").to_numpy().astype(np.float64) / 1e6
    order = np.argsort(t, kind="stable")
    t = t[order] - t[order][0]
    return requests(
        t.tolist(),
        frame["ContextTokens"].to_numpy()[order].tolist(),
        np.maximum(frame["GeneratedTokens"].to_numpy()[order], 1).tolist(),
    )


def million(n: int = 1_000_000, rate: float = 90.0) -> RequestSet:
    """``n`` requests, Poisson at ``rate``/s, conv-like lognormal token counts."""
    rng = np.random.default_rng(1)
    arrival = np.cumsum(rng.exponential(1.0 / rate, n))
    arrival -= arrival[0]
    prompt = np.clip(rng.lognormal(np.log(1000), 0.9, n), 2, 8000).astype(np.int64)
    output = np.clip(rng.lognormal(np.log(130), 1.0, n), 1, 2000).astype(np.int64)
    return requests(arrival.tolist(), prompt.tolist(), output.tolist())


def main() -> None:
    """Run one case and print its cost."""
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=["conv", "million"])
    ap.add_argument("--router", default="least-tokens")
    ap.add_argument("--batching", default="vllm")
    ap.add_argument("--replicas", type=int, default=16)
    ap.add_argument("--no-jump", action="store_true")
    ap.add_argument("-n", type=int, default=1_000_000)
    args = ap.parse_args()
    reqs = conv() if args.case == "conv" else million(args.n)
    lat = LinearLatency(a=0.005, b=5e-5, c=2e-7, capacity_tokens=200_000)
    lat.calls = _NoList()  # type: ignore[assignment]
    cfg = config(replicas=args.replicas, router=args.router, batching=args.batching)
    c0 = time.process_time()
    w0 = time.perf_counter()
    result = build(reqs, cfg, lat, jump=not args.no_jump).run()
    cpu = time.process_time() - c0
    wall = time.perf_counter() - w0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    r = result.requests
    print(
        f"{args.case}: {len(reqs)} requests x {args.replicas} replicas ({args.batching}, "
        f"{args.router}, jump={not args.no_jump}): {cpu:.2f} s CPU, {wall:.2f} s wall, "
        f"peak RSS {rss:.0f} MiB; finished {int((r['status'] == 'finished').sum())}, "
        f"p50 ttft {r['ttft_s'].median():.3f} s, horizon {result.horizon_s:.0f} s"
    )


class _NoList(list):  # type: ignore[type-arg]
    """Drops the latency model's call log (a million shapes would be measured)."""

    def append(self, _item: object) -> None:
        """Keep nothing."""


if __name__ == "__main__":
    main()
