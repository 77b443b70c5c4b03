"""What sits between a job and its placements: ``tasks`` (one row per task, i.e. role, of
a job) and ``job_tags`` (semantic tags the trace owners attach to a job).

PAI 2020 is the first source with this level: a job is split into tasks (``ps``,
``worker``, ``evaluator``, ...), each launching ``instances`` copies that all request the
same resources. Requests are kept per instance (as the source states them) and as task
totals (what the task holds while all its instances run), in canonical units, with the
source's own values beside them so every conversion can be checked.
"""

from __future__ import annotations

import pyarrow as pa

from gpu_trace.schemas.jobs import JOB_STATUSES, TIME_BASES
from gpu_trace.schemas.model import TS_UTC, Column, Table, source_columns

TASKS = Table(
    name="tasks",
    version=1,
    description=(
        "One row per task (role) of a job: instance count, per-instance request and task "
        "totals in canonical units, the raw request, status and times."
    ),
    sort_by=("job_id", "task"),
    columns=(
        *source_columns(),
        Column("job_id", pa.string(), "Job the task belongs to (jobs.job_id).", nullable=False),
        Column(
            "task",
            pa.string(),
            "Task / role name within the job (PAI task_name: ps, worker, tensorflow, ...).",
            nullable=False,
        ),
        Column(
            "instances",
            pa.int32(),
            "Instances the task launches, all with the same request (PAI inst_num).",
        ),
        Column(
            "status",
            pa.string(),
            "Canonical status: " + ", ".join(JOB_STATUSES) + ".",
            nullable=False,
        ),
        Column("raw_status", pa.string(), "The source's own status value, unchanged."),
        Column(
            "start_time",
            TS_UTC,
            "When the task was launched (UTC); null when unknown.",
        ),
        Column("end_time", TS_UTC, "When the task completed (UTC); null when unknown."),
        Column("run_s", pa.float64(), "end_time - start_time.", unit="s"),
        Column(
            "gpus",
            pa.float64(),
            "GPUs the whole task requests: instances x gpus_per_instance.",
            unit="gpu",
        ),
        Column(
            "gpus_per_instance",
            pa.float64(),
            "GPUs each instance requests; fractional for GPU sharing (0.5 = half a GPU).",
            unit="gpu",
        ),
        Column(
            "cpus",
            pa.float64(),
            "vCPUs the whole task requests: instances x cpus_per_instance.",
            unit="cpu",
        ),
        Column("cpus_per_instance", pa.float64(), "vCPUs each instance requests.", unit="cpu"),
        Column(
            "mem_bytes",
            pa.int64(),
            "Host memory the whole task requests: instances x mem_bytes_per_instance.",
            unit="bytes",
        ),
        Column(
            "mem_bytes_per_instance",
            pa.int64(),
            "Host memory each instance requests.",
            unit="bytes",
        ),
        Column(
            "plan_gpu_pct",
            pa.float64(),
            "GPU request per instance exactly as the source writes it, in percent of one "
            "GPU (PAI plan_gpu: 50 = half a GPU, 200 = two GPUs).",
            unit="pct",
        ),
        Column(
            "plan_cpu_pct",
            pa.float64(),
            "CPU request per instance as written, in percent of one core (PAI plan_cpu: "
            "600 = 6 vCPUs).",
            unit="pct",
        ),
        Column(
            "plan_mem_gb",
            pa.float64(),
            "Memory request per instance as written (PAI plan_mem, 'GB'). The values are "
            "MiB / 1024 (29.296875 = 30,000 MiB), so a GB here is 2^30 bytes.",
            unit="GB",
        ),
        Column(
            "gpu_type",
            pa.string(),
            "GPU model the task was assigned (PAI: MISC, P100, T4, V100, V100M32).",
        ),
        Column(
            "source_tz",
            pa.string(),
            "IANA time zone the source's times are meaningful in (null when relative).",
        ),
        Column(
            "time_basis",
            pa.string(),
            "How timestamps relate to real time: " + ", ".join(TIME_BASES) + ".",
            nullable=False,
        ),
    ),
)

JOB_TAGS = Table(
    name="job_tags",
    version=1,
    description=(
        "Semantic tags of a job, one row per tagged job (PAI group_tag table): the "
        "recurrence group, the workload family and the GPU model asked for."
    ),
    sort_by=("job_key",),
    columns=(
        *source_columns(),
        Column(
            "job_key",
            pa.string(),
            "The source's key of the tagged job (PAI inst_id, which the owners say to "
            "treat as the job id).",
            nullable=False,
        ),
        Column(
            "job_id",
            pa.string(),
            "jobs.job_id of the job carrying that key (PAI: the job_name whose job-table "
            "row has this inst_id); null when the job table does not list the key.",
        ),
        Column("user", pa.string(), "User (hashed), as the tag row gives it."),
        Column(
            "group_tag",
            pa.string(),
            "Recurrence tag: jobs with the same entry script, arguments and data sources "
            "share it (PAI `group`). jobs.vc holds it, or the user where it is missing.",
        ),
        Column(
            "workload",
            pa.string(),
            "Model family where the owners identified it (PAI workload: bert, ctr, "
            "graphlearn, ...; set for about 9 % of rows).",
        ),
        Column(
            "gpu_type_request",
            pa.string(),
            "GPU model the job asked for (PAI gpu_type_spec); null when it accepted any.",
        ),
    ),
)
