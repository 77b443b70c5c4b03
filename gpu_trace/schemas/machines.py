"""Cluster inventory: ``machines`` (one row per machine per inventory) and ``capacity``
(GPU totals over time, as Helios publishes them daily).
"""

from __future__ import annotations

import pyarrow as pa

from gpu_trace.schemas.model import TS_UTC, Column, Table, source_columns

MACHINES = Table(
    name="machines",
    version=1,
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
        Column("gpus", pa.int32(), "GPUs installed.", unit="gpu"),
        Column("gpu_type", pa.string(), "GPU model (source vocabulary: P100, V100M32, G2, ...)."),
        Column("gpu_mem_bytes", pa.int64(), "Memory of one GPU.", unit="bytes"),
        Column("cpus", pa.float64(), "CPU cores (vCPUs).", unit="cpu"),
        Column("mem_bytes", pa.int64(), "Host memory.", unit="bytes"),
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
            "machine_list, inferred_jobs, inferred_util.",
        ),
    ),
)
