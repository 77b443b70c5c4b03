"""``gpu-trace telemetry scrape`` against a hostile target.

A real loopback server (raw sockets, one thread per connection, at most
``MAX_CONNECTIONS`` of them, each bounded in time; it stops itself when the test ends)
answers each connection with the next mode of its script: a bad status line, 101
headers, a body shorter than its Content-Length, a connection reset mid-body, a trickle
of one byte every 0.1 s, a body over the cap (declared, and streamed without a length),
garbage, then good pages. The scraper must survive all of them, count each as a failure,
store only the good pages' samples and keep to ``--duration``.
"""

from __future__ import annotations

import re
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from gpu_trace.cli import app
from gpu_trace.store.parquet import read_table
from gpu_trace.telemetry.scrape import Scraper

GOOD = (
    b"# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n"
    b"# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n"
    b'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a",Hostname="n1"} 40\n'
    b'DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-a",Hostname="n1"} 250.5\n'
)
"""One good page: two samples (gpu_util_pct 40, power_w 250.5 on host n1, GPU 0)."""
CAP = 4096
BIG = GOOD * 200
"""Valid exposition, about 30 kB: well over CAP, so only the cap can refuse it."""
MAX_CONNECTIONS = 100
TRICKLE_BYTES = 60
"""A trickle lasts at most 6 s, so even a scraper without a deadline ends."""


def response(body: bytes, length: int | None = None) -> bytes:
    n = len(body) if length is None else length
    return b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n" % n + body


class Hostile:
    """Serves ``script`` (one mode per connection, in order), then ``good`` pages."""

    def __init__(self, script: list[str]) -> None:
        self.script = list(script)
        self.modes: list[str] = []
        self.stop = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.05)
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/metrics"
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.listener.close()

    def _accept(self) -> None:
        while not self.stop.is_set() and len(self.modes) < MAX_CONNECTIONS:
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            mode = self.script.pop(0) if self.script else "good"
            self.modes.append(mode)
            threading.Thread(target=self._serve, args=(conn, mode), daemon=True).start()

    def _serve(self, conn: socket.socket, mode: str) -> None:
        conn.settimeout(2)
        try:
            request = b""
            while b"\r\n\r\n" not in request:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                request += chunk
            self._answer(conn, mode)
        except OSError:
            pass  # the scraper gave up on us: that is the point of several modes
        finally:
            conn.close()

    def _answer(self, conn: socket.socket, mode: str) -> None:
        if mode == "bad-status":
            conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")
        elif mode == "headers":
            headers = b"".join(b"X-Pad-%d: v\r\n" % i for i in range(101))
            conn.sendall(b"HTTP/1.1 200 OK\r\n" + headers + b"\r\n" + GOOD)
        elif mode == "short":
            conn.sendall(response(GOOD, len(GOOD) + 100))
        elif mode == "reset":
            conn.sendall(response(GOOD[:40], len(GOOD)))
            time.sleep(0.05)
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        elif mode == "trickle":
            for byte in response(GOOD)[:TRICKLE_BYTES]:
                if self.stop.wait(0.1):
                    return
                conn.sendall(bytes([byte]))
        elif mode == "oversize":
            conn.sendall(response(BIG))
        elif mode == "oversize-stream":  # no length: the body ends when the server closes
            conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n" + BIG)
        elif mode == "garbage":
            conn.sendall(response(b"\x89PNG\r\n\x1a\n<html>\x00\xff not metrics</html>\n"))
        else:
            conn.sendall(response(GOOD))


@pytest.fixture
def hostile(request: pytest.FixtureRequest) -> Iterator[Hostile]:
    server = Hostile(list(request.param))
    yield server
    server.close()


HOSTILE = [
    "bad-status",
    "headers",
    "short",
    "reset",
    "trickle",
    "oversize",
    "oversize-stream",
    "garbage",
]
EXPECTED = [
    r"^scrape 1: BadStatusLine: .*SSH-2\.0.*; skipped$",
    r"^scrape 2: HTTPException: got more than 100 headers; skipped$",
    rf"^scrape 3: body cut short: {len(GOOD)} of {len(GOOD) + 100} bytes \(Content-Length\); "
    "skipped$",
    r"^scrape 4: (ConnectionResetError: .*|body cut short: 40 of \d+ bytes .*); skipped$",
    r"^scrape 5: timed out after 0\.6s; skipped$",
    rf"^scrape 6: body of {len(BIG)} bytes is over the 4096-byte cap; skipped$",
    r"^scrape 7: body is over the 4096-byte cap; skipped$",
    r"^scrape 8: no Prometheus sample lines in the response \(\d+ lines quarantined\); skipped$",
]


def samples(store: Path) -> pl.DataFrame:
    out = pl.from_arrow(read_table(store, "gpu_samples", "prometheus"))
    assert isinstance(out, pl.DataFrame)
    return out


@pytest.mark.parametrize("hostile", [HOSTILE], indirect=True)
def test_scraper_survives_every_hostile_mode(hostile: Hostile, tmp_path: Path) -> None:
    store = tmp_path / "store"
    logs: list[str] = []
    sc = Scraper(
        hostile.url,
        store,
        interval_s=0.2,
        timeout_s=0.6,
        flush_s=600,
        max_body_bytes=CAP,
        log=logs.append,
    )
    sc.run(3.0)
    assert hostile.modes[:8] == HOSTILE
    oks = [r.ok for r in sc.results]
    assert len(oks) >= 9, logs  # 8 hostile answers (0.6 s for the trickle), then good pages
    # bounded by the duration, not by wall-clock slack (which a loaded machine breaks):
    # at most one scrape per interval start within 3 s
    assert len(oks) <= 3.0 / 0.2 + 1
    assert oks[:8] == [False] * 8 and all(oks[8:])
    good = len(oks) - 8
    assert sc.failures == 8
    assert len(logs) == 8 and all("\n" not in line for line in logs)
    for line, pattern in zip(logs, EXPECTED, strict=True):
        assert re.match(pattern, line), (pattern, line)
    rows = samples(store)
    # Two samples per good page, none from the short, reset, trickled or oversize ones.
    assert rows.height == 2 * good
    assert rows["time"].n_unique() == good
    util = rows.filter(pl.col("metric") == "gpu_util_pct")["value"].to_list()
    power = rows.filter(pl.col("metric") == "power_w")["value"].to_list()
    assert util == [40.0] * good and power == [250.5] * good
    assert set(rows["host"]) == {"n1"}


@pytest.mark.parametrize("hostile", [["trickle"] * 20], indirect=True)
def test_a_trickling_target_cannot_outlast_the_duration(hostile: Hostile, tmp_path: Path) -> None:
    logs: list[str] = []
    sc = Scraper(hostile.url, tmp_path / "store", interval_s=0.3, timeout_s=30, log=logs.append)
    sc.run(1.0)
    # bounded by the duration, not 6 s (the trickle) nor 30 s (the timeout): each scrape's
    # budget (in its message, below) is what is left of the 1 s, one per 0.3 s interval
    assert 1 <= len(sc.results) <= 1.0 / 0.3 + 1
    assert sc.results and not any(r.ok for r in sc.results)
    assert sc.failures == len(sc.results) == len(logs)
    assert all(re.match(r"^scrape \d+: timed out after [01](\.\d+)?s; skipped$", m) for m in logs)
    assert not (tmp_path / "store").exists()  # nothing stored, not even an empty dataset


@pytest.mark.parametrize("hostile", [["trickle"] * 20], indirect=True)
def test_cli_every_scrape_failed_is_exit_1(hostile: Hostile, tmp_path: Path) -> None:
    args = ["telemetry", "scrape", hostile.url, "--duration", "1s", "--timeout", "30s"]
    result = CliRunner().invoke(
        app, [*args, "--interval", "0.4s", "--store", str(tmp_path / "store")]
    )
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    n = len(lines) - 2  # one line per scrape, the summary, the error
    # bounded by --duration, not the 30 s timeout: at most one scrape per 0.4 s interval
    # in 1 s, each given at most what was left of it
    assert 1 <= n <= 1.0 / 0.4 + 1
    assert all(
        re.match(r"^scrape \d+: timed out after (0(\.\d+)?|1)s; skipped$", m) for m in lines[:n]
    )
    assert lines[-2] == f"0/{n} scrapes ok, {n} failed; 0 flush(es)"
    assert lines[-1] == f"error: {hostile.url}: all {n} scrape(s) failed; nothing was stored"
    assert "Traceback" not in result.output


@pytest.mark.parametrize("hostile", [["oversize", "garbage"]], indirect=True)
def test_cli_counts_failures_and_stores_the_good_pages(hostile: Hostile, tmp_path: Path) -> None:
    store = tmp_path / "store"
    result = CliRunner().invoke(
        app,
        [
            "telemetry",
            "scrape",
            hostile.url,
            "--duration",
            "1s",
            "--interval",
            "0.25s",
            "--max-body-bytes",
            str(CAP),
            "--store",
            str(store),
        ],
    )
    assert result.exit_code == 0, result.output
    lines = result.stderr.strip().splitlines()
    assert lines[0] == f"scrape 1: body of {len(BIG)} bytes is over the 4096-byte cap; skipped"
    assert lines[1].startswith("scrape 2: no Prometheus sample lines")
    m = re.fullmatch(r"(\d+)/(\d+) scrapes ok, 2 failed; 1 flush\(es\)", lines[-1])
    assert m and int(m[2]) == int(m[1]) + 2 and int(m[1]) >= 1, lines
    assert samples(store).height == 2 * int(m[1])
