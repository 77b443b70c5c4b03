"""Same results, bit for bit: the serving engine's frames on a fixed set of configurations,
saved once (``save DIR``) and compared after every speed change (``check DIR``).

A speed change to :mod:`gpu_trace.serve.engine` (and its replica, KV, batching and
latency helpers) must not move a single float: the per-request frame (TTFT, finish,
replica, preemptions, prefix hits, ...), the timeseries and the replica frame of every
configuration below are compared with ``check_exact``. The configurations cover the
event paths: vllm and sarathi; round-robin, least-tokens and prefix-affinity on a
mooncake-like input with block hashes; recompute and swap preemption with a small KV;
disaggregation 1:2; autoscaling. ``-n`` sets the synthetic requests (default 20,000).

    python -m bench.serve_same_results save /tmp/base      # on the commit before
    python -m bench.serve_same_results check /tmp/base     # after; exit 1 on a change
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl
from polars.testing import assert_frame_equal

from bench.serve_speed import synthetic
from gpu_trace.serve import runs
from gpu_trace.serve.config import ServeConfig
from gpu_trace.serve.engine import simulate
from gpu_trace.serve.workload import RequestSet

BASE = ServeConfig(source="synthetic", dataset="conv-like", replicas=4)
CONFIGS: dict[str, tuple[str, ServeConfig]] = {
    "vllm_rr": ("conv", BASE),
    "sarathi_lt": ("conv", dataclasses.replace(BASE, batching="sarathi", router="least-tokens")),
    "vllm_rr_sessions": ("sessions", BASE),
    "vllm_lt_sessions": ("sessions", dataclasses.replace(BASE, router="least-tokens")),
    "vllm_pa_sessions": ("sessions", dataclasses.replace(BASE, router="prefix-affinity")),
    "sarathi_pa_sessions": (
        "sessions",
        dataclasses.replace(BASE, router="prefix-affinity", batching="sarathi"),
    ),
    "vllm_recompute_small_kv": ("conv", dataclasses.replace(BASE, memory_utilization=0.22)),
    "vllm_swap_small_kv": (
        "conv",
        dataclasses.replace(BASE, memory_utilization=0.22, kv_preemption="swap"),
    ),
    "sarathi_swap_small_kv": (
        "conv",
        dataclasses.replace(
            BASE, batching="sarathi", memory_utilization=0.22, kv_preemption="swap"
        ),
    ),
    "disaggregate_1_2": ("conv", dataclasses.replace(BASE, disaggregate="1:2")),
    "autoscale_queue": (
        "conv",
        dataclasses.replace(BASE, replicas=2, autoscale="queue,min=1,max=6", cold_start_s=30.0),
    ),
}
FRAMES = ("requests", "timeseries", "replicas")


def sessions(n: int, rate: float, seed: int = 1) -> RequestSet:
    """``n`` conv-like requests in multi-turn sessions (mooncake-like): a request's
    block hashes are a global system prompt (4 blocks) then its session's chain, so a
    later turn shares its session's earlier blocks (prefix hits when routed together).
    """
    base = synthetic(n, rate, seed)
    rng = np.random.default_rng(seed)
    session = rng.integers(0, max(1, n // 5), n)
    prompt = base.input_tokens
    nb = prompt // 16
    offsets = np.zeros(n + 1, dtype=np.int64)
    offsets[1:] = np.cumsum(nb)
    hashes = np.empty(int(offsets[-1]), dtype=np.int64)
    for i in range(n):  # test data, 20k rows
        k = int(nb[i])
        chain = np.arange(k, dtype=np.int64)
        h = session[i] * 1_000_003 + chain + 1_000
        h[: min(4, k)] = np.arange(min(4, k))
        hashes[offsets[i] : offsets[i + 1]] = h
    return dataclasses.replace(
        base,
        session=session.astype(np.int64),
        block_offsets=offsets,
        block_hashes=hashes,
        block_tokens=16,
        dataset="sessions",
    )


def run_all(n: int) -> dict[str, dict[str, pl.DataFrame]]:
    """Every configuration's frames (plus the horizon as a one-row frame)."""
    inputs = {"conv": synthetic(n, 3.0), "sessions": sessions(n, 3.0)}
    out: dict[str, dict[str, pl.DataFrame]] = {}
    for name, (which, config) in CONFIGS.items():
        t0 = time.process_time()
        result = simulate(inputs[which], config, runs.build_latency(config))
        frames = {f: getattr(result, f) for f in FRAMES}
        frames["horizon"] = pl.DataFrame({"horizon_s": [result.horizon_s]})
        out[name] = frames
        req = result.requests
        sys.stderr.write(
            f"{name}: {time.process_time() - t0:.2f} CPU s, {req.height} requests, "
            f"preemptions {int(req['preemptions'].sum())}, "
            f"prefix hit tokens {int(req['prefix_hit_tokens'].sum())}\n"
        )
    return out


def main(argv: list[str]) -> int:
    """Save or check; 0 when every frame is equal."""
    ap = argparse.ArgumentParser(prog="python -m bench.serve_same_results")
    ap.add_argument("what", choices=("save", "check"))
    ap.add_argument("dir", type=Path)
    ap.add_argument("-n", type=int, default=20_000)
    args = ap.parse_args(argv)
    got = run_all(args.n)
    bad = 0
    for name, frames in got.items():
        for f, frame in frames.items():
            path = args.dir / f"{name}.{f}.parquet"
            if args.what == "save":
                path.parent.mkdir(parents=True, exist_ok=True)
                frame.write_parquet(path)
                continue
            try:
                assert_frame_equal(frame, pl.read_parquet(path), check_exact=True)
            except AssertionError as err:
                bad += 1
                sys.stderr.write(f"DIFFERENT {name} {f}: {str(err)[:300]}\n")
    if args.what == "check":
        sys.stderr.write("same results\n" if not bad else f"{bad} frames differ\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
