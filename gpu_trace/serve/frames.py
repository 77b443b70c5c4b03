"""The frames a finished serving replay produces (the :mod:`~gpu_trace.serve.result`
contract): one row per request, per (bin, replica) and per replica, read from the
engine's columns and per-replica accounting once the loop is over.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt
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
    start = np.arange(bins, dtype=np.float64) * eng.bin_s
    frames = []
    for rep in eng.replicas:
        snap = np.zeros((bins, 3), dtype=np.int64)
        mine = np.frombuffer(rep.snap, dtype=np.int64).reshape(-1, 3)
        snap[rep.first_bin : rep.first_bin + len(mine)] = mine[: bins - rep.first_bin]
        down = INF if math.isnan(rep.down_s) else rep.down_s
        frames.append(
            pl.DataFrame(
                {
                    "time_s": start,
                    "replica": np.full(bins, rep.index),
                    "role": [rep.role] * bins,
                    "up": (rep.up_s < start + eng.bin_s) & (down > start),
                    "busy_s": _bins(rep.bin_busy, bins, np.float64),
                    "iterations": _bins(rep.bin_iters, bins, np.int64),
                    "prefill_tokens": _bins(rep.bin_prefill, bins, np.int64),
                    "decode_tokens": _bins(rep.bin_decode, bins, np.int64),
                    "running": snap[:, 0],
                    "waiting": snap[:, 1],
                    "kv_used_blocks": snap[:, 2],
                    "kv_capacity_blocks": np.full(bins, rep.kv.capacity),
                },
                schema=TIMESERIES_COLUMNS,
            )
        )
    if not frames:
        return pl.DataFrame(schema=TIMESERIES_COLUMNS)
    return pl.concat(frames).sort("time_s", "replica")


def _bins(values: list[Any], bins: int, dtype: Any) -> npt.NDArray[Any]:
    """A per-bin list cut or zero-padded to ``bins`` values."""
    out = np.zeros(bins, dtype=dtype)
    n = min(bins, len(values))
    out[:n] = values[:n]
    return out


def replica_frame(eng: Engine) -> pl.DataFrame:
    """One row per replica that ever existed (down at the run's end if never drained)."""
    reps = eng.replicas
    return pl.DataFrame(
        {
            "replica": [r.index for r in reps],
            "role": [r.role for r in reps],
            "gpus": [eng.latency.tp] * len(reps),
            "start_s": [r.start_s for r in reps],
            "up_s": [r.up_s for r in reps],
            "down_s": [eng.horizon if math.isnan(r.down_s) else r.down_s for r in reps],
            "busy_s": [r.busy_total for r in reps],
            "iterations": [sum(r.bin_iters) for r in reps],
            "requests": [r.requests_done for r in reps],
            "kv_capacity_blocks": [r.kv.capacity for r in reps],
        },
        schema=REPLICA_COLUMNS,
    )
