"""Side by side with vidur (issue 30): the same requests, model, GPU profile, replica
scheduler and router in vidur and in ``gpu_trace.serve``; latency percentiles of both,
their differences, and both runs' CPU seconds.

vidur (microsoft/vidur, MIT; read at commit 7d47513) is run as is, never copied: its
checkout is named by ``VIDUR_SRC`` and the interpreter by ``VIDUR_PYTHON`` (a command
line, default ``python3``; ``VIDUR_ARGS``: more vidur flags, e.g. a smaller random-forest
search; vidur needs numpy, pandas, scikit-learn, wandb, kaleido,
ddsketch, plotly_express, matplotlib, seaborn, fasteners and pyyaml: BENCHMARKS.md,
"Serving replay beside vidur", has the venv commands). Without ``VIDUR_SRC`` the bench
case says so and is skipped.

What is made the same on both sides (the reasons: docs/vidur-semantics.md, from
vidur's source, file:line):

- Requests: the window of the Azure LLM 2023 conversation trace from the store
  (``gpu-trace ingest azure-llm``), with vidur's ``max_tokens`` clip applied to both
  (a prompt is shortened so that prompt + output <= 4096: its
  ``trace_replay_request_generator.py:50-62``), written for vidur as its trace-replay CSV
  (``arrived_at, num_prefill_tokens, num_decode_tokens``: real arrival times).
- Profile: one directory (``bench/serve_vidur_profile.py``: vidur's measured ``mlp.csv``
  and a generated ``attention.csv``, since vidur's measured attention tables are Git LFS
  objects absent from the mirror), read by vidur's predictor and by our ``profile``
  latency model.
- KV capacity: vidur's (whole 4096-token request slots of 80 GiB x 0.9 minus the layer
  weights: ``scheduler/utils/memory_planner.py``); ours is given the memory utilization
  whose capacity is the same number of 16-token blocks.
- Scheduler options: vllm ``max_tokens_in_batch`` 4096 / ``batch_size_cap`` 128; sarathi
  ``chunk_size`` 512 / ``batch_size_cap`` 128 (vidur's defaults); round-robin router;
  ours with ``padded=true`` (vidur's vllm counts a prefill batch as its size x its longest
  prompt: vllm_replica_scheduler.py:81-84) and ``watermark=0.01`` (a new prompt must leave
  1 % of the blocks free: vllm_replica_scheduler.py:32-46, config.py:265-268; without it
  our vllm fills the cache with prompts and preempts ~100x more often under load).
- Metrics: TTFT = vidur's ``prefill_e2e_time``; e2e = ``request_e2e_time``; TPOT =
  (e2e - TTFT) / (output tokens - 1) on both sides (vidur's own
  ``decode_time_execution_plus_preemption_normalized`` divides by the output tokens,
  first included; it is printed too).

Known differences left in (the notes explain each): vidur fits a random forest to the
profile (we interpolate it) and rounds KV lengths up to 64 tokens before looking attention
up, allocates a prompt's blocks as ceil(P / 16) (ours ceil((P + 1) / 16)) and a decode
block one token later.

``python -m bench.serve_vidur_side [--scenario a100-llama-2-7b] [--scheduler vllm]
[--replicas 1] [--start 0] [--duration 3600]`` prints the table and one JSON line;
``python -m bench.serve_vidur_side ours SPEC.json`` is our side as its own process.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from bench.child import timed
from bench.serve_vidur_profile import write_profile

VIDUR_COMMIT = "7d47513"
MAX_TOKENS = 4096
"""vidur's trace-replay ``max_tokens`` (vidur/config/config.py:245-248)."""
BLOCK = 16
GIB = 1024**3
SAMPLE = (
    Path(__file__).resolve().parents[1] / "data/samples/azure-llm/AzureLLMInferenceTrace_conv.csv"
)


@dataclass(frozen=True)
class Scenario:
    """One model on one GPU kind, named on both sides."""

    device: str  # vidur --replica_config_device
    vidur_model: str  # vidur --replica_config_model_name
    tp: int
    network: str  # vidur --replica_config_network_device
    model: str  # our model table
    gpu: str  # our GPU table
    gpu_gib: int  # vidur's device memory (vidur/config/device_sku_config.py:26-39)


SCENARIOS = {
    "a100-llama-2-7b": Scenario(
        "a100", "meta-llama/Llama-2-7b-hf", 1, "a100_pairwise_nvlink", "llama-2-7b", "a100-80gb", 80
    ),
    "h100-llama-2-70b-tp4": Scenario(
        "h100",
        "meta-llama/Llama-2-70b-hf",
        4,
        "h100_pairwise_nvlink",
        "llama-2-70b",
        "h100-sxm",
        80,
    ),
}

SCHEDULERS = {
    # ours: (batching, --batch); vidur: its replica scheduler flags (its defaults, stated)
    "vllm": (
        "max_tokens=4096,max_seqs=128,padded=true,watermark=0.01",
        ["--vllm_scheduler_config_max_tokens_in_batch", "4096"],
    ),
    "sarathi": (
        "chunk=512,max_seqs=128,watermark=0.01",
        ["--sarathi_scheduler_config_chunk_size", "512"],
    ),
}


def skip_reason() -> str | None:
    """Why vidur cannot be run here (None when it can)."""
    src = os.environ.get("VIDUR_SRC")
    if not src:
        return "VIDUR_SRC is not set (path of a microsoft/vidur checkout; VIDUR_PYTHON its venv)"
    if not (Path(src) / "vidur" / "main.py").is_file():
        return f"VIDUR_SRC={src} has no vidur/main.py"
    return None


def cache_dir() -> Path:
    """Where vidur's fitted predictor models and the profile live between runs
    (``VIDUR_CACHE``): vidur keys its cache by the profile's path, so the path must stay.
    """
    return Path(os.environ.get("VIDUR_CACHE", "bench/out/vidur")).resolve()


def clip_tokens(inp: np.ndarray, out: np.ndarray, max_tokens: int = MAX_TOKENS) -> np.ndarray:
    """The trace clip of vidur: both counts >= 1, then the prompt shortened by what prompt +
    output exceed ``max_tokens`` (trace_replay_request_generator.py:42-58). Returns the
    new prompt lengths (the outputs are kept; >= 1).
    """
    inp = np.maximum(inp, 1)
    out = np.maximum(out, 1)
    return np.asarray(inp - np.maximum(inp + out - max_tokens, 0), dtype=np.int64)


def window(store: Path, start_s: float, duration_s: float | None) -> Any:
    """The conversation trace's requests in [start, start + duration), read as ``serve
    run`` reads them (:func:`gpu_trace.serve.runs.load_requests`), vidur's clip applied.
    """
    from gpu_trace.serve.runs import load_requests

    rs = load_requests(store, "azure-llm", "conv", start_s, duration_s).requests
    out = np.maximum(rs.output_tokens, 1)
    return replace(rs, input_tokens=clip_tokens(rs.input_tokens, out), output_tokens=out)


def write_vidur_trace(rs: Any, path: Path) -> None:
    """The trace-replay CSV vidur reads (trace_replay_request_generator.py:23, 83-90)."""
    pl.DataFrame(
        {
            "arrived_at": np.round(rs.arrival_s, 6),
            "num_prefill_tokens": rs.input_tokens,
            "num_decode_tokens": rs.output_tokens,
        }
    ).write_csv(path)


def vidur_kv_blocks(
    sc: Scenario, layers: int, hidden: int, heads: int, kv_heads: int, ffn: int
) -> int:
    """The KV ``num_blocks`` vidur computes (base_replica_scheduler.py:34-43, memory_planner.py:11-50,
    param_counter.py:38-75): whole ``MAX_TOKENS`` request slots of the GPU's memory less a
    0.1 margin less the layer weights (no embeddings), times the blocks per slot.
    """
    hd = hidden // heads
    q, kv = heads // sc.tp, math.ceil(kv_heads / sc.tp)
    per_layer = hidden * hd * (q + 2 * kv) + hidden * hd * q + 3 * hidden * ffn // sc.tp
    weights = 2 * per_layer * layers
    slot = 2 * 2 * hd * kv * MAX_TOKENS * layers
    slots = (sc.gpu_gib * GIB * 0.9 - weights) // slot
    return int(slots) * (MAX_TOKENS // BLOCK)


def matching_utilization(latency: Any, blocks: int) -> float:
    """The memory utilization at which ``latency`` holds ``blocks`` 16-token blocks (the
    smallest that does; capacity grows with utilization).
    """
    lo, hi = 1e-3, 1.0
    if latency.kv_capacity_tokens(hi) // BLOCK < blocks:
        return hi
    for _ in range(60):
        mid = (lo + hi) / 2
        if latency.kv_capacity_tokens(mid) // BLOCK >= blocks:
            hi = mid
        else:
            lo = mid
    return hi


def vidur_command(
    sc: Scenario, scheduler: str, replicas: int, trace: Path, out: Path, cache: Path
) -> list[str]:
    """The command line of vidur (flags: ``python -m vidur.main -h``)."""
    prof = (cache / "profile").resolve() / "compute"  # vidur's cache key holds this path
    python = shlex.split(os.environ.get("VIDUR_PYTHON", "python3"))
    return [
        *python,
        "-m",
        "vidur.main",
        "--replica_config_device", sc.device,
        "--replica_config_model_name", sc.vidur_model,
        "--replica_config_tensor_parallel_size", str(sc.tp),
        "--replica_config_network_device", sc.network,
        "--cluster_config_num_replicas", str(replicas),
        "--global_scheduler_config_type", "round_robin",
        "--replica_scheduler_config_type", scheduler,
        *SCHEDULERS[scheduler][1],
        "--request_generator_config_type", "trace_replay",
        "--trace_request_generator_config_trace_file", str(trace),
        "--trace_request_generator_config_max_tokens", str(MAX_TOKENS),
        "--random_forrest_execution_time_predictor_config_compute_input_file",
        f"{prof}/{{DEVICE}}/{{MODEL}}/mlp.csv",
        "--random_forrest_execution_time_predictor_config_attention_input_file",
        f"{prof}/{{DEVICE}}/{{MODEL}}/attention.csv",
        "--metrics_config_output_dir", str(out),
        "--metrics_config_cache_dir", str(cache / "models"),
        "--no-metrics_config_store_plots",
        "--no-metrics_config_enable_chrome_trace",
        *shlex.split(os.environ.get("VIDUR_ARGS", "")),
    ]  # fmt: skip


def vidur_requests(out: Path) -> pl.DataFrame:
    """The per-request results of vidur (``<out>/<timestamp>/request_metrics.csv``, columns
    named in vidur/metrics/constants.py:33-68, ``Request Id`` the trace row) as ours.
    """
    found = sorted(out.glob("*/request_metrics.csv"))
    if not found:
        msg = f"vidur wrote no request_metrics.csv under {out}"
        raise SystemExit(msg)
    return read_vidur_metrics(found[-1])


def read_vidur_metrics(path: Path) -> pl.DataFrame:
    """``request_metrics.csv`` -> request, ttft_s, tpot_s, e2e_s, vidur_tpot_s, restarts."""
    got = pl.read_csv(path)
    d = pl.col("request_num_decode_tokens")
    return got.sort("Request Id").select(
        pl.col("Request Id").alias("request"),
        pl.col("prefill_e2e_time").alias("ttft_s"),
        pl.when(d > 1)
        .then((pl.col("request_e2e_time") - pl.col("prefill_e2e_time")) / (d - 1))
        .alias("tpot_s"),
        pl.col("request_e2e_time").alias("e2e_s"),
        pl.col("decode_time_execution_plus_preemption_normalized").alias("vidur_tpot_s"),
        pl.col("request_num_restarts").alias("restarts"),
    )


def percentiles(frame: pl.DataFrame) -> dict[str, float | None]:
    """p50 / p90 of ttft, tpot and e2e (linear interpolation, nulls left out)."""
    out: dict[str, float | None] = {}
    for col in ("ttft_s", "tpot_s", "e2e_s"):
        values = frame.get_column(col).drop_nulls().to_numpy()
        for q in (50, 90):
            out[f"{col[:-2]}_p{q}_s"] = float(np.percentile(values, q)) if values.size else None
    return out


def table(ours: dict[str, Any] | None, vidur: dict[str, Any]) -> str:
    """The Markdown table: each percentile on both sides and ours relative to vidur."""
    lines = ["| metric | vidur | ours | ours vs vidur |", "|---|---|---|---|"]
    for key, v in vidur.items():
        o = None if ours is None else ours.get(key)
        rel = "" if o is None or not v else f"{(o - v) / v:+.1%}"
        lines.append(f"| {key} | {v:.4g} | {'-' if o is None else f'{o:.4g}'} | {rel} |")
    return "\n".join(lines)


def run_ours(spec: dict[str, Any]) -> None:
    """Our side, in its own process (timed by the parent): requests from the store,
    the profile latency model, the engine; per-request results to ``spec['out']``.
    """
    from gpu_trace.serve.config import ServeConfig
    from gpu_trace.serve.engine import simulate  # type: ignore[import-not-found, unused-ignore]

    sc = SCENARIOS[spec["scenario"]]
    rs = window(Path(spec["store"]), spec["start_s"], spec["duration_s"])
    base = ServeConfig(
        source="azure-llm",
        dataset="conv",
        model=sc.model,
        gpu=sc.gpu,
        tp=sc.tp,
        replicas=spec["replicas"],
        latency="profile",
        profile=spec["profile"],
        batching=spec["scheduler"],
        batch=SCHEDULERS[spec["scheduler"]][0],
        router="round-robin",
        kv_block_tokens=BLOCK,
        prefix_cache=False,
        kv_preemption="recompute",
    )
    latency = build_latency(base)
    m = latency.model
    blocks = vidur_kv_blocks(sc, m.layers, m.hidden, m.heads, m.kv_heads, m.ffn)
    config = replace(base, memory_utilization=matching_utilization(latency, blocks))
    # the KV capacity is asked of the model with the config's utilisation: one model
    result = simulate(rs, config, latency)
    result.requests.write_parquet(spec["out"])
    print(
        json.dumps(
            {
                "requests": len(rs),
                "kv_blocks": blocks,
                "memory_utilization": config.memory_utilization,
            }
        )
    )


def build_latency(config: Any) -> Any:
    """The config's latency model, built as ``serve run`` builds it."""
    from gpu_trace.serve.runs import build_latency as build

    return build(config)


def side_by_side(
    scenario: str = "a100-llama-2-7b",
    scheduler: str = "vllm",
    replicas: int = 1,
    start_s: float = 0.0,
    duration_s: float | None = None,
) -> dict[str, Any]:
    """Both runs on one window; the bench case ``serve_vidur_side`` and the command."""
    reason = skip_reason()
    if reason:
        return {"skipped": reason}
    sc = SCENARIOS[scenario]
    src = Path(os.environ["VIDUR_SRC"]).resolve()
    cache = cache_dir()
    net = sc.network if sc.tp > 1 else None
    folder = write_profile(src, cache / "profile", sc.device, sc.vidur_model, sc.tp, net)
    env = {k: v for k, v in os.environ.items() if k != "GPU_TRACE_FSYNC"}
    row: dict[str, Any] = {
        "scenario": scenario,
        "scheduler": scheduler,
        "replicas": replicas,
        "vidur_commit": VIDUR_COMMIT,
        "load_before": round(os.getloadavg()[0], 2),
    }
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        store = t / "store"
        store.mkdir()
        timed([sys.executable, "-m", "gpu_trace", "-q", "ingest", "azure-llm", str(SAMPLE), "--store", str(store)], env)  # fmt: skip
        rs = window(store, start_s, duration_s)
        row["requests"] = len(rs)
        trace = t / "trace.csv"
        write_vidur_trace(rs, trace)
        vid = timed(
            vidur_command(sc, scheduler, replicas, trace, t / "vidur", cache),
            env | {"PYTHONPATH": str(src)},
            cwd=src,
        )
        vidur = percentiles(vidur_requests(t / "vidur"))
        row |= {f"vidur_{k}": v for k, v in vid.items() if k != "last_line"}
        spec = {
            "scenario": scenario,
            "scheduler": scheduler,
            "replicas": replicas,
            "start_s": start_s,
            "duration_s": duration_s,
            "store": str(store),
            "profile": str(folder),
            "out": str(t / "ours.parquet"),
        }
        (t / "spec.json").write_text(json.dumps(spec))
        me = timed([sys.executable, "-m", "bench.serve_vidur_side", "ours", str(t / "spec.json")], env)  # fmt: skip
        row |= {f"ours_{k}": v for k, v in me.items() if k != "last_line"}
        got = pl.read_parquet(t / "ours.parquet").filter(pl.col("status") == "finished")
        ours = percentiles(got)
        row["speedup_cpu"] = round(vid["cpu_s"] / max(me["cpu_s"], 1e-9), 1)
        row["table"] = table(ours, vidur)
        row |= {f"vidur_{k}": v for k, v in vidur.items()}
        row |= {f"ours_{k}": v for k, v in ours.items()}
    row["load_after"] = round(os.getloadavg()[0], 2)
    return row


def main(argv: list[str]) -> None:
    """Command line: see the module docstring."""
    if argv[:1] == ["ours"]:
        run_ours(json.loads(Path(argv[1]).read_text()))
        return
    p = argparse.ArgumentParser(prog="python -m bench.serve_vidur_side")
    p.add_argument("--scenario", default="a100-llama-2-7b", choices=sorted(SCENARIOS))
    p.add_argument("--scheduler", default="vllm", choices=sorted(SCHEDULERS))
    p.add_argument("--replicas", type=int, default=1)
    p.add_argument("--start", type=float, default=0.0)
    p.add_argument("--duration", type=float, default=None)
    a = p.parse_args(argv)
    row = side_by_side(a.scenario, a.scheduler, a.replicas, a.start, a.duration)
    if "table" in row:
        print(row.pop("table"))
    print(json.dumps(row, default=str))


if __name__ == "__main__":
    main(sys.argv[1:])
