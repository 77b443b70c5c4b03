"""Job-level tables: ``jobs`` (one row per job) and ``placements`` (one row per job
attempt per machine).

A job is the unit a user submits: a Philly job, a Helios Slurm job, a PAI 2020 job
(with its tasks and instances folded up), an openb pod.
"""

from __future__ import annotations

import pyarrow as pa

from gpu_trace.schemas.model import TS_UTC, Column, Table, source_columns

JOB_STATUSES = (
    "completed",
    "failed",
    "oom",
    "preempted",
    "cancelled",
    "timeout",
    "node_fail",
    "running",
    "pending",
    "unknown",
)
"""Canonical job status vocabulary; the source's own value is kept in ``raw_status``.

``oom`` (killed for exceeding its memory: Slurm OUT_OF_MEMORY, Kubernetes OOMKilled) and
``preempted`` (stopped by the scheduler for other work: Slurm PREEMPTED, Kubernetes
Preempting / PreemptionByScheduler) are kept apart from ``failed`` and ``cancelled``,
because operators act on them differently. Who cancelled a job is in ``cancelled_by``.
"""

TIME_BASES = ("absolute", "hidden_epoch", "relative")
"""How a source's timestamps relate to real time.

- ``absolute``: real calendar instants (Philly, Helios), converted to UTC.
- ``hidden_epoch``: seconds since a secret offset whose time of day and weekday are
  right in the source time zone but whose dates are fake (PAI 2020: 1970 dates).
- ``relative``: seconds since the start of the trace (openb); stored as
  1970-01-01T00:00:00Z + offset, so differences are exact and dates meaningless.
"""

JOBS = Table(
    name="jobs",
    version=5,
    description="One row per submitted job (pod for openb), normalized across traces.",
    sort_by=("submit_time", "job_id"),
    columns=(
        *source_columns(),
        Column("job_id", pa.string(), "Job identifier as the source writes it.", nullable=False),
        Column("user", pa.string(), "User (hashed in every public trace)."),
        Column("vc", pa.string(), "Virtual cluster / group / namespace / QoS pool."),
        Column("name", pa.string(), "Job name as submitted, if the source publishes one."),
        Column("submit_time", TS_UTC, "When the job was submitted (UTC)."),
        Column("start_time", TS_UTC, "When the job first started running (UTC); null if never."),
        Column("end_time", TS_UTC, "When the job last stopped (UTC); null if still running."),
        Column("queue_s", pa.float64(), "start_time - submit_time.", unit="s"),
        Column(
            "run_s",
            pa.float64(),
            "end_time - start_time, gaps between attempts included (Philly notebook rule); "
            "null while the job has no end (running: elapsed so far is as_of_time - "
            "start_time).",
            unit="s",
        ),
        Column(
            "gpus",
            pa.float64(),
            "GPUs requested; fractional for GPU sharing (openb 500 milli-GPU = 0.5).",
            unit="gpu",
        ),
        Column(
            "gpus_raw",
            pa.float64(),
            "The GPU request exactly as the source gives it, in `gpus_raw_unit`.",
        ),
        Column(
            "gpus_raw_unit",
            pa.string(),
            "Unit of `gpus_raw`: gpu (a count), percent (PAI plan_gpu, 100 = 1 GPU), milli "
            "(openb num_gpu x gpu_milli, 1000 = 1 GPU), gpu_ids (Philly: GPU ids listed in "
            "the first attempt).",
        ),
        Column("cpus", pa.float64(), "vCPUs requested.", unit="cpu"),
        Column("mem_bytes", pa.int64(), "Host memory requested.", unit="bytes"),
        Column(
            "gpu_type",
            pa.string(),
            "GPU model requested or allowed; alternatives joined with `|` (openb "
            "`V100M16|V100M32`).",
        ),
        Column("nodes", pa.int32(), "Machines the job ran on (or requested)."),
        Column("attempts", pa.int32(), "Scheduling attempts (retries/preemptions); 1 if unknown."),
        Column(
            "status",
            pa.string(),
            "Canonical status: " + ", ".join(JOB_STATUSES) + ".",
            nullable=False,
        ),
        Column("raw_status", pa.string(), "The source's own status value, unchanged."),
        Column("qos", pa.string(), "Quality-of-service / priority class (openb: LS, BE, ...)."),
        Column("account", pa.string(), "Accounting / charge group (Slurm `Account`)."),
        Column(
            "eligible_time",
            TS_UTC,
            "When the job became eligible to start (Slurm `Eligible`: after holds and "
            "dependencies); null where the source does not say.",
        ),
        Column(
            "time_limit_s",
            pa.float64(),
            "Wall-time limit the job asked for (Slurm `Timelimit`); null when unlimited or "
            "unknown.",
            unit="s",
        ),
        Column(
            "cpu_used_s",
            pa.float64(),
            "CPU time the job used, user + system, over all its CPUs (Slurm `TotalCPU` of "
            "the allocation line, which sacct sums over the job's completed steps); null "
            "where the source does not say, or the export lists no step of the job (sacct "
            "-X prints 0 there).",
            unit="s",
        ),
        Column(
            "mem_peak_bytes",
            pa.int64(),
            "Peak resident memory of the job: the largest `MaxRSS` over its steps (each "
            "step's MaxRSS is its largest task's); null where the source does not say.",
            unit="bytes",
        ),
        Column(
            "exit_code",
            pa.int32(),
            "Exit status of the job's process (Slurm `ExitCode` before the colon, Kubernetes "
            "container `exitCode`).",
        ),
        Column(
            "exit_signal",
            pa.int32(),
            "Signal that ended the job's process (Slurm `ExitCode` after the colon).",
        ),
        Column(
            "workload_type",
            pa.string(),
            "Workload class as the source labels it (AcmeTrace `type` as written: Pretrain, "
            "SFT, Eval, MLLM, Debug, Other; Kubernetes owner kind).",
        ),
        Column(
            "cancelled_by",
            pa.string(),
            "Who cancelled the job, as the source says (Slurm `CANCELLED by N`: the uid N; "
            "0 is root, an administrator); null when not cancelled or not said.",
        ),
        Column(
            "as_of_time",
            TS_UTC,
            "The instant this record describes (the export's own time where the source "
            "gives one, e.g. Slurm start + Elapsed for a running job); an unfinished job's "
            "elapsed time so far is as_of_time - start_time. Null where unknown.",
        ),
        Column(
            "file_sha256",
            pa.string(),
            "SHA-256 of the input file the row was read from, for sources whose exports "
            "overlap (Slurm, Kubernetes): the export whose record of the job won the merge "
            "(ingests.file_sha256). Null for other sources.",
        ),
        Column(
            "source_tz",
            pa.string(),
            "IANA time zone the source's local times were in (null when times are relative).",
        ),
        Column(
            "time_basis",
            pa.string(),
            "How timestamps relate to real time: " + ", ".join(TIME_BASES) + ".",
            nullable=False,
        ),
    ),
)

PLACEMENTS = Table(
    name="placements",
    version=2,
    description=(
        "One row per job attempt per machine: where and when each piece of a job ran "
        "(Philly attempts, PAI instances, openb scheduled pods)."
    ),
    sort_by=("job_id", "attempt", "machine_id"),
    columns=(
        *source_columns(),
        Column("job_id", pa.string(), "Job the placement belongs to.", nullable=False),
        Column("attempt", pa.int32(), "0-based attempt number within the job.", nullable=False),
        Column("task", pa.string(), "Task / role within the job (PAI task_name)."),
        Column("instance", pa.string(), "Instance / worker id within the task (PAI)."),
        Column("start_time", TS_UTC, "When this attempt started on this machine (UTC)."),
        Column("end_time", TS_UTC, "When it stopped (UTC); null if unknown or still running."),
        Column("machine_id", pa.string(), "Machine the piece ran on."),
        Column("gpu_count", pa.float64(), "GPUs held on this machine.", unit="gpu"),
        Column(
            "gpu_indices",
            pa.list_(pa.int16()),
            "Indices of the GPUs held on this machine (Philly `gpu3` -> 3), when known.",
        ),
        Column("status", pa.string(), "Status of this piece, canonical vocabulary, if known."),
        Column(
            "file_sha256",
            pa.string(),
            "SHA-256 of the input file the row was read from, for sources whose exports "
            "overlap (Slurm, Kubernetes): a job's placements come from the export whose "
            "jobs record won. Null for other sources.",
        ),
    ),
)
