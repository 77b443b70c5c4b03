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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpu_trace.plugins import PolicyPlugin, option
from gpu_trace.serve.batching.base import resume_swapped

if TYPE_CHECKING:
    from gpu_trace.serve.engine import Engine
    from gpu_trace.serve.replica import Replica


@dataclass(frozen=True)
class VllmConfig:
    """Options of ``--batching vllm`` (``--batch max_tokens=...,max_seqs=...``)."""

    max_tokens: int = option(4096, "Prompt tokens one prefill iteration computes at most.")
    max_seqs: int = option(128, "Requests in the batch at most.")


class Vllm:
    """Prefill-prioritized continuous batching."""

    Config = VllmConfig
    mixes = False
    """Prefill iterations do not carry decodes."""

    def __init__(self, config: VllmConfig) -> None:
        self.max_tokens = config.max_tokens
        self.max_seqs = config.max_seqs

    def start(self, eng: Engine, rep: Replica, t: float) -> bool:
        """Start ``rep``'s next iteration (prefill if any prompt fits, else decode)."""
        back, extra = resume_swapped(eng, rep, self.max_seqs)
        if back:
            return eng.run_decode(rep, t, extra)
        taken: list[tuple[int, int]] = []
        tokens = 0
        queue = rep.queue
        while queue:
            i = queue[0][2]
            if eng.state[i] != 1:  # a swapped request waits for its turn at the head
                break
            need, hit = eng.admission(rep, i)
            tok = eng.target[i] - hit
            if taken and tokens + tok > self.max_tokens:
                break
            if rep.batch() + 1 > self.max_seqs or need > rep.kv.free:
                break
            eng.admit(rep, i, t, need, hit)
            taken.append((i, tok))
            tokens += tok
            if tokens >= self.max_tokens:
                break
        if taken:
            eng.run_single(rep, t, taken)
            return True
        return eng.run_decode(rep, t)


PLUGINS = (PolicyPlugin("batching", "vllm", Vllm, rank=10),)
