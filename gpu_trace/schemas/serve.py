"""Serving replay results (issue 30): ``serve_runs`` (one row per run: the config, the
layout and the summary metrics of :mod:`gpu_trace.serve.metrics`), ``serve_requests``
(one row per replayed request: :data:`gpu_trace.serve.result.REQUEST_COLUMNS`) and
``serve_timeseries`` (one row per time bin and replica:
:data:`gpu_trace.serve.result.TIMESERIES_COLUMNS`).

Keyed as the replay tables are: ``source`` = the replayed source, ``dataset`` = the run
id, so re-running the same run id replaces it and runs of one trace sit side by side;
the trace's own dataset (``conv``, ``conversation``) is ``trace_dataset``. The column
lists here and the engine's contract in :mod:`gpu_trace.serve.result` are checked
against each other by the tests (names, order and types).
"""

from __future__ import annotations

import pyarrow as pa

from gpu_trace.schemas.model import TS_UTC, Column, Table, source_columns

_RUN = Column("run_id", pa.string(), "Serving run identifier (= dataset).", nullable=False)
_TRACE = Column(
    "trace_dataset",
    pa.string(),
    "The replayed dataset of the source (requests.dataset, e.g. conv).",
)


def _latency(name: str, what: str) -> tuple[Column, ...]:
    """Mean and percentiles of one per-request latency (linear interpolation between
    order statistics, numpy's and polars' ``linear``).
    """
    return (
        Column(f"{name}_mean_s", pa.float64(), f"Mean {what} of the finished requests.", "s"),
        Column(f"{name}_p50_s", pa.float64(), f"Median {what}.", unit="s"),
        Column(f"{name}_p90_s", pa.float64(), f"90th percentile {what}.", unit="s"),
        Column(f"{name}_p99_s", pa.float64(), f"99th percentile {what}.", unit="s"),
    )


SERVE_RUNS = Table(
    name="serve_runs",
    version=1,
    description=(
        "One row per serving replay run: model, hardware, layout, scheduler and router, "
        "and the summary metrics (latency percentiles, SLO attainment, goodput, "
        "throughput, GPU time, energy, cost)."
    ),
    sort_by=("run_id",),
    columns=(
        *source_columns(),
        _RUN,
        _TRACE,
        Column("config_json", pa.string(), "The run's ServeConfig as JSON (every field)."),
        Column("model", pa.string(), "Model served (the model table).", nullable=False),
        Column("gpu", pa.string(), "GPU kind (the GPU table).", nullable=False),
        Column("tp", pa.int64(), "Tensor-parallel width: GPUs per replica.", unit="gpu"),
        Column(
            "replicas",
            pa.int64(),
            "Replicas at the start (prefill + decode when disaggregated; the autoscaler's "
            "minimum when autoscaling).",
            unit="count",
        ),
        Column("replicas_max", pa.int64(), "Most replicas that ever existed.", unit="count"),
        Column("batching", pa.string(), "Replica scheduler (plugin kind batching)."),
        Column("router", pa.string(), "Router (plugin kind router)."),
        Column("latency_model", pa.string(), "Latency model: roofline (not measured) or profile."),
        Column("disaggregate", pa.string(), "Prefill:decode pools (P:D), or 0."),
        Column("slo_ttft_s", pa.float64(), "SLO target on time to first token.", unit="s"),
        Column("slo_tpot_s", pa.float64(), "SLO target on time per output token.", unit="s"),
        Column("slo_e2e_s", pa.float64(), "SLO target on end-to-end latency, if set.", "s"),
        Column("requests", pa.int64(), "Requests replayed (the window).", unit="count"),
        Column("requests_finished", pa.int64(), "Requests that got every token.", "count"),
        Column("requests_dropped", pa.int64(), "Requests dropped (see drop_reasons).", "count"),
        Column(
            "drop_reasons",
            pa.string(),
            'JSON {reason: requests} of the dropped requests, e.g. {"needs 9 KV blocks, '
            'the replica holds 8": 3}.',
        ),
        *_latency("ttft", "time to first token"),
        *_latency("tpot", "time per output token (requests of one token excluded)"),
        *_latency("e2e", "end-to-end latency"),
        *_latency("queue", "queueing delay (arrival -> first prefill iteration)"),
        Column(
            "slo_attainment_ratio",
            pa.float64(),
            "Share of the requests meeting every SLO target (dropped requests miss; a "
            "one-token request meets the TPOT target).",
            unit="fraction",
        ),
        Column(
            "goodput_rps",
            pa.float64(),
            "Requests per second meeting every SLO target (DistServe's goodput): those "
            "requests / horizon_s.",
            unit="req/s",
        ),
        Column(
            "tokens_per_second",
            pa.float64(),
            "Prompt + output tokens of the finished requests / horizon_s.",
            unit="tokens/s",
        ),
        Column(
            "output_tokens_per_second",
            pa.float64(),
            "Output tokens of the finished requests / horizon_s.",
            unit="tokens/s",
        ),
        Column(
            "prefix_hit_ratio",
            pa.float64(),
            "Prompt tokens found in the prefix cache / prompt tokens, finished requests.",
            unit="fraction",
        ),
        Column("preemptions", pa.int64(), "KV-cache preemptions over the run.", unit="count"),
        Column("horizon_s", pa.float64(), "Simulated span: first arrival -> last event.", "s"),
        Column("gpus", pa.int64(), "GPUs of the replicas at the start (tp x replicas).", "gpu"),
        Column(
            "gpu_seconds",
            pa.float64(),
            "GPU-seconds: GPUs x (down - start) summed over replicas, cold starts included.",
            unit="gpu_s",
        ),
        Column(
            "utilization_ratio",
            pa.float64(),
            "Busy replica-seconds (in iterations) / replica-seconds up.",
            unit="fraction",
        ),
        Column(
            "energy_kwh",
            pa.float64(),
            "GPU energy from the two-level power model: busy seconds at TDP, the rest of "
            "the replica's life at idle power, times its GPUs.",
            unit="kWh",
        ),
        Column(
            "energy_per_token_j",
            pa.float64(),
            "energy / (prompt + output tokens of the finished requests).",
            unit="J",
        ),
        Column("usd_per_gpu_h", pa.float64(), "Price used for the cost.", unit="USD/gpu_h"),
        Column("cost_usd", pa.float64(), "GPU-hours x price.", unit="USD"),
        Column(
            "cost_per_mtok_usd",
            pa.float64(),
            "cost_usd / (prompt + output tokens of the finished requests) x 1e6.",
            unit="USD",
        ),
        Column(
            "notes",
            pa.string(),
            "Sanity notes on the run, one per line (every request dropped, an idle "
            "cluster, too few requests for percentiles, a latency model not measured).",
        ),
        Column("created_at", TS_UTC, "When the run was written (UTC)."),
    ),
)

SERVE_REQUESTS = Table(
    name="serve_requests",
    version=1,
    description="One row per request of a serving replay run: where and when it ran, its latencies.",
    sort_by=("run_id", "arrival_s", "request_id"),
    columns=(
        *source_columns(),
        _RUN,
        _TRACE,
        Column(
            "request_id",
            pa.int64(),
            "The store's requests.request_id (join key back to the trace).",
            unit="id",
            nullable=False,
        ),
        Column(
            "arrival_s",
            pa.float64(),
            "Arrival, seconds since the replayed window's first arrival.",
            unit="s",
        ),
        Column("input_tokens", pa.int64(), "Prompt tokens.", unit="tokens"),
        Column("output_tokens", pa.int64(), "Output tokens.", unit="tokens"),
        Column(
            "replica",
            pa.int32(),
            "Replica that produced the tokens (decode pool when split); -1 dropped.",
            unit="id",
        ),
        Column("prefill_replica", pa.int32(), "Replica that computed the prompt.", unit="id"),
        Column(
            "prefix_hit_tokens",
            pa.int64(),
            "Prompt tokens found in the prefix cache at admission.",
            unit="tokens",
        ),
        Column("queue_s", pa.float64(), "Arrival -> first iteration computing its prompt.", "s"),
        Column("ttft_s", pa.float64(), "Arrival -> first output token.", unit="s"),
        Column(
            "tpot_s",
            pa.float64(),
            "(finish - first token) / (output_tokens - 1); null for one token.",
            unit="s",
        ),
        Column("e2e_s", pa.float64(), "Arrival -> last token.", unit="s"),
        Column("finish_s", pa.float64(), "Time of the last token; null when dropped.", "s"),
        Column(
            "kv_transfer_s",
            pa.float64(),
            "Prefill -> decode pool KV transfer time (0 unless disaggregated).",
            unit="s",
        ),
        Column("preemptions", pa.int32(), "Times evicted from the KV cache.", unit="count"),
        Column("status", pa.string(), "finished or dropped.", nullable=False),
        Column("drop_reason", pa.string(), "Why it was dropped; null when finished."),
    ),
)

SERVE_TIMESERIES = Table(
    name="serve_timeseries",
    version=1,
    description=(
        "What each replica of a serving replay run did per time bin: busy time, tokens, "
        "batch and queue sizes, KV-cache occupancy."
    ),
    sort_by=("run_id", "time_s", "replica"),
    columns=(
        *source_columns(),
        _RUN,
        Column("time_s", pa.float64(), "Bin start, seconds from the first arrival.", "s"),
        Column("replica", pa.int32(), "Replica index.", unit="id"),
        Column("role", pa.string(), "mixed, prefill or decode."),
        Column("up", pa.bool_(), "Serving during the bin (false: not started, cold, drained)."),
        Column("busy_s", pa.float64(), "Seconds of the bin spent in iterations.", unit="s"),
        Column("iterations", pa.int64(), "Iterations that ended in the bin.", unit="count"),
        Column("prefill_tokens", pa.int64(), "Prompt tokens computed in the bin.", "tokens"),
        Column("decode_tokens", pa.int64(), "Output tokens produced in the bin.", "tokens"),
        Column("running", pa.int32(), "Requests in the batch at the bin's end.", "count"),
        Column("waiting", pa.int32(), "Requests queued at the replica at the bin's end.", "count"),
        Column("kv_used_blocks", pa.int64(), "KV blocks in use at the bin's end.", "blocks"),
        Column("kv_capacity_blocks", pa.int64(), "KV blocks the replica holds.", "blocks"),
    ),
)
