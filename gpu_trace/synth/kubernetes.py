"""Synthetic ``kubectl get pods -A -o json`` / ``kubectl get nodes -o json`` output.

Writes ``pods.json`` and ``nodes.json`` as kubectl does (a ``List`` whose items are
full Pod / Node objects; items one per line, so big outputs stay greppable) with the
fields the Kubernetes API fills in: owner references (Job, PyTorchJob, ReplicaSet or
none), requests/limits with the quantity spellings seen in practice (``500m``, ``2``,
``4Gi``, ``512Mi``, ``1G``, ``128974848``), MIG devices, ``PodScheduled`` conditions,
container states with exit codes and reasons (``Completed``, ``Error``, ``OOMKilled``),
``Evicted`` and ``DeadlineExceeded`` pods, pending pods. Sizes and durations follow the
openb / Helios shapes (the traces' READMEs): mostly 1-GPU pods, heavy-tailed runs.
``jobs`` is the number of pods. Same seed, same bytes.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from gpu_trace.synth.common import choice, diurnal_arrivals, lognormal_seconds

START = int(datetime(2026, 1, 5, tzinfo=UTC).timestamp())
PRODUCTS = {"NVIDIA-A100-SXM4-80GB": 81920, "NVIDIA-H100-80GB-HBM3": 81559}
CPUS = {"500m": 0.5, "1": 1, "2": 2, "4": 4, "8": 8, "16": 16}
MEMS = ("512Mi", "4Gi", "16Gi", "32Gi", "1G", "128974848", "64Gi")


def _ts(s: int) -> str:
    return (datetime.fromtimestamp(0, UTC) + timedelta(seconds=int(s))).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )


def _node(name: str, gpus: int, product: str | None) -> dict[str, Any]:
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}
    cap = {"cpu": "128", "memory": "2113925468Ki", "pods": "110"}
    alloc = {"cpu": "127500m", "memory": "2103439708Ki", "pods": "110"}
    if gpus and product:
        labels |= {
            "nvidia.com/gpu.count": str(gpus),
            "nvidia.com/gpu.memory": str(PRODUCTS[product]),
            "nvidia.com/gpu.product": product,
        }
        cap["nvidia.com/gpu"] = alloc["nvidia.com/gpu"] = str(gpus)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"creationTimestamp": _ts(START - 86400), "labels": labels, "name": name},
        "status": {"allocatable": alloc, "capacity": cap},
    }


def write(out: Path, *, jobs: int, seed: int) -> list[Path]:
    """Write ``pods.json`` (``jobs`` pods) and ``nodes.json`` into ``out``."""
    rng = np.random.default_rng(seed)
    out.mkdir(parents=True, exist_ok=True)
    n_nodes = max(2, jobs // 50)
    products = choice(rng, n_nodes, dict.fromkeys(PRODUCTS, 1.0))
    nodes = [_node(f"gpu-{i:05d}", 8, str(products[i])) for i in range(n_nodes)]
    nodes.append(_node("cpu-00000", 0, None))
    created = diurnal_arrivals(rng, jobs, start_s=START, days=max(1.0, jobs / 20_000))
    wait = lognormal_seconds(rng, jobs, median_s=20, sigma=2.0, max_s=86_400)
    run = lognormal_seconds(rng, jobs, median_s=1800, sigma=1.8, max_s=14 * 86_400)
    gpus = choice(rng, jobs, {0: 0.15, 1: 0.6, 2: 0.08, 4: 0.08, 8: 0.09})
    mig = rng.random(jobs) < 0.03
    cpu = choice(rng, jobs, dict.fromkeys(CPUS, 1.0))
    mem = choice(rng, jobs, dict.fromkeys(MEMS, 1.0))
    owner = choice(rng, jobs, {"Job": 0.6, "PyTorchJob": 0.15, "ReplicaSet": 0.1, "": 0.15})
    fate = choice(
        rng,
        jobs,
        {
            "ok": 0.7,
            "Error": 0.1,
            "OOMKilled": 0.04,
            "Evicted": 0.02,
            "Deadline": 0.02,
            "Running": 0.08,
            "Pending": 0.04,
        },
    )
    node_of = rng.integers(0, n_nodes, size=jobs)
    users = rng.integers(0, 40, size=jobs)
    end_of_snapshot = int(created.max()) + 3600 if jobs else START
    lines = []
    for i in range(jobs):
        ns = f"team-{users[i] % 8}"
        name = f"pod-{i:07d}"
        meta: dict[str, Any] = {
            "creationTimestamp": _ts(created[i]),
            "labels": {"user": f"u{users[i]:03d}"},
            "name": name,
            "namespace": ns,
            "uid": f"{seed:04x}-{i:08x}",
        }
        if owner[i]:
            group = i // 2 if owner[i] == "PyTorchJob" else i
            meta["ownerReferences"] = [
                {
                    "apiVersion": "v1",
                    "controller": True,
                    "kind": str(owner[i]),
                    "name": f"{str(owner[i]).lower()}-{group:07d}",
                    "uid": f"o-{group:08x}",
                }
            ]
        req: dict[str, str] = {"cpu": str(cpu[i]), "memory": str(mem[i])}
        if gpus[i]:
            key = "nvidia.com/mig-1g.10gb" if mig[i] else "nvidia.com/gpu"
            req[key] = str(gpus[i])
        spec: dict[str, Any] = {
            "containers": [{"name": "main", "resources": {"requests": req, "limits": dict(req)}}],
            "restartPolicy": "Never",
        }
        f = str(fate[i])
        t_sched = int(created[i]) + int(wait[i])
        t_start = t_sched + 5
        t_end = t_start + int(run[i])
        conds = [{"lastTransitionTime": _ts(created[i]), "status": "True", "type": "PodScheduled"}]
        status: dict[str, Any] = {"qosClass": "Guaranteed"}
        if f == "Pending":
            conds[0] |= {"status": "False", "reason": "Unschedulable"}
            status["phase"] = "Pending"
        else:
            spec["nodeName"] = f"gpu-{node_of[i]:05d}" if gpus[i] else "cpu-00000"
            conds[0]["lastTransitionTime"] = _ts(t_sched)
            if f == "Running" or t_end > end_of_snapshot:
                status["phase"] = "Running"
                state: dict[str, Any] = {"running": {"startedAt": _ts(t_start)}}
            elif f == "Evicted":
                status |= {"phase": "Failed", "reason": "Evicted"}
                conds.append({"lastTransitionTime": _ts(t_end), "status": "False", "type": "Ready"})
                state = {}
            else:
                code, why = {
                    "ok": (0, "Completed"),
                    "Error": (1, "Error"),
                    "OOMKilled": (137, "OOMKilled"),
                    "Deadline": (143, "Error"),
                }[f]
                status["phase"] = "Succeeded" if code == 0 else "Failed"
                if f == "Deadline":
                    status["reason"] = "DeadlineExceeded"
                    spec["activeDeadlineSeconds"] = int(run[i])
                state = {
                    "terminated": {
                        "exitCode": code,
                        "finishedAt": _ts(t_end),
                        "reason": why,
                        "startedAt": _ts(t_start),
                    }
                }
            if state:
                status["containerStatuses"] = [{"name": "main", "state": state}]
        status["conditions"] = conds
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}
        lines.append(json.dumps(pod, separators=(",", ":"), sort_keys=True))
    pods_path, nodes_path = out / "pods.json", out / "nodes.json"
    with pods_path.open("w", encoding="utf-8") as fh:
        fh.write('{"apiVersion":"v1","kind":"List","items":[\n')
        fh.write(",\n".join(lines))
        fh.write('\n],"metadata":{"resourceVersion":""}}\n')
    nodes_path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "items": nodes,
                "kind": "List",
                "metadata": {"resourceVersion": ""},
            },
            indent=4,
        )
        + "\n"
    )
    return [pods_path, nodes_path]
