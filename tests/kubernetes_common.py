"""Helpers shared by tests/test_kubernetes_integration.py and tests/test_kubernetes_cli.py
(split from test_kubernetes.py)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from gpu_trace.loaders import LOADERS, ingest
from gpu_trace.store.parquet import read_table
from tests.conftest import SAMPLES

K8S = SAMPLES / "kubernetes"
PODS, NODES = K8S / "pods.json", K8S / "nodes.json"


def pod(
    name: str,
    *,
    requests: dict[str, str] | None = None,
    created: str = "2026-01-05T10:00:00Z",
    phase: str = "Running",
    node: str | None = None,
    metadata: dict[str, object] | None = None,
    status: dict[str, object] | None = None,
    spec: dict[str, object] | None = None,
) -> dict[str, object]:
    """A Pod object with the fields the Kubernetes API reference (Pod v1: metadata,
    spec.containers[].resources.requests, status.phase) gives every pod."""
    spec_: dict[str, object] = {
        "containers": [{"name": "main", "resources": {"requests": requests or {}}}]
    }
    if node:
        spec_["nodeName"] = node
    meta: dict[str, object] = {"name": name, "namespace": "ns", "creationTimestamp": created}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {**meta, **(metadata or {})},
        "spec": {**spec_, **(spec or {})},
        "status": {"phase": phase, **(status or {})},
    }


def node(
    name: str,
    capacity: dict[str, str],
    *,
    allocatable: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    spec: dict[str, object] | None = None,
    conditions: list[dict[str, str]] | None = None,
) -> dict[str, object]:
    """A Node object (Node v1: status.capacity / allocatable, metadata.labels)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec or {},
        "status": {
            "capacity": capacity,
            "allocatable": capacity if allocatable is None else allocatable,
            "conditions": conditions or [],
        },
    }


def write_lines(path: Path, records: list[object]) -> Path:
    """JSON lines (``kubectl get pods -A -o json | jq -c '.items[]'``); a str record is
    written as is (hand-made bytes: duplicate keys, escapes)."""
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in records) + "\n")
    return path


def load(tmp_path: Path, records: list[object], name: str = "pods.jsonl") -> Path:
    """Ingest the records (JSON lines) into a fresh store; the store."""
    store = tmp_path / "store"
    ingest(LOADERS["kubernetes"], write_lines(tmp_path / name, records), store)
    return store


def table(store: Path, name: str) -> pl.DataFrame:
    frame = pl.from_arrow(read_table(store, name, "kubernetes"))
    assert isinstance(frame, pl.DataFrame)
    return frame


def reasons(store: Path) -> dict[str, str]:
    """Quarantine reasons by locator (``line N``)."""
    q = table(store, "quarantine")
    return dict(zip(q["locator"].to_list(), q["reason"].to_list(), strict=True))
