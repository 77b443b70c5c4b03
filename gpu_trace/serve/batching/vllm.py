"""``vllm``: continuous (iteration-level) batching, prefill first, as vLLM v0 does it
(and as vidur models it).

At each iteration start: swapped-out requests at the queue's head come back first (a
decode iteration, the copy time added); otherwise waiting requests are taken in queue
order while their prompt tokens (those not found in the prefix cache) sum to at most
``max_tokens``, the batch stays within ``max_seqs`` and the KV cache has their blocks;
the first that does not fit stops the scan (no skipping ahead). If any was taken the
iteration is **prefill only** (those prompts, whole; the decoding requests wait);
otherwise it is a decode iteration of the whole batch. A prompt longer than
``max_tokens`` is taken alone when nothing else was (else it would never run).

Two options bring it to vidur's model of vLLM for side-by-side runs: ``padded`` (the batch
costs ``len(batch) x longest prompt`` tokens, not their sum) and ``watermark`` (a new
prompt must leave that share of the KV blocks free).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpu_trace.plugins import PolicyPlugin, option
from gpu_trace.serve.batching.base import QUEUED, resume_swapped

if TYPE_CHECKING:
    from gpu_trace.serve.engine import Engine
    from gpu_trace.serve.replica import Replica


@dataclass(frozen=True)
class VllmConfig:
    """Options of ``--batching vllm`` (``--batch max_tokens=...,max_seqs=...``)."""

    max_tokens: int = option(4096, "Prompt tokens one prefill iteration computes at most.")
    max_seqs: int = option(128, "Requests in the batch at most.")
    padded: bool = option(
        False,
        "Count a prefill batch as len(batch) x its longest prompt against max_tokens "
        "(vidur's vLLM model) instead of the prompts' sum.",
    )
    watermark: float = option(
        0.0, "Share of KV blocks a new prompt must leave free (vLLM / vidur: 0.01)."
    )


class Vllm:
    """Prefill-prioritized continuous batching."""

    Config = VllmConfig
    mixes = False
    """Prefill iterations do not carry decodes."""

    def __init__(self, config: VllmConfig) -> None:
        self.max_tokens = config.max_tokens
        self.max_seqs = config.max_seqs
        self.padded = config.padded
        self.watermark = config.watermark

    def start(self, eng: Engine, rep: Replica, t: float) -> bool:
        """Start ``rep``'s next iteration (prefill if any prompt fits, else decode)."""
        queue = rep.queue
        if not queue:  # nothing to admit: the batch decodes (the common case)
            return eng.run_decode(rep, t)
        if eng.state[queue[0][2]] != QUEUED:  # swapped out, or KV arrived
            back, extra = resume_swapped(eng, rep, self.max_seqs)
            if back:
                return eng.run_decode(rep, t, extra)
        taken: list[tuple[int, int]] = []
        tokens = longest = 0
        keep = int(self.watermark * rep.kv.capacity)
        while queue:
            i = queue[0][2]
            if eng.state[i] != QUEUED:  # a swapped request waits for its turn at the head
                break
            need, hit = eng.admission(rep, i)
            tok = eng.target[i] - hit
            cost = (len(taken) + 1) * max(longest, tok) if self.padded else tokens + tok
            if taken and cost > self.max_tokens:
                break
            if rep.batch() + 1 > self.max_seqs or need > rep.kv.free - (keep if rep.batch() else 0):
                break
            eng.admit(rep, i, t, need, hit)
            taken.append((i, tok))
            tokens, longest = cost, max(longest, tok)
            if tokens >= self.max_tokens:
                break
        if taken:
            eng.run_single(rep, t, taken)
            return True
        return eng.run_decode(rep, t)


PLUGINS = (PolicyPlugin("batching", "vllm", Vllm, rank=10),)
