"""Adversarial inputs through the real CLI: byte-order marks, out-of-range values,
truncated files, huge lines, and files without timestamps.

Every expected value is written out by hand from the bytes the test writes (or the
line of a bundled sample it names), never read back from our own output."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest
from polars.testing import assert_frame_equal
from typer.testing import CliRunner, Result

from gpu_trace.cli import app
from gpu_trace.errors import InputError, clip
from gpu_trace.loaders import helios
from gpu_trace.loaders.textfile import (
    LINE,
    RAW,
    RAW_LIMIT,
    capped,
    file_info,
    read_header,
    scan_lines,
)
from gpu_trace.store.catalog import connect
from gpu_trace.store.parquet import dataset_path
from tests.conftest import ROOT, SAMPLES
from tests.peak_rss import cli_peak_growth

runner = CliRunner()
BOM = b"\xef\xbb\xbf"
TEL = SAMPLES / "telemetry"
PAI = ROOT / "tests" / "fixtures" / "pai2020" / "basic"
MIB = 1024 * 1024


def ingest(kind: str, path: Path, store: Path, *extra: str) -> Result:
    return runner.invoke(app, ["ingest", kind, str(path), "--store", str(store), *extra])


def sql(store: Path, query: str) -> list[tuple[object, ...]]:
    return connect(store).execute(query).fetchall()


def footer(store: Path, table: str, source: str, dataset: str) -> dict[str, str]:
    meta = pq.read_metadata(dataset_path(store, table, source, dataset)).metadata or {}
    return {k.decode(): v.decode() for k, v in meta.items()}


def one_line_error(result: Result) -> str:
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    return lines[0]


# -- UTF-8 byte-order mark --------------------------------------------------------------


def test_textfile_drops_bom_keeps_line_numbers_and_count(tmp_path: Path) -> None:
    f = tmp_path / "x.csv"
    f.write_bytes(BOM + b"a,b\n1,2\n3,4\n")
    assert read_header(f) == "a,b"
    info = file_info(f, header_lines=0)
    assert info.bom and info.records == 3
    lines = scan_lines(info).collect()
    assert lines[LINE].to_list() == [1, 2, 3]
    assert lines[RAW].to_list() == ["a,b", "1,2", "3,4"]


def test_smi_query_csv_with_bom_keeps_its_timestamps(tmp_path: Path) -> None:
    """Before: the BOM hid the ``timestamp`` header, so every sample got the file's
    mtime. The sample's one data line is stamped 2026/07/14 08:12:53.353."""
    f = tmp_path / "q.csv"
    f.write_bytes(BOM + (TEL / "nvidia-smi-query-gpu-h100.csv").read_bytes())
    store = tmp_path / "store"
    result = ingest("nvidia-smi", f, store)
    assert result.exit_code == 0, result.output
    assert "warning" not in result.stderr
    assert sql(store, "select distinct time from gpu_samples") == [
        (dt.datetime(2026, 7, 14, 8, 12, 53, 353000, tzinfo=dt.UTC),)
    ]
    assert footer(store, "gpu_samples", "nvidia-smi", "q")["gpu_trace.time_basis"] == "file"


def test_smi_dmon_with_bom(tmp_path: Path) -> None:
    f = tmp_path / "d.txt"
    f.write_bytes(BOM + b"# gpu    pwr     sm\n# Idx      W      %\n    0    631    100\n")
    store = tmp_path / "store"
    result = ingest("nvidia-smi", f, store, "--start", "2024-01-01T00:00:00")
    assert result.exit_code == 0, result.output
    got = sql(store, "select metric, value, time from gpu_samples order by metric")
    t0 = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    assert got == [("gpu_util_pct", 100.0, t0), ("power_w", 631.0, t0)]


def test_dcgmi_with_bom(tmp_path: Path) -> None:
    f = tmp_path / "g.txt"
    f.write_bytes(BOM + b"#Entity   GPUTL   POWER\nID\nGPU 0     42      300.5\n")
    store = tmp_path / "store"
    result = ingest("dcgmi", f, store, "--start", "2024-01-01T00:00:00")
    assert result.exit_code == 0, result.output
    got = sql(store, "select metric, value from gpu_samples order by metric")
    assert got == [("gpu_util_pct", 42.0), ("power_w", 300.5)]


def test_prometheus_with_bom(tmp_path: Path) -> None:
    """A BOM before the first sample used to quarantine that line as not a sample."""
    f = tmp_path / "m.prom"
    f.write_bytes(BOM + b'DCGM_FI_DEV_GPU_UTIL{gpu="0"} 57\n')
    store = tmp_path / "store"
    result = ingest("prometheus", f, store, "--time", "2024-01-01T00:00:00Z")
    assert result.exit_code == 0, result.output
    assert "read 1 = written 1 + quarantined 0" in result.stderr
    assert sql(store, "select gpu_index, value from gpu_samples") == [(0, 57.0)]


def test_openb_with_bom(tmp_path: Path) -> None:
    f = tmp_path / "openb_pod_list_default.csv"
    f.write_bytes(BOM + (SAMPLES / "openb" / "openb_pod_list_default.csv").read_bytes())
    store = tmp_path / "store"
    result = ingest("openb", f, store)
    assert result.exit_code == 0, result.output
    # first data line: openb-pod-0000,12000,16384,1,1000,,LS,Running,0,12537496,0
    assert sql(store, "select job_id, cpus from jobs order by job_id limit 1") == [
        ("openb-pod-0000", 12.0)
    ]


def test_pai_headerless_table_with_bom(tmp_path: Path) -> None:
    """The first key of a headerless PAI table used to start with U+FEFF."""
    folder = tmp_path / "pai"
    shutil.copytree(PAI, folder)
    job = folder / "pai_job_table.csv"
    job.write_bytes(BOM + job.read_bytes())
    store = tmp_path / "store"
    result = ingest("pai2020", folder, store, "--tables", "job")
    assert result.exit_code == 0, result.output
    # line 1 of the fixture: j1,i1,u1,Terminated,4550879.0,4551416.0
    ids = [r[0] for r in sql(store, "select job_id from jobs")]
    assert "j1" in ids and not any(str(i).startswith("\ufeff") for i in ids)


def test_chronus_and_gavel_with_bom(tmp_path: Path) -> None:
    chronus = tmp_path / "c.csv"
    chronus.write_bytes(
        BOM + b"job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
        b"0,2,10,5,vgg,100,1\n"
    )
    store = tmp_path / "store"
    result = ingest("chronus", chronus, store)
    assert result.exit_code == 0, result.output
    assert sql(store, "select job_id, gpus, run_s from jobs") == [("0", 2.0, 100.0)]
    gavel = tmp_path / "g.trace"
    gavel.write_bytes(BOM + b"ResNet-18\tcmd\t-n\t1\t100\t5.0\t1\n")
    store2 = tmp_path / "store2"
    result = ingest("gavel", gavel, store2)
    assert result.exit_code == 0, result.output
    assert sql(store2, "select name, gpus from jobs") == [("ResNet-18", 1.0)]


def test_philly_machine_list_with_bom(tmp_path: Path) -> None:
    """Philly's machine list goes through the same shared reader (textfile.py)."""
    folder = tmp_path / "trace-data"
    folder.mkdir()
    f = folder / "cluster_machine_list"
    f.write_bytes(BOM + (ROOT / "tests/fixtures/philly/cluster_machine_list").read_bytes())
    store = tmp_path / "store"
    result = ingest("philly", f, store)
    assert result.exit_code == 0, result.output
    # fixture lines 2-3: "m1,8, 24GB" and "m2,8, 24GB"
    assert sql(store, "select machine_id, gpus from machines order by machine_id limit 2") == [
        ("m1", 8),
        ("m2", 8),
    ]


# -- times without a source --------------------------------------------------------------


def test_mtime_time_basis_is_announced(tmp_path: Path) -> None:
    """dmon prints no times: without --start the last tick is the file's mtime, and
    the user is told on stderr (and ``time_basis`` records it)."""
    f = tmp_path / "d.txt"
    f.write_text("# gpu    pwr\n# Idx      W\n    0    100\n    0    110\n")
    store = tmp_path / "store"
    result = ingest("nvidia-smi", f, store)
    assert result.exit_code == 0, result.output
    warnings = [ln for ln in result.stderr.splitlines() if ln.startswith("warning:")]
    assert len(warnings) == 1 and "relative" in warnings[0] and "--start" in warnings[0]
    assert footer(store, "gpu_samples", "nvidia-smi", "d")["gpu_trace.time_basis"] == "relative"
    with_start = ingest("nvidia-smi", f, store, "--start", "2024-01-01T00:00:00")
    assert with_start.exit_code == 0 and "warning" not in with_start.stderr


def test_query_csv_without_timestamp_column_warns(tmp_path: Path) -> None:
    f = tmp_path / "q.csv"
    f.write_text("index, utilization.gpu [%]\n0, 30 %\n")
    result = ingest("nvidia-smi", f, tmp_path / "store")
    assert result.exit_code == 0, result.output
    assert "warning:" in result.stderr and "no timestamps" in result.stderr


def test_prometheus_without_time_warns(tmp_path: Path) -> None:
    f = tmp_path / "m.prom"
    f.write_text('DCGM_FI_DEV_GPU_UTIL{gpu="0"} 57\n')
    result = ingest("prometheus", f, tmp_path / "store")
    assert result.exit_code == 0, result.output
    assert "warning:" in result.stderr and "--time" in result.stderr


# -- tracebacks ----------------------------------------------------------------------------

LOG_HEADER = (
    "job_id,user,vc,jobname,gpu_num,cpu_num,node_num,state,submit_time,start_time,"
    "end_time,duration,queue"
)
GOOD = "1,uA,vcB,n,1,1,1,COMPLETED,2020-06-09 18:41:01,2020-06-09 18:41:01,2020-06-09 18:41:02,1,0"


@pytest.mark.parametrize("tz", ["Asia/Shanghai", "America/New_York"])
def test_helios_time_out_of_range_is_quarantined(tmp_path: Path, tz: str) -> None:
    """``9999-12-31 23:59:59`` overflowed ``fixed_offset``; now line 3 is quarantined
    and both parse paths agree."""
    folder = tmp_path / "venus"
    folder.mkdir()
    f = folder / "cluster_log.csv"
    far = GOOD.replace("2020-06-09 18:41:02", "9999-12-31 23:59:59").replace("1,", "2,", 1)
    f.write_text(f"{LOG_HEADER}\n{GOOD}\n{far}\n{GOOD.replace('1,', '3,', 1)}\n")
    store = tmp_path / "store"
    result = ingest("helios", f, store, "--tz", tz)
    assert result.exit_code == 0, result.output
    assert "read 3 = written 2 + quarantined 1" in result.stderr
    (locator, reason), *_ = sql(store, "select locator, reason from quarantine")
    assert locator == "line 3"
    assert reason.startswith("end_time '9999-12-31 23:59:59' is a time out of range")
    names = helios.header_names(f)
    info = file_info(f, header_lines=1, check_utf8=False)
    frame = helios.read_text(f, names)
    fast = helios.read_clean(frame, info, names, tz)
    assert fast is not None and fast["_ok"].to_list() == [True, False, True]
    combined, _ = helios.parse(info, names, tz, frame)
    slow = helios.parse_log(info, names, tz).collect()
    assert_frame_equal(combined.drop(RAW, strict=False).sort(LINE), slow.sort(LINE))


def test_helios_capacity_date_out_of_range_is_quarantined(tmp_path: Path) -> None:
    f = tmp_path / "Venus_cluster_gpu_number.csv"
    f.write_text("date,vcA,total\n2020-04-01,8,8\n9999-12-31,8,8\n0001-01-01,8,8\n")
    store = tmp_path / "store"
    result = ingest("helios", f, store)
    assert result.exit_code == 0, result.output
    # a good line is 2 records (vcA, total), a rejected line 1
    assert "read 4 = written 2 + quarantined 2" in result.stderr
    assert sorted(sql(store, "select locator, reason from quarantine")) == [
        ("line 3", "date '9999-12-31' is a time out of range (1970-01-01 to 2099-12-31 23:59:59)"),
        ("line 4", "date '0001-01-01' is a time out of range (1970-01-01 to 2099-12-31 23:59:59)"),
    ]


def test_fixed_offset_near_the_end_of_time() -> None:
    lo = dt.datetime(2020, 1, 1)
    assert helios.fixed_offset("Asia/Shanghai", lo, dt.datetime(9999, 12, 31, 23, 59, 59)) is None


@pytest.mark.parametrize("text", ["# gpu   \n", "# gpu\n# Idx\n"])
def test_truncated_dmon_header_is_one_line_error(tmp_path: Path, text: str) -> None:
    f = tmp_path / "d.txt"
    f.write_text(text)
    line = one_line_error(ingest("nvidia-smi", f, tmp_path / "store"))
    assert "line 1" in line and "no metric column" in line


@pytest.mark.parametrize(
    "text",
    [
        "# gpu    pwr  gtemp\n",  # header, no units line
        "# gpu    pwr  gtemp\n# Idx W C\n",  # header only
        "# gpu  pid type sm mem command\n",  # pmon header, no units line
    ],
)
def test_header_only_monitor_files_load_zero_rows(tmp_path: Path, text: str) -> None:
    f = tmp_path / "d.txt"
    f.write_text(text)
    result = ingest("nvidia-smi", f, tmp_path / "store")
    assert result.exit_code == 0, result.output
    assert "read 0 = written 0 + quarantined 0" in result.stderr


def test_gavel_arrivals_that_overflow_are_quarantined(tmp_path: Path) -> None:
    arrivals = ["9223372036854775808", "1e300", "inf", "nan", "-5", "7"]
    f = tmp_path / "g.trace"
    f.write_text("".join(f"ResNet-18\tcmd\t-n\t1\t100\t{a}\t1\n" for a in arrivals))
    store = tmp_path / "store"
    result = ingest("gavel", f, store)
    assert result.exit_code == 0, result.output
    assert "read 6 = written 1 + quarantined 5" in result.stderr
    got = dict(sql(store, "select locator, reason from quarantine"))
    assert got == {
        "line 1": "arrival_time 9.223372036854776e+18 is a time out of range (>= 4102444800 s)",
        "line 2": "arrival_time 1e+300 is a time out of range (>= 4102444800 s)",
        "line 3": "arrival_time inf is not finite",
        "line 4": "arrival_time NaN is not finite",
        "line 5": "arrival_time -5.0 is negative",
    }
    # line 6 arrives 7 s after the trace start (stored from 1970-01-01 UTC)
    assert sql(store, "select submit_time from jobs") == [
        (dt.datetime(1970, 1, 1, 0, 0, 7, tzinfo=dt.UTC),)
    ]


def test_negative_or_infinite_iterations_are_quarantined(tmp_path: Path) -> None:
    f = tmp_path / "c.csv"
    f.write_text(
        "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
        "0,1,10,-5,vgg,100,1\n1,1,10,inf,vgg,100,1\n2,1,10,5,vgg,-100,1\n3,1,10,5,vgg,100,1\n"
    )
    store = tmp_path / "store"
    result = ingest("chronus", f, store)
    assert result.exit_code == 0, result.output
    assert dict(sql(store, "select locator, reason from quarantine")) == {
        "line 2": "iterations -5.0 is negative",
        "line 3": "iterations inf is not finite",
        "line 4": "duration -100.0 is negative",
    }
    assert sql(store, "select job_id from jobs") == [("3",)]
    gavel = tmp_path / "g.trace"
    gavel.write_text("A\tcmd\t-n\t1\t-3\t5\t1\nB\tcmd\t-n\t1\tinf\t5\t1\n")
    result = ingest("gavel", gavel, tmp_path / "store2")
    assert "read 2 = written 0 + quarantined 2" in result.stderr


# -- range checks ----------------------------------------------------------------------------


def test_smi_query_util_over_100_and_free_over_total(tmp_path: Path) -> None:
    """Cells are the unit of account: 2 lines x 3 kept fields = 6 records; line 2's
    150 % and its 100 MiB free of 80 MiB total are quarantined, 4 are written."""
    f = tmp_path / "q.csv"
    f.write_text(
        "timestamp, index, utilization.gpu [%], memory.free [MiB], memory.total [MiB]\n"
        "2024/01/01 00:00:00.000, 0, 150 %, 100 MiB, 80 MiB\n"
        "2024/01/01 00:00:01.000, 0, 50 %, 10 MiB, 80 MiB\n"
    )
    store = tmp_path / "store"
    result = ingest("nvidia-smi", f, store)
    assert result.exit_code == 0, result.output
    assert "read 6 = written 4 + quarantined 2" in result.stderr
    assert sorted(sql(store, "select locator, reason from quarantine")) == [
        ("line 2", "memory.free value '100 MiB' exceeds mem_total_bytes on the same line"),
        ("line 2", "utilization.gpu value '150 %' is outside 0-100 %"),
    ]
    assert sorted(sql(store, "select metric, value from gpu_samples")) == [
        ("gpu_util_pct", 50.0),
        ("mem_free_bytes", 10.0 * MIB),
        ("mem_total_bytes", 80.0 * MIB),
        ("mem_total_bytes", 80.0 * MIB),
    ]


def test_dcgmi_and_prometheus_util_over_100(tmp_path: Path) -> None:
    f = tmp_path / "g.txt"
    f.write_text("#Entity   GPUTL   FBTTL   FBFRE\nID\nGPU 0     150     80      100\n")
    store = tmp_path / "store"
    result = ingest("dcgmi", f, store, "--start", "2024-01-01T00:00:00")
    assert result.exit_code == 0, result.output
    assert "read 3 = written 1 + quarantined 2" in result.stderr
    assert sql(store, "select metric, value from gpu_samples") == [("mem_total_bytes", 80.0 * MIB)]
    prom = tmp_path / "m.prom"
    prom.write_text('DCGM_FI_DEV_GPU_UTIL{gpu="0"} 101\nDCGM_FI_DEV_GPU_UTIL{gpu="1"} 99\n')
    store2 = tmp_path / "store2"
    result = ingest("prometheus", prom, store2, "--time", "2024-01-01T00:00:00Z")
    assert "read 2 = written 1 + quarantined 1" in result.stderr
    assert sql(store2, "select reason from quarantine") == [
        ("DCGM_FI_DEV_GPU_UTIL value '101' is outside 0-100 %",)
    ]


def test_pmon_util_over_100(tmp_path: Path) -> None:
    f = tmp_path / "p.txt"
    f.write_text(
        "# gpu   pid  type   sm   mem   command\n# Idx     #   C/G    %     %   name\n"
        "    0   11   C     150   10    a\n    0   12   C      99   10    b\n"
    )
    store = tmp_path / "store"
    result = ingest("nvidia-smi", f, store, "--start", "2024-01-01T00:00:00")
    assert result.exit_code == 0, result.output
    assert "read 2 = written 1 + quarantined 1" in result.stderr
    assert sql(store, "select reason from quarantine") == [("sm '150' is outside 0-100 %",)]
    assert sql(store, "select pid, sm_util_pct from gpu_processes") == [(12, 99.0)]


def test_pai_machine_cpu_over_100(tmp_path: Path) -> None:
    folder = tmp_path / "pai"
    shutil.copytree(PAI, folder)
    metric = folder / "pai_machine_metric.csv"
    lines = metric.read_text().splitlines()
    # fixture line 2: w6,m4,320,0,1.0,2.0,3.0,150.5,4.0,5.0,6.0,7.0 -> machine_cpu 170.0
    lines[1] = lines[1].rsplit(",", 1)[0] + ",170.0"
    metric.write_text("\n".join(lines) + "\n")
    store = tmp_path / "store"
    result = ingest("pai2020", folder, store, "--tables", "machine_metric")
    assert result.exit_code == 0, result.output
    assert sql(store, "select reason from quarantine where locator = 'line 2'") == [
        ("machine_cpu 170.0 is above 100 %",)
    ]
    # machine_gpu 150.5 on the same line is a sum over GPUs: kept
    assert sql(
        store, "select value from usage where raw_field = 'machine_gpu' and value > 100"
    ) == [(150.5,)]


# -- capped text -------------------------------------------------------------------------------


def test_clip() -> None:
    assert clip("abc", 5) == "abc"
    assert clip("a" * 10, 4) == "aaaa… [10 characters]"
    assert clip("x" * 1_000_000) == "x" * 300 + "… [1000000 characters]"
    err = InputError("f.csv", "bad header " + "y" * 5000, "line 1")
    assert len(str(err)) < 400 and str(err).endswith("[5011 characters]")


def test_huge_header_error_is_capped(tmp_path: Path) -> None:
    f = tmp_path / "openb_pod_list_default.csv"
    f.write_text("z" * 500_000 + "\n1\n")  # under the 1 MiB line cap: read, then clipped
    line = one_line_error(ingest("openb", f, tmp_path / "store"))
    assert len(line) < 600 and "… [" in line and "characters]" in line


def test_huge_quarantined_line_is_capped(tmp_path: Path) -> None:
    f = tmp_path / "openb_pod_list_default.csv"
    header = (SAMPLES / "openb" / "openb_pod_list_default.csv").read_text().splitlines()[0]
    long = "p," + "9" * 10_000
    f.write_text(f"{header}\n{long}\n")
    store = tmp_path / "store"
    result = ingest("openb", f, store)
    assert result.exit_code == 0, result.output
    ((raw, reason),) = sql(store, "select raw, reason from quarantine")
    assert raw == long[:RAW_LIMIT] + "… [10002 characters]"
    assert reason == "expected 11 fields, found 2"


def test_quarantine_reason_quoting_huge_field_is_capped(tmp_path: Path) -> None:
    f = tmp_path / "c.csv"
    f.write_text(
        "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
        f"0,{'x' * 5000},10,5,vgg,100,1\n"
    )
    store = tmp_path / "store"
    result = ingest("chronus", f, store)
    assert result.exit_code == 0, result.output
    ((reason,),) = sql(store, "select reason from quarantine")
    full = f"num_gpu '{'x' * 5000}' is not a valid float"  # 5,031 characters
    assert reason == full[:300] + "… [5031 characters]"


def test_pl_marker_matches_clip() -> None:
    """The polars cap and :func:`clip` write the same marker."""
    text = "q" * 5000
    got = pl.select(capped(pl.lit(text), 300)).item()
    assert got == clip(text, 300) == "q" * 300 + "… [5000 characters]"


# -- bounded lines (issue 25: memory bounded by design, not by input luck) -----------------

SACCT_HEADER = "JobID|User|State|Submit|Start|End|Elapsed|AllocTRES|NodeList"
"""sacct(1) -P: "|"-separated fields, one header line naming them (--parsable2)."""
ACME_HEADER = (
    "job_id,user,node_num,gpu_num,cpu_num,type,state,submit_time,start_time,end_time,"
    "duration,queue,gpu_time"
)  # the release's trace_seren.csv header


def _long_line_file(tmp_path: Path, kind: str, body: bytes) -> Path:
    """A file of ``kind`` whose header is fine and whose line 2 is ``body`` (no newline)."""
    if kind == "slurm":
        f = tmp_path / "c.psv"
        head = SACCT_HEADER
    elif kind == "acme":
        f = tmp_path / "trace_seren.csv"
        head = ACME_HEADER
    elif kind == "helios":
        (tmp_path / "venus").mkdir(exist_ok=True)
        f = tmp_path / "venus" / "cluster_log.csv"
        head = LOG_HEADER
    elif kind == "openb":
        f = tmp_path / "openb_pod_list_default.csv"
        head = (SAMPLES / "openb" / "openb_pod_list_default.csv").read_text().splitlines()[0]
    else:
        f = tmp_path / "m.prom"
        head = 'DCGM_FI_DEV_GPU_UTIL{gpu="0"} 57'
    with f.open("wb") as fh:
        fh.write(head.encode() + b"\n" + body)
    return f


@pytest.mark.parametrize("kind", ["slurm", "acme", "helios", "openb", "prometheus"])
def test_line_over_one_mib_is_one_error(tmp_path: Path, kind: str) -> None:
    """A line of 1 MiB + 1 byte (no newline: a binary or truncated file) fails the file
    with one line naming it and the line, before any parser reads it."""
    f = _long_line_file(tmp_path, kind, b"7" * (MIB + 1))
    extra = {"prometheus": ["--time", "2024-01-01T00:00:00Z"], "slurm": ["--tz", "UTC"]}.get(
        kind, []
    )
    line = one_line_error(ingest(kind, f, tmp_path / "store", *extra))
    assert f"{f}: line 2: line is longer than {MIB} bytes" in line
    # exactly 1 MiB is still a line (quarantined or read as the format says, never an error)
    f.unlink()
    g = _long_line_file(tmp_path, kind, b"7" * MIB + b"\n")
    assert ingest(kind, g, tmp_path / "store2", *extra).exit_code == 0


def test_header_over_one_mib_is_one_error_naming_line_1(tmp_path: Path) -> None:
    f = tmp_path / "c.psv"
    f.write_bytes(b"J" * (2 * MIB))  # no newline at all
    line = one_line_error(ingest("slurm", f, tmp_path / "store", "--tz", "UTC"))
    assert f"{f}: line 1: line is longer than {MIB} bytes" in line


def _independent_first_long_line(data: bytes, limit: int) -> int | None:
    for n, line in enumerate(data.split(b"\n"), start=1):
        if len(line) > limit:
            return n
    return None


def test_line_cap_across_chunk_boundaries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The streaming check finds the first over-long line whatever the chunking, compared
    with a plain split on b"\\n" over many random files."""
    import random

    from gpu_trace.loaders import textfile

    rng = random.Random(25)
    f = tmp_path / "x.txt"
    for chunk in (1, 3, 7, 64):
        monkeypatch.setattr(textfile, "_CHUNK", chunk)
        for _ in range(60):
            data = b"".join(
                b"a" * rng.choice([0, 1, 4, 5, 6, 9]) + rng.choice([b"\n", b""])
                for _ in range(rng.randrange(1, 12))
            )
            f.write_bytes(data)
            want = _independent_first_long_line(data, 5)
            if want is None:
                assert file_info(f, 0, max_line=5).size_bytes == len(data)
            else:
                with pytest.raises(InputError, match=f"line {want}: line is longer than 5"):
                    file_info(f, 0, max_line=5)


@pytest.mark.parametrize("kind", ["slurm", "acme", "prometheus-range"])
def test_100_mb_without_a_newline_costs_no_more_than_a_chunk(tmp_path: Path, kind: str) -> None:
    """Before: the whole line was read (header readline, scan_lines, or the JSON reader):
    a 100 MB line cost > 200 MB, 1 GB cost 2.3 GB. Now the cost does not grow with the
    line: a fresh process's own peak (tests/peak_rss.py) grows by about as much for a
    100 MiB line as for one just past the limit (the imports and first chunks the
    command loads either way)."""

    def grown_mib(mib: int, name: str) -> int:
        folder = tmp_path / name
        folder.mkdir()
        big = folder / ("c.psv" if kind == "slurm" else "trace_seren.csv")
        if kind == "prometheus-range":
            big = folder / "r.json"
        with big.open("wb") as fh:
            block = b"9" * MIB
            for _ in range(mib):
                fh.write(block)
        args = ["-q", "ingest", kind, str(big), "--store", str(folder / "s")]
        args += {"prometheus-range": ["--max-answer-bytes", "10M"], "slurm": ["--tz", "UTC"]}.get(
            kind, []
        )
        code, grown_kib, errors = cli_peak_growth(args, ROOT)
        assert code == 1 and len(errors) == 1 and errors[0].startswith("error:"), errors
        assert "line 1: line is longer than" in errors[0]
        return grown_kib // 1024

    # just past the limit: 2 MiB (the line limit is 1 MiB), 11 MiB (the answer cap 10M)
    control = grown_mib(11 if kind == "prometheus-range" else 2, "control")
    big = grown_mib(100, "big")
    assert big - control < 40, (big, control)


# -- prometheus-range: answer cap, nesting, values -------------------------------------------


# Prometheus HTTP API (docs/querying/api.md, "Range queries" and "Range vectors"):
# {"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {...},
# "values": [[<unix_time>, "<sample_value>"], ...]}]}}
def _answer(*series: tuple[dict[str, str], list[list[object]]]) -> str:
    import json

    result = [{"metric": m, "values": v} for m, v in series]
    return json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}})


GOOD_SERIES = (
    {"__name__": "DCGM_FI_DEV_GPU_UTIL", "gpu": "0", "Hostname": "n1"},
    [[1700000000, "5"]],
)


def test_promrange_answer_over_the_cap_is_refused_before_reading(tmp_path: Path) -> None:
    """A pretty-printed answer (short lines) larger than --max-answer-bytes: one error
    from its size; the same answer under the cap reads."""
    import json

    values = [[1700000000 + 15 * i, "50"] for i in range(40_000)]
    doc = json.loads(_answer((GOOD_SERIES[0], values)))
    f = tmp_path / "r.json"
    f.write_text(json.dumps(doc, indent=1))  # ~1.6 MB over many lines
    size = f.stat().st_size
    line = one_line_error(ingest("prometheus-range", f, tmp_path / "s", "--max-answer-bytes", "1M"))
    assert f"one answer of {size} bytes, more than --max-answer-bytes (1000000)" in line
    ok = ingest("prometheus-range", f, tmp_path / "s", "--max-answer-bytes", "2M")
    assert ok.exit_code == 0 and "read 40000 = written 40000" in ok.stderr
    bad = ingest("prometheus-range", f, tmp_path / "s", "--max-answer-bytes", "0")
    assert bad.exit_code == 2 and "is not a size" in bad.stderr


def test_promrange_json_line_over_the_cap_is_one_error(tmp_path: Path) -> None:
    f = tmp_path / "r.jsonl"
    f.write_text(_answer(GOOD_SERIES) + "\n" + " " * 2_000_000 + _answer(GOOD_SERIES) + "\n")
    line = one_line_error(ingest("prometheus-range", f, tmp_path / "s", "--max-answer-bytes", "1M"))
    assert "line 2: line is longer than 1000000 bytes" in line


def test_promrange_cap_is_telemetry_pulls_body_cap() -> None:
    """Anything `telemetry pull --save` wrote (each answer <= its --max-body-bytes
    default) reads back with the default cap."""
    from gpu_trace.loaders.promrange import MAX_ANSWER_BYTES
    from gpu_trace.telemetry.promclient import MAX_BODY

    assert MAX_ANSWER_BYTES == MAX_BODY


def test_promrange_deep_nesting_never_a_traceback(tmp_path: Path) -> None:
    """~970 levels of [] parse in json.loads but could not be printed back into the
    quarantine (RecursionError traceback). Each JSON line is its own record."""
    deep = "[" * 970 + "]" * 970
    f = tmp_path / "r.jsonl"
    f.write_text(_answer(GOOD_SERIES) + "\n" + '{"status": ' + deep + "}\n" + deep + "\n")
    store = tmp_path / "s"
    result = ingest("prometheus-range", f, store)
    assert result.exit_code == 0, result.output
    assert "read 3 = written 1 + quarantined 2" in result.stderr
    got = dict(sql(store, "select locator, raw from quarantine"))
    assert set(got) == {"line 2", "line 3"}
    assert got["line 2"].startswith('{"status": [[[')  # the line as written
    single = tmp_path / "one.json"
    single.write_text(deep)
    one_line_error(ingest("prometheus-range", single, tmp_path / "s2"))


def test_promrange_xid_and_gpu_label_are_quarantined_not_bent(tmp_path: Path) -> None:
    """DCGM_FI_DEV_XID_ERRORS is "the last XID error encountered" (DCGM field 230, an
    int64): -1, NaN and 79.5 are no XID; before, 79.5 became event code 79 and -1 / NaN
    vanished as "no event". A ``gpu`` label of 1.5 names no GPU; before, its samples were
    filed under a null GPU."""
    xid = {"__name__": "DCGM_FI_DEV_XID_ERRORS", "gpu": "0", "Hostname": "n1"}
    samples = [[1700000000, "-1"], [1700000015, "NaN"], [1700000030, "79.5"], [1700000045, "79"]]
    util = {"__name__": "DCGM_FI_DEV_GPU_UTIL", "gpu": "1.5", "Hostname": "n1"}
    f = tmp_path / "r.json"
    f.write_text(_answer((xid, samples), (util, [[1700000000, "50"]])))
    store = tmp_path / "s"
    result = ingest("prometheus-range", f, store)
    assert result.exit_code == 0, result.output
    assert "read 5 = written 1 + quarantined 4" in result.stderr
    assert sorted(sql(store, "select locator, reason from quarantine")) == [
        ("series 1, sample 1", "DCGM_FI_DEV_XID_ERRORS value '-1' is not an XID or error count (a whole number >= 0)"),
        ("series 1, sample 2", "DCGM_FI_DEV_XID_ERRORS value 'NaN' is not an XID or error count"),
        ("series 1, sample 3", "DCGM_FI_DEV_XID_ERRORS value '79.5' is not an XID or error count (a whole number >= 0)"),
        ("series 2, sample 1", "gpu label '1.5' is not a GPU index (a whole number 0-32767)"),
    ]  # fmt: skip
    assert sql(store, "select code, gpu_index from events") == [(79, 0)]


# -- acme: absurd numbers and offsets ----------------------------------------------------------


def test_acme_xid_memory_and_offset_are_quarantined(tmp_path: Path) -> None:
    """AcmeTrace README: XID_ERRORS cells are the last XID per GPU; ``mem_per_pod_GB`` is a
    pod's memory in GB (Kalos); times carry a UTC offset (+08:00 / +00:00). 1e300 as an
    XID and 1e10 GB of memory were tracebacks (int64 casts); +99:99 was read as an
    offset of 100 h 39 min."""
    util = tmp_path / "util" / "seren"
    util.mkdir(parents=True)
    (util / "XID_ERRORS.csv").write_text(
        "Time,10.140.1.10-0,10.140.1.10-1\n2023-03-01 08:00:00+08:00,0.0,1e300\n"
        "2023-03-01 08:00:15+99:99,0.0,0.0\n2023-03-01 08:00:30+08:00,79.0,0.0\n"
    )
    store = tmp_path / "s"
    result = ingest("acme", util / "XID_ERRORS.csv", store)
    assert result.exit_code == 0, result.output
    assert sorted(sql(store, "select locator, reason from quarantine")) == [
        ("line 2", "10.140.1.10-1 value '1e300' is not a whole XID number (0 to 2^53)"),
        ("line 3", "Time '2023-03-01 08:00:15+99:99' is not a time (YYYY-MM-DD HH:MM:SS[.ffffff][+HH:MM])"),
    ]  # fmt: skip
    assert sql(store, "select code from events") == [(79,)]
    kalos = tmp_path / "trace_kalos.csv"
    head = (
        "job_id,user,node_num,gpu_num,cpu_num,mem_per_pod_GB,shared_mem_per_pod,type,state,"
        "submit_time,start_time,end_time,fail_time,stop_time,duration,queue,gpu_time"
    )  # the release's trace_kalos.csv header
    row = "{id},u1,1,8,96,{mem},100.0,Other,COMPLETED,2023-05-17 11:00:58+00:00,2023-05-17 11:01:08+00:00,2023-05-17 11:01:16+00:00,,,8,10.0,64.0"
    kalos.write_text(
        "\n".join([head, row.format(id="a", mem="1e10"), row.format(id="b", mem="1000")]) + "\n"
    )
    store2 = tmp_path / "s2"
    result = ingest("acme", kalos, store2)
    assert result.exit_code == 0, result.output
    assert sql(store2, "select locator, reason from quarantine") == [
        ("line 2", "mem_per_pod_GB '1e10' is not a memory size (at most 1000000 GB per pod, and x node_num within int64 bytes)")
    ]  # fmt: skip
    assert sql(store2, "select job_id, mem_bytes from jobs") == [("b", 1000 * 10**9)]


# -- archives: helios data.zip through the datasets extractor's caps ---------------------------


def _bomb(tmp_path: Path) -> Path:
    """8 MB of zeros after a real header: deflates to a few KB."""
    import zipfile

    z = tmp_path / "data.zip"
    with zipfile.ZipFile(z, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("data/Venus/cluster_log.csv", LOG_HEADER + "\n" + "0" * 8_000_000)
    assert z.stat().st_size < 64_000
    return z


def test_helios_zip_bomb_stops_at_the_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: no cap (2 MB zip -> 2 GiB on disk). Now the datasets extractor's cap:
    --max-extract-bytes as in `datasets fetch`, default 40x the archive (at least
    MIN_EXTRACT_BYTES, patched small here), and nothing is left in the temp folder."""
    import tempfile

    from gpu_trace.datasets import extract

    z = _bomb(tmp_path)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    line = one_line_error(ingest("helios", z, tmp_path / "s", "--max-extract-bytes", "1M"))
    assert "expands past 1000000 bytes" in line and str(z) in line
    monkeypatch.setattr(extract, "MIN_EXTRACT_BYTES", 2_000_000)
    line = one_line_error(ingest("helios", z, tmp_path / "s"))
    assert "expands past 2000000 bytes" in line
    assert sum(p.stat().st_size for p in tmp.rglob("*") if p.is_file()) == 0
    bad = ingest("helios", z, tmp_path / "s", "--max-extract-bytes", "lots")
    assert bad.exit_code == 2 and "'lots' is not a size" in bad.stderr


def test_helios_zip_link_member_is_refused(tmp_path: Path) -> None:
    import zipfile

    z = tmp_path / "data.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("data/Venus/cluster_log.csv", LOG_HEADER + "\n" + GOOD + "\n")
        link = zipfile.ZipInfo("data/Earth/cluster_log.csv")
        link.external_attr = 0o120777 << 16  # a symlink, as `zip --symlinks` stores it
        zf.writestr(link, "/etc/passwd")
    line = one_line_error(ingest("helios", z, tmp_path / "s"))
    assert "data/Earth/cluster_log.csv" in line and "symlink" in line


@pytest.mark.parametrize("damage", ["encrypted", "method 99"])
def test_helios_zip_zipfile_cannot_read_is_one_error(tmp_path: Path, damage: str) -> None:
    """APPNOTE.TXT: general purpose bit 0 = encrypted; method 99 = AES (WinZip). The
    standard library refuses both (RuntimeError / NotImplementedError)."""
    import zipfile

    z = tmp_path / "data.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("data/Venus/cluster_log.csv", LOG_HEADER + "\n" + GOOD + "\n")
    data = bytearray(z.read_bytes())
    for sig, flag_at, method_at in ((b"PK\x03\x04", 6, 8), (b"PK\x01\x02", 8, 10)):
        at = data.find(sig)
        if damage == "encrypted":
            data[at + flag_at] |= 1
        else:
            data[at + method_at : at + method_at + 2] = (99).to_bytes(2, "little")
    z.write_bytes(bytes(data))
    line = one_line_error(ingest("helios", z, tmp_path / "s"))
    want = "encrypted member" if damage == "encrypted" else "not a readable zip archive"
    assert want in line
