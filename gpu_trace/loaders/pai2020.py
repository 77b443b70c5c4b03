"""Alibaba PAI GPU trace 2020 (alibaba/clusterdata ``cluster-trace-gpu-v2020``).

Input: a folder with the seven headerless CSVs ``pai_<table>.csv`` (and their ``.header``
files, beside them or in ``headers/``), or one of those CSVs. Any subset loads; what each
file becomes (the trace's README, github.com/alibaba/clusterdata cluster-trace-gpu-v2020):

=====================  ============================================  ==================
file                   canonical table(s)                            dataset
=====================  ============================================  ==================
pai_job_table          ``jobs`` (one row per job_name)               ``trace``
pai_task_table         ``tasks`` (one row per job_name, task_name)   ``trace``
pai_instance_table     ``placements`` (one row per worker_name)      ``trace``
pai_group_tag_table    ``job_tags``; its group fills ``jobs.vc``     ``trace``
pai_sensor_table       ``usage``, scope instance (long form)         ``sensor``
pai_machine_metric     ``usage``, scope machine (long form)          ``machine_metric``
pai_machine_spec       ``machines`` + one ``capacity`` row           ``machine_spec``
=====================  ============================================  ==================

Conventions (each recorded in the written files' metadata too):

- Times are float seconds since a hidden epoch; stored as 1970-01-01T00:00:00Z + seconds
  with ``time_basis = hidden_epoch`` and ``source_tz = Asia/Shanghai``: viewed in UTC+8
  the time of day and weekday are the real ones, the dates are not. ``0`` means unknown:
  as in the owners' ``utils.py``, ``start_time == 0`` makes both start and end null;
  ``end_time == 0`` (a record still running) makes the end null; an empty field is null.
- ``jobs``: ``submit_time`` is the job table's ``start_time`` (the submission), the
  job's ``start_time`` its earliest task start (else its earliest instance start, when
  the task table lacks it), ``end_time`` the job table's ``end_time``. ``gpus`` is
  ``sum(inst_num x plan_gpu) / 100`` over the job's tasks (``plan_gpu`` is per
  instance, issue #129); ``gpus_raw`` keeps that sum in percent. ``cpus`` likewise,
  ``mem_bytes`` from GB x 2^30. Null when the job has no task with a value (no task
  table, or tasks missing); ``gpu_type`` is the tasks' distinct types joined with ``|``.
  ``vc`` is the group tag's ``group``, else the user (``utils.py``); ``nodes`` the
  distinct machines of its instances; ``attempts`` 1.
- Duplicates: instances follow the owners' rule (see ``pai2020_instances``); a repeated
  job_name, (job_name, task_name), inst_id in group tags or machine keeps its last line.
  Every dropped line is quarantined with ``duplicate ..., superseded by line N``.
- Instances whose job (or task) is not in the job (task) table are kept.
- Status: Terminated -> completed, Failed -> failed, Running -> running, Waiting ->
  pending, anything else -> unknown; the raw value is kept.
- Machine spec: ``gpu_type`` as written (``CPU`` for the 83 GPU-less machines), GPU
  memory where the model fixes it (V100M32 32 GiB, V100 and T4 16 GiB), ``cap_mem`` GB
  x 2^30. The capacity row (basis ``machine_list``) holds the GPUs of the machines
  written, at the hidden epoch's origin with no period (it holds for the whole trace).

- Units: ``plan_cpu``/``plan_gpu`` are percent of one core/GPU per instance (``per``:
  exact decimal division); 'GB' is 2^30 bytes (``plan_mem`` 29.296875 = 30,000 MiB /
  1024). Raw plans stay in ``tasks.plan_*``.
- Jobs, tasks and instances are matched on 128-bit hashes of job_name (and task_name),
  which join several times faster than the strings; the chance that two of a million
  names collide is about 1e-27.
- Re-ingesting replaces each (table, dataset) written; a table whose file is absent from
  the new folder keeps its old rows (ingest the same set of files again).

Sanity bounds (values past them are quarantined, never silently capped): times below
1e10 s, ``inst_num`` below 1e6, plans and capacities below 1e6, usage values below 1e15.
A job's summed memory beyond int64 (only reachable with absurd plans) is null.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from gpu_trace.errors import InputError
from gpu_trace.loaders.base import Batch
from gpu_trace.loaders.pai2020_files import (
    CLUSTER,
    GIB,
    GROUP_TAG,
    INSTANCE,
    JOB,
    MACHINE_METRIC_SPEC,
    MACHINE_SPEC,
    MACHINE_SPEC_SPEC,
    SENSOR_SPEC,
    SOURCE,
    TASK,
    TRACE,
    Input,
    fast_read,
    find_inputs,
    first,
    instant,
    metadata,
    number_checks,
    parse,
    provenance,
    rejects,
    seconds,
    select_tables,
    status,
    supersede,
    time_checks,
    time_columns,
    with_raw,
)
from gpu_trace.loaders.pai2020_instances import SEED_A, job_hash, read_instances, task_hash
from gpu_trace.loaders.pai2020_usage import machine_metric, sensor
from gpu_trace.loaders.store_order import in_store_order
from gpu_trace.loaders.textfile import LINE, RAW, REASON
from gpu_trace.loaders.units import per
from gpu_trace.plugins import LoaderPlugin, option
from gpu_trace.schemas import TABLES
from gpu_trace.values import split_list

AMOUNT_MAX = 1e6
PLANS = ("plan_gpu", "plan_cpu", "plan_mem")
GPU_MEM_GIB = {"V100M32": 32, "V100": 16, "T4": 16}
"""GPU memory where the model name fixes it; P100 (12 or 16 GiB) and MISC (K40m, K80,
M60) stay null rather than guessed."""


def _bounded(names: Sequence[str], limit: float) -> list[tuple[pl.Expr, pl.Expr | str]]:
    return [
        (pl.col(n) >= limit, pl.format(f"{n} {{}} is out of range (>= {limit:g})", pl.col(n)))
        for n in names
    ]


def _read(inp: Input, *checks: tuple[pl.Expr, pl.Expr | str]) -> pl.DataFrame:
    """Parse and check a small table (at most a few hundred MB) into memory: polars' CSV
    reader where it can vouch for the lines (``fast_read``), else line-exactly. Rows
    quarantined later (:func:`_superseded`) get their text from :func:`with_raw`.
    """
    fast = fast_read(inp, checks)
    return parse(inp).with_columns(first(*checks)).collect() if fast is None else fast


def _superseded(inp: Input, frame: pl.DataFrame, keys: list[str], what: str) -> pl.DataFrame:
    """``supersede`` with the quarantined lines' text read back where the fast path
    left it out.
    """
    return with_raw(supersede(frame, keys, what), inp)


def read_jobs(inp: Input) -> pl.DataFrame:
    """pai_job_table checked (times), a job name given twice keeping its last line."""
    return _superseded(inp, _read(inp, *time_checks()), ["job_name"], "job_name")


def read_tasks(inp: Input) -> pl.DataFrame:
    """pai_task_table checked (plans as bounded numbers, inst_num x plan_mem within 64-bit
    bytes, times), a (job, task) given twice keeping its last line.
    """
    plans = ["inst_num", "plan_cpu", "plan_mem", "plan_gpu"]
    task_mem = pl.col("inst_num") * pl.col("plan_mem")
    frame = _read(
        inp,
        *number_checks(plans, whole=["inst_num"]),
        *_bounded(plans, AMOUNT_MAX),
        (
            task_mem * GIB >= 2.0**63,
            pl.format("inst_num x plan_mem = {} GB does not fit in 64-bit bytes", task_mem),
        ),
        *time_checks(),
    )
    return _superseded(inp, frame, ["job_name", "task_name"], "task (job_name, task_name)")


def read_tags(inp: Input) -> pl.DataFrame:
    """pai_group_tag_table, a later line for an instance superseding an earlier one."""
    return _superseded(inp, _read(inp), ["inst_id"], "inst_id")


def _bytes(gb: pl.Expr) -> pl.Expr:
    """GB (2^30 bytes) -> whole bytes; beyond int64 (only absurd sums) -> null."""
    return (gb * GIB).round().cast(pl.Int64, strict=False)


def _good(frame: pl.DataFrame) -> pl.LazyFrame:
    """The rows without a reason; a frame without rejects as it is (a filter that keeps
    every row still copies every column).
    """
    if frame.get_column(REASON).null_count() == frame.height:
        return frame.lazy()
    return frame.lazy().filter(pl.col(REASON).is_null())


def _ordered(table: str, rows: pl.LazyFrame) -> tuple[pl.DataFrame, bool]:
    """``rows`` collected, in the store's order for ``table`` when an integer sort can
    vouch for it (``store_order``), and whether the writer must still sort them.
    """
    frame = rows.collect()
    ordered = in_store_order(frame, TABLES[table].sort_by)
    return (frame, True) if ordered is None else (ordered, False)


@dataclass(frozen=True)
class TaskRows:
    """The good task lines, in file order and (where an integer sort vouches for it) in
    the store's order, and which of them share their job with another task line.
    """

    good: pl.DataFrame
    ordered: pl.DataFrame | None
    """``good`` sorted as the store writes ``tasks`` (job_id, task), or None."""
    repeated: pl.Series
    """Per row of ``good``: its job_name has several good task lines."""

    @staticmethod
    def of(tasks: pl.DataFrame) -> TaskRows:
        """Order the good lines before the canonical columns are built (fewer columns
        to gather; job_id, task are job_name, task_name renamed). In that order a job's
        lines are adjacent, so which jobs have several is a comparison of neighbours,
        ~5x cheaper than ``is_duplicated`` over the job-name hashes.
        """
        good = _good(tasks).drop(RAW, REASON).with_row_index("_row").collect()
        ordered = in_store_order(good, ["job_name", "task_name"])
        if ordered is None:
            repeated = good.select(pl.col("job_name").hash(SEED_A).is_duplicated()).to_series()
        else:
            # neighbours compared by job-name hash (~4x cheaper than the 24-byte
            # names); two names sharing it are told apart by _task_totals' clash check
            name = ordered.select(pl.col("job_name").hash(SEED_A)).to_series()
            near = (name == name.shift(1)) | (name == name.shift(-1))
            repeated = pl.repeat(value=False, n=good.height, eager=True).scatter(
                ordered.get_column("_row"), near.fill_null(value=False)
            )
        return TaskRows(
            good.drop("_row"), None if ordered is None else ordered.drop("_row"), repeated
        )


def tasks_batch(inp: Input, tasks: pl.DataFrame, task_rows: TaskRows) -> Batch:
    """The canonical ``tasks`` rows of the good task lines, and the rejects."""
    inst = pl.col("inst_num")
    ordered = task_rows.ordered
    rows = (task_rows.good if ordered is None else ordered).select(
        *provenance(TRACE),
        pl.col("job_name").alias("job_id"),
        pl.col("task_name").alias("task"),
        inst.cast(pl.Int32).alias("instances"),
        status().alias("status"),
        pl.col("status").alias("raw_status"),
        instant(seconds("start_time")).alias("start_time"),
        instant(seconds("end_time")).alias("end_time"),
        (seconds("end_time") - seconds("start_time")).alias("run_s"),
        per(inst * pl.col("plan_gpu"), 100).alias("gpus"),
        per(pl.col("plan_gpu"), 100).alias("gpus_per_instance"),
        per(inst * pl.col("plan_cpu"), 100).alias("cpus"),
        per(pl.col("plan_cpu"), 100).alias("cpus_per_instance"),
        _bytes(inst * pl.col("plan_mem")).alias("mem_bytes"),
        _bytes(pl.col("plan_mem")).alias("mem_bytes_per_instance"),
        pl.col("plan_gpu").alias("plan_gpu_pct"),
        pl.col("plan_cpu").alias("plan_cpu_pct"),
        pl.col("plan_mem").alias("plan_mem_gb"),
        pl.col("gpu_type"),
        *time_columns(),
    )
    return Batch(
        "tasks",
        TRACE,
        inp.info,
        rows,
        rejects(tasks, inp, "tasks", TRACE),
        cluster=CLUSTER,
        sort=ordered is None,
        metadata=metadata(
            inp,
            units=(
                "plan_gpu and plan_cpu are percent of one GPU / core per instance; plan_mem "
                "is GB (2^30 bytes) per instance; task totals multiply by inst_num"
            ),
        ),
    )


def task_gpus(tasks: pl.DataFrame) -> pl.DataFrame:
    """(job_name, task_name) hash -> GPUs per instance, for placements."""
    return (
        _good(tasks)
        .select(*task_hash(), per(pl.col("plan_gpu"), 100).alias("gpus_per_instance"))
        .collect()
    )


def _task_totals(task_rows: TaskRows) -> pl.DataFrame:
    """Per job (keyed by the job-name hashes ``_j1, _j2``, which group twice as fast as
    the strings): summed requests in source units, GPU types, earliest task start.

    Most jobs have one task (70 % of the rows of a synthetic trace). Their totals are
    the row's own values, exactly what the aggregation gives a group of one row (a sum
    of one value is that value, its only GPU type the type), so only the rows whose
    ``_j1`` repeats are grouped: ~0.4 s less per million tasks.
    """

    def total(plan: str) -> pl.Expr:
        amount = pl.col("inst_num") * pl.col(plan)
        return pl.when(amount.count() > 0).then(amount.sum())

    keys = ["_j1", "_j2"]
    good = task_rows.good.select(
        *job_hash(), "inst_num", "plan_gpu", "plan_cpu", "plan_mem", "start_time", "gpu_type"
    )
    repeated = task_rows.repeated
    out = ["_gpu_pct", "_cpu_pct", "_mem_gb", "gpu_type", "_task_start_s"]
    alone = good.filter(~repeated).select(
        *keys,
        *((pl.col("inst_num") * pl.col(p)).alias(a) for p, a in zip(PLANS, out[:3], strict=True)),
        pl.col("gpu_type"),
        seconds("start_time").alias("_task_start_s"),
    )
    good = good.filter(repeated)
    types = pl.col("gpu_type").drop_nulls()
    aggs = [
        total("plan_gpu").alias("_gpu_pct"),
        total("plan_cpu").alias("_cpu_pct"),
        total("plan_mem").alias("_mem_gb"),
        types.first().alias("_type"),
        types.n_unique().alias("_types"),
        seconds("start_time").min().alias("_task_start_s"),
    ]
    # grouped on _j1 alone (a one-column key groups ~2x faster), which is grouping on
    # both hashes unless two jobs share _j1 (checked: then both keys are used)
    totals = good.group_by("_j1").agg(
        pl.col("_j2").first(), (pl.col("_j2").n_unique() > 1).alias("_clash"), *aggs
    )
    if totals.get_column("_clash").any():
        totals = good.group_by(keys).agg(*aggs)
    totals = totals.rename({"_type": "gpu_type"})
    # the few jobs whose tasks got different GPU types list them all, sorted
    several = totals.filter(pl.col("_types") > 1).select(keys)
    if several.height:
        joined = (
            good.join(several, on=keys, how="semi")
            .group_by(keys)
            .agg(types.unique().sort().str.join("|").alias("_joined"))
        )
        totals = totals.join(joined, on=keys, how="left").with_columns(
            pl.coalesce("_joined", "gpu_type").alias("gpu_type")
        )
    return pl.concat([alone, totals.select(*keys, *out)])


def _join_on_job(frame: pl.DataFrame, other: pl.DataFrame) -> pl.DataFrame:
    """``frame`` left-joined with ``other`` (one row per job, keyed by ``_j1, _j2``),
    frame's row order kept. Joined on ``_j1`` alone, ~2.5x cheaper than the two-column
    key; that is the two-key join whenever ``_j1`` is unique in ``other`` and every
    matched row agrees on ``_j2`` (checked: else the two-key join runs).
    """
    keys = ["_j1", "_j2"]
    if other.get_column("_j1").n_unique() == other.height:
        # only the keys go through the join (nothing of frame is gathered): with unique
        # right keys a left join keeps frame's rows, one each, in frame's order
        joined = frame.select(keys).join(
            other.rename({"_j2": "_j2_other"}), on="_j1", how="left", maintain_order="left"
        )
        clash = (pl.col("_j2_other").is_not_null() & (pl.col("_j2_other") != pl.col("_j2"))).any()
        if joined.height == frame.height and not joined.select(clash).item():
            return frame.hstack(joined.drop(*keys, "_j2_other").get_columns())
    return frame.join(other, on=keys, how="left", maintain_order="left")


def jobs_batch(
    inp: Input,
    jobs: pl.DataFrame,
    tasks: TaskRows | None,
    per_job: pl.DataFrame | None,
    tags: pl.DataFrame | None,
    notes: dict[str, str],
) -> Batch:
    """The canonical ``jobs`` rows: job lines with what their tasks, instances and tags add."""
    frame = _good(jobs).with_columns(job_hash()).collect()
    if tasks is not None:
        frame = _join_on_job(frame, _task_totals(tasks))
    else:
        frame = frame.with_columns(
            *(pl.lit(None, dtype=pl.Float64).alias(c) for c in ("_gpu_pct", "_cpu_pct")),
            pl.lit(None, dtype=pl.Float64).alias("_mem_gb"),
            pl.lit(None, dtype=pl.String).alias("gpu_type"),
            pl.lit(None, dtype=pl.Float64).alias("_task_start_s"),
        )
    if per_job is not None:
        frame = _join_on_job(frame, per_job)
    else:
        frame = frame.with_columns(
            pl.lit(None, dtype=pl.Float64).alias("inst_start_s"),
            pl.lit(None, dtype=pl.UInt32).alias("nodes"),
        )
    if tags is not None:
        groups = _good(tags).select("inst_id", pl.col("group").alias("_group")).collect()
        frame = frame.join(groups, on="inst_id", how="left", maintain_order="left")
    else:
        frame = frame.with_columns(pl.lit(None, dtype=pl.String).alias("_group"))
    submit = seconds("start_time")
    start = pl.coalesce("_task_start_s", "inst_start_s")
    end = seconds("end_time")
    lazy_rows = frame.lazy().select(
        *provenance(TRACE),
        pl.col("job_name").alias("job_id"),
        pl.col("user"),
        pl.coalesce("_group", "user").alias("vc"),
        instant(submit).alias("submit_time"),
        instant(start).alias("start_time"),
        instant(end).alias("end_time"),
        (start - submit).alias("queue_s"),
        (end - start).alias("run_s"),
        per(pl.col("_gpu_pct"), 100).alias("gpus"),
        pl.col("_gpu_pct").alias("gpus_raw"),
        pl.when(pl.col("_gpu_pct").is_not_null()).then(pl.lit("percent")).alias("gpus_raw_unit"),
        per(pl.col("_cpu_pct"), 100).alias("cpus"),
        _bytes(pl.col("_mem_gb")).alias("mem_bytes"),
        pl.col("gpu_type"),
        pl.when(pl.col("nodes") > 0).then(pl.col("nodes")).cast(pl.Int32).alias("nodes"),
        pl.lit(1, dtype=pl.Int32).alias("attempts"),
        status().alias("status"),
        pl.col("status").alias("raw_status"),
        *time_columns(),
    )
    rows, sort = _ordered("jobs", lazy_rows)
    return Batch(
        "jobs",
        TRACE,
        inp.info,
        rows,
        rejects(jobs, inp, "jobs", TRACE),
        cluster=CLUSTER,
        sort=sort,
        metadata=metadata(inp, **notes),
    )


def tags_batch(inp: Input, tags: pl.DataFrame, jobs: pl.DataFrame | None) -> Batch:
    """The ``job_tags`` rows, each tag attached to the job owning its instance."""
    frame = _good(tags)
    if jobs is not None:
        owners = (
            _good(jobs)
            .filter(pl.col("inst_id").is_not_null())
            .sort(LINE)
            .unique("inst_id", keep="last", maintain_order=True)
            .select("inst_id", pl.col("job_name").alias("_job"))
        )
        frame = frame.join(owners, on="inst_id", how="left", maintain_order="left")
    else:
        frame = frame.with_columns(pl.lit(None, dtype=pl.String).alias("_job"))
    rows = frame.select(
        *provenance(TRACE),
        pl.col("inst_id").alias("job_key"),
        pl.col("_job").alias("job_id"),
        pl.col("user"),
        pl.col("group").alias("group_tag"),
        pl.col("workload"),
        pl.col("gpu_type_spec").alias("gpu_type_request"),
    )
    note = "job table's inst_id" if jobs is not None else "null: pai_job_table.csv not read"
    return Batch(
        "job_tags",
        TRACE,
        inp.info,
        rows,
        rejects(tags, inp, "job_tags", TRACE),
        cluster=CLUSTER,
        metadata=metadata(inp, job_id_from=note),
    )


def machine_batches(inp: Input) -> Iterator[Batch]:
    """pai_machine_spec -> ``machines`` (a machine given twice keeping its last line) and
    the cluster's ``capacity`` row.
    """
    caps = ["cap_cpu", "cap_mem", "cap_gpu"]
    frame = _read(
        inp,
        *number_checks(caps, whole=["cap_gpu"]),
        *_bounded(caps, AMOUNT_MAX),
    )
    frame = _superseded(inp, frame, ["machine"], "machine")
    machines = (
        _good(frame)
        .select(
            *provenance(MACHINE_SPEC),
            pl.col("machine").alias("machine_id"),
            pl.col("cap_gpu").cast(pl.Int32).alias("gpus"),
            pl.col("gpu_type"),
            (
                pl.col("gpu_type").replace_strict(GPU_MEM_GIB, default=None, return_dtype=pl.Int64)
                * GIB
            ).alias("gpu_mem_bytes"),
            pl.col("cap_cpu").alias("cpus"),
            _bytes(pl.col("cap_mem")).alias("mem_bytes"),
        )
        .collect()
    )
    meta = metadata(inp, gpu_mem="V100M32 32 GiB, V100 and T4 16 GiB, P100 and MISC unknown")
    yield Batch(
        "machines",
        MACHINE_SPEC,
        inp.info,
        machines,
        rejects(frame, inp, "machines", MACHINE_SPEC),
        cluster=CLUSTER,
        metadata=meta,
    )
    capacity = pl.DataFrame(
        {
            "source": [SOURCE],
            "dataset": [MACHINE_SPEC],
            "cluster": [CLUSTER],
            "time": [0.0],
            "period_s": [None],
            "vc": [None],
            "gpus": [int(machines.get_column("gpus").fill_null(0).sum())],
            "basis": ["machine_list"],
        },
        schema_overrides={"period_s": pl.Float64, "vc": pl.String},
    ).with_columns(instant(pl.col("time")).alias("time"))
    yield Batch(
        "capacity",
        MACHINE_SPEC,
        inp.info,
        capacity,
        rows_read=1,
        cluster=CLUSTER,
        metadata={
            **meta,
            "derived": (
                f"one row: the cap_gpu sum of the {machines.height} machines written; time "
                "= the hidden epoch's origin, period_s null = the whole trace"
            ),
        },
    )


def _note(inp: Input | None, what: str, absent: str) -> str:
    return f"{what} from {inp.path.name}" if inp is not None else f"{absent} (no {what} input)"


class Pai2020Loader:
    """Loader for the Alibaba PAI 2020 trace (a folder of ``pai_*.csv``, or one file)."""

    name = SOURCE
    version = "1"

    def batches(
        self, path: Path, *, tables: str | Sequence[str] | None = None, **_: Any
    ) -> Iterator[Batch]:
        """Yield machines/capacity, tasks, placements, jobs, job_tags and usage batches
        for the tables found (``tables`` restricts them: ``job,task,instance``...).
        """
        specs = select_tables(tables)
        found = {i.spec.short: i for i in find_inputs(path, specs)}
        if not found:
            wanted = ", ".join(s.csv for s in specs)
            raise InputError(path, f"no PAI 2020 input found (looked for {wanted})")

        if spec_in := found.get(MACHINE_SPEC_SPEC.short):
            yield from machine_batches(spec_in)

        job_in, task_in = found.get(JOB.short), found.get(TASK.short)
        inst_in, tag_in = found.get(INSTANCE.short), found.get(GROUP_TAG.short)
        jobs = read_jobs(job_in) if job_in else None
        tasks = read_tasks(task_in) if task_in else None
        tags = read_tags(tag_in) if tag_in else None
        task_rows = TaskRows.of(tasks) if tasks is not None else None
        notes = {
            "requests": _note(
                task_in, "pai_task_table.csv", "gpus, cpus, mem_bytes, gpu_type null"
            ),
            "start_time": (
                "earliest task start_time, else earliest instance start_time "
                f"[{_note(task_in, 'tasks', 'no task starts')}; "
                f"{_note(inst_in, 'instances', 'no instance starts, nodes null')}]"
            ),
            "vc": _note(tag_in, "group", "user (no group tags)"),
        }
        with ThreadPoolExecutor(max_workers=1) as pool:
            # without instances, the jobs rows need nothing the tasks batch's write
            # produces: they are built in a thread (polars releases the GIL) while the
            # store writes the tasks
            early = (
                pool.submit(jobs_batch, job_in, jobs, task_rows, None, tags, notes)
                if job_in and jobs is not None and not inst_in
                else None
            )
            if task_in and tasks is not None and task_rows is not None:
                yield tasks_batch(task_in, tasks, task_rows)
            per_job = None
            if inst_in:
                instances = read_instances(inst_in, task_gpus(tasks) if tasks is not None else None)
                per_job = instances.per_job
                yield instances.batch
            if early is not None:
                yield early.result()
            elif job_in and jobs is not None:
                yield jobs_batch(job_in, jobs, task_rows, per_job, tags, notes)
        if tag_in and tags is not None:
            yield tags_batch(tag_in, tags, jobs)
        del jobs, tasks, task_rows, tags, per_job
        if sensor_in := found.get(SENSOR_SPEC.short):
            yield sensor(sensor_in)
        if metric_in := found.get(MACHINE_METRIC_SPEC.short):
            yield machine_metric(metric_in)


def _tables(text: str) -> str:
    # "a,b" and repeated flags alike; the names are checked by select_tables (exit 1).
    return ",".join(split_list(text)) or "all"


@dataclass(frozen=True)
class Pai2020Options:
    """`gpu-trace ingest pai2020` options (passed to the loader as keyword arguments)."""

    tables: str = option(
        "all",
        "PAI tables to read (a,b or repeated): job, task, instance, sensor, group_tag, "
        "machine_spec, machine_metric, or all (every one present).",
        parse=_tables,
        repeat=True,
    )


PLUGIN = LoaderPlugin(
    name="pai2020",
    loader=Pai2020Loader,
    help="Alibaba PAI 2020: job/task/instance -> jobs, tasks, placements; group_tag -> job_tags (and jobs.vc); sensor, machine_metric -> usage; machine_spec -> machines, capacity.\n\nPATH: folder with the headerless pai_<table>.csv files (.header files beside them or in headers/), or one of those CSVs.",
    options=Pai2020Options,
)
