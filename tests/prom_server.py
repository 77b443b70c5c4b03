"""A real Prometheus server for tests: deterministic history backfilled with
``promtool tsdb create-blocks-from openmetrics``, served by ``prometheus`` on a free
loopback port (no scrape targets), or scraping loopback exporters.

Skips only where the Debian package ``prometheus`` is missing and
``GPU_TRACE_REQUIRE_PROMETHEUS`` is not ``1`` (CI sets it, so there a missing server is a
failure, as ``GPU_TRACE_REQUIRE_RAY`` does for Ray).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

LOOKBACK_S = 90
"""``--query.lookback-delta``: a point is answered with the latest sample at most 90 s
before it. Set explicitly (default 5 m) so a gap in the history gives hand-countable
answers: with 60 s samples, the first missing minute repeats the sample before it and
the following ones are absent."""


def binaries() -> tuple[str, str]:
    """The ``prometheus`` and ``promtool`` paths, or skip / fail as documented above."""
    server, tool = shutil.which("prometheus"), shutil.which("promtool")
    if server and tool:
        return server, tool
    why = "prometheus / promtool not installed (Debian package `prometheus`)"
    if os.environ.get("GPU_TRACE_REQUIRE_PROMETHEUS") == "1":
        pytest.fail(f"GPU_TRACE_REQUIRE_PROMETHEUS=1 but {why}")
    pytest.skip(why)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    url: str
    proc: subprocess.Popen[bytes]
    log: Path

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def backfill(openmetrics: str, storage: Path) -> None:
    """Write ``openmetrics`` (ends with ``# EOF``) as TSDB blocks into ``storage``."""
    _, tool = binaries()
    src = storage.parent / "history.om"
    src.write_text(openmetrics)
    storage.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [tool, "tsdb", "create-blocks-from", "openmetrics", "-q", str(src), str(storage)],
        check=True,
        capture_output=True,
        timeout=60,
    )


def start(storage: Path, config: str = "global: {}\n", *, ready_s: float = 30.0) -> Server:
    """Start ``prometheus`` on ``storage`` with ``config``; returns once ``/-/ready``.

    The port is free when picked but another process (a parallel test worker) can take
    it before prometheus binds it: that start is retried on a new port, twice."""
    for _ in range(2):
        try:
            return _start_once(storage, config, ready_s)
        except _PortTaken:
            continue
    return _start_once(storage, config, ready_s)


class _PortTaken(RuntimeError):
    """prometheus exited because its listen address was in use."""


def _start_once(storage: Path, config: str, ready_s: float) -> Server:
    server, _ = binaries()
    cfg = storage.parent / "prometheus.yml"
    cfg.write_text(config)
    port = free_port()
    log = storage.parent / "prometheus.log"
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            [
                server,
                f"--config.file={cfg}",
                f"--storage.tsdb.path={storage}",
                "--storage.tsdb.retention.time=100y",  # the history is older than 15 d
                f"--web.listen-address=127.0.0.1:{port}",
                f"--query.lookback-delta={LOOKBACK_S}s",
            ],
            stdout=fh,
            stderr=subprocess.STDOUT,
        )
    srv = Server(f"http://127.0.0.1:{port}", proc, log)
    deadline = time.monotonic() + ready_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            text = log.read_text()
            if "address already in use" in text:
                raise _PortTaken(text[-2000:])
            raise RuntimeError(f"prometheus exited {proc.returncode}: {text[-2000:]}")
        try:
            with urllib.request.urlopen(srv.url + "/-/ready", timeout=1) as resp:
                if resp.status == 200:
                    return srv
        except OSError:
            time.sleep(0.1)
    srv.stop()
    raise RuntimeError(f"prometheus not ready after {ready_s:g}s: {log.read_text()[-2000:]}")
