"""Synthetic Alibaba PAI 2020 traces, byte-compatible with ``cluster-trace-gpu-v2020``.

Writes the seven headerless CSVs ``pai_<table>.csv`` and their one-line ``.header`` files
exactly as upstream lays them out (``docs/trace-formats.md`` section 3): no header line,
LF endings, empty fields for missing values, times, counts and plans as floats with a
trailing ``.0`` (``4550879.0``, ``1.0``, ``600.0``), ``plan_mem`` as MiB / 1024
(``29.296875``), machine-metric times as integers (``6150435``), 24-hex job and machine
names, 60-hex instance, worker and inst ids, 12-hex users, 32-hex groups.

Calibration (``docs/analyses.md`` section 2 unless noted):

- 1.2 tasks per job (``TASKS_PER_JOB``): ``FULL_SCALE_JOBS`` = 1,050,000 jobs give the
  published 1,260,920 tasks; 82 % of tasks request GPUs (1,037,085 of 1,260,920).
- Per-instance GPU request of GPU tasks (``PLAN_GPU``): mean 0.683 GPU, median 0.5, max 8,
  with the fractional shares (5 % ... 75 %) of Fig 5a's buckets.
- Instances per task: mostly one, with a heavy tail to ~1,000 (Fig 2b), for about 5.8
  instances per task: ~7 M instance lines (~2 GB), as the real 1.98 GB file implies.
- Instance runtime lognormal with the median 480.7 s and mean 4,787 s, capped at the
  max 626,371 s; task wait (first instance start - task start) lognormal with the
  median 9 s and mean 401.7 s.
- Request vs use: the sensor table's usage is below the request for 84.5 % (CPU),
  98 % (GPU) and 96 % (memory) of instances (cell 39's over-provisioning shares).
- Submissions follow a working-day profile in UTC+8 (Fig 3a/3b) over 66 days starting
  at 494,319 s, the real minimum start_time (1970-01-07 01:18:39 +08, issue #262).
- Machines: the real spec's composition (1,897 machines, 6,742 GPUs: P100 798 x 2, T4
  497 x 2, MISC 280 x 8, V100M32 135 x 8, V100 104 x 8, CPU 83 x 0, with each kind's
  CPUs and memory), seeded names and order; the product never reads data/samples.
- ~9 % of group tags carry a workload; ~65 % of jobs share their group with >= 4 others.
- Not published, so chosen plausibly: the status mix (``JOB_STATUS``), GPU types of
  tasks, CPU and memory plans, the share of instances with sensor (45 %) and machine
  metric (25 %) rows.

Quirks reproduced: 0.5 % of instances have an earlier ``Failed`` row with the same
worker_name (plus rare exact repeats), 0.05 % of extra rows have no worker_name, Waiting
tasks and instances carry ``0.0`` times and Running ones ``0.0`` end times (the owners'
"unknown"), Running and Waiting jobs an empty end_time, 0.1 % of finished instances a
stray ``0.0`` start, and ~4 % of GPU tasks no gpu_type.

Everything is vectorized numpy plus one polars ``write_csv`` per file; the same seed
gives the same bytes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from statistics import NormalDist

import numpy as np
import numpy.typing as npt
import polars as pl
import pyarrow as pa

from gpu_trace.synth.common import diurnal_arrivals

FULL_SCALE_JOBS = 1_050_000
"""Jobs that give the real trace's 1.26 M tasks."""

TRACE_START_S = 494_319
TRACE_DAYS = 66
UTC8 = 8 * 3600

# Hour-of-day (UTC+8) and weekday (Monday first) submission profiles, Fig 3a/3b shape:
# quiet nights, a morning rise to a 10-11 h peak, an afternoon plateau, evening tail.
HOURLY = (
    0.45, 0.35, 0.28, 0.22, 0.2, 0.22, 0.3, 0.45, 0.75, 1.1, 1.35, 1.4,
    1.15, 1.2, 1.35, 1.4, 1.35, 1.25, 1.05, 0.95, 0.95, 0.9, 0.75, 0.6,
)  # fmt: skip
WEEKDAY = (1.0, 1.05, 1.05, 1.0, 0.95, 0.65, 0.6)

TASKS_PER_JOB = {1: 0.84, 2: 0.12, 3: 0.04}
SINGLE_TASK_NAMES = {
    "tensorflow": 0.55,
    "worker": 0.2,
    "PyTorchWorker": 0.1,
    "xComputeWorker": 0.1,
    "TVMTuneMain": 0.05,
}
ROLES = ("ps", "worker", "evaluator")
SINGLE_CPU_SHARE = 0.063
"""Share of single-task jobs without GPUs; with every ps task CPU-only it makes 17.8 % of
tasks CPU-only, as published."""

PLAN_GPU = {
    5.0: 0.02,
    10.0: 0.05,
    20.0: 0.05,
    25.0: 0.12,
    30.0: 0.03,
    50.0: 0.38,
    60.0: 0.02,
    75.0: 0.01,
    100.0: 0.28,
    200.0: 0.025,
    400.0: 0.008,
    800.0: 0.007,
}
"""Percent of one GPU per instance, for GPU tasks: mean 68 %, median 50 %, max 800 %."""
PLAN_CPU = {
    50.0: 0.03,
    200.0: 0.12,
    400.0: 0.22,
    600.0: 0.38,
    800.0: 0.12,
    1200.0: 0.09,
    1600.0: 0.04,
}
PLAN_CPU_PS = {200.0: 0.3, 400.0: 0.3, 600.0: 0.25, 800.0: 0.15}
PLAN_MEM_MIB = {
    2000: 0.08,
    4000: 0.12,
    8000: 0.2,
    15000: 0.2,
    30000: 0.25,
    60000: 0.1,
    100000: 0.05,
}
"""Memory requests in MiB; the trace writes them as MiB / 1024 ('GB')."""

GPU_TYPES = {"MISC": 0.3, "T4": 0.22, "P100": 0.25, "V100": 0.13, "V100M32": 0.1}
NO_GPU_TYPE_SHARE = 0.04
JOB_STATUS = {"Terminated": 0.8, "Failed": 0.12, "Running": 0.05, "Waiting": 0.03}

INSTANCE_RUN_MEDIAN_S, INSTANCE_RUN_MEAN_S, INSTANCE_RUN_MAX_S = 480.7, 4787.1, 626_371
TASK_WAIT_MEDIAN_S, TASK_WAIT_MEAN_S = 9.0, 401.7

DUPLICATE_SHARE = 0.005
EXACT_REPEAT_SHARE = 0.0005
NO_WORKER_SHARE = 0.0005
STRAY_ZERO_START_SHARE = 0.001
SENSOR_SHARE = 0.45
MACHINE_METRIC_SHARE = 0.25
TAGGED_JOB_SHARE = 0.95
NO_GROUP_SHARE = 0.08
WORKLOAD_SHARE = 0.09
TYPE_SPEC_SHARE = 0.25
WORKLOADS = ("graphlearn", "ctr", "bert", "nmt", "resnet", "inception", "vgg", "xlnet", "rl")

MACHINE_KINDS = (
    # gpu_type, count, cap_cpu, cap_mem (GB), cap_gpu
    ("CPU", 83, 96, 512, 0),
    ("MISC", 280, 96, 512, 8),
    ("P100", 798, 64, 512, 2),
    ("T4", 497, 96, 512, 2),
    ("V100", 59, 96, 512, 8),
    ("V100", 45, 96, 384, 8),
    ("V100M32", 135, 96, 384, 8),
)

COLUMNS: dict[str, tuple[str, ...]] = {
    "pai_job_table": ("job_name", "inst_id", "user", "status", "start_time", "end_time"),
    "pai_task_table": (
        "job_name",
        "task_name",
        "inst_num",
        "status",
        "start_time",
        "end_time",
        "plan_cpu",
        "plan_mem",
        "plan_gpu",
        "gpu_type",
    ),
    "pai_instance_table": (
        "job_name",
        "task_name",
        "inst_name",
        "worker_name",
        "inst_id",
        "status",
        "start_time",
        "end_time",
        "machine",
    ),
    "pai_sensor_table": (
        "job_name",
        "task_name",
        "worker_name",
        "inst_id",
        "machine",
        "gpu_name",
        "cpu_usage",
        "gpu_wrk_util",
        "avg_mem",
        "max_mem",
        "avg_gpu_wrk_mem",
        "max_gpu_wrk_mem",
        "read",
        "write",
        "read_count",
        "write_count",
    ),
    "pai_group_tag_table": ("inst_id", "user", "gpu_type_spec", "group", "workload"),
    "pai_machine_spec": ("machine", "gpu_type", "cap_cpu", "cap_mem", "cap_gpu"),
    "pai_machine_metric": (
        "worker_name",
        "machine",
        "start_time",
        "end_time",
        "machine_cpu_iowait",
        "machine_cpu_kernel",
        "machine_cpu_usr",
        "machine_gpu",
        "machine_load_1",
        "machine_net_receive",
        "machine_num_worker",
        "machine_cpu",
    ),
}

Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]
Bools = npt.NDArray[np.bool_]

_HEX_PAIRS = np.frombuffer(b"".join(b"%02x" % i for i in range(256)), dtype=np.uint16)


def hex_ids(rng: np.random.Generator, n: int, digits: int) -> pl.Series:
    """``n`` random lower-case hex ids of ``digits`` (even) digits, built as one Arrow
    buffer: millions per second, no Python string per row."""
    raw = np.frombuffer(rng.bytes(n * digits // 2), dtype=np.uint8)
    data = _HEX_PAIRS[raw].tobytes()
    offsets = np.arange(0, (n + 1) * digits, digits, dtype=np.int64)
    arr = pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data))
    series = pl.from_arrow(arr)
    assert isinstance(series, pl.Series)
    return series


def _draw(rng: np.random.Generator, n: int, weights: Mapping[float, float]) -> Floats:
    values = np.asarray(list(weights), dtype=np.float64)
    p = np.asarray(list(weights.values()), dtype=np.float64)
    return values[rng.choice(len(values), size=n, p=p / p.sum())]


def _pick(rng: np.random.Generator, n: int, weights: Mapping[str, float]) -> Ints:
    p = np.asarray(list(weights.values()), dtype=np.float64)
    return rng.choice(len(p), size=n, p=p / p.sum()).astype(np.int64)


def _lognormal(rng: np.random.Generator, n: int, median: float, mean: float, cap: float) -> Floats:
    """Lognormal with the given median and mean (sigma^2 = 2 ln(mean / median))."""
    sigma = float(np.sqrt(2 * np.log(mean / median)))
    return np.minimum(rng.lognormal(np.log(median), sigma, size=n), cap)


def _under_share(rng: np.random.Generator, n: int, below: float, sigma: float) -> Floats:
    """Use / request ratios, lognormal with P(ratio < 1) = ``below``."""
    mu = -NormalDist().inv_cdf(below) * sigma
    return rng.lognormal(mu, sigma, size=n)


def _segments(counts: Ints) -> tuple[Ints, Ints]:
    """For groups of sizes ``counts``: each member's group index and its rank within."""
    owner = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
    starts = np.cumsum(counts) - counts
    rank = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(starts, counts)
    return owner, rank


def _inst_num(rng: np.random.Generator, role: Ints) -> Ints:
    """Instances per task: ps 1-4; others mostly 1 with a heavy tail (Fig 2b)."""
    n = len(role)
    bucket = rng.choice(4, size=n, p=[0.74, 0.19, 0.058, 0.012])
    small = rng.integers(2, 9, size=n)
    mid = np.exp(rng.uniform(np.log(9), np.log(65), size=n)).astype(np.int64)
    tail = np.exp(rng.uniform(np.log(65), np.log(1000), size=n)).astype(np.int64)
    count = np.choose(bucket, [np.ones(n, dtype=np.int64), small, mid, tail])
    ps = rng.choice([1, 2, 3, 4], size=n, p=[0.6, 0.2, 0.1, 0.1])
    return np.where(role == 0, ps, count).astype(np.int64)


def _zero_where(values: Floats, mask: Bools) -> Floats:
    return np.where(mask, 0.0, values)


def _null_where(values: Floats, mask: Bools) -> pl.Series:
    return pl.Series(values).set(pl.Series(mask), None)


def _strings(values: Sequence[str], index: Ints) -> pl.Series:
    return pl.Series(values, dtype=pl.String).gather(pl.Series(index))


def machines(rng: np.random.Generator) -> pl.DataFrame:
    """The real spec's composition with seeded names, in a seeded order."""
    kinds = np.repeat(np.arange(len(MACHINE_KINDS)), [k[1] for k in MACHINE_KINDS])
    kinds = kinds[rng.permutation(len(kinds))]
    col = list(zip(*MACHINE_KINDS, strict=True))
    return pl.DataFrame(
        {
            "machine": hex_ids(rng, len(kinds), 24),
            "gpu_type": _strings(col[0], kinds),
            "cap_cpu": np.asarray(col[2], dtype=np.int64)[kinds],
            "cap_mem": np.asarray(col[3], dtype=np.int64)[kinds],
            "cap_gpu": np.asarray(col[4], dtype=np.int64)[kinds],
        }
    )


def _write(out: Path, stem: str, frame: pl.DataFrame) -> list[Path]:
    assert tuple(frame.columns) == COLUMNS[stem], stem
    csv = out / f"{stem}.csv"
    frame.write_csv(csv, include_header=False, line_terminator="\n", quote_style="never")
    header = out / f"{stem}.header"
    header.write_text(",".join(COLUMNS[stem]) + "\n", encoding="utf-8")
    return [csv, header]


def write(out: Path, *, jobs: int, seed: int) -> list[Path]:
    """Write a synthetic PAI 2020 trace of ``jobs`` jobs into ``out``; returns the 14
    files (7 CSVs and their headers)."""
    rng = np.random.default_rng(seed)
    out.mkdir(parents=True, exist_ok=True)
    files: list[Path] = []

    spec = machines(rng)
    files += _write(out, "pai_machine_spec", spec)
    machine_type = spec.get_column("gpu_type").to_numpy()
    machine_gpus = spec.get_column("cap_gpu").to_numpy()

    # jobs
    n = jobs
    job_name = hex_ids(rng, n, 24)
    job_inst_id = hex_ids(rng, n, 60)
    n_users = max(1, min(1350, -(-n // 40)))
    user_pool = hex_ids(rng, n_users, 12)
    user_w = 1.0 / np.arange(1, n_users + 1) ** 1.1
    job_user = rng.choice(n_users, size=n, p=user_w / user_w.sum())
    submit = diurnal_arrivals(
        rng,
        n,
        start_s=TRACE_START_S,
        days=TRACE_DAYS,
        hourly_weight=HOURLY,
        weekday_weight=WEEKDAY,
        utc_offset_s=UTC8,
    ).astype(np.float64)
    job_status = _pick(rng, n, JOB_STATUS)  # 0 Terminated, 1 Failed, 2 Running, 3 Waiting
    status_names = list(JOB_STATUS)

    # tasks
    k = _draw(rng, n, {float(a): b for a, b in TASKS_PER_JOB.items()}).astype(np.int64)
    t_job, t_rank = _segments(k)
    t_n = len(t_job)
    t_k = k[t_job]
    single_name = _pick(rng, t_n, SINGLE_TASK_NAMES)
    # role 0 ps, 1 worker, 2 evaluator (multi-task jobs); single tasks play role 1
    role = np.where(t_k == 1, 1, t_rank)
    task_name = pl.Series(
        np.where(
            t_k == 1,
            np.asarray(list(SINGLE_TASK_NAMES), dtype=object)[single_name],
            np.asarray(ROLES, dtype=object)[t_rank],
        ),
        dtype=pl.String,
    )
    is_gpu = (role != 0) & ~((t_k == 1) & (rng.random(t_n) < SINGLE_CPU_SHARE))
    inst_num = _inst_num(rng, role)
    t_status = job_status[t_job]
    waiting = t_status == 3
    running = t_status == 2
    plan_gpu = np.where(is_gpu, _draw(rng, t_n, PLAN_GPU), 0.0)
    plan_cpu = np.where(role == 0, _draw(rng, t_n, PLAN_CPU_PS), _draw(rng, t_n, PLAN_CPU))
    plan_mem = _draw(rng, t_n, {float(m): w for m, w in PLAN_MEM_MIB.items()}) / 1024
    gpu_type = _pick(rng, t_n, GPU_TYPES)
    type_names = list(GPU_TYPES)
    typed = is_gpu & (rng.random(t_n) >= NO_GPU_TYPE_SHARE)
    gap = np.where(rng.random(t_n) < 0.5, 0.0, np.rint(_lognormal(rng, t_n, 2.0, 6.0, 3600)))
    task_start = submit[t_job] + gap
    task_wait = np.rint(_lognormal(rng, t_n, TASK_WAIT_MEDIAN_S, TASK_WAIT_MEAN_S, 7 * 86400))
    task_run = _lognormal(rng, t_n, INSTANCE_RUN_MEDIAN_S, INSTANCE_RUN_MEAN_S, INSTANCE_RUN_MAX_S)

    # instances (one per inst_num, in task order)
    i_task, _ = _segments(inst_num)
    i_n = len(i_task)
    i_job = t_job[i_task]
    i_start = task_start[i_task] + task_wait[i_task] + rng.integers(0, 4, size=i_n)
    i_run = np.clip(
        np.rint(task_run[i_task] * rng.uniform(0.9, 1.1, size=i_n)), 1, INSTANCE_RUN_MAX_S
    )
    i_end = i_start + i_run
    i_wait = waiting[i_task]
    i_running = running[i_task]
    i_gpu = is_gpu[i_task]
    # machines of the task's GPU type (any machine for CPU-only or untyped tasks)
    i_type = np.where(typed[i_task], gpu_type[i_task], -1)
    i_machine = rng.integers(0, len(machine_type), size=i_n)
    for t, name in enumerate(type_names):
        pool = np.flatnonzero(machine_type == name)
        sel = np.flatnonzero(i_type == t)
        i_machine[sel] = pool[rng.integers(0, len(pool), size=len(sel))]
    task_end = np.maximum.reduceat(i_end, np.cumsum(inst_num) - inst_num)
    job_end = np.maximum.reduceat(task_end, np.cumsum(k) - k)

    # instance lines: originals, earlier Failed attempts, exact repeats, nameless rows
    started = ~i_wait
    dup = started & (rng.random(i_n) < DUPLICATE_SHARE)
    rep = started & ~dup & (rng.random(i_n) < EXACT_REPEAT_SHARE)
    noname = rng.random(i_n) < NO_WORKER_SHARE
    stray = ~i_wait & ~i_running & (rng.random(i_n) < STRAY_ZERO_START_SHARE)
    src = np.concatenate(
        [np.arange(i_n), np.flatnonzero(dup), np.flatnonzero(rep), np.flatnonzero(noname)]
    )
    kind = np.concatenate(
        [
            np.zeros(i_n, np.int64),
            np.ones(int(dup.sum()), np.int64),
            np.full(int(rep.sum()), 2, np.int64),
            np.full(int(noname.sum()), 3, np.int64),
        ]
    )
    # earlier attempts and nameless rows come just before their original, repeats after
    order = np.lexsort((np.choose(kind, [1, 0, 2, 0]), src))
    src, kind = src[order], kind[order]
    inst_name = hex_ids(rng, i_n, 60).gather(pl.Series(src))
    worker = hex_ids(rng, i_n, 60).gather(pl.Series(src))
    line_status = np.where(
        kind == 0, t_status[i_task][src], np.where(kind == 2, t_status[i_task][src], 1)
    )
    earlier = rng.uniform(10, 600, size=len(src))
    start = np.where(
        (kind == 1) | (kind == 3),
        np.maximum(task_start[i_task][src], i_start[src] - earlier),
        i_start[src],
    )
    end = np.where((kind == 1) | (kind == 3), i_start[src], i_end[src])
    wait_line = i_wait[src]
    run_line = i_running[src] & ((kind == 0) | (kind == 2))
    start = _zero_where(np.rint(start), wait_line | (stray[src] & (kind == 0)))
    end = _zero_where(np.rint(end), wait_line | run_line)
    instance_frame = pl.DataFrame(
        {
            "job_name": job_name.gather(pl.Series(i_job[src])),
            "task_name": task_name.gather(pl.Series(i_task[src])),
            "inst_name": inst_name,
            "worker_name": worker.set(pl.Series(kind == 3), None),
            "inst_id": job_inst_id.gather(pl.Series(i_job[src])),
            "status": _strings(status_names, line_status),
            "start_time": start,
            "end_time": end,
            "machine": spec.get_column("machine")
            .gather(pl.Series(i_machine[src]))
            .set(pl.Series(wait_line), None),
        }
    )
    files += _write(out, "pai_instance_table", instance_frame)
    del instance_frame, inst_name

    # task and job tables
    task_frame = pl.DataFrame(
        {
            "job_name": job_name.gather(pl.Series(t_job)),
            "task_name": task_name,
            "inst_num": inst_num.astype(np.float64),
            "status": _strings(status_names, t_status),
            "start_time": _zero_where(task_start, waiting),
            "end_time": _zero_where(task_end, waiting | running),
            "plan_cpu": plan_cpu,
            "plan_mem": plan_mem,
            "plan_gpu": plan_gpu,
            "gpu_type": _strings(type_names, gpu_type).set(pl.Series(~typed), None),
        }
    )
    files += _write(out, "pai_task_table", task_frame)
    open_job = job_status >= 2
    files += _write(
        out,
        "pai_job_table",
        pl.DataFrame(
            {
                "job_name": job_name,
                "inst_id": job_inst_id,
                "user": user_pool.gather(pl.Series(job_user)),
                "status": _strings(status_names, job_status),
                "start_time": submit,
                "end_time": _null_where(job_end, open_job),
            }
        ),
    )

    # sensor: per-instance lifetime use, below the request most of the time
    s = np.flatnonzero(started & (rng.random(i_n) < SENSOR_SHARE))
    s_task = i_task[s]
    s_gpu = i_gpu[s]
    s_n = len(s)
    avg_mem = plan_mem[s_task] * _under_share(rng, s_n, 0.96, 0.8)
    gpu_mem = np.exp(rng.normal(np.log(2.0), 1.0, size=s_n))
    device = (rng.random(s_n) * np.maximum(machine_gpus[i_machine[s]], 1)).astype(np.int64)
    no_gpu = ~s_gpu | (machine_gpus[i_machine[s]] == 0)
    files += _write(
        out,
        "pai_sensor_table",
        pl.DataFrame(
            {
                "job_name": job_name.gather(pl.Series(i_job[s])),
                "task_name": task_name.gather(pl.Series(s_task)),
                "worker_name": worker_for(worker, src, kind, s),
                "inst_id": job_inst_id.gather(pl.Series(i_job[s])),
                "machine": spec.get_column("machine").gather(pl.Series(i_machine[s])),
                "gpu_name": pl.Series([f"/dev/nvidia{d}" for d in range(8)], dtype=pl.String)
                .gather(pl.Series(device))
                .set(pl.Series(no_gpu), None),
                "cpu_usage": plan_cpu[s_task] * _under_share(rng, s_n, 0.845, 0.8),
                "gpu_wrk_util": _null_where(
                    plan_gpu[s_task] * _under_share(rng, s_n, 0.98, 0.9), ~s_gpu
                ),
                "avg_mem": avg_mem,
                "max_mem": avg_mem * rng.uniform(1.0, 2.0, size=s_n),
                "avg_gpu_wrk_mem": _null_where(gpu_mem, ~s_gpu),
                "max_gpu_wrk_mem": _null_where(gpu_mem * rng.uniform(1.0, 1.5, size=s_n), ~s_gpu),
                "read": np.exp(rng.normal(np.log(2e7), 1.5, size=s_n)),
                "write": np.exp(rng.normal(np.log(1.5e7), 1.5, size=s_n)),
                "read_count": np.exp(rng.normal(np.log(3000), 1.0, size=s_n)),
                "write_count": np.exp(rng.normal(np.log(3400), 1.0, size=s_n)),
            }
        ),
    )

    # machine metric: machine-level averages over the instance's lifetime
    m = np.flatnonzero(started & (rng.random(i_n) < MACHINE_METRIC_SHARE))
    m_n = len(m)
    iowait = rng.uniform(0.001, 0.5, size=m_n)
    kernel = rng.uniform(1.0, 8.0, size=m_n)
    usr = rng.uniform(5.0, 60.0, size=m_n)
    files += _write(
        out,
        "pai_machine_metric",
        pl.DataFrame(
            {
                "worker_name": worker_for(worker, src, kind, m),
                "machine": spec.get_column("machine").gather(pl.Series(i_machine[m])),
                "start_time": i_start[m].astype(np.int64),
                "end_time": np.where(i_running[m], 0, i_end[m]).astype(np.int64),
                "machine_cpu_iowait": iowait,
                "machine_cpu_kernel": kernel,
                "machine_cpu_usr": usr,
                "machine_gpu": rng.uniform(0, 0.7, size=m_n) * 100 * machine_gpus[i_machine[m]],
                "machine_load_1": np.exp(rng.normal(np.log(15), 0.6, size=m_n)),
                "machine_net_receive": np.exp(rng.normal(np.log(1e8), 1.2, size=m_n)),
                "machine_num_worker": rng.uniform(1, 10, size=m_n),
                "machine_cpu": iowait + kernel + usr,
            }
        ),
    )

    # group tags: most jobs, groups recurring over a Zipf pool, a few workloads
    g = np.flatnonzero(rng.random(n) < TAGGED_JOB_SHARE)
    g_n = len(g)
    n_groups = max(1, n // 12)
    group_w = 1.0 / np.arange(1, n_groups + 1) ** 0.8
    group_pool = hex_ids(rng, n_groups, 32)
    first_task = np.cumsum(k) - k
    spec_type = np.where(typed[first_task + (k - 1)], gpu_type[first_task + (k - 1)], -1)[g]
    files += _write(
        out,
        "pai_group_tag_table",
        pl.DataFrame(
            {
                "inst_id": job_inst_id.gather(pl.Series(g)),
                "user": user_pool.gather(pl.Series(job_user[g])),
                "gpu_type_spec": _strings(type_names, np.maximum(spec_type, 0)).set(
                    pl.Series((spec_type < 0) | (rng.random(g_n) >= TYPE_SPEC_SHARE)), None
                ),
                "group": group_pool.gather(
                    pl.Series(rng.choice(n_groups, size=g_n, p=group_w / group_w.sum()))
                ).set(pl.Series(rng.random(g_n) < NO_GROUP_SHARE), None),
                "workload": _strings(WORKLOADS, rng.integers(0, len(WORKLOADS), size=g_n)).set(
                    pl.Series(rng.random(g_n) >= WORKLOAD_SHARE), None
                ),
            }
        ),
    )
    return files


def worker_for(worker: pl.Series, src: Ints, kind: Ints, instances: Ints) -> pl.Series:
    """The worker_name of each original instance in ``instances`` (``worker`` is by line;
    originals are the lines of kind 0)."""
    line_of = np.empty(int(src.max()) + 1 if len(src) else 0, dtype=np.int64)
    originals = np.flatnonzero(kind == 0)
    line_of[src[originals]] = originals
    return worker.gather(pl.Series(line_of[instances]))
