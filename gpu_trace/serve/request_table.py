"""The per-request columns of a serving replay, declared once with the replay kernel's
:mod:`gpu_trace.replay.kernel.job_table` (``Column``, ``declared``, ``fill``,
``result_arrays``), as docs/replay.md "Seams for a second simulator" promises.

Static columns come from the :class:`~gpu_trace.serve.workload.RequestSet` (tuples: the
event loop reads them by index millions of times); outcome columns are lists the engine
writes; those naming a ``result`` become the per-request result arrays. Engine-only
bookkeeping (tokens generated, the prompt the current admission computes, KV blocks a
prefix hit gave) is declared here too, without a result, so one line adds a column.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Annotated, Any, Protocol

from gpu_trace.replay.kernel.job_table import DECLARED, Column

INF = math.inf


def _static(doc: str, name: str) -> Column:
    def read(requests: Any, _spec: Any) -> Sequence[Any]:
        return tuple(getattr(requests, name).tolist())

    return Column("static", doc, source=read)


def _out(doc: str, initial: float = 0.0, result: str | None = None, dtype: str = "int64") -> Column:
    return Column("outcome", doc, initial=initial, result=result, dtype=dtype)


class RequestColumns(Protocol):
    """One value per request (request ``i`` is index ``i`` of the RequestSet)."""

    __slots__ = ()

    arrival: Annotated[Sequence[float], _static("Arrival time (s).", "arrival_s")] = DECLARED
    prompt: Annotated[Sequence[int], _static("Prompt tokens.", "input_tokens")] = DECLARED
    output: Annotated[Sequence[int], _static("Output tokens.", "output_tokens")] = DECLARED
    first_sched: Annotated[
        list[float],
        _out("Start of the first iteration computing its prompt.", INF, "first_sched", "float64"),
    ] = DECLARED
    first_token: Annotated[
        list[float], _out("End of the iteration giving token 1.", INF, "first_token", "float64")
    ] = DECLARED
    finish: Annotated[
        list[float], _out("End of the iteration giving its last token.", INF, "finish", "float64")
    ] = DECLARED
    replica: Annotated[
        list[int], _out("Replica that produced the tokens (-1 dropped).", -1, "replica", "int32")
    ] = DECLARED
    prefill_replica: Annotated[
        list[int], _out("Replica that computed the prompt.", -1, "prefill_replica", "int32")
    ] = DECLARED
    hit_tokens: Annotated[
        list[int], _out("Prompt tokens found in the prefix cache.", 0, "prefix_hit_tokens")
    ] = DECLARED
    kv_transfer: Annotated[
        list[float], _out("Prefill -> decode KV transfer (s).", 0.0, "kv_transfer_s", "float64")
    ] = DECLARED
    preemptions: Annotated[
        list[int], _out("Times evicted from the KV cache.", 0, "preemptions", "int32")
    ] = DECLARED
    state: Annotated[
        list[int], _out("0 new, 1 queued, 2 prefilling, 3 decoding, 4 done, 5 dropped, 6 swapped.")
    ] = DECLARED
    generated: Annotated[list[int], _out("Output tokens produced so far.")] = DECLARED
    target: Annotated[
        list[int], _out("Prompt tokens of the current admission (prompt + tokens kept).")
    ] = DECLARED
    computed: Annotated[list[int], _out("Of those, computed (or found cached) so far.")] = DECLARED
    held: Annotated[list[int], _out("KV blocks held while prefilling / swapped out.")] = DECLARED
    lbase: Annotated[
        list[int], _out("While decoding: KV length minus the replica's decode step.")
    ] = DECLARED
    fin_step: Annotated[list[int], _out("While decoding: the step of its last token.")] = DECLARED
    at: Annotated[list[int], _out("The replica it is queued or running on.", -1)] = DECLARED
