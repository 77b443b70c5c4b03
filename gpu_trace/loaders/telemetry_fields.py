"""Field maps: every source's own field name -> (canonical metric, unit factor).

One table per source, so a reviewer can check each mapping against
``docs/telemetry.md`` (and the upstream formats document) line by line. Factors turn the
source's unit into the canonical one (MiB -> bytes, ...); ``None`` means "already in the
canonical unit".
"""

from __future__ import annotations

from dataclasses import dataclass

from gpu_trace.loaders.units import MIB


@dataclass(frozen=True)
class Field:
    """How one source field becomes a canonical metric (or an event kind)."""

    metric: str
    """Canonical ``gpu_samples.metric``, or ``event:<kind>`` for fields kept as events."""
    factor: int | None = None
    """Integer multiplier into the canonical unit (exact for whole numbers)."""
    unit: str | None = None
    """The unit the source prints (checked against a CSV header's ``[unit]``)."""

    @property
    def event(self) -> str | None:
        """The event kind (``xid``, ``ecc_dbe`` ...) when this field is an event counter,
        else None.
        """
        return self.metric.removeprefix("event:") if self.metric.startswith("event:") else None


PERCENT_0_100 = frozenset(
    {
        "gpu_util_pct",
        "mem_util_pct",
        "enc_util_pct",
        "dec_util_pct",
        "jpg_util_pct",
        "ofa_util_pct",
    }
)
"""Metrics that are a share of time in percent and so cannot leave 0-100: a value
outside is quarantined. Not ``fan_pct`` (NVML: "may exceed 100% in certain cases") nor
``gpu_sm_share_pct`` (PAI: above 100 means several GPUs)."""
AT_MOST_TOTAL = {"mem_free_bytes": "mem_total_bytes", "mem_used_bytes": "mem_total_bytes"}
"""Metrics that cannot exceed another metric of the same line (device memory free or
used above the device's total is quarantined)."""


# nvidia-smi --query-gpu names (header token without the " [unit]" suffix).
SMI_QUERY: dict[str, Field] = {
    "utilization.gpu": Field("gpu_util_pct", unit="%"),
    "utilization.memory": Field("mem_util_pct", unit="%"),
    "utilization.encoder": Field("enc_util_pct", unit="%"),
    "utilization.decoder": Field("dec_util_pct", unit="%"),
    "utilization.jpeg": Field("jpg_util_pct", unit="%"),
    "utilization.ofa": Field("ofa_util_pct", unit="%"),
    "memory.used": Field("mem_used_bytes", MIB, "MiB"),
    "memory.free": Field("mem_free_bytes", MIB, "MiB"),
    "memory.total": Field("mem_total_bytes", MIB, "MiB"),
    "memory.reserved": Field("mem_reserved_bytes", MIB, "MiB"),
    "power.draw": Field("power_w", unit="W"),
    "enforced.power.limit": Field("power_limit_w", unit="W"),
    "temperature.gpu": Field("temp_c"),
    "temperature.memory": Field("mem_temp_c"),
    "clocks.current.sm": Field("sm_clock_mhz", unit="MHz"),
    "clocks.current.memory": Field("mem_clock_mhz", unit="MHz"),
    "clocks.sm": Field("sm_clock_mhz", unit="MHz"),
    "clocks.mem": Field("mem_clock_mhz", unit="MHz"),
    "fan.speed": Field("fan_pct", unit="%"),
    "pstate": Field("pstate"),
    "clocks_event_reasons.active": Field("clock_event_reasons"),
    "clocks_throttle_reasons.active": Field("clock_event_reasons"),
    "ecc.errors.corrected.volatile.total": Field("event:ecc_sbe"),
    "ecc.errors.uncorrected.volatile.total": Field("event:ecc_dbe"),
}
"""``--query-gpu`` fields kept. Identity fields (``index``, ``uuid``, ``hostname``,
``timestamp``) are keys; every other field (names, PCI ids, limits, modes) is not a
sample and is not read."""

# nvidia-smi dmon column names (first header line).
SMI_DMON: dict[str, Field] = {
    "pwr": Field("power_w", unit="W"),
    "gtemp": Field("temp_c", unit="C"),
    "mtemp": Field("mem_temp_c", unit="C"),
    "sm": Field("gpu_util_pct", unit="%"),
    "mem": Field("mem_util_pct", unit="%"),
    "enc": Field("enc_util_pct", unit="%"),
    "dec": Field("dec_util_pct", unit="%"),
    "jpg": Field("jpg_util_pct", unit="%"),
    "ofa": Field("ofa_util_pct", unit="%"),
    "mclk": Field("mem_clock_mhz", unit="MHz"),
    "pclk": Field("sm_clock_mhz", unit="MHz"),
    "fb": Field("mem_used_bytes", MIB, "MB"),
    "rxpci": Field("pcie_rx_bytes_per_s", MIB, "MB/s"),
    "txpci": Field("pcie_tx_bytes_per_s", MIB, "MB/s"),
}
"""dmon columns kept; nvidia-smi's "MB" is MiB (it divides by 1024*1024)."""


@dataclass(frozen=True)
class DcgmField:
    """One DCGM field: numeric id, the old (<= 4.5, dcgm-exporter) name, the DCGM 4.6
    name, the ``dcgmi dmon`` tag and the canonical mapping.
    """

    id: int
    name: str
    new_name: str | None
    tag: str | None
    field: Field


DCGM: tuple[DcgmField, ...] = (
    DcgmField(100, "DCGM_FI_DEV_SM_CLOCK", None, "SMCLK", Field("sm_clock_mhz")),
    DcgmField(101, "DCGM_FI_DEV_MEM_CLOCK", None, "MMCLK", Field("mem_clock_mhz")),
    DcgmField(
        112,
        "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
        "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
        "DVCCTR",
        Field("clock_event_reasons"),
    ),
    DcgmField(140, "DCGM_FI_DEV_MEMORY_TEMP", None, "MMTMP", Field("mem_temp_c")),
    DcgmField(
        150, "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_GPU_TEMP_CELSIUS", "TMPTR", Field("temp_c")
    ),
    DcgmField(
        155, "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_BOARD_POWER_WATTS", "POWER", Field("power_w")
    ),
    DcgmField(156, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", None, "TOTEC", Field("energy_mj")),
    DcgmField(158, "DCGM_FI_DEV_SLOWDOWN_TEMP", None, None, Field("slowdown_temp_c")),
    DcgmField(160, "DCGM_FI_DEV_POWER_MGMT_LIMIT", None, None, Field("power_limit_w")),
    DcgmField(190, "DCGM_FI_DEV_PSTATE", None, None, Field("pstate")),
    DcgmField(202, "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", None, None, Field("pcie_replay_count")),
    DcgmField(
        203, "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_GPU_UTIL_RATIO", "GPUTL", Field("gpu_util_pct")
    ),
    DcgmField(204, "DCGM_FI_DEV_MEM_COPY_UTIL", None, "MCUTL", Field("mem_util_pct")),
    DcgmField(206, "DCGM_FI_DEV_ENC_UTIL", None, "ENCUT", Field("enc_util_pct")),
    DcgmField(207, "DCGM_FI_DEV_DEC_UTIL", None, "DECUT", Field("dec_util_pct")),
    DcgmField(230, "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_XID_ERROR", "XIDER", Field("event:xid")),
    DcgmField(250, "DCGM_FI_DEV_FB_TOTAL", None, "FBTTL", Field("mem_total_bytes", MIB)),
    DcgmField(251, "DCGM_FI_DEV_FB_FREE", None, "FBFRE", Field("mem_free_bytes", MIB)),
    DcgmField(252, "DCGM_FI_DEV_FB_USED", None, "FBUSD", Field("mem_used_bytes", MIB)),
    DcgmField(253, "DCGM_FI_DEV_FB_RESERVED", None, "FBRSV", Field("mem_reserved_bytes", MIB)),
    DcgmField(310, "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", None, "ESVTL", Field("event:ecc_sbe")),
    DcgmField(311, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", None, "EDVTL", Field("event:ecc_dbe")),
    DcgmField(
        1001,
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO",
        "GRACT",
        Field("gr_engine_active_ratio"),
    ),
    DcgmField(
        1002,
        "DCGM_FI_PROF_SM_ACTIVE",
        "DCGM_FI_PROF_SM_UTIL_RATIO",
        "SMACT",
        Field("sm_active_ratio"),
    ),
    DcgmField(
        1003,
        "DCGM_FI_PROF_SM_OCCUPANCY",
        "DCGM_FI_PROF_SM_OCCUPANCY_RATIO",
        "SMOCC",
        Field("sm_occupancy_ratio"),
    ),
    DcgmField(
        1004,
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "DCGM_FI_PROF_TENSOR_UTIL_RATIO",
        "TENSO",
        Field("tensor_active_ratio"),
    ),
    DcgmField(
        1005,
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "DCGM_FI_PROF_DRAM_UTIL_RATIO",
        "DRAMA",
        Field("dram_active_ratio"),
    ),
    DcgmField(1006, "DCGM_FI_PROF_PIPE_FP64_ACTIVE", None, "FP64A", Field("fp64_active_ratio")),
    DcgmField(1007, "DCGM_FI_PROF_PIPE_FP32_ACTIVE", None, "FP32A", Field("fp32_active_ratio")),
    DcgmField(1008, "DCGM_FI_PROF_PIPE_FP16_ACTIVE", None, "FP16A", Field("fp16_active_ratio")),
    DcgmField(1009, "DCGM_FI_PROF_PCIE_TX_BYTES", None, "PCITX", Field("pcie_tx_bytes_per_s")),
    DcgmField(1010, "DCGM_FI_PROF_PCIE_RX_BYTES", None, "PCIRX", Field("pcie_rx_bytes_per_s")),
    DcgmField(1011, "DCGM_FI_PROF_NVLINK_TX_BYTES", None, "NVLTX", Field("nvlink_tx_bytes_per_s")),
    DcgmField(1012, "DCGM_FI_PROF_NVLINK_RX_BYTES", None, "NVLRX", Field("nvlink_rx_bytes_per_s")),
)
"""DCGM fields keyed on the numeric id; DCGM 4.6 renamed many fields but kept the ids,
so both spellings map to the same metric. PCIe/NVLink PROF fields are rates over the
watch interval (dcgm-exporter declares them gauges in bytes/s)."""

DCGM_BY_NAME: dict[str, DcgmField] = {
    name: f for f in DCGM for name in (f.name, f.new_name) if name is not None
}
DCGM_BY_TAG: dict[str, DcgmField] = {f.tag: f for f in DCGM if f.tag is not None}
DCGM_BY_ID: dict[int, DcgmField] = {f.id: f for f in DCGM}

XID_COUNT_FAMILY = "DCGM_EXP_XID_ERRORS_COUNT"
"""dcgm-exporter's own XID counter: one series per ``xid`` label, value = count in the
``window_size_in_ms`` window."""

NULL_MARKERS = ("", "N/A", "-", "NA", "n/a")
"""Bare missing-value markers; any value in square brackets (``[N/A]``,
``[Not Supported]``, ``[Requested functionality has been deprecated]``...) is missing too."""

DCGM_INT32_BLANK = 0x7FFFFFF0
DCGM_INT64_BLANK = 0x7FFFFFFFFFFFFFF0
DCGM_FP64_BLANK = 140737488355328.0
"""DCGM's "no value" sentinels (BLANK, +1 NOT_FOUND, +2 NOT_SUPPORTED, +3
NOT_PERMISSIONED). Any float at or above FP64_BLANK, and the four INT32 codes exactly,
are nulls, never values."""
