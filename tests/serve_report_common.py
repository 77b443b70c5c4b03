"""A small store holding two serving-replay runs, written directly as the contract
(gpu_trace/serve/result.py: REQUEST_COLUMNS, TIMESERIES_COLUMNS, + run_id, source,
dataset; serve_runs as issue 30 names its columns) and the figures worked out by hand
from it, for the report tests (tests/test_serve_report*.py).

The rows are written as Parquet files into a new store generation (the store's own
commit), one file per (table, run), in the layout every table has
(``<table>/source=<source>/<run>.parquet``): the report reads the files, so the test
does not depend on how the serve tables are registered with the writer.

Both runs replay azure-llm/conv with SLO TTFT <= 2 s, TPOT <= 100 ms, bins of 10 s.

Run ``rr`` (round-robin; every summary figure stored):

====  =======  ===  =====  =====  =====  ======  ========  ================================
id    arrival  out  TTFT   TPOT   e2e    finish  status    met both targets?
====  =======  ===  =====  =====  =====  ======  ========  ================================
0     0        5    0.5    0.05   0.7    0.7     finished  yes
1     2        1    1.0    null   1.0    3.0     finished  yes (one token: no TPOT, meets it)
2     12       3    3.0    0.05   3.1    15.1    finished  no (TTFT 3.0 > 2)
3     14       11   1.5    0.2    3.5    17.5    finished  no (TPOT 0.2 > 0.1)
4     15       9    null   null   null   null    dropped   no (dropped counts as missing)
====  =======  ===  =====  =====  =====  ======  ========  ================================

attainment 2/5 = 40 %; horizon = last finish 17.5 s, goodput 2 / 17.5 = 0.114 req/s;
finished TTFT 0.5, 1.0, 1.5, 3.0: p50 (1.0 + 1.5) / 2 = 1.25 s, p90 at rank 0.9 x 3 =
2.7: 1.5 + 0.7 x 1.5 = 2.55 s; TPOT 0.05, 0.05, 0.2: p50 50 ms; e2e 0.7, 1.0, 3.1, 3.5:
p50 2.05 s. Arrival bins: [0, 10) 2 requests, 2 met (100 %); [10, 20) 3, 0 met (0 %).

Run ``lt`` (least-tokens; the run stored its targets and GPU-seconds only, so the
report computes the rest from the requests):

====  =======  ===  =====  =====  =====  ======  ============================
id    arrival  out  TTFT   TPOT   e2e    finish  met?
====  =======  ===  =====  =====  =====  ======  ============================
0     0        2    0.4    0.1    0.5    0.5     yes (TPOT = target)
1     5        1    2.0    null   2.0    7.0     yes (TTFT = target)
2     11       4    2.5    0.05   2.65   13.65   no
====  =======  ===  =====  =====  =====  ======  ============================

attainment 2/3 = 66.7 %; goodput 2 / 13.65 = 0.147 req/s; TTFT 0.4, 2.0, 2.5: p50
2.0 s, p90 at rank 1.8: 2.0 + 0.8 x 0.5 = 2.4 s; TPOT 0.1, 0.05: p50 75 ms; e2e p50 2.0 s.

Timeseries (both runs, 2 replicas, bins 0 and 10 s): busy_s replica 0: 4, 6; replica
1: 1, 8 -> utilisation 40 %, 60 %; 10 %, 80 %. KV used / capacity (100 blocks): replica
0: 10, 30; replica 1: 5, 50 -> 10 %, 30 %; 5 %, 50 %. Waiting summed: 0, 1; running: 2, 2.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path, PurePosixPath
from typing import Any

import polars as pl

from gpu_trace.serve.result import REQUEST_COLUMNS, TIMESERIES_COLUMNS
from gpu_trace.store.generations import commit_generation
from gpu_trace.store.parquet import ensure_layout

SOURCE = "azure-llm"
DATASET = "conv"

RUN_SCHEMA: dict[str, Any] = {
    "run_id": pl.String,
    "source": pl.String,
    "dataset": pl.String,
    "config_json": pl.String,
    "model": pl.String,
    "gpu": pl.String,
    "tp": pl.Int64,
    "replicas": pl.Int64,
    "batching": pl.String,
    "router": pl.String,
    "ttft_slo_s": pl.Float64,
    "tpot_slo_s": pl.Float64,
    "ttft_p50_s": pl.Float64,
    "ttft_p90_s": pl.Float64,
    "tpot_p50_s": pl.Float64,
    "e2e_p50_s": pl.Float64,
    "slo_attainment": pl.Float64,
    "goodput_rps": pl.Float64,
    "gpu_seconds": pl.Float64,
    "energy_j_per_token": pl.Float64,
    "usd_per_mtok": pl.Float64,
    "notes": pl.String,
}

RR_NOTE = "replica 1 idled through most of the first bin"


def _config(router: str) -> str:
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
            "slo": "ttft=2s,tpot=100ms",
            "bin_s": 10.0,
            "start_s": 0.0,
            "duration_s": None,
        }
    )


def run_row(run_id: str, router: str, **summary: float | str | None) -> dict[str, object]:
    """One ``serve_runs`` row; summary figures not given are null (not stored)."""
    row: dict[str, object] = dict.fromkeys(RUN_SCHEMA)
    row.update(
        run_id=run_id,
        source=SOURCE,
        dataset=DATASET,
        config_json=_config(router),
        model="llama-2-7b",
        gpu="a100-80gb",
        tp=1,
        replicas=2,
        batching="vllm",
        router=router,
        ttft_slo_s=2.0,
        tpot_slo_s=0.1,
    )
    row.update(summary)
    return row


RR_RUN = run_row(
    "rr",
    "round-robin",
    ttft_p50_s=1.25,
    ttft_p90_s=2.55,
    tpot_p50_s=0.05,
    e2e_p50_s=2.05,
    slo_attainment=0.4,
    goodput_rps=2 / 17.5,
    gpu_seconds=40.0,  # 2 replicas x 1 GPU x 20 s
    energy_j_per_token=12.5,
    usd_per_mtok=0.0123,
    notes=json.dumps([RR_NOTE]),
)
LT_RUN = run_row("lt", "least-tokens", gpu_seconds=30.0)

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
        drop_reason=["needs 900 KV blocks, the replica holds 100" if d else None for d in dropped],
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
    return frame.with_columns(pl.lit(run_id).alias("run_id"))


def write_tables(store: Path, tables: dict[str, list[tuple[str, pl.DataFrame]]]) -> None:
    """Commit ``{table: [(file stem, frame)]}`` as one new generation of ``store``."""
    ensure_layout(store)
    staging = store / f".fixture-{uuid.uuid4().hex}"
    files: dict[PurePosixPath, Path] = {}
    for table, parts in tables.items():
        for stem, frame in parts:
            rel = PurePosixPath(table, f"source={SOURCE}", f"{stem}.parquet")
            path = staging / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            frame.write_parquet(path)
            files[rel] = path
    commit_generation(store, files)
    for path in sorted(staging.rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    staging.rmdir()


def serve_store(store: Path, rr_run: dict[str, object] | None = None) -> Path:
    """The two runs above in ``store`` (``rr_run`` replaces run rr's row)."""
    runs = [rr_run or RR_RUN, LT_RUN]
    write_tables(
        store,
        {
            "serve_runs": [(str(r["run_id"]), pl.DataFrame([r], schema=RUN_SCHEMA)) for r in runs],
            "serve_requests": [
                ("rr", requests_frame("rr", RR_REQUESTS)),
                ("lt", requests_frame("lt", LT_REQUESTS)),
            ],
            "serve_timeseries": [("rr", timeseries_frame("rr")), ("lt", timeseries_frame("lt"))],
        },
    )
    return store
