"""Kubernetes: integration tests (ingest into a real store).

The Kubernetes loader on the bundled kubectl-shaped sample, with expected values
worked out by hand from the JSON (each test says how), both input layouts, damaged
input, a hypothesis fuzz and the fuzz harness's clean seeds."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpu_trace.errors import InputError
from gpu_trace.loaders import LOADERS, ingest
from gpu_trace.store.parquet import read_table
from tests.kubernetes_common import NODES, PODS


def _table(store: Path, table: str) -> pl.DataFrame:
    frame = pl.from_arrow(read_table(store, table, "kubernetes"))
    assert isinstance(frame, pl.DataFrame)
    return frame


@pytest.fixture(scope="module")
def k8s_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("k8s") / "store"
    ingest(LOADERS["kubernetes"], PODS, store, more=(NODES,), cluster="prod")
    return store


def _job(store: Path, job_id: str) -> dict[str, object]:
    jobs = _table(store, "jobs").filter(pl.col("job_id") == job_id)
    assert jobs.height == 1, job_id
    return jobs.row(0, named=True)


def test_reconciliation_and_quarantine(k8s_store: Path) -> None:
    ingests = _table(k8s_store, "ingests").sort("table", "dataset")
    rows = {(r["table"], r["dataset"]): r for r in ingests.iter_rows(named=True)}
    # 8 items in pods.json: 7 good pods (placements) + 1 quarantined (bad-mem)
    assert (
        rows[("placements", "prod")]["rows_read"],
        rows[("placements", "prod")]["rows_written"],
    ) == (8, 7)
    assert rows[("placements", "prod")]["rows_quarantined"] == 1
    # 3 nodes, in both inventories
    assert rows[("machines", "prod")]["rows_written"] == 3
    assert rows[("machines", "prod-allocatable")]["rows_written"] == 3
    # 5 owners: Job train-a (2 pods), PyTorchJob llm-ft (2), bare pod, ReplicaSet, Job etl
    assert rows[("jobs", "prod")]["rows_written"] == 5
    q = _table(k8s_store, "quarantine")
    assert q.select("file", "locator", "reason").rows() == [
        (
            "pods.json",
            "record 8",
            "spec.containers[0].resources.requests.memory '4 GiB' is not a Kubernetes quantity",
        )
    ]


def test_job_with_retry(k8s_store: Path) -> None:
    j = _job(k8s_store, "team-a/Job/train-a")
    # pod x1 OOMKilled 10:20:00, x2 created 10:20:05 after it -> attempts 2; one GPU at a
    # time (limits nvidia.com/gpu 1), so the peak is 1; the last attempt succeeded.
    assert (j["attempts"], j["gpus"], j["status"], j["raw_status"]) == (
        2,
        1.0,
        "completed",
        "Succeeded/Completed",
    )
    # cpu request 4; memory request 16Gi
    assert (j["cpus"], j["mem_bytes"], j["user"], j["vc"]) == (4.0, 16 * 2**30, "alice", "team-a")
    # created 10:00:00, first PodScheduled 10:00:30, last finishedAt 11:20:10
    assert (j["queue_s"], j["run_s"]) == (30.0, 4780.0)
    assert (j["exit_code"], j["workload_type"], j["gpu_type"]) == (
        0,
        "Job",
        "NVIDIA-A100-SXM4-80GB",
    )
    p = (
        _table(k8s_store, "placements")
        .filter(pl.col("job_id") == "team-a/Job/train-a")
        .sort("attempt")
    )
    assert p.select("attempt", "instance", "status").rows() == [
        # x1's container terminated with reason OOMKilled (ContainerStateTerminated.reason,
        # Kubernetes API reference): out of memory, not a generic failure
        (0, "train-a-x1", "oom"),
        (1, "train-a-x2", "completed"),
    ]


def test_parallel_workers_add_up(k8s_store: Path) -> None:
    j = _job(k8s_store, "team-b/PyTorchJob/llm-ft")
    # master + worker, 8 GPUs, 32 CPUs and 256Gi each, both running on two nodes
    assert (j["gpus"], j["cpus"], j["mem_bytes"], j["nodes"]) == (16.0, 64.0, 512 * 2**30, 2)
    assert (j["status"], j["end_time"], j["qos"], j["user"]) == (
        "running",
        None,
        "training-high",
        "bob",
    )
    p = _table(k8s_store, "placements").filter(pl.col("job_id") == "team-b/PyTorchJob/llm-ft")
    assert sorted(p.select("task", "machine_id").rows()) == [
        ("master", "gpu-a100-01"),
        ("worker", "gpu-a100-02"),
    ]


def test_init_containers_and_deadline(k8s_store: Path) -> None:
    j = _job(k8s_store, "data/Job/etl-nightly-29455200")
    # CPU: init fetch 3 vs app 1 + sidecar proxy 250m -> max(3, 1.25) = 3
    # memory: fetch 1Gi vs app 2Gi + proxy 128974848 -> 2147483648 + 128974848
    assert (j["cpus"], j["mem_bytes"]) == (3.0, 2147483648 + 128974848)
    # status.reason DeadlineExceeded -> timeout; app container exitCode 143
    assert (j["status"], j["raw_status"], j["exit_code"], j["time_limit_s"]) == (
        "timeout",
        "Failed/DeadlineExceeded",
        143,
        3600.0,
    )


def test_evicted_mig_and_pending(k8s_store: Path) -> None:
    j = _job(k8s_store, "serving/ReplicaSet/infer-7d9f")
    # two 1g.10gb MIG slices = 2/7 GPU; memory 1G = 10**9; Evicted -> node_fail, ends at
    # its last condition transition 09:30:00 (no container finished)
    assert (j["gpus"], j["gpus_raw"], j["gpus_raw_unit"]) == (2 / 7, 2.0, "mig_slices")
    assert (j["mem_bytes"], j["status"], j["exit_code"]) == (10**9, "node_fail", None)
    assert j["run_s"] == 5399.0  # bound 08:00:01, ended 09:30:00
    nb = _job(k8s_store, "team-a/Pod/notebook-carol")
    # no owner; unbound; the GPU model comes from the required node affinity
    assert (nb["status"], nb["start_time"], nb["cpus"], nb["mem_bytes"]) == (
        "pending",
        None,
        0.5,
        2**29,
    )
    assert nb["gpu_type"] == "NVIDIA-H100-80GB-HBM3|NVIDIA-H100-SXM5-80GB"


def test_nodes_capacity_and_allocatable(k8s_store: Path) -> None:
    m = _table(k8s_store, "machines").sort("dataset", "machine_id")
    cap = m.filter(pl.col("dataset") == "prod")
    alloc = m.filter(pl.col("dataset") == "prod-allocatable")
    a2 = cap.filter(pl.col("machine_id") == "gpu-a100-02").row(0, named=True)
    # capacity: 8 GPUs, 128 CPUs, 2113925468Ki; label nvidia.com/gpu.memory 81920 MiB
    assert (a2["gpus"], a2["cpus"], a2["mem_bytes"]) == (8, 128.0, 2113925468 * 1024)
    assert (a2["gpu_type"], a2["gpu_mem_bytes"]) == ("NVIDIA-A100-SXM4-80GB", 81920 * 2**20)
    # allocatable: 7 GPUs (one unhealthy), 127500m CPUs
    b2 = alloc.filter(pl.col("machine_id") == "gpu-a100-02").row(0, named=True)
    assert (b2["gpus"], b2["cpus"]) == (7, 127.5)


def _jsonl(tmp_path: Path, extra: list[str]) -> Path:
    items = json.loads(PODS.read_text())["items"]
    f = tmp_path / "pods.jsonl"
    f.write_text("\n".join([json.dumps(i) for i in items] + extra) + "\n")
    return f


def test_json_lines_give_the_same_jobs(tmp_path: Path, k8s_store: Path) -> None:
    f = _jsonl(
        tmp_path, ["", '{"kind": "Pod", "metadata": ', '{"kind": "Service"}', '{"metadata": {}}']
    )
    store = tmp_path / "store"
    report = ingest(LOADERS["kubernetes"], f, store, more=(NODES,), cluster="prod")
    assert report.totals[0] == report.totals[1] + report.totals[2]
    cols = ["job_id", "gpus", "cpus", "mem_bytes", "status", "gpu_type"]
    assert (
        _table(store, "jobs")
        .select(cols)
        .sort("job_id")
        .equals(_table(k8s_store, "jobs").select(cols).sort("job_id"))
    )
    q = _table(store, "quarantine").sort("locator")
    # 8 pods on lines 1-8, blank line 9 (not a record), lines 10-12
    assert q.select("locator", "reason").rows() == [
        ("line 10", "not valid JSON (Expecting value at column 29)"),  # 28 characters, then none
        ("line 11", "kind Service is not Pod or Node"),
        ("line 12", "record has no kind (expected Pod or Node)"),
        (
            "line 8",
            "spec.containers[0].resources.requests.memory '4 GiB' is not a Kubernetes quantity",
        ),
    ]


def test_truncated_document_names_the_record(tmp_path: Path) -> None:
    text = PODS.read_text()
    f = tmp_path / "pods.json"
    cut = text.index('"name": "llm-ft-worker-0"')  # inside the 4th item
    f.write_text(text[:cut])
    with pytest.raises(InputError) as exc:
        ingest(LOADERS["kubernetes"], f, tmp_path / "store")
    assert str(f) in str(exc.value) and "record 4" in str(exc.value)
    assert not (tmp_path / "store" / "current").exists() or not list(
        (tmp_path / "store").glob("current/jobs/source=kubernetes/*")
    )


def test_the_same_pod_export_twice_is_refused(tmp_path: Path) -> None:
    """Several pod snapshots merge (tests/test_overlapping_exports.py); one export given
    twice (a copy) is refused in one line rather than counted as two snapshots."""
    other = tmp_path / "more-pods.json"
    other.write_bytes(PODS.read_bytes())
    with pytest.raises(InputError, match=r"is the same export as pods\.json"):
        ingest(LOADERS["kubernetes"], PODS, tmp_path / "store", more=(other,))
    with pytest.raises(InputError, match=r"is the same export as pods\.json"):
        ingest(LOADERS["kubernetes"], PODS, tmp_path / "store", more=(PODS,))


def test_two_nodes_files_are_refused(tmp_path: Path) -> None:
    other = tmp_path / "more-nodes.json"
    other.write_bytes(NODES.read_bytes())
    with pytest.raises(InputError, match=r"holds nodes, and so does nodes\.json"):
        ingest(LOADERS["kubernetes"], NODES, tmp_path / "store", more=(other,))


VALUE = st.one_of(
    st.sampled_from(["500m", "4Gi", "1e9", "x", "", "-1", "1.5", "2026-01-05T10:00:00Z", "bad"]),
    st.integers(-3, 10),
    st.none(),
    st.lists(st.integers(0, 3), max_size=2),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    lines=st.lists(
        st.one_of(
            st.sampled_from([json.dumps(i) for i in json.loads(PODS.read_text())["items"]]),
            st.fixed_dictionaries(
                {
                    "kind": st.sampled_from(["Pod", "Node", "X"]),
                    "metadata": st.fixed_dictionaries(
                        {
                            "name": VALUE,
                            "creationTimestamp": VALUE,
                            "labels": st.dictionaries(
                                st.sampled_from(["user", "a"]), VALUE, max_size=2
                            ),
                        }
                    ),
                    "spec": st.fixed_dictionaries(
                        {
                            "containers": st.lists(
                                st.fixed_dictionaries(
                                    {
                                        "resources": st.fixed_dictionaries(
                                            {
                                                "requests": st.dictionaries(
                                                    st.sampled_from(
                                                        ["cpu", "memory", "nvidia.com/gpu"]
                                                    ),
                                                    VALUE,
                                                    max_size=3,
                                                )
                                            }
                                        )
                                    }
                                ),
                                max_size=2,
                            ),
                            "nodeName": VALUE,
                        }
                    ),
                    "status": st.fixed_dictionaries(
                        {
                            "phase": VALUE,
                            "capacity": st.dictionaries(
                                st.sampled_from(["cpu", "nvidia.com/gpu"]), VALUE, max_size=2
                            ),
                        }
                    ),
                }
            ).map(json.dumps),
            st.text(max_size=30).filter(lambda s: "\n" not in s and "\r" not in s),
        ),
        min_size=1,
        max_size=10,
    ),
    cut=st.integers(0, 5000),
)
def test_fuzz_never_crashes(
    tmp_path_factory: pytest.TempPathFactory, lines: list[str], cut: int
) -> None:
    root = tmp_path_factory.mktemp("k8sfuzz")
    f = root / "pods.json"
    data = ("\n".join(lines) + "\n").encode()
    f.write_bytes(data[: max(cut, 1)] if cut < len(data) else data)
    try:
        report = ingest(LOADERS["kubernetes"], f, root / "store")
    except InputError as exc:
        assert str(f) in str(exc)
        return
    for line in report.lines:
        assert line.rows_read == line.rows_written + line.rows_quarantined


def test_fuzz_clean_seeds_reconcile(tmp_path: Path) -> None:
    from bench import fuzz

    pool = fuzz.seeds(tmp_path, 0, ("kubernetes",))
    cases = [fuzz.make_case(i, 0, pool, ("kubernetes",), clean=True) for i in range(4)]
    assert sorted(c["name"] for c in cases) == [
        "nodes.json",
        "nodes.jsonl",
        "pods.json",
        "pods.jsonl",
    ]
    assert [fuzz.run_case(c)["cls"] for c in cases] == ["ok"] * 4


def test_gpu_share_memory(tmp_path: Path) -> None:
    node = {
        "kind": "Node",
        "metadata": {"name": "share-1", "labels": {"nvidia.com/gpu.product": "Tesla-T4"}},
        "status": {
            "capacity": {"cpu": "8", "aliyun.com/gpu-mem": "64", "aliyun.com/gpu-count": "4"}
        },
    }

    def pod(name: str, node_name: str | None) -> dict[str, object]:
        spec: dict[str, object] = {
            "containers": [{"name": "c", "resources": {"limits": {"aliyun.com/gpu-mem": "8"}}}]
        }
        if node_name:
            spec["nodeName"] = node_name
        return {
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": "ns",
                "creationTimestamp": "2026-01-01T00:00:00Z",
            },
            "spec": spec,
            "status": {"phase": "Running" if node_name else "Pending"},
        }

    f = tmp_path / "all.jsonl"
    f.write_text(
        "\n".join(json.dumps(o) for o in (node, pod("a", "share-1"), pod("b", None))) + "\n"
    )
    store = tmp_path / "store"
    ingest(LOADERS["kubernetes"], f, store)
    jobs = _table(store, "jobs").sort("job_id")
    # 64 GiB over 4 GPUs = 16 GiB per GPU; 8 GiB asked -> 0.5 GPU; raw 8 in gpu_mem_gib.
    # The unbound pod has no node to measure against: GPUs unknown (null), raw kept.
    assert jobs.select("job_id", "gpus", "gpus_raw", "gpus_raw_unit", "gpu_type").rows() == [
        ("ns/Pod/a", 0.5, 8.0, "gpu_mem_gib", "Tesla-T4"),
        ("ns/Pod/b", None, 8.0, "gpu_mem_gib", None),
    ]
