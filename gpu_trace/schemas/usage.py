"""``usage``: resource use summarized over a window, in long form.

Some sources publish no time series, only one summary per instance or per machine over a
lifetime (PAI 2020's sensor and machine_metric tables). Those summaries are not samples,
so they do not go to ``gpu_samples`` / ``host_samples``; they land here, one row per
window x metric x statistic, with a fixed metric vocabulary whose units are in the
names. Per-job summaries computed from live telemetry fit the same shape (scope ``job``).
"""

from __future__ import annotations

import pyarrow as pa

from gpu_trace.schemas.model import TS_UTC, Column, Table, source_columns

USAGE_METRICS: dict[str, tuple[str, str]] = {
    # name: (unit, meaning)
    "cpu_used_cores": ("cpu", "CPU cores in use (PAI cpu_usage / 100: 600 % = 6 cores)."),
    "gpu_used_gpus": (
        "gpu",
        "GPUs' worth of busy time (PAI gpu_wrk_util / 100, the same percent-of-one-GPU "
        "unit as plan_gpu: 0.5 = half a GPU busy).",
    ),
    "mem_used_bytes": ("bytes", "Host memory in use (PAI avg_mem / max_mem, GB = 2^30 B)."),
    "gpu_mem_used_bytes": (
        "bytes",
        "GPU memory in use (PAI avg_gpu_wrk_mem / max_gpu_wrk_mem, GB = 2^30 B).",
    ),
    "net_rx_bytes": (
        "bytes",
        "Network input as the source states it (PAI read, machine_net_receive: 'bytes'; "
        "the owners' notebook plots 8 x read / 2^30 as Gbps, i.e. reads it as bytes/s).",
    ),
    "net_tx_bytes": ("bytes", "Network output as the source states it (PAI write)."),
    "net_rx_ops": ("count", "Network reads (PAI read_count)."),
    "net_tx_ops": ("count", "Network writes (PAI write_count)."),
    "cpu_util_pct": ("pct", "CPU utilization of the whole machine, 0-100 (PAI machine_cpu)."),
    "cpu_user_pct": ("pct", "CPU time in user mode, 0-100 (PAI machine_cpu_usr)."),
    "cpu_kernel_pct": ("pct", "CPU time in kernel mode, 0-100 (PAI machine_cpu_kernel)."),
    "cpu_iowait_pct": ("pct", "CPU time waiting for I/O, 0-100 (PAI machine_cpu_iowait)."),
    "gpu_util_sum_pct": (
        "pct",
        "GPU utilization of the machine as the source states it (PAI machine_gpu); it "
        "exceeds 100, so it is presumably summed over the machine's GPUs (issue #231).",
    ),
    "load_1m": ("tasks", "1-minute load average (PAI machine_load_1)."),
    "colocated_instances": (
        "count",
        "Instances running on the machine at the same time (PAI machine_num_worker).",
    ),
}
"""The fixed vocabulary of ``usage.metric``: canonical name -> (unit, meaning)."""

USAGE_STATS = ("mean", "max")
"""How a value summarizes its window: ``mean`` (lifetime average) or ``max``."""

USAGE_SCOPES = ("instance", "machine", "job")
"""What a value measures: the instance itself, the whole machine while the instance ran,
or a whole job."""

USAGE = Table(
    name="usage",
    version=1,
    description=(
        "Resource use summarized over a window (an instance's or a job's lifetime), long "
        "form: one row per window x metric x statistic."
    ),
    sort_by=(),
    columns=(
        *source_columns(),
        Column("job_id", pa.string(), "Job measured (jobs.job_id); null when not given."),
        Column("task", pa.string(), "Task / role within the job (PAI task_name)."),
        Column(
            "instance",
            pa.string(),
            "Instance measured (placements.instance; PAI worker_name).",
        ),
        Column("machine_id", pa.string(), "Machine the instance ran on."),
        Column(
            "device",
            pa.string(),
            "Device the values refer to when the source names one (PAI gpu_name, "
            "`/dev/nvidia0`); instances sharing a device and a time window share a GPU.",
        ),
        Column(
            "scope",
            pa.string(),
            "What was measured: " + ", ".join(USAGE_SCOPES) + ".",
            nullable=False,
        ),
        Column(
            "start_time",
            TS_UTC,
            "Start of the summarized window (UTC); null when the source does not give it "
            "(PAI sensor rows: the window is the lifetime of the placement with the same "
            "instance).",
        ),
        Column("end_time", TS_UTC, "End of the summarized window (UTC); null when unknown."),
        Column(
            "metric",
            pa.string(),
            "Canonical metric name: one of " + ", ".join(USAGE_METRICS) + ".",
            nullable=False,
        ),
        Column(
            "stat",
            pa.string(),
            "How the value summarizes the window: " + ", ".join(USAGE_STATS) + ".",
            nullable=False,
        ),
        Column("value", pa.float64(), "Value in `unit`; null when the source field was empty."),
        Column("unit", pa.string(), "Unit of `value` (fixed per metric).", nullable=False),
        Column("raw_field", pa.string(), "The source's own field name (PAI cpu_usage, ...)."),
    ),
)
