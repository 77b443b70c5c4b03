"""``gpu-trace serve profile``: measure a profile table (vidur's CSV format) on this
machine's GPU with PyTorch, on random weights of the model's shapes.

The ``profile`` latency model reads what this writes (``mlp.csv`` and ``attention.csv``
in one folder: ``--latency profile --profile DIR``). What is timed, per tensor-parallel
shard (heads, KV heads and FFN width divided by ``tp``; no communication, use vidur's
network profiles or the shipped ones for the all-reduce):

- ``mlp.csv``, by token count: the embedding lookup (``emb``), the input RMSNorm, the QKV projection (``attn_pre_proj``),
  rotary embedding (``attn_rope``), the output projection (``attn_post_proj``), the second
  RMSNorm, the gate+up projection (``mlp_up_proj``), SiLU x up (``mlp_act``), the down
  projection (``mlp_down_proj``) and the residual add: vidur's operator names;
- ``attention.csv``: decode attention by (batch size, KV length) and prefill attention by
  (cached KV length, chunk size), with PyTorch's ``scaled_dot_product_attention`` over
  dense K/V tensors. This is not vLLM's paged-attention kernel (vidur profiles those):
  numbers are an approximation of a serving engine's.

Each point is timed ``repeats`` times with CUDA events after ``warmup`` runs; the CSV
holds min / max / mean / median / std in milliseconds, as vidur's do.

**Untested on hardware here**: the machine this was written on has neither PyTorch nor a
GPU. Without them :func:`measure_profile` raises one line (:data:`NEEDS`); the CSV
writers (:func:`write_mlp_csv`, :func:`write_attention_csv`) are plain Python and tested.
"""

from __future__ import annotations

import csv
import importlib
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpu_trace.errors import GpuTraceError
from gpu_trace.serve.latency.base import ModelSpec

NEEDS = "gpu-trace serve profile needs PyTorch with a CUDA GPU: none here"

MLP_OPS: tuple[str, ...] = (
    "emb",
    "input_layernorm",
    "attn_pre_proj",
    "attn_rope",
    "attn_post_proj",
    "post_attention_layernorm",
    "mlp_up_proj",
    "mlp_act",
    "mlp_down_proj",
    "add",
)
"""The operators timed per token count, in vidur's names and order (its mlp.csv columns;
``emb``, the embedding lookup, is written as vidur writes it, though neither vidur's
predictor nor ours adds it to an iteration)."""

STATS = ("min", "max", "mean", "median", "std")

ATTENTION_KEYS = (
    "n_embd",
    "n_q_head",
    "n_kv_head",
    "block_size",
    "num_tensor_parallel_workers",
    "max_model_len",
    "batch_size",
    "prefill_chunk_size",
    "kv_cache_size",
    "is_prefill",
)
"""The key columns of vidur's ``attention.csv`` (its profiler's row,
``vidur/profiling/attention/attention_wrapper.py:143-154`` at 7d47513, less the
``attention_backend`` label), written by :func:`write_attention_csv` and by the vidur
side by side's generated table."""

DEFAULT_TOKENS: tuple[int, ...] = (
    1,
    2,
    4,
    *range(8, 129, 8),
    192,
    256,
    384,
    512,
    768,
    1024,
    1536,
    2048,
    3072,
    4096,
)
DEFAULT_BATCHES: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128)
DEFAULT_KV: tuple[int, ...] = (0, 64, 256, 512, 1024, 2048, 4096)
DEFAULT_CHUNKS: tuple[int, ...] = (16, 64, 128, 256, 512, 1024, 2048, 4096)


@dataclass(frozen=True)
class AttentionTiming:
    """One measured attention point: decode (``chunk`` 0) or prefill (``batch`` 1)."""

    batch: int
    chunk: int
    kv: int
    samples_ms: tuple[float, ...]


def _stats(samples: Sequence[float]) -> list[str]:
    if not samples:
        return ["", "", "", "", ""]
    std = statistics.pstdev(samples) if len(samples) > 1 else 0.0
    values = (
        min(samples),
        max(samples),
        statistics.fmean(samples),
        statistics.median(samples),
        std,
    )
    return [repr(float(v)) for v in values]


def write_mlp_csv(
    path: Path,
    model: ModelSpec,
    tp: int,
    timings: Mapping[int, Mapping[str, Sequence[float]]],
    *,
    gated: bool = True,
) -> Path:
    """Write vidur's ``mlp.csv``: one row per token count of ``timings`` (token count ->
    operator -> millisecond samples), the five statistics per operator, then the key
    columns vidur filters on (``vocab_size`` the model's; ``use_gated_mlp`` as given).
    """
    header = [f"time_stats.{op}.{s}" for op in MLP_OPS for s in STATS]
    header += [
        "n_head",
        "n_kv_head",
        "n_embd",
        "n_expanded_embd",
        "vocab_size",
        "use_gated_mlp",
        "num_tokens",
        "num_tensor_parallel_workers",
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as f:
        out = csv.writer(f, lineterminator="\n")
        out.writerow(header)
        for tokens in sorted(timings):
            ops = timings[tokens]
            row = [v for op in MLP_OPS for v in _stats(ops.get(op, ()))]
            row += [
                str(model.heads),
                str(model.kv_heads),
                str(model.hidden),
                str(model.ffn),
                str(model.vocab),
                str(gated),
                str(tokens),
                str(tp),
            ]
            out.writerow(row)
    return path


def write_attention_csv(
    path: Path,
    model: ModelSpec,
    tp: int,
    block_size: int,
    points: Iterable[AttentionTiming],
) -> Path:
    """Write vidur's ``attention.csv``: decode rows fill ``attn_decode``, prefill rows
    ``attn_prefill`` (the other's statistics left empty, as in vidur's files), then the
    key columns.
    """
    header = [f"time_stats.{op}.{s}" for op in ("attn_prefill", "attn_decode") for s in STATS]
    header += ATTENTION_KEYS
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as f:
        out = csv.writer(f, lineterminator="\n")
        out.writerow(header)
        for p in points:
            prefill = p.chunk > 0
            stats = _stats(p.samples_ms)
            row = (stats + [""] * 5) if prefill else ([""] * 5 + stats)
            row += [
                str(model.hidden),
                str(model.heads),
                str(model.kv_heads),
                str(block_size),
                str(tp),
                str(model.max_context),
                str(p.batch),
                str(p.chunk),
                str(p.kv),
                str(prefill),
            ]
            out.writerow(row)
    return path


def _torch() -> Any:
    """PyTorch with a CUDA device (the `profile` extra: pip install gpu-trace[profile]),
    or the one-line refusal.
    """
    try:
        torch = importlib.import_module("torch")
    except ImportError:
        raise GpuTraceError(NEEDS) from None
    if not torch.cuda.is_available():
        raise GpuTraceError(NEEDS)
    return torch


def _timer(torch: Any, repeats: int, warmup: int) -> Any:
    def time_ms(fn: Any) -> list[float]:
        for _ in range(warmup):
            fn()
        samples = []
        for _ in range(repeats):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            samples.append(float(start.elapsed_time(end)))
        return samples

    return time_ms


def _mlp_ops(torch: Any, model: ModelSpec, tp: int, n: int) -> dict[str, Any]:
    """The operators of one layer's token-wise part at ``n`` tokens, as callables on
    random bf16 tensors of one tensor-parallel shard's shapes.
    """
    dev, dt = "cuda", torch.bfloat16
    h, hd = model.hidden, model.head_dim
    q, kv, ffn = model.heads // tp, max(model.kv_heads // tp, 1), model.ffn // tp
    w_qkv = torch.randn(h, (q + 2 * kv) * hd, device=dev, dtype=dt)
    w_o = torch.randn(q * hd, h, device=dev, dtype=dt)
    w_up = torch.randn(h, 2 * ffn, device=dev, dtype=dt)
    w_down = torch.randn(ffn, h, device=dev, dtype=dt)
    norm = torch.ones(h, device=dev, dtype=dt)
    table = torch.randn(model.vocab, h, device=dev, dtype=dt)
    ids = torch.randint(0, model.vocab, (n,), device=dev)
    x = torch.randn(n, h, device=dev, dtype=dt)
    qk = torch.randn(n, (q + kv), hd, device=dev, dtype=dt)
    cos = torch.randn(n, 1, hd // 2, device=dev, dtype=dt)
    sin = torch.randn(n, 1, hd // 2, device=dev, dtype=dt)
    attn = torch.randn(n, q * hd, device=dev, dtype=dt)
    gate_up = torch.randn(n, 2 * ffn, device=dev, dtype=dt)
    act = torch.randn(n, ffn, device=dev, dtype=dt)

    def rms() -> Any:
        return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(dt) * norm

    def rope() -> Any:
        a, b = qk[..., : hd // 2], qk[..., hd // 2 :]
        return torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1)

    return {
        "emb": lambda: torch.nn.functional.embedding(ids, table),
        "input_layernorm": rms,
        "attn_pre_proj": lambda: x @ w_qkv,
        "attn_rope": rope,
        "attn_post_proj": lambda: attn @ w_o,
        "post_attention_layernorm": rms,
        "mlp_up_proj": lambda: x @ w_up,
        "mlp_act": lambda: torch.nn.functional.silu(gate_up[:, :ffn]) * gate_up[:, ffn:],
        "mlp_down_proj": lambda: act @ w_down,
        "add": lambda: x + x,
    }


def _time_mlp(
    torch: Any, model: ModelSpec, tp: int, tokens: Sequence[int], repeats: int, warmup: int
) -> dict[int, dict[str, list[float]]]:
    time_ms = _timer(torch, repeats, warmup)
    return {
        n: {name: time_ms(fn) for name, fn in _mlp_ops(torch, model, tp, n).items()} for n in tokens
    }


def _time_attention(
    torch: Any,
    model: ModelSpec,
    tp: int,
    batches: Sequence[int],
    kv_sizes: Sequence[int],
    chunks: Sequence[int],
    repeats: int,
    warmup: int,
    max_tokens: int,
) -> list[AttentionTiming]:
    dev, dt = "cuda", torch.bfloat16
    hd, q = model.head_dim, model.heads // tp
    sdpa = torch.nn.functional.scaled_dot_product_attention
    time_ms = _timer(torch, repeats, warmup)
    points: list[AttentionTiming] = []
    for b in batches:
        for length in kv_sizes:
            if length == 0 or b * length > max_tokens:
                continue
            qd = torch.randn(b, q, 1, hd, device=dev, dtype=dt)
            kd = torch.randn(b, q, length + 1, hd, device=dev, dtype=dt)
            samples = time_ms(lambda qd=qd, kd=kd: sdpa(qd, kd, kd))
            points.append(AttentionTiming(b, 0, length, tuple(samples)))
    for c in chunks:
        for length in kv_sizes:
            if c + length > min(max_tokens, model.max_context):
                continue
            qp = torch.randn(1, q, c, hd, device=dev, dtype=dt)
            kp = torch.randn(1, q, length + c, hd, device=dev, dtype=dt)
            mask = torch.ones(c, length + c, device=dev, dtype=torch.bool).tril(diagonal=length)
            samples = time_ms(lambda qp=qp, kp=kp, mask=mask: sdpa(qp, kp, kp, attn_mask=mask))
            points.append(AttentionTiming(1, c, length, tuple(samples)))
    return points


def measure_profile(
    model: ModelSpec,
    out_dir: str | Path,
    *,
    tp: int = 1,
    tokens: Sequence[int] = DEFAULT_TOKENS,
    batches: Sequence[int] = DEFAULT_BATCHES,
    kv_sizes: Sequence[int] = DEFAULT_KV,
    chunks: Sequence[int] = DEFAULT_CHUNKS,
    block_size: int = 16,
    repeats: int = 5,
    warmup: int = 2,
    max_tokens: int = 1 << 20,
) -> list[Path]:
    """Measure ``model``'s operators on this machine's GPU (one tensor-parallel shard of
    ``tp``) and write ``mlp.csv`` and ``attention.csv`` into ``out_dir``; the paths
    written. Raises :class:`GpuTraceError` (:data:`NEEDS`) without PyTorch and a GPU.
    """
    torch = _torch()
    if tp < 1 or model.heads % tp:
        msg = f"tensor-parallel width {tp} does not divide {model.name}'s {model.heads} heads"
        raise GpuTraceError(msg)
    folder = Path(out_dir)
    with torch.inference_mode():
        mlp = _time_mlp(torch, model, tp, tokens, repeats, warmup)
        attention = _time_attention(
            torch, model, tp, batches, kv_sizes, chunks, repeats, warmup, max_tokens
        )
    return [
        write_mlp_csv(folder / "mlp.csv", model, tp, mlp),
        write_attention_csv(folder / "attention.csv", model, tp, block_size, attention),
    ]
