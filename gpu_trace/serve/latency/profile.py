"""``profile``: iteration time from operator timings measured on real hardware, in the
CSV format vidur publishes (github.com/microsoft/vidur, ``data/profiling``; MIT).

What an iteration costs is composed as vidur's execution-time predictor composes it
(vidur/entities/execution_time.py and
vidur/execution_time_predictor/sklearn_execution_time_predictor.py at commit 7d47513),
per layer, times the number of layers:

- the token-wise operators of ``mlp.csv``, keyed by the iteration's token count rounded
  up to a multiple of 8 (vidur's ``_total_num_tokens_rounded``): ``attn_pre_proj``,
  ``attn_post_proj``, ``attn_rope``, ``input_layernorm``, ``post_attention_layernorm``,
  ``mlp_up_proj``, ``mlp_act``, ``mlp_down_proj``, ``add`` (the embedding and the LM head
  are not counted, as vidur does not count them);
- from ``attention.csv``: decode attention keyed by (decode batch size, mean KV length of
  the decodes), prefill attention keyed by (KV already cached, chunk size), several
  prefills of one iteration aggregated as vidur does (KV lengths summed, chunk sizes
  combined as the root of their sum of squares), each times ``1 + batching_overhead``
  when a GQA model batches more than one, and ``attn_kv_cache_save`` by token count;
- with tensor parallelism, two all-reduces per layer (attention and MLP) from
  ``all_reduce.csv`` of the network, keyed by tokens (= size / hidden / 2 bytes), plus
  vidur's NCCL launch overhead per all-reduce.

vidur fits a random forest or a polynomial regression to the measured points; **we
interpolate** between them instead (linearly in the token count, with the last segment's
slope beyond the largest measured count; piecewise linearly over a triangulation of the
(batch, KV) and (KV, chunk) points for attention, and beyond the measured region the
nearest point scaled by the attention work). At a measured point the model returns the
measurement.

Without an ``attention.csv`` (the shipped profiles have none: see
gpu_trace/serve/profiles/PROVENANCE.md), the attention kernels' time is the roofline's
(FLOPs of the (query, key) pairs and bytes of the KV cache against the GPU's peaks), said
in :attr:`Profile.notes`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from gpu_trace.errors import UsageError
from gpu_trace.plugins import PolicyPlugin, option
from gpu_trace.serve import hardware
from gpu_trace.serve.latency.base import GpuSpec, IterationShape, ModelSpec
from gpu_trace.serve.latency.memory import check_tp, kv_capacity_tokens
from gpu_trace.serve.latency.profile_tables import AttentionTable, TokenTable
from gpu_trace.serve.latency.roofline import Roofline, RooflineConfig
from gpu_trace.values import check_number

#: Token-wise operators of mlp.csv vidur adds per layer; the last three may be absent
#: (vidur counts them as 0 then).
MLP_OPS: tuple[str, ...] = (
    "attn_pre_proj",
    "attn_post_proj",
    "attn_rope",
    "mlp_up_proj",
    "mlp_act",
    "mlp_down_proj",
    "input_layernorm",
    "post_attention_layernorm",
    "add",
)
OPTIONAL_OPS = frozenset({"input_layernorm", "post_attention_layernorm", "add"})


def shipped_root() -> Path:
    """The profiles shipped with gpu-trace (vidur's ``data/profiling`` layout)."""
    return Path(str(resources.files("gpu_trace.serve").joinpath("profiles")))


@dataclass(frozen=True)
class ProfileConfig:
    """Options of ``profile`` (defaults are vidur's own where it has one)."""

    path: str | None = option(
        None,
        "Profile folder: mlp.csv (+ attention.csv, all_reduce.csv) or a copy of vidur's "
        "data/profiling (compute/<gpu>/<model>/, network/<net>/); the shipped one if omitted.",
    )
    network: str | None = option(
        None,
        "vidur network profile for tp > 1 (a100_dgx, a100_pairwise_nvlink, ...); "
        "default: the GPU's first that has the tensor-parallel width.",
    )
    block_size: int = option(16, "KV block size whose attention.csv rows are used.")
    batching_overhead: float = option(
        0.1,
        "Extra share of attention time when a GQA model batches more than one request "
        "(vidur's attention_*_batching_overhead_fraction).",
    )
    allreduce_overhead_s: float = option(
        2e-5, "CPU launch cost per all-reduce, s (vidur's nccl_cpu_launch_overhead_ms 0.02)."
    )
    overhead_s: float = option(
        0.0, "Fixed cost per iteration, s (vidur skips CPU overheads by default)."
    )
    reserve_gib: float = option(
        1.5, "GPU memory per GPU kept for activations and the CUDA context (GiB), not KV."
    )


class Profile:
    """Iteration time composed from measured operator timings (vidur's profile CSVs)."""

    Config: ClassVar[type[ProfileConfig]] = ProfileConfig

    def __init__(self, config: ProfileConfig, model: ModelSpec, gpu: GpuSpec, tp: int = 1) -> None:
        check_tp(model, tp)
        for name in ("batching_overhead", "allreduce_overhead_s", "overhead_s", "reserve_gib"):
            check_number(getattr(config, name), f"profile option {name}", ge=0)
        check_number(config.block_size, "profile option block_size", gt=0)
        self.config = config
        self.model = model
        self.gpu = gpu
        self.tp = tp
        self.notes: list[str] = []
        folder = self._compute_folder()
        self.source = folder
        self.mlp = TokenTable.from_mlp_csv(folder / "mlp.csv", model, tp, MLP_OPS, OPTIONAL_OPS)
        gqa = model.heads > model.kv_heads
        self.overhead_share = config.batching_overhead if gqa else 0.0
        attention = folder / "attention.csv"
        self.attention: AttentionTable | None = None
        if attention.is_file():
            self.attention = AttentionTable.from_csv(attention, model, tp, config.block_size)
        else:
            self.notes.append(
                f"profile {folder} has no attention.csv: attention kernels timed by the roofline"
            )
        self.allreduce: TokenTable | None = None
        if tp > 1:
            self.allreduce = self._allreduce_table(folder)
        self._token_cache: dict[int, float] = {}
        # the roofline's attention terms, per layer, for a profile without attention.csv
        fallback = Roofline(RooflineConfig(), model, gpu, tp)
        self._layers = float(model.layers)
        self._pair_flops = fallback.attention_flops_per_pair
        self._kv_bytes = fallback.kv_bytes
        self._flop_rate = fallback.flop_rate
        self._byte_rate = fallback.byte_rate

    # -- where the files are -------------------------------------------------------

    def _compute_folder(self) -> Path:
        root = Path(self.config.path) if self.config.path else shipped_root()
        if (root / "mlp.csv").is_file():
            return root
        device, _ = hardware.vidur_device(self.gpu.name)
        name = hardware.vidur_model(self.model.name)
        if device and name and (root / "compute" / device / name / "mlp.csv").is_file():
            return root / "compute" / device / name
        where = f"{root}/compute/{device or '<gpu>'}/{name or '<model>'}/mlp.csv"
        msg = (
            f"no profile of {self.model.name} on {self.gpu.name}: {where} not found "
            f"(give --profile DIR with vidur's mlp.csv, or --latency roofline)"
        )
        raise UsageError(msg)

    def _allreduce_table(self, folder: Path) -> TokenTable:
        candidates: list[Path] = [folder / "all_reduce.csv"]
        _, networks = hardware.vidur_device(self.gpu.name)
        if self.config.network:
            networks = (self.config.network,)
        for root in (Path(self.config.path) if self.config.path else None, shipped_root()):
            if root is not None:
                candidates += [root / "network" / n / "all_reduce.csv" for n in networks]
        tried = []
        for file in candidates:
            if not file.is_file():
                continue
            table = TokenTable.from_allreduce_csv(file, self.model, self.tp)
            if table is not None:
                return table
            tried.append(str(file))
        msg = (
            f"no all-reduce profile for {self.tp} GPUs of {self.gpu.name} "
            f"(looked in: {', '.join(tried) or ', '.join(str(c) for c in candidates)})"
        )
        raise UsageError(msg)

    # -- the composition ------------------------------------------------------------
    # iteration_s works on Python floats (it runs once per simulated iteration: a
    # month of traffic is millions of calls), decode_steps_s on arrays; both add the
    # same terms in the same order, so they agree to the last bit.

    def _token_ms(self, tokens: int) -> float:
        """Per-layer milliseconds of everything keyed by the token count (memoized)."""
        cached = self._token_cache.get(tokens)
        if cached is not None:
            return cached
        rounded = np.array([math.ceil(tokens / 8) * 8.0])
        ms = self.mlp.ms(rounded)
        if self.attention is not None:
            ms = ms + self.attention.kv_save_ms(np.array([float(tokens)]))
        if self.allreduce is not None:
            ms = ms + 2.0 * (self.allreduce.ms(rounded) + self.config.allreduce_overhead_s * 1e3)
        value = float(ms[0])
        if len(self._token_cache) < 1 << 16:
            self._token_cache[tokens] = value
        return value

    def _decode_ms(self, count: float, context: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """Per-layer milliseconds of decode attention: ``count`` requests whose KV
        lengths sum to each ``context``.
        """
        if self.attention is not None:
            ms = self.attention.decode_ms(count, context / count)
            out: npt.NDArray[np.float64] = ms * (1.0 + self.overhead_share * (count > 1))
            return out
        kv = context + count  # read the cached KV and write the new token's
        flops = self._pair_flops * kv / self._layers  # L + 1 (query, key) pairs each
        moved = self._kv_bytes * kv / self._layers
        return np.maximum(flops / self._flop_rate, moved / self._byte_rate) * 1e3

    def _decode_ms_one(self, count: float, context: float) -> float:
        """:meth:`_decode_ms` of one context, in floats (same operations, same order)."""
        if self.attention is not None:
            return float(self._decode_ms(count, np.array([context]))[0])
        kv = context + count
        flops = self._pair_flops * kv / self._layers
        moved = self._kv_bytes * kv / self._layers
        return max(flops / self._flop_rate, moved / self._byte_rate) * 1e3

    def _prefill_ms(self, shape: IterationShape) -> float:
        if not shape.prefill_tokens:
            return 0.0
        if self.attention is not None:
            kv = float(sum(shape.prefill_context))
            chunk = float(round(math.sqrt(sum(t * t for t in shape.prefill_tokens))))
            ms = self.attention.prefill_ms(kv, chunk)
            return ms * (1.0 + self.overhead_share * (len(shape.prefill_tokens) > 1))
        pairs = sum(
            t * c + t * (t + 1) // 2
            for t, c in zip(shape.prefill_tokens, shape.prefill_context, strict=True)
        )
        kv_tokens = sum(shape.prefill_context) + sum(shape.prefill_tokens)
        flops = self._pair_flops * float(pairs) / self._layers
        moved = self._kv_bytes * float(kv_tokens) / self._layers
        return max(flops / self._flop_rate, moved / self._byte_rate) * 1e3

    def iteration_s(self, shape: IterationShape) -> float:
        """Seconds one iteration of ``shape`` takes (0 for an empty one)."""
        tokens = shape.tokens
        if tokens == 0:
            return 0.0
        ms = self._token_ms(tokens)
        if shape.decode_count:
            ms = ms + self._decode_ms_one(
                float(shape.decode_count), float(shape.decode_context_sum)
            )
        ms = ms + self._prefill_ms(shape)
        return ms * self._layers * 1e-3 + self.config.overhead_s

    def decode_steps_s(self, count: int, context_sum: int, steps: int) -> npt.NDArray[np.float64]:
        """Seconds of ``steps`` consecutive decode-only iterations, with the same
        arithmetic as :meth:`iteration_s` element by element.
        """
        if count <= 0 or steps <= 0:
            return np.zeros(max(steps, 0), dtype=np.float64)
        context = (context_sum + np.arange(steps, dtype=np.int64) * count).astype(np.float64)
        ms = self._token_ms(count) + self._decode_ms(float(count), context)
        ms = ms + 0.0  # no prefill: iteration_s adds 0.0 here too
        out: npt.NDArray[np.float64] = ms * self._layers * 1e-3 + self.config.overhead_s
        return out

    def kv_capacity_tokens(self, memory_utilization: float) -> int:
        """KV tokens the replica holds (weights from the model table, this model's
        ``reserve_gib``).
        """
        return kv_capacity_tokens(
            self.model, self.gpu, self.tp, memory_utilization, self.config.reserve_gib
        )

    def describe(self) -> dict[str, Any]:
        """Where the timings come from (for the run's notes)."""
        return {"source": str(self.source), "notes": list(self.notes)}


PLUGINS = (PolicyPlugin("latency", "profile", Profile),)

__all__ = ["PLUGINS", "Profile", "ProfileConfig", "shipped_root"]
