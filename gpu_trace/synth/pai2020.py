"""Synthetic Alibaba PAI 2020 traces, byte-compatible with ``cluster-trace-gpu-v2020``.

Writes the seven headerless CSVs ``pai_<table>.csv`` and their one-line ``.header`` files
exactly as upstream lays them out (the trace's README, github.com/alibaba/clusterdata cluster-trace-gpu-v2020): no header line,
LF endings, empty fields for missing values, times, counts and plans as floats with a
trailing ``.0`` (``4550879.0``, ``1.0``, ``600.0``), ``plan_mem`` as MiB / 1024
(``29.296875``), machine-metric times as integers (``6150435``), 24-hex job and machine
names, 60-hex instance, worker and inst ids, 12-hex users, 32-hex groups.

Calibration (Weng et al., "MLaaS in the Wild", NSDI'22, and the trace's README, unless noted):

- 1.2 tasks per job (``TASKS_PER_JOB``): ``FULL_SCALE_JOBS`` = 1,050,000 jobs give the
  published 1,260,920 tasks; 82 % of tasks request GPUs (1,037,085 of 1,260,920).
- Per-instance GPU request of GPU tasks (``PLAN_GPU``): mean 0.683 GPU, median 0.5, max 8,
  with the fractional shares (5 % ... 75 %) of Fig 5a's buckets.
- Instances per task: mostly one, with a heavy tail to ~1,000 (Fig 2b), for about 5.8
  instances per task: ~7 M instance lines (~2 GB), as the real 1.98 GB file implies.
- Instance runtime per task (the owners' ``runtime_i``, each instance within 10 % of
  it) lognormal with the median 480.7 s and mean 4,787 s, capped at the max 626,371 s;
  task wait (first instance start - task start) lognormal with the median 9 s and mean
  401.7 s.
- Request vs use: the sensor table's usage is below the request for 84.5 % (CPU),
  98 % (GPU) and 96 % (memory) of instances (cell 39's over-provisioning shares).
- Submissions follow a working-day profile in UTC+8 (Fig 3a/3b) over 66 days starting
  at 494,319 s, the real minimum start_time (1970-01-07 01:18:39 +08, issue #262).
- Machines: the real spec's composition (1,897 machines, 6,742 GPUs: P100 798 x 2, T4
  497 x 2, MISC 280 x 8, V100M32 135 x 8, V100 104 x 8, CPU 83 x 0, with each kind's
  CPUs and memory), seeded names and order; the product never reads data/samples.
- ~9 % of group tags carry a workload; ~65-70 % of tagged jobs share their group with at
  least 4 others (~65 % of tasks recur >= 5 times).
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
from dataclasses import dataclass
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
RUN_FIT_MEAN_S = 5200.0
"""Mean of the uncapped lognormal: the cap at the published max and the running instances
(no end) bring the observed mean down to about the published 4,787 s."""
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
    buffer: millions per second, no Python string per row.
    """
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
    bucket = rng.choice(4, size=n, p=[0.745, 0.19, 0.057, 0.008])
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


@dataclass
class _Jobs:
    name: pl.Series
    inst_id: pl.Series
    users: pl.Series
    user: Ints
    submit: Floats
    status: Ints
    """Index into ``STATUS_NAMES``: 0 Terminated, 1 Failed, 2 Running, 3 Waiting."""
    tasks: Ints


@dataclass
class _Tasks:
    job: Ints
    name: pl.Series
    inst_num: Ints
    status: Ints
    is_gpu: Bools
    typed: Bools
    gpu_type: Ints
    plan_gpu: Floats
    plan_cpu: Floats
    plan_mem: Floats
    start: Floats
    wait: Floats
    run: Floats


@dataclass
class _Instances:
    task: Ints
    job: Ints
    start: Floats
    end: Floats
    machine: Ints
    inst_name: pl.Series
    worker: pl.Series

    @property
    def n(self) -> int:
        return len(self.task)


STATUS_NAMES = list(JOB_STATUS)
TYPE_NAMES = list(GPU_TYPES)


def _jobs(rng: np.random.Generator, n: int) -> _Jobs:
    n_users = max(1, min(1350, -(-n // 40)))
    user_w = 1.0 / np.arange(1, n_users + 1) ** 1.1
    submit = diurnal_arrivals(
        rng,
        n,
        start_s=TRACE_START_S,
        days=TRACE_DAYS,
        hourly_weight=HOURLY,
        weekday_weight=WEEKDAY,
        utc_offset_s=UTC8,
    ).astype(np.float64)
    return _Jobs(
        name=hex_ids(rng, n, 24),
        inst_id=hex_ids(rng, n, 60),
        users=hex_ids(rng, n_users, 12),
        user=rng.choice(n_users, size=n, p=user_w / user_w.sum()),
        submit=submit,
        status=_pick(rng, n, JOB_STATUS),
        tasks=_draw(rng, n, {float(a): b for a, b in TASKS_PER_JOB.items()}).astype(np.int64),
    )


def _tasks(rng: np.random.Generator, jobs: _Jobs) -> _Tasks:
    """Tasks of every job, in job order: roles, requests, launch times, waits, runtimes."""
    job, rank = _segments(jobs.tasks)
    n = len(job)
    k = jobs.tasks[job]
    single = _pick(rng, n, SINGLE_TASK_NAMES)
    role = np.where(k == 1, 1, rank)  # 0 ps, 1 worker, 2 evaluator; single tasks work
    name = pl.Series(
        np.where(
            k == 1,
            np.asarray(list(SINGLE_TASK_NAMES), dtype=object)[single],
            np.asarray(ROLES, dtype=object)[rank],
        ),
        dtype=pl.String,
    )
    is_gpu = (role != 0) & ~((k == 1) & (rng.random(n) < SINGLE_CPU_SHARE))
    gap = np.where(rng.random(n) < 0.5, 0.0, np.rint(_lognormal(rng, n, 2.0, 6.0, 3600)))
    return _Tasks(
        job=job,
        name=name,
        inst_num=_inst_num(rng, role),
        status=jobs.status[job],
        is_gpu=is_gpu,
        typed=is_gpu & (rng.random(n) >= NO_GPU_TYPE_SHARE),
        gpu_type=_pick(rng, n, GPU_TYPES),
        plan_gpu=np.where(is_gpu, _draw(rng, n, PLAN_GPU), 0.0),
        plan_cpu=np.where(role == 0, _draw(rng, n, PLAN_CPU_PS), _draw(rng, n, PLAN_CPU)),
        plan_mem=_draw(rng, n, {float(m): w for m, w in PLAN_MEM_MIB.items()}) / 1024,
        start=jobs.submit[job] + gap,
        wait=np.rint(_lognormal(rng, n, TASK_WAIT_MEDIAN_S, TASK_WAIT_MEAN_S, 7 * 86400)),
        run=_lognormal(rng, n, INSTANCE_RUN_MEDIAN_S, RUN_FIT_MEAN_S, INSTANCE_RUN_MAX_S),
    )


def _instances(rng: np.random.Generator, tasks: _Tasks, spec: pl.DataFrame) -> _Instances:
    """``inst_num`` instances per task, in task order, on machines of the task's GPU type
    (any machine for CPU-only or untyped tasks).
    """
    task, _ = _segments(tasks.inst_num)
    n = len(task)
    start = tasks.start[task] + tasks.wait[task] + rng.integers(0, 4, size=n)
    run = np.clip(np.rint(tasks.run[task] * rng.uniform(0.9, 1.1, size=n)), 1, INSTANCE_RUN_MAX_S)
    machine_type = spec.get_column("gpu_type").to_numpy()
    wanted = np.where(tasks.typed[task], tasks.gpu_type[task], -1)
    machine = rng.integers(0, len(machine_type), size=n)
    for t, name in enumerate(TYPE_NAMES):
        pool = np.flatnonzero(machine_type == name)
        sel = np.flatnonzero(wanted == t)
        machine[sel] = pool[rng.integers(0, len(pool), size=len(sel))]
    return _Instances(
        task=task,
        job=tasks.job[task],
        start=start,
        end=start + run,
        machine=machine,
        inst_name=hex_ids(rng, n, 60),
        worker=hex_ids(rng, n, 60),
    )


def _instance_lines(
    rng: np.random.Generator, jobs: _Jobs, tasks: _Tasks, inst: _Instances, spec: pl.DataFrame
) -> pl.DataFrame:
    """The instance table: one line per instance, plus earlier Failed attempts and exact
    repeats of some (duplicate worker_names) and nameless Failed rows; Waiting instances
    carry 0.0 times and no machine, Running ones a 0.0 end.
    """
    status = tasks.status[inst.task]
    waiting, running = status == 3, status == 2
    dup = ~waiting & (rng.random(inst.n) < DUPLICATE_SHARE)
    rep = ~waiting & ~dup & (rng.random(inst.n) < EXACT_REPEAT_SHARE)
    noname = rng.random(inst.n) < NO_WORKER_SHARE
    stray = ~waiting & ~running & (rng.random(inst.n) < STRAY_ZERO_START_SHARE)
    # kind 0 original, 1 earlier attempt, 2 exact repeat, 3 nameless row
    src = np.concatenate([np.arange(inst.n), *(np.flatnonzero(m) for m in (dup, rep, noname))])
    kind = np.repeat(np.arange(4), [inst.n, dup.sum(), rep.sum(), noname.sum()])
    # earlier attempts and nameless rows come just before their original, repeats after
    order = np.lexsort((np.choose(kind, [1, 0, 2, 0]), src))
    src, kind = src[order], kind[order]
    retry = (kind == 1) | (kind == 3)
    earlier = rng.uniform(10, 600, size=len(src))
    task_start = tasks.start[inst.task][src]
    start = np.where(retry, np.maximum(task_start, inst.start[src] - earlier), inst.start[src])
    end = np.where(retry, inst.start[src], inst.end[src])
    wait_line = waiting[src]
    start = _zero_where(np.rint(start), wait_line | (stray[src] & (kind == 0)))
    end = _zero_where(np.rint(end), wait_line | (running[src] & ~retry))
    lines = pl.Series(src)
    return pl.DataFrame(
        {
            "job_name": jobs.name.gather(pl.Series(inst.job[src])),
            "task_name": tasks.name.gather(pl.Series(inst.task[src])),
            "inst_name": inst.inst_name.gather(lines),
            "worker_name": inst.worker.gather(lines).set(pl.Series(kind == 3), None),
            "inst_id": jobs.inst_id.gather(pl.Series(inst.job[src])),
            "status": _strings(STATUS_NAMES, np.where(retry, 1, status[src])),
            "start_time": start,
            "end_time": end,
            "machine": spec.get_column("machine")
            .gather(pl.Series(inst.machine[src]))
            .set(pl.Series(wait_line), None),
        }
    )


def _task_and_job_tables(
    jobs: _Jobs, tasks: _Tasks, inst: _Instances
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Tasks end with their last instance, jobs with their last task; Waiting tasks have
    0.0 times, Running ones a 0.0 end, Running and Waiting jobs an empty end.
    """
    task_end = np.maximum.reduceat(inst.end, np.cumsum(tasks.inst_num) - tasks.inst_num)
    job_end = np.maximum.reduceat(task_end, np.cumsum(jobs.tasks) - jobs.tasks)
    waiting, running = tasks.status == 3, tasks.status == 2
    task_frame = pl.DataFrame(
        {
            "job_name": jobs.name.gather(pl.Series(tasks.job)),
            "task_name": tasks.name,
            "inst_num": tasks.inst_num.astype(np.float64),
            "status": _strings(STATUS_NAMES, tasks.status),
            "start_time": _zero_where(tasks.start, waiting),
            "end_time": _zero_where(task_end, waiting | running),
            "plan_cpu": tasks.plan_cpu,
            "plan_mem": tasks.plan_mem,
            "plan_gpu": tasks.plan_gpu,
            "gpu_type": _strings(TYPE_NAMES, tasks.gpu_type).set(pl.Series(~tasks.typed), None),
        }
    )
    job_frame = pl.DataFrame(
        {
            "job_name": jobs.name,
            "inst_id": jobs.inst_id,
            "user": jobs.users.gather(pl.Series(jobs.user)),
            "status": _strings(STATUS_NAMES, jobs.status),
            "start_time": jobs.submit,
            "end_time": _null_where(job_end, jobs.status >= 2),
        }
    )
    return task_frame, job_frame


def _sensor(
    rng: np.random.Generator, jobs: _Jobs, tasks: _Tasks, inst: _Instances, spec: pl.DataFrame
) -> pl.DataFrame:
    """Per-instance lifetime use for a share of started instances, below the request
    most of the time (the published over-provisioning shares).
    """
    started = tasks.status[inst.task] != 3
    s = np.flatnonzero(started & (rng.random(inst.n) < SENSOR_SHARE))
    n = len(s)
    task = inst.task[s]
    gpu = tasks.is_gpu[task]
    machine_gpus = spec.get_column("cap_gpu").to_numpy()[inst.machine[s]]
    avg_mem = tasks.plan_mem[task] * _under_share(rng, n, 0.96, 0.8)
    gpu_mem = np.exp(rng.normal(np.log(2.0), 1.0, size=n))
    device = (rng.random(n) * np.maximum(machine_gpus, 1)).astype(np.int64)
    devices = pl.Series([f"/dev/nvidia{d}" for d in range(8)], dtype=pl.String)
    return pl.DataFrame(
        {
            "job_name": jobs.name.gather(pl.Series(inst.job[s])),
            "task_name": tasks.name.gather(pl.Series(task)),
            "worker_name": inst.worker.gather(pl.Series(s)),
            "inst_id": jobs.inst_id.gather(pl.Series(inst.job[s])),
            "machine": spec.get_column("machine").gather(pl.Series(inst.machine[s])),
            "gpu_name": devices.gather(pl.Series(device)).set(
                pl.Series(~gpu | (machine_gpus == 0)), None
            ),
            "cpu_usage": tasks.plan_cpu[task] * _under_share(rng, n, 0.845, 0.8),
            "gpu_wrk_util": _null_where(
                tasks.plan_gpu[task] * _under_share(rng, n, 0.98, 0.9), ~gpu
            ),
            "avg_mem": avg_mem,
            "max_mem": avg_mem * rng.uniform(1.0, 2.0, size=n),
            "avg_gpu_wrk_mem": _null_where(gpu_mem, ~gpu),
            "max_gpu_wrk_mem": _null_where(gpu_mem * rng.uniform(1.0, 1.5, size=n), ~gpu),
            "read": np.exp(rng.normal(np.log(2e7), 1.5, size=n)),
            "write": np.exp(rng.normal(np.log(1.5e7), 1.5, size=n)),
            "read_count": np.exp(rng.normal(np.log(3000), 1.0, size=n)),
            "write_count": np.exp(rng.normal(np.log(3400), 1.0, size=n)),
        }
    )


def _machine_metric(
    rng: np.random.Generator, tasks: _Tasks, inst: _Instances, spec: pl.DataFrame
) -> pl.DataFrame:
    """Machine-level averages over the lifetime of a share of started instances, with
    integer times as upstream writes them; ``machine_cpu`` is usr + kernel + iowait and
    ``machine_gpu`` is summed over the machine's GPUs (so it exceeds 100).
    """
    status = tasks.status[inst.task]
    m = np.flatnonzero((status != 3) & (rng.random(inst.n) < MACHINE_METRIC_SHARE))
    n = len(m)
    iowait = rng.uniform(0.001, 0.5, size=n)
    kernel = rng.uniform(1.0, 8.0, size=n)
    usr = rng.uniform(5.0, 60.0, size=n)
    gpus = spec.get_column("cap_gpu").to_numpy()[inst.machine[m]]
    return pl.DataFrame(
        {
            "worker_name": inst.worker.gather(pl.Series(m)),
            "machine": spec.get_column("machine").gather(pl.Series(inst.machine[m])),
            "start_time": inst.start[m].astype(np.int64),
            "end_time": np.where(status[m] == 2, 0, inst.end[m]).astype(np.int64),
            "machine_cpu_iowait": iowait,
            "machine_cpu_kernel": kernel,
            "machine_cpu_usr": usr,
            "machine_gpu": rng.uniform(0, 0.7, size=n) * 100 * gpus,
            "machine_load_1": np.exp(rng.normal(np.log(15), 0.6, size=n)),
            "machine_net_receive": np.exp(rng.normal(np.log(1e8), 1.2, size=n)),
            "machine_num_worker": rng.uniform(1, 10, size=n),
            "machine_cpu": iowait + kernel + usr,
        }
    )


def _group_tags(rng: np.random.Generator, jobs: _Jobs, tasks: _Tasks) -> pl.DataFrame:
    """Tags for most jobs: groups recurring over a Zipf pool (most jobs share theirs
    with several others), a workload for ~9 %, the requested GPU type for some.
    """
    n = len(jobs.submit)
    g = np.flatnonzero(rng.random(n) < TAGGED_JOB_SHARE)
    n_tagged = len(g)
    n_groups = max(1, n // 4)
    group_w = 1.0 / np.arange(1, n_groups + 1) ** 0.8
    groups = hex_ids(rng, n_groups, 32)
    last_task = (np.cumsum(jobs.tasks) - 1)[g]
    spec_type = np.where(tasks.typed[last_task], tasks.gpu_type[last_task], -1)
    no_spec = (spec_type < 0) | (rng.random(n_tagged) >= TYPE_SPEC_SHARE)
    group = rng.choice(n_groups, size=n_tagged, p=group_w / group_w.sum())
    workload = rng.integers(0, len(WORKLOADS), size=n_tagged)
    return pl.DataFrame(
        {
            "inst_id": jobs.inst_id.gather(pl.Series(g)),
            "user": jobs.users.gather(pl.Series(jobs.user[g])),
            "gpu_type_spec": _strings(TYPE_NAMES, np.maximum(spec_type, 0)).set(
                pl.Series(no_spec), None
            ),
            "group": groups.gather(pl.Series(group)).set(
                pl.Series(rng.random(n_tagged) < NO_GROUP_SHARE), None
            ),
            "workload": _strings(WORKLOADS, workload).set(
                pl.Series(rng.random(n_tagged) >= WORKLOAD_SHARE), None
            ),
        }
    )


def write(out: Path, *, jobs: int, seed: int) -> list[Path]:
    """Write a synthetic PAI 2020 trace of ``jobs`` jobs into ``out``; returns the 14
    files (7 CSVs and their headers). Each table is written as soon as it is built, so
    the largest (instances, ~1.9 GB at full scale) is never held twice.
    """
    rng = np.random.default_rng(seed)
    out.mkdir(parents=True, exist_ok=True)
    spec = machines(rng)
    files = _write(out, "pai_machine_spec", spec)
    job = _jobs(rng, jobs)
    task = _tasks(rng, job)
    inst = _instances(rng, task, spec)
    files += _write(out, "pai_instance_table", _instance_lines(rng, job, task, inst, spec))
    task_frame, job_frame = _task_and_job_tables(job, task, inst)
    files += _write(out, "pai_task_table", task_frame)
    files += _write(out, "pai_job_table", job_frame)
    files += _write(out, "pai_sensor_table", _sensor(rng, job, task, inst, spec))
    files += _write(out, "pai_machine_metric", _machine_metric(rng, task, inst, spec))
    files += _write(out, "pai_group_tag_table", _group_tags(rng, job, task))
    return files
