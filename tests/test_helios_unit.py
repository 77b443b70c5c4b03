"""helios: unit tests (parsers, fast paths, property-based tests).

The Helios loader and synthetic generator.

Expected values are hand-computed from the fixtures (the three README rows of
HeliosData's README, a ``jobname`` variant, a file of bad rows) or computed
here with the standard library (csv, datetime, zipfile) from the real
``cluster_gpu_number.csv`` files and from the synthetic output, never read back from
our own results.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from gpu_trace.errors import InputError
from gpu_trace.loaders import helios, ingest
from gpu_trace.loaders.textfile import LINE, RAW, REASON, file_info
from gpu_trace.store.catalog import connect
from gpu_trace.synth import get_writer
from tests.helios_common import DATA, GOOD, HELIOS, LOG_HEADER, lines

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
