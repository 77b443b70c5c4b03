"""A small store holding two serving-replay runs, written directly as the contract
(gpu_trace/serve/result.py REQUEST_COLUMNS, TIMESERIES_COLUMNS + run_id, source,
dataset = the run id, trace_dataset; serve_runs as gpu_trace/schemas/serve.py of the
serve-cli branch names its columns), and the figures worked out by hand from it, for
the report tests (tests/test_serve_report*.py).

Where the store's writer knows the serve tables, the rows go through it (so they are
checked against the real schema); else they are written as Parquet files into a new
store generation (the store's own commit) in the layout every table has:
``<table>/source=<source>/<run id>.parquet``.

Both runs replay azure-llm/conv on 2 replicas, bins of 10 s.

Run ``rr`` (round-robin; SLO TTFT <= 2 s, TPOT <= 100 ms; every summary figure stored):

====  =======  ===  =====  =====  =====  ======  ========  ================================
id    arrival  out  TTFT   TPOT   e2e    finish  status    met every target?
====  =======  ===  =====  =====  =====  ======  ========  ================================
0     0        5    0.5    0.05   0.7    0.7     finished  yes
1     2        1    1.0    null   1.0    3.0     finished  yes (one token: no TPOT, meets it)
2     12       3    3.0    0.05   3.1    15.1    finished  no (TTFT 3.0 > 2)
3     14       11   1.5    0.2    3.5    17.5    finished  no (TPOT 0.2 > 0.1)
4     15       9    null   null   null   null    dropped   no (dropped counts as missing)
====  =======  ===  =====  =====  =====  ======  ========  ================================

attainment 2/5 = 40 %; horizon 17.5 s (the last event), goodput 2 / 17.5 = 0.114 req/s.
Percentiles, linear between order statistics (rank q x (n - 1)), finished requests:
TTFT 0.5, 1.0, 1.5, 3.0: p50 1.25 s, p90 (rank 2.7) 1.5 + 0.7 x 1.5 = 2.55 s, p99 (rank
2.97) 1.5 + 0.97 x 1.5 = 2.955 s; TPOT 0.05, 0.05, 0.2: p50 50 ms, p90 (rank 1.8) 0.05 +
0.8 x 0.15 = 170 ms; e2e 0.7, 1.0, 3.1, 3.5: p50 2.05 s, p90 (rank 2.7) 3.1 + 0.7 x 0.4
= 3.38 s. Utilisation (busy 4 + 1 + 6 + 8) / (2 replicas x 20 s) = 47.5 %.
Arrival bins: [0, 10) 2 requests, 2 met (100 %); [10, 20) 3, 0 met (0 %).

Run ``lt`` (least-tokens; SLO TTFT <= 2 s, TPOT <= 100 ms, e2e <= 1.5 s; it stored its
targets and GPU-seconds only, so the report computes the rest from the requests):

====  =======  ===  =====  =====  =====  ======  ====================================
id    arrival  out  TTFT   TPOT   e2e    finish  met every target?
====  =======  ===  =====  =====  =====  ======  ====================================
0     0        2    0.4    0.1    0.5    0.5     yes (TPOT = its target)
1     5        1    2.0    null   2.0    7.0     no (TTFT = its target, e2e 2.0 > 1.5)
2     11       4    2.5    0.05   2.65   13.65   no
====  =======  ===  =====  =====  =====  ======  ====================================

attainment 1/3 = 33.3 %; no horizon stored: the last finish 13.65 s, goodput 1 / 13.65
= 0.073 req/s; TTFT 0.4, 2.0, 2.5: p50 2.0 s, p90 (rank 1.8) 2.0 + 0.8 x 0.5 = 2.4 s,
p99 (rank 1.98) 2.0 + 0.98 x 0.5 = 2.49 s; TPOT 0.05, 0.1: p50 75 ms, p90 (rank 0.9)
0.05 + 0.9 x 0.05 = 95 ms; e2e 0.5, 2.0, 2.65: p50 2.0 s, p90 (rank 1.8) 2.0 + 0.8 x
0.65 = 2.52 s.

Timeseries (both runs, 2 replicas, bins 0 and 10 s): busy_s replica 0: 4, 6; replica
1: 1, 8 -> utilisation 40 %, 60 %; 10 %, 80 %. KV used / capacity (100 blocks): replica
0: 10, 30; replica 1: 5, 50 -> 10 %, 30 %; 5 %, 50 %. Waiting summed: 0, 1; running: 2, 2.
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path, PurePosixPath
from typing import Any

import polars as pl

from gpu_trace.schemas import TABLES
from gpu_trace.serve.result import REQUEST_COLUMNS, TIMESERIES_COLUMNS
from gpu_trace.store.generations import commit_generation
from gpu_trace.store.parquet import StoreTransaction, ensure_layout

SOURCE = "azure-llm"
DATASET = "conv"

RUN_SCHEMA: dict[str, Any] = {
    "source": pl.String,
    "dataset": pl.String,
    "run_id": pl.String,
    "trace_dataset": pl.String,
    "config_json": pl.String,
    "model": pl.String,
    "gpu": pl.String,
    "tp": pl.Int64,
    "replicas": pl.Int64,
    "batching": pl.String,
    "router": pl.String,
    "latency_model": pl.String,
    "disaggregate": pl.String,
    "slo_ttft_s": pl.Float64,
    "slo_tpot_s": pl.Float64,
    "slo_e2e_s": pl.Float64,
    "requests": pl.Int64,
    "requests_finished": pl.Int64,
    "requests_dropped": pl.Int64,
    "drop_reasons": pl.String,
    "ttft_p50_s": pl.Float64,
    "ttft_p90_s": pl.Float64,
    "ttft_p99_s": pl.Float64,
    "tpot_p50_s": pl.Float64,
    "tpot_p90_s": pl.Float64,
    "e2e_p50_s": pl.Float64,
    "e2e_p90_s": pl.Float64,
    "slo_attainment_ratio": pl.Float64,
    "goodput_rps": pl.Float64,
    "preemptions": pl.Int64,
    "horizon_s": pl.Float64,
    "gpu_seconds": pl.Float64,
    "utilization_ratio": pl.Float64,
    "energy_per_token_j": pl.Float64,
    "cost_per_mtok_usd": pl.Float64,
    "notes": pl.String,
}
"""The serve_runs columns the fixture sets (the schema's names; the rest are null)."""

RR_NOTE = "replica 1 idled through most of the first bin"
DROP_REASON = "needs 900 KV blocks, the replica holds 100"


def _config(router: str, slo: str) -> str:
    return json.dumps(
        {
            "source": SOURCE,
            "dataset": DATASET,
            "model": "llama-2-7b",
            "gpu": "a100-80gb",
            "tp": 1,
            "replicas": 2,
            "batching": "vllm",
            "router": router,
            "slo": slo,
            "bin_s": 10.0,
            "start_s": 0.0,
            "duration_s": None,
        }
    )


def run_row(run_id: str, router: str, slo: str, **summary: float | str | None) -> dict[str, object]:
    """One ``serve_runs`` row; summary figures not given are null (not stored)."""
    row: dict[str, object] = dict.fromkeys(RUN_SCHEMA)
    row.update(
        source=SOURCE,
        dataset=run_id,
        run_id=run_id,
        trace_dataset=DATASET,
        config_json=_config(router, slo),
        model="llama-2-7b",
        gpu="a100-80gb",
        tp=1,
        replicas=2,
        batching="vllm",
        router=router,
        latency_model="roofline",
        disaggregate="0",
        slo_ttft_s=2.0,
        slo_tpot_s=0.1,
    )
    row.update(summary)
    return row


RR_RUN = run_row(
    "rr",
    "round-robin",
    "ttft=2s,tpot=100ms",
    requests=5,
    requests_finished=4,
    requests_dropped=1,
    drop_reasons=json.dumps({DROP_REASON: 1}),
    ttft_p50_s=1.25,
    ttft_p90_s=2.55,
    ttft_p99_s=2.955,
    tpot_p50_s=0.05,
    tpot_p90_s=0.17,
    e2e_p50_s=2.05,
    e2e_p90_s=3.38,
    slo_attainment_ratio=0.4,
    goodput_rps=2 / 17.5,
    preemptions=0,
    horizon_s=17.5,
    gpu_seconds=40.0,  # 2 replicas x 1 GPU x 20 s
    utilization_ratio=19 / 40,
    energy_per_token_j=12.5,
    cost_per_mtok_usd=0.0123,
    notes=RR_NOTE,
)
LT_RUN = run_row(
    "lt", "least-tokens", "ttft=2s,tpot=100ms,e2e=1.5s", slo_e2e_s=1.5, gpu_seconds=30.0
)

# (request_id, arrival_s, output_tokens, ttft_s, tpot_s, e2e_s, finish_s, status)
RR_REQUESTS = [
    (0, 0.0, 5, 0.5, 0.05, 0.7, 0.7, "finished"),
    (1, 2.0, 1, 1.0, None, 1.0, 3.0, "finished"),
    (2, 12.0, 3, 3.0, 0.05, 3.1, 15.1, "finished"),
    (3, 14.0, 11, 1.5, 0.2, 3.5, 17.5, "finished"),
    (4, 15.0, 9, None, None, None, None, "dropped"),
]
LT_REQUESTS = [
    (0, 0.0, 2, 0.4, 0.1, 0.5, 0.5, "finished"),
    (1, 5.0, 1, 2.0, None, 2.0, 7.0, "finished"),
    (2, 11.0, 4, 2.5, 0.05, 2.65, 13.65, "finished"),
]
# (time_s, replica, busy_s, running, waiting, kv_used_blocks)
TIMESERIES = [
    (0.0, 0, 4.0, 1, 0, 10),
    (0.0, 1, 1.0, 1, 0, 5),
    (10.0, 0, 6.0, 1, 1, 30),
    (10.0, 1, 8.0, 1, 0, 50),
]


def requests_frame(run_id: str, rows: list[tuple[Any, ...]]) -> pl.DataFrame:
    """``serve_requests`` rows of one run: the contract's columns + run_id, source, dataset."""
    cols = [
        "request_id",
        "arrival_s",
        "output_tokens",
        "ttft_s",
        "tpot_s",
        "e2e_s",
        "finish_s",
        "status",
    ]
    data = {c: [r[i] for r in rows] for i, c in enumerate(cols)}
    n = len(rows)
    dropped = [s == "dropped" for s in data["status"]]
    data.update(
        input_tokens=[100] * n,
        replica=[-1 if d else i % 2 for i, d in enumerate(dropped)],
        prefill_replica=[-1 if d else i % 2 for i, d in enumerate(dropped)],
        prefix_hit_tokens=[0] * n,
        queue_s=[None if d else 0.0 for d in dropped],
        kv_transfer_s=[0.0] * n,
        preemptions=[0] * n,
        drop_reason=[DROP_REASON if d else None for d in dropped],
    )
    frame = pl.DataFrame(data).select([pl.col(c).cast(t) for c, t in REQUEST_COLUMNS.items()])
    return frame.with_columns(
        pl.lit(run_id).alias("run_id"),
        pl.lit(SOURCE).alias("source"),
        pl.lit(DATASET).alias("dataset"),
    )


def timeseries_frame(run_id: str) -> pl.DataFrame:
    """``serve_timeseries`` rows: the contract's columns + run_id."""
    cols = ["time_s", "replica", "busy_s", "running", "waiting", "kv_used_blocks"]
    data: dict[str, list[Any]] = {c: [r[i] for r in TIMESERIES] for i, c in enumerate(cols)}
    n = len(TIMESERIES)
    data.update(
        role=["mixed"] * n,
        up=[True] * n,
        iterations=[10] * n,
        prefill_tokens=[100] * n,
        decode_tokens=[10] * n,
        kv_capacity_blocks=[100] * n,
    )
    frame = pl.DataFrame(data).select([pl.col(c).cast(t) for c, t in TIMESERIES_COLUMNS.items()])
    return frame.with_columns(
        pl.lit(SOURCE).alias("source"),
        pl.lit(run_id).alias("dataset"),
        pl.lit(run_id).alias("run_id"),
    )


def write_tables(store: Path, tables: dict[str, list[tuple[str, pl.DataFrame]]]) -> None:
    """Commit ``{table: [(run id, frame)]}`` as one new generation of ``store``: through
    the store's writer when it knows the table, else as Parquet files in its layout.
    """
    if all(t in TABLES for t in tables):
        with StoreTransaction(store) as tx:
            for table, parts in tables.items():
                for run_id, frame in parts:
                    tx.write(table, frame, source=SOURCE, dataset=run_id)
        return
    ensure_layout(store)
    staging = store / f".fixture-{uuid.uuid4().hex}"
    files: dict[PurePosixPath, Path] = {}
    for table, parts in tables.items():
        for run_id, frame in parts:
            rel = PurePosixPath(table, f"source={SOURCE}", f"{run_id}.parquet")
            path = staging / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            frame.write_parquet(path)
            files[rel] = path
    commit_generation(store, files)
    shutil.rmtree(staging)


def serve_store(
    store: Path, rr_run: dict[str, object] | None = None, *, one_file: bool = False
) -> Path:
    """The two runs above in ``store`` (``rr_run`` replaces run rr's row); with
    ``one_file`` both runs' requests and timeseries share one file per table (named
    after neither run).
    """
    runs = [rr_run or RR_RUN, LT_RUN]
    requests = [
        ("rr", requests_frame("rr", RR_REQUESTS)),
        ("lt", requests_frame("lt", LT_REQUESTS)),
    ]
    series = [("rr", timeseries_frame("rr")), ("lt", timeseries_frame("lt"))]
    if one_file:
        requests = [("both", pl.concat([f for _, f in requests]))]
        series = [("both", pl.concat([f for _, f in series]))]
    write_tables(
        store,
        {
            "serve_runs": [(str(r["run_id"]), pl.DataFrame([r], schema=RUN_SCHEMA)) for r in runs],
            "serve_requests": requests,
            "serve_timeseries": series,
        },
    )
    return store
