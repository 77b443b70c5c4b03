"""The frames a finished serving replay produces (the :mod:`~gpu_trace.serve.result`
contract): one row per request, per (bin, replica) and per replica, read from the
engine's columns and per-replica accounting once the loop is over.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import polars as pl

from gpu_trace.replay.kernel import job_table
from gpu_trace.serve.engine import DONE, DROPPED, INF, Engine
from gpu_trace.serve.request_table import RequestColumns
from gpu_trace.serve.result import (
    REPLICA_COLUMNS,
    REQUEST_COLUMNS,
    TIMESERIES_COLUMNS,
    ServeResult,
)


def result(eng: Engine) -> ServeResult:
    """The per-request, per-bin and per-replica frames (the result contract)."""
    out = job_table.result_arrays(eng, table=RequestColumns)
    arrival = eng.req.arrival_s
    first_token = out["first_token"]
    finish = out["finish"]
    output = eng.req.output_tokens
    state = np.asarray(eng.state)
    done = state == DONE
    stuck = int(((state != DONE) & (state != DROPPED)).sum())
    if stuck:
        msg = f"{stuck} requests neither finished nor dropped (engine bug)"
        raise AssertionError(msg)
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(output > 1, (finish - first_token) / (output - 1), np.nan)
    reasons = [eng.drop_reason.get(i) for i in range(len(state))] if eng.drop_reason else None
    requests = pl.DataFrame(
        {
            "request_id": eng.req.request_id,
            "arrival_s": arrival,
            "input_tokens": eng.req.input_tokens,
            "output_tokens": output,
            "replica": out["replica"],
            "prefill_replica": out["prefill_replica"],
            "prefix_hit_tokens": out["prefix_hit_tokens"],
            "queue_s": out["first_sched"] - arrival,
            "ttft_s": first_token - arrival,
            "tpot_s": tpot,
            "e2e_s": finish - arrival,
            "finish_s": finish,
            "kv_transfer_s": np.where(done, out["kv_transfer_s"], np.nan),
            "preemptions": out["preemptions"],
            "status": np.where(done, "finished", "dropped"),
            "drop_reason": reasons if reasons is not None else [None] * len(state),
        },
        schema=REQUEST_COLUMNS,
        nan_to_null=True,
    )
    dropped = int((state == DROPPED).sum())
    if len(state) and dropped == len(state):
        eng.notes.append("every request was dropped: none fits a replica's KV cache")
    elif dropped:
        eng.notes.append(f"{dropped} requests dropped (KV capacity)")
    if eng.capacity == 0:
        eng.notes.append("the model's weights leave no KV memory on this replica")
    return ServeResult(
        requests=requests,
        timeseries=timeseries(eng),
        replicas=replica_frame(eng),
        horizon_s=eng.horizon,
        notes=eng.notes,
    )


def timeseries(eng: Engine) -> pl.DataFrame:
    """One row per (bin, replica), bins of ``bin_s`` from 0 past the last event; a
    replica that did not exist yet (autoscaling) has zeros and ``up`` false.
    """
    bins = eng.snapped
    cols: dict[str, list[Any]] = {name: [] for name in TIMESERIES_COLUMNS}
    for rep in eng.replicas:
        pad = bins - len(rep.bin_busy)
        busy = (rep.bin_busy + [0.0] * pad)[:bins]
        iters = (rep.bin_iters + [0] * pad)[:bins]
        pre = (rep.bin_prefill + [0] * pad)[:bins]
        dec = (rep.bin_decode + [0] * pad)[:bins]
        snap = ([(0, 0, 0)] * rep.first_bin + rep.snap)[:bins]
        down = INF if math.isnan(rep.down_s) else rep.down_s
        cols["time_s"].extend(q * eng.bin_s for q in range(bins))
        cols["replica"].extend([rep.index] * bins)
        cols["role"].extend([rep.role] * bins)
        cols["up"].extend(
            rep.up_s < (q + 1) * eng.bin_s and down > q * eng.bin_s for q in range(bins)
        )
        cols["busy_s"].extend(busy)
        cols["iterations"].extend(iters)
        cols["prefill_tokens"].extend(pre)
        cols["decode_tokens"].extend(dec)
        cols["running"].extend(s[0] for s in snap)
        cols["waiting"].extend(s[1] for s in snap)
        cols["kv_used_blocks"].extend(s[2] for s in snap)
        cols["kv_capacity_blocks"].extend([rep.kv.capacity] * bins)
    return pl.DataFrame(cols, schema=TIMESERIES_COLUMNS).sort("time_s", "replica")


def replica_frame(eng: Engine) -> pl.DataFrame:
    """One row per replica that ever existed (down at the run's end if never drained)."""
    reps = eng.replicas
    return pl.DataFrame(
        {
            "replica": [r.index for r in reps],
            "role": [r.role for r in reps],
            "gpus": [eng.latency.tp] * len(reps),
            "up_s": [r.up_s for r in reps],
            "down_s": [eng.horizon if math.isnan(r.down_s) else r.down_s for r in reps],
            "busy_s": [r.busy_total for r in reps],
            "iterations": [sum(r.bin_iters) for r in reps],
            "requests": [r.requests_done for r in reps],
            "kv_capacity_blocks": [r.kv.capacity for r in reps],
        },
        schema=REPLICA_COLUMNS,
    )
