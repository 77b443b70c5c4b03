"""A profile directory in vidur's format for the side by side with vidur (issue 30).

vidur (microsoft/vidur, MIT) predicts an iteration's time from profile tables measured
on real GPUs: ``data/profiling/compute/{DEVICE}/{MODEL}/mlp.csv`` (the linear layers,
norms, activation, rope) and ``.../attention.csv`` (attention kernels), plus
``network/{NETWORK_DEVICE}/all_reduce.csv`` for tensor parallelism. Its repository keeps
the attention tables as Git LFS objects (10 MB each); the public mirror this project
reads has the pointers only, so no measured ``attention.csv`` is available here.

:func:`write_profile` therefore makes a profile directory for one model on one GPU:
vidur's own measured ``mlp.csv`` (copied from the vidur checkout) and a generated
``attention.csv`` in the column layout vidur's profiler writes
(``vidur/profiling/attention/attention_wrapper.py:143-154`` at vidur 7d47513: ``n_embd,
n_q_head, n_kv_head, block_size, num_tensor_parallel_workers, max_model_len, batch_size,
prefill_chunk_size, kv_cache_size, is_prefill, attention_backend`` and the flattened
``time_stats.<op>.median`` columns, in milliseconds). Both simulators read the same
directory, so the side by side compares the simulators on one profile; the generated
attention times are a documented roofline, not a measurement:

- prefill chunk of ``c`` tokens after ``k`` cached tokens, on one tensor-parallel shard:
  ``4 c (k + (c + 1) / 2) head_dim q_heads / tp`` FLOPs at ``PREFILL_EFFICIENCY`` of the
  GPU's dense fp16 peak, plus ``OVERHEAD_MS``;
- decode of ``b`` requests of ``k`` cached tokens: the K and V bytes read, ``b k 2
  head_dim kv_heads / tp x 2`` bytes at ``DECODE_EFFICIENCY`` of HBM bandwidth, plus
  ``OVERHEAD_MS``;
- KV-cache save of ``n`` tokens: ``n 2 head_dim kv_heads / tp x 2`` bytes written, at HBM
  bandwidth, plus ``OVERHEAD_MS``.

Run ``python -m bench.serve_vidur_profile VIDUR_SRC OUT_DIR a100 meta-llama/Llama-2-7b-hf 1``.
"""

from __future__ import annotations

import csv
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from gpu_trace.serve.measure import ATTENTION_KEYS

PREFILL_EFFICIENCY = 0.5
DECODE_EFFICIENCY = 0.7
OVERHEAD_MS = 0.01
BLOCK_SIZE = 16
"""vidur's default ``block_size`` (vidur/config/config.py:261-264); its predictor keeps
only attention rows of the run's block size (sklearn_execution_time_predictor.py:159)."""
MAX_SEQ = 4096


@dataclass(frozen=True)
class Attn:
    """The attention shape vidur keys its attention table by."""

    n_embd: int
    n_q_head: int
    n_kv_head: int


MODELS = {
    # vidur/config/model_config.py:69-89 (the Hugging Face configs of these models)
    "meta-llama/Llama-2-7b-hf": Attn(4096, 32, 32),
    "meta-llama/Llama-2-70b-hf": Attn(8192, 64, 8),
    "meta-llama/Meta-Llama-3-8B": Attn(4096, 32, 8),
}

GPUS = {
    # dense fp16 tensor FLOP/s and HBM bytes/s, NVIDIA datasheets (A100 SXM 80 GB, H100 SXM)
    "a100": (312e12, 2.039e12),
    "h100": (989e12, 3.35e12),
}

COLUMNS = (
    *ATTENTION_KEYS,
    "attention_backend",
    "time_stats.attn_prefill.median",
    "time_stats.attn_decode.median",
    "time_stats.attn_kv_cache_save.median",
)


def _chunks() -> list[int]:
    powers = [2**k for k in range(13)]
    return sorted({*powers, *range(128, MAX_SEQ + 1, 128)})


def attention_rows(model: str, device: str, tp: int) -> list[dict[str, object]]:
    """The generated attention table of ``model`` on ``device`` at tensor-parallel ``tp``."""
    attn = MODELS[model]
    flops, hbm = GPUS[device]
    head_dim = attn.n_embd // attn.n_q_head
    q_heads = attn.n_q_head / tp
    kv_heads = max(attn.n_kv_head / tp, 1.0)
    kv_bytes_per_token = 2 * head_dim * kv_heads * 2  # K and V, fp16

    def save_ms(tokens: int) -> float:
        return OVERHEAD_MS + 1e3 * tokens * kv_bytes_per_token / hbm

    base = {
        "n_embd": attn.n_embd,
        "n_q_head": attn.n_q_head,
        "n_kv_head": attn.n_kv_head,
        "block_size": BLOCK_SIZE,
        "num_tensor_parallel_workers": tp,
        "max_model_len": MAX_SEQ,
        "attention_backend": "AttentionBackend.GENERATED_ROOFLINE",
    }
    rows: list[dict[str, object]] = []
    for c in _chunks():
        for k in range(0, MAX_SEQ - c + 1, 256):
            work = 4 * c * (k + (c + 1) / 2) * head_dim * q_heads
            rows.append(
                base
                | {
                    "batch_size": 1,
                    "prefill_chunk_size": c,
                    "kv_cache_size": k,
                    "is_prefill": True,
                    "time_stats.attn_prefill.median": OVERHEAD_MS
                    + 1e3 * work / (flops * PREFILL_EFFICIENCY),
                    "time_stats.attn_decode.median": "",
                    "time_stats.attn_kv_cache_save.median": save_ms(c),
                }
            )
    for b in (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 80, 96, 112, 128):
        for k in (16, 32, 64, 128, *range(256, MAX_SEQ + 1, 256)):
            read = b * k * kv_bytes_per_token
            rows.append(
                base
                | {
                    "batch_size": b,
                    "prefill_chunk_size": 0,
                    "kv_cache_size": k,
                    "is_prefill": False,
                    "time_stats.attn_prefill.median": "",
                    "time_stats.attn_decode.median": OVERHEAD_MS
                    + 1e3 * read / (hbm * DECODE_EFFICIENCY),
                    "time_stats.attn_kv_cache_save.median": save_ms(b),
                }
            )
    return rows


def write_profile(
    vidur_src: Path, out: Path, device: str, model: str, tp: int, network: str | None = None
) -> Path:
    """``out/compute/{device}/{model}/`` with vidur's ``mlp.csv``, a generated
    ``attention.csv`` and, given ``network``, vidur's ``network/{network}/all_reduce.csv``
    (the one its run reads for tensor parallelism; our ``profile`` model takes an
    ``all_reduce.csv`` beside ``mlp.csv`` first); returns that folder.
    """
    folder = out / "compute" / device / model
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(
        vidur_src / "data" / "profiling" / "compute" / device / model / "mlp.csv",
        folder / "mlp.csv",
    )
    with (folder / "attention.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(attention_rows(model, device, tp))
    if network:
        shutil.copyfile(
            vidur_src / "data" / "profiling" / "network" / network / "all_reduce.csv",
            folder / "all_reduce.csv",
        )
    return folder


if __name__ == "__main__":
    src, dest, dev, name, width = sys.argv[1:6]
    print(write_profile(Path(src), Path(dest), dev, name, int(width)))
