"""Where a cluster spec comes from besides a spec string: a cluster file (TOML / JSON /
CSV, among them the openb node list and the HeliosArtifact VC file) or the trace's own
``machines`` / ``capacity`` tables (``--cluster from-trace``).

Kept apart from :mod:`~gpu_trace.replay.cluster.spec` because reading files and the
store is input handling (errors name the file and record), not the shape itself.
"""

from __future__ import annotations

import csv
import json
import tomllib
from pathlib import Path
from typing import Any

import polars as pl

from gpu_trace.errors import GpuTraceError, InputError
from gpu_trace.replay.cluster.spec import (
    UNLIMITED,
    ClusterSpec,
    from_groups,
    parse_bytes,
    parse_spec,
)


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
