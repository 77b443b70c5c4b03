"""The Helios loader and synthetic generator.

Expected values are hand-computed from the fixtures (the three README rows of
``docs/trace-formats.md`` 2.2, a ``jobname`` variant, a file of bad rows) or computed
here with the standard library (csv, datetime, zipfile) from the real
``cluster_gpu_number.csv`` files and from the synthetic output, never read back from
our own results.
"""

from __future__ import annotations

import csv
import hashlib
import io
import itertools
import re
import statistics
import zipfile
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal
from typer.testing import CliRunner

from gpu_trace.cli import app
from gpu_trace.errors import GpuTraceError, InputError
from gpu_trace.loaders import LOADERS, helios, ingest
from gpu_trace.loaders.base import IngestReport
from gpu_trace.loaders.textfile import LINE, RAW, REASON, file_info
from gpu_trace.store.catalog import connect
from gpu_trace.store.parquet import dataset_path, read_table
from gpu_trace.synth import get_writer
from gpu_trace.synth.helios import CLUSTERS, split_jobs
from tests.conftest import SAMPLES

FIXTURES = Path(__file__).parent / "fixtures" / "helios"
DATA = FIXTURES / "data"
BAD = FIXTURES / "bad" / "Saturn" / "cluster_log.csv"
REAL = SAMPLES / "helios"
LOG_HEADER = (
    "job_id,user,vc,jobname,gpu_num,cpu_num,node_num,state,submit_time,start_time,"
    "end_time,duration,queue"
)
HELIOS = LOADERS["helios"]
GOOD = "1,uA,vcB,n,1,1,1,COMPLETED,2020-06-09 18:41:01,2020-06-09 18:41:01,2020-06-09 18:41:02,1,0"


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, sec: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, sec, tzinfo=UTC)


def jobs(store: Path) -> dict[str, dict[str, object]]:
    frame = pl.from_arrow(read_table(store, "jobs", "helios"))
    assert isinstance(frame, pl.DataFrame)
    return {r["job_id"]: r for r in frame.iter_rows(named=True)}


def lines(report: IngestReport) -> set[tuple[str, str, str, int, int, int]]:
    return {
        (r.file, r.table, r.dataset, r.rows_read, r.rows_written, r.rows_quarantined)
        for r in report.lines
    }


# ---------------------------------------------------------------- hand-written fixtures


@pytest.fixture(scope="module")
def fixture_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("helios") / "store"
    ingest(HELIOS, FIXTURES, store)
    return store


def test_readme_rows(fixture_store: Path) -> None:
    """The three README rows (no jobname column), read as UTC+8."""
    got = jobs(fixture_store)
    expected = {
        # job_id: user, vc, gpus, cpus, status, submit, end (UTC), run_s
        "1425511": (
            "uXBbc",
            "vcJkd",
            1.0,
            1.0,
            "completed",
            utc(2020, 6, 9, 10, 41, 1),
            utc(2020, 6, 9, 20, 55, 9),
            36848.0,
        ),
        "1425512": (
            "uVMrF",
            "vchbv",
            4.0,
            16.0,
            "failed",
            utc(2020, 6, 9, 10, 41, 27),
            utc(2020, 6, 9, 10, 45, 36),
            249.0,
        ),
        "1425513": (
            "uzqls",
            "vcpDC",
            1.0,
            1.0,
            "cancelled",
            utc(2020, 6, 9, 10, 41, 28),
            utc(2020, 6, 17, 6, 15, 21),
            675233.0,
        ),
    }
    for job_id, (user, vc, gpus, cpus, status, submit, end, run) in expected.items():
        row = got[job_id]
        assert (row["dataset"], row["cluster"], row["user"], row["vc"]) == (
            "venus",
            "venus",
            user,
            vc,
        )
        assert (row["gpus"], row["gpus_raw"], row["gpus_raw_unit"], row["cpus"]) == (
            gpus,
            gpus,
            "gpu",
            cpus,
        )
        assert (row["status"], row["raw_status"], row["nodes"], row["attempts"]) == (
            status,
            status.upper(),
            1,
            1,
        )
        assert row["submit_time"] == submit and row["start_time"] == submit
        assert row["end_time"] == end
        assert (row["queue_s"], row["run_s"]) == (0.0, run)
        assert (row["name"], row["source_tz"], row["time_basis"]) == (
            None,
            "Asia/Shanghai",
            "absolute",
        )
        # The file's duration agrees with its own timestamps in these rows.
        assert (end - submit).total_seconds() == run


def test_jobname_variant(fixture_store: Path) -> None:
    got = jobs(fixture_store)
    assert {k: got[k]["name"] for k in ("7001", "7002", "7003", "7004", "7005", "7006")} == {
        "7001": "train_resnet",
        "7002": "sweep,lr=0.1,bs=64",  # unquoted commas: split from both ends
        "7003": 'eval, "final"',  # RFC 4180 quoting undone
        "7004": None,
        "7005": "mismatch",
        "7006": "quoted",
    }
    r = got["7002"]  # the fields after the name were still found from the right
    assert (r["gpus"], r["cpus"], r["status"], r["run_s"]) == (0.0, 4.0, "timeout", 2.0)
    r = got["7003"]
    assert (r["gpus"], r["nodes"], r["status"]) == (16.0, 2, "node_fail")
    assert (r["submit_time"], r["start_time"], r["end_time"]) == (
        utc(2020, 4, 2, 15, 59, 59),
        utc(2020, 4, 2, 16, 0, 9),
        utc(2020, 4, 2, 16, 10, 9),
    )
    assert (got["7004"]["status"], got["7004"]["raw_status"]) == ("unknown", "SUSPENDED")
    assert got["7006"]["user"] is None
    # 7005 says duration 500 / queue 60 while its timestamps say 600 / 600: the file's
    # published values are kept, and the disagreement is counted in the metadata.
    assert (got["7005"]["run_s"], got["7005"]["queue_s"]) == (500.0, 60.0)
    meta = pq.read_metadata(dataset_path(fixture_store, "jobs", "helios", "earth")).metadata
    assert meta[b"gpu_trace.duration_mismatch_rows"] == b"1"
    assert meta[b"gpu_trace.queue_mismatch_rows"] == b"1"
    assert meta[b"gpu_trace.source_tz"] == b"Asia/Shanghai"
    assert meta[b"gpu_trace.jobname_column"] == b"yes"


def test_fixture_capacity(fixture_store: Path) -> None:
    rows = (
        connect(fixture_store)
        .execute(
            "SELECT dataset, time, period_s, vc, gpus, basis FROM capacity "
            "ORDER BY dataset, time, vc NULLS FIRST"
        )
        .fetchall()
    )
    day1, day2 = utc(2020, 6, 8, 16), utc(2020, 6, 9, 16)  # local midnights, UTC+8
    assert rows == [
        ("earth", utc(2020, 3, 31, 16), 86400.0, None, 240, "published"),
        ("earth", utc(2020, 3, 31, 16), 86400.0, "vc6YE", 128, "published"),
        ("earth", utc(2020, 3, 31, 16), 86400.0, "vchbv", 112, "published"),
        ("venus", day1, 86400.0, None, 96, "published"),
        ("venus", day1, 86400.0, "vcJkd", 16, "published"),
        ("venus", day1, 86400.0, "vchbv", 72, "published"),
        ("venus", day1, 86400.0, "vcpDC", 8, "published"),
        ("venus", day2, 86400.0, None, 96, "published"),
        ("venus", day2, 86400.0, "vcJkd", 16, "published"),
        ("venus", day2, 86400.0, "vchbv", 80, "published"),
        ("venus", day2, 86400.0, "vcpDC", 0, "published"),
    ]


def test_bad_rows_are_quarantined_with_line_and_reason(store: Path) -> None:
    report = ingest(HELIOS, BAD, store)
    assert lines(report) == {("cluster_log.csv", "jobs", "saturn", 16, 2, 14)}
    q = dict(connect(store).execute("SELECT locator, reason FROM quarantine").fetchall())
    assert q == {
        "line 3": "expected 13 fields, found 12",
        "line 4": "empty line",
        "line 5": "job_id is missing",
        "line 6": "gpu_num is negative",
        "line 7": "gpu_num 'two' is not a valid int",
        "line 8": "submit_time '2020-07-01T10:00:00' is not a valid time (YYYY-MM-DD HH:MM:SS)",
        "line 9": "end_time '2020-02-30 00:00:00' is not a valid time (YYYY-MM-DD HH:MM:SS)",
        "line 10": "duration is negative",
        "line 11": "state is missing",
        "line 12": "gpu_num '1.0' is not a valid int",
        "line 13": "expected 13 fields, found 4",  # a quoted name spanning two lines
        "line 14": "expected 13 fields, found 10",
        "line 15": "node_num is out of range",
        "line 16": "invalid UTF-8",
    }
    raw = connect(store).execute("SELECT raw FROM quarantine WHERE locator = 'line 7'").fetchone()
    assert raw is not None and raw[0].startswith("8005,uAAAA,vcAAA,word,two,")
    got = jobs(store)
    assert sorted(got) == ["8001", "8014"]  # the last line has no trailing newline
    assert (got["8014"]["queue_s"], got["8014"]["run_s"], got["8014"]["user"]) == (
        5.0,
        1.0,
        "uBBBB",
    )


def test_capacity_bad_lines(tmp_path: Path, store: Path) -> None:
    f = tmp_path / "Uranus_cluster_gpu_number.csv"
    f.write_text(
        "date,vcA,vcB,total\n"
        "2020-04-01,8,16,24\n"
        "2020-04-02,8,16\n"
        "2020-04-31,8,16,24\n"
        "2020-04-04,8,x,24\n"
        "2020-04-05,-8,16,8\n"
        "2020-04-06,,16,16\n"
        "\n"
    )
    report = ingest(HELIOS, f, store)
    # a good line is 3 records (vcA, vcB, total), a rejected line 1: 1*3 + 6 = 9
    assert lines(report) == {("Uranus_cluster_gpu_number.csv", "capacity", "uranus", 9, 3, 6)}
    q = dict(connect(store).execute("SELECT locator, reason FROM quarantine").fetchall())
    assert q == {
        "line 3": "expected 4 fields, found 3",
        "line 4": "date '2020-04-31' is not a valid date (YYYY-MM-DD)",
        "line 5": "vcB 'x' is not a valid int",
        "line 6": "vcA is negative",
        "line 7": "vcA is missing",
        "line 8": "empty line",
    }
    assert sorted(
        connect(store).execute("SELECT coalesce(vc, 'total'), gpus FROM capacity").fetchall()
    ) == [("total", 24), ("vcA", 8), ("vcB", 16)]


def test_crlf_and_bom(tmp_path: Path, store: Path) -> None:
    src = (DATA / "Venus" / "cluster_log.csv").read_text()
    folder = tmp_path / "Venus"
    folder.mkdir()
    (folder / "cluster_log.csv").write_bytes(b"\xef\xbb\xbf" + src.replace("\n", "\r\n").encode())
    report = ingest(HELIOS, folder, store)
    assert lines(report) == {("cluster_log.csv", "jobs", "venus", 3, 3, 0)}
    assert jobs(store)["1425513"]["run_s"] == 675233.0


def test_other_time_zone(tmp_path: Path, store: Path) -> None:
    """In a zone with DST a missing local time is quarantined and an ambiguous one
    takes the earlier instant."""
    f = tmp_path / "x" / "cluster_log.csv"
    f.parent.mkdir()
    f.write_text(
        LOG_HEADER + "\n"
        "1,u1,vc1,a,1,1,1,COMPLETED,2020-03-08 02:30:00,2020-03-08 03:00:00,2020-03-08 03:00:01,1,1800\n"
        "2,u1,vc1,b,1,1,1,COMPLETED,2020-11-01 01:30:00,2020-11-01 01:30:00,2020-11-01 03:00:00,5400,0\n"
        "3,u1,vc1,c,1,1,1,COMPLETED,2020-07-01 12:00:00,2020-07-01 12:00:00,2020-07-01 12:00:10,10,0\n"
    )
    report = ingest(HELIOS, f, store, tz="America/New_York")
    assert lines(report) == {("cluster_log.csv", "jobs", "x", 3, 2, 1)}
    assert connect(store).execute("SELECT locator, reason FROM quarantine").fetchall() == [
        ("line 2", "submit_time 2020-03-08 02:30:00 does not exist in America/New_York")
    ]
    got = jobs(store)
    assert got["2"]["submit_time"] == utc(2020, 11, 1, 5, 30)  # 01:30 EDT (UTC-4)
    assert got["2"]["end_time"] == utc(2020, 11, 1, 8)  # 03:00 EST (UTC-5)
    assert got["3"]["submit_time"] == utc(2020, 7, 1, 16)
    assert got["3"]["source_tz"] == "America/New_York"
    with pytest.raises(GpuTraceError, match="unknown time zone 'Mars/Olympus'"):
        ingest(HELIOS, f, store, tz="Mars/Olympus")


# ---------------------------------------------------------------- the clean-file fast path

COUNTS = st.sampled_from(["1", "0", "8", " 1", "1 ", "+1", "01", "-1", "1.0", "", "x"])
TIMESTAMPS = st.sampled_from(
    [
        "2020-06-09 18:41:01",
        "2020-11-01 01:30:00",
        "2020-03-08 02:30:00",
        " 2020-06-09 18:41:01",
        "2020-06-09T18:41:01",
        "2020-06-09 18:41",
        "",
    ]
)
VALUES = {
    "job_id": st.sampled_from(["1", "999999", "1000000", " 7", ""]),
    "user": st.sampled_from(["u1", "", " u2"]),
    "vc": st.sampled_from(["vcA", ""]),
    "jobname": st.sampled_from(["n", "", '"q"', '"a,b"', "a,b", "\u00e9t\u00e9"]),
    "state": st.sampled_from(["COMPLETED", "FAILED", "SUSPENDED", ""]),
    "extra": st.sampled_from(["", "z"]),
}
GOOD_ROW = {
    "job_id": "1",
    "user": "u1",
    "vc": "vcA",
    "jobname": "n",
    "gpu_num": "1",
    "cpu_num": "2",
    "node_num": "1",
    "state": "COMPLETED",
    "submit_time": "2020-06-09 18:41:01",
    "start_time": "2020-06-09 18:41:01",
    "end_time": "2020-06-09 18:41:02",
    "duration": "1",
    "queue": "0",
    "extra": "",
}


def _value(name: str) -> st.SearchStrategy[str]:
    if name in VALUES:
        return VALUES[name]
    return TIMESTAMPS if name.endswith("_time") else COUNTS


@st.composite
def helios_log(draw: st.DrawFn) -> tuple[list[str], list[dict[str, str]]]:
    names = LOG_HEADER.split(",")
    if not draw(st.booleans()):
        names.remove("jobname")
    if draw(st.booleans()):
        names.insert(draw(st.integers(0, len(names))), "extra")
    if draw(st.booleans()):
        names = draw(st.permutations(names))
    rows = []
    for _ in range(draw(st.integers(0, 6))):
        row = {n: GOOD_ROW[n] for n in names}
        for name in draw(st.lists(st.sampled_from(names), max_size=2)):
            row[name] = draw(_value(name))
        rows.append(row)
    return names, rows


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    log=helios_log(),
    eol=st.sampled_from(["\n", "\r\n"]),
    bom=st.booleans(),
    short=st.booleans(),
    tz=st.sampled_from(["Asia/Shanghai", "America/New_York"]),
)
def test_fast_path_agrees_with_line_exact_path(
    tmp_path_factory: pytest.TempPathFactory,
    log: tuple[list[str], list[dict[str, str]]],
    eol: str,
    bom: bool,
    short: bool,
    tz: str,
) -> None:
    """Whatever the native-reader path accepts, it parses exactly as the line-exact
    path does; whatever it cannot vouch for, it hands back (None)."""
    names, rows = log
    lines_out = [",".join(names), *(",".join(r[n] for n in names) for r in rows)]
    if short and rows:
        lines_out[-1] = lines_out[-1].rsplit(",", 1)[0]
    f = tmp_path_factory.mktemp("fast") / "cluster_log.csv"
    f.write_bytes((b"\xef\xbb\xbf" if bom else b"") + (eol.join(lines_out) + eol).encode())
    fast, slow = _both_paths(f, tz)
    if fast is not None:  # the rows it vouched for are good rows of the line-exact parse
        assert_frame_equal(fast, slow.filter(pl.col(LINE).is_in(fast[LINE].implode())))
        assert fast[REASON].null_count() == fast.height


def _both_paths(f: Path, tz: str = "Asia/Shanghai") -> tuple[pl.DataFrame | None, pl.DataFrame]:
    """What the fast path vouches for (None if it takes nothing), and whether the
    combined parse equals the line-exact parse of the whole file (asserted here)."""
    names = helios.header_names(f)
    info = file_info(f, header_lines=1, check_utf8=False)
    frame = helios.read_text(f, names)
    fast = helios.read_clean(frame, info, names, tz)
    combined, _ = helios.parse(info, names, tz, frame)
    slow = helios.parse_log(info, names, tz).collect()
    assert_frame_equal(combined.drop(RAW, strict=False).sort(LINE), slow.sort(LINE))
    if fast is None:
        return None, slow
    return fast.filter(pl.col("_ok")).drop("_ok"), slow


@pytest.mark.parametrize(
    ("header", "row"),
    [
        (LOG_HEADER, GOOD.replace(",n,", ',"q",')),  # quoted name: unquoted line-exactly
        (LOG_HEADER, GOOD.replace(",n,", ",a,b,")),  # comma in the name
        (LOG_HEADER, GOOD.replace(",1,1,1,", ",1 ,1,1,")),  # blank after a count
        (LOG_HEADER, GOOD.replace(",1,1,1,", ",+1,01,1,")),
        (LOG_HEADER, GOOD.replace("2020-06-09 18:41:01,", " 2020-06-09 18:41:01,", 1)),
        (LOG_HEADER, GOOD.replace("2020-06-09 18:41:01,", "2020-06-09T18:41:01,", 1)),
        (LOG_HEADER, GOOD.rsplit(",", 1)[0]),  # short row
        (LOG_HEADER + ",jobname2", GOOD),  # short row, last column not ours
        (LOG_HEADER.replace(",jobname", "") + ",jobname", GOOD.replace(",n,", ",") + ","),
        (LOG_HEADER, ""),  # empty line
        (LOG_HEADER, "\r"),
        (LOG_HEADER, GOOD.replace("COMPLETED", "")),
        (LOG_HEADER, GOOD.replace(",1,0", ",1,-1")),
    ],
)
@pytest.mark.parametrize("last", [False, True])
def test_fast_path_edge_cases(tmp_path: Path, header: str, row: str, last: bool) -> None:
    f = tmp_path / "cluster_log.csv"
    f.write_text(f"{header}\n{GOOD}\n{row}\n" if last else f"{header}\n{GOOD}\n{row}\n{GOOD}\n")
    fast, slow = _both_paths(f)
    if fast is not None:
        assert_frame_equal(fast, slow.filter(pl.col(LINE).is_in(fast[LINE].implode())))


def test_fast_path_is_taken_on_clean_files(tmp_path: Path) -> None:
    """The speed path must not silently die: every row of the README rows, a CRLF +
    BOM copy and synthetic output goes through it."""
    readme = DATA / "Venus" / "cluster_log.csv"
    crlf = tmp_path / "cluster_log.csv"
    crlf.write_bytes(b"\xef\xbb\xbf" + readme.read_text().replace("\n", "\r\n").encode())
    synth = tmp_path / "synth"
    get_writer("helios")(synth, jobs=2_000, seed=3)
    files = [readme, crlf, *sorted(synth.rglob("cluster_log.csv"))]
    assert len(files) == 6
    for f in files:
        fast, slow = _both_paths(f)
        assert fast is not None, f
        assert_frame_equal(fast, slow)  # every line vouched for


def test_bad_lines_among_clean_ones(tmp_path: Path, store: Path) -> None:
    """A file the native reader accepts but with a few bad lines: the good rows come
    from the fast path, the bad lines are re-parsed line-exactly and quarantined with
    their line, reason and raw text, and a line only the line-exact parse accepts (a
    blank after a count) is kept."""
    f = tmp_path / "Venus" / "cluster_log.csv"
    f.parent.mkdir()
    short = GOOD.replace("1,uA", "2,uA").rsplit(",", 1)[0]
    negative = GOOD.replace("1,uA", "3,uA").replace(",1,0", ",-5,0")
    blank = GOOD.replace("1,uA", "4,uA").replace(",1,1,1,", ",1 ,1,1,")
    f.write_text("\n".join([LOG_HEADER, GOOD, short, negative, blank, ""]))
    report = ingest(HELIOS, f.parent, store)
    assert lines(report) == {("cluster_log.csv", "jobs", "venus", 4, 2, 2)}
    assert connect(store).execute(
        "SELECT locator, reason, raw FROM quarantine ORDER BY locator"
    ).fetchall() == [
        ("line 3", "expected 13 fields, found 12", short),
        ("line 4", "duration is negative", negative),
    ]
    assert sorted(jobs(store)) == ["1", "4"]
    assert jobs(store)["4"]["gpus"] == 1.0


def test_fixed_offset() -> None:
    summer = (datetime(2020, 6, 1), datetime(2020, 8, 31, 23, 59, 59))
    assert helios.fixed_offset("Asia/Shanghai", datetime(2020, 4, 1), datetime(2020, 9, 28)) == (
        timedelta(hours=8)
    )
    assert helios.fixed_offset("America/New_York", *summer) == timedelta(hours=-4)
    # spans a DST change, or too long to check minute by minute: no single offset
    assert (
        helios.fixed_offset("America/New_York", datetime(2020, 6, 1), datetime(2020, 12, 1)) is None
    )
    assert helios.fixed_offset("UTC", datetime(2000, 1, 1), datetime(2020, 1, 1)) is None
    # a change minutes away from both ends of a short span; Lord Howe moves by 30 min
    spring = (datetime(2020, 3, 8, 1, 59, 59), datetime(2020, 3, 8, 3, 0, 1))
    assert helios.fixed_offset("America/New_York", *spring) is None
    lord_howe = (datetime(2020, 10, 4, 1, 50), datetime(2020, 10, 4, 2, 40))
    assert helios.fixed_offset("Australia/Lord_Howe", *lord_howe) is None
    assert helios.fixed_offset("Asia/Kolkata", *summer) == timedelta(hours=5, minutes=30)


def test_store_order_without_a_full_sort() -> None:
    """Ids of different lengths in one second are re-sorted as text, alone; the
    result equals the writer's stable sort."""
    t = [datetime(2020, 5, 14, 14, 21, s, tzinfo=UTC) for s in (50, 51, 51, 51, 52, 53, 53)]
    ids = ["999998", "999999", "1000000", "1000001", "1000002", "1000003", "1000003"]
    rows = pl.DataFrame({"_submit_time_utc": t, "job_id": ids, "k": range(7)})
    got = helios.in_store_order(rows)
    assert got is not None
    assert got["k"].to_list() == [0, 2, 3, 1, 4, 5, 6]
    assert_frame_equal(got, rows.sort("_submit_time_utc", "job_id", maintain_order=True))
    ordered = rows.head(2)
    assert helios.in_store_order(ordered) is ordered  # already in order: no copy
    unsorted = rows.reverse()
    assert helios.in_store_order(unsorted) is None  # times out of order: the writer sorts


# ---------------------------------------------------------------- input layouts


def _summary(report: IngestReport) -> set[tuple[str, str, int]]:
    return {(r.dataset, r.table, r.rows_written) for r in report.lines}


FULL = {
    ("venus", "jobs", 3),
    ("venus", "capacity", 8),
    ("earth", "jobs", 6),
    ("earth", "capacity", 3),
}


@pytest.mark.parametrize(
    ("path", "cluster", "expected"),
    [
        (FIXTURES, "all", FULL),
        (DATA, "all", FULL),
        (DATA, "venus", {("venus", "jobs", 3), ("venus", "capacity", 8)}),
        (DATA, "earth,venus", FULL),
        (DATA / "Earth", "all", {("earth", "jobs", 6), ("earth", "capacity", 3)}),
        (DATA / "Earth" / "cluster_log.csv", "all", {("earth", "jobs", 6)}),
    ],
)
def test_path_layouts(
    path: Path, cluster: str, expected: set[tuple[str, str, int]], store: Path
) -> None:
    assert _summary(ingest(HELIOS, path, store, cluster=cluster)) == expected


def test_data_zip(tmp_path: Path, store: Path) -> None:
    archive = tmp_path / "data.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for f in sorted(DATA.rglob("*.csv")):
            zf.write(f, f"data/{f.parent.name}/{f.name}")
        zf.writestr("__MACOSX/data/Venus/._cluster_log.csv", b"\x00\x05junk")
        zf.writestr("README.md", "not a trace")
    assert _summary(ingest(HELIOS, archive, store)) == FULL
    # The folder holding data.zip (a HeliosData clone) works too.
    assert _summary(ingest(HELIOS, tmp_path, tmp_path / "s2", cluster="earth")) == {
        ("earth", "jobs", 6),
        ("earth", "capacity", 3),
    }
    sha = hashlib.sha256((DATA / "Venus" / "cluster_log.csv").read_bytes()).hexdigest()
    assert connect(store).execute(
        "SELECT file_sha256 FROM ingests WHERE dataset='venus' AND \"table\"='jobs'"
    ).fetchone() == (sha,)
    assert jobs(store)["7002"]["name"] == "sweep,lr=0.1,bs=64"
    twice = tmp_path / "twice.zip"
    with zipfile.ZipFile(twice, "w") as zf:
        for top in ("a", "b"):
            zf.write(DATA / "Venus" / "cluster_log.csv", f"{top}/Venus/cluster_log.csv")
    with pytest.raises(InputError, match=r"two cluster_log\.csv members for cluster venus"):
        ingest(HELIOS, twice, store)


@pytest.mark.parametrize(
    ("name", "text", "cluster", "reason", "names_file"),
    [
        ("Venus/cluster_log.csv", "", "all", "file is empty", True),
        (
            "Venus/cluster_log.csv",
            "job_id,user,vc,gpu_num\n1,u,v,1\n",
            "all",
            r"line 1: header lacks column\(s\) cpu_num, node_num, state",
            True,
        ),
        ("Venus/cluster_log.csv", "job_id,job_id\n", "all", "duplicate column", True),
        ("Venus/cluster_gpu_number.csv", "day,vcA,total\n", "all", "unexpected header", True),
        (
            "Venus/cluster_gpu_number.csv",
            "date,vcA\n",
            "mars",
            "no Helios files for cluster",
            False,
        ),
        ("Venus/notes.csv", "a\n", "all", "no Helios input here", False),
        ("Venus.zip", "PK not a zip", "all", "not a readable zip", True),
    ],
)
def test_unreadable_inputs_are_input_errors(
    tmp_path: Path, store: Path, name: str, text: str, cluster: str, reason: str, names_file: bool
) -> None:
    """Whole-file problems are one InputError naming the file (or, when nothing usable
    is found, the folder that was searched)."""
    f = tmp_path / name
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(text)
    target = f if f.suffix == ".zip" else tmp_path
    with pytest.raises(InputError, match=reason) as info:
        ingest(HELIOS, target, store, cluster=cluster)
    assert str(info.value).startswith(str(f if names_file else tmp_path) + ":")
    assert "\n" not in str(info.value)


def test_single_unknown_file_and_duplicates(tmp_path: Path, store: Path) -> None:
    f = tmp_path / "jobs.csv"
    f.write_text(LOG_HEADER + "\n")
    with pytest.raises(InputError, match="not a Helios file"):
        ingest(HELIOS, f, store)
    (tmp_path / "Venus").mkdir()
    (tmp_path / "Venus" / "cluster_gpu_number.csv").write_text("date,total\n")
    (tmp_path / "Venus_cluster_gpu_number.csv").write_text("date,total\n")
    with pytest.raises(InputError, match=r"two cluster_gpu_number\.csv files for cluster venus"):
        ingest(HELIOS, tmp_path, store)


# ---------------------------------------------------------------- real capacity files


def test_real_capacity_files(store: Path) -> None:
    report = ingest(HELIOS, REAL, store)
    con = connect(store)
    for cluster in ("Venus", "Earth"):
        with (REAL / f"{cluster}_cluster_gpu_number.csv").open(newline="") as fh:
            table = list(csv.reader(fh))
        header, body = table[0], table[1:]
        vcs = header[1:-1]
        dataset = cluster.lower()
        first, last = int(body[0][-1]), int(body[-1][-1])
        cells = len(body) * (len(header) - 1)
        assert (dataset, "capacity", cells) in _summary(report)
        assert con.execute(
            "SELECT count(DISTINCT time), count(*), min(period_s), max(period_s) FROM capacity "
            f"WHERE dataset='{dataset}'"
        ).fetchone() == (len(body), cells, 86400.0, 86400.0)
        totals = con.execute(
            f"SELECT gpus FROM capacity WHERE dataset='{dataset}' AND vc IS NULL ORDER BY time"
        ).fetchall()
        assert [t[0] for t in totals] == [int(r[-1]) for r in body]
        assert (totals[0][0], totals[-1][0]) == (first, last)
        per_vc = dict(
            con.execute(
                f"SELECT vc, sum(gpus) FROM capacity WHERE dataset='{dataset}' AND vc IS NOT NULL "
                "GROUP BY vc"
            ).fetchall()
        )
        assert per_vc == {vc: sum(int(r[i + 1]) for r in body) for i, vc in enumerate(vcs)}
        start = datetime.strptime(body[0][0], "%Y-%m-%d").replace(tzinfo=UTC) - timedelta(hours=8)
        assert con.execute(
            f"SELECT min(time) FROM capacity WHERE dataset='{dataset}'"
        ).fetchone() == (start,)
        assert len(body) == 181  # 2020-04-01 .. 2020-09-28


# ---------------------------------------------------------------- CLI


def test_cli_ingest_helios(store: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(
        app, ["ingest", "helios", str(DATA), "--store", str(store), "--cluster", "venus"]
    )
    assert result.exit_code == 0, result.output
    total = [line for line in result.stdout.splitlines() if line.startswith("total")]
    assert total and total[0].split()[1:] == ["11", "11", "0"]
    assert runner.invoke(app, ["ingest", "helios", str(DATA), "--cluster", "mars"]).exit_code == 2
    bad = runner.invoke(app, ["ingest", "helios", str(DATA), "--store", str(store), "--tz", "X/Y"])
    assert bad.exit_code == 1 and "unknown time zone 'X/Y'" in bad.stderr


# ---------------------------------------------------------------- fuzzing

FIELD = st.one_of(
    st.integers(-5, 3_000_000).map(str),
    st.sampled_from(
        [
            "",
            "COMPLETED",
            "SUSPENDED",
            "2020-06-09 18:41:01",
            "2020-13-01 00:00:00",
            "2020-06-09",
            '"a,b"',
            '"',
            "1e3",
            " 7",
            "99999999999999999999",
            "\r",
        ]
    ),
    st.text(max_size=6).filter(lambda s: "\n" not in s and "\r" not in s),
)
ROW = st.lists(FIELD, min_size=0, max_size=16).map(",".join)


def _physical_lines(data: bytes) -> int:
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    rows=st.lists(st.one_of(ROW, st.just(GOOD)), max_size=10),
    jobname=st.booleans(),
    tail=st.binary(max_size=16),
    cut=st.integers(0, 600),
    encoding=st.sampled_from(["utf-8", "utf-16", "latin-1"]),
)
def test_cluster_log_never_crashes(
    tmp_path_factory: pytest.TempPathFactory,
    rows: list[str],
    jobname: bool,
    tail: bytes,
    cut: int,
    encoding: str,
) -> None:
    root = tmp_path_factory.mktemp("fuzz") / "Venus"
    root.mkdir()
    header = LOG_HEADER if jobname else LOG_HEADER.replace(",jobname", "")
    text = "\n".join([header, *rows])
    data = text.encode(encoding, errors="replace")
    data = data[: max(cut, len(header))] + tail
    f = root / "cluster_log.csv"
    f.write_bytes(data)
    try:
        report = ingest(HELIOS, f, root / "store")
    except InputError as exc:
        assert str(f) in str(exc)
        return
    ((_, _, _, read, written, quarantined),) = lines(report)
    assert read == written + quarantined == _physical_lines(data) - 1


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    header=st.sampled_from(["date,vcA,total", "date,total", "date,vcA,vcB,total"]),
    body=st.binary(max_size=200),
)
def test_capacity_never_crashes(
    tmp_path_factory: pytest.TempPathFactory, header: str, body: bytes
) -> None:
    root = tmp_path_factory.mktemp("fuzzc")
    f = root / "Earth_cluster_gpu_number.csv"
    f.write_bytes(header.encode() + b"\n" + body)
    report = ingest(HELIOS, f, root / "store")
    ((_, _, _, read, written, quarantined),) = lines(report)
    assert read == written + quarantined
    bad = connect(root / "store").execute("SELECT count(*) FROM quarantine").fetchone()
    assert bad is not None
    width = header.count(",")
    good_lines = _physical_lines(header.encode() + b"\n" + body) - 1 - bad[0]
    assert written == good_lines * width


# ---------------------------------------------------------------- synthetic generator

SYNTH_JOBS = 30_000


@pytest.fixture(scope="module")
def synth_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("synth")
    get_writer("helios")(out, jobs=SYNTH_JOBS, seed=7)
    return out


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


PUBLISHED = {
    # cluster: (jobs, GPU-job share, GPU-job completed / cancelled share, GPUs)
    "Venus": (246_708, 0.508, 0.526, 0.272, 1022),
    "Earth": (872_886, 0.489, 0.735, 0.136, 997),
    "Saturn": (1_753_078, 0.399, 0.582, 0.272, 2080),
    "Uranus": (490_309, 0.671, 0.607, 0.201, 2119),
}


def test_synth_split_follows_published_proportions() -> None:
    total = sum(p[0] for p in PUBLISHED.values())
    assert total == 3_362_981
    for n in (1, 7, SYNTH_JOBS, total):
        parts = split_jobs(n)
        assert sum(parts) == n
        for part, c in zip(parts, CLUSTERS, strict=True):
            assert abs(part - n * PUBLISHED[c.name][0] / total) < 1
    assert split_jobs(total) == [p[0] for p in PUBLISHED.values()]


def test_synth_is_calibrated(synth_dir: Path) -> None:
    gpu_runs: list[int] = []
    for cluster, (_, gpu_share, completed, cancelled, gpus) in PUBLISHED.items():
        folder = synth_dir / "data" / cluster
        with (folder / "cluster_log.csv").open(newline="") as fh:
            assert fh.readline() == LOG_HEADER + "\n"
        log = _csv(folder / "cluster_log.csv")
        gpu = [r for r in log if r["gpu_num"] != "0"]
        assert abs(len(gpu) / len(log) - gpu_share) < 0.03
        state = Counter(r["state"] for r in gpu)
        assert abs(state["COMPLETED"] / len(gpu) - completed) < 0.04
        assert abs(state["CANCELLED"] / len(gpu) - cancelled) < 0.04
        assert statistics.median(int(r["queue"]) for r in gpu) == 0
        assert statistics.median(int(r["gpu_num"]) for r in gpu) == 1
        assert all(int(r["gpu_num"]) & (int(r["gpu_num"]) - 1) == 0 for r in gpu)
        gpu_runs += [int(r["duration"]) for r in gpu]
        ids = [int(r["job_id"]) for r in log]
        assert all(a < b for a, b in itertools.pairwise(ids))
        fmt = "%Y-%m-%d %H:%M:%S"
        submit = [datetime.strptime(r["submit_time"], fmt) for r in log]
        assert all(a <= b for a, b in itertools.pairwise(submit))
        assert datetime(2020, 4, 1) <= submit[0] and submit[-1] < datetime(2020, 9, 29)
        for r in log[:: max(1, len(log) // 500)]:
            s, b, e = (
                datetime.strptime(r[k], fmt) for k in ("submit_time", "start_time", "end_time")
            )
            assert (b - s).total_seconds() == int(r["queue"])
            assert (e - b).total_seconds() == int(r["duration"])
        assert all(re.fullmatch(r"u[0-9A-Za-z]{4}", r["user"]) for r in log)
        hours = Counter(t.hour for t in submit)
        assert sum(hours[h] for h in range(2, 6)) < 0.5 * sum(hours[h] for h in range(14, 18))
        cap = _csv(folder / "cluster_gpu_number.csv")
        assert (
            len(cap) == 181 and cap[0]["date"] == "2020-04-01" and cap[-1]["date"] == "2020-09-28"
        )
        vcs = [k for k in cap[0] if k not in ("date", "total")]
        assert all(re.fullmatch(r"vc[0-9A-Za-z]{3}", v) for v in vcs)
        assert {r["vc"] for r in log} <= set(vcs)
        for row in cap:
            assert int(row["total"]) == sum(int(row[v]) for v in vcs)
            assert all(int(row[v]) % 8 == 0 for v in vcs)
        mean = statistics.mean(int(r["total"]) for r in cap)
        assert abs(mean - gpus) / gpus < 0.03
    assert 150 <= statistics.median(gpu_runs) <= 260  # published median GPU run: 206 s
    venus = _csv(synth_dir / "data" / "Venus" / "cluster_gpu_number.csv")
    assert (venus[0]["total"], venus[-1]["total"]) == ("968", "1080")
    earth = _csv(synth_dir / "data" / "Earth" / "cluster_gpu_number.csv")
    assert (earth[0]["total"], earth[-1]["total"]) == ("784", "1208")


def test_synth_is_deterministic(tmp_path: Path, synth_dir: Path) -> None:
    def digest(root: Path) -> str:
        h = hashlib.sha256()
        for f in sorted(root.rglob("*.csv")):
            h.update(f.relative_to(root).as_posix().encode() + f.read_bytes())
        return h.hexdigest()

    get_writer("helios")(tmp_path / "a", jobs=SYNTH_JOBS, seed=7)
    get_writer("helios")(tmp_path / "b", jobs=500, seed=8)
    assert digest(tmp_path / "a") == digest(synth_dir)
    assert digest(tmp_path / "b") != digest(synth_dir)


def test_synth_ingests_cleanly(synth_dir: Path, store: Path) -> None:
    report = ingest(HELIOS, synth_dir, store)
    expected = set()
    for cluster in PUBLISHED:
        folder = synth_dir / "data" / cluster
        n = len(_csv(folder / "cluster_log.csv"))
        cap = list(csv.reader(io.StringIO((folder / "cluster_gpu_number.csv").read_text())))
        slug = cluster.lower()
        expected |= {
            ("cluster_log.csv", "jobs", slug, n, n, 0),
            ("cluster_gpu_number.csv", "capacity", slug, 181 * 26, 181 * 26, 0),
        }
        assert len(cap[0]) == 27
    assert lines(report) == expected
    assert sum(r.rows_written for r in report.lines if r.table == "jobs") == SYNTH_JOBS
    for cluster in PUBLISHED:
        meta = pq.read_metadata(dataset_path(store, "jobs", "helios", cluster.lower())).metadata
        assert meta[b"gpu_trace.duration_mismatch_rows"] == b"0"
        assert meta[b"gpu_trace.queue_mismatch_rows"] == b"0"
    suspended = (
        connect(store)
        .execute("SELECT dataset, count(*) FROM jobs WHERE status = 'unknown' GROUP BY ALL")
        .fetchall()
    )
    assert suspended == [("uranus", 1)]


def test_pandas_baselines_build_the_same_table(tmp_path: Path, synth_dir: Path) -> None:
    """The benchmark's two pandas baselines (bench/baseline_helios.py) run and write
    every job of the synthetic trace: the owners' all-cluster CSV and the rewrite's
    Parquet files."""
    from bench.baseline_helios import owners, rewrite

    data = synth_dir / "data"
    n = sum(len(_csv(f)) for f in data.rglob("cluster_log.csv"))
    assert owners(data, tmp_path)["baseline_rows"] == n
    assert rewrite(data, tmp_path)["baseline_rows"] == n
    with (tmp_path / "all_cluster_log.csv").open() as fh:
        assert fh.readline().split(",")[:2] == ["job_id", "cluster"]
        assert sum(1 for _ in fh) == n
    assert sum(pq.read_metadata(f).num_rows for f in tmp_path.glob("*.parquet")) == n
