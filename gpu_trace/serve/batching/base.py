"""What the replica schedulers share: bringing swapped-out requests (and, on a decode
replica of a disaggregated cluster, requests whose KV arrived from a prefill replica)
into the batch first.

vLLM resumes swapped-out requests before it admits new prompts (they already hold
tokens); a swap-in copies their blocks back over PCIe, and that time is added to the
iteration that resumes them, a decode iteration.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpu_trace.serve.engine import KV_ARRIVED, QUEUED, SWAPPED

__all__ = ["KV_ARRIVED", "QUEUED", "SWAPPED", "resume_swapped"]

if TYPE_CHECKING:
    from gpu_trace.serve.engine import Engine
    from gpu_trace.serve.replica import Replica


def resume_swapped(eng: Engine, rep: Replica, max_seqs: int) -> tuple[bool, float]:
    """Swap in requests at the queue's head while their blocks, and the block their next
    token needs (vLLM counts that slot too), fit beside the blocks the batch takes for
    this step, and the batch has room: (whether any came back, seconds of copying).
    """
    extra = 0.0
    back = False
    while rep.queue:
        i = rep.queue[0][2]
        if eng.state[i] != SWAPPED and eng.state[i] != KV_ARRIVED:
            break
        slot = 1 if (eng.prompt[i] + eng.generated[i] - 1) % eng.block == 0 else 0
        batch_needs = rep.demand.at(rep.step)  # the batch's own blocks for this step
        if rep.batch() + 1 > max_seqs or eng.held[i] + slot + batch_needs > rep.kv.free:
            break
        extra += eng.swap_in(rep, i)
        back = True
    return back, extra
