"""Hand-made stores for the idle-GPU and telemetry-over-time tests, each written in the
producing tool's own format:

- Kubernetes pods and nodes as ``kubectl get pods -A -o json`` / ``kubectl get nodes -o
  json`` print them (Kubernetes API reference, Pod v1 / Node v1: ``metadata.
  ownerReferences``, ``spec.nodeName``, ``spec.containers[].resources.requests``,
  ``status.conditions`` (PodScheduled), ``status.containerStatuses[].state.terminated.
  startedAt / finishedAt``).
- dcgm-exporter series as Prometheus ``/api/v1/query_range`` answers (Prometheus HTTP
  API reference: ``{"status":"success","data":{"resultType":"matrix","result":[{"metric":
  {...},"values":[[unix_s,"value"],...]}]}}``), with dcgm-exporter's own label set
  (``gpu``, ``UUID``, ``device``, ``modelName``, ``Hostname``, as in the real scrapes in
  data/samples/telemetry) and its workload labels ``pod`` / ``namespace`` / ``container``
  and ``hpc_job`` (NVIDIA/dcgm-exporter internal/pkg/transformation/const.go).
- a Slurm ``sacct -P`` export (sacct(1): ``--parsable2`` fields separated by ``|``,
  ``AllocTRES`` as ``billing=..,cpu=..,gres/gpu=N,mem=..,node=N``).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from typer.testing import CliRunner

from gpu_trace.cli import app

runner = CliRunner()
T0 = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
STEP = timedelta(minutes=10)


def iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def ingest(*args: str) -> None:
    result = runner.invoke(app, ["ingest", *args])
    assert result.exit_code == 0, result.output


def series(
    name: str, host: str, gpu: int, values: list[float], labels: dict[str, str] | None = None
) -> dict[str, object]:
    """One dcgm-exporter series sampled every 10 minutes from T0."""
    metric = {
        "__name__": name,
        "gpu": str(gpu),
        "UUID": f"GPU-{host}-{gpu}",
        "device": f"nvidia{gpu}",
        "modelName": "NVIDIA A100-SXM4-80GB",
        "Hostname": host,
        "instance": f"{host}:9400",
        "job": "dcgm-exporter",
        **(labels or {}),
    }
    points = [[(T0 + i * STEP).timestamp(), f"{v:g}"] for i, v in enumerate(values)]
    return {"metric": metric, "values": points}


def write_range(path: Path, result: list[dict[str, object]]) -> Path:
    answer = {"status": "success", "data": {"resultType": "matrix", "result": result}}
    path.write_text(json.dumps(answer) + "\n")
    return path


def k8s_pod(
    name: str,
    namespace: str,
    job: str,
    user: str,
    end: datetime,
    resource: str = "nvidia.com/gpu",
) -> dict[str, object]:
    """A finished pod of a batch/v1 Job on node-a holding one ``resource`` (a GPU, or
    a MIG slice ``nvidia.com/mig-<g>g.<m>gb``) from T0 to ``end``."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "creationTimestamp": iso(T0),
            "labels": {"user": user, "job-name": job},
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": job,
                    "uid": f"uid-{job}",
                    "controller": True,
                }
            ],
        },
        "spec": {
            "nodeName": "node-a",
            "containers": [{"name": "main", "resources": {"requests": {resource: "1"}}}],
        },
        "status": {
            "phase": "Succeeded",
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": iso(T0)}
            ],
            "containerStatuses": [
                {
                    "name": "main",
                    "state": {
                        "terminated": {
                            "exitCode": 0,
                            "reason": "Completed",
                            "startedAt": iso(T0),
                            "finishedAt": iso(end),
                        }
                    },
                }
            ],
        },
    }


def k8s_store(tmp_path: Path) -> Path:
    """Two GPU pods on node-a and dcgm-exporter series labelled with them.

    - ``ml/train-0`` (Job ``train``, user alice) holds GPU 0 from 10:00 to 11:00.
      ``DCGM_FI_DEV_GPU_UTIL`` at 10:00..10:50 = 90, 0, 0, 2, 80, 50: no SM-activity
      series, so utilization decides; 0, 0 and 2 are below 5 %.
    - ``research/eval-0`` (Job ``eval``, user bob) holds GPU 1 from 10:00 to 10:40.
      ``DCGM_FI_PROF_SM_ACTIVE`` at 10:00..10:40 = 0.01, 0.50, 0.02, 0.03, 0.00 (1, 50,
      2, 3, 0 %) and ``DCGM_FI_DEV_GPU_UTIL`` = 100 throughout: SM activity decides.
      The 10:40 sample is outside [10:00, 10:40).
    - ``infer/mig-0`` (Job ``mig``, user erin) holds one MIG slice ``nvidia.com/mig-1g.10gb``
      (1 of a GPU's 7 compute slices: 1/7 GPU) from 10:00 to 11:00: dcgm-exporter's
      series of GPU 3, GPU instance 5 (``GPU_I_ID="5"``, ``GPU_I_PROFILE="1g.10gb"``),
      ``DCGM_FI_PROF_SM_ACTIVE`` = 0, 0, 0, 0, 0.5, 0.5 (MIG has no GPU_UTIL).
    - GPU 2 of node-a carries no pod label: no job held it.
    Power (``DCGM_FI_DEV_POWER_USAGE``, W) and framebuffer used (``DCGM_FI_DEV_FB_USED``,
    MiB) are sampled on every GPU, for the telemetry charts.
    """
    store = tmp_path / "k8s-store"
    pods = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            k8s_pod("train-0", "ml", "train", "alice", T0 + timedelta(hours=1)),
            k8s_pod("eval-0", "research", "eval", "bob", T0 + timedelta(minutes=40)),
            k8s_pod(
                "mig-0",
                "infer",
                "mig",
                "erin",
                T0 + timedelta(hours=1),
                "nvidia.com/mig-1g.10gb",
            ),
        ],
    }
    nodes = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": "node-a",
                    "labels": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
                },
                "spec": {},
                "status": {
                    "capacity": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "4"},
                    "allocatable": {"cpu": "63", "memory": "500Gi", "nvidia.com/gpu": "4"},
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            }
        ],
    }
    (tmp_path / "pods.json").write_text(json.dumps(pods))
    (tmp_path / "nodes.json").write_text(json.dumps(nodes))
    train = {"pod": "train-0", "namespace": "ml", "container": "main"}
    ev = {"pod": "eval-0", "namespace": "research", "container": "main"}
    result = [
        series("DCGM_FI_DEV_GPU_UTIL", "node-a", 0, [90, 0, 0, 2, 80, 50], train),
        series("DCGM_FI_PROF_SM_ACTIVE", "node-a", 1, [0.01, 0.5, 0.02, 0.03, 0.0], ev),
        series("DCGM_FI_DEV_GPU_UTIL", "node-a", 1, [100, 100, 100, 100, 100], ev),
        series("DCGM_FI_DEV_GPU_UTIL", "node-a", 2, [0, 0, 0, 0, 0, 0]),
        series(
            "DCGM_FI_PROF_SM_ACTIVE",
            "node-a",
            3,
            [0, 0, 0, 0, 0.5, 0.5],
            {
                "GPU_I_ID": "5",
                "GPU_I_PROFILE": "1g.10gb",
                "pod": "mig-0",
                "namespace": "infer",
                "container": "main",
            },
        ),
    ]
    for gpu, labels in ((0, train), (1, ev), (2, None)):
        result.append(series("DCGM_FI_DEV_POWER_USAGE", "node-a", gpu, [300.0] * 6, labels))
        result.append(series("DCGM_FI_DEV_FB_USED", "node-a", gpu, [1024.0] * 6, labels))
    write_range(tmp_path / "dcgm.json", result)
    ingest("kubernetes", str(tmp_path / "pods.json"), "--store", str(store), "--cluster", "k1")
    ingest("kubernetes", str(tmp_path / "nodes.json"), "--store", str(store), "--cluster", "k1")
    ingest("prometheus-range", str(tmp_path / "dcgm.json"), "--store", str(store))
    return store


SACCT = """\
JobID|JobName|User|Account|Partition|State|Submit|Start|End|NNodes|AllocTRES|NodeList
101|train|carol|physics|gpu|COMPLETED|2026-03-01T09:55:00|2026-03-01T10:00:00|2026-03-01T11:00:00|1|billing=2,cpu=8,gres/gpu=2,mem=64G,node=1|gpu01
102|sim|dave|chem|gpu|COMPLETED|2026-03-01T09:58:00|2026-03-01T10:00:00|2026-03-01T10:30:00|1|billing=2,cpu=8,gres/gpu=2,mem=64G,node=1|gpu02
103|prep|erin|chem|gpu|COMPLETED|2026-03-01T09:59:00|2026-03-01T10:00:00|2026-03-01T10:45:00|1|billing=1,cpu=4,gres/gpu=1,mem=32G,node=1|gpu01
"""


def slurm_store(tmp_path: Path) -> Path:
    """Two Slurm jobs (times in UTC) and DCGM series of their hosts.

    - 101 (carol, physics) on gpu01 (4 GPUs sampled), 10:00-11:00, 2 GPUs. dcgm-exporter's
      HPC job mapping labels GPUs 0 and 1 ``hpc_job="101"``; ``DCGM_FI_DEV_GPU_UTIL`` at
      10:00..10:50 is 0 six times on GPU 0 and 100 six times on GPU 1. GPUs 2 and 3
      carry no label (another tenant's, or free).
    - 103 (erin, chem) on gpu01, 10:00-10:45, 1 GPU, no hpc_job label: 1 of gpu01's 4
      sampled GPUs, which one is unknown.
    - 102 (dave, chem) on gpu02 (2 GPUs sampled), 10:00-10:30, 2 GPUs: no hpc_job label,
      but the job holds the whole node. GPU 0 at 10:00, 10:10, 10:20 = 3, 4, 60 %;
      GPU 1 = 100, 100, 100. (10:30 is outside [10:00, 10:30).)
    """
    store = tmp_path / "slurm-store"
    (tmp_path / "jobs.psv").write_text(SACCT)
    job = {"hpc_job": "101"}
    result = [
        series("DCGM_FI_DEV_GPU_UTIL", "gpu01", 0, [0, 0, 0, 0, 0, 0], job),
        series("DCGM_FI_DEV_GPU_UTIL", "gpu01", 1, [100] * 6, job),
        series("DCGM_FI_DEV_GPU_UTIL", "gpu01", 2, [0] * 6),
        series("DCGM_FI_DEV_GPU_UTIL", "gpu01", 3, [0] * 6),
        series("DCGM_FI_DEV_GPU_UTIL", "gpu02", 0, [3, 4, 60, 0]),
        series("DCGM_FI_DEV_GPU_UTIL", "gpu02", 1, [100, 100, 100, 100]),
    ]
    write_range(tmp_path / "dcgm-slurm.json", result)
    ingest("slurm", str(tmp_path / "jobs.psv"), "--store", str(store), "--tz", "UTC")
    ingest("prometheus-range", str(tmp_path / "dcgm-slurm.json"), "--store", str(store))
    return store
