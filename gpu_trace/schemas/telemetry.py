"""Telemetry tables in long form: ``gpu_samples``, ``host_samples`` and ``events``.

Long form (one row per time x device x metric) lets every source land in one table
whatever subset of fields it has; DuckDB views (see ``views.sql``) pivot the common
metrics to wide form for analysts.
"""

from __future__ import annotations

import pyarrow as pa

from gpu_trace.schemas.model import TS_UTC, Column, Table, source_columns

GPU_METRICS: dict[str, tuple[str, str]] = {
    # name: (unit, meaning)
    "gpu_util_pct": (
        "pct",
        "Share of time a kernel was running (nvidia-smi utilization.gpu), 0-100.",
    ),
    "mem_util_pct": ("pct", "Share of time device memory was read or written, 0-100."),
    "mem_used_bytes": ("bytes", "Device memory in use."),
    "mem_free_bytes": ("bytes", "Device memory free."),
    "mem_total_bytes": ("bytes", "Device memory installed."),
    "power_w": ("W", "Power draw."),
    "power_limit_w": ("W", "Enforced power limit."),
    "energy_mj": ("mJ", "Energy consumed since the driver loaded (a counter)."),
    "temp_c": ("C", "GPU core temperature."),
    "mem_temp_c": ("C", "GPU memory temperature."),
    "sm_clock_mhz": ("MHz", "SM clock."),
    "mem_clock_mhz": ("MHz", "Memory clock."),
    "fan_pct": ("pct", "Fan speed, 0-100."),
    "enc_util_pct": ("pct", "Video encoder utilization, 0-100."),
    "dec_util_pct": ("pct", "Video decoder utilization, 0-100."),
    "pcie_tx_bytes_per_s": ("bytes/s", "PCIe transmit throughput."),
    "pcie_rx_bytes_per_s": ("bytes/s", "PCIe receive throughput."),
    "gr_engine_active_ratio": ("ratio", "DCGM profiling: graphics/compute engine active, 0-1."),
    "sm_active_ratio": ("ratio", "DCGM profiling: SM active, 0-1."),
    "sm_occupancy_ratio": ("ratio", "DCGM profiling: SM occupancy, 0-1."),
    "tensor_active_ratio": ("ratio", "DCGM profiling: tensor pipe active, 0-1."),
    "dram_active_ratio": ("ratio", "DCGM profiling: DRAM active, 0-1."),
    "fp64_active_ratio": ("ratio", "DCGM profiling: FP64 pipe active, 0-1."),
    "fp32_active_ratio": ("ratio", "DCGM profiling: FP32 pipe active, 0-1."),
    "fp16_active_ratio": ("ratio", "DCGM profiling: FP16 pipe active, 0-1."),
    "nvlink_tx_bytes_per_s": ("bytes/s", "NVLink transmit throughput."),
    "nvlink_rx_bytes_per_s": ("bytes/s", "NVLink receive throughput."),
    "gpu_sm_share_pct": (
        "pct",
        "Share of one GPU requested/used by a job (PAI gpu_wrk_util, percent of one GPU).",
    ),
    "mem_reserved_bytes": ("bytes", "Device memory reserved by the driver (not usable)."),
    "jpg_util_pct": ("pct", "JPEG decoder utilization, 0-100."),
    "ofa_util_pct": ("pct", "Optical-flow accelerator utilization, 0-100."),
    "pstate": ("state", "Performance state number (P0 = 0, fastest)."),
    "clock_event_reasons": ("bitmask", "Active clock event (throttle) reasons, NVML bitmask."),
    "pcie_replay_count": ("count", "PCIe replays since the driver loaded (a counter)."),
    "slowdown_temp_c": ("C", "Temperature at which the GPU slows down."),
}
"""The fixed vocabulary of ``gpu_samples.metric``: canonical name -> (unit, meaning)."""

HOST_METRICS: dict[str, tuple[str, str]] = {
    "cpu_util_pct": ("pct", "CPU utilization of the host, 0-100."),
    "mem_total_bytes": ("bytes", "Host memory installed."),
    "mem_free_bytes": ("bytes", "Host memory free."),
    "mem_used_bytes": ("bytes", "Host memory in use."),
    "mem_util_pct": (
        "pct",
        "Share of host memory in use, 0-100 (AcmeTrace NODE_MEMORY_UTILIZATION).",
    ),
}
"""The fixed vocabulary of ``host_samples.metric``."""

EVENT_KINDS = (
    "xid",
    "ecc_sbe",
    "ecc_dbe",
    "retired_page",
    "gpu_lost",
    "driver_reload",
    "energy_reset",
)
"""Kinds of discrete device events kept as rows, never averaged into gauges."""

GPU_SAMPLES = Table(
    name="gpu_samples",
    version=2,
    description="GPU telemetry in long form: one row per time x GPU x metric.",
    sort_by=("host", "gpu_index", "time", "metric"),
    columns=(
        *source_columns(),
        Column("time", TS_UTC, "Sample time (UTC).", nullable=False),
        Column("host", pa.string(), "Host / machine id.", nullable=False),
        Column("gpu_index", pa.int16(), "GPU index on the host (nvidia-smi numbering)."),
        Column("gpu_uuid", pa.string(), "GPU UUID, when the source gives it."),
        Column(
            "mig_instance", pa.string(), "MIG GPU/compute instance, e.g. `1/0`; null if not MIG."
        ),
        Column(
            "metric",
            pa.string(),
            "Canonical metric name: one of " + ", ".join(GPU_METRICS) + ".",
            nullable=False,
        ),
        Column("value", pa.float64(), "Value in `unit`; null when the source said N/A."),
        Column("unit", pa.string(), "Unit of `value` (fixed per metric).", nullable=False),
        Column(
            "raw_field", pa.string(), "The source's own field name (e.g. DCGM_FI_DEV_GPU_UTIL)."
        ),
        Column("pod", pa.string(), "Kubernetes pod holding the GPU (dcgm-exporter label)."),
        Column("namespace", pa.string(), "Kubernetes namespace of `pod`."),
        Column("container", pa.string(), "Container within `pod`."),
        Column("job_id", pa.string(), "Job holding the GPU, when the source says (hpc_job)."),
    ),
)

GPU_PROCESSES = Table(
    name="gpu_processes",
    version=1,
    description="Processes on a GPU: one row per time x GPU x process (NVML, nvidia-smi).",
    sort_by=("host", "gpu_index", "time", "pid"),
    columns=(
        *source_columns(),
        Column("time", TS_UTC, "Sample time (UTC).", nullable=False),
        Column("host", pa.string(), "Host / machine id.", nullable=False),
        Column("gpu_index", pa.int16(), "GPU index on the host."),
        Column("gpu_uuid", pa.string(), "GPU UUID, when the source gives it."),
        Column("mig_instance", pa.string(), "MIG GPU/compute instance `gi/ci`; null if not MIG."),
        Column("pid", pa.int64(), "Host process id.", nullable=False),
        Column("process_name", pa.string(), "Process name or command as the source prints it."),
        Column("process_type", pa.string(), "C (compute), G (graphics) or C+G."),
        Column("used_mem_bytes", pa.int64(), "Device memory used by the process.", unit="bytes"),
        Column("sm_util_pct", pa.float64(), "SM utilization of the process, 0-100.", unit="pct"),
        Column(
            "mem_util_pct", pa.float64(), "Memory utilization of the process, 0-100.", unit="pct"
        ),
    ),
)

HOST_SAMPLES = Table(
    name="host_samples",
    version=1,
    description="Host CPU/memory telemetry in long form: one row per time x host x metric.",
    sort_by=("host", "time", "metric"),
    columns=(
        *source_columns(),
        Column("time", TS_UTC, "Sample time (UTC).", nullable=False),
        Column("host", pa.string(), "Host / machine id.", nullable=False),
        Column(
            "metric",
            pa.string(),
            "Canonical metric name: one of " + ", ".join(HOST_METRICS) + ".",
            nullable=False,
        ),
        Column("value", pa.float64(), "Value in `unit`; null when the source said N/A."),
        Column("unit", pa.string(), "Unit of `value`.", nullable=False),
        Column("raw_field", pa.string(), "The source's own field name."),
    ),
)

EVENTS = Table(
    name="events",
    version=1,
    description="Discrete device/job events (XID errors, ECC errors, lost GPUs).",
    sort_by=("time", "host"),
    columns=(
        *source_columns(),
        Column("time", TS_UTC, "When the event was observed (UTC).", nullable=False),
        Column("host", pa.string(), "Host / machine id."),
        Column("gpu_index", pa.int16(), "GPU index on the host."),
        Column("gpu_uuid", pa.string(), "GPU UUID, when the source gives it."),
        Column("kind", pa.string(), "Event kind: " + ", ".join(EVENT_KINDS) + ".", nullable=False),
        Column("code", pa.int64(), "Event code (the XID number, the ECC count, ...)."),
        Column("detail", pa.string(), "Free text from the source."),
    ),
)
