"""helios: integration tests (ingest into a real store).

The Helios loader and synthetic generator.

Expected values are hand-computed from the fixtures (the three README rows of
HeliosData's README, a ``jobname`` variant, a file of bad rows) or computed
here with the standard library (csv, datetime, zipfile) from the real
``cluster_gpu_number.csv`` files and from the synthetic output, never read back from
our own results.
"""

from __future__ import annotations

import csv
import hashlib
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

from gpu_trace.errors import GpuTraceError, InputError
from gpu_trace.loaders import ingest
from gpu_trace.loaders.base import IngestReport
from gpu_trace.store.catalog import connect
from gpu_trace.store.parquet import dataset_path, read_table
from tests.conftest import SAMPLES
from tests.helios_common import DATA, FIXTURES, GOOD, HELIOS, LOG_HEADER, lines

BAD = FIXTURES / "bad" / "Saturn" / "cluster_log.csv"
REAL = SAMPLES / "helios"


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, sec: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, sec, tzinfo=UTC)


def jobs(store: Path) -> dict[str, dict[str, object]]:
    frame = pl.from_arrow(read_table(store, "jobs", "helios"))
    assert isinstance(frame, pl.DataFrame)
    return {r["job_id"]: r for r in frame.iter_rows(named=True)}


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
