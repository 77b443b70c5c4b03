"""The note on requests a model's context cannot hold (Llama-2-7b: max_position_embeddings
4096 in its Hugging Face config.json)."""

from __future__ import annotations

import datetime as dt

import polars as pl

from gpu_trace.serve.hardware import model
from gpu_trace.serve.sanity import beyond_context
from gpu_trace.serve.workload import from_frames


def _requests(inputs: list[int], outputs: list[int]) -> pl.DataFrame:
    t0 = dt.datetime(2024, 1, 1)
    return pl.DataFrame(
        {
            "request_id": list(range(len(inputs))),
            "arrival_time": [t0 + dt.timedelta(seconds=k) for k in range(len(inputs))],
            "input_tokens": inputs,
            "output_tokens": outputs,
        }
    )


def test_requests_beyond_the_context_are_counted() -> None:
    # 4000 + 96 = 4096 fits exactly; 4000 + 97 and 12,000 + 1 do not: 2 of 4.
    reqs = from_frames(_requests([4000, 4000, 12_000, 10], [96, 97, 1, 1]))
    (note,) = beyond_context(reqs, model("llama-2-7b"))
    assert note.startswith("2 of 4 requests (50.0%) need more than llama-2-7b's 4,096-token")


def test_no_note_when_every_request_fits() -> None:
    reqs = from_frames(_requests([4000, 10], [96, 1]))
    assert beyond_context(reqs, model("llama-2-7b")) == []
