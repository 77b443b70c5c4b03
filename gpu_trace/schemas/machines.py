"""Cluster inventory: ``machines`` (one row per machine per inventory) and ``capacity``
(GPU totals over time, as Helios publishes them daily).
"""

from __future__ import annotations

import pyarrow as pa

from gpu_trace.schemas.model import TS_UTC, Column, Table, source_columns

MACHINES = Table(
    name="machines",
    version=2,
    description=(
        "One row per machine in one inventory. A source can publish several inventories "
        "that disagree (Philly's machine list vs GPUs seen in its util file); `dataset` "
        "names which one a row comes from."
    ),
    sort_by=("machine_id",),
    columns=(
        *source_columns(),
        Column(
            "machine_id", pa.string(), "Machine identifier as the source writes it.", nullable=False
        ),
        Column("gpus", pa.int32(), "GPUs installed (physical devices).", unit="gpu"),
        Column(
            "gpus_schedulable",
            pa.int32(),
            "GPU devices the scheduler can hand out, when it differs from or is reported "
            "apart from `gpus` (Slurm GRES configured, Kubernetes allocatable; a MIG "
            "`mixed` node exposes slices, not whole GPUs); null when not reported. "
            "Allocation shares use `gpus`.",
            unit="gpu",
        ),
        Column("gpu_type", pa.string(), "GPU model (source vocabulary: P100, V100M32, G2, ...)."),
        Column("gpu_mem_bytes", pa.int64(), "Memory of one GPU.", unit="bytes"),
        Column("cpus", pa.float64(), "CPU cores (vCPUs).", unit="cpu"),
        Column("mem_bytes", pa.int64(), "Host memory.", unit="bytes"),
        Column(
            "snapshot_time",
            TS_UTC,
            "When the inventory was taken (the export's time); null for a static list. "
            "Several snapshots of one cluster give its capacity over time.",
        ),
        Column(
            "state",
            pa.string(),
            "Node state as the inventory tool prints it (sinfo / scontrol: IDLE, MIXED, "
            "ALLOCATED, DRAINED, DOWN, ...; Kubernetes Ready / NotReady), raw.",
        ),
        Column(
            "available",
            pa.bool_(),
            "Whether the node could run work at snapshot_time (not down, drained or "
            "unschedulable); null when unknown.",
        ),
        Column("partition", pa.string(), "Partition(s) / node pool, comma-separated."),
    ),
)

CAPACITY = Table(
    name="capacity",
    version=1,
    description=("GPU capacity over time: one row per (time, vc). `vc` null is the cluster total."),
    sort_by=("time", "vc"),
    columns=(
        *source_columns(),
        Column("time", TS_UTC, "Start of the period the value holds for (UTC).", nullable=False),
        Column("period_s", pa.float64(), "Length of the period the value holds for.", unit="s"),
        Column("vc", pa.string(), "Virtual cluster; null for the whole cluster."),
        Column("gpus", pa.int32(), "GPUs available in the period.", unit="gpu", nullable=False),
        Column(
            "basis",
            pa.string(),
            "Where the number comes from: published (the trace's own totals), "
            "machine_list, inferred_jobs, inferred_util, inventory (an operator's node "
            "inventory snapshot: GPUs of the nodes not down, drained or failed).",
        ),
    ),
)
