"""What one serving replay produces: :class:`ServeResult`, the contract between the
engine (which fills it), the metrics (:mod:`gpu_trace.serve.metrics`), the store tables
``serve_requests`` / ``serve_timeseries`` / ``serve_runs`` and the report.

The column lists below are the contract: the engine's frames have exactly these columns
(in this order, these dtypes); the store adds the run id, source and dataset.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

REQUEST_COLUMNS: dict[str, Any] = {
    "request_id": pl.Int64,  # the store's requests.request_id
    "arrival_s": pl.Float64,  # seconds since the replayed window's first arrival
    "input_tokens": pl.Int64,
    "output_tokens": pl.Int64,
    "replica": pl.Int32,  # the replica that produced the tokens (decode pool when split); -1 dropped
    "prefill_replica": pl.Int32,  # the replica that computed the prompt (= replica unless split)
    "prefix_hit_tokens": pl.Int64,  # prompt tokens found in the prefix cache at admission
    "queue_s": pl.Float64,  # arrival -> first iteration that computes any of its prompt
    "ttft_s": pl.Float64,  # arrival -> first output token (end of the prefill's last iteration)
    "tpot_s": pl.Float64,  # (finish - first token) / (output_tokens - 1); null for 1 token
    "e2e_s": pl.Float64,  # arrival -> last token
    "finish_s": pl.Float64,  # time of the last token (null when dropped)
    "kv_transfer_s": pl.Float64,  # prefill -> decode pool KV transfer (0 unless split)
    "preemptions": pl.Int32,  # times evicted from the KV cache (recomputed or swapped)
    "status": pl.String,  # finished | dropped
    "drop_reason": pl.String,  # null when finished (e.g. "prompt exceeds KV capacity")
}
"""One row per request of the replayed window, in arrival order."""

TIMESERIES_COLUMNS: dict[str, Any] = {
    "time_s": pl.Float64,  # bin start
    "replica": pl.Int32,
    "role": pl.String,  # mixed | prefill | decode
    "up": pl.Boolean,  # serving during the bin (false: not started, cold start, scaled down)
    "busy_s": pl.Float64,  # seconds of the bin spent in iterations
    "iterations": pl.Int64,
    "prefill_tokens": pl.Int64,  # prompt tokens computed in the bin
    "decode_tokens": pl.Int64,  # output tokens produced in the bin
    "running": pl.Int32,  # requests in the batch at the bin's end
    "waiting": pl.Int32,  # requests queued at the replica at the bin's end
    "kv_used_blocks": pl.Int64,  # at the bin's end
    "kv_capacity_blocks": pl.Int64,
}
"""One row per (bin, replica): what each replica did, for utilisation, KV occupancy and
the autoscaler's trace. Bins of ``ServeConfig.bin_s`` from 0 to the last finish."""

REPLICA_COLUMNS: dict[str, Any] = {
    "replica": pl.Int32,
    "role": pl.String,
    "gpus": pl.Int32,  # tensor-parallel width
    "start_s": pl.Float64,  # asked for: 0, or the autoscaler's tick (GPU time counts from here)
    "up_s": pl.Float64,  # first time it could serve (after a cold start)
    "down_s": pl.Float64,  # when it stopped (the run's end if never scaled down)
    "busy_s": pl.Float64,
    "iterations": pl.Int64,
    "requests": pl.Int64,  # requests it finished (decode side when split)
    "kv_capacity_blocks": pl.Int64,
}
"""One row per replica that ever existed (autoscaling adds rows)."""


def empty(columns: dict[str, Any]) -> pl.DataFrame:
    """A zero-row frame with the contract's columns."""
    return pl.DataFrame(schema=columns)


@dataclass
class ServeResult:
    """A run's frames and the facts the metrics need (``horizon_s``: the last event)."""

    requests: pl.DataFrame
    timeseries: pl.DataFrame
    replicas: pl.DataFrame
    horizon_s: float
    notes: list[str] = field(default_factory=list)
    """Plain-language caveats the run found (every request dropped, a replica never
    used, KV capacity below one prompt): shown with the summary, never hidden."""

    def check(self) -> None:
        """Raise AssertionError when a frame breaks the contract (tests call it)."""
        for frame, cols in (
            (self.requests, REQUEST_COLUMNS),
            (self.timeseries, TIMESERIES_COLUMNS),
            (self.replicas, REPLICA_COLUMNS),
        ):
            got = dict(frame.schema)
            assert got == cols, f"columns {got} != contract {cols}"
