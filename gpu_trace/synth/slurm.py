"""Synthetic Slurm accounting export in ``sacct -a -X -P`` format.

Writes ``OUT/sacct_jobs.psv`` with the field list ``docs/your-cluster.md`` asks users to
export (``JobID,JobIDRaw,JobName,User,Account,Partition,QOS,State,ExitCode,Submit,
Eligible,Start,End,Elapsed,Timelimit,NNodes,NCPUS,ReqTRES,AllocTRES,NodeList``), so
``gpu-trace ingest slurm OUT/sacct_jobs.psv`` reads it as it reads a real export.

Calibration: the Helios Earth cluster (a Slurm cluster; HeliosData's README and Hu et al., SC'21),
reused through :mod:`gpu_trace.synth.helios`'s samplers: 48.9 % GPU jobs with mean 2.1
GPUs (median 1, powers of two), GPU run times with median 234 s and mean 5,131 s, CPU run
times median 1 s / mean 163 s, zero-inflated queueing with the published means, final
states at the published completed / cancelled / failed shares. On top of that, what a
sacct export has and Helios does not: 8-GPU nodes named ``gpu0001``.. (A100 and V100
partitions) and ``cpu001``.. listed as Slurm host lists (``gpu[0012-0015]``, sometimes
split ``gpu[0003-0004,0009]``), array tasks (``123_4``), heterogeneous components
(``123+0``), pending arrays (``123_[8-15%2]``), ``CANCELLED by <uid>``, ``TIMEOUT`` runs
just past their ``Timelimit``, ``OUT_OF_MEMORY`` / ``NODE_FAIL`` / ``PREEMPTED``, limits
``UNLIMITED`` and ``Partition_Limit``, and the newest jobs still ``RUNNING`` or
``PENDING`` at export time (``Unknown`` times, ``None assigned`` nodes).

Times are local (the export's cluster runs on UTC+1, Europe/Berlin in January); the
jobs are submitted over January 2026 with Helios' day/night and weekday profile.
Everything is drawn with numpy and formatted with polars: a million jobs in seconds,
the same seed writes the same bytes.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import numpy.typing as npt
import polars as pl

from gpu_trace.synth.helios import (
    CLUSTERS,
    GPU_SIZES,
    SINGLE_GPU_SHARE,
    _durations,
    _queues,
    gpu_size_weights,
    hashes,
    helios_arrivals,
)

FIELDS = (
    "JobID", "JobIDRaw", "JobName", "User", "Account", "Partition", "QOS", "State",
    "ExitCode", "Submit", "Eligible", "Start", "End", "Elapsed", "Timelimit", "NNodes",
    "NCPUS", "ReqTRES", "AllocTRES", "NodeList",
)  # fmt: skip
FILE = "sacct_jobs.psv"
TZ = "Europe/Berlin"
"""Zone to ingest the file with (``--tz``); January is UTC+1 there."""
TZ_OFFSET_S = 3600
START_S = 1_767_222_000
"""2026-01-01 00:00:00 Europe/Berlin, as a Unix time."""
DAYS = 31
GPUS_PER_NODE = 8
LIMITS_S = np.array([3600, 4 * 3600, 12 * 3600, 86400, 2 * 86400, 7 * 86400])
UNFINISHED_SHARE = 0.005
"""Newest jobs still running or pending when the export was taken."""
EARTH = CLUSTERS[1]


def _clock(seconds: pl.Expr) -> pl.Expr:
    """``[D-]HH:MM:SS`` as sacct prints durations."""
    s = seconds.cast(pl.Int64)
    d, h, m, sec = s // 86400, (s // 3600) % 24, (s // 60) % 60, s % 60

    def two(x: pl.Expr) -> pl.Expr:
        return x.cast(pl.String).str.zfill(2)

    hms = pl.format("{}:{}:{}", two(h), two(m), two(sec))
    return pl.when(d > 0).then(pl.format("{}-{}", d, hms)).otherwise(hms)


def _stamp(local_s: pl.Expr) -> pl.Expr:
    return pl.from_epoch(local_s, time_unit="s").dt.strftime("%Y-%m-%dT%H:%M:%S")


def _host_list(prefix: str, width: int, first: pl.Expr, count: pl.Expr, split: pl.Expr) -> pl.Expr:
    """``prefix[first-last]`` (``prefixNNNN`` for one host); with ``split`` the last host
    is taken three further on (``gpu[0003-0004,0009]``).
    """

    def num(x: pl.Expr) -> pl.Expr:
        return x.cast(pl.String).str.zfill(width)

    last = first + count - 1
    run_end = pl.when(split).then(last - 1).otherwise(last)
    body = (
        pl.when(run_end > first)
        .then(pl.format("{}-{}", num(first), num(run_end)))
        .otherwise(num(first))
    )
    body = pl.when(split).then(pl.format("{},{}", body, num(last + 3))).otherwise(body)
    single = (count == 1) & ~split
    return (
        pl.when(single)
        .then(pl.lit(prefix) + num(first))
        .otherwise(pl.format(f"{prefix}[{{}}]", body))
    )


def frame(rng: np.random.Generator, n: int) -> pl.DataFrame:
    """``n`` jobs, in submission order, as the text of each sacct field."""
    spec = EARTH
    submit = helios_arrivals(rng, n, start_s=START_S, days=DAYS, utc_offset_s=TZ_OFFSET_S)
    gpu_job = rng.random(n) < spec.gpu_jobs / spec.jobs
    sizes = GPU_SIZES[rng.choice(len(GPU_SIZES), size=n, p=gpu_size_weights(spec.gpus_per_gpu_job))]
    gpus = np.where(gpu_job, np.where(rng.random(n) < SINGLE_GPU_SHARE, 1, sizes), 0)
    gpus = np.minimum(gpus, 64)
    nodes = np.maximum(1, -(-gpus // GPUS_PER_NODE))
    cpus = np.where(
        gpu_job,
        gpus * rng.choice(np.array([4, 8, 16]), size=n),
        rng.choice(np.array([1, 2, 4, 8, 16, 32]), size=n, p=[0.4, 0.2, 0.2, 0.1, 0.07, 0.03]),
    )
    run = np.where(gpu_job, _durations(rng, n, *spec.run_gpu), _durations(rng, n, *spec.run_cpu))
    queue = np.where(
        gpu_job,
        _queues(rng, n, spec.queue_gpu_mean, 0.62),
        _queues(rng, n, spec.queue_cpu_mean, 0.8),
    )
    share = np.where(gpu_job[:, None], spec.state_gpu, spec.state_cpu)
    u = rng.random(n)
    completed, cancelled = share[:, 0], share[:, 0] + share[:, 1]
    failed_kind = rng.choice(
        np.array(["FAILED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED"]),
        size=n,
        p=[0.8, 0.08, 0.02, 0.06, 0.04],
    )
    state = np.where(u < completed, "COMPLETED", np.where(u < cancelled, "CANCELLED", failed_kind))
    limit_i = rng.integers(0, len(LIMITS_S), size=n)
    limit = np.maximum(LIMITS_S[limit_i], 60 * np.ceil(run / 60 * 1.2).astype(np.int64))
    limit = np.where(state == "TIMEOUT", np.maximum(60, (run // 60) * 60), limit)
    run = np.where(state == "TIMEOUT", limit + rng.integers(1, 90, size=n), run)
    limit_kind = rng.random(n)
    unfinished = np.arange(n) >= n - math.ceil(n * UNFINISHED_SHARE)
    pending = unfinished & (np.arange(n) % 2 == 0)
    running = unfinished & ~pending
    state = np.where(pending, "PENDING", np.where(running, "RUNNING", state))
    export_s = int(submit[-1]) + 60 if n else START_S
    start = submit + queue
    start = np.where(running, np.minimum(start, export_s - 1), start)
    elapsed = np.where(running, export_s - start, run)

    gaps = 1 + np.where(rng.random(n) < 0.02, rng.integers(1, 40, size=n), 0)
    raw = int(rng.integers(1_000_000, 5_000_000)) + np.cumsum(gaps)
    kind = rng.random(n)
    uid = rng.integers(1000, 60000, size=n)
    code = np.where(
        np.isin(state, ["FAILED"]),
        rng.choice(np.array([1, 2, 127, 137]), size=n),
        0,
    )
    signal = np.where(np.isin(state, ["CANCELLED", "PREEMPTED"]), 15, 0)
    signal = np.where(state == "OUT_OF_MEMORY", 125, signal)
    signal = np.where(state == "TIMEOUT", 1, signal)

    n_users = int(np.clip(1.2 * math.sqrt(max(n, 1)), 3, 4000))
    users = hashes(rng, n_users, "u", 4)
    accounts = hashes(rng, 25, "acct", 3)
    user_account = rng.integers(0, len(accounts), size=n_users)
    activity = 1.0 / np.arange(1, n_users + 1) ** 1.1
    who = rng.choice(n_users, size=n, p=activity / activity.sum())
    names = hashes(rng, 200, "job", 5)
    model = np.where(rng.random(n) < 0.7, "a100", "v100")
    pool = {"a100": 1200, "v100": 400}
    first_gpu = np.where(model == "a100", 1, 1201) + rng.integers(0, 390, size=n)
    first_cpu = 1 + rng.integers(0, 900, size=n)
    split = (nodes > 2) & (rng.random(n) < 0.2)
    del pool
    cols: dict[str, npt.ArrayLike] = {
        "_raw": raw,
        "_kind": kind,
        "_gpus": gpus,
        "_nodes": nodes,
        "_cpus": cpus,
        "_mem_g": cpus * 8,
        "_model": model,
        "_state": state,
        "_uid": uid,
        "_submit": submit + TZ_OFFSET_S,
        "_start": start + TZ_OFFSET_S,
        "_end": start + run + TZ_OFFSET_S,
        "_elapsed": elapsed,
        "_limit": limit,
        "_limit_kind": limit_kind,
        "_code": code,
        "_signal": signal,
        "_user": users[who],
        "_account": accounts[user_account[who]],
        "_name": names[rng.integers(0, len(names), size=n)],
        "_qos": rng.choice(np.array(["normal", "high", "scavenger"]), size=n, p=[0.8, 0.15, 0.05]),
        "_first_gpu": first_gpu,
        "_first_cpu": first_cpu,
        "_split": split,
    }
    return pl.DataFrame(cols).select(_fields())


def _fields() -> list[pl.Expr]:
    raw, kind, state = pl.col("_raw"), pl.col("_kind"), pl.col("_state")
    pending, running = state == "PENDING", state == "RUNNING"
    array = (kind < 0.1) & ~pending
    het = (kind >= 0.1) & (kind < 0.105)
    pending_array = pending & (kind < 0.3)
    job_id = (
        pl.when(array)
        .then(pl.format("{}_{}", raw - raw % 8, raw % 8))
        .when(het)
        .then(pl.format("{}+0", raw))
        .when(pending_array)
        # tasks from 8 on: the started array tasks above are <base>_0 .. <base>_7, and a
        # pending range whose id is such a base must not name the same task ids twice
        # (Slurm never prints one array task id for two jobs)
        .then(pl.format("{}_[8-{}%2]", raw, (raw % 7) + 9))
        .otherwise(raw.cast(pl.String))
    )
    gpus = pl.col("_gpus")
    tres_head = pl.format("billing={},cpu={},", pl.col("_cpus"), pl.col("_cpus"))
    tail = pl.format("mem={}G,node={}", pl.col("_mem_g"), pl.col("_nodes"))
    req = (
        pl.when(gpus > 0)
        .then(pl.format("{}gres/gpu={},{}", tres_head, gpus, tail))
        .otherwise(tres_head + tail)
    )
    alloc = (
        pl.when(gpus > 0)
        .then(
            pl.format(
                "{}gres/gpu:{}={},gres/gpu={},{}", tres_head, pl.col("_model"), gpus, gpus, tail
            )
        )
        .otherwise(tres_head + tail)
    )
    hosts = (
        pl.when(gpus > 0)
        .then(_host_list("gpu", 4, pl.col("_first_gpu"), pl.col("_nodes"), pl.col("_split")))
        .otherwise(_host_list("cpu", 3, pl.col("_first_cpu"), pl.col("_nodes"), pl.lit(False)))
    )
    lk = pl.col("_limit_kind")
    limit = (
        pl.when(lk < 0.03)
        .then(pl.lit("UNLIMITED"))
        .when(lk < 0.06)
        .then(pl.lit("Partition_Limit"))
        .otherwise(_clock(pl.col("_limit")))
    )
    limit = pl.when(state == "TIMEOUT").then(_clock(pl.col("_limit"))).otherwise(limit)
    partition = (
        pl.when(gpus == 0).then(pl.lit("cpu")).otherwise(pl.format("gpu-{}", pl.col("_model")))
    )
    shown = (
        pl.when(state == "CANCELLED")
        .then(pl.format("CANCELLED by {}", pl.col("_uid")))
        .otherwise(state)
    )
    return [
        job_id.alias("JobID"),
        raw.cast(pl.String).alias("JobIDRaw"),
        pl.col("_name").alias("JobName"),
        pl.col("_user").alias("User"),
        pl.col("_account").alias("Account"),
        partition.alias("Partition"),
        pl.col("_qos").alias("QOS"),
        shown.alias("State"),
        pl.format("{}:{}", pl.col("_code"), pl.col("_signal")).alias("ExitCode"),
        _stamp(pl.col("_submit")).alias("Submit"),
        _stamp(pl.col("_submit")).alias("Eligible"),
        pl.when(pending).then(pl.lit("Unknown")).otherwise(_stamp(pl.col("_start"))).alias("Start"),
        pl.when(pending | running)
        .then(pl.lit("Unknown"))
        .otherwise(_stamp(pl.col("_end")))
        .alias("End"),
        pl.when(pending)
        .then(pl.lit("00:00:00"))
        .otherwise(_clock(pl.col("_elapsed")))
        .alias("Elapsed"),
        limit.alias("Timelimit"),
        pl.col("_nodes").cast(pl.String).alias("NNodes"),
        pl.col("_cpus").cast(pl.String).alias("NCPUS"),
        req.alias("ReqTRES"),
        pl.when(pending).then(pl.lit("")).otherwise(alloc).alias("AllocTRES"),
        pl.when(pending).then(pl.lit("None assigned")).otherwise(hosts).alias("NodeList"),
    ]


def write(out: Path, *, jobs: int, seed: int) -> list[Path]:
    """Write ``out/sacct_jobs.psv``; returns the file written."""
    rng = np.random.default_rng([seed, 0x51A7])
    table = frame(rng, jobs)
    path = out / FILE
    table.write_csv(path, separator="|", quote_style="never", line_terminator="\n")
    return [path]
