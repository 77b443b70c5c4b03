"""Replay results: ``replay_runs`` (one row per run: config, counts, headline metrics),
``replay_jobs`` (one row per replayed job) and ``replay_timeseries`` (cluster state over
time, binned).

A run is written with ``source`` = the replayed source and ``dataset`` = the run id, so
re-running the same run id replaces it and runs of one trace sit side by side.
"""

from __future__ import annotations

import pyarrow as pa

from gpu_trace.schemas.model import Column, Table, source_columns

_RUN = Column("run_id", pa.string(), "Replay run identifier (= dataset).", nullable=False)

REPLAY_RUNS = Table(
    name="replay_runs",
    version=4,
    description=(
        "One row per replay run: policies, cluster, counts of jobs replayed, skipped and "
        "rejected, headline metrics and the duration estimator's accuracy."
    ),
    sort_by=("run_id",),
    columns=(
        *source_columns(),
        _RUN,
        Column(
            "experiment_id",
            pa.string(),
            "Stable hash of the resolved experiment (job selection, training split, cluster, "
            "load, seed, estimator): only runs with equal ids are comparable.",
        ),
        Column(
            "experiment_json",
            pa.string(),
            "The resolved experiment as JSON (source, cluster, load, seed, window, "
            "training split, estimator, job-set digest).",
        ),
        Column(
            "scheduler",
            pa.string(),
            "Scheduling policy name; `<name>-oracle` when an estimating policy got the true "
            "durations.",
            nullable=False,
        ),
        Column("placement", pa.string(), "Placement policy name.", nullable=False),
        Column("admission", pa.string(), "Admission policy name.", nullable=False),
        Column("config_json", pa.string(), "The fully resolved run configuration as JSON."),
        Column("seed", pa.int64(), "Random seed of the run."),
        Column("load_factor", pa.float64(), "Arrival-rate multiplier (1 = as traced)."),
        Column("cluster_nodes", pa.int64(), "Nodes in the emulated cluster.", unit="node"),
        Column("cluster_gpus", pa.float64(), "GPUs in the emulated cluster.", unit="gpu"),
        Column("jobs_input", pa.int64(), "Jobs selected by the window.", unit="job"),
        Column(
            "jobs_skipped",
            pa.int64(),
            "Jobs of the window not replayed: the estimator's training split, or no "
            "submit_time / run_s / GPUs (see jobs_skipped_reasons).",
            "job",
        ),
        Column(
            "jobs_skipped_reasons",
            pa.string(),
            'JSON {reason: jobs} of the skipped jobs, e.g. {"training split": 2038}.',
        ),
        Column("jobs_rejected", pa.int64(), "Jobs refused by admission (never fit).", "job"),
        Column("jobs_finished", pa.int64(), "Jobs that ran to completion.", unit="job"),
        Column("jobs_unfinished", pa.int64(), "Admitted jobs not finished at the end.", "job"),
        Column("jct_mean_s", pa.float64(), "Mean job completion time.", unit="s"),
        Column("jct_p50_s", pa.float64(), "Median job completion time.", unit="s"),
        Column("jct_p95_s", pa.float64(), "95th percentile job completion time.", unit="s"),
        Column("jct_p99_s", pa.float64(), "99th percentile job completion time.", unit="s"),
        Column("queue_mean_s", pa.float64(), "Mean queueing delay (first start - arrival).", "s"),
        Column("queue_p99_s", pa.float64(), "99th percentile queueing delay.", unit="s"),
        Column("bsld_mean", pa.float64(), "Mean bounded slowdown (threshold 10 s)."),
        Column("makespan_s", pa.float64(), "Last finish - first arrival.", unit="s"),
        Column("alloc_mean_ratio", pa.float64(), "Time-weighted mean allocated/installed GPUs."),
        Column(
            "unallocated_gpus_loaded",
            pa.float64(),
            "Mean unallocated GPUs over the time jobs were waiting (unallocated under load).",
            unit="gpu",
        ),
        Column("preemptions", pa.int64(), "Preemptions over the run.", unit="count"),
        Column(
            "throughput_mean",
            pa.float64(),
            "Effective throughput: GPU-work-weighted speed of the started jobs on the GPU "
            "models they got (1 = reference; --throughput table).",
        ),
        Column(
            "jain_slowdown",
            pa.float64(),
            "Jain's fairness index over per-user mean slowdown; null with fewer than 2 users "
            "(e.g. openb has no user column).",
        ),
        Column("ftf_max_ratio", pa.float64(), "Worst per-user finish-time-fairness ratio (rho)."),
        Column("estimator_mae_s", pa.float64(), "Duration estimator MAE.", unit="s"),
        Column("estimator_within_10_ratio", pa.float64(), "Share of estimates within 10 %."),
        Column("estimator_within_50_ratio", pa.float64(), "Share of estimates within 50 %."),
        Column("estimator_within_100_ratio", pa.float64(), "Share of estimates within 100 %."),
        Column("wall_s", pa.float64(), "Wall-clock seconds the engine ran.", unit="s"),
        Column("mode", pa.string(), "sim (event-driven simulation) or live (real processes)."),
        Column("devices", pa.string(), "Live: the devices jobs ran on (cuda:0-7, emulated:16)."),
        Column("time_scale", pa.float64(), "Live: trace seconds per wall-clock second."),
        Column("jobs_failed", pa.int64(), "Live: jobs whose process exited non-zero.", "job"),
        Column("jobs_crashed", pa.int64(), "Live: jobs whose process was killed.", "job"),
        Column(
            "overhead_mean_ms",
            pa.float64(),
            "Live: mean wall time of one executor pass (reap, admit, schedule, spawn).",
            unit="ms",
        ),
        Column("overhead_p99_ms", pa.float64(), "Live: 99th percentile pass time.", unit="ms"),
        Column(
            "wake_lag_mean_ms",
            pa.float64(),
            "Live: mean delay between a due arrival/timer and the executor waking for it.",
            unit="ms",
        ),
        Column("wakeups", pa.int64(), "Live: executor loop iterations.", unit="count"),
        Column(
            "node_failures",
            pa.int64(),
            "Faults: node failures injected over the run (--faults).",
            unit="count",
        ),
        Column(
            "lost_gpu_h_failure",
            pa.float64(),
            "Faults: GPU-hours of work lost to node failures (since each killed job's last "
            "checkpoint; all of a job's work when it ends failed).",
            unit="gpu_h",
        ),
        Column(
            "lost_gpu_h_preemption",
            pa.float64(),
            "Faults: GPU-hours spent restoring after preemptions (restore_s per resume).",
            unit="gpu_h",
        ),
        Column(
            "lost_gpu_h_restore",
            pa.float64(),
            "Faults: GPU-hours spent restoring from checkpoints after node failures.",
            unit="gpu_h",
        ),
        Column("consumed_gpu_h", pa.float64(), "Faults: GPU-hours held by jobs.", unit="gpu_h"),
        Column(
            "useful_gpu_h",
            pa.float64(),
            "Faults: GPU-hours of service of the finished jobs (duration x GPUs).",
            unit="gpu_h",
        ),
        Column("goodput_ratio", pa.float64(), "Faults: useful_gpu_h / consumed_gpu_h."),
        Column(
            "fault_model_json",
            pa.string(),
            "Faults: the failure model used (mtbf_s, mttr_s, origin, derived rates, "
            "checkpoint_s, retries, restore_s) as JSON.",
        ),
        Column(
            "energy_kwh",
            pa.float64(),
            "Energy: cluster energy over the run from the power model (--power): busy GPUs "
            "at busy_w, idle GPUs at idle_w, host baseline per node in service.",
            unit="kWh",
        ),
        Column("power_mean_w", pa.float64(), "Energy: energy_kwh / run span.", unit="W"),
        Column(
            "power_model_json",
            pa.string(),
            "Energy: the power model per GPU type (origin, idle_w, busy_w, host baseline).",
        ),
        Column(
            "energy_saved_kwh",
            pa.float64(),
            "Power-off: energy saved by switching idle nodes off vs always on.",
            unit="kWh",
        ),
        Column(
            "node_boots",
            pa.int64(),
            "Power-off: nodes woken (each paid the boot time).",
            unit="count",
        ),
    ),
)

REPLAY_JOBS = Table(
    name="replay_jobs",
    version=3,
    description="One row per job of a replay run: when it arrived, started, finished.",
    sort_by=("run_id", "arrival_time_s", "job_id"),
    columns=(
        *source_columns(),
        _RUN,
        Column(
            "job_id", pa.string(), "Job identifier from the canonical jobs table.", nullable=False
        ),
        Column("user", pa.string(), "User who submitted the job."),
        Column("vc", pa.string(), "Virtual cluster of the job."),
        Column("gpus", pa.float64(), "GPUs requested.", unit="gpu"),
        Column(
            "outcome",
            pa.string(),
            "finished, unfinished (still queued or running at the end), rejected, skipped; "
            "failed (live: process exited non-zero; sim: killed by node failures more than "
            "--retries times) and, live, crashed (process killed).",
            nullable=False,
        ),
        Column("reason", pa.string(), "Why a job was rejected or skipped."),
        Column("arrival_time_s", pa.float64(), "Arrival, seconds from the run's origin.", "s"),
        Column("start_time_s", pa.float64(), "First start, seconds from the run's origin.", "s"),
        Column("finish_time_s", pa.float64(), "Finish, seconds from the run's origin.", "s"),
        Column("duration_s", pa.float64(), "Service demand (trace run_s).", unit="s"),
        Column("estimate_s", pa.float64(), "Estimated duration the policy used, if any.", "s"),
        Column("queue_s", pa.float64(), "First start - arrival.", unit="s"),
        Column("jct_s", pa.float64(), "Finish - arrival.", unit="s"),
        Column("bsld", pa.float64(), "Bounded slowdown: max(1, jct / max(duration, 10 s))."),
        Column("preemptions", pa.int32(), "Times this job was preempted.", unit="count"),
        Column("nodes", pa.int32(), "Nodes of its first placement.", unit="node"),
        Column(
            "speed",
            pa.float64(),
            "Throughput factor of its first placement's GPU model (slowest if several).",
        ),
        Column("mode", pa.string(), "sim or live (see replay_runs.mode)."),
        Column(
            "end_time_s",
            pa.float64(),
            "Live: when the job's last process ended (finish, failure or crash).",
            unit="s",
        ),
        Column(
            "exit_code",
            pa.int32(),
            "Live: exit status of the job's last process (negative = killed by that signal).",
        ),
        Column(
            "attempts",
            pa.int32(),
            "Runs begun: live, worker processes started; sim with faults, 1 + preemptions "
            "+ restarts after node failures.",
            "count",
        ),
        Column("failures", pa.int32(), "Faults: node failures that killed the job.", "count"),
        Column(
            "energy_kwh",
            pa.float64(),
            "Energy: GPUs held x time x (busy_w + host baseline per GPU), all attempts.",
            unit="kWh",
        ),
    ),
)

REPLAY_TIMESERIES = Table(
    name="replay_timeseries",
    version=2,
    description=(
        "Cluster state over a replay run, binned: time-weighted means of allocation, "
        "fragmentation and queue length per bin."
    ),
    sort_by=("run_id", "time_s"),
    columns=(
        *source_columns(),
        _RUN,
        Column(
            "time_s", pa.float64(), "Bin start, seconds from the run's origin.", "s", nullable=False
        ),
        Column("bin_s", pa.float64(), "Width of the time bin.", unit="s"),
        Column("allocated_gpus", pa.float64(), "Mean allocated GPUs in the bin.", unit="gpu"),
        Column("alloc_ratio", pa.float64(), "allocated_gpus / installed GPUs."),
        Column("running_jobs", pa.float64(), "Mean jobs running.", unit="job"),
        Column("queued_jobs", pa.float64(), "Mean jobs waiting.", unit="job"),
        Column("queued_gpus", pa.float64(), "Mean GPUs requested by waiting jobs.", unit="gpu"),
        Column(
            "fragmented_gpus",
            pa.float64(),
            "Mean free GPU capacity on partially used nodes (fragments smaller than a node).",
            unit="gpu",
        ),
        Column("power_w", pa.float64(), "Energy: mean cluster power draw in the bin.", unit="W"),
        Column(
            "down_gpus",
            pa.float64(),
            "Faults / power-off: mean GPUs out of service (failed, off or booting).",
            unit="gpu",
        ),
    ),
)

REPLAY_VALIDATION = Table(
    name="replay_validation",
    version=1,
    description=(
        "One row per job of a live replay run compared with the simulated run of the same "
        "jobs, cluster and policies (``gpu-trace replay validate``): live - simulated."
    ),
    sort_by=("run_id", "arrival_time_s", "job_id"),
    columns=(
        *source_columns(),
        _RUN,
        Column("sim_run_id", pa.string(), "The simulated run compared against."),
        Column("job_id", pa.string(), "Job identifier.", nullable=False),
        Column("outcome_live", pa.string(), "replay_jobs.outcome of the live run."),
        Column("outcome_sim", pa.string(), "replay_jobs.outcome of the simulated run."),
        Column("compared", pa.bool_(), "Ended in both runs (enters the error metrics)."),
        Column("arrival_time_s", pa.float64(), "Arrival, seconds from the run's origin.", "s"),
        Column("start_live_s", pa.float64(), "Live first start.", unit="s"),
        Column("start_sim_s", pa.float64(), "Simulated first start.", unit="s"),
        Column("start_diff_s", pa.float64(), "start_live_s - start_sim_s.", unit="s"),
        Column("finish_live_s", pa.float64(), "Live end (finish or injected failure).", "s"),
        Column("finish_sim_s", pa.float64(), "Simulated finish.", unit="s"),
        Column("finish_diff_s", pa.float64(), "finish_live_s - finish_sim_s.", unit="s"),
        Column("jct_live_s", pa.float64(), "Live end - arrival.", unit="s"),
        Column("jct_sim_s", pa.float64(), "Simulated finish - arrival.", unit="s"),
        Column("jct_diff_s", pa.float64(), "jct_live_s - jct_sim_s.", unit="s"),
        Column("queue_live_s", pa.float64(), "Live first start - arrival.", unit="s"),
        Column("queue_sim_s", pa.float64(), "Simulated first start - arrival.", unit="s"),
        Column("queue_diff_s", pa.float64(), "queue_live_s - queue_sim_s.", unit="s"),
    ),
)
