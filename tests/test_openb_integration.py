"""openb: integration tests (ingest into a real store).

The openb loader on the real files, checked against counts computed independently
here with the standard library's csv module, plus fixtures for every rejection path."""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from gpu_trace.errors import InputError
from gpu_trace.loaders import LOADERS, ingest
from gpu_trace.store.catalog import connect
from gpu_trace.store.parquet import dataset_path, read_table
from tests.conftest import OPENB
from tests.openb_common import POD_HEADER


def rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def test_pods_match_the_csv(openb_store: Path) -> None:
    pods = rows(OPENB / "openb_pod_list_default.csv")
    jobs = pl.from_arrow(read_table(openb_store, "jobs", "openb"))
    assert isinstance(jobs, pl.DataFrame)
    assert jobs.height == len(pods)
    sharing = sum(1 for p in pods if p["num_gpu"] == "1" and int(p["gpu_milli"]) < 1000)
    assert jobs.filter((pl.col("gpus") > 0) & (pl.col("gpus") < 1)).height == sharing
    num_gpu = Counter(int(p["num_gpu"]) for p in pods)
    milli = Counter(p["num_gpu"] + "/" + p["gpu_milli"] for p in pods)
    assert dict(Counter(jobs["gpus_raw"].cast(pl.Int64).to_list())) == dict(
        Counter(int(k.split("/")[0]) * int(k.split("/")[1]) for k in milli.elements())
    )
    assert sum(num_gpu.values()) == len(pods)
    phases = Counter(p["pod_phase"] for p in pods)
    assert dict(Counter(jobs["raw_status"].to_list())) == dict(phases)
    status = dict(
        zip(*jobs["status"].value_counts(sort=True).to_dict(as_series=False).values(), strict=True)
    )
    assert status["running"] == phases["Running"]
    assert status["completed"] == phases["Succeeded"]
    assert status["pending"] == phases["Pending"]
    assert dict(Counter(jobs["qos"].to_list())) == dict(Counter(p["qos"] for p in pods))
    pending = sum(1 for p in pods if p["scheduled_time"] == "")
    assert jobs["start_time"].null_count() == pending
    assert jobs["queue_s"].null_count() == pending


def test_pod_values_are_normalized(openb_store: Path) -> None:
    pods = {p["name"]: p for p in rows(OPENB / "openb_pod_list_default.csv")}
    jobs = pl.from_arrow(read_table(openb_store, "jobs", "openb"))
    assert isinstance(jobs, pl.DataFrame)
    for job in jobs.sample(200, seed=7).iter_rows(named=True):
        p = pods[job["job_id"]]
        assert job["cpus"] == int(p["cpu_milli"]) / 1000
        assert job["mem_bytes"] == int(p["memory_mib"]) * 1024 * 1024
        assert job["gpus"] == pytest.approx(int(p["num_gpu"]) * int(p["gpu_milli"]) / 1000)
        assert job["submit_time"].timestamp() == int(p["creation_time"])
        assert job["end_time"].timestamp() == int(p["deletion_time"])
        if p["scheduled_time"]:
            assert job["queue_s"] == int(p["scheduled_time"]) - int(p["creation_time"])
            assert job["run_s"] == int(p["deletion_time"]) - int(p["scheduled_time"])
        assert job["time_basis"] == "relative" and job["source_tz"] is None


def test_nodes_match_the_csv(openb_store: Path) -> None:
    con = connect(openb_store)
    for dataset, file in (
        ("all_node", "openb_node_list_all_node.csv"),
        ("gpu_node", "openb_node_list_gpu_node.csv"),
    ):
        nodes = rows(OPENB / file)
        got = con.execute(
            f"SELECT count(*), sum(gpus), count(*) FILTER (WHERE gpu_type IS NULL) FROM machines "
            f"WHERE dataset = '{dataset}'"
        ).fetchone()
        assert got == (
            len(nodes),
            sum(int(n["gpu"]) for n in nodes),
            sum(1 for n in nodes if n["model"] == ""),
        )
    by_model = dict(
        con.execute(
            "SELECT gpu_type, count(*) FROM machines WHERE dataset='all_node' AND gpu_type IS NOT NULL GROUP BY 1"
        ).fetchall()
    )
    assert by_model == dict(
        Counter(n["model"] for n in rows(OPENB / "openb_node_list_all_node.csv") if n["model"])
    )


def test_ingests_records_the_input_sha256(openb_store: Path) -> None:
    """(Reconciliation itself is checked in tests/test_reconciliation.py against an
    independent count and a lossy loader.)"""
    con = connect(openb_store)
    import hashlib

    sha = hashlib.sha256((OPENB / "openb_pod_list_default.csv").read_bytes()).hexdigest()
    assert con.execute("SELECT file_sha256 FROM ingests WHERE \"table\"='jobs'").fetchone() == (
        sha,
    )


def test_reingest_is_idempotent(store_copy: Path) -> None:
    path = dataset_path(store_copy, "jobs", "openb", "default")
    before = path.read_bytes()
    ingest(LOADERS["openb"], OPENB, store_copy)
    assert path.read_bytes() == before
    assert connect(store_copy).execute("SELECT count(*) FROM jobs").fetchone() == (8152,)


def test_short_multigpu_variant(store: Path) -> None:
    report = ingest(LOADERS["openb"], OPENB / "openb_pod_list_multigpu50.csv", store)
    pods = rows(OPENB / "openb_pod_list_multigpu50.csv")
    assert report.totals == (len(pods), len(pods), 0)
    con = connect(store)
    assert con.execute(
        "SELECT count(*) FILTER (WHERE gpus > 1), count(*) FILTER (WHERE status='unknown') FROM jobs"
    ).fetchone() == (
        sum(1 for p in pods if int(p["num_gpu"]) > 1),
        len(pods),
    )


def write(path: Path, text: str | bytes) -> Path:
    if isinstance(text, str):
        text = text.encode()
    path.write_bytes(text)
    return path


def test_bad_rows_are_quarantined_with_line_and_reason(tmp_path: Path, store: Path) -> None:
    lines = [
        POD_HEADER,
        "p0,1000,100,1,500,,LS,Running,0,10,5",  # line 2: good
        "p1,1000,100,1,abc,,LS,Running,0,10,5",  # 3: not a number
        "p2,1000,100,1",  # 4: wrong field count
        "",  # 5: empty line
        ",1000,100,1,1000,,LS,Running,0,10,5",  # 6: missing name
        "p5,1000,100,-1,1000,,LS,Running,0,10,5",  # 7: negative
        "p6,1000,100,1,1000,,LS,Running,10,5,6",  # 8: deleted before created
        "p7,1000,100,2,1000,V100M16|V100M32,BE,Failed,0,10,",  # 9: good, unscheduled
    ]
    body = ("\n".join(lines) + "\n").encode() + b"p8,1000,100,1,1000,,LS,Run\xffning,0,10,5\n"
    f = write(tmp_path / "openb_pod_list_default.csv", body)
    report = ingest(LOADERS["openb"], f, store)
    assert report.totals == (9, 2, 7)
    q = {
        r[0]: r[1]
        for r in connect(store).execute("SELECT locator, reason FROM quarantine").fetchall()
    }
    assert q == {
        "line 3": "gpu_milli 'abc' is not a valid int",
        "line 4": "expected 11 fields, found 4",
        "line 5": "empty line",
        "line 6": "name is missing",
        "line 7": "num_gpu is negative",
        "line 8": "deletion_time is before creation_time",
        "line 10": "invalid UTF-8",
    }
    job = (
        connect(store)
        .execute("SELECT gpu_type, status, start_time FROM jobs WHERE job_id='p7'")
        .fetchone()
    )
    assert job == ("V100M16|V100M32", "failed", None)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "file is empty"),
        ("a,b,c\n1,2,3\n", "unexpected header"),
    ],
)
def test_unreadable_files_are_input_errors(
    tmp_path: Path, store: Path, text: str, reason: str
) -> None:
    f = write(tmp_path / "openb_pod_list_default.csv", text)
    with pytest.raises(InputError, match=reason) as info:
        ingest(LOADERS["openb"], f, store)
    assert str(f) in str(info.value)


def test_missing_path_and_wrong_folder(tmp_path: Path, store: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        ingest(LOADERS["openb"], tmp_path / "nope", store)
    with pytest.raises(InputError, match=r"no openb_pod_list_default\.csv"):
        ingest(LOADERS["openb"], tmp_path, store)
