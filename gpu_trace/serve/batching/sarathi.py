"""``sarathi``: chunked prefill with a token budget per iteration (Sarathi-Serve).

Each iteration: every decoding request produces one token (1 budget token each; KV
blocks for them first, preempting the last-arrived request when they do not fit), then
prompt chunks fill the rest of the budget ``chunk - decodes``: the partly prefilled
requests first (in the order they were admitted), then waiting requests in queue order
while the batch stays within ``max_seqs`` and the KV cache has their prompt's blocks
(the first that does not fit stops the scan). A request's first token comes at the end
of the iteration that computes its prompt's last chunk. With no chunk to compute, the
iteration is decode-only (and a run of them is jumped over).
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
class SarathiConfig:
    """Options of ``--batching sarathi`` (``--batch chunk=...,max_seqs=...``)."""

    chunk: int = option(512, "Token budget per iteration, decodes included.")
    max_seqs: int = option(128, "Requests in the batch at most.")
    watermark: float = option(
        0.0, "Share of KV blocks a new prompt must leave free (vLLM / vidur: 0.01)."
    )


class Sarathi:
    """Chunked prefill, decodes first, stall-free."""

    Config = SarathiConfig
    mixes = True
    """Iterations carry the batch's decodes and prompt chunks together."""

    def __init__(self, config: SarathiConfig) -> None:
        self.chunk = config.chunk
        self.max_seqs = config.max_seqs
        self.watermark = config.watermark

    def start(self, eng: Engine, rep: Replica, t: float) -> bool:
        """Start ``rep``'s next iteration: decodes, then chunks within the budget."""
        _, extra = resume_swapped(eng, rep, self.max_seqs)
        if rep.running:
            extra += eng.make_room(rep, t)
        reserved = eng.reserve_step(rep)
        budget = self.chunk - len(rep.running)
        chunks: list[tuple[int, int]] = []
        for i in rep.prefilling:
            if budget <= 0:
                break
            tok = min(eng.target[i] - eng.computed[i], budget)
            chunks.append((i, tok))
            budget -= tok
        queue = rep.queue
        keep = int(self.watermark * rep.kv.capacity)
        while budget > 0 and queue:
            i = queue[0][2]
            if eng.state[i] != QUEUED:
                break
            need, hit = eng.admission(rep, i)
            if rep.batch() + 1 > self.max_seqs or need > rep.kv.free - (keep if rep.batch() else 0):
                break
            eng.admit(rep, i, t, need, hit)
            tok = min(eng.target[i] - hit, budget)
            chunks.append((i, tok))
            budget -= tok
        if chunks:
            eng.run_single(rep, t, chunks, extra, reserved)
            return True
        rep.kv.used -= reserved
        return eng.run_decode(rep, t, extra)


PLUGINS = (PolicyPlugin("batching", "sarathi", Sarathi, rank=20),)
