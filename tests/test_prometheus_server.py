"""``gpu-trace telemetry pull`` against a real Prometheus server (Debian ``prometheus``).

The server's history is written by ``promtool tsdb create-blocks-from openmetrics`` from
the OpenMetrics text below, so every answer is known in advance. All samples are 60 s
apart from T0 = 2026-01-01T00:00:00Z (unix 1767225600), minute i = 0..30, on host n1:

- ``DCGM_FI_DEV_GPU_UTIL`` GPU 0: i. GPU 1: 2i, but no samples for minutes 10..19.
  MIG instance ``GPU_I_ID=3`` of GPU 0: 7.
- ``DCGM_FI_DEV_FB_USED`` GPU 0: 1000 + i MiB.
- ``DCGM_FI_DEV_POWER_USAGE`` GPU 0: 100.5 + i W, except minute 3 = NaN, minute 4 = +Inf.
- ``DCGM_FI_DEV_XID_ERRORS`` GPU 0: 0 for minutes 0..4, 43 for 5..14, 0 for 15..19, 79
  for 20..30.
- ``DCGM_FI_DEV_GPU_TEMP`` GPU 2 with no Hostname label, ``instance="10.0.0.9:9400"``: 50.
- ``node_load1`` (not a DCGM family): 1.

Pulled with ``--step 60s`` from T0 to T0 + 30 min, each series has 31 points, except GPU
1's utilization: with the server's 90 s lookback (``prom_server.LOOKBACK_S``) minute 10
repeats minute 9's 18, minutes 11..19 are absent: 11 + 11 = 22 points. ``--max-points
7`` cuts the 31 evaluation times into 5 requests per family (7, 7, 7, 7, 3).
"""

from __future__ import annotations

import datetime as dt
import re
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from gpu_trace.cli import app
from gpu_trace.store.parquet import read_table as read_arrow
from gpu_trace.telemetry.promclient import PromClient, PullError
from tests import prom_server

T0 = 1767225600
MIB = 1024 * 1024
HOST = 'Hostname="n1"'


def _series(name: str, labels: str, values: dict[int, str]) -> list[str]:
    return [f"{name}{{{labels}}} {v} {T0 + 60 * i}" for i, v in sorted(values.items())]


def history() -> str:
    minutes = range(31)
    lines = ["# TYPE DCGM_FI_DEV_GPU_UTIL gauge"]
    lines += _series(
        "DCGM_FI_DEV_GPU_UTIL",
        f'gpu="0",UUID="GPU-0",{HOST},modelName="NVIDIA A100"',
        {i: str(i) for i in minutes},
    )
    lines += _series(
        "DCGM_FI_DEV_GPU_UTIL",
        f'gpu="1",UUID="GPU-1",{HOST}',
        {i: str(2 * i) for i in minutes if not 10 <= i <= 19},
    )
    lines += _series(
        "DCGM_FI_DEV_GPU_UTIL",
        f'gpu="0",UUID="GPU-0",GPU_I_ID="3",{HOST}',
        dict.fromkeys(minutes, "7"),
    )
    lines += ["# TYPE DCGM_FI_DEV_FB_USED gauge"]
    lines += _series("DCGM_FI_DEV_FB_USED", f'gpu="0",{HOST}', {i: str(1000 + i) for i in minutes})
    lines += ["# TYPE DCGM_FI_DEV_POWER_USAGE gauge"]
    power = {i: f"{100 + i}.5" for i in minutes} | {3: "NaN", 4: "+Inf"}
    lines += _series("DCGM_FI_DEV_POWER_USAGE", f'gpu="0",{HOST}', power)
    lines += ["# TYPE DCGM_FI_DEV_XID_ERRORS gauge"]
    xid = {i: "0" if i < 5 or 15 <= i < 20 else ("43" if i < 15 else "79") for i in minutes}
    lines += _series("DCGM_FI_DEV_XID_ERRORS", f'gpu="0",{HOST}', xid)
    lines += ["# TYPE DCGM_FI_DEV_GPU_TEMP gauge"]
    lines += _series(
        "DCGM_FI_DEV_GPU_TEMP", 'gpu="2",instance="10.0.0.9:9400"', dict.fromkeys(minutes, "50")
    )
    lines += ["# TYPE node_load1 gauge"]
    lines += _series("node_load1", 'instance="10.0.0.9:9100"', dict.fromkeys(minutes, "1"))
    return "\n".join([*lines, "# EOF", ""])


@pytest.fixture(scope="module")
def prom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[prom_server.Server]:
    prom_server.binaries()
    root = tmp_path_factory.mktemp("prometheus")
    prom_server.backfill(history(), root / "data")
    srv = prom_server.start(root / "data")
    yield srv
    srv.stop()
    assert srv.proc.poll() is not None  # no server left behind


WINDOW = ["--start", "2026-01-01T00:00:00Z", "--end", "2026-01-01T00:30:00Z", "--step", "60s"]


def pull(url: str, store: Path, *extra: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(
        app, ["telemetry", "pull", "--prometheus", url, *WINDOW, *extra, "--store", str(store)]
    )
    return result.exit_code, result.stdout, result.stderr


def read_table(store: Path, table: str) -> pl.DataFrame:
    out = pl.from_arrow(read_arrow(store, table, "prometheus-range"))
    assert isinstance(out, pl.DataFrame)
    return out


def at(minute: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(T0 + 60 * minute, dt.UTC)


def test_pull_in_chunks_gives_the_hand_derived_rows(
    prom: prom_server.Server, tmp_path: Path
) -> None:
    store, saved = tmp_path / "store", tmp_path / "dcgm.jsonl"
    code, out, err = pull(prom.url, store, "--max-points", "7", "--save", str(saved))
    assert code == 0, err
    # read = written + quarantined: 177 = 176 + 1 samples, 2 = 2 + 0 events
    assert out.splitlines()[-1].split() == ["total", "179", "178", "1", "0"]
    # 5 DCGM families (node_load1 is not one), 5 chunks each, + 1 discovery request
    assert "pulled 5 families x 5 chunk(s) in 26 request(s)" in err
    assert len(saved.read_text().splitlines()) == 25
    s = read_table(store, "gpu_samples").sort("metric", "gpu_index", "mig_instance", "time")
    # utilization 31 + 22 + 31 (MIG), memory 31, power 31 - 1 (+Inf), temperature 31
    assert s.height == 84 + 31 + 30 + 31
    util = s.filter(pl.col("metric") == "gpu_util_pct")
    g0 = util.filter((pl.col("gpu_index") == 0) & pl.col("mig_instance").is_null())
    assert g0["value"].to_list() == [float(i) for i in range(31)]
    assert g0["time"].to_list() == [at(i) for i in range(31)]
    assert set(g0["gpu_uuid"]) == {"GPU-0"} and set(g0["host"]) == {"n1"}
    g1 = util.filter(pl.col("gpu_index") == 1)
    minutes = [*range(11), *range(20, 31)]
    assert g1["time"].to_list() == [at(i) for i in minutes]
    assert g1["value"].to_list() == [2.0 * i for i in range(10)] + [18.0] + [
        2.0 * i for i in range(20, 31)
    ]
    mig = util.filter(pl.col("mig_instance") == "3")
    assert mig.height == 31 and set(mig["value"]) == {7.0}
    fb = s.filter(pl.col("metric") == "mem_used_bytes")
    assert fb["value"].to_list() == [float((1000 + i) * MIB) for i in range(31)]
    power = s.filter(pl.col("metric") == "power_w")
    assert power["time"].to_list() == [at(i) for i in range(31) if i != 4]
    assert power["value"].to_list() == [100.5 + i if i != 3 else None for i in range(31) if i != 4]
    temp = s.filter(pl.col("metric") == "temp_c")
    assert set(temp["host"]) == {"10.0.0.9"} and set(temp["gpu_index"]) == {2}
    # XID: 43 from minute 5, 79 from minute 20; the 27 repeats and zeros are no events
    ev = read_table(store, "events").sort("time")
    assert ev.select("time", "kind", "code", "host").rows() == [
        (at(5), "xid", 43, "n1"),
        (at(20), "xid", 79, "n1"),
    ]
    q = read_table(store, "quarantine")
    assert q.select("locator", "reason").rows() == [
        # families are pulled in DCGM field-id order: GPU_TEMP (150), POWER_USAGE (155),
        # GPU_UTIL, XID, FB_USED; 5 lines each, so power's chunk 1 (minutes 0..6) is line 6
        # and minute 4 its 5th point
        ("line 6, series 1, sample 5", "DCGM_FI_DEV_POWER_USAGE value '+Inf' is not finite")
    ]
    ing = read_table(store, "ingests").sort("table")
    assert ing.select("table", "rows_read", "rows_written", "rows_quarantined").rows() == [
        ("events", 2, 2, 0),
        ("gpu_samples", 177, 176, 1),
    ]
    # the saved answers ingest to the same rows, as the same dataset (re-ingest replaces)
    again = tmp_path / "again"
    res = CliRunner().invoke(app, ["ingest", "prometheus-range", str(saved), "--store", str(again)])
    assert res.exit_code == 0, res.output
    cols = ["dataset", "time", "host", "gpu_index", "mig_instance", "metric", "value"]
    assert (
        read_table(again, "gpu_samples").sort(cols).select(cols).equals(s.sort(cols).select(cols))
    )


def test_chunking_does_not_change_the_rows(prom: prom_server.Server, tmp_path: Path) -> None:
    one, many = tmp_path / "one", tmp_path / "many"
    assert pull(prom.url, one, "--save", str(tmp_path / "a.jsonl"))[0] == 0
    assert pull(prom.url, many, "--max-points", "2", "--save", str(tmp_path / "a.jsonl"))[0] == 0
    cols = ["time", "host", "gpu_index", "mig_instance", "metric", "value"]
    a = read_table(one, "gpu_samples").sort(cols).select(cols)
    assert a.height == 176 and a.equals(read_table(many, "gpu_samples").sort(cols).select(cols))


def test_metric_and_match_options(prom: prom_server.Server, tmp_path: Path) -> None:
    store = tmp_path / "store"
    code, _, err = pull(prom.url, store, "--metric", "DCGM_FI_DEV_GPU_UTIL", "--match", 'gpu="1"')
    assert code == 0, err
    s = read_table(store, "gpu_samples")
    assert s.height == 22 and set(s["gpu_index"]) == {1}
    code, _, err = pull(prom.url, store, "--metric", "node_load1")
    assert code == 1 and err.startswith("error: --metric node_load1: no canonical metric")


def test_prometheus_errors_are_one_line(prom: prom_server.Server, tmp_path: Path) -> None:
    store = tmp_path / "store"
    code, _, err = pull(prom.url, store, "--metric", "DCGM_FI_DEV_GPU_UTIL", "--match", 'gpu=~"(')
    assert code == 1 and len(err.strip().splitlines()) == 1
    assert re.fullmatch(
        rf"error: {prom.url}: query_range DCGM_FI_DEV_GPU_UTIL\{{gpu=~\"\(\}} chunk 1/1 "
        r"\(2026-01-01T00:00:00.000Z..2026-01-01T00:30:00.000Z\): HTTP 400: Prometheus "
        r"error bad_data: .*parse error.*\n",
        err,
    ), err
    code, _, err = pull(prom.url, store, "--max-body-bytes", "50")
    assert code == 1 and "label __name__ values: body" in err and "over the 50-byte cap" in err
    assert not store.exists()  # nothing stored by a failed pull
    # the limit chunking avoids: one unchunked request of 1,801 x 10 points per series
    client = PromClient(prom.url)
    with pytest.raises(
        PullError,
        match="HTTP 400: Prometheus error bad_data: exceeded maximum "
        "resolution of 11,000 points per timeseries",
    ):
        client.get(
            "/api/v1/query_range",
            {
                "query": "DCGM_FI_DEV_GPU_UTIL",
                "start": str(T0),
                "end": str(T0 + 1800),
                "step": "0.1",
            },
            "raw",
        )


def test_connection_refused_is_one_line(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{prom_server.free_port()}"
    code, _, err = pull(url, tmp_path / "store")
    assert code == 1
    assert err == (
        f"error: {url}: label __name__ values: cannot connect: connection refused "
        "(is Prometheus running there?)\n"
    )


class Silent:
    """A loopback server that answers each request with ``reply`` (None: never)."""

    def __init__(self, reply: bytes | None) -> None:
        self.reply = reply
        self.stop = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.05)
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        held = []
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            held.append(conn)
            if self.reply is not None:
                conn.recv(65536)
                conn.sendall(self.reply)
                conn.close()
        for c in held:
            c.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.listener.close()


def _http(body: bytes, status: str = "200 OK") -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


@pytest.mark.parametrize(
    ("reply", "extra", "reason"),
    [
        (None, ["--timeout", "0.3s"], r"no complete answer within 0.3s \(--timeout\)"),
        (
            None,
            ["--timeout", "30s", "--deadline", "0.3s"],
            r"the --deadline of 0.3s passed before an answer",
        ),
        (
            _http(b"<html>hi</html>"),
            [],
            r"the answer is not JSON \(Expecting value at line 1 column 1\)",
        ),
        (_http(b"oops", "502 Bad Gateway"), [], r"HTTP 502 Bad Gateway: oops"),
        (
            _http(
                b'{"status":"error","errorType":"timeout","error":"query timed out"}',
                "503 Service Unavailable",
            ),
            [],
            r"HTTP 503: Prometheus error timeout: query timed out",
        ),
        (_http(b'{"status":"success","data":{}}'), [], r"data is not a list"),
    ],
)
def test_bad_servers_are_one_line(
    reply: bytes | None, extra: list[str], reason: str, tmp_path: Path
) -> None:
    srv = Silent(reply)
    try:
        code, _, err = pull(srv.url, tmp_path / "store", *extra)
    finally:
        srv.close()
    assert code == 1 and len(err.splitlines()) == 1, err
    assert re.fullmatch(rf"error: {srv.url}: label __name__ values: {reason}\n", err), err
    assert not (tmp_path / "store").exists()
