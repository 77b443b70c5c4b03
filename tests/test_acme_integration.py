"""AcmeTrace: integration tests (job traces and wide utilization CSVs ingested into a
real store).

Expected values are worked out by hand from the README's example rows (quoted in
the comments) and from the small files written in each test."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpu_trace.errors import InputWarning
from gpu_trace.loaders import LOADERS, ingest
from gpu_trace.store.parquet import dataset_path, read_table
from tests.acme_common import _jobs, _write

SEREN_HEADER = (
    "job_id,user,node_num,gpu_num,cpu_num,type,state,submit_time,start_time,end_time,"
    "duration,queue,gpu_time"
)
SEREN_ROWS = (
    "5778432,u5907,1,8,128,Other,FAILED,2023-03-01 00:18:22+08:00,2023-03-01 00:18:54+08:00,"
    "2023-03-01 00:20:51+08:00,117,32,936.0",
    "5778469,u5907,1,8,128,Other,COMPLETED,2023-03-01 00:23:58+08:00,2023-03-01 00:24:11+08:00,"
    "2023-03-01 01:09:04+08:00,2693,13,21544.0",
)
KALOS_HEADER = (
    "job_id,user,node_num,gpu_num,cpu_num,mem_per_pod_GB,shared_mem_per_pod,type,state,"
    "submit_time,start_time,end_time,fail_time,stop_time,duration,queue,gpu_time"
)
KALOS_ROWS = (
    "dlctk696s0jbvitv,uf794,8,64,960,1000,100.0,Other,FAILED,2023-05-17 11:00:58+00:00,"
    "2023-05-17 11:01:08+00:00,2023-05-17 11:01:16+00:00,2023-05-17 11:01:16+00:00,,18,10.0,"
    "1152.0",
    "dlc1t2ypl09b8qtp,uf794,8,64,960,1000,100.0,Other,CANCELLED,2023-05-17 11:28:42+00:00,"
    "2023-05-17 11:28:54+00:00,2023-05-17 11:30:04+00:00,,2023-05-17 11:30:04+00:00,82,12.0,"
    "5248.0",
)


def utc(year: int, month: int, day: int, hour: int, minute: int, second: int) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def test_readme_rows_become_canonical_jobs(tmp_path: Path) -> None:
    """The README's four example rows, every canonical value checked by hand."""
    _write(tmp_path / "in/trace_seren.csv", SEREN_HEADER, *SEREN_ROWS)
    _write(tmp_path / "in/trace_kalos.csv", KALOS_HEADER, *KALOS_ROWS)
    report = ingest(LOADERS["acme"], tmp_path / "in", tmp_path / "store")
    assert report.totals == (4, 4, 0)
    jobs = _jobs(tmp_path / "store")
    seren = jobs.filter(pl.col("job_id") == "5778432").row(0, named=True)
    # 00:18:22+08:00 is 16:18:22 UTC the day before; start 32 s later; end 117 s after
    assert seren["submit_time"] == utc(2023, 2, 28, 16, 18, 22)
    assert seren["end_time"] == utc(2023, 2, 28, 16, 20, 51)
    assert (seren["queue_s"], seren["run_s"]) == (32.0, 117.0)
    assert (seren["gpus"], seren["cpus"], seren["nodes"]) == (8.0, 128.0, 1)
    assert (seren["status"], seren["raw_status"], seren["workload_type"]) == (
        "failed",
        "FAILED",
        "Other",
    )
    assert seren["source_tz"] == "Asia/Shanghai" and seren["mem_bytes"] is None
    assert (seren["dataset"], seren["cluster"], seren["user"]) == ("seren", "seren", "u5907")
    kalos = jobs.filter(pl.col("job_id") == "dlctk696s0jbvitv").row(0, named=True)
    # ran 11:01:08 .. 11:01:16 = 8 s (the file's duration 18 is end - submit)
    assert (kalos["queue_s"], kalos["run_s"]) == (10.0, 8.0)
    # 1000 GB per pod x 8 pods (one per node) = 8e12 bytes
    assert kalos["mem_bytes"] == 8_000_000_000_000
    assert kalos["source_tz"] == "UTC" and kalos["status"] == "failed"
    cancelled = jobs.filter(pl.col("job_id") == "dlc1t2ypl09b8qtp").row(0, named=True)
    assert cancelled["status"] == "cancelled" and cancelled["run_s"] == 70.0
    meta = pq.read_metadata(dataset_path(tmp_path / "store", "jobs", "acme", "kalos")).metadata
    assert meta[b"gpu_trace.duration_mismatch_rows"] == b"2"  # 18 != 8 and 82 != 70
    assert meta[b"gpu_trace.fail_time_mismatch_rows"] == b"0"
    seren_meta = pq.read_metadata(dataset_path(tmp_path / "store", "jobs", "acme", "seren"))
    assert seren_meta.metadata[b"gpu_trace.duration_mismatch_rows"] == b"0"


def test_end_time_falls_back_to_fail_and_stop_time(tmp_path: Path) -> None:
    row = KALOS_ROWS[0].replace(
        "2023-05-17 11:01:16+00:00,2023-05-17 11:01:16+00:00", ",2023-05-17 11:01:16+00:00"
    )
    _write(tmp_path / "trace_kalos.csv", KALOS_HEADER, row)
    ingest(LOADERS["acme"], tmp_path / "trace_kalos.csv", tmp_path / "store")
    job = _jobs(tmp_path / "store").row(0, named=True)
    assert job["end_time"] == utc(2023, 5, 17, 11, 1, 16) and job["run_s"] == 8.0


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        (SEREN_ROWS[0].replace(",1,8,128,", ",x,8,128,"), "node_num 'x' is not a number"),
        (SEREN_ROWS[0].replace(",1,8,128,", ",1.5,8,128,"), "node_num '1.5' is not a whole"),
        (SEREN_ROWS[0].replace(",1,8,128,", ",1,-8,128,"), "gpu_num is negative"),
        (SEREN_ROWS[0].replace("FAILED", ""), "state is missing"),
        (SEREN_ROWS[0].rsplit(",", 1)[0], "expected 13 fields, found 12"),
        (SEREN_ROWS[0].replace("2023-03-01 00:18:22+08:00", "yesterday"), "submit_time 'yes"),
        (
            SEREN_ROWS[0].replace("2023-03-01 00:18:54+08:00", "2023-03-01 00:10:00+08:00"),
            "start_time is before submit_time",
        ),
        (
            SEREN_ROWS[0].replace("2023-03-01 00:20:51+08:00", "2023-03-01 00:18:00+08:00"),
            "end_time is before start_time",
        ),
        (SEREN_ROWS[0].replace("2023-03-01 00:18:22", "9999-12-31 23:59:59"), "out of range"),
        ("", "empty line"),
    ],
)
def test_bad_job_rows_are_quarantined_with_line_and_reason(
    tmp_path: Path, row: str, reason: str
) -> None:
    _write(tmp_path / "trace_seren.csv", SEREN_HEADER, SEREN_ROWS[1], row, SEREN_ROWS[1])
    report = ingest(LOADERS["acme"], tmp_path / "trace_seren.csv", tmp_path / "store")
    assert report.totals == (3, 2, 1)
    q = read_table(tmp_path / "store", "quarantine", "acme").to_pylist()
    assert len(q) == 1 and q[0]["locator"] == "line 3" and reason in q[0]["reason"]
    assert q[0]["raw"] == row and q[0]["table"] == "jobs"


def test_naive_times_are_read_in_tz(tmp_path: Path) -> None:
    """No offset written: read in --tz (America/New_York is UTC-4 in March 2023 after
    the 12th, UTC-5 before)."""
    row = SEREN_ROWS[0].replace("+08:00", "").replace("2023-03-01", "2023-03-20")
    _write(tmp_path / "trace_seren.csv", SEREN_HEADER, row)
    ingest(LOADERS["acme"], tmp_path / "trace_seren.csv", tmp_path / "s", tz="America/New_York")
    job = _jobs(tmp_path / "s").row(0, named=True)
    assert job["submit_time"] == utc(2023, 3, 20, 4, 18, 22)
    assert job["source_tz"] == "America/New_York"


def _util(folder: Path, name: str, *lines: str) -> Path:
    return _write(folder / name, *lines)


def test_wide_utilization_files_become_long_samples(tmp_path: Path) -> None:
    """Each non-empty cell is one sample in the canonical unit; an empty cell is none;
    a bad cell and a bad line are quarantined with their line numbers."""
    seren = tmp_path / "utilization" / "seren"
    _util(
        seren,
        "FB_USED.csv",
        "Time,10.140.1.10-0,10.140.1.10-7",
        "2023-07-01 08:00:00+08:00,100.0,",  # 100 MiB = 104,857,600 bytes; empty: none
        "2023-07-01 08:00:15+08:00,-1.0,2.5",  # negative: quarantined; 2.5 MiB kept
        "2023-07-01 08:00:30+08:00,1.0",  # one field short: the whole line
    )
    _util(
        seren,
        "SM_ACTIVE.csv",
        "Time,lingjun-pod9-0016-3",
        "2023-07-01 08:00:00+08:00,55.5",  # percent of the DCGM ratio: 0.555
        "2023-07-01 08:00:15+08:00,100.5",  # above 100 %: quarantined
    )
    _util(
        seren, "NODE_MEMORY_UTILIZATION.csv", "Time,10.140.1.10", "2023-07-01 08:00:00+08:00,42.5"
    )
    report = ingest(LOADERS["acme"], tmp_path / "utilization", tmp_path / "store")
    by = {
        (r.file, r.table): (r.rows_read, r.rows_written, r.rows_quarantined) for r in report.lines
    }
    assert by[("FB_USED.csv", "gpu_samples")] == (4, 2, 2)
    assert by[("SM_ACTIVE.csv", "gpu_samples")] == (2, 1, 1)
    assert by[("NODE_MEMORY_UTILIZATION.csv", "host_samples")] == (1, 1, 0)
    g = pl.from_arrow(read_table(tmp_path / "store", "gpu_samples", "acme"))
    assert isinstance(g, pl.DataFrame)
    fb = g.filter(pl.col("metric") == "mem_used_bytes").sort("time")
    assert fb["value"].to_list() == [104_857_600.0, 2.5 * 1024 * 1024]
    assert fb["gpu_index"].to_list() == [0, 7] and fb["host"].to_list() == ["10.140.1.10"] * 2
    assert fb["time"][0] == utc(2023, 7, 1, 0, 0, 0) and set(fb["unit"]) == {"bytes"}
    sm = g.filter(pl.col("metric") == "sm_active_ratio").row(0, named=True)
    assert (sm["host"], sm["gpu_index"], sm["value"]) == ("lingjun-pod9-0016", 3, 0.555)
    assert sm["raw_field"] == "lingjun-pod9-0016-3" and sm["cluster"] == "seren"
    h = read_table(tmp_path / "store", "host_samples", "acme").to_pylist()
    assert [(r["metric"], r["value"], r["unit"]) for r in h] == [("mem_util_pct", 42.5, "pct")]
    q = {
        (r["file"], r["locator"]): r["reason"]
        for r in read_table(tmp_path / "store", "quarantine", "acme").to_pylist()
    }
    assert q[("FB_USED.csv", "line 3")] == "10.140.1.10-0 value '-1.0' is negative"
    assert q[("FB_USED.csv", "line 4")] == "expected 3 fields, found 2"
    assert q[("SM_ACTIVE.csv", "line 3")] == "lingjun-pod9-0016-3 value '100.5' is outside 0-100 %"
    meta = pq.read_metadata(
        dataset_path(tmp_path / "store", "gpu_samples", "acme", "seren-fb_used")
    ).metadata
    assert meta[b"gpu_trace.empty_cells"] == b"1"


def test_xid_cells_become_events_and_zero_is_counted(tmp_path: Path) -> None:
    f = _util(
        tmp_path / "kalos",
        "XID_ERRORS.csv",
        "Time,172.31.15.112-6,172.31.15.118-2",
        "2023-08-15 15:30:15+08:00,0.0,0.0",
        "2023-08-15 15:30:30+08:00,0.0,43.0",
        "2023-08-15 15:30:45+08:00,31.5,",
    )
    report = ingest(LOADERS["acme"], f, tmp_path / "store")
    by = {r.table: (r.rows_read, r.rows_written, r.rows_quarantined) for r in report.lines}
    # 3 zero cells (no event), one XID 43, one non-whole value, one empty cell
    assert by == {"gpu_samples": (1, 0, 1), "events": (1, 1, 0)}
    ev = read_table(tmp_path / "store", "events", "acme").to_pylist()
    assert [(e["host"], e["gpu_index"], e["kind"], e["code"]) for e in ev] == [
        ("172.31.15.118", 2, "xid", 43)
    ]
    assert ev[0]["time"] == utc(2023, 8, 15, 7, 30, 30)
    meta = pq.read_metadata(
        dataset_path(tmp_path / "store", "gpu_samples", "acme", "kalos-xid_errors")
    ).metadata
    assert meta[b"gpu_trace.no_event_cells"] == b"3"


def test_folder_skips_what_it_cannot_read_with_a_warning(tmp_path: Path) -> None:
    _write(tmp_path / "data/job_trace/trace_seren.csv", SEREN_HEADER, SEREN_ROWS[0])
    _write(tmp_path / "data/job_trace/trace_previous_work/helios_trace.csv", "job_id,x", "1,2")
    _util(
        tmp_path / "data/utilization/seren",
        "NODE_IB_SEND.csv",
        "Time,a",
        "2023-07-01 08:00:00+08:00,1",
    )
    with pytest.warns(InputWarning) as caught:
        report = ingest(LOADERS["acme"], tmp_path / "data", tmp_path / "store")
    assert report.totals == (1, 1, 0)
    text = " ".join(str(w.message) for w in caught)
    assert "helios_trace.csv: skipped" in text and "NODE_IB_SEND.csv: skipped" in text


_CELL = st.one_of(
    st.sampled_from(["", "0.0", "43.0", "1e3", "nan", "-1", "abc", "100.0", " 5 ", "1,2"]),
    st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\r\n"), max_size=6),
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    metric=st.sampled_from(["GPU_UTIL", "XID_ERRORS", "NODE_CPU_UTILIZATION", "FB_USED"]),
    rows=st.lists(
        st.tuples(
            st.sampled_from(["2023-07-01 08:00:00+08:00", "2023-07-01 08:00:15", "x", ""]),
            st.lists(_CELL, min_size=1, max_size=4),
        ),
        max_size=6,
    ),
)
def test_utilization_fuzz_accounts_for_every_line(
    tmp_path_factory: pytest.TempPathFactory, metric: str, rows: list[tuple[str, list[str]]]
) -> None:
    """Random cells and lines: no exception but a one-line InputError, and read =
    written + quarantined; every bad line or cell is in quarantine with its line."""
    folder = tmp_path_factory.mktemp("u")
    cols = ["10.0.0.1", "10.0.0.2"] if metric.startswith("NODE") else ["10.0.0.1-0", "10.0.0.1-1"]
    lines = [f"Time,{','.join(cols)}", *(",".join([t, *cells]) for t, cells in rows)]
    f = _write(folder / f"{metric}.csv", *lines)
    report = ingest(LOADERS["acme"], f, folder / "store")
    for r in report.lines:
        assert r.rows_read == r.rows_written + r.rows_quarantined
    q = read_table(folder / "store", "quarantine", "acme").to_pylist()
    assert {r["locator"] for r in q} <= {f"line {i}" for i in range(2, len(lines) + 1)}
    # a line is rejected whole, or each of its non-empty cells is one record
    records = sum(r.rows_read for r in report.lines)
    # the data file's footer (not the quarantine's or ingests' file of the same dataset,
    # which an rglob may find first)
    data = [
        p
        for p in (folder / "store" / "current").rglob(f"*{metric.lower()}.parquet")
        if p.parent.parent.name not in ("quarantine", "ingests")
    ]
    no_event = sum(
        int((pq.read_metadata(p).metadata or {}).get(b"gpu_trace.no_event_cells", b"0"))
        for p in data
    )
    # cells as the file holds them: a drawn cell may itself hold a comma ("1,2")
    present = [sum(1 for c in ",".join(cells).split(",") if c.strip()) for _, cells in rows]
    assert sum(min(1, p) for p in present) <= records + no_event <= sum(max(1, p) for p in present)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    edits=st.lists(
        st.tuples(st.integers(0, 12), st.sampled_from(["", "x", "-1", "1.5", "2023-13-01", ","])),
        max_size=3,
    ),
    crlf=st.booleans(),
)
def test_job_trace_fuzz_reads_every_line(
    tmp_path_factory: pytest.TempPathFactory, edits: list[tuple[int, str]], crlf: bool
) -> None:
    """Any field of a Seren row replaced: the line is written or quarantined, never lost."""
    fields = SEREN_ROWS[0].split(",")
    for i, value in edits:
        fields[i] = value
    folder = tmp_path_factory.mktemp("j")
    eol = "\r\n" if crlf else "\n"
    f = folder / "trace_seren.csv"
    f.write_text(eol.join([SEREN_HEADER, SEREN_ROWS[1], ",".join(fields)]) + eol)
    report = ingest(LOADERS["acme"], f, folder / "store")
    assert report.totals[0] == 2 == report.totals[1] + report.totals[2]
