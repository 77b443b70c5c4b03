"""The emulated cluster: its static shape (:class:`ClusterSpec`) and its mutable
allocation state (:class:`ClusterState`).

A cluster is nodes x GPUs x GPU type, plus optional per-VC GPU quotas. It comes from a
spec string (``6500x8``: 6,500 GPUs in nodes of 8), a file (TOML / JSON / CSV), or the
trace's own ``machines`` / ``capacity`` tables (``from-trace``).

GPU capacity is tracked per GPU in milli-GPU integers (1000 = one whole GPU), so openb's
fractional sharing (a 0.47-GPU pod) and whole-GPU jobs use one exact representation with
no float drift. Whole-GPU placement costs O(log G) per decision on any node size: nodes
are bucketed by their count of wholly free GPUs per GPU type, and
:mod:`~gpu_trace.replay.capacity_index` keeps the non-empty buckets, each bucket's nodes
and each large node's free GPUs in ordered bitmaps, or a sorted list for a large node
alone in its type (no scan over buckets, nodes or a node's GPUs). A numpy mirror of the per-GPU free matrix
serves the vectorized policies (random, best-fit, FGD) that score every node at once.
"""

from __future__ import annotations

import csv
import json
import math
import re
import tomllib
from bisect import bisect_left, insort
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from gpu_trace.errors import GpuTraceError, InputError
from gpu_trace.replay.cluster.index import SMALL_NODE, CapacityIndex

MILLI = 1000
"""Milli-GPU per GPU."""

ANY_TYPE = -1
"""Type mask meaning "any GPU type" (all bits set)."""

FEW_NODES = 64
"""Clusters of at most this many nodes are scanned node by node in Python (cheaper than
one numpy pass at that size)."""

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


def load_file(path: Path) -> ClusterSpec:
    """Read a cluster file.

    - TOML / JSON: ``nodes = [{count = 100, gpus = 8, gpu_type = "V100"}, ...]`` and an
      optional ``[vc_quotas]`` table of GPUs per VC.
      Optional per group: ``cpus`` (cores), ``mem`` and ``gpu_mem`` (``"768GiB"``).
    - CSV with header ``count,gpus,gpu_type`` (one group per line), the openb node list
      ``sn,cpu_milli,memory_mib,gpu,model`` (one node per line, CPU-only nodes too),
      or the HeliosArtifact VC file ``vc,node num`` (8-GPU nodes; each VC's quota = its
      nodes x 8).
    """
    suffix = path.suffix.lower()
    if suffix in {".toml", ".json"}:
        return _load_doc(path, suffix)
    if suffix == ".csv":
        return _load_csv(path)
    raise InputError(path, "cluster files are .toml, .json or .csv")


def _load_doc(path: Path, suffix: str) -> ClusterSpec:
    """A TOML / JSON cluster file (see :func:`load_file`)."""
    try:
        raw = path.read_text(encoding="utf-8")
        doc: dict[str, Any] = tomllib.loads(raw) if suffix == ".toml" else json.loads(raw)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise InputError(path, f"not valid {suffix[1:].upper()}: {exc}") from None
    nodes = doc.get("nodes")
    if not isinstance(nodes, list) or not nodes:
        raise InputError(path, "needs a non-empty `nodes` list")
    groups = []
    res: list[tuple[int, int, int]] = []
    for i, g in enumerate(nodes):
        try:
            groups.append((int(g["count"]), int(g["gpus"]), str(g.get("gpu_type", "gpu"))))
            res.append(
                (
                    round(float(g["cpus"]) * 1000) if "cpus" in g else UNLIMITED,
                    parse_bytes(str(g["mem"])) if "mem" in g else UNLIMITED,
                    parse_bytes(str(g["gpu_mem"])) if "gpu_mem" in g else 0,
                )
            )
        except (KeyError, TypeError, ValueError, GpuTraceError):
            raise InputError(
                path,
                "each node group needs integer `count` and `gpus` "
                '(optional `cpus`, `mem`, `gpu_mem` like 96 / "768GiB")',
                f"nodes[{i}]",
            ) from None
    quotas = {str(k): float(v) for k, v in dict(doc.get("vc_quotas", {})).items()}
    limited = any(c < UNLIMITED or m < UNLIMITED for c, m, _ in res)
    return from_groups(groups, quotas, name=path.stem, resources=res if limited else None)


def _load_csv(path: Path) -> ClusterSpec:
    """A CSV cluster file, by its header (see :func:`load_file`)."""
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    if not rows:
        raise InputError(path, "empty file")
    header = [h.strip() for h in rows[0]]
    body = [r for r in rows[1:] if r]
    try:
        if header[:2] == ["count", "gpus"]:
            return from_groups(
                [(int(r[0]), int(r[1]), r[2] if len(r) > 2 and r[2] else "gpu") for r in body],
                name=path.stem,
            )
        if header[:5] == ["sn", "cpu_milli", "memory_mib", "gpu", "model"]:
            # the openb node list (FGD simulator input): one node per line
            rows_ok = [r for r in body if int(r[3]) > 0 or int(r[1]) > 0]
            return from_groups(
                [(1, int(r[3]), r[4] or "gpu") for r in rows_ok],
                name=path.stem,
                resources=[(int(r[1]), int(r[2]) << 20, 0) for r in rows_ok],
            )
        if header == ["vc", "node num"]:
            groups = [(int(r[1]), 8, "gpu") for r in body]
            quotas = {r[0]: int(r[1]) * 8.0 for r in body}
            return from_groups(groups, quotas, name=path.stem)
    except (ValueError, IndexError) as exc:
        raise InputError(path, f"bad value: {exc}") from None
    raise InputError(path, f"unknown CSV header {','.join(header)!r}", "line 1")


def from_trace(
    machines: pl.LazyFrame, capacity: pl.LazyFrame, source: str, dataset: str | None = None
) -> ClusterSpec:
    """The trace's own cluster: its ``machines`` inventory ``dataset``, or without one
    the dataset with the most GPUs (ties: the fewest machines, then the first by name,
    so openb's ``gpu_node``, its 1,213 GPU nodes and the FGD paper's node list, over
    ``all_node``, the same GPUs plus 310 CPU-only nodes), with each machine's CPU and
    memory when the inventory has them, else the peak of its published ``capacity`` in
    8-GPU nodes.
    """
    m = machines.filter((pl.col("source") == source) & (pl.col("gpus") >= 0)).collect()
    if dataset is not None:
        known = sorted(set(m["dataset"].to_list()))
        if dataset not in known:
            msg = (
                f"source {source!r} has no machines dataset {dataset!r}; "
                f"known: {', '.join(known) or 'none'}"
            )
            raise GpuTraceError(msg)
        m = m.filter(pl.col("dataset") == dataset)
    if "cpus" in m.columns:
        # GPU-less machines (openb's CPU nodes) hold CPU-only tasks on a multi-resource
        # cluster; without CPU data they are useless and left out
        m = m.filter((pl.col("gpus") > 0) | (pl.col("cpus").fill_null(0) > 0))
    else:
        m = m.filter(pl.col("gpus") > 0)
    if m.height and m["gpus"].sum() > 0:
        best = (
            m.group_by("dataset")
            .agg(pl.col("gpus").sum().alias("g"), pl.len().alias("n"))
            .sort(["g", "n", "dataset"], descending=[True, False, False])
            .item(0, "dataset")
        )
        m = m.filter(pl.col("dataset") == best).sort("machine_id")
        res = _machine_resources(m)
        if res is None:
            m = m.filter(pl.col("gpus") > 0)
        groups = [
            (1, int(g), t if t is not None else "gpu")
            for g, t in zip(m["gpus"].to_list(), m["gpu_type"].to_list(), strict=True)
        ]
        return from_groups(groups, name=f"{source}:{best}", resources=_machine_resources(m))
    c = capacity.filter((pl.col("source") == source) & pl.col("vc").is_null()).collect()
    if c.height:
        peak = int(c["gpus"].max())  # type: ignore[arg-type]
        spec = parse_spec(f"{peak}x8")
        return ClusterSpec(
            spec.node_gpus, spec.node_type, spec.type_names, {}, f"{source}:capacity"
        )
    msg = f"source {source!r} has no machines or capacity in the store; give --gpus or --cluster"
    raise GpuTraceError(msg)


def _machine_resources(m: pl.DataFrame) -> list[tuple[int, int, int]] | None:
    """(CPU milli-cores, memory bytes, GPU memory bytes) per machine row, when the
    inventory has CPU and memory (an unknown value on one machine = :data:`UNLIMITED`);
    None when it has neither, so the cluster stays GPU-only.
    """
    cols = set(m.columns)
    if not {"cpus", "mem_bytes"} <= cols or (
        m["cpus"].null_count() == m.height and m["mem_bytes"].null_count() == m.height
    ):
        return None
    cpu = (m["cpus"] * 1000).round(0).cast(pl.Int64).fill_null(UNLIMITED).to_list()
    mem = m["mem_bytes"].cast(pl.Int64).fill_null(UNLIMITED).to_list()
    gm = (
        m["gpu_mem_bytes"].cast(pl.Int64).fill_null(0).to_list()
        if "gpu_mem_bytes" in cols
        else [0] * m.height
    )
    return [
        (c if c > 0 else UNLIMITED, b if b > 0 else UNLIMITED, g)
        for c, b, g in zip(cpu, mem, gm, strict=True)
    ]


class ClusterState:
    """Mutable allocation state of a cluster (the engine's; policies see a
    :class:`ClusterView`).

    ``free[n][g]`` is the free milli-GPU of GPU g on node n: ``memoryview`` rows over
    the matrix ``free_np`` that the vectorized policies score (-1 marks GPU slots a
    smaller node does not have), so an allocation writes each value once and the two can
    never disagree (scalar access through a memoryview is as cheap as through an
    ``array``).
    ``whole[n]`` counts wholly free GPUs and ``buckets[t][k]`` holds the nodes of type t
    with exactly k wholly free GPUs; ``index`` (:class:`CapacityIndex`) orders them.
    """

    def __init__(self, spec: ClusterSpec) -> None:
        self.spec = spec
        n, gmax = spec.nodes, spec.max_node_gpus
        self.gmax = gmax
        self.node_gpus = list(spec.node_gpus)
        self.node_type = list(spec.node_type)
        self.free_np: npt.NDArray[np.int32] = np.full((n, gmax), -1, dtype=np.int32)
        for i, g in enumerate(spec.node_gpus):
            self.free_np[i, :g] = MILLI
        self.free: list[memoryview] = [
            self.free_np[i, :g].data for i, g in enumerate(spec.node_gpus)
        ]
        """Per-node rows *of* ``free_np`` (one write updates both)."""
        self.whole = list(spec.node_gpus)
        self.node_free = [g * MILLI for g in spec.node_gpus]
        self.buckets: list[list[set[int]]] = [
            [set() for _ in range(gmax + 1)] for _ in spec.type_names
        ]
        for i, (g, t) in enumerate(zip(spec.node_gpus, spec.node_type, strict=True)):
            self.buckets[t][g].add(i)
        self.type_np = np.asarray(spec.node_type, dtype=np.int64)
        self.capacity_milli = spec.gpus * MILLI
        self.used_milli = 0
        self.frag_milli = 0
        """Free capacity on nodes that are partly used (see :meth:`_frag`)."""
        self.multi_resource = spec.multi_resource
        """Whether CPU / memory can refuse a job (else those checks are skipped)."""
        self.cpu_cap = spec.cpu_np()
        self.mem_cap = spec.mem_np()
        self.cpu_free = self.cpu_cap.copy()
        """Free CPU milli-cores per node (numpy: checked for all nodes at once)."""
        self.mem_free = self.mem_cap.copy()
        """Free host memory bytes per node."""
        self.types_for_mask: dict[int, tuple[int, ...]] = {}
        self.max_whole_for_mask: dict[int, int] = {}
        self.bucket_rows: dict[int, list[list[set[int]]]] = {}
        self.capacity_of_mask: dict[int, tuple[int, int]] = {}
        self.index = CapacityIndex(spec.node_gpus, spec.node_type, len(spec.type_names), gmax)
        per_type = [0] * len(spec.type_names)
        for t in spec.node_type:
            per_type[t] += 1
        self.whole_part_of: dict[int, list[tuple[int, int, int]]] = {}
        """Large node -> its whole-GPU parts ``(n, g, MILLI)`` by GPU (see
        :meth:`whole_parts`)."""
        self.type_node = [-1] * len(spec.type_names)
        """Per GPU type: its node when it has exactly one, else -1."""
        for i, t in enumerate(spec.node_type):
            self.type_node[t] = i if per_type[t] == 1 else -1
        self.solo = [i in self.index.listed for i in range(n)]
        """Per node: large (its free GPUs in ``index.listed``) and alone in its GPU type, so its
        type's bucket sets never hold another node and whole-GPU parts on it can be taken
        and given back as one batch (see :meth:`allocate`)."""
        self.down: dict[int, list[tuple[int, int, int]]] = {}
        """Nodes out of service (failed, powered off) -> the pseudo-allocation that
        holds all their GPUs so no placement uses them."""
        self.down_milli = 0
        self.ups = 0
        """Nodes put back in service so far (a policy that remembers "no room" must look
        again after one: it frees capacity without any job ending)."""

    def set_down(self, n: int) -> None:
        """Take node ``n`` out of service: hold its free capacity (its jobs must have
        been stopped first).
        """
        if n in self.down:
            return
        parts = [(n, g, f) for g, f in enumerate(self.free[n]) if f > 0]
        self.allocate(parts)
        self.down[n] = parts
        self.down_milli += sum(p[2] for p in parts)

    def set_up(self, n: int) -> None:
        """Put node ``n`` back in service."""
        parts = self.down.pop(n, None)
        if parts is None:
            return
        self.release(parts)
        self.down_milli -= sum(p[2] for p in parts)
        self.ups += 1

    def types_of(self, mask: int) -> tuple[int, ...]:
        """Type codes allowed by ``mask`` (cached)."""
        got = self.types_for_mask.get(mask)
        if got is None:
            got = tuple(t for t in range(len(self.spec.type_names)) if mask >> t & 1)
            self.types_for_mask[mask] = got
        return got

    def node_ok_np(self, mask: int) -> npt.NDArray[np.bool_]:
        """Boolean per node: its type is allowed by ``mask``."""
        if mask == ANY_TYPE:
            return np.ones(len(self.node_gpus), dtype=bool)
        return ((mask >> self.type_np) & 1).astype(bool)

    def capacity_for(self, mask: int) -> tuple[int, int]:
        """(GPUs on the largest allowed node, GPUs on all allowed nodes); node sizes
        never change, so the answer is kept per mask (placements ask it per attempt).
        """
        got = self.capacity_of_mask.get(mask)
        if got is None:
            ok = self.node_ok_np(mask)
            gpus = np.asarray(self.node_gpus)[ok]
            got = (int(gpus.max()), int(gpus.sum())) if gpus.size else (0, 0)
            self.capacity_of_mask[mask] = got
        return got

    def first_with_whole(self, ngpu: int, mask: int) -> int:
        """The lowest-index node of an allowed type with at least ``ngpu`` wholly free
        GPUs; -1 if none (first fit by index, as Tiresias' ``yarn`` scans its nodes).
        Few nodes: a scan of the per-node counts; nodes of at most ``SMALL_NODE``
        GPUs: the lowest node of each count from ``ngpu`` up (O(gmax x log G)); else
        one vectorized pass.
        """
        whole = self.whole
        if len(whole) <= FEW_NODES:
            ntype = self.node_type
            for n, k in enumerate(whole):
                if k >= ngpu and (mask == ANY_TYPE or (mask >> ntype[n]) & 1):
                    return n
            return -1
        if self.gmax <= SMALL_NODE:
            rows = self.bucket_rows.get(mask)
            if rows is None:
                rows = self.bucket_rows[mask] = [self.buckets[t] for t in self.types_of(mask)]
            types = self.types_of(mask)
            best = -1
            for k in range(max(ngpu, 0), self.gmax + 1):
                if any(row[k] for row in rows):
                    n = self.index.lowest_node(types, k)
                    if best < 0 or n < best:
                        best = n
            return best
        ok = self.node_ok_np(mask) & (np.asarray(whole) >= ngpu)
        hits = np.flatnonzero(ok)
        return int(hits[0]) if hits.size else -1

    def node_with_whole(self, lo: int, hi: int, step: int, mask: int) -> int:
        """The first node of an allowed type whose count of wholly free GPUs is ``lo``,
        else ``lo + step``, ... up to ``hi`` (inclusive); -1 if none. ``step = 1`` from
        ``ngpu`` gives the fullest node that fits, ``step = -1`` from ``gmax`` the
        emptiest. Within one count the lowest node index wins (across the allowed
        types), as docs/replay.md states. Nodes of at most ``SMALL_NODE`` GPUs:
        a scan of at most that many counts; larger: O(types x log G) in the index.
        """
        if self.gmax <= SMALL_NODE:
            rows = self.bucket_rows.get(mask)
            if rows is None:
                rows = self.bucket_rows[mask] = [self.buckets[t] for t in self.types_of(mask)]
            for k in range(lo, hi + step, step):
                for row in rows:
                    if row[k]:
                        return self.index.lowest_node(self.types_of(mask), k)
            return -1
        types = self.types_of(mask)
        if len(types) == 1 and self.type_node[types[0]] >= 0:  # its bucket sets hold only it
            n = self.type_node[types[0]]
            k = self.whole[n]
            return n if (lo <= k <= hi if step > 0 else hi <= k <= lo) else -1
        t, k = self.index.first_count(types, lo, hi, step)
        if t < 0:
            return -1
        return self.index.lowest_node(types, k)

    def nodes_by_whole(self, mask: int) -> list[tuple[int, int]]:
        """(node, wholly free GPUs) of the allowed types with any, most free first, then
        by node index.
        """
        return list(self.iter_by_whole(mask))

    def iter_by_whole(self, mask: int) -> Iterator[tuple[int, int]]:
        """:meth:`nodes_by_whole`, lazily: each item costs O(log nodes)."""
        return self.index.by_whole(self.types_of(mask))

    def whole_free(self, mask: int) -> int:
        """Wholly free GPUs on nodes of the allowed types (O(types))."""
        total = self.index.whole_total
        return sum(total[t] for t in self.types_of(mask))

    def room_milli(self) -> int:
        """Free milli-GPU, cluster-wide: a job needing more fits nowhere (the engine
        refuses it before asking the placement).
        """
        return self.capacity_milli - self.used_milli

    def _frag(self, n: int) -> int:
        f = self.node_free[n]
        return f if 0 < f < self.node_gpus[n] * MILLI else 0

    def allocate(self, parts: Sequence[tuple[int, int, int]]) -> None:
        """Take ``milli`` on GPU ``g`` of node ``n`` for each part (checked).

        Whole GPUs on one node that is alone in its type and large (the PAI simulator's
        single 6,500-GPU node) are taken as one batch: per GPU only its slot changes,
        its free list loses them in one slice (usually), and the node's counts, bucket
        and index count move once. Anything else goes part by part
        (:meth:`_allocate_each`).
        """
        if parts:
            n = parts[0][0]
            if self.solo[n] and self._take_solo(n, parts):
                return
        self._allocate_each(parts)

    def release(self, parts: Sequence[tuple[int, int, int]]) -> None:
        """Give back what :meth:`allocate` took (the same batch rule)."""
        if parts:
            n = parts[0][0]
            if self.solo[n] and self._give_solo(n, parts):
                return
        self._release_each(parts)

    def _take_solo(self, n: int, parts: Sequence[tuple[int, int, int]]) -> bool:
        """Take whole GPUs on solo node ``n``; False, with nothing changed, unless every
        part is a wholly free GPU of ``n`` (then the part-by-part path decides). The
        bucket sets of a solo node's type hold at most that node, so moving it once
        leaves them as moving it one GPU at a time would.
        """
        row = self.free[n]
        free = self.index.listed[n]
        if len(parts) == 1:  # most jobs: one GPU, without the loop
            m, g, milli = parts[0]
            if m != n or milli != MILLI or row[g] != MILLI:
                return False
            row[g] = 0
            del free[0 if free[0] == g else bisect_left(free, g)]
            self._move_whole(n, -1)
            return True
        lowest = True  # the parts are the node's lowest free GPUs, in order (the usual)
        for i, (m, g, milli) in enumerate(parts):
            if m != n or milli != MILLI or row[g] != MILLI:
                for _, h, _ in parts[:i]:
                    row[h] = MILLI
                return False
            row[g] = 0
            if lowest and free[i] != g:  # i < len(free): parts so far are distinct free GPUs
                lowest = False
        k = len(parts)
        if lowest:
            del free[:k]
        else:
            for _, g, _ in parts:
                del free[bisect_left(free, g)]
        self._move_whole(n, -k)
        return True

    def _give_solo(self, n: int, parts: Sequence[tuple[int, int, int]]) -> bool:
        """:meth:`_take_solo` in reverse: every part a wholly used GPU of ``n``."""
        row = self.free[n]
        if len(parts) == 1:  # most jobs: one GPU, without the loop
            m, g, milli = parts[0]
            if m != n or milli != MILLI or row[g] != 0:
                return False
            row[g] = MILLI
            insort(self.index.listed[n], g)
            self._move_whole(n, 1)
            return True
        for i, (m, g, milli) in enumerate(parts):
            if m != n or milli != MILLI or row[g] != 0:
                for _, h, _ in parts[:i]:
                    row[h] = 0
                return False
            row[g] = MILLI
        free = self.index.listed[n]
        for _, g, _ in parts:
            insort(free, g)
        self._move_whole(n, len(parts))
        return True

    def _move_whole(self, n: int, d: int) -> None:
        """Node ``n`` gained ``d`` (< 0: lost) wholly free GPUs in a batch: its free and
        fragmented capacity, the used total, its bucket and its index key.
        """
        cap = self.node_gpus[n] * MILLI
        f = self.node_free[n]
        frag = self.frag_milli
        if 0 < f < cap:
            frag -= f
        f += d * MILLI
        if 0 < f < cap:
            frag += f
        self.frag_milli = frag
        self.node_free[n] = f
        self.used_milli -= d * MILLI
        k = self.whole[n]
        t = self.node_type[n]
        b = self.buckets[t]
        b[k].discard(n)
        b[k + d].add(n)
        self.whole[n] = k + d
        index = self.index  # index.move(n, t, k, k + d) for a solo type, inlined
        index.whole_total[t] += d
        index.whole[t] = k + d

    def _allocate_each(self, parts: Sequence[tuple[int, int, int]]) -> None:  # noqa: C901  measured hot path (one frame per call)
        """:meth:`allocate`, part by part.

        Runs for every part of every start (a job on one big node has one part per GPU),
        so it works on locals and writes the cluster-wide sums once. The bucket sets are
        updated one GPU at a time, as always: their iteration order (which picks among
        nodes of equal free count) depends on the order of adds and discards.
        """
        moved: dict[int, int] | None = None
        index = self.index
        large, gpus_free = index.large, index.gpus_free
        solo, listed = self.solo, index.listed
        node_free, whole, free = self.node_free, self.whole, self.free
        buckets, node_type, node_gpus = self.buckets, self.node_type, self.node_gpus
        frag = self.frag_milli
        used = 0
        try:
            for n, g, milli in parts:
                if g < 0 and milli == 0:
                    continue  # a CPU-only job's part: it names the node, holds no GPU
                row = free[n]
                before = row[g]
                if milli <= 0 or before < milli:
                    msg = f"over-allocation of node {n} GPU {g}"
                    raise AssertionError(msg)
                cap = node_gpus[n] * MILLI
                f = node_free[n]
                if 0 < f < cap:
                    frag -= f
                f -= milli
                if 0 < f < cap:
                    frag += f
                node_free[n] = f
                row[g] = before - milli
                used += milli
                if before == MILLI:
                    k = whole[n]
                    b = buckets[node_type[n]]
                    b[k].discard(n)
                    b[k - 1].add(n)
                    whole[n] = k - 1
                    if moved is None:
                        moved = {n: k}
                    elif n not in moved:
                        moved[n] = k
                    if large[n]:  # GPU g was wholly free: its bit is set
                        if solo[n]:
                            lst = listed[n]
                            del lst[bisect_left(lst, g)]
                            continue
                        bits = gpus_free[n]
                        lv0 = bits.levels[0]
                        x = lv0[g >> 6] & ~(1 << (g & 63))
                        if x:  # the word stays non-zero: no upper level changes
                            lv0[g >> 6] = x
                            bits.count -= 1
                        else:
                            bits.discard(g)
        finally:
            self.frag_milli = frag
            self.used_milli += used
        if moved is not None:
            for n, k in moved.items():
                index.move(n, node_type[n], k, whole[n])

    def _release_each(self, parts: Sequence[tuple[int, int, int]]) -> None:  # noqa: C901  measured hot path (one frame per call)
        """Give back what :meth:`_allocate_each` took (the same per-part order)."""
        moved: dict[int, int] | None = None
        index = self.index
        large, gpus_free = index.large, index.gpus_free
        solo, listed = self.solo, index.listed
        node_free, whole, free = self.node_free, self.whole, self.free
        buckets, node_type, node_gpus = self.buckets, self.node_type, self.node_gpus
        frag = self.frag_milli
        used = 0
        try:
            for n, g, milli in parts:
                if g < 0 and milli == 0:
                    continue
                row = free[n]
                after = row[g] + milli
                if after > MILLI:
                    msg = f"release beyond capacity on node {n} GPU {g}"
                    raise AssertionError(msg)
                cap = node_gpus[n] * MILLI
                f = node_free[n]
                if 0 < f < cap:
                    frag -= f
                f += milli
                if 0 < f < cap:
                    frag += f
                node_free[n] = f
                row[g] = after
                used += milli
                if after == MILLI:
                    k = whole[n]
                    b = buckets[node_type[n]]
                    b[k].discard(n)
                    b[k + 1].add(n)
                    whole[n] = k + 1
                    if moved is None:
                        moved = {n: k}
                    elif n not in moved:
                        moved[n] = k
                    if large[n]:  # GPU g was not wholly free: its bit is clear
                        if solo[n]:
                            insort(listed[n], g)
                            continue
                        bits = gpus_free[n]
                        lv0 = bits.levels[0]
                        x = lv0[g >> 6]
                        if x:  # the word was non-zero: no upper level changes
                            lv0[g >> 6] = x | 1 << (g & 63)
                            bits.count += 1
                        else:
                            bits.add(g)
        finally:
            self.frag_milli = frag
            self.used_milli -= used
        if moved is not None:
            for n, k in moved.items():
                index.move(n, node_type[n], k, whole[n])

    def res_ok_np(self, cpu: int, mem: int) -> npt.NDArray[np.bool_]:
        """Per node: whether ``cpu`` milli-cores and ``mem`` bytes are free."""
        ok: npt.NDArray[np.bool_] = (self.cpu_free >= cpu) & (self.mem_free >= mem)
        return ok

    def res_ok(self, n: int, cpu: int, mem: int) -> bool:
        """Node ``n`` has ``cpu`` milli-cores and ``mem`` bytes free."""
        return bool(self.cpu_free[n] >= cpu and self.mem_free[n] >= mem)

    @staticmethod
    def res_split(
        parts: Sequence[tuple[int, int, int]], cpu: int, mem: int
    ) -> list[tuple[int, int, int]]:
        """(node, CPU, memory) a job of ``cpu`` / ``mem`` holds on each node of its parts:
        all of it on its node; a multi-node job's request is shared out in proportion to
        its GPU share on each node (rounded up, so a node never holds less than its
        share).
        """
        n0 = parts[0][0]
        if len(parts) == 1 or all(p[0] == n0 for p in parts):
            return [(n0, cpu, mem)]
        per: dict[int, int] = {}
        for n, _, milli in parts:
            per[n] = per.get(n, 0) + milli
        if len(per) == 1 or not sum(per.values()):
            return [(n, cpu, mem) for n in per]
        total = sum(per.values())
        return [(n, -(-cpu * k // total), -(-mem * k // total)) for n, k in sorted(per.items())]

    def res_fits(self, parts: Sequence[tuple[int, int, int]], cpu: int, mem: int) -> bool:
        """Whether the nodes of ``parts`` have the job's CPU and memory free."""
        if not (cpu or mem):
            return True
        return all(
            self.cpu_free[n] >= c and self.mem_free[n] >= m
            for n, c, m in self.res_split(parts, cpu, mem)
        )

    def try_take_res(self, parts: Sequence[tuple[int, int, int]], cpu: int, mem: int) -> bool:
        """Take a job's CPU and memory on the nodes of its parts if all of them have it;
        False (nothing taken) otherwise.
        """
        cf, mf = self.cpu_free, self.mem_free
        if len(parts) == 1:  # the common case, without building a split
            n = parts[0][0]
            if cf[n] < cpu or mf[n] < mem:
                return False
            cf[n] -= cpu
            mf[n] -= mem
            return True
        split = self.res_split(parts, cpu, mem)
        for n, c, m in split:
            if cf[n] < c or mf[n] < m:
                return False
        for n, c, m in split:
            cf[n] -= c
            mf[n] -= m
        return True

    def take_res(self, parts: Sequence[tuple[int, int, int]], cpu: int, mem: int) -> None:
        """Take a job's CPU and memory on the nodes of its parts (checked: never more
        than a node has).
        """
        if not (cpu or mem):
            return
        for n, c, m in self.res_split(parts, cpu, mem):
            if self.cpu_free[n] < c or self.mem_free[n] < m:
                msg = f"over-allocation of CPU or memory on node {n}"
                raise AssertionError(msg)
            self.cpu_free[n] -= c
            self.mem_free[n] -= m

    def give_res(self, parts: Sequence[tuple[int, int, int]], cpu: int, mem: int) -> None:
        """Give back what :meth:`take_res` took."""
        if not (cpu or mem):
            return
        cf, mf = self.cpu_free, self.mem_free
        for n, c, m in (
            self.res_split(parts, cpu, mem) if len(parts) > 1 else ((parts[0][0], cpu, mem),)
        ):
            a, b = cf[n] + c, mf[n] + m
            if a > self.cpu_cap[n] or b > self.mem_cap[n]:
                msg = f"CPU or memory released beyond capacity on node {n}"
                raise AssertionError(msg)
            cf[n] = a
            mf[n] = b

    def whole_parts(self, n: int, k: int) -> list[tuple[int, int, int]]:
        """The first ``k`` wholly free GPUs of node ``n`` as allocation parts (a large
        node: from its free-GPU index, O(k log g); a small one: a scan of its slots).
        """
        index = self.index
        if index.large[n]:
            items = self.whole_part_of.get(n)
            if items is None:  # built on first use: one tuple per GPU, shared by all jobs
                items = self.whole_part_of[n] = [(n, g, MILLI) for g in range(self.node_gpus[n])]
            lst = index.listed.get(n)
            if lst is None:
                return index.gpus_free[n].pick(k, items)
            if k == 1:
                return [items[lst[0]]] if lst else []
            return [items[g] for g in lst[:k]]
        out: list[tuple[int, int, int]] = []
        for g, f in enumerate(self.free[n]):
            if f == MILLI:
                out.append((n, g, MILLI))
                if len(out) == k:
                    break
        return out


def _readonly(a: npt.NDArray[Any]) -> npt.NDArray[Any]:
    v = a.view()
    v.flags.writeable = False
    return v


class ClusterView:
    """What policies see of a :class:`ClusterState`: the same memory, read-only.

    Arrays are non-writeable numpy views, per-node rows read-only ``memoryview`` s,
    shapes tuples, and the queries are the state's own (non-mutating) methods; any
    assignment raises. Costs nothing per event: the views share the state's buffers.
    """

    __slots__ = (
        "_s",
        "capacity_for",
        "capacity_milli",
        "cpu_cap",
        "cpu_free",
        "first_with_whole",
        "free",
        "free_np",
        "gmax",
        "iter_by_whole",
        "mem_cap",
        "mem_free",
        "multi_resource",
        "node_gpus",
        "node_ok_np",
        "node_type",
        "node_with_whole",
        "nodes_by_whole",
        "res_ok",
        "res_ok_np",
        "room_milli",
        "spec",
        "type_np",
        "types_of",
        "whole_free",
        "whole_parts",
    )

    _s: ClusterState
    spec: ClusterSpec
    gmax: int
    node_gpus: tuple[int, ...]
    node_type: tuple[int, ...]
    type_np: npt.NDArray[np.int64]
    capacity_milli: int
    free: tuple[memoryview, ...]
    free_np: npt.NDArray[np.int32]
    types_of: Callable[[int], tuple[int, ...]]
    node_ok_np: Callable[[int], npt.NDArray[np.bool_]]
    capacity_for: Callable[[int], tuple[int, int]]
    whole_parts: Callable[[int, int], list[tuple[int, int, int]]]
    node_with_whole: Callable[[int, int, int, int], int]
    nodes_by_whole: Callable[[int], list[tuple[int, int]]]
    first_with_whole: Callable[[int, int], int]
    iter_by_whole: Callable[[int], Iterator[tuple[int, int]]]
    whole_free: Callable[[int], int]
    room_milli: Callable[[], int]
    multi_resource: bool
    cpu_cap: npt.NDArray[np.int64]
    mem_cap: npt.NDArray[np.int64]
    cpu_free: npt.NDArray[np.int64]
    mem_free: npt.NDArray[np.int64]
    res_ok_np: Callable[[int, int], npt.NDArray[np.bool_]]
    res_ok: Callable[[int, int, int], bool]

    def __init__(self, state: ClusterState) -> None:
        put = object.__setattr__
        put(self, "_s", state)
        put(self, "spec", state.spec)
        put(self, "gmax", state.gmax)
        put(self, "node_gpus", tuple(state.node_gpus))
        put(self, "node_type", tuple(state.node_type))
        put(self, "type_np", _readonly(state.type_np))
        put(self, "capacity_milli", state.capacity_milli)
        put(self, "free", tuple(memoryview(r).toreadonly() for r in state.free))
        put(self, "free_np", _readonly(state.free_np))
        put(self, "multi_resource", state.multi_resource)
        for arr in ("cpu_cap", "mem_cap", "cpu_free", "mem_free"):
            put(self, arr, _readonly(getattr(state, arr)))
        for name in (
            "res_ok_np",
            "res_ok",
            "types_of",
            "node_ok_np",
            "capacity_for",
            "whole_parts",
            "node_with_whole",
            "nodes_by_whole",
            "first_with_whole",
            "iter_by_whole",
            "whole_free",
            "room_milli",
        ):
            put(self, name, getattr(state, name))

    def __setattr__(self, name: str, value: object) -> None:
        msg = f"the cluster view is read-only (cannot set {name!r})"
        raise AttributeError(msg)

    def __delattr__(self, name: str) -> None:
        msg = f"the cluster view is read-only (cannot delete {name!r})"
        raise AttributeError(msg)

    @property
    def node_free(self) -> npt.NDArray[np.int64]:
        """Free milli-GPU per node (a fresh array: the state keeps a list, cheaper to
        update per allocation).
        """
        return np.asarray(self._s.node_free, dtype=np.int64)

    @property
    def used_milli(self) -> int:
        """Milli-GPU allocated now, cluster-wide."""
        return self._s.used_milli

    @property
    def frag_milli(self) -> int:
        """Free milli-GPU on partly used nodes now (the fragmentation measure of the
        timeline).
        """
        return self._s.frag_milli

    @property
    def ups(self) -> int:
        """Nodes put back in service so far (see :attr:`ClusterState.ups`)."""
        return self._s.ups

    @property
    def free_milli(self) -> int:
        """Free capacity, cluster-wide (a necessary, not sufficient, condition to fit)."""
        return self._s.capacity_milli - self._s.used_milli


def ceil_gpus(gpus: float) -> int:
    """GPUs a request occupies at least partly (0.5 -> 1, 2 -> 2)."""
    return max(1, math.ceil(gpus - 1e-9))
