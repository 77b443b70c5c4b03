"""philly: integration tests (ingest into a real store).

The Philly loader: a hand-written ``trace-data/`` fixture with hand-computed values,
the real machine list (checked with stdlib csv), the real marwage job rows converted
back to the raw job-log format (checked with stdlib json + zoneinfo), fuzzing of both
parsers, and the synthetic generator.
"""

from __future__ import annotations

import csv
import hashlib
import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import polars as pl
import pyarrow.parquet as pq
import pytest

from gpu_trace.errors import InputError
from gpu_trace.loaders import LOADERS, ingest
from gpu_trace.loaders.base import IngestReport
from gpu_trace.store.catalog import connect
from gpu_trace.store.parquet import dataset_path
from tests.conftest import SAMPLES
from tests.philly_common import FIXTURE, frame

MACHINE_LIST = SAMPLES / "philly" / "cluster_machine_list"
MARWAGE = SAMPLES / "processed" / "marwage-philly" / "jobs.json"
LA = ZoneInfo("America/Los_Angeles")


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.fixture(scope="module")
def fixture_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, IngestReport]:
    store = tmp_path_factory.mktemp("philly") / "store"
    return store, ingest(LOADERS["philly"], FIXTURE, store)


@pytest.fixture(scope="module")
def fixture_store(fixture_run: tuple[Path, IngestReport]) -> Path:
    return fixture_run[0]


# --- the hand-written fixture ---------------------------------------------------------

# job_id suffix -> (submit, start, end, queue_s, run_s, gpus, nodes, attempts, status).
# Local wall clock + 7 h (PDT, until 2017-11-05 01:59 PDT) or + 8 h (PST) = UTC.
EXPECTED_JOBS = {
    # doc example: 01:11:39 PDT submit, 01:12:09 first start, 2017-10-09 06:53:12 last end
    "1506638472019_14199": (
        "2017-10-07 08:11:39", "2017-10-07 08:12:09", "2017-10-09 13:53:12",
        30.0, 193_263.0, 8.0, 1, 2, "completed",
    ),
    # two machines x 8 GPUs in the first attempt
    "1506638472019_15001": (
        "2017-10-10 17:00:00", "2017-10-10 17:05:00", "2017-10-10 19:05:00",
        300.0, 7200.0, 16.0, 2, 1, "cancelled",
    ),
    # empty attempts: kept, nothing but the submit time
    "1502000000000_00412": ("2017-09-01 19:00:00", None, None, None, None, None, None, 0, "failed"),
    # still running: last end "None" -> end/run null, status as logged (Pass)
    "1511916184019_09001": (
        "2017-12-22 16:00:00", "2017-12-22 16:03:22", None, 202.0, None, 1.0, 1, 1, "completed",
    ),
    # first attempt start "None": start/queue/run null, end = last attempt's 10:00 PST
    "1511916184019_00077": (
        "2017-11-20 17:00:00", None, "2017-11-20 18:00:00", None, None, 1.0, 1, 2, "failed",
    ),
    # ambiguous hour, inferred: 01:50 01:55 | 01:10 (clock went back -> PST) 01:20 | 03:00
    "1508364558011_31001": (
        "2017-11-05 08:50:00", "2017-11-05 08:55:00", "2017-11-05 11:00:00",
        300.0, 7500.0, 1.0, 1, 2, "completed",
    ),
    # ambiguous hour, no evidence: 01:30 and 01:40 default to PDT (earliest)
    "1508364558011_31002": (
        "2017-11-05 08:30:00", "2017-11-05 08:40:00", "2017-11-05 13:00:00",
        600.0, 15_600.0, 2.0, 1, 1, "cancelled",
    ),
    # three attempts on two machines; run = 11:00 - 10:04 = 3360 s (gaps included)
    "1502000000000_00001": (
        "2017-08-07 17:03:01", "2017-08-07 17:04:00", "2017-08-07 18:00:00",
        59.0, 3360.0, 2.0, 1, 3, "completed",
    ),
    "1508364558011_00500": (
        "2017-10-15 21:00:00", "2017-10-15 21:00:05", "2017-10-15 22:00:05",
        5.0, 3600.0, 1.0, 1, 1, "completed",
    ),
    "1511916184019_00100": (
        "2017-12-01 08:00:00", "2017-12-01 08:01:00", "2017-12-01 08:02:00",
        60.0, 60.0, 8.0, 1, 1, "cancelled",
    ),
}  # fmt: skip


def test_fixture_jobs_hand_computed(fixture_store: Path) -> None:
    jobs = frame(fixture_store, "jobs")
    got = {
        r["job_id"].removeprefix("application_"): (
            r["submit_time"],
            r["start_time"],
            r["end_time"],
            r["queue_s"],
            r["run_s"],
            r["gpus"],
            r["nodes"],
            r["attempts"],
            r["status"],
        )
        for r in jobs.iter_rows(named=True)
    }
    want = {
        k: (utc(v[0]), *(utc(t) if t else None for t in v[1:3]), *v[3:])
        for k, v in EXPECTED_JOBS.items()
    }
    assert got == want
    assert set(jobs["cluster"]) == {"philly"} and set(jobs["dataset"]) == {"philly"}
    assert set(jobs["source_tz"]) == {"America/Los_Angeles"}
    assert set(jobs["time_basis"]) == {"absolute"}
    assert jobs.filter(pl.col("gpus").is_not_null())["gpus_raw_unit"].unique().to_list() == [
        "gpu_ids"
    ]
    assert (jobs["gpus_raw"].fill_null(-1) == jobs["gpus"].fill_null(-1)).all()
    raw = dict(zip(jobs["job_id"], jobs["raw_status"], strict=True))
    assert raw["application_1506638472019_15001"] == "Killed"
    assert raw["application_1511916184019_09001"] == "Pass"
    row = jobs.filter(pl.col("job_id") == "application_1506638472019_14199").row(0, named=True)
    assert (row["user"], row["vc"]) == ("ce2f4c", "ee9e8c")


def test_fixture_placements(fixture_store: Path) -> None:
    p = frame(fixture_store, "placements")
    assert p.height == 15  # 1+1 (14199) + 2 (15001) + 1 + 2 + 2 + 1 + 3 + 1 + 1 (good jobs)
    multi = p.filter(pl.col("job_id") == "application_1506638472019_15001")
    assert multi.select("attempt", "machine_id", "gpu_count").rows() == [
        (0, "m1", 8.0),
        (0, "m2", 8.0),
    ]
    assert multi["gpu_indices"].to_list() == [list(range(8))] * 2
    dst = p.filter(pl.col("job_id") == "application_1508364558011_31001").sort("attempt")
    assert dst.select("start_time", "end_time").rows() == [
        (utc("2017-11-05 08:55:00"), utc("2017-11-05 09:10:00")),  # 01:10 is PST
        (utc("2017-11-05 09:20:00"), utc("2017-11-05 11:00:00")),
    ]
    retries = p.filter(pl.col("job_id") == "application_1502000000000_00001").sort("attempt")
    assert retries.select("attempt", "machine_id", "gpu_indices").rows() == [
        (0, "m5", [0, 1]),
        (1, "m6", [2, 3]),
        (2, "m5", [0, 1]),
    ]
    none_start = p.filter(pl.col("job_id") == "application_1511916184019_00077").sort("attempt")
    assert none_start["start_time"].to_list() == [None, utc("2017-11-20 17:40:00")]
    assert none_start["end_time"].to_list() == [
        utc("2017-11-20 17:30:00"),
        utc("2017-11-20 18:00:00"),
    ]
    assert p.filter(pl.col("job_id") == "application_1511916184019_09001")[
        "end_time"
    ].to_list() == [None]
    assert {"m98", "m99"}.isdisjoint(p["machine_id"])  # only from quarantined records


def test_fixture_quarantine_is_exact(fixture_store: Path) -> None:
    rows = (
        connect(fixture_store)
        .execute(
            "SELECT file, \"table\", locator, reason, raw FROM quarantine WHERE source = 'philly'"
        )
        .fetchall()
    )
    q = {(f, loc): (t, reason) for f, t, loc, reason, _ in rows}
    assert q == {
        ("cluster_job_log", "record 4"): ("jobs", "jobid is missing"),
        ("cluster_job_log", "record 9"): (
            "jobs",
            "submitted_time '2017-10-32 00:00:00' is not a valid time (YYYY-MM-DD HH:MM:SS)",
        ),
        ("cluster_job_log", "record 11"): (
            "jobs",
            "attempts[0]: gpu id 'GPU0' is not gpu<N> (N < 10000)",
        ),
        ("cluster_job_log", "record 13"): (
            "jobs",
            "submitted_time '2017-03-12 02:30:00' does not exist in America/Los_Angeles "
            "(skipped by the spring-forward DST change)",
        ),
        ("cluster_machine_list", "line 10"): ("machines", "number of GPUs 'x' is not a valid int"),
        ("cluster_gpu_util", "line 3"): ("gpu_samples", "expected 10 fields, found 5"),
        ("cluster_gpu_util", "line 4"): ("gpu_samples", "gpu0_util 'abc' is not a valid float"),
        ("cluster_gpu_util", "line 6"): (
            "gpu_samples",
            "time '2017-10-03 00:12:00' is not 'YYYY-MM-DD HH:MM:SS PST|PDT'",
        ),
        ("cluster_gpu_util", "line 11"): (
            "gpu_samples",
            "time '2017-12-01 00:00:00 PDT': PDT is not in effect in America/Los_Angeles then",
        ),
        ("cluster_cpu_util", "line 5"): ("host_samples", "cpu_util is negative"),
        ("cluster_mem_util", "line 3"): (
            "host_samples",
            "mem_total is 0 (no memory reported; the notebook skips these rows)",
        ),
    }
    raw = {loc: r for f, _, loc, _, r in rows if f == "cluster_job_log"}
    record4 = json.loads(raw["record 4"])  # the raw text is the record's own JSON
    assert record4 == {
        "status": "Pass",
        "vc": "0e4a51",
        "attempts": [],
        "submitted_time": "2017-09-01 12:00:00",
        "user": "0a1b2c",
    }
    assert raw["record 11"].startswith('{"status": "Failed", "vc": "e13805"')


def test_fixture_late_rejects_keep_their_whole_text(fixture_store: Path) -> None:
    """Records rejected after decoding (a bad time, a bad gpu id, a non-existent local
    time) are quarantined with the element's whole text, as records the decoder
    rejects are: each raw text parses back to the array element (stdlib json)."""
    elements = json.loads((FIXTURE / "cluster_job_log").read_text())
    raw = dict(
        connect(fixture_store)
        .execute("SELECT locator, raw FROM quarantine WHERE file = 'cluster_job_log'")
        .fetchall()
    )
    assert set(raw) == {"record 4", "record 9", "record 11", "record 13"}
    for locator, text in raw.items():
        assert json.loads(text) == elements[int(locator.split()[1]) - 1]


def test_fixture_reconciles_per_file(fixture_run: tuple[Path, IngestReport]) -> None:
    store, report = fixture_run
    lines = {(r.file, r.table, r.dataset): r for r in report.lines}
    jobs = lines[("cluster_job_log", "jobs", "philly")]
    records = len(json.loads((FIXTURE / "cluster_job_log").read_text()))
    assert (jobs.rows_read, jobs.rows_written, jobs.rows_quarantined) == (records, 10, 4)
    # GPU util: 16 non-NA values in the 6 good rows (8 + 1 + 4 + 2 + 1 + 0) + 4 bad rows.
    gpu = lines[("cluster_gpu_util", "gpu_samples", "gpu_util")]
    assert (gpu.rows_read, gpu.rows_written, gpu.rows_quarantined) == (20, 16, 4)
    mem = lines[("cluster_mem_util", "host_samples", "mem_util")]
    assert (mem.rows_read, mem.rows_written, mem.rows_quarantined) == (4, 3, 1)
    for r in report.lines:
        assert r.rows_read == r.rows_written + r.rows_quarantined
    sha = hashlib.sha256((FIXTURE / "cluster_job_log").read_bytes()).hexdigest()
    assert connect(store).execute(
        "SELECT file_sha256 FROM ingests WHERE source='philly' AND \"table\"='jobs'"
    ).fetchone() == (sha,)
    meta = pq.read_metadata(dataset_path(store, "gpu_samples", "philly", "gpu_util")).metadata
    assert meta[b"gpu_trace.file_rows"] == b"10"
    assert meta[b"gpu_trace.rows_with_samples"] == b"5"
    assert meta[b"gpu_trace.rows_all_na"] == b"1"
    assert meta[b"gpu_trace.rows_quarantined"] == b"4"


def test_fixture_dst_rule_is_recorded(fixture_store: Path) -> None:
    meta = pq.read_metadata(dataset_path(fixture_store, "jobs", "philly", "philly")).metadata
    # 31001: submit, start0, end0, start1 are in 01:00-01:59 on 2017-11-05; 31002: 2 more.
    assert meta[b"gpu_trace.dst_ambiguous_times"] == b"6"
    assert meta[b"gpu_trace.dst_ambiguous_inferred_pst"] == b"2"
    assert meta[b"gpu_trace.dst_ambiguous_defaulted_pdt"] == b"4"
    assert meta[b"gpu_trace.source_tz"] == b"America/Los_Angeles"


def test_utc_does_not_depend_on_the_span_of_the_log(fixture_store: Path, tmp_path: Path) -> None:
    """The fixture's jobs plus a 1990 job (a log spanning 27 years) convert to the same
    UTC instants, with the same DST bookkeeping, as the fixture alone; the 1990 times
    follow the zone's 1990 rules (tz database via zoneinfo: PDT from 1990-04-01 02:00,
    so 02:30 that day does not exist)."""
    log = FIXTURE / "cluster_job_log"
    records = json.loads(log.read_text())
    old = {
        "status": "Pass", "vc": "v", "user": "u", "jobid": "application_1990_1",
        "submitted_time": "1990-07-01 12:00:00",
        "attempts": [{"start_time": "1990-12-01 12:00:00", "end_time": "1990-12-01 13:00:00",
                      "detail": [{"ip": "m1", "gpus": ["gpu0"]}]}],
    }  # fmt: skip
    gap = {**old, "jobid": "application_1990_2", "submitted_time": "1990-04-01 02:30:00"}
    (tmp_path / "cluster_job_log").write_text(json.dumps([*records, old, gap]))
    store = tmp_path / "store"
    ingest(LOADERS["philly"], tmp_path / "cluster_job_log", store)
    wide = frame(store, "jobs")
    alone = frame(fixture_store, "jobs")
    assert wide.filter(pl.col("job_id").is_in(alone["job_id"].implode())).equals(alone)
    row = wide.filter(pl.col("job_id") == "application_1990_1").row(0, named=True)
    for key, text in (("submit_time", "1990-07-01 12:00:00"), ("end_time", "1990-12-01 13:00:00")):
        local = datetime.fromisoformat(text).replace(tzinfo=LA)
        assert row[key] == local.astimezone(UTC)
    assert row["submit_time"].hour == 19  # PDT: UTC-7
    assert row["end_time"].hour == 21  # PST: UTC-8
    meta = pq.read_metadata(dataset_path(store, "jobs", "philly", "philly")).metadata
    assert meta[b"gpu_trace.dst_ambiguous_times"] == b"6"
    assert meta[b"gpu_trace.dst_ambiguous_inferred_pst"] == b"2"
    q = dict(connect(store).execute("SELECT locator, reason FROM quarantine").fetchall())
    assert q[f"record {len(records) + 2}"] == (
        "submitted_time '1990-04-01 02:30:00' does not exist in America/Los_Angeles "
        "(skipped by the spring-forward DST change)"
    )


def test_fixture_inventories_and_capacity(fixture_store: Path) -> None:
    m = frame(fixture_store, "machines")
    inv = {
        ds: dict(zip(g["machine_id"], g["gpus"], strict=True)) for (ds,), g in m.group_by("dataset")
    }
    assert inv["machine_list"] == {
        "m1": 8, "m2": 8, "m3": 2, "m5": 2, "m6": 2, "m29": 2, "m47": 8, "m412": 8,
    }  # fmt: skip
    # max GPU index + 1 over good jobs: m6 used gpu2-3, m29 gpu0-7 (list says 2: issue #8)
    assert inv["inferred_jobs"] == {
        "m1": 8, "m2": 8, "m3": 2, "m5": 2, "m6": 4, "m29": 8, "m47": 8, "m412": 8,
    }  # fmt: skip
    # gpuN_util columns ever non-NA in good rows
    assert inv["inferred_util"] == {"m29": 4, "m3": 1, "m47": 8}
    mem = m.filter(pl.col("dataset") == "machine_list")
    assert dict(zip(mem["machine_id"], mem["gpu_mem_bytes"], strict=True))["m3"] == 12 * 2**30
    assert dict(zip(mem["machine_id"], mem["gpu_mem_bytes"], strict=True))["m47"] == 24 * 2**30
    cap = {r["basis"]: r for r in frame(fixture_store, "capacity").iter_rows(named=True)}
    jobs_span = (utc("2017-12-22 16:03:22") - utc("2017-08-07 17:03:01")).total_seconds()
    assert (cap["machine_list"]["gpus"], cap["machine_list"]["time"]) == (
        40,
        utc("2017-08-07 17:03:01"),
    )
    assert cap["machine_list"]["period_s"] == jobs_span == 11_833_221
    assert (cap["inferred_jobs"]["gpus"], cap["inferred_jobs"]["period_s"]) == (48, jobs_span)
    util_span = utc("2017-11-05 10:01:00") - utc("2017-10-03 07:08:00")
    assert (cap["inferred_util"]["gpus"], cap["inferred_util"]["time"]) == (
        13,
        utc("2017-10-03 07:08:00"),
    )
    assert cap["inferred_util"]["period_s"] == util_span.total_seconds()


def test_fixture_gpu_samples(fixture_store: Path) -> None:
    g = frame(fixture_store, "gpu_samples")
    assert set(g["metric"]) == {"gpu_util_pct"} and set(g["unit"]) == {"pct"}
    key = {(r["time"], r["host"], r["gpu_index"]): r for r in g.iter_rows(named=True)}
    assert len(key) == g.height == 16
    doc = [60.8, 99.366666667, 100.0, 63.333333333, 100.0, 100.0, 100.0, 100.0]
    for i, v in enumerate(doc):  # the upstream README row, 00:08 PDT = 07:08 UTC
        r = key[(utc("2017-10-03 07:08:00"), "m47", i)]
        assert (r["value"], r["raw_field"]) == (v, f"gpu{i}_util")
    # The fall-back hour: 01:58 PDT and 01:02 PST are 64 minutes apart, not -56.
    assert key[(utc("2017-11-05 08:58:00"), "m29", 3)]["value"] == 63.333333333
    assert key[(utc("2017-11-05 09:02:00"), "m29", 1)]["value"] == 0.0
    assert key[(utc("2017-11-05 09:58:00"), "m3", 0)]["value"] == 10.5
    assert (utc("2017-11-05 08:58:00"), "m29", 4) not in key  # NA -> no sample
    assert key[(utc("2017-10-03 07:11:00"), "m47", 0)]["value"] == 1.5  # no trailing comma
    # Unsorted write: value column by value column, each in file (time) order.
    assert g["gpu_index"].is_sorted()
    assert all(part["time"].is_sorted() for part in g.partition_by("gpu_index"))


def test_fixture_host_samples(fixture_store: Path) -> None:
    h = frame(fixture_store, "host_samples")
    got = sorted(
        (r["dataset"], r["time"], r["metric"], r["value"], r["unit"], r["raw_field"])
        for r in h.iter_rows(named=True)
    )
    assert got == sorted(
        [
            ("cpu_util", utc("2017-11-27 08:04:00"), "cpu_util_pct", 31.845, "pct", "cpu_util"),
            ("cpu_util", utc("2017-11-05 09:30:00"), "cpu_util_pct", 12.5, "pct", "cpu_util"),
            (
                "mem_util",
                utc("2017-10-03 07:06:00"),
                "mem_total_bytes",
                528_272_672 * 1024.0,
                "bytes",
                "mem_total",
            ),
            (
                "mem_util",
                utc("2017-10-03 07:06:00"),
                "mem_free_bytes",
                float("2030730.6667") * 1024,
                "bytes",
                "mem_free",
            ),
            (
                "mem_util",
                utc("2017-10-03 07:09:00"),
                "mem_total_bytes",
                528_272_672 * 1024.0,
                "bytes",
                "mem_total",
            ),
        ]
    )
    assert set(h["host"]) == {"m29"}


def test_reingest_is_byte_identical(fixture_store: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    ingest(LOADERS["philly"], FIXTURE, store)
    for table, ds in (("jobs", "philly"), ("placements", "philly"), ("gpu_samples", "gpu_util")):
        assert (
            dataset_path(store, table, "philly", ds).read_bytes()
            == dataset_path(fixture_store, table, "philly", ds).read_bytes()
        )


def test_folder_without_job_log_and_optional_files(tmp_path: Path, store: Path) -> None:
    with pytest.raises(InputError, match="no cluster_job_log") as info:
        ingest(LOADERS["philly"], tmp_path, store)
    assert str(tmp_path) in str(info.value)
    folder = tmp_path / "trace-data"
    folder.mkdir()
    (folder / "cluster_job_log").write_bytes((FIXTURE / "cluster_job_log").read_bytes())
    report = ingest(LOADERS["philly"], tmp_path, store)  # finds trace-data/ inside
    assert {r.table for r in report.lines} == {"jobs", "placements", "machines", "capacity"}
    assert {r.dataset for r in report.lines if r.table == "machines"} == {"inferred_jobs"}


# --- whole-file problems and record-level rejects --------------------------------------

GOOD = '{"status": "Pass", "vc": "v", "jobid": "j%d", "attempts": [], "submitted_time": "None", "user": "u"}'


@pytest.mark.parametrize(
    ("data", "reason", "where"),
    [
        (b"", "file is empty", "byte 0"),
        (b"  \n ", "file is empty", "byte 0"),
        (b'{"jobid": "a"}', "not a JSON array", "byte 0"),
        (b"[" + (GOOD % 1).encode() + b", ", "the JSON array is not closed", "byte"),
        (b"[" + (GOOD % 1).encode() + b"] []", "unexpected data after the end", "byte"),
        (b"[" + (GOOD % 1).encode() + b"}", "mismatched '}' closes the JSON array", "byte"),
    ],
)
def test_whole_file_problems_are_input_errors(
    tmp_path: Path, store: Path, data: bytes, reason: str, where: str
) -> None:
    f = tmp_path / "cluster_job_log"
    f.write_bytes(data)
    with pytest.raises(InputError, match=reason) as info:
        ingest(LOADERS["philly"], tmp_path, store)
    assert str(f) in str(info.value) and where in str(info.value)


def test_record_rejects(tmp_path: Path, store: Path) -> None:
    records = [
        GOOD % 1,  # 1 good
        '{"jobid": 7, "attempts": []}',  # 2
        '{"jobid": "x", "attempts": "none"}',  # 3
        "42",  # 4
        "",  # 5: stray comma
        '{"jobid": "y", "attempts": [{"start_time": "2017-10-01 1:00:00"}]}',  # 6
        '{"jobid": "z", "attempts": [{"start_time": 5}]}',  # 7
        '{"jobid": "w", "attempts": [{"start_time": "None", "end_time": "None", '
        '"detail": [{"gpus": ["gpu0"]}]}]}',  # 8
        '{"jobid": "v", "status": "Weird", "attempts": [{"start_time": "None", '
        '"end_time": "None", "detail": []}]}',  # 9 good: unknown status, no machine
        '{"jobid": "t", "attempts": [] broken}',  # 10
        '{"jobid": "s\xff", "attempts": []}',  # 11 (invalid UTF-8, below)
        GOOD % 2,  # 12 good (a truncated tail is a whole-file error: test_philly_resync)
    ]
    body = ("[" + ", ".join(records) + "]").encode().replace("\xff".encode(), b"\xff")
    (tmp_path / "cluster_job_log").write_bytes(body)
    report = ingest(LOADERS["philly"], tmp_path, store)
    jobs_line = next(r for r in report.lines if r.table == "jobs")
    assert (jobs_line.rows_read, jobs_line.rows_written, jobs_line.rows_quarantined) == (12, 3, 9)
    q = dict(connect(store).execute("SELECT locator, reason FROM quarantine").fetchall())
    assert q == {
        "record 2": "jobid is a number, not a string",
        "record 3": "attempts is a string, not a list",
        "record 4": "record is a number, not an object",
        "record 5": "empty record (stray comma in the array)",
        "record 6": "attempts[0].start_time '2017-10-01 1:00:00' is not a valid time "
        "(YYYY-MM-DD HH:MM:SS)",
        "record 7": "an attempt start_time is not a string",
        "record 8": "an attempt detail entry has no ip string",
        "record 10": "not valid JSON",
        "record 11": "invalid UTF-8",
    }
    jobs = frame(store, "jobs")
    assert dict(zip(jobs["job_id"], jobs["status"], strict=True)) == {
        "j1": "completed",
        "j2": "completed",
        "v": "unknown",
    }
    v = frame(store, "placements").row(0, named=True)
    assert (v["job_id"], v["machine_id"], v["gpu_count"], v["start_time"]) == (
        "v",
        None,
        None,
        None,
    )


def test_util_header_errors(tmp_path: Path, store: Path) -> None:
    (tmp_path / "cluster_job_log").write_text("[]")
    (tmp_path / "cluster_gpu_util").write_text("time,machineId,gpu0\n")
    with pytest.raises(InputError, match="unexpected header column 'gpu0'"):
        ingest(LOADERS["philly"], tmp_path, store)
    (tmp_path / "cluster_gpu_util").write_text("")
    with pytest.raises(InputError, match="file is empty"):
        ingest(LOADERS["philly"], tmp_path, store)


# --- real data -------------------------------------------------------------------------


def test_real_machine_list(store: Path) -> None:
    with MACHINE_LIST.open(newline="") as fh:
        rows = list(csv.DictReader(fh, skipinitialspace=True))
    gpus = [int(r["number of GPUs"]) for r in rows]
    assert len(rows) == 552 and Counter(gpus) == {2: 321, 8: 231} and sum(gpus) == 2490
    report = ingest(LOADERS["philly"], MACHINE_LIST, store)
    assert report.totals == (552, 552, 0)
    m = frame(store, "machines")
    assert m.height == len(rows)
    assert Counter(m["gpus"].to_list()) == Counter(gpus)
    mem = {r["machineId"]: int(r["single GPU mem"].removesuffix("GB")) * 2**30 for r in rows}
    assert dict(zip(m["machine_id"], m["gpu_mem_bytes"], strict=True)) == mem
    assert frame(store, "capacity").height == 0  # no job log: no window to anchor it


def marwage_log(path: Path) -> list[dict[str, object]]:
    """marwage's jobs.json turned back into the raw cluster_job_log format. The
    timestamps are real; status, vc, user and detail are made up (marwage dropped them),
    with num_gpus spread over 8-GPU machines in the first attempt."""
    jobs = json.loads(MARWAGE.read_text())
    vcs = ["0e4a51", "103959", "ee9e8c"]
    out = []
    for i, j in enumerate(jobs):
        n = j["num_gpus"]
        detail = [
            {"ip": f"m{(i + k) % 500}", "gpus": [f"gpu{g}" for g in range(min(8, n - 8 * k))]}
            for k in range((n + 7) // 8)
        ]
        attempts = [
            {"start_time": a["start_time"], "end_time": a["end_time"], "detail": detail}
            for a in j["attempts"]
        ]
        out.append(
            {
                "status": ["Pass", "Killed", "Failed"][i % 3],
                "vc": vcs[i % 3],
                "jobid": j["id"],
                "attempts": attempts,
                "submitted_time": j["submitted_time"],
                "user": f"{i % 97:06x}",
            }
        )
    path.write_text(json.dumps(out))
    return jobs


def test_real_marwage_jobs(tmp_path: Path, store: Path) -> None:
    src = marwage_log(tmp_path / "cluster_job_log")
    assert len(src) == 3034 and sum(len(j["attempts"]) for j in src) == 4490
    report = ingest(LOADERS["philly"], tmp_path, store)
    jobs_line = next(r for r in report.lines if r.table == "jobs")
    assert (jobs_line.rows_read, jobs_line.rows_written, jobs_line.rows_quarantined) == (
        3034,
        3034,
        0,
    )
    got = {r["job_id"]: r for r in frame(store, "jobs").iter_rows(named=True)}
    assert frame(store, "placements").height == sum(
        len(j["attempts"]) * ((j["num_gpus"] + 7) // 8) for j in src
    )

    def instant(text: str) -> datetime:
        return datetime.strptime(text, "%Y-%m-%d %H:%M:%S").replace(tzinfo=LA).astimezone(UTC)

    spanning = 0
    for j in src:
        g = got[j["id"]]
        first, last = j["attempts"][0]["start_time"], j["attempts"][-1]["end_time"]
        assert g["run_s"] == (instant(last) - instant(first)).total_seconds()
        assert g["queue_s"] == (instant(first) - instant(j["submitted_time"])).total_seconds()
        assert (g["gpus"], g["attempts"]) == (j["num_gpus"], len(j["attempts"]))
        # marwage (like the notebook) subtracts naive wall clocks: the same except for
        # jobs running across the 2017-11-05 fall-back, which really ran one hour longer
        naive = j["runtime"] * 60
        if first < "2017-11-05 01:00:00" and last >= "2017-11-05 02:00:00":
            spanning += 1
            naive += 3600
        assert g["run_s"] == pytest.approx(naive, abs=1e-6)
    assert spanning == 62
    ex = got["application_1506638472019_14199"]
    assert (ex["run_s"], ex["attempts"]) == (193_263.0, 2)
