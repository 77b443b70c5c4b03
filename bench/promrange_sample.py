"""Regenerate ``data/samples/telemetry/prometheus-range-dcgm.jsonl``:
``python -m bench.promrange_sample [SECONDS]`` (needs the Debian package ``prometheus``).

A real Prometheus (``tests/prom_server.py``: temp storage, loopback port) scrapes two
loopback exporters of ours every second, each serving one bundled dcgm-exporter page
byte for byte (``dcgm-exporter-metrics-t4.prom``, ``dcgm-exporter-a100-mig.prom``), for
SECONDS (default 20); then ``gpu-trace telemetry pull --step 1s --max-points 5 --save``
fetches every mapped DCGM family over the scraped window into the sample file (JSON lines,
one answer per chunk, as received). The pages never change, so the values are constant
over time; the file shows the real API's shape (labels Prometheus adds: ``instance``,
``job``; unix-second times; string values), not a workload.
"""

from __future__ import annotations

import http.server
import sys
import tempfile
import threading
import time
from pathlib import Path

from typer.testing import CliRunner

from gpu_trace.cli import app
from tests import prom_server

TELEMETRY = Path("data/samples/telemetry")
OUT = TELEMETRY / "prometheus-range-dcgm.jsonl"
PAGES = ("dcgm-exporter-metrics-t4.prom", "dcgm-exporter-a100-mig.prom")


def exporter(page: bytes) -> http.server.ThreadingHTTPServer:
    """A loopback HTTP server that answers every GET with ``page`` (a stand-in
    dcgm-exporter for Prometheus to scrape), serving from a daemon thread.
    """

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args: object) -> None:
            return

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def main(seconds: float) -> None:
    """Scrape the two exporters for ``seconds`` with a real Prometheus, then pull the
    window into the sample file (see the module docstring).
    """
    exporters = [exporter((TELEMETRY / p).read_bytes()) for p in PAGES]
    targets = ", ".join(f"'127.0.0.1:{e.server_address[1]}'" for e in exporters)
    config = (
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        f"scrape_configs:\n  - job_name: dcgm\n    static_configs:\n      - targets: [{targets}]\n"
    )
    with tempfile.TemporaryDirectory() as tmp:
        srv = prom_server.start(Path(tmp) / "data", config)
        try:
            start = time.time()
            time.sleep(seconds)
            end = time.time()
            args = ["telemetry", "pull", "--prometheus", srv.url, "--step", "1s"]
            # the first scrapes land a few seconds after start-up on a loaded machine
            args += ["--start", f"{start + 5:.0f}", "--end", f"{end - 1:.0f}"]
            args += ["--max-points", "5", "--save", str(OUT), "--store", str(Path(tmp) / "s")]
            res = CliRunner().invoke(app, args)
            sys.stderr.write(res.stderr)
            if res.exit_code:
                raise SystemExit(res.exit_code)
        finally:
            srv.stop()
            for e in exporters:
                e.shutdown()
    sys.stdout.write(f"{OUT}: {len(OUT.read_text().splitlines())} answers\n")


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 20.0)
