"""Overlapping exports are one truth: the same job in two ``sacct`` exports or two
``kubectl`` snapshots is one ``jobs`` row (the most advanced record), whether the files
come in one ingest or in successive ones, and re-ingesting an export changes nothing.

The inputs are written as the tools print them, not from our docs:

- ``sacct -P`` (``--parsable2``): a header row of field names, then one ``|``-separated
  line per job, no trailing ``|``; ``-X`` prints allocations only; a running job has
  ``End`` = ``Unknown`` and ``Elapsed`` the time so far; a pending one ``Start`` =
  ``Unknown`` and ``NodeList`` = ``None assigned`` (sacct(1), "--parsable2", "-X",
  "Elapsed": https://manpages.ubuntu.com/manpages/noble/man1/sacct.1.html).
- ``kubectl get pods -A -o json``: a ``List`` of ``Pod`` objects (Kubernetes API
  reference, Pod v1: ``metadata.ownerReferences``, ``spec.nodeName``,
  ``status.phase``, ``status.conditions[type=PodScheduled]``,
  ``status.containerStatuses[].state.running|terminated``).

GPU-hours are computed by hand below from the records' own times (each job's GPUs x
its End - Start), never from our code.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from gpu_trace.cli import app
from gpu_trace.loaders import get as get_loader
from gpu_trace.loaders import ingest
from gpu_trace.store.parquet import read_table

runner = CliRunner()
TABLES = ("jobs", "placements", "ingests", "quarantine")

HEADER = (
    "JobID|JobName|Partition|Account|User|State|ExitCode|Submit|Eligible|Start|End|Elapsed|"
    "NNodes|NCPUS|AllocTRES|ReqTRES|NodeList"
)
# Export of 2026-01-05, run at 2026-01-06T00:00:00: 101 running for 14 h, 102 pending,
# 103 finished.
DAY1 = [
    "101|train|gpu|ml|alice|RUNNING|0:0|2026-01-05T10:00:00|2026-01-05T10:00:00|"
    "2026-01-05T10:00:00|Unknown|14:00:00|1|8|billing=8,cpu=8,gres/gpu=4,mem=64G,node=1|"
    "billing=8,cpu=8,gres/gpu=4,mem=64G,node=1|node01",
    "102|eval|gpu|ml|bob|PENDING|0:0|2026-01-05T20:00:00|2026-01-05T20:00:00|Unknown|Unknown|"
    "00:00:00|1|4||billing=4,cpu=4,gres/gpu=2,mem=32G,node=1|None assigned",
    "103|prep|gpu|ml|carol|COMPLETED|0:0|2026-01-05T08:00:00|2026-01-05T08:00:00|"
    "2026-01-05T08:00:00|2026-01-05T09:00:00|01:00:00|1|2|billing=2,cpu=2,gres/gpu=1,node=1|"
    "billing=2,cpu=2,gres/gpu=1,node=1|node02",
]
# Export of 2026-01-05T12:00 .. 2026-01-07, run at 2026-01-07T00:00:00 (overlaps DAY1):
# 101 completed after 18 h, 102 running for 22 h, 104 new and finished; 103 ended
# before the window and is not listed.
DAY2 = [
    "101|train|gpu|ml|alice|COMPLETED|0:0|2026-01-05T10:00:00|2026-01-05T10:00:00|"
    "2026-01-05T10:00:00|2026-01-06T04:00:00|18:00:00|1|8|"
    "billing=8,cpu=8,gres/gpu=4,mem=64G,node=1|billing=8,cpu=8,gres/gpu=4,mem=64G,node=1|node01",
    "102|eval|gpu|ml|bob|RUNNING|0:0|2026-01-05T20:00:00|2026-01-05T20:00:00|"
    "2026-01-06T02:00:00|Unknown|22:00:00|1|4|billing=4,cpu=4,gres/gpu=2,mem=32G,node=1|"
    "billing=4,cpu=4,gres/gpu=2,mem=32G,node=1|node03",
    "104|infer|gpu|ml|dave|COMPLETED|0:0|2026-01-06T12:00:00|2026-01-06T12:00:00|"
    "2026-01-06T12:00:00|2026-01-06T13:30:00|01:30:00|1|16|"
    "billing=16,cpu=16,gres/gpu=8,node=1|billing=16,cpu=16,gres/gpu=8,node=1|node04",
]
# By hand: 101 4 GPUs x 18 h + 103 1 x 1 h + 104 8 x 1.5 h; 102 is still running.
FINISHED_GPU_HOURS = 4 * 18 + 1 * 1 + 8 * 1.5
STATUS = {"101": "completed", "102": "running", "103": "completed", "104": "completed"}


def _sacct(folder: Path, name: str, lines: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("\n".join([HEADER, *lines]) + "\n")
    return path


def _run(*args: str | Path) -> tuple[str, str]:
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.stdout, result.stderr


def _slurm(path: Path, store: Path) -> tuple[str, str]:
    return _run("ingest", "slurm", path, "--cluster", "c1", "--tz", "UTC", "--store", store)


def _lines(stdout: str) -> dict[tuple[str, str], tuple[int, int, int, int]]:
    """(file, table) -> (read, written, quarantined, merged) from the printed table."""
    out = {}
    for row in stdout.splitlines()[1:]:
        cells = row.split()
        if cells[0] == "total":
            continue
        read, written, quarantined, merged = (int(c) for c in cells[3:7])
        assert read == written + quarantined + merged, row
        out[(cells[0], cells[1])] = (read, written, quarantined, merged)
    return out


def _content(store: Path) -> dict[str, pl.DataFrame]:
    """Every table the ingest writes, in a fixed row order (the store's whole content
    as far as the ingest is concerned).
    """
    out = {}
    for table in TABLES:
        frame = pl.from_arrow(read_table(store, table))
        assert isinstance(frame, pl.DataFrame)
        out[table] = frame.sort(frame.columns, nulls_last=True)
    return out


def _same(a: dict[str, pl.DataFrame], b: dict[str, pl.DataFrame]) -> None:
    for table in TABLES:
        assert a[table].equals(b[table]), table


def _jobs(store: Path) -> pl.DataFrame:
    frame = pl.from_arrow(read_table(store, "jobs"))
    assert isinstance(frame, pl.DataFrame)
    return frame


def _finished_gpu_hours(jobs: pl.DataFrame) -> float:
    hours = (pl.col("end_time") - pl.col("start_time")).dt.total_seconds() / 3600
    return float(jobs.select((pl.col("gpus") * hours).sum()).item())


def _check_truth(store: Path) -> None:
    jobs = _jobs(store)
    assert jobs.height == 4
    assert dict(zip(jobs["job_id"], jobs["status"], strict=True)) == STATUS
    assert _finished_gpu_hours(jobs) == pytest.approx(FINISHED_GPU_HOURS)
    running = jobs.filter(pl.col("job_id") == "102").row(0, named=True)
    assert running["gpus"] == 2 and str(running["start_time"]).startswith("2026-01-06 02:00")
    places = pl.from_arrow(read_table(store, "placements"))
    assert isinstance(places, pl.DataFrame)
    # one placement per started job, from the record that won: 101 and 102 from day2
    pairs = sorted(zip(places["job_id"], places["machine_id"], strict=True))
    assert pairs == [("101", "node01"), ("102", "node03"), ("103", "node02"), ("104", "node04")]
    winner = dict(zip(jobs["job_id"], jobs["dataset"], strict=True))
    assert winner == {"101": "c1-day2", "102": "c1-day2", "103": "c1-day1", "104": "c1-day2"}


@pytest.fixture
def exports(tmp_path: Path) -> Path:
    folder = tmp_path / "exports"
    _sacct(folder, "day1.psv", DAY1)
    _sacct(folder, "day2.psv", DAY2)
    return folder


def test_slurm_folder_of_overlapping_exports(exports: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    stdout, stderr = _slurm(exports, store)
    lines = _lines(stdout)
    # day1's 101 (RUNNING) and 102 (PENDING) lose to day2's COMPLETED / RUNNING records
    assert lines[("day1.psv", "jobs")] == (3, 1, 0, 2)
    assert lines[("day2.psv", "jobs")] == (3, 3, 0, 0)
    # placements follow the winning record: day1's node01 placement of 101 goes
    assert lines[("day1.psv", "placements")] == (2, 1, 0, 1)
    assert "+ merged 3" in stderr
    _check_truth(store)


def test_slurm_successive_ingests_equal_one_ingest(exports: Path, tmp_path: Path) -> None:
    together = tmp_path / "together"
    _slurm(exports, together)
    for order in (("day1.psv", "day2.psv"), ("day2.psv", "day1.psv")):
        store = tmp_path / "-".join(order)
        first, _ = _slurm(exports / order[0], store)
        second, _ = _slurm(exports / order[1], store)
        _lines(first)
        lines = _lines(second)
        if order[1] == "day2.psv":
            assert lines[("day2.psv", "jobs")] == (3, 3, 0, 0)
        else:
            assert lines[("day1.psv", "jobs")] == (3, 1, 0, 2)
        _check_truth(store)
        # the same store, ingests lines included (day1's line now says 2 merged)
        _same(_content(store), _content(together))


def test_slurm_reingest_changes_nothing(exports: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    _slurm(exports / "day1.psv", store)
    _slurm(exports / "day2.psv", store)
    before = _content(store)
    hours = _finished_gpu_hours(_jobs(store))
    for name in ("day2.psv", "day1.psv"):
        _slurm(exports / name, store)
        _same(_content(store), before)
    _slurm(exports, store)
    _same(_content(store), before)
    assert _finished_gpu_hours(_jobs(store)) == hours == pytest.approx(FINISHED_GPU_HOURS)


def test_ingests_table_reconciles_with_merges(exports: Path, tmp_path: Path) -> None:
    """Every ingests line: read = written + quarantined + merged, and written is what
    the dataset holds now (day1's line is updated when day2 supersedes its rows).
    """
    store = tmp_path / "store"
    _slurm(exports / "day1.psv", store)
    _slurm(exports / "day2.psv", store)
    ingests = _content(store)["ingests"]
    jobs = _jobs(store)
    for r in ingests.iter_rows(named=True):
        assert r["rows_read"] == r["rows_written"] + r["rows_quarantined"] + r["rows_merged"]
        if r["table"] == "jobs":
            held = jobs.filter(pl.col("dataset") == r["dataset"]).height
            assert held == r["rows_written"]
    day1 = ingests.filter((pl.col("file") == "day1.psv") & (pl.col("table") == "jobs"))
    assert day1.select("rows_written", "rows_merged").row(0) == (1, 2)


def test_merge_is_atomic(exports: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run that fails after the merge (here, while writing the bookkeeping) leaves the
    previous data as it was: day1's superseded rows are still there.
    """
    from gpu_trace.loaders import base

    store = tmp_path / "store"
    _slurm(exports / "day1.psv", store)
    before = _content(store)

    def boom(*_: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(base, "write_merged_bookkeeping", boom)
    with pytest.raises(KeyboardInterrupt):
        ingest(get_loader("slurm"), exports / "day2.psv", store, cluster="c1", tz="UTC")
    _same(_content(store), before)


def test_other_loaders_do_not_merge() -> None:
    assert getattr(get_loader("helios"), "merge_key", None) is None
    assert get_loader("slurm").merge_key == ("cluster", "job_id")  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- kubectl


def _pod(
    name: str,
    job: str,
    gpus: int,
    *,
    created: str,
    scheduled: str | None = None,
    node: str | None = None,
    running: str | None = None,
    finished: tuple[str, str] | None = None,
) -> dict[str, object]:
    """A Pod as the API server returns it (Pod v1), owned by batch/v1 Job ``job``."""
    conditions: list[dict[str, object]] = []
    status: dict[str, object] = {"phase": "Pending", "qosClass": "Burstable"}
    if scheduled is None:
        conditions.append(
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
             "lastProbeTime": None, "lastTransitionTime": created}
        )  # fmt: skip
    else:
        conditions.append(
            {"type": "PodScheduled", "status": "True", "lastProbeTime": None,
             "lastTransitionTime": scheduled}
        )  # fmt: skip
        status["startTime"] = scheduled
    state: dict[str, object] = {}
    if running is not None:
        status["phase"] = "Running"
        state = {"running": {"startedAt": running}}
    if finished is not None:
        status["phase"] = "Succeeded"
        state = {
            "terminated": {
                "exitCode": 0,
                "reason": "Completed",
                "startedAt": finished[0],
                "finishedAt": finished[1],
                "containerID": "containerd://" + name,
            }
        }
    if state:
        status["containerStatuses"] = [
            {"name": "main", "ready": running is not None, "restartCount": 0,
             "image": "x", "imageID": "x", "state": state, "lastState": {}}
        ]  # fmt: skip
    status["conditions"] = conditions
    spec: dict[str, object] = {
        "containers": [
            {"name": "main", "image": "x",
             "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}
        ],
        "restartPolicy": "Never",
    }  # fmt: skip
    if node is not None:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "team",
            "uid": f"uid-{name}",
            "creationTimestamp": created,
            "labels": {"job-name": job, "user": "alice"},
            "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": f"uid-{job}",
                 "controller": True, "blockOwnerDeletion": True}
            ],
        },
        "spec": spec,
        "status": status,
    }  # fmt: skip


def _pods(path: Path, pods: list[dict[str, object]]) -> Path:
    # kubectl get pods -A -o json prints a List
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": pods, "metadata": {}}))
    return path


# Snapshot at 2026-01-05T12:00Z: a running (4 GPUs), b pending, c finished.
SNAP1 = [
    _pod("a-1", "a", 4, created="2026-01-05T10:00:00Z", scheduled="2026-01-05T10:00:00Z",
         node="gpu-01", running="2026-01-05T10:00:00Z"),
    _pod("b-1", "b", 2, created="2026-01-05T11:00:00Z"),
    _pod("c-1", "c", 1, created="2026-01-05T08:00:00Z", scheduled="2026-01-05T08:00:00Z",
         node="gpu-03", finished=("2026-01-05T08:00:00Z", "2026-01-05T09:00:00Z")),
]  # fmt: skip
# Snapshot at 2026-01-06T12:00Z: a succeeded after 18 h, b running since 02:00, c's pod
# deleted, d new and finished.
SNAP2 = [
    _pod("a-1", "a", 4, created="2026-01-05T10:00:00Z", scheduled="2026-01-05T10:00:00Z",
         node="gpu-01", finished=("2026-01-05T10:00:00Z", "2026-01-06T04:00:00Z")),
    _pod("b-1", "b", 2, created="2026-01-05T11:00:00Z", scheduled="2026-01-06T02:00:00Z",
         node="gpu-02", running="2026-01-06T02:00:00Z"),
    _pod("d-1", "d", 8, created="2026-01-06T10:00:00Z", scheduled="2026-01-06T10:00:00Z",
         node="gpu-04", finished=("2026-01-06T10:00:00Z", "2026-01-06T11:30:00Z")),
]  # fmt: skip
K8S_STATUS = {
    "team/Job/a": "completed",
    "team/Job/b": "running",
    "team/Job/c": "completed",
    "team/Job/d": "completed",
}


@pytest.fixture
def snapshots(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "s1").mkdir()
    (tmp_path / "s2").mkdir()
    # the same file name twice, as `kubectl get pods -A -o json > pods.json` run again
    return _pods(tmp_path / "s1" / "pods.json", SNAP1), _pods(tmp_path / "s2" / "pods.json", SNAP2)


def _k8s(path: Path, store: Path) -> dict[tuple[str, str], tuple[int, int, int, int]]:
    stdout, _ = _run("ingest", "kubernetes", path, "--cluster", "c2", "--store", store)
    return _lines(stdout)


def _check_k8s(store: Path) -> None:
    jobs = _jobs(store)
    assert dict(zip(jobs["job_id"], jobs["status"], strict=True)) == K8S_STATUS
    assert _finished_gpu_hours(jobs) == pytest.approx(FINISHED_GPU_HOURS)
    places = pl.from_arrow(read_table(store, "placements"))
    assert isinstance(places, pl.DataFrame)
    pairs = sorted(zip(places["instance"], places["machine_id"], strict=True))
    assert pairs == [("a-1", "gpu-01"), ("b-1", "gpu-02"), ("c-1", "gpu-03"), ("d-1", "gpu-04")]


def test_kubectl_successive_snapshots(snapshots: tuple[Path, Path], tmp_path: Path) -> None:
    s1, s2 = snapshots
    stores = []
    for order in ((s1, s2), (s2, s1)):
        store = tmp_path / f"store-{order[0].parent.name}"
        _k8s(order[0], store)
        lines = _k8s(order[1], store)
        if order[1] == s2:
            assert lines[("pods.json", "jobs")] == (3, 3, 0, 0)
        else:  # the older snapshot: a (running) and b (pending) lose
            assert lines[("pods.json", "jobs")] == (3, 1, 0, 2)
            assert lines[("pods.json", "placements")] == (3, 1, 0, 2)
        _check_k8s(store)
        stores.append(_content(store))
    _same(*stores)


def test_kubectl_reingest_changes_nothing(snapshots: tuple[Path, Path], tmp_path: Path) -> None:
    s1, s2 = snapshots
    store = tmp_path / "store"
    _k8s(s1, store)
    _k8s(s2, store)
    before = _content(store)
    for snap in (s2, s1, s2):
        _k8s(snap, store)
        _same(_content(store), before)
    _check_k8s(store)
    for r in before["ingests"].iter_rows(named=True):
        assert r["rows_read"] == r["rows_written"] + r["rows_quarantined"] + r["rows_merged"]


def test_kubectl_bookkeeping_survives_snapshots_and_nodes(
    snapshots: tuple[Path, Path], tmp_path: Path
) -> None:
    """Each snapshot also holds a record that is no Pod (a Service: kubectl get all
    prints them side by side), quarantined. The cluster's one dataset keeps every
    snapshot's ingests line and quarantined record through merges, a re-ingest and a
    later nodes file: quarantine rows = the lines' rows_quarantined.
    """
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc"}}
    s1 = _pods(snapshots[0], [*SNAP1, service])
    s2 = _pods(snapshots[1], [*SNAP2, service])
    store = tmp_path / "store"
    _k8s(s1, store)
    _k8s(s2, store)
    _k8s(s2, store)
    nodes = Path("data/samples/kubernetes/nodes.json")
    _k8s(nodes, store)
    content = _content(store)
    lines = content["ingests"].filter(pl.col("dataset") == "c2")
    tables = sorted(lines.select("table", "file").rows())
    assert tables == [
        ("jobs", "pods.json"), ("jobs", "pods.json"), ("machines", "nodes.json"),
        ("placements", "pods.json"), ("placements", "pods.json"),
    ]  # fmt: skip
    quarantine = content["quarantine"].filter(pl.col("dataset") == "c2")
    for (table, file), group in lines.group_by("table", "file"):
        held = quarantine.filter((pl.col("table") == table) & (pl.col("file") == file)).height
        assert held == group["rows_quarantined"].sum(), (table, file)
    placements = lines.filter(pl.col("table") == "placements")
    assert sorted(placements["rows_quarantined"]) == [1, 1]
    _check_k8s(store)


def test_folder_without_cluster_is_one_cluster(tmp_path: Path) -> None:
    """Without --cluster, a folder of daily exports is one cluster named after the folder,
    so the overlapping exports still merge into one row per job."""
    folder = tmp_path / "prod-a"
    _sacct(folder, "day1.psv", DAY1)
    _sacct(folder, "day2.psv", DAY2)
    store = tmp_path / "store"
    _run("ingest", "slurm", folder, "--tz", "UTC", "--store", store)
    jobs = _jobs(store)
    assert dict(zip(jobs["job_id"], jobs["status"], strict=True)) == STATUS
    assert _finished_gpu_hours(jobs) == pytest.approx(FINISHED_GPU_HOURS)
    assert set(jobs["cluster"]) == {"prod-a"}


def _named_snapshots(folder: Path, *snaps: list[dict[str, object]]) -> list[Path]:
    """Snapshots saved as operators do (`kubectl get pods -A -o json > pods-HHMM.json`)."""
    folder.mkdir()
    return [_pods(folder / f"pods-{6 * (k + 1):02d}00.json", s) for k, s in enumerate(snaps)]


def _k8s_many(paths: list[Path], store: Path) -> dict[tuple[str, str], tuple[int, int, int, int]]:
    stdout, _ = _run("ingest", "kubernetes", *paths, "--cluster", "c2", "--store", store)
    return _lines(stdout)


def test_kubectl_snapshots_in_one_ingest(tmp_path: Path) -> None:
    """Several snapshots in one ingest are one truth too: one row per job, each file's
    own counted line, and the store holds what ingesting the files one after another
    holds (in either order: the snapshots never tie)."""
    s1, s2 = _named_snapshots(tmp_path / "snaps", SNAP1, SNAP2)
    sequential = []
    for order in ((s1, s2), (s2, s1)):
        store = tmp_path / f"seq-{order[0].stem}"
        for snap in order:
            _k8s(snap, store)
        sequential.append(_content(store))
    _same(*sequential)
    for order in ((s1, s2), (s2, s1)):
        store = tmp_path / f"one-{order[0].stem}"
        lines = _k8s_many(list(order), store)
        # the older snapshot's a (running) and b (pending) lose, whatever the order
        assert lines[("pods-0600.json", "jobs")] == (3, 1, 0, 2)
        assert lines[("pods-0600.json", "placements")] == (3, 1, 0, 2)
        assert lines[("pods-1200.json", "jobs")] == (3, 3, 0, 0)
        _check_k8s(store)
        _same(_content(store), sequential[0])
        # the same call again, then one of its files alone: nothing changes
        _k8s_many(list(order), store)
        _same(_content(store), sequential[0])
        _k8s(order[1], store)
        _same(_content(store), sequential[0])


def test_kubectl_tied_snapshots_in_one_ingest_follow_file_order(tmp_path: Path) -> None:
    """Job c finished before both snapshots and is listed, unchanged, in both: a tie,
    which the later export wins: the later file of one ingest, as the later of two
    ingests."""
    s1, s2 = _named_snapshots(tmp_path / "snaps", SNAP1, [*SNAP2, SNAP1[2]])
    seq = tmp_path / "seq"
    _k8s(s1, seq)
    _k8s(s2, seq)
    one = tmp_path / "one"
    lines = _k8s_many([s1, s2], one)
    assert lines[("pods-0600.json", "jobs")] == (3, 0, 0, 3)
    assert lines[("pods-1200.json", "jobs")] == (4, 4, 0, 0)
    _same(_content(one), _content(seq))
    _check_k8s(one)


def test_kubectl_snapshots_in_one_ingest_keep_their_rejects(tmp_path: Path) -> None:
    """Each snapshot holds a Service (kubectl get all prints them beside pods): each
    file's quarantined record stays, counted on its own line, through a re-ingest."""
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc"}}
    s1, s2 = _named_snapshots(tmp_path / "snaps", [*SNAP1, service], [service, *SNAP2])
    store = tmp_path / "store"
    nodes = Path("data/samples/kubernetes/nodes.json")
    lines = _k8s_many([s1, nodes, s2], store)
    assert lines[("pods-0600.json", "placements")] == (4, 1, 1, 2)
    assert lines[("pods-1200.json", "placements")] == (4, 3, 1, 0)
    _k8s_many([s2, s1], store)
    content = _content(store)
    q = content["quarantine"].filter(pl.col("table") == "placements")
    assert sorted(zip(q["file"], q["locator"], strict=True)) == [
        ("pods-0600.json", "record 4"),
        ("pods-1200.json", "record 1"),
    ]
    ingests = content["ingests"].filter(pl.col("table") == "placements")
    assert sorted(ingests["rows_quarantined"]) == [1, 1]
    assert content["ingests"].filter(pl.col("table") == "machines").height == 2
    _check_k8s(store)


def test_kubectl_snapshot_with_only_rejected_pods_keeps_the_cluster(tmp_path: Path) -> None:
    """A later snapshot whose only pod is quarantined ("4 GiB" is no Kubernetes
    quantity: the API reference's quantity grammar has no blank) holds no job; it must
    not wipe the jobs the earlier snapshots recorded (it did: its empty file replaced
    the cluster's dataset), alone or beside another snapshot."""
    bad = _pod("z-1", "z", 1, created="2026-01-07T00:00:00Z")
    bad["spec"]["containers"][0]["resources"] = {"requests": {"memory": "4 GiB"}}  # type: ignore[index]
    s1, s2, s3 = _named_snapshots(tmp_path / "snaps", SNAP1, SNAP2, [bad])
    reference, store = tmp_path / "reference", tmp_path / "store"
    for snap in (s1, s2):
        _k8s(snap, reference)
        _k8s(snap, store)
    lines = _k8s(s3, store)
    assert lines[("pods-1800.json", "placements")] == (1, 0, 1, 0)
    _check_k8s(store)
    content = _content(store)
    expected = _content(reference)
    for table in ("jobs", "placements"):
        assert content[table].equals(expected[table]), table
    one = tmp_path / "one"
    _k8s_many([s1, s3, s2], one)
    _check_k8s(one)


def test_store_written_before_jobs_v3_still_merges(tmp_path: Path) -> None:
    """A jobs file written before ``as_of_time`` and ``file_sha256`` existed (jobs v2)
    is read with those columns as nulls: the next export merges into it instead of
    failing with a traceback."""
    import pyarrow.parquet as pq

    store = tmp_path / "store"
    _slurm(_sacct(tmp_path / "in", "day1.psv", DAY1), store)
    (old,) = (store / "current" / "jobs" / "source=slurm").glob("c1-day1.parquet")
    table = pq.read_table(old)
    older = table.drop_columns(["as_of_time", "file_sha256", "cancelled_by"])
    old.unlink()  # a hard link shared with earlier generations: replace, never rewrite
    pq.write_table(older.replace_schema_metadata(table.schema.metadata), old)
    _slurm(_sacct(tmp_path / "in", "day2.psv", DAY2), store)
    jobs = _jobs(store)
    assert dict(zip(jobs["job_id"], jobs["status"], strict=True)) == STATUS
    assert _finished_gpu_hours(jobs) == pytest.approx(FINISHED_GPU_HOURS)
