"""pai2020: integration tests (ingest into a real store).

The PAI 2020 loader on a hand-written fixture trace (every expected value below is
worked out by hand from the fixture lines, quoted in the comments), on the real machine
spec (checked against counts computed here with the csv module), under fuzzing, and on
the synthetic generator's output.
"""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import shutil
from collections import Counter
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import polars as pl
import pyarrow.parquet as pq
import pytest

from gpu_trace.errors import GpuTraceError, InputError
from gpu_trace.loaders import LOADERS, ingest
from gpu_trace.loaders.pai2020_files import SPECS
from gpu_trace.schemas import USAGE_METRICS
from gpu_trace.store.catalog import connect
from gpu_trace.store.parquet import dataset_path, read_table
from gpu_trace.synth.pai2020 import write as synth
from tests.conftest import ROOT, SAMPLES

FIXTURE = ROOT / "tests" / "fixtures" / "pai2020" / "basic"
SPEC_CSV = SAMPLES / "pai2020" / "pai_machine_spec.csv"
GIB = 2**30
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def at(seconds: float) -> dt.datetime:
    return EPOCH + dt.timedelta(seconds=seconds)


def frame(store: Path, table: str) -> pl.DataFrame:
    out = pl.from_arrow(read_table(store, table, "pai2020"))
    assert isinstance(out, pl.DataFrame)
    return out


def by(df: pl.DataFrame, key: str) -> dict[Any, dict[str, Any]]:
    return {r[key]: r for r in df.iter_rows(named=True)}


def quarantined(store: Path) -> dict[tuple[str, str], list[str]]:
    rows = connect(store).execute(
        "SELECT file, locator, reason FROM quarantine WHERE source='pai2020' ORDER BY ALL"
    )
    out: dict[tuple[str, str], list[str]] = {}
    for file, locator, reason in rows.fetchall():
        out.setdefault((file, locator), []).append(reason)
    return out


@pytest.fixture(scope="module")
def pai_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("pai") / "store"
    ingest(LOADERS["pai2020"], FIXTURE, store)
    return store


def test_every_file_reconciles(pai_store: Path) -> None:
    got = {
        (f, t): (r, w, q)
        for f, t, r, w, q in connect(pai_store)
        .execute(
            'SELECT file, "table", rows_read, rows_written, rows_quarantined FROM ingests '
            "WHERE source='pai2020'"
        )
        .fetchall()
    }
    assert got == {
        ("pai_machine_spec.csv", "machines"): (6, 4, 2),
        ("pai_machine_spec.csv", "capacity"): (1, 1, 0),
        ("pai_job_table.csv", "jobs"): (8, 5, 3),
        ("pai_task_table.csv", "tasks"): (9, 7, 2),
        ("pai_instance_table.csv", "placements"): (16, 10, 6),
        ("pai_group_tag_table.csv", "job_tags"): (6, 4, 2),
        # usage counts values: 4 sensor lines x 10 fields, 3 metric lines x 8 fields
        ("pai_sensor_table.csv", "usage"): (40, 29, 11),
        ("pai_machine_metric.csv", "usage"): (24, 16, 8),
    }


def test_quarantine_reasons_and_lines(pai_store: Path) -> None:
    q = quarantined(pai_store)
    assert q[("pai_job_table.csv", "line 1")] == ["duplicate job_name, superseded by line 6"]
    assert q[("pai_job_table.csv", "line 7")] == ["start_time 'abc' is not a valid float"]
    assert q[("pai_job_table.csv", "line 8")] == ["end_time is before start_time"]
    assert q[("pai_task_table.csv", "line 5")] == [
        "duplicate task (job_name, task_name), superseded by line 9"
    ]
    assert q[("pai_task_table.csv", "line 8")] == ["inst_num 1.5 is not a whole number"]
    # instances: the owners' dedup (sort by status, start, end; keep the last) and NaN names
    assert {k[1]: v for k, v in q.items() if k[0] == "pai_instance_table.csv"} == {
        "line 2": ["duplicate worker_name, superseded by line 3"],  # Failed < Terminated
        "line 4": ["duplicate worker_name, superseded by line 11"],  # identical: later wins
        "line 6": ["duplicate worker_name, superseded by line 12"],  # Failed < Running
        "line 7": ["worker_name is missing"],
        "line 13": ["expected 9 fields, found 2"],
        "line 14": ["duplicate worker_name, superseded by line 15"],  # empty start sorts last
    }
    assert q[("pai_group_tag_table.csv", "line 1")] == ["duplicate inst_id, superseded by line 5"]
    assert q[("pai_group_tag_table.csv", "line 6")] == ["inst_id is missing"]
    assert q[("pai_machine_spec.csv", "line 1")] == ["duplicate machine, superseded by line 5"]
    assert q[("pai_machine_spec.csv", "line 6")] == ["cap_gpu 'x' is not a valid float"]
    # usage: one bad value costs one row; a bad line costs each of its values
    assert q[("pai_sensor_table.csv", "line 3")] == ["cpu_usage 'abc' is not a valid float"]
    assert sorted(q[("pai_sensor_table.csv", "line 4")]) == sorted(
        f"{f}: expected 16 fields, found 3" for f in SPECS["sensor"].names[6:]
    )
    assert sorted(q[("pai_machine_metric.csv", "line 3")]) == sorted(
        f"{f}: end_time is before start_time" for f in SPECS["machine_metric"].names[4:]
    )


def test_jobs(pai_store: Path) -> None:
    jobs = by(frame(pai_store, "jobs"), "job_id")
    assert set(jobs) == {"j1", "j2", "j3", "j4", "j5"}
    j1 = jobs["j1"]
    # job line 6 (line 1 superseded): submitted 4550879.0, ended 4551500.0; tasks start at
    # min(4550890, 4550900, 4550895); plans: ps 1 x (600 %, 29.296875 GB, 0 %), worker
    # 2 x (400 %, 15 GB, 50 %), evaluator 1 x (200 %, 2 GB, 100 %)
    assert j1["submit_time"] == at(4550879)
    assert j1["start_time"] == at(4550890)
    assert j1["end_time"] == at(4551500)
    assert (j1["queue_s"], j1["run_s"]) == (11.0, 610.0)
    assert (j1["gpus"], j1["gpus_raw"], j1["gpus_raw_unit"]) == (2.0, 200.0, "percent")
    assert j1["cpus"] == 16.0  # (600 + 2 x 400 + 200) / 100
    assert j1["mem_bytes"] == 65_817_018_368  # (29.296875 + 30 + 2) GB = 61 19/64 x 2^30
    assert j1["gpu_type"] == "T4|V100"
    assert j1["nodes"] == 3  # kept instances on m1, m2, m2, m3
    assert (j1["vc"], j1["user"]) == ("g1b", "u1")  # group tag line 5 replaces line 1
    assert (j1["status"], j1["raw_status"]) == ("completed", "Terminated")
    assert (j1["attempts"], j1["time_basis"], j1["source_tz"]) == (
        1,
        "hidden_epoch",
        "Asia/Shanghai",
    )

    j2 = jobs["j2"]  # a GPU-sharing job: one instance at plan_gpu 50
    assert (j2["gpus"], j2["cpus"], j2["mem_bytes"]) == (0.5, 6.0, 30_000 * 2**20)
    assert (j2["queue_s"], j2["run_s"]) == (10.0, 190.0)
    assert (j2["vc"], j2["status"], j2["gpu_type"], j2["nodes"]) == ("u2", "failed", "MISC", 1)
    # submission 494,319 s is the trace's first (issue #262): 1970-01-07 01:18:39 in UTC+8
    local = j2["submit_time"].astimezone(ZoneInfo("Asia/Shanghai"))
    assert local.replace(tzinfo=None) == dt.datetime(1970, 1, 7, 1, 18, 39)

    j3 = jobs["j3"]  # running: end_time 0.0 -> end unknown, start kept
    assert (j3["submit_time"], j3["start_time"], j3["end_time"]) == (at(300), at(310), None)
    assert (j3["queue_s"], j3["run_s"], j3["gpus"]) == (10.0, None, 0.3)  # task line 9
    assert (j3["status"], j3["vc"]) == ("running", "g2")

    j4 = jobs["j4"]  # waiting: 0.0 times -> null; plan_gpu empty -> gpus null
    assert (j4["submit_time"], j4["start_time"], j4["end_time"]) == (None, None, None)
    assert (j4["gpus"], j4["gpus_raw_unit"], j4["cpus"], j4["mem_bytes"]) == (
        None,
        None,
        1.0,
        4 * GIB,
    )
    assert (j4["status"], j4["nodes"], j4["vc"]) == ("pending", None, "u3")

    j5 = jobs["j5"]  # no task: gpus null, start from its instance (520), empty end
    assert (j5["gpus"], j5["cpus"], j5["mem_bytes"], j5["gpu_type"]) == (None, None, None, None)
    assert (j5["start_time"], j5["queue_s"], j5["end_time"], j5["vc"]) == (
        at(520),
        20.0,
        None,
        "u4",
    )


def test_tasks(pai_store: Path) -> None:
    tasks = {(r["job_id"], r["task"]): r for r in frame(pai_store, "tasks").iter_rows(named=True)}
    assert set(tasks) == {
        ("j1", "ps"),
        ("j1", "worker"),
        ("j1", "evaluator"),
        ("j2", "tensorflow"),
        ("j3", "worker"),
        ("j4", "worker"),
        ("j8", "worker"),  # its job is not in the job table: kept
    }
    w = tasks[("j1", "worker")]  # j1,worker,2.0,Terminated,4550900.0,4551410.0,400.0,15.0,50.0,T4
    assert (w["instances"], w["start_time"], w["end_time"], w["run_s"]) == (
        2,
        at(4550900),
        at(4551410),
        510.0,
    )
    assert (w["gpus"], w["gpus_per_instance"], w["cpus"], w["cpus_per_instance"]) == (
        1.0,
        0.5,
        8.0,
        4.0,
    )
    assert (w["mem_bytes"], w["mem_bytes_per_instance"]) == (30 * GIB, 15 * GIB)
    assert (w["plan_gpu_pct"], w["plan_cpu_pct"], w["plan_mem_gb"], w["gpu_type"]) == (
        50.0,
        400.0,
        15.0,
        "T4",
    )
    ps = tasks[("j1", "ps")]
    assert (ps["gpus"], ps["gpu_type"], ps["mem_bytes"]) == (0.0, None, 30_000 * 2**20)
    run = tasks[("j3", "worker")]  # line 9 replaces line 5; end 0.0 -> unknown
    assert (run["plan_gpu_pct"], run["end_time"], run["run_s"], run["status"]) == (
        30.0,
        None,
        None,
        "running",
    )
    assert tasks[("j4", "worker")]["gpus"] is None


def test_placements(pai_store: Path) -> None:
    rows = frame(pai_store, "placements")
    p = by(rows, "instance")
    assert sorted(p) == sorted(["w1", "w2", "w3", "w4", "w5", "w6", "w7", "w8", "w9", "w10"])
    assert rows.get_column("attempt").unique().to_list() == [0]
    # w2: line 3 (Terminated) wins over line 2 (Failed)
    assert (p["w2"]["start_time"], p["w2"]["end_time"], p["w2"]["machine_id"]) == (
        at(4550960),
        at(4551410),
        "m2",
    )
    assert (p["w2"]["task"], p["w2"]["gpu_count"], p["w2"]["status"]) == (
        "worker",
        0.5,
        "completed",
    )
    # w5: line 12 (Running, end 0.0) wins over line 6 (Failed)
    assert (p["w5"]["status"], p["w5"]["start_time"], p["w5"]["end_time"]) == (
        "running",
        at(494345),
        None,
    )
    # w9: line 15 with an empty start wins (NaN sorts last); its end is kept
    assert (p["w9"]["start_time"], p["w9"]["end_time"], p["w9"]["gpu_count"]) == (
        None,
        at(2000),
        1.0,
    )
    # w7: waiting, 0.0 times and no machine
    assert (
        p["w7"]["start_time"],
        p["w7"]["end_time"],
        p["w7"]["machine_id"],
        p["w7"]["status"],
    ) == (
        None,
        None,
        None,
        "pending",
    )
    # w8: job j9 unknown, kept; no task -> no GPU count
    assert (p["w8"]["job_id"], p["w8"]["gpu_count"]) == ("j9", None)
    assert p["w1"]["gpu_count"] == 0.0 and p["w4"]["gpu_count"] == 1.0


def test_job_tags(pai_store: Path) -> None:
    tags = by(frame(pai_store, "job_tags"), "job_key")
    assert set(tags) == {"i1", "i2", "i3", "i9"}
    assert (tags["i1"]["job_id"], tags["i1"]["group_tag"], tags["i1"]["workload"]) == (
        "j1",
        "g1b",
        None,
    )
    assert tags["i1"]["gpu_type_request"] is None  # line 5 (empty spec) replaced line 1 (V100)
    assert (tags["i9"]["job_id"], tags["i9"]["workload"], tags["i9"]["group_tag"]) == (
        None,
        "ctr",
        "g9",
    )
    assert (tags["i2"]["group_tag"], tags["i2"]["user"]) == (None, "u2")


def test_usage(pai_store: Path) -> None:
    usage = frame(pai_store, "usage")
    sensor = {
        (r["instance"], r["raw_field"]): r
        for r in usage.filter(pl.col("dataset") == "sensor").iter_rows(named=True)
    }
    # line 1: j1,worker,w2,i1,m2,/dev/nvidia0,140.5,16.0625,1.5,2.3935546875,1.25,2.5,...
    expect = {
        "cpu_usage": ("cpu_used_cores", "mean", 1.405, "cpu"),
        "gpu_wrk_util": ("gpu_used_gpus", "mean", 0.160625, "gpu"),
        "avg_mem": ("mem_used_bytes", "mean", 1.5 * GIB, "bytes"),
        "max_mem": ("mem_used_bytes", "max", 2451 * 2**20, "bytes"),  # 2.3935546875 GB
        "avg_gpu_wrk_mem": ("gpu_mem_used_bytes", "mean", 1.25 * GIB, "bytes"),
        "max_gpu_wrk_mem": ("gpu_mem_used_bytes", "max", 2.5 * GIB, "bytes"),
        "read": ("net_rx_bytes", "mean", 21271328.5, "bytes"),
        "write": ("net_tx_bytes", "mean", 16376189.75, "bytes"),
        "read_count": ("net_rx_ops", "mean", 2922.5, "count"),
        "write_count": ("net_tx_ops", "mean", 3419.75, "count"),
    }
    for field, (metric, stat, value, unit) in expect.items():
        r = sensor[("w2", field)]
        assert (r["metric"], r["stat"], r["value"], r["unit"]) == (metric, stat, value, unit)
        assert (r["job_id"], r["task"], r["machine_id"], r["device"], r["scope"]) == (
            "j1",
            "worker",
            "m2",
            "/dev/nvidia0",
            "instance",
        )
        assert r["start_time"] is None
    # line 2: empty GPU fields are written as null values; line 3 keeps 9 of its 10
    assert sensor[("w5", "gpu_wrk_util")]["value"] is None
    assert sensor[("w5", "cpu_usage")]["value"] == 6.0
    assert ("w1", "cpu_usage") not in sensor and sensor[("w1", "avg_mem")]["value"] == GIB
    metric = {
        (r["instance"], r["raw_field"]): r
        for r in usage.filter(pl.col("dataset") == "machine_metric").iter_rows(named=True)
    }
    m = metric[("w1", "machine_cpu_iowait")]
    assert (m["metric"], m["value"], m["unit"], m["scope"]) == (
        "cpu_iowait_pct",
        0.0028667003281999497,
        "pct",
        "machine",
    )
    assert (m["start_time"], m["end_time"], m["machine_id"], m["job_id"]) == (
        at(4550890),
        at(4551400),
        "m1",
        None,
    )
    g = metric[("w6", "machine_gpu")]  # above 100: kept as written
    assert (g["metric"], g["value"], g["end_time"]) == ("gpu_util_sum_pct", 150.5, None)
    assert {r["metric"] for r in metric.values()} | {r["metric"] for r in sensor.values()} <= set(
        USAGE_METRICS
    )


def test_machines_and_capacity(pai_store: Path) -> None:
    machines = by(
        frame(pai_store, "machines").filter(pl.col("dataset") == "machine_spec"), "machine_id"
    )
    assert set(machines) == {"m1", "m2", "m3", "m4"}
    m2 = machines["m2"]  # m2,V100M32,96,384,8
    assert (m2["gpus"], m2["gpu_type"], m2["cpus"], m2["mem_bytes"], m2["gpu_mem_bytes"]) == (
        8,
        "V100M32",
        96.0,
        384 * GIB,
        32 * GIB,
    )
    assert machines["m4"]["gpu_mem_bytes"] is None  # P100: 12 or 16 GiB, not guessed
    assert (machines["m3"]["gpus"], machines["m3"]["gpu_type"]) == (0, "CPU")
    cap = frame(pai_store, "capacity").row(0, named=True)
    assert (cap["gpus"], cap["basis"], cap["time"], cap["vc"], cap["period_s"]) == (
        12,
        "machine_list",
        EPOCH,
        None,
        None,
    )


def test_metadata_records_conventions(pai_store: Path) -> None:
    meta = pq.read_metadata(dataset_path(pai_store, "jobs", "pai2020", "trace")).metadata
    kv = {k.decode(): v.decode() for k, v in meta.items()}
    assert kv["gpu_trace.time_basis"] == "hidden_epoch"
    assert kv["gpu_trace.source_tz"] == "Asia/Shanghai"
    assert "start_time 0 nulls start and end" in kv["gpu_trace.time_convention"]
    assert kv["gpu_trace.columns_from"] == "headers/pai_job_table.header"
    assert kv["gpu_trace.source_file"] == "pai_job_table.csv"


def test_real_machine_spec(store: Path) -> None:
    """The complete real pai_machine_spec.csv, against counts made here with csv."""
    with SPEC_CSV.open(newline="") as fh:
        rows = list(csv.reader(fh))
    by_type = Counter(r[1] for r in rows)
    gpus_by_type = {t: {int(r[4]) for r in rows if r[1] == t} for t in by_type}
    assert (len(rows), sum(int(r[4]) for r in rows)) == (1897, 6742)
    assert by_type == {"P100": 798, "T4": 497, "MISC": 280, "V100M32": 135, "V100": 104, "CPU": 83}
    assert gpus_by_type == {
        "P100": {2},
        "T4": {2},
        "MISC": {8},
        "V100M32": {8},
        "V100": {8},
        "CPU": {0},
    }

    report = ingest(LOADERS["pai2020"], SAMPLES / "pai2020", store)
    assert report.totals == (1898, 1898, 0)  # 1,897 machines + 1 capacity row
    con = connect(store)
    got = dict(
        con.execute(
            "SELECT gpu_type, count(*) FROM machines WHERE source='pai2020' GROUP BY 1"
        ).fetchall()
    )
    assert got == dict(by_type)
    per_type = dict(
        con.execute(
            "SELECT gpu_type, sum(gpus) FROM machines WHERE source='pai2020' GROUP BY 1"
        ).fetchall()
    )
    assert per_type == {t: n * next(iter(gpus_by_type[t])) for t, n in by_type.items()}
    assert con.execute("SELECT gpus FROM capacity WHERE source='pai2020'").fetchone() == (6742,)
    mem = Counter((r[1], int(r[3]) * GIB, float(r[2])) for r in rows)
    got_mem = con.execute(
        "SELECT gpu_type, mem_bytes, cpus, count(*) FROM machines WHERE source='pai2020' "
        "GROUP BY ALL"
    ).fetchall()
    assert {(t, m, c): n for t, m, c, n in got_mem} == dict(mem)  # V100: 59 x 512, 45 x 384
    sha = hashlib.sha256(SPEC_CSV.read_bytes()).hexdigest()
    assert sha.startswith("251e9e33") and sha.endswith("51439")
    shas = {
        r[0]
        for r in con.execute("SELECT file_sha256 FROM ingests WHERE source='pai2020'").fetchall()
    }
    assert shas == {sha}


def copy_fixture(tmp_path: Path, keep: tuple[str, ...] | None = None, headers: bool = True) -> Path:
    folder = tmp_path / "pai"
    folder.mkdir()
    for spec in SPECS.values():
        if keep is None or spec.short in keep:
            shutil.copy(FIXTURE / spec.csv, folder / spec.csv)
            if headers:
                shutil.copy(FIXTURE / "headers" / spec.header, folder / spec.header)
    return folder


def test_job_table_alone(tmp_path: Path, store: Path) -> None:
    folder = copy_fixture(tmp_path, keep=("job",), headers=False)
    report = ingest(LOADERS["pai2020"], folder, store)
    assert [(r.table, r.rows_read, r.rows_written) for r in report.lines] == [("jobs", 8, 5)]
    jobs = by(frame(store, "jobs"), "job_id")
    assert jobs["j1"]["gpus"] is None and jobs["j1"]["start_time"] is None
    assert jobs["j1"]["vc"] == "u1" and jobs["j1"]["submit_time"] == at(4550879)
    kv = pq.read_metadata(dataset_path(store, "jobs", "pai2020", "trace")).metadata
    notes = {k.decode(): v.decode() for k, v in kv.items()}
    assert notes["gpu_trace.columns_from"] == "built-in column list (no .header file found)"
    assert "no pai_task_table.csv input" in notes["gpu_trace.requests"]


def test_instances_without_tasks(tmp_path: Path, store: Path) -> None:
    folder = copy_fixture(tmp_path, keep=("instance",))
    ingest(LOADERS["pai2020"], folder / "pai_instance_table.csv", store)
    assert frame(store, "placements").get_column("gpu_count").null_count() == 10


def test_tables_option_and_single_file(tmp_path: Path, store: Path) -> None:
    report = ingest(LOADERS["pai2020"], FIXTURE, store, tables="task,machine_spec")
    assert {r.table for r in report.lines} == {"tasks", "machines", "capacity"}
    with pytest.raises(GpuTraceError, match="unknown PAI 2020 table nope"):
        ingest(LOADERS["pai2020"], FIXTURE, store, tables="job,nope")
    with pytest.raises(InputError, match="no PAI 2020 input found"):
        ingest(LOADERS["pai2020"], tmp_path, store)
    other = tmp_path / "pai_jobs.csv"
    other.write_text("x\n")
    with pytest.raises(InputError, match="not a PAI 2020 file") as info:
        ingest(LOADERS["pai2020"], other, store)
    assert str(other) in str(info.value)


def test_header_mismatch_names_the_header_file(tmp_path: Path, store: Path) -> None:
    folder = copy_fixture(tmp_path, keep=("task",))
    bad = folder / "pai_task_table.header"
    bad.write_text(
        "job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_gpu,plan_mem,gpu_type\n"
    )
    with pytest.raises(InputError, match="differ from the documented") as info:
        ingest(LOADERS["pai2020"], folder, store)
    assert str(bad) in str(info.value)
    bad.write_text("")
    with pytest.raises(InputError, match="file is empty") as info:
        ingest(LOADERS["pai2020"], folder, store)
    assert str(bad) in str(info.value)


def test_csv_with_its_own_header_line_and_crlf(tmp_path: Path, store: Path) -> None:
    folder = tmp_path / "pai"
    folder.mkdir()
    body = (FIXTURE / "pai_job_table.csv").read_text().replace("\n", "\r\n")
    (folder / "pai_job_table.csv").write_text(
        "job_name,inst_id,user,status,start_time,end_time\r\n" + body, newline=""
    )
    report = ingest(LOADERS["pai2020"], folder, store)
    assert report.totals == (8, 5, 3)
    assert quarantined(store)[("pai_job_table.csv", "line 2")] == [
        "duplicate job_name, superseded by line 7"
    ]
    assert by(frame(store, "jobs"), "job_id")["j1"]["end_time"] == at(4551500)


def test_empty_csv_is_an_input_error(tmp_path: Path, store: Path) -> None:
    folder = copy_fixture(tmp_path, keep=("sensor",))
    (folder / "pai_sensor_table.csv").write_bytes(b"")
    with pytest.raises(InputError, match="file is empty") as info:
        ingest(LOADERS["pai2020"], folder, store)
    assert "pai_sensor_table.csv" in str(info.value)


def test_reingest_is_idempotent(tmp_path: Path) -> None:
    store = tmp_path / "store"
    ingest(LOADERS["pai2020"], FIXTURE, store)
    files = {t: dataset_path(store, t, "pai2020", "trace") for t in ("jobs", "tasks", "placements")}
    before = {t: p.read_bytes() for t, p in files.items()}
    ingest(LOADERS["pai2020"], FIXTURE, store)
    assert {t: p.read_bytes() for t, p in files.items()} == before


GOOD_LINE = {
    "job": "j1,i1,u1,Terminated,10.0,20.0",
    "task": "j1,worker,2.0,Terminated,10.0,20.0,600.0,29.296875,50.0,T4",
    "instance": "j1,worker,n1,w1,i1,Terminated,10.0,20.0,m1",
    "sensor": "j1,worker,w1,i1,m1,/dev/nvidia0,1.0,2.0,3.0,4.0,5.0,6.0,7.0,8.0,9.0,10.0",
    "group_tag": "i1,u1,T4,g1,bert",
    "machine_spec": "m1,T4,96,512,2",
    "machine_metric": "w1,m1,10,20,1.0,2.0,3.0,4.0,5.0,6.0,7.0,8.0",
}
NUMERIC = {
    "job": [4, 5],
    "task": [2, 4, 5, 6, 7, 8],
    "instance": [6, 7],
    "sensor": list(range(6, 16)),
    "group_tag": [],
    "machine_spec": [2, 3, 4],
    "machine_metric": list(range(2, 12)),
}


@pytest.mark.parametrize("table", list(SPECS))
def test_extreme_numbers_are_quarantined(tmp_path: Path, table: str) -> None:
    """Every numeric field of every table set to values that would overflow a cast or
    poison a sum: each such line (or value, for usage) is quarantined with a reason."""
    spec = SPECS[table]
    lines = [GOOD_LINE[table]]
    for i in NUMERIC[table]:
        for value in ("1e300", "-1.0", "inf", "nan", "1e12", "2.5e9"):
            fields = GOOD_LINE[table].split(",")
            fields[i] = value
            fields[0] += f"_{len(lines)}"  # distinct keys: no line supersedes another
            if table == "instance":
                fields[3] += f"_{len(lines)}"
            lines.append(",".join(fields))
    f = tmp_path / spec.csv
    f.write_text("\n".join(lines) + "\n")
    report = ingest(LOADERS["pai2020"], f, tmp_path / "store")
    first = report.lines[0]
    per_record = {"sensor": 10, "machine_metric": 8}.get(table, 1)
    assert first.rows_read == len(lines) * per_record
    assert first.rows_read == first.rows_written + first.rows_quarantined
    reasons = quarantined(tmp_path / "store")
    if table == "group_tag":
        return
    assert (f.name, "line 1") not in reasons  # the good line loads
    for n, line in enumerate(lines[1:], start=2):
        if {"1e300", "-1.0", "inf", "nan"} & set(line.split(",")):
            assert (f.name, f"line {n}") in reasons, line
    text = " ".join(r for rs in reasons.values() for r in rs)
    assert "is not a finite number" in text and "is negative" in text and "out of range" in text


def test_same_tables_as_the_owners_pandas_recipe(tmp_path: Path) -> None:
    """On a synthetic trace with the owners' quirks (duplicate and nameless workers, 0
    times), the loader's jobs, tasks and placements equal what the owners' utils.py
    recipe computes with pandas (bench/baseline_pai2020.py: sort + drop_duplicates
    keep='last', dropna, merges, groupby)."""
    from bench.baseline_pai2020 import build

    synth(tmp_path / "raw", jobs=1500, seed=5)
    store = tmp_path / "store"
    ingest(LOADERS["pai2020"], tmp_path / "raw", store, tables="job,task,instance")
    build(tmp_path / "raw", tmp_path / "pandas", vectorized=True)

    def same(ours: pl.DataFrame, theirs: pl.DataFrame, keys: list[str], cols: list[str]) -> None:
        assert ours.height == theirs.height
        joined = ours.join(theirs, on=keys, how="full", suffix="_pd", nulls_equal=True)
        assert joined.height == ours.height
        for c in cols:
            a, b = pl.col(c), pl.col(c + "_pd")
            if ours.schema[c] == pl.Datetime("us", "UTC"):
                b = b.dt.convert_time_zone("UTC").dt.cast_time_unit("us")
            elif ours.schema[c].is_numeric():
                a, b = a.cast(pl.Float64), b.cast(pl.Float64)
            assert joined.filter(a.ne_missing(b)).height == 0, c

    same(
        frame(store, "placements"),
        pl.read_parquet(tmp_path / "pandas" / "placements.parquet"),
        ["instance"],
        ["job_id", "task", "start_time", "end_time", "machine_id", "gpu_count", "status"],
    )
    same(
        frame(store, "tasks"),
        pl.read_parquet(tmp_path / "pandas" / "tasks.parquet"),
        ["job_id", "task"],
        ["instances", "start_time", "end_time", "run_s", "gpus", "cpus", "mem_bytes", "gpu_type"],
    )
    same(
        frame(store, "jobs"),
        pl.read_parquet(tmp_path / "pandas" / "jobs.parquet"),
        ["job_id"],
        [
            *("submit_time", "start_time", "end_time", "queue_s", "run_s", "gpus", "cpus"),
            *("mem_bytes", "gpu_type", "nodes", "status", "raw_status"),
        ],
    )
