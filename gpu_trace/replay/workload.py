"""The jobs a replay schedules, as column arrays.

Built once from the canonical ``jobs`` table: demand = ``gpus`` (fractional for openb
sharing, split into GPUs x per-GPU milli share), duration = ``run_s``, arrival =
``submit_time``. Jobs that cannot be replayed (no submit time, no run time, no GPU
request, CPU-only) are *skipped and counted* with a reason, never dropped silently.
CPU (``cpus``) and memory (``mem_bytes``) requests ride along (0 when the trace has none,
so such a job is placed on GPUs alone, as before).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import numpy as np
import numpy.typing as npt
import polars as pl

from gpu_trace.replay.cluster import MILLI

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

WORKLOAD_COLUMNS = (
    "job_id",
    "user",
    "vc",
    "name",
    "submit_time",
    "start_time",
    "run_s",
    "gpus",
    "gpu_type",
)

CLONE_TAG = "#clone"
"""Marks the job ids of tasks added by workload inflation (``<job_id>#clone<i>``)."""

RESOURCE_COLUMNS = ("cpus", "mem_bytes")
"""Optional CPU / memory requests (null-filled when a frame lacks them)."""


@dataclass
class Workload:
    """Replayable jobs sorted by arrival (ties by input order), plus the skipped ones.

    Times are float seconds from ``origin`` (the first replayed arrival before load
    scaling). ``ngpu`` x ``milli`` is the request: 0.47 GPU = 1 x 470; 4 GPUs = 4 x 1000.
    ``recorded_start_s`` is the trace's own start (NaN when unknown), for ``recorded``.
    """

    frame: pl.DataFrame
    """job_id, user, vc, name, gpus, gpu_type, submit_time (the replayed rows, in order)."""
    arrival_s: F64
    duration_s: F64
    gpus: F64
    ngpu: I64
    milli: I64
    user_code: I64
    vc_code: I64
    users: list[str]
    vcs: list[str]
    recorded_start_s: F64
    origin: datetime | None
    skipped: pl.DataFrame
    """job_id, user, vc, gpus, reason for the jobs that cannot be replayed."""
    load_factor: float = 1.0
    cpu_milli: I64 | None = None
    """CPU request in milli-cores (0 = none / unknown: the job never waits for CPU)."""
    mem_bytes: I64 | None = None
    """Host memory request in bytes (0 = none / unknown)."""
    speed_code: I64 | None = None
    """Heterogeneity: each job's row in ``speed_table`` (None: every GPU model 1.0)."""
    speed_table: F64 | None = None
    """Job class x GPU type (the cluster's type codes) -> speed, from a throughput table."""

    def cpu(self) -> I64:
        """CPU requests (zeros when the workload has none)."""
        return self.cpu_milli if self.cpu_milli is not None else np.zeros(self.n, np.int64)

    def mem(self) -> I64:
        """Memory requests (zeros when the workload has none)."""
        return self.mem_bytes if self.mem_bytes is not None else np.zeros(self.n, np.int64)

    @property
    def n(self) -> int:
        """The number of jobs replayed."""
        return int(self.arrival_s.shape[0])

    @classmethod
    def from_jobs(
        cls,
        jobs: pl.LazyFrame | pl.DataFrame,
        *,
        start: datetime | None = None,
        end: datetime | None = None,
        load: float = 1.0,
        cpu_only: bool = False,
    ) -> Workload:
        """Select the submit-time window ``[start, end)`` and scale arrivals by ``load``
        (inter-arrival gaps divided by it: 1.3 = 30 % more jobs per hour). ``cpu_only``
        keeps jobs with no GPU but a CPU request (0 GPUs x 0 milli: they hold CPU and
        memory only; the FGD protocol schedules them too, on a multi-resource cluster).
        """
        if load <= 0:
            msg = "load must be positive"
            raise ValueError(msg)
        lf = jobs.lazy()
        have = lf.collect_schema().names()
        optional: dict[str, pl.DataType] = {
            "user": pl.String(),
            "vc": pl.String(),
            "name": pl.String(),
            "start_time": pl.Datetime("us", "UTC"),
            "gpu_type": pl.String(),
            "cpus": pl.Float64(),
            "mem_bytes": pl.Int64(),
        }
        lf = lf.with_columns(
            pl.lit(None, dtype=t).alias(c) for c, t in optional.items() if c not in have
        )
        lf = lf.select(*WORKLOAD_COLUMNS, *RESOURCE_COLUMNS).with_row_index("_order")
        if start is not None:
            lf = lf.filter(pl.col("submit_time").is_null() | (pl.col("submit_time") >= start))
        if end is not None:
            lf = lf.filter(pl.col("submit_time").is_null() | (pl.col("submit_time") < end))
        df = lf.collect()
        reason = (
            pl.when(pl.col("submit_time").is_null())
            .then(pl.lit("no submit_time"))
            .when(pl.col("run_s").is_null())
            .then(pl.lit("no run_s"))
            .when(pl.col("run_s") < 0)
            .then(pl.lit("negative run_s"))
            .when(pl.col("gpus").is_null())
            .then(pl.lit("no gpus"))
            .when((pl.col("gpus") <= 0) & ~(pl.lit(cpu_only) & (pl.col("cpus").fill_null(0) > 0)))
            .then(pl.lit("cpu-only (gpus = 0)"))
            .when((pl.col("gpus") > 1) & (pl.col("gpus") != pl.col("gpus").floor()))
            .then(pl.lit("fractional request above one GPU"))
        )
        df = df.with_columns(reason.alias("reason"))
        skipped = df.filter(pl.col("reason").is_not_null()).select(
            "job_id", "user", "vc", "gpus", "reason"
        )
        ok = df.filter(pl.col("reason").is_null()).sort(["submit_time", "_order"])
        origin = ok["submit_time"][0] if ok.height else None
        sub = ok["submit_time"].dt.epoch("us").to_numpy().astype(np.float64) / 1e6
        first = sub[0] if sub.size else 0.0
        arrival = (sub - first) / load
        started = ok["start_time"].dt.epoch("us").cast(pl.Float64).fill_null(float("nan"))
        rec = (started.to_numpy() / 1e6 - first) if sub.size else np.zeros(0)
        gpus = ok["gpus"].to_numpy().astype(np.float64)
        ngpu = np.maximum(1, np.ceil(gpus - 1e-9)).astype(np.int64)
        milli = np.where(gpus < 1, np.rint(gpus * MILLI), MILLI).astype(np.int64)
        milli = np.maximum(milli, 1)
        none = gpus <= 0  # kept CPU-only jobs: no GPU at all
        ngpu[none] = 0
        milli[none] = 0
        user_code, users = _codes(ok["user"])
        vc_code, vcs = _codes(ok["vc"])
        return cls(
            frame=ok.select("job_id", "user", "vc", "name", "gpus", "gpu_type", "submit_time"),
            arrival_s=np.ascontiguousarray(arrival),
            duration_s=ok["run_s"].to_numpy().astype(np.float64),
            gpus=gpus,
            ngpu=ngpu,
            milli=milli,
            user_code=user_code,
            vc_code=vc_code,
            users=users,
            vcs=vcs,
            recorded_start_s=np.asarray(rec, dtype=np.float64),
            origin=origin,
            skipped=skipped,
            load_factor=load,
            cpu_milli=(ok["cpus"].cast(pl.Float64).fill_null(0.0).clip(lower_bound=0) * 1000)
            .round(0)
            .cast(pl.Int64)
            .to_numpy(),
            mem_bytes=ok["mem_bytes"].cast(pl.Int64).fill_null(0).clip(lower_bound=0).to_numpy(),
        )


def arrival_order(jobs: pl.DataFrame) -> pl.DataFrame:
    """``jobs`` in arrival order as the store can recover it: by submit time, then,
    among jobs of the same instant, by job id with ids that are integers compared as
    numbers (``"9"`` before ``"10"``), then as text.

    The store keeps jobs sorted by ``(submit_time, job_id)`` with ids as text, which
    loses a trace's file order among jobs submitted in the same second; simulators that
    read those files (Tiresias, the PAI simulator) take same-second jobs in file order,
    and their traces number jobs in that order. Stable: rows equal on all keys keep
    their order.
    """
    if "job_id" not in jobs.columns:
        return jobs
    jid = pl.col("job_id").cast(pl.String)
    return jobs.sort(
        [pl.col("submit_time"), jid.str.strip_chars().cast(pl.Int64, strict=False), jid],
        nulls_last=True,
        maintain_order=True,
    )


def _codes(col: pl.Series) -> tuple[I64, list[str]]:
    """Dense integer codes for a string column (null -> ""), codes in sorted name order so
    they do not depend on row order.
    """
    filled = col.fill_null("")
    names = filled.unique().sort().to_list()
    codes = (filled.rank("dense").cast(pl.Int64) - 1).to_numpy() if len(filled) else np.zeros(0)
    return np.asarray(codes, dtype=np.int64), [str(x) for x in names]
