"""What defines one serving replay: :class:`ServeConfig`, the one config tree of
``serve run / compare / plan`` (flags generated from its fields, as ``ReplayConfig``'s
are), saved with the run as ``serve_runs.config_json``; its hash is the run id.

Kept apart from the engine so that the command line and sweeps read it without loading
the simulator. Plugin-specific options (a replica scheduler's, a router's) are given as
``name=value`` lists (``--batch max_tokens=8192,max_seqs=256``) and checked against the
plugin's own ``Config`` dataclass when the run is built.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from gpu_trace.errors import UsageError
from gpu_trace.plugins import option
from gpu_trace.values import duration_parse, number_check, parse_duration


def parse_pairs(text: str, what: str = "options") -> dict[str, str]:
    """``a=1,b=x`` -> ``{"a": "1", "b": "x"}``; an empty text is no options."""
    out: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        key, sep, value = part.partition("=")
        if not sep or not key.strip() or not value.strip():
            msg = f"{what}: {part!r} is not name=value"
            raise UsageError(msg)
        out[key.strip().replace("-", "_")] = value.strip()
    return out


def _pairs(what: str) -> Any:
    def parse(text: str) -> str:
        parse_pairs(text, what)
        return text

    return parse


def parse_slo(text: str) -> dict[str, float]:
    """``ttft=2s,tpot=100ms[,e2e=30s]`` -> seconds per target (the DistServe pair:
    time to first token, time per output token; end-to-end optional).
    """
    out: dict[str, float] = {}
    for key, value in parse_pairs(text, "--slo").items():
        if key not in ("ttft", "tpot", "e2e"):
            msg = f"--slo: unknown target {key!r} (ttft, tpot, e2e)"
            raise UsageError(msg)
        out[key] = parse_duration(value, f"--slo {key}")
    return out


def _slo(text: str) -> str:
    parse_slo(text)
    return text


def parse_disaggregate(text: str) -> tuple[int, int]:
    """``P:D`` -> (prefill replicas, decode replicas); ``0`` or empty -> (0, 0): no
    disaggregation, every replica does both phases.
    """
    if text.strip() in ("", "0"):
        return (0, 0)
    left, sep, right = text.partition(":")
    try:
        p, d = int(left), int(right)
    except ValueError:
        p = d = -1
    if not sep or p < 1 or d < 1:
        msg = f"--disaggregate: {text!r} is not P:D (prefill:decode replicas, each >= 1) or 0"
        raise UsageError(msg)
    return (p, d)


def _disaggregate(text: str) -> str:
    parse_disaggregate(text)
    return text


def _autoscale(text: str) -> str:
    """Checked as the engine reads it (``queue,min=2,...``: the metric is a bare word,
    which ``name=value`` pairs would refuse).
    """
    from gpu_trace.serve.autoscale import parse_autoscale

    parse_autoscale(text, 1)
    return text


def _cold_start(text: str) -> float | str:
    """A duration -> seconds; ``gentd26:FILE[,stat=...]`` -> the text, the file read and
    checked now (:mod:`gpu_trace.serve.cold_start`; imported here, not at load time).
    """
    from gpu_trace.serve.cold_start import parse_cold_start

    return parse_cold_start(text)


@dataclass(frozen=True, kw_only=True)
class ServeConfig:
    """One serving replay: the trace, the model and hardware, the cluster layout, the
    replica scheduler, router, autoscaler and SLO. Every field is a flag of
    ``serve run`` and ``serve compare`` (generated; docs/cli.md).
    """

    source: str = option("", "Serving source of the store (azure-llm, mooncake, ...).")
    dataset: str | None = option(None, "Dataset of the source (conv, code, ...); all if omitted.")
    start_s: float = option(
        "0",
        "Replay from this offset into the trace (15m, 2h).",
        flag="--start",
        parse=duration_parse("--start"),
    )
    duration_s: float | None = option(
        None,
        "Replay only this long a window of the trace (1h).",
        flag="--duration",
        parse=duration_parse("--duration"),
    )
    model: str = option("llama-2-7b", "Model (the model table: gpu-trace serve models).")
    gpu: str = option("a100-80gb", "GPU kind (the GPU table: gpu-trace serve models).")
    tp: int = option(
        1, "Tensor-parallel width: GPUs per replica.", check=number_check("--tp", gt=0)
    )
    replicas: int = option(
        1, "Replicas (without --disaggregate).", check=number_check("--replicas", gt=0)
    )
    latency: str = option("roofline", "Latency model: roofline or profile.")
    profile: str | None = option(
        None, "Profile directory for --latency profile (vidur's mlp.csv / attention.csv)."
    )
    batching: str = option(
        "vllm", "Replica scheduler: vllm (continuous batching) or sarathi (chunked prefill)."
    )
    batch: str = option(
        "",
        "Replica scheduler options, comma-separated name=value: max_tokens=8192 (vllm), chunk=512 (sarathi), max_seqs=256.",
        parse=_pairs("--batch"),
    )
    order: str = option(
        "fcfs", "Queue order within a replica: fcfs, priority, spf (shortest predicted first)."
    )
    router: str = option("round-robin", "Router: round-robin, least-tokens, prefix-affinity.")
    route: str = option("", "Router options (name=value,...).", parse=_pairs("--route"))
    kv_block_tokens: int = option(
        16, "Tokens per paged KV-cache block.", check=number_check("--kv-block-tokens", gt=0)
    )
    memory_utilization: float = option(
        0.9,
        "Share of GPU memory the replica may use (weights + KV).",
        check=number_check("--memory-utilization", gt=0, le=1),
    )
    prefix_cache: bool = option(True, "Reuse cached prefix blocks (the trace's block hashes).")
    kv_preemption: str = option("recompute", "When KV memory fills: recompute or swap.")
    disaggregate: str = option(
        "0", "Prefill:decode replica pools (2:6); 0 = every replica does both.", parse=_disaggregate
    )
    link_gbps: float = option(
        400.0,
        "KV transfer bandwidth between pools, Gbit/s per replica.",
        check=number_check("--link-gbps", gt=0),
    )
    autoscale: str = option(
        "",
        "Autoscaler: queue or utilization, then comma-separated min=, max=, up=, down=, interval= (e.g. queue,min=2,max=8).",
        parse=_autoscale,
    )
    cold_start_s: float | str = option(
        "60",
        "From scaling up to a replica serving (model load): a duration, or "
        "gentd26:FILE to draw one per scale-up from GenTD26 model-load latencies "
        "(seeded by --seed; ,stat=p50 or p90 for a fixed value from the file).",
        flag="--cold-start",
        parse=_cold_start,
    )
    slo: str = option(
        "ttft=2s,tpot=100ms",
        "Latency targets, comma-separated: ttft=2s, tpot=100ms, e2e=30s (optional).",
        parse=_slo,
    )
    price: str | None = option(
        None, "Price table (TOML, USD per GPU-hour by GPU kind); the shipped one if omitted."
    )
    bin_s: float = option("10", "Timeseries bin.", flag="--bin", parse=duration_parse("--bin"))
    seed: int = option(
        0, "Seed of anything random (cold starts drawn from a file; no built-in plugin draws)."
    )
    run_id: str | None = option(None, "Run id (default: derived from the config's hash).")

    def resolved_run_id(self) -> str:
        """The given id, else ``<router>-<batching>-<hash>``: the same config always
        gets the same id.
        """
        if self.run_id:
            return self.run_id
        fields = dataclasses.asdict(self)
        fields.pop("run_id")
        blob = json.dumps(fields, sort_keys=True, default=str).encode()
        return f"{self.router}-{self.batching}-{hashlib.sha256(blob).hexdigest()[:8]}"

    def to_json(self) -> str:
        """The config as the run stores it (``serve_runs.config_json``)."""
        return json.dumps(dataclasses.asdict(self), sort_keys=True, default=str)
