"""Telemetry: integration tests (ingest, sampler, scraper and per-job usage into a real store).

Expected values are read from the raw sample files here with the standard library (or
hand-copied with the line they come from), never from our own output."""

from __future__ import annotations

import datetime as dt
import http.server
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from gpu_trace.analyses import job_usage as tj
from gpu_trace.errors import InputError
from gpu_trace.loaders import LOADERS, ingest
from gpu_trace.store.catalog import connect
from gpu_trace.store.parquet import read_table
from gpu_trace.telemetry.fake_nvml import Clock, FakeNvml, eight_gpus
from gpu_trace.telemetry.nvml import Sampler
from gpu_trace.telemetry.scrape import Scraper
from tests.conftest import SAMPLES
from tests.telemetry_common import run_sampler

TEL = SAMPLES / "telemetry"
MIB = 1024 * 1024


def table(store: Path, name: str, source: str) -> pl.DataFrame:
    out = pl.from_arrow(read_table(store, name, source))
    assert isinstance(out, pl.DataFrame)
    return out


def value(frame: pl.DataFrame, metric: str, **keys: object) -> list[float | None]:
    f = frame.filter(pl.col("metric") == metric)
    for k, v in keys.items():
        f = f.filter(pl.col(k) == v)
    return f.sort("time")["value"].to_list()


def smi_row(path: Path) -> dict[str, str]:
    header, row = path.read_text().splitlines()[:2]
    names = [h.split(" [")[0] for h in header.split(", ")]
    return dict(zip(names, row.split(", "), strict=True))


def number(text: str) -> float:
    return float(text.split()[0])


# -- nvidia-smi ------------------------------------------------------------------------


def test_query_gpu_csv_values(store: Path) -> None:
    ingest(LOADERS["nvidia-smi"], TEL / "nvidia-smi-query-gpu-h100.csv", store)
    rows = table(store, "gpu_samples", "nvidia-smi")
    raw = smi_row(TEL / "nvidia-smi-query-gpu-h100.csv")
    assert value(rows, "gpu_util_pct") == [number(raw["utilization.gpu"])] == [100.0]
    assert value(rows, "mem_used_bytes") == [number(raw["memory.used"]) * MIB] == [19818 * MIB]
    assert value(rows, "mem_total_bytes") == [81559 * MIB]
    assert value(rows, "power_w") == [number(raw["power.draw"])] == [631.95]
    assert value(rows, "temp_c") == [float(raw["temperature.gpu"])] == [59.0]
    assert value(rows, "sm_clock_mhz") == [1980.0]
    assert value(rows, "fan_pct") == [None]  # fan.speed [%] is [N/A] on the H100
    assert value(rows, "pstate") == [0.0]
    assert rows["time"].unique().to_list() == [
        dt.datetime(2026, 7, 14, 8, 12, 53, 353000, tzinfo=dt.UTC)
    ]
    assert rows["gpu_uuid"].unique().to_list() == ["GPU-00000000-0000-0000-0000-000000000000"]
    assert rows["host"].unique().to_list() == ["nvidia-smi-query-gpu-h100"]
    assert set(rows["raw_field"]) >= {"utilization.gpu", "memory.used", "power.draw"}


def test_query_gpu_mig_na_is_null_and_tz(store: Path) -> None:
    path = TEL / "nvidia-smi-query-gpu-h100-mig.csv"
    ingest(LOADERS["nvidia-smi"], path, store, tz="Europe/Berlin", host="h100-a")
    rows = table(store, "gpu_samples", "nvidia-smi")
    raw = smi_row(path)
    assert raw["utilization.gpu"] == "[N/A]"
    assert value(rows, "gpu_util_pct") == [None] and value(rows, "mem_util_pct") == [None]
    assert value(rows, "mem_used_bytes") == [11125 * MIB]
    assert value(rows, "power_w") == [433.78]
    # 2026/07/14 09:00:44.579 Berlin summer time = 07:00:44.579 UTC
    assert rows["time"][0] == dt.datetime(2026, 7, 14, 7, 0, 44, 579000, tzinfo=dt.UTC)
    assert rows["host"].unique().to_list() == ["h100-a"]


def test_dmon_values_match_columns(store: Path) -> None:
    path = TEL / "nvidia-smi-dmon-h100.txt"
    ingest(LOADERS["nvidia-smi"], path, store, start="2026-07-14T08:00:00")
    rows = table(store, "gpu_samples", "nvidia-smi")
    lines = [ln.split() for ln in path.read_text().splitlines() if not ln.startswith("#")]
    names = path.read_text().splitlines()[0].lstrip("# ").split()
    col = {n: [float(r[i]) for r in lines] for i, n in enumerate(names)}
    assert value(rows, "power_w") == col["pwr"] == [631, 634, 633, 634, 636]
    assert value(rows, "gpu_util_pct") == col["sm"]
    assert value(rows, "mem_util_pct") == col["mem"]
    assert value(rows, "mem_clock_mhz") == col["mclk"]
    times = rows.filter(pl.col("metric") == "power_w").sort("time")["time"].to_list()
    assert times[0] == dt.datetime(2026, 7, 14, 8, 0, tzinfo=dt.UTC)
    assert times[-1] == dt.datetime(2026, 7, 14, 8, 0, 4, tzinfo=dt.UTC)


def test_dmon_mig_dashes_are_null(store: Path) -> None:
    ingest(LOADERS["nvidia-smi"], TEL / "nvidia-smi-dmon-h100-mig.txt", store)
    rows = table(store, "gpu_samples", "nvidia-smi")
    assert value(rows, "gpu_util_pct") == [None] * 5
    assert value(rows, "power_w") == [438, 440, 437, 439, 439]
    assert rows.filter(pl.col("metric") == "power_w")["value"].null_count() == 0


def test_pmon_and_compute_apps(store: Path) -> None:
    ingest(LOADERS["nvidia-smi"], TEL / "nvidia-smi-pmon-h100.txt", store)
    procs = table(store, "gpu_processes", "nvidia-smi")
    assert procs.height == 15
    burn = procs.filter(pl.col("pid") == 11345)
    assert burn["sm_util_pct"].to_list() == [99.0] * 5
    assert burn["process_name"].unique().to_list() == ["gpu_burn"]
    assert procs.filter(pl.col("pid") == 11327)["sm_util_pct"].null_count() == 5
    store2 = store.parent / "s2"
    ingest(LOADERS["nvidia-smi"], TEL / "nvidia-smi-query-compute-apps-h100.csv", store2)
    apps = table(store2, "gpu_processes", "nvidia-smi").sort("pid")
    assert apps["pid"].to_list() == [11327, 11328, 11345]
    assert apps["used_mem_bytes"].to_list() == [2566 * MIB, 1542 * MIB, 15690 * MIB]


def test_smi_bad_cells_and_lines_are_quarantined(tmp_path: Path, store: Path) -> None:
    f = tmp_path / "smi.csv"
    f.write_text(
        "timestamp, index, utilization.gpu [%], memory.used [MiB]\n"
        "2026/01/01 00:00:00.000, 0, 40 %, 100 MiB\n"
        "2026/01/01 00:00:01.000, 0, lots %, [Not Supported]\n"
        "2026/01/01 00:00:02.000, 0, 40 %\n"
        "yesterday, 0, 1 %, 1 MiB\n"
    )
    report = ingest(LOADERS["nvidia-smi"], f, store)
    line = report.lines[0]
    # 2 good lines x 2 cells = 4 cells (1 not a number) + 2 bad lines
    assert (line.rows_read, line.rows_written, line.rows_quarantined) == (6, 3, 3)
    q = table(store, "quarantine", "nvidia-smi").sort("locator")
    assert q["locator"].to_list() == ["line 3", "line 4", "line 5"]
    assert "utilization.gpu value 'lots %' is not a number" in q["reason"][0]
    assert q["reason"][1] == "expected 4 fields, found 3"
    rows = table(store, "gpu_samples", "nvidia-smi")
    assert value(rows, "mem_used_bytes") == [100 * MIB, None]


def test_smi_whole_file_errors(tmp_path: Path, store: Path) -> None:
    empty = tmp_path / "x.csv"
    empty.write_text("")
    with pytest.raises(InputError):
        ingest(LOADERS["nvidia-smi"], empty, store)
    wrong_unit = tmp_path / "y.csv"
    wrong_unit.write_text("index, memory.used [GiB]\n0, 1 GiB\n")
    with pytest.raises(InputError, match=r"memory.used is in \[GiB\]"):
        ingest(LOADERS["nvidia-smi"], wrong_unit, store)
    noheader = tmp_path / "z.csv"
    noheader.write_text("0, 40, 100\n")
    with pytest.raises(InputError, match="--query"):
        ingest(LOADERS["nvidia-smi"], noheader, store)
    ingest(LOADERS["nvidia-smi"], noheader, store, query="index,utilization.gpu,memory.used")
    rows = table(store, "gpu_samples", "nvidia-smi")
    assert value(rows, "mem_used_bytes") == [100 * MIB]


# -- dcgmi -------------------------------------------------------------------------------


def test_dcgmi_dmon_values(store: Path) -> None:
    path = TEL / "dcgmi-dmon-h800.txt"
    ingest(LOADERS["dcgmi"], path, store, start="2026-01-01T00:00:00Z")
    rows = table(store, "gpu_samples", "dcgmi")
    data = [ln.split()[2:] for ln in path.read_text().splitlines() if ln.startswith("GPU")]
    tags = path.read_text().splitlines()[0].split()[1:]
    col = {
        t: [None if v == "N/A" else float(v) for v in (r[i] for r in data)]
        for i, t in enumerate(tags)
    }
    assert (
        value(rows, "pcie_tx_bytes_per_s") == col["PCITX"] == [None, None, 498948, 449138, 548740]
    )
    assert value(rows, "pcie_rx_bytes_per_s") == col["PCIRX"]
    assert value(rows, "nvlink_tx_bytes_per_s") == [None, None, 0.0, 0.0, 0.0]
    assert rows["gpu_index"].unique().to_list() == [0]


def test_dcgmi_mig_links_and_sentinels(tmp_path: Path, store: Path) -> None:
    f = tmp_path / "d.txt"
    f.write_text(
        "# Entity  GRACT  POWER  XIDER\n"
        "      Id\n"
        "GPU 0     0.845  300.5  0\n"
        "GPU-I 29  0.986  N/A    0\n"
        "GPU 0 LINK 1  1  2  3\n"
        "GPU 1     140737488355330.0  2147483634  43\n"
    )
    ingest(LOADERS["dcgmi"], f, store)
    rows = table(store, "gpu_samples", "dcgmi")
    assert value(rows, "gr_engine_active_ratio", mig_instance="29") == [0.986]
    assert value(rows, "gr_engine_active_ratio", gpu_index=1) == [None]  # FP64 sentinel
    assert value(rows, "power_w", gpu_index=1) == [None]  # INT32 NOT_SUPPORTED
    events = table(store, "events", "dcgmi")
    assert events.select("gpu_index", "kind", "code").rows() == [(1, "xid", 43)]
    q = table(store, "quarantine", "dcgmi")
    assert q["locator"].to_list() == ["line 5"] and "not a GPU" in q["reason"][0]


# -- prometheus --------------------------------------------------------------------------


def test_prometheus_a100_mig(store: Path) -> None:
    path = TEL / "dcgm-exporter-a100-mig.prom"
    ingest(LOADERS["prometheus"], path, store, time="2026-01-01T00:00:00Z")
    rows = table(store, "gpu_samples", "prometheus")
    # line 5: DCGM_FI_DEV_POWER_USAGE{...} 409.692000 ; line 10: DCGM_FI_DEV_FB_USED 4845
    assert value(rows, "power_w") == [409.692]
    assert value(rows, "mem_used_bytes") == [4845 * MIB]
    assert value(rows, "energy_mj") == [319159391.0]
    assert value(rows, "gr_engine_active_ratio", mig_instance="13") == [0.995687]
    assert value(rows, "gr_engine_active_ratio") == [0.99563, 0.995687]
    assert rows["host"].unique().to_list() == ["ub20-a100-k8s"]
    q = table(store, "quarantine", "prometheus").sort("locator")
    assert q["reason"].to_list() == [
        "no canonical metric for DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        "no canonical metric for DCGM_FI_DEV_VGPU_LICENSE_STATUS",
    ]
    assert table(store, "events", "prometheus").height == 0  # XID 0 = no error


def test_prometheus_t4_two_label_schemas(store: Path) -> None:
    report = ingest(LOADERS["prometheus"], TEL / "dcgm-exporter-metrics-t4.prom", store)
    text = (TEL / "dcgm-exporter-metrics-t4.prom").read_text().splitlines()
    samples = [ln for ln in text if ln.strip() and not ln.startswith("#")]
    read, _written, _quarantined = report.totals
    assert read + 1 == len(samples)  # the XID_ERRORS 0 line is "no event"
    rows = table(store, "gpu_samples", "prometheus")
    assert set(rows["host"]) == {"424773df46e0", "551bdf382151"}
    assert value(rows, "power_w") == [8.969]
    assert value(rows, "power_limit_w") == [70.0]
    assert value(rows, "mem_free_bytes") == [15109 * MIB]


def test_prometheus_tolerance_labels_events(tmp_path: Path, store: Path) -> None:
    f = tmp_path / "m.prom"
    f.write_text(
        "# HELP DCGM_FI_DEV_GPU_UTIL\n"
        "# NOTE whatever\n"
        'DCGM_FI_DEV_GPU_UTIL{gpu="0", UUID="GPU-a",hostname="n1",pod="p1",namespace="ns",'
        'container="c",} 42\n'
        'DCGM_FI_DEV_GPU_UTIL_RATIO{gpu="1",UUID="GPU-b",hostname="n1",pod=""} 7 1767225600000\n'
        'DCGM_FI_DEV_MEMORY_TEMP{gpu="0",UUID="GPU-a",hostname="n1"} 9223372036854775794\n'
        'DCGM_FI_DEV_XID_ERRORS{gpu="0",UUID="GPU-a",hostname="n1"} 79\n'
        'DCGM_EXP_XID_ERRORS_COUNT{gpu="1",UUID="GPU-b",hostname="n1",xid="48"} 2\n'
        'DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-a" 50\n'
        "\x00\x01 garbage\n"
    )
    report = ingest(LOADERS["prometheus"], f, store)
    assert report.totals == (7, 5, 2)
    rows = table(store, "gpu_samples", "prometheus")
    util = rows.filter(pl.col("metric") == "gpu_util_pct").sort("gpu_index")
    assert util["value"].to_list() == [42.0, 7.0]
    assert util["pod"].to_list() == ["p1", None]
    assert util["namespace"].to_list() == ["ns", None]
    assert util["container"].to_list() == ["c", None]
    assert util["time"][1] == dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    assert value(rows, "mem_temp_c") == [None]  # INT64 NOT_SUPPORTED sentinel
    events = table(store, "events", "prometheus").sort("gpu_index")
    assert events.select("gpu_index", "kind", "code").rows() == [(0, "xid", 79), (1, "xid", 48)]
    q = table(store, "quarantine", "prometheus").sort("locator")
    assert q["locator"].to_list() == ["line 8", "line 9"]


# -- sampler -----------------------------------------------------------------------------


def test_sampler_unsupported_lost_mig(store: Path) -> None:
    gpus = eight_gpus()[:4]
    gpus[1].unsupported = {"power", "mem_temp"}
    gpus[2].lost_at = 2.5
    gpus[3].mig = [(1, 0), (2, 0)]
    s = run_sampler(store, gpus, 6)
    assert s.ticks == 6 and s.writer.flushes == 2
    files = sorted(p.name for p in (store / "current" / "gpu_samples" / "source=nvml").iterdir())
    assert files == [
        "node-1-20260101t000000z-00000.parquet",
        "node-1-20260101t000000z-00001.parquet",
    ]
    rows = table(store, "gpu_samples", "nvml")
    assert value(rows, "power_w", gpu_index=1) == []
    assert value(rows, "power_w", gpu_index=0) == [300.0] * 6  # 300000 mW
    assert value(rows, "gpu_util_pct", gpu_index=2) == [20.0] * 3  # ticks at 0,1,2 only
    assert value(rows, "mem_temp_c", gpu_index=1) == []
    mig = rows.filter(pl.col("mig_instance") == "1/0")
    assert "gpu_util_pct" not in set(mig["metric"]) and "mem_used_bytes" in set(mig["metric"])
    assert ("GPU-00000001-0000-0000-0000-000000000000", "power") in s.unsupported
    events = table(store, "events", "nvml")
    assert events.select("gpu_index", "kind").rows() == [(2, "gpu_lost")]
    procs = table(store, "gpu_processes", "nvml")
    assert procs.filter(pl.col("pid") == 1000)["used_mem_bytes"].to_list() == [1024**3] * 6
    assert procs.filter(pl.col("pid") == 2000)["used_mem_bytes"].null_count() == 6


def test_sampler_driver_reload_and_energy_reset(store: Path) -> None:
    s = run_sampler(store, eight_gpus()[:2], 10, reload_at=4.5, reload_s=2.5)
    events = table(store, "events", "nvml").sort("time", "gpu_index")
    kinds = events["kind"].to_list()
    assert kinds == ["driver_reload", "energy_reset", "energy_reset"]
    energy = value(table(store, "gpu_samples", "nvml"), "energy_mj", gpu_index=0)
    assert energy[:5] == [1_000_000 + 300_000 * k for k in range(5)]
    assert energy[5] < energy[4]  # the counter restarted; stored raw
    assert s.nvml.inits == 2


def test_sampler_crash_keeps_flushed_data(store: Path) -> None:
    clock = Clock()
    nvml = FakeNvml(eight_gpus()[:1], clock)
    s = Sampler(nvml, store=store, host="n", flush_s=2, clock=clock, sleep=clock.sleep)
    s.open()
    s.run(4)
    before = table(store, "gpu_samples", "nvml").height
    s.tick()  # sampled but never flushed: lost in a crash, files stay valid
    assert table(store, "gpu_samples", "nvml").height == before == 4 * 11  # 11 metrics per tick


@pytest.mark.gpu
def test_real_nvml_sampler(tmp_path: Path) -> None:
    pynvml = pytest.importorskip("pynvml")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        pytest.skip("no NVIDIA driver")
    s = Sampler(pynvml, store=tmp_path, host="real", flush_s=60)
    s.open()
    s.run(3)
    rows = table(tmp_path, "gpu_samples", "nvml")
    assert rows.filter(pl.col("metric") == "mem_total_bytes")["value"].min() > 0


# -- scraper -----------------------------------------------------------------------------


@pytest.fixture
def server() -> Iterator[str]:
    body = (TEL / "dcgm-exporter-a100-mig.prom").read_bytes()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/stall":
                time.sleep(1.5)
            payload = (
                b"\x89PNG\r\n\x1a\n<html>not metrics</html>" if self.path == "/garbage" else body
            )
            try:
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the stalled request's client gave up (that is the point of /stall)

        def log_message(self, *args: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_scrape_loopback(server: str, store: Path) -> None:
    clock = Clock()
    logs: list[str] = []
    sc = Scraper(
        f"{server}/metrics",
        store,
        interval_s=15,
        flush_s=15,
        clock=clock,
        sleep=clock.sleep,
        log=logs.append,
    )
    sc.run(45)
    assert [r.ok for r in sc.results] == [True, True, True]
    assert sc.flushes == 2
    rows = table(store, "gpu_samples", "prometheus")
    assert value(rows, "power_w") == [409.692] * 3
    assert rows["time"].n_unique() == 3
    q = table(store, "quarantine", "prometheus")
    assert q.height == 6 and set(q["locator"]) == {"line 11", "line 12"}


def test_scrape_stall_and_garbage(server: str, store: Path) -> None:
    logs: list[str] = []
    stall = Scraper(f"{server}/stall", store, timeout_s=0.3, log=logs.append)
    assert not stall.scrape_once().ok
    assert "timed out after 0.3s; skipped" in logs[-1]
    garbage = Scraper(f"{server}/garbage", store, log=logs.append)
    res = garbage.scrape_once()
    assert not res.ok and res.quarantined == 3 and "no Prometheus sample lines" in logs[-1]
    ok = Scraper(f"{server}/metrics", store, log=logs.append)
    assert ok.scrape_once().ok  # carries on after failures
    refused = Scraper("http://127.0.0.1:9/metrics", store, timeout_s=0.5, log=logs.append)
    assert not refused.scrape_once().ok and "skipped" in logs[-1]


# -- per-job usage -----------------------------------------------------------------------


def test_usage_by_pod(store: Path, tmp_path: Path) -> None:
    f = tmp_path / "m.prom"
    f.write_text(
        'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a",hostname="n1",pod="p1",namespace="ns"} 40\n'
        'DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-b",hostname="n1",pod="p1",namespace="ns"} 60\n'
        'DCGM_FI_DEV_GPU_UTIL{gpu="2",UUID="GPU-c",hostname="n1",pod="",namespace=""} 90\n'
    )
    ingest(LOADERS["prometheus"], f, store)
    out = tj.usage_by_label(connect(store), "pod")
    assert out.select("pod", "metric", "samples", "mean").rows() == [
        ("p1", "gpu_util_pct", 2, 50.0)
    ]


@pytest.mark.slow
def test_report_has_telemetry_section(store: Path, tmp_path: Path) -> None:
    from gpu_trace.reports.site import build_site

    ingest(LOADERS["nvidia-smi"], TEL / "nvidia-smi-dmon-h100.txt", store)
    build_site(store, tmp_path / "site")
    html = (tmp_path / "site" / "nvidia-smi.html").read_text()
    assert "GPU telemetry" in html and "power_w" in html
