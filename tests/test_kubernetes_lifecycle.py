"""Kubernetes: statuses, static pods, running pods and node GPU capacity (issue 25),
each written from Kubernetes' or NVIDIA's own documentation and source:

- Pod lifecycle (kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle): phases
  Pending, Running, Succeeded, Failed, Unknown; ContainerStateTerminated.reason
  ``OOMKilled`` when the kernel's OOM killer ended a container.
- Pod disruption conditions (kubernetes.io/docs/concepts/workloads/pods/disruptions):
  a ``DisruptionTarget`` condition with reason ``PreemptionByScheduler`` (1.26:
  ``PreemptionByKubeScheduler``), ``DeletionByTaintManager``, ``EvictionByEvictionAPI``,
  ``DeletionByPodGC`` or ``TerminationByKubelet``.
- kubelet critical-pod preemption (pkg/kubelet/preemption/preemption.go): phase Failed,
  ``status.reason`` ``Preempting``.
- Static pods (kubernetes.io/docs/tasks/configure-pod-container/static-pod): the kubelet
  creates a mirror pod, annotated ``kubernetes.io/config.mirror``, owned by its Node
  (pkg/kubelet/pod/mirror_client.go sets an ownerReference of kind Node), named
  ``<name>-<node>``.
- kubectl's node printer (k8s.io/kubectl/pkg/... printNode): STATUS is ``Ready`` or
  ``NotReady`` from the Ready condition, ``Unknown`` without one, plus
  ``SchedulingDisabled`` when ``spec.unschedulable``.
- NVIDIA GPU feature discovery README ("Generated Labels", "MIG 'single' strategy",
  "MIG 'mixed' strategy"): ``nvidia.com/gpu.count`` (number of GPUs; under ``single``
  overridden to the number of MIG devices), ``nvidia.com/mig.strategy``,
  ``nvidia.com/gpu.slices.gi``; under ``mixed`` MIG devices are the resources
  ``nvidia.com/mig-<g>g.<mem>gb`` and ``nvidia.com/gpu`` counts the GPUs not in MIG
  mode.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from tests.kubernetes_common import load, node, pod, table


def _terminated(reason: str, code: int = 137) -> dict[str, object]:
    return {
        "containerStatuses": [
            {
                "name": "main",
                "state": {
                    "terminated": {
                        "exitCode": code,
                        "reason": reason,
                        "startedAt": "2026-01-05T10:01:00Z",
                        "finishedAt": "2026-01-05T10:30:00Z",
                    }
                },
            }
        ]
    }


def _disruption(reason: str) -> dict[str, object]:
    return {
        "conditions": [
            {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": reason,
                "lastTransitionTime": "2026-01-05T10:30:00Z",
            }
        ],
        **_terminated("Error"),
    }


@pytest.mark.parametrize(
    ("status", "expected", "raw"),
    [
        (_terminated("OOMKilled"), "oom", "Failed/OOMKilled"),
        ({"reason": "Preempting", **_terminated("Error")}, "preempted", "Failed/Preempting"),
        (
            _disruption("PreemptionByScheduler"),
            "preempted",
            "Failed/PreemptionByScheduler",
        ),
        (
            _disruption("PreemptionByKubeScheduler"),
            "preempted",
            "Failed/PreemptionByKubeScheduler",
        ),
        (_disruption("EvictionByEvictionAPI"), "cancelled", "Failed/EvictionByEvictionAPI"),
        (_disruption("DeletionByPodGC"), "node_fail", "Failed/DeletionByPodGC"),
        (_disruption("DeletionByTaintManager"), "node_fail", "Failed/DeletionByTaintManager"),
        (_terminated("Error", 1), "failed", "Failed/Error"),
    ],
)
def test_failed_pod_statuses(
    tmp_path: Path, status: dict[str, object], expected: str, raw: str
) -> None:
    store = load(tmp_path, [pod("p", phase="Failed", status=status)])
    job = table(store, "jobs").row(0, named=True)
    assert (job["status"], job["raw_status"]) == (expected, raw)
    assert table(store, "placements")["status"].to_list() == [expected]


def test_static_pods_are_their_own_jobs(tmp_path: Path) -> None:
    # Two static pods on one node: mirror pods owned by the Node. Grouped under the
    # owner they became one job "kube-system/Node/gpu-01".
    mirror = {
        "annotations": {"kubernetes.io/config.mirror": "3f1c"},
        "ownerReferences": [
            {"apiVersion": "v1", "kind": "Node", "name": "gpu-01", "uid": "n1", "controller": True}
        ],
    }
    only_owner = {
        "ownerReferences": [
            {"apiVersion": "v1", "kind": "Node", "name": "gpu-01", "uid": "n1", "controller": True}
        ]
    }
    only_note = {"annotations": {"kubernetes.io/config.mirror": "9a0e"}}
    store = load(
        tmp_path,
        [
            pod("etcd-gpu-01", node="gpu-01", metadata=mirror),
            pod("kube-apiserver-gpu-01", node="gpu-01", metadata=only_owner),
            pod("dcgm-gpu-01", node="gpu-01", metadata=only_note),
        ],
    )
    jobs = table(store, "jobs").sort("job_id")
    assert jobs.select("job_id", "name", "workload_type").rows() == [
        ("ns/Pod/dcgm-gpu-01", "dcgm-gpu-01", "Pod"),
        ("ns/Pod/etcd-gpu-01", "etcd-gpu-01", "Pod"),
        ("ns/Pod/kube-apiserver-gpu-01", "kube-apiserver-gpu-01", "Pod"),
    ]


def test_running_pod_has_no_run_time_and_no_as_of(tmp_path: Path) -> None:
    # A running pod has no end: run_s (end - start) is null, not elapsed-so-far; kubectl
    # get -o json carries no export time, so as_of_time stays null.
    running = pod(
        "r",
        status={
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "True",
                    "lastTransitionTime": "2026-01-05T10:00:10Z",
                }
            ],
            "containerStatuses": [
                {"name": "main", "state": {"running": {"startedAt": "2026-01-05T10:00:20Z"}}}
            ],
        },
    )
    store = load(tmp_path, [running])
    job = table(store, "jobs").row(0, named=True)
    assert (job["status"], job["end_time"], job["run_s"], job["queue_s"]) == (
        "running",
        None,
        None,
        10.0,
    )
    assert job["as_of_time"] is None


def _nodes(tmp_path: Path) -> pl.DataFrame:
    ready = [{"type": "Ready", "status": "True"}]
    records: list[object] = [
        # plain: 8 installed, one unhealthy device withheld from allocatable
        node(
            "plain",
            {"nvidia.com/gpu": "8"},
            allocatable={"nvidia.com/gpu": "7"},
            labels={"nvidia.com/gpu.count": "8"},
            conditions=ready,
        ),
        # mixed: 2 of 8 GPUs whole, 6 in MIG mode as 1g.10gb x 7 = 42 devices; cordoned
        node(
            "mixed",
            {"nvidia.com/gpu": "2", "nvidia.com/mig-1g.10gb": "42"},
            labels={"nvidia.com/gpu.count": "8", "nvidia.com/mig.strategy": "mixed"},
            spec={"unschedulable": True},
            conditions=ready,
        ),
        # single: the README's example, 8 GPUs x 7 1g.5gb devices = 56 nvidia.com/gpu
        node(
            "single",
            {"nvidia.com/gpu": "56"},
            labels={
                "nvidia.com/gpu.count": "56",
                "nvidia.com/gpu.product": "A100-SXM4-40GB-MIG-1g.5gb",
                "nvidia.com/gpu.slices.gi": "1",
                "nvidia.com/mig.strategy": "single",
            },
            conditions=[{"type": "Ready", "status": "False"}],
        ),
        # no GPU feature discovery: the capacity is the installed count
        node("bare", {"nvidia.com/gpu": "4"}),
    ]
    store = load(tmp_path, records, "nodes.jsonl")
    return table(store, "machines").filter(pl.col("dataset") == "kubernetes").sort("machine_id")


def test_node_installed_and_schedulable_gpus(tmp_path: Path) -> None:
    m = _nodes(tmp_path)
    assert m.select("machine_id", "gpus", "gpus_schedulable").rows() == [
        ("bare", 4, 4),
        ("mixed", 8, 2 + 42),
        ("plain", 8, 7),
        ("single", 8, 56),
    ]


def test_node_state_and_availability(tmp_path: Path) -> None:
    m = _nodes(tmp_path)
    assert m.select("machine_id", "state", "available").rows() == [
        ("bare", "Unknown", None),
        ("mixed", "Ready,SchedulingDisabled", False),
        ("plain", "Ready", True),
        ("single", "NotReady", False),
    ]
