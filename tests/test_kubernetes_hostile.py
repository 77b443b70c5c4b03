"""Kubernetes: hostile and contradictory values (issue 25). Each record below is one the
Kubernetes API could hand out or a damaged export could hold; each must end as one
quarantine row with its reason (or one exact value), never a traceback, a hang, an
``inf`` or a silent zero.

Sources: the Pod v1 and Node v1 API reference (metadata.creationTimestamp,
status.conditions PodScheduled, status.startTime, ContainerStateTerminated startedAt /
finishedAt), ``k8s.io/apimachinery/pkg/api/resource/quantity.go`` (the Quantity
grammar; "no quantity may represent a number greater than 2^63-1"; values rounded up
to nano units), NVIDIA's MIG user guide (profiles 1g to 7g of a GPU), Alibaba's GPU
sharing device plugin (``aliyun.com/gpu-mem`` GiB / ``aliyun.com/gpu-count`` on the
node), RFC 8259 section 4 (duplicate names: behaviour unpredictable) and RFC 8259
section 8.2 / Unicode (a lone surrogate is no character).
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from gpu_trace.cli import app
from gpu_trace.loaders import LOADERS, ingest
from gpu_trace.loaders.k8s_quantity import scaled
from tests.conftest import ROOT
from tests.kubernetes_common import load, node, pod, reasons, table, write_lines

INT64_MAX = 9223372036854775807


# ------------------------------------------------------------------ times out of order


def test_pod_created_after_it_was_scheduled_is_quarantined(tmp_path: Path) -> None:
    # The API server sets creationTimestamp when it stores the pod; the scheduler binds
    # it later (PodScheduled=True), the kubelet then sets status.startTime. A creation
    # after either would give a negative queue time.
    scheduled = pod(
        "late-created",
        created="2026-01-05T10:05:00Z",
        status={
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "True",
                    "lastTransitionTime": "2026-01-05T10:00:00Z",
                }
            ]
        },
    )
    started = pod(
        "late-created-2",
        created="2026-01-05T10:05:00Z",
        status={"startTime": "2026-01-05T10:01:00Z"},
    )
    fine = pod("fine")
    store = load(tmp_path, [scheduled, started, fine])
    why = reasons(store)
    assert set(why) == {"line 1", "line 2"}
    assert "creationTimestamp 2026-01-05T10:05:00Z is after its PodScheduled" in why["line 1"]
    assert "is after status.startTime 2026-01-05T10:01:00Z" in why["line 2"]
    assert table(store, "jobs")["job_id"].to_list() == ["ns/Pod/fine"]


def test_container_finished_before_it_started_is_quarantined(tmp_path: Path) -> None:
    # ContainerStateTerminated: startedAt "Time at which previous execution of the
    # container started", finishedAt "Time at which the container last terminated".
    bad = pod(
        "backwards",
        phase="Failed",
        status={
            "containerStatuses": [
                {
                    "name": "main",
                    "state": {
                        "terminated": {
                            "exitCode": 1,
                            "reason": "Error",
                            "startedAt": "2026-01-05T11:00:00Z",
                            "finishedAt": "2026-01-05T10:30:00Z",
                        }
                    },
                }
            ]
        },
    )
    store = load(tmp_path, [bad, pod("fine")])
    assert reasons(store) == {
        "line 1": "status.containerStatuses[0].state.terminated.finishedAt "
        "'2026-01-05T10:30:00Z' is before its startedAt '2026-01-05T11:00:00Z'"
    }


# ----------------------------------------------------------------- GPU sharing on zero


@pytest.mark.parametrize(
    ("mem", "count"),
    [("0", "4"), ("64", "0"), ("0", "0")],
)
def test_gpu_share_on_a_node_reporting_zero_is_quarantined(
    tmp_path: Path, mem: str, count: str
) -> None:
    # gpushare-device-plugin: a pod asks aliyun.com/gpu-mem GiB; its share of a GPU is
    # that over (node gpu-mem / node gpu-count). A node reporting 0 of either leaves no
    # share to compute (it gave inf, or 0 silently).
    share = node("share-1", {"cpu": "8", "aliyun.com/gpu-mem": mem, "aliyun.com/gpu-count": count})
    asking = pod("a", node="share-1", requests={"aliyun.com/gpu-mem": "8"})
    store = load(tmp_path, [share, asking, pod("b", requests={"nvidia.com/gpu": "1"})])
    assert reasons(store) == {
        "line 2": f"requests aliyun.com/gpu-mem 8 on node share-1, which reports "
        f"aliyun.com/gpu-mem '{mem}' and aliyun.com/gpu-count '{count}': no share of a GPU "
        "can be computed"
    }
    gpus = table(store, "jobs")["gpus"].to_list()
    assert gpus == [1.0] and all(math.isfinite(g) for g in gpus)


# --------------------------------------------------------------------- int64 overflow


def test_requests_summed_past_int64_are_quarantined(tmp_path: Path) -> None:
    # Two containers' memory requests add up (the pod's effective request): int64 max
    # plus 1 byte. Quantity caps each value at 2^63-1; the sum must not wrap to 0 or
    # to a negative number.
    two = pod("two")
    two["spec"] = {
        "containers": [
            {"name": "a", "resources": {"requests": {"memory": str(INT64_MAX)}}},
            {"name": "b", "resources": {"requests": {"memory": "1"}}},
        ]
    }
    # spec.overhead is added to the containers' sum (Pod Overhead, RuntimeClass)
    over = pod("over", requests={"cpu": "9223372036854775"}, spec={"overhead": {"cpu": "1"}})
    store = load(tmp_path, [two, over, pod("fine")])
    why = reasons(store)
    assert why["line 1"] == (
        "the pod's effective request of memory (9223372036854775808) is past int64 "
        "(requests, init containers and spec.overhead added up)"
    )
    # 9223372036854775 cores = 9223372036854775000 milli + 1000 milli > int64 max
    assert why["line 2"].startswith("the pod's effective request of cpu (9223372036854776000)")
    assert table(store, "jobs")["job_id"].to_list() == ["ns/Pod/fine"]


def test_memory_of_int64_max_is_kept_exactly(tmp_path: Path) -> None:
    # 2^63-1 is the largest quantity Kubernetes represents: kept to the byte (it went
    # through a float and raised a cast traceback); one more byte is out of range.
    store = load(
        tmp_path,
        [
            pod("max", requests={"memory": str(INT64_MAX)}),
            pod("over", requests={"memory": str(INT64_MAX + 1)}),
        ],
    )
    jobs = table(store, "jobs")
    assert jobs.select("job_id", "mem_bytes").rows() == [("ns/Pod/max", INT64_MAX)]
    assert reasons(store) == {
        "line 2": "spec.containers[0].resources.requests.memory '9223372036854775808' "
        "is out of range"
    }


def test_jobs_whose_pods_together_pass_int64_are_quarantined(tmp_path: Path) -> None:
    # Two pods of one Job running together, each with a valid int64-max memory request:
    # the job's total cannot be stored, so its pods are quarantined with the reason.
    owner = {"ownerReferences": [{"kind": "Job", "name": "big", "uid": "u1", "controller": True}]}
    store = load(
        tmp_path,
        [
            pod("big-1", requests={"memory": str(INT64_MAX)}, metadata=owner),
            pod("big-2", requests={"memory": str(INT64_MAX)}, metadata=owner),
            pod("fine"),
        ],
    )
    why = reasons(store)
    assert set(why) == {"line 1", "line 2"}
    assert (
        why["line 1"]
        == "job ns/Job/big: its pods alive together request bytes of memory past int64"
    )


def test_node_with_more_than_2_31_gpus_is_quarantined(tmp_path: Path) -> None:
    # machines.gpus is a 32-bit count; 2^31 devices is no real node (it raised a cast
    # traceback).
    store = load(
        tmp_path,
        [node("huge", {"nvidia.com/gpu": str(2**31)}), node("ok", {"nvidia.com/gpu": "8"})],
        "nodes.jsonl",
    )
    q = table(store, "quarantine")
    # the node counts on both machines lines (capacity and allocatable)
    assert q.select("dataset", "locator", "reason").sort("dataset").rows() == [
        ("kubernetes", "line 1", "status.capacity lists 2147483648 GPU devices, more than 2^31-1"),
        (
            "kubernetes-allocatable",
            "line 1",
            "status.capacity lists 2147483648 GPU devices, more than 2^31-1",
        ),
    ]
    assert table(store, "machines")["machine_id"].unique().to_list() == ["ok"]


def test_mig_profile_with_20_digit_slices_is_quarantined(tmp_path: Path) -> None:
    # MIG profiles are <g>g.<mem>gb with g of 1 to 7 compute slices of one GPU.
    store = load(
        tmp_path,
        [
            pod("mig", requests={"nvidia.com/mig-99999999999999999999g.10gb": "1"}),
            pod("nine", requests={"nvidia.com/mig-9g.10gb": "1"}),
            pod("ok", requests={"nvidia.com/mig-3g.40gb": "2"}),
        ],
    )
    why = reasons(store)
    assert why == {
        "line 1": "resource nvidia.com/mig-99999999999999999999g.10gb names "
        "99999999999999999999 compute slices: a MIG profile has 1 to 7",
        "line 2": "resource nvidia.com/mig-9g.10gb names 9 compute slices: a MIG profile has 1 to 7",
    }
    assert table(store, "jobs").select("gpus", "gpus_raw").rows() == [(6 / 7, 6.0)]


# ------------------------------------------------------------------------ quantities


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1" * 5000, (None, "is out of range")),
        ("0." + "0" * 4998 + "1", (1, None)),
        ("1." + "0" * 4998 + "1", (2, None)),  # just over 1 rounds up to 2
        (str(INT64_MAX), (INT64_MAX, None)),
        (str(INT64_MAX + 1), (None, "is out of range")),
        ("7.99999999999999999999Ei", (None, "is out of range")),  # rounds up to 2^63
    ],
)
def test_quantities_are_bounded_before_computing(
    text: str, expected: tuple[object, object]
) -> None:
    assert scaled(text, False, False) == expected


_HUGE_EXPONENTS = """
from gpu_trace.loaders.k8s_quantity import scaled
print([scaled(t, False, False) for t in ("0e999999999", "0E-999999999", "1e-999999999",
                                          "1e999999999")])
"""


def test_huge_exponents_do_not_hang() -> None:
    # In a child process with a time limit: the defect was a hang at full CPU inside
    # one big-integer power, which no signal interrupts. Zero with any exponent is zero
    # (quantity.go rounds only non-zero values up); a positive value below one
    # nano-unit rounds up to the smallest unit; a huge one is out of range.
    out = subprocess.run(
        [sys.executable, "-c", _HUGE_EXPONENTS],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert out.stdout.strip() == str([(0, None), (0, None), (1, None), (None, "is out of range")])


def test_zero_with_a_huge_exponent_is_zero_in_an_ingest(tmp_path: Path) -> None:
    store = load(tmp_path, [pod("z", requests={"memory": "0e99", "cpu": "1"})])
    assert table(store, "jobs").select("mem_bytes", "cpus").rows() == [(0, 1.0)]


def test_a_5000_digit_quantity_is_one_quarantine_row(tmp_path: Path) -> None:
    store = load(tmp_path, [pod("long", requests={"memory": "9" * 5000}), pod("fine")])
    assert reasons(store) == {
        "line 1": "spec.containers[0].resources.requests.memory '"
        + "9" * 40
        + "... (5000 characters)' is out of range"
    }


# ------------------------------------------------------------ duplicate keys, surrogates

_DUP_LABELS = (
    '{"kind": "Pod", "metadata": {"name": "dup-user", "namespace": "ns", '
    '"creationTimestamp": "2026-01-05T10:00:00Z", "labels": {"user": "bob"}, "labels": {}}, '
    '"spec": {"containers": [{"name": "main"}]}, "status": {"phase": "Running"}}'
)
_DUP_GPU = (
    '{"kind": "Pod", "metadata": {"name": "dup-gpu", "namespace": "ns", '
    '"creationTimestamp": "2026-01-05T10:00:00Z"}, "spec": {"containers": [{"name": "main", '
    '"resources": {"requests": {"nvidia.com/gpu": "2", "nvidia.com/gpu": "0"}}}]}, '
    '"status": {"phase": "Running"}}'
)


def test_duplicate_json_keys_are_quarantined(tmp_path: Path) -> None:
    # RFC 8259 section 4: with duplicate names "the behavior of software that receives
    # such an object is unpredictable"; the API server's strict field validation rejects
    # them. Today one dropped the user, the other zeroed the GPUs.
    store = load(tmp_path, [_DUP_LABELS, _DUP_GPU, pod("fine")])
    assert reasons(store) == {
        "line 1": "duplicate JSON key 'labels' in one object (ambiguous: which value?)",
        "line 2": "duplicate JSON key 'nvidia.com/gpu' in one object (ambiguous: which value?)",
    }
    assert table(store, "jobs")["job_id"].to_list() == ["ns/Pod/fine"]


def test_duplicate_keys_in_a_list_document_are_quarantined(tmp_path: Path) -> None:
    f = tmp_path / "pods.json"
    f.write_text('{"kind": "List", "items": [' + _DUP_GPU + ", " + json.dumps(pod("fine")) + "]}")
    store = tmp_path / "store"
    ingest(LOADERS["kubernetes"], f, store)
    assert reasons(store) == {
        "record 1": "duplicate JSON key 'nvidia.com/gpu' in one object (ambiguous: which value?)"
    }


def test_duplicate_keys_among_many_records_are_each_found(tmp_path: Path) -> None:
    """Records are checked for repeated keys many at a time (k8s_json.duplicate_keys):
    every duplicate among 600 pods must still be found on its own line, with its own
    key, also next to a record nested deeper than Python's json can follow."""
    records: list[object] = [pod(f"p{n}") for n in range(1, 601)]
    # an unread field nested 3,000 arrays deep: valid JSON (RFC 8259 section 9 lets a
    # parser limit depth; Python's json stops near 1,000, DuckDB reads it)
    deep = json.dumps(pod("deep", spec={"x": "DEEP"})).replace('"DEEP"', "[" * 3000 + "]" * 3000)
    records[254] = deep
    for n in (256, 257, 513):
        records[n - 1] = _DUP_GPU.replace("dup-gpu", f"dup-{n}")
    records[599] = _DUP_LABELS
    store = load(tmp_path, records)
    dup = "duplicate JSON key {!r} in one object (ambiguous: which value?)"
    found = {k: v for k, v in reasons(store).items() if v.startswith("duplicate")}
    assert found == {
        "line 256": dup.format("nvidia.com/gpu"),
        "line 257": dup.format("nvidia.com/gpu"),
        "line 513": dup.format("nvidia.com/gpu"),
        "line 600": dup.format("labels"),
    }
    assert table(store, "placements").height + len(reasons(store)) == 600


_SURROGATE_POD = json.dumps(pod("PLACEHOLDER")).replace("PLACEHOLDER", "\\ud800")


def test_lone_surrogate_in_a_list_quarantines_that_record_only(tmp_path: Path) -> None:
    # "\ud800" is valid JSON syntax but no Unicode character: the record cannot be
    # stored. The other records of the kubectl List must load (the whole document
    # failed).
    f = tmp_path / "pods.json"
    f.write_text(
        '{\n  "apiVersion": "v1",\n  "kind": "List",\n  "items": [\n'
        + _SURROGATE_POD
        + ",\n"
        + json.dumps(pod("fine"))
        + '\n  ],\n  "metadata": {"resourceVersion": ""}\n}\n'
    )
    store = tmp_path / "store"
    report = ingest(LOADERS["kubernetes"], f, store)
    assert reasons(store) == {
        # the escape's backslash is character 59 of the record: {"apiVersion": "v1", (21)
        # "kind": "Pod", (15) "metadata": { (13) "name": " (9)
        "record 1": "not valid JSON (a lone UTF-16 surrogate escape \\ud800 at column 59: "
        "no Unicode character)"
    }
    assert table(store, "jobs")["job_id"].to_list() == ["ns/Pod/fine"]
    placements = next(r for r in report.lines if r.table == "placements")
    assert (placements.rows_read, placements.rows_written, placements.rows_quarantined) == (2, 1, 1)


def test_lone_surrogate_in_json_lines_names_the_escape(tmp_path: Path) -> None:
    store = load(tmp_path, [_SURROGATE_POD, pod("fine")])
    assert reasons(store)["line 1"].startswith(
        "not valid JSON (a lone UTF-16 surrogate escape \\ud800"
    )


# ---------------------------------------------------------------- through the CLI


def test_every_hostile_record_at_once_through_the_cli(tmp_path: Path) -> None:
    """All of the above in one file: exit 0, no traceback, each bad record a row, and a
    summary without inf."""
    records: list[object] = [
        node("share-0", {"aliyun.com/gpu-mem": "0", "aliyun.com/gpu-count": "4"}),
        node("huge", {"nvidia.com/gpu": str(2**31)}),
        pod("share", node="share-0", requests={"aliyun.com/gpu-mem": "8"}),
        pod("zero", requests={"memory": "0e99"}),
        pod("long", requests={"memory": "1" * 5000}),
        pod("max", requests={"memory": str(INT64_MAX + 1)}),
        pod("mig", requests={"nvidia.com/mig-99999999999999999999g.10gb": "1"}),
        _DUP_GPU,
        _SURROGATE_POD,
        pod("gpu", requests={"nvidia.com/gpu": "2"}),
    ]
    f = write_lines(tmp_path / "all.jsonl", records)
    store = str(tmp_path / "store")
    runner = CliRunner()
    res = runner.invoke(app, ["ingest", "kubernetes", str(f), "--store", store])
    assert res.exit_code == 0, res.output
    assert res.exception is None and "Traceback" not in res.output
    res = runner.invoke(
        app, ["analyze", "summary", "--source", "kubernetes", "--store", store, "--format", "csv"]
    )
    assert res.exit_code == 0, res.output
    header, row = list(csv.reader(io.StringIO(res.stdout)))[:2]
    summary = dict(zip(header, row, strict=True))
    # only the 2-GPU pod is a GPU job; the share pod gave gpus = inf before
    assert (summary["gpu_jobs"], summary["avg_gpus"], summary["max_gpus"]) == ("1", "2.0", "2.0")
    q = table(Path(store), "quarantine").filter(pl.col("table") == "placements")
    # share, long, max, mig, duplicate key, surrogate: lines 3, 5, 6, 7, 8, 9
    assert sorted(q["locator"].to_list()) == [f"line {n}" for n in (3, 5, 6, 7, 8, 9)]


def test_duplicate_key_in_a_node_is_quarantined_on_both_inventories(tmp_path: Path) -> None:
    dup_node = (
        '{"kind": "Node", "metadata": {"name": "n1"}, "status": {"capacity": '
        '{"nvidia.com/gpu": "8", "nvidia.com/gpu": "0"}}}'
    )
    store = load(tmp_path, [dup_node, node("n2", {"nvidia.com/gpu": "4"})], "nodes.jsonl")
    q = table(store, "quarantine").sort("dataset")
    assert q.select("dataset", "locator", "reason").rows() == [
        (
            ds,
            "line 1",
            "duplicate JSON key 'nvidia.com/gpu' in one object (ambiguous: which value?)",
        )
        for ds in ("kubernetes", "kubernetes-allocatable")
    ]
    assert table(store, "machines")["machine_id"].unique().to_list() == ["n2"]


def test_lone_surrogate_in_a_single_pod_document_is_one_error_line(tmp_path: Path) -> None:
    # `kubectl get pod NAME -o json`: the document is the one record, so the file fails
    # whole, with one line naming the escape and its line.
    f = tmp_path / "pod.json"
    f.write_text(json.dumps(pod("PLACEHOLDER"), indent=2).replace("PLACEHOLDER", "\\ud800"))
    res = CliRunner().invoke(
        app, ["ingest", "kubernetes", str(f), "--store", str(tmp_path / "store")]
    )
    assert res.exit_code == 1 and "Traceback" not in res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    # line 5: {, "apiVersion", "kind", "metadata": {, "name": "\ud800"
    assert lines == [
        f"error: {f}: line 5: a lone UTF-16 surrogate escape \\ud800 (no Unicode character)"
    ]
