"""What a user describes: the cluster's static shape (:class:`ClusterSpec`), parsed from
a spec string such as ``6500x8`` or ``64x8:V100+32x4:P100,cpu=96,mem=768G``.

A cluster is nodes x GPUs x GPU type, plus optional per-VC GPU quotas and, per node, CPU
and memory (a multi-resource cluster). The spec never changes during a replay: the
allocation state (:mod:`~gpu_trace.replay.cluster.state`) is built from it, and reports
describe it. Files and the trace's own inventory become specs in
:mod:`~gpu_trace.replay.cluster.sources`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from gpu_trace.errors import GpuTraceError

MILLI = 1000
"""Milli-GPU per GPU: capacity is counted in these integers (1000 = one whole GPU), so a
0.47-GPU pod and a whole-GPU job share one exact representation with no float drift."""

ANY_TYPE = -1
"""Type mask meaning "any GPU type" (all bits set)."""

UNLIMITED = 1 << 60
"""CPU (milli-cores) or memory (bytes) of a node whose spec does not give it: so large that
no job is ever refused for it, so a GPU-only cluster (``6500x8``) replays as before."""


@dataclass(frozen=True)
class ClusterSpec:
    """Static cluster shape: one entry per node."""

    node_gpus: tuple[int, ...]
    node_type: tuple[int, ...]
    type_names: tuple[str, ...]
    vc_quota_gpus: dict[str, float] = field(default_factory=dict)
    name: str = "cluster"
    node_cpu_milli: tuple[int, ...] | None = None
    """CPU per node in milli-cores; None = :data:`UNLIMITED` on every node."""
    node_mem_bytes: tuple[int, ...] | None = None
    """Host memory per node in bytes; None = :data:`UNLIMITED`."""
    node_gpu_mem_bytes: tuple[int, ...] | None = None
    """Memory of one GPU per node (informational: no trace requests GPU memory)."""

    def __post_init__(self) -> None:
        if not self.node_gpus:
            msg = "the cluster has no GPU nodes"
            raise GpuTraceError(msg)
        if len(self.type_names) > 62:
            msg = "at most 62 GPU types are supported"
            raise GpuTraceError(msg)
        for name in ("node_cpu_milli", "node_mem_bytes", "node_gpu_mem_bytes"):
            got = getattr(self, name)
            if got is not None and len(got) != len(self.node_gpus):
                msg = f"cluster {name} has {len(got)} entries for {self.nodes} nodes"
                raise GpuTraceError(msg)

    @property
    def multi_resource(self) -> bool:
        """Whether any node has a finite CPU or memory capacity."""
        return any(
            v is not None and any(x < UNLIMITED for x in v)
            for v in (self.node_cpu_milli, self.node_mem_bytes)
        )

    def cpu_np(self) -> npt.NDArray[np.int64]:
        """CPU milli-cores per node (UNLIMITED where not given)."""
        if self.node_cpu_milli is None:
            return np.full(self.nodes, UNLIMITED, dtype=np.int64)
        return np.asarray(self.node_cpu_milli, dtype=np.int64)

    def mem_np(self) -> npt.NDArray[np.int64]:
        """Host memory bytes per node (UNLIMITED where not given)."""
        if self.node_mem_bytes is None:
            return np.full(self.nodes, UNLIMITED, dtype=np.int64)
        return np.asarray(self.node_mem_bytes, dtype=np.int64)

    @property
    def nodes(self) -> int:
        """Number of nodes."""
        return len(self.node_gpus)

    @property
    def gpus(self) -> int:
        """GPUs in the whole cluster."""
        return sum(self.node_gpus)

    @property
    def max_node_gpus(self) -> int:
        """GPUs on the largest node (the width of the per-GPU free matrix)."""
        return max(self.node_gpus)

    def type_mask(self, constraint: str | None) -> int:
        """Bit mask of the type codes a ``A|B`` constraint allows (``ANY_TYPE`` for
        none); 0 when none of the named types exists in this cluster.
        """
        if constraint is None or constraint == "":
            return ANY_TYPE
        mask = 0
        for name in constraint.split("|"):
            if name in self.type_names:
                mask |= 1 << self.type_names.index(name)
        return mask

    def describe(self) -> dict[str, Any]:
        """Nodes and GPUs per type, quotas and (multi-resource) CPU / memory totals, for run
        metadata and reports.
        """
        by_type: dict[str, dict[str, int]] = {}
        for g, t in zip(self.node_gpus, self.node_type, strict=True):
            d = by_type.setdefault(self.type_names[t], {"nodes": 0, "gpus": 0})
            d["nodes"] += 1
            d["gpus"] += g
        out: dict[str, Any] = {
            "name": self.name,
            "nodes": self.nodes,
            "gpus": self.gpus,
            "types": by_type,
            "vc_quota_gpus": dict(sorted(self.vc_quota_gpus.items())),
        }
        if self.multi_resource:
            cpu, mem = self.cpu_np(), self.mem_np()
            out["cpu_milli"] = int(cpu[cpu < UNLIMITED].sum())
            out["mem_bytes"] = int(mem[mem < UNLIMITED].sum())
        return out


def from_groups(
    groups: Sequence[tuple[int, int, str]],
    vc_quota_gpus: dict[str, float] | None = None,
    name: str = "cluster",
    resources: Sequence[tuple[int, int, int]] | None = None,
) -> ClusterSpec:
    """Build a spec from ``(node count, GPUs per node, GPU type)`` groups; ``resources``
    (one per group: CPU milli-cores, memory bytes, GPU memory bytes per node, each
    :data:`UNLIMITED` / 0 when unknown) makes it a multi-resource cluster.
    """
    types: list[str] = []
    gpus: list[int] = []
    kinds: list[int] = []
    cpu: list[int] = []
    mem: list[int] = []
    gmem: list[int] = []
    for i, (count, per_node, gpu_type) in enumerate(groups):
        if count < 0 or per_node < 0:
            msg = f"negative node or GPU count in cluster group {count}x{per_node}"
            raise GpuTraceError(msg)
        if per_node == 0 and resources is None:
            continue  # a GPU-less node matters only when CPU / memory are modelled
        if gpu_type not in types:
            types.append(gpu_type)
        gpus.extend([per_node] * count)
        kinds.extend([types.index(gpu_type)] * count)
        if resources is not None:
            c, m, g = resources[i]
            if c <= 0 or m <= 0:
                msg = f"cluster group {count}x{per_node} needs positive CPU and memory"
                raise GpuTraceError(msg)
            cpu.extend([c] * count)
            mem.extend([m] * count)
            gmem.extend([g] * count)
    if resources is None:
        return ClusterSpec(tuple(gpus), tuple(kinds), tuple(types), dict(vc_quota_gpus or {}), name)
    return ClusterSpec(
        tuple(gpus),
        tuple(kinds),
        tuple(types),
        dict(vc_quota_gpus or {}),
        name,
        tuple(cpu),
        tuple(mem),
        tuple(gmem),
    )


_SIZE = re.compile(r"^(?P<num>\d+(?:\.\d+)?)(?P<unit>[KMGT]i?B?|B)?$", re.IGNORECASE)
_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_bytes(text: str) -> int:
    """``768G`` / ``768GiB`` / ``512M`` / ``1024`` -> bytes (binary units)."""
    m = _SIZE.match(text.strip())
    if not m:
        msg = f"memory size {text!r} is not a number with K/M/G/T (e.g. 768GiB)"
        raise GpuTraceError(msg)
    unit = (m["unit"] or "").upper()[:1]
    return int(float(m["num"]) * _UNITS[unit])


def parse_resources(text: str) -> tuple[int, int, int]:
    """``cpu=96,mem=768GiB[,gpumem=32GiB]`` -> (CPU milli-cores, memory bytes, GPU memory
    bytes); an absent CPU / memory stays :data:`UNLIMITED`.
    """
    cpu, mem, gmem = UNLIMITED, UNLIMITED, 0
    for item in text.split(","):
        key, _, val = item.partition("=")
        key = key.strip().lower()
        try:
            if key == "cpu":
                cpu = round(float(val) * 1000)
            elif key == "mem":
                mem = parse_bytes(val)
            elif key == "gpumem":
                gmem = parse_bytes(val)
            else:
                msg = f"cluster resource {item!r}: use cpu=, mem= or gpumem="
                raise GpuTraceError(msg)
        except ValueError:
            msg = f"cluster resource {item!r} is not a number"
            raise GpuTraceError(msg) from None
    return cpu, mem, gmem


_SPEC = re.compile(
    r"^(?P<gpus>\d+)x(?P<per>\d+)(?::(?P<type>[A-Za-z0-9_.-]+))?(?:,(?P<res>[^+]+))?$"
)


def parse_spec(text: str) -> ClusterSpec:
    """``N x G[:TYPE][,cpu=C,mem=M]``: N GPUs in nodes of G (a last, smaller node takes
    the remainder); several groups joined with ``+`` (``64x8:V100+32x4:P100``). Without
    ``cpu=`` / ``mem=`` a node's CPU and memory are :data:`UNLIMITED` (GPU-only, as
    before); with them each node has ``C`` cores and ``M`` bytes (``6500x8,cpu=96,mem=768G``).
    """
    groups: list[tuple[int, int, str]] = []
    res: list[tuple[int, int, int]] = []
    for part in text.split("+"):
        m = _SPEC.match(part.strip())
        if not m:
            msg = f"cluster spec {part!r} is not NxG[:TYPE][,cpu=C,mem=M] (e.g. 6500x8)"
            raise GpuTraceError(msg)
        total, per = int(m["gpus"]), int(m["per"])
        if per <= 0 or total <= 0:
            msg = f"cluster spec {part!r} needs positive GPU counts"
            raise GpuTraceError(msg)
        gtype = m["type"] or "gpu"
        r = parse_resources(m["res"]) if m["res"] else (UNLIMITED, UNLIMITED, 0)
        groups.append((total // per, per, gtype))
        res.append(r)
        if total % per:
            groups.append((1, total % per, gtype))
            res.append(r)
    limited = any(c < UNLIMITED or mm < UNLIMITED for c, mm, _ in res)
    return from_groups(groups, name=text, resources=res if limited else None)
