"""The dcgm-exporter scraper behind ``gpu-trace telemetry scrape URL``.

Every ``interval_s`` it GETs the URL, parses the body with the same tolerant parser as
``gpu-trace ingest prometheus`` (:func:`gpu_trace.loaders.prometheus.parse`), stamps
every line with the scrape time and buffers the rows; every ``flush_s`` (and at the end /
on Ctrl-C) they are written as a new dataset through :class:`StoreTransaction`, together
with the quarantined lines.

The target is untrusted: one scrape has a total deadline (``timeout_s``, and never past
the end of ``--duration``) enforced by a watchdog that shuts the socket down, so a
server trickling one byte at a time is cut off too, not only a silent one; the body is
read in chunks up to ``max_body_bytes`` and a larger one is refused without buffering
more; a body shorter than its ``Content-Length`` is refused. Any transport error
(``http.client``, socket, TLS, timeout, decoding) or a body with no sample line is a
failed scrape: one line through ``log``, nothing of it is parsed or stored, and the next
interval tries again. Plain ``http.client`` (no redirects, no ``$http_proxy``): an
exporter is scraped directly, as Prometheus does.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import http.client
import re
import socket
import ssl
import threading
import time as _time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from gpu_trace.errors import GpuTraceError
from gpu_trace.loaders.prometheus import SOURCE, parse
from gpu_trace.loaders.telemetry_common import run_periodic
from gpu_trace.loaders.textfile import LINE, RAW
from gpu_trace.store.parquet import StoreTransaction, slug
from gpu_trace.version import __version__

MAX_BODY = 16 * 1024 * 1024
"""Default body cap: dcgm-exporter pages are tens of kB per GPU; 16 MiB is hundreds of
GPUs. Above it the scrape fails instead of growing the process."""
CHUNK = 64 * 1024
TRANSPORT_ERRORS: tuple[type[Exception], ...] = (
    http.client.HTTPException,  # BadStatusLine, IncompleteRead, LineTooLong, >100 headers
    OSError,  # socket errors, resets, TLS (ssl.SSLError), timeouts, DNS
    ValueError,  # includes UnicodeError (a header or URL that does not decode)
)


class ScrapeFailed(Exception):
    """A response that arrived but cannot be trusted as a whole page."""


@dataclass
class ScrapeResult:
    """How one scrape went: stored or skipped, its sample and quarantined line counts,
    and the line logged about it (empty for a clean scrape).
    """

    ok: bool
    samples: int = 0
    quarantined: int = 0
    message: str = ""


class Watchdog:
    """Shuts a connection's socket down at a deadline, waking any blocked read.

    A socket timeout only bounds one ``recv``; a server sending a byte every 0.1 s never
    trips it. ``disarm`` runs before the connection is closed, under the same lock, so
    the watchdog never touches a file descriptor that was closed and reused.
    """

    def __init__(self, conn: http.client.HTTPConnection, budget_s: float) -> None:
        self.conn = conn
        self.fired = False
        self.lock = threading.Lock()
        self.done = False
        self.timer = threading.Timer(max(budget_s, 0.0), self._fire)
        self.timer.daemon = True

    def __enter__(self) -> Watchdog:
        self.timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.timer.cancel()
        with self.lock:
            self.done = True

    def _fire(self) -> None:
        with self.lock:
            if self.done or self.conn.sock is None:
                return
            self.fired = True
            with contextlib.suppress(OSError):  # the plain socket's, also under TLS
                socket.socket.shutdown(self.conn.sock, socket.SHUT_RDWR)


def read_body(resp: http.client.HTTPResponse, max_bytes: int) -> bytes:
    """The whole body, in chunks, refused (:class:`ScrapeFailed`) once it is over
    ``max_bytes`` (declared or streamed) or shorter than its ``Content-Length``. Shared
    with the Prometheus API client (``promclient``).
    """
    declared = resp.getheader("Content-Length")
    length: int | None = None
    if declared is not None and resp.getheader("Transfer-Encoding") is None:
        if not declared.strip().isdigit():
            msg = f"bad Content-Length {declared!r}"
            raise ScrapeFailed(msg)
        length = int(declared)
        if length > max_bytes:
            msg = f"body of {length} bytes is over the {max_bytes}-byte cap"
            raise ScrapeFailed(msg)
    body = bytearray()
    while chunk := resp.read1(min(CHUNK, max_bytes + 1 - len(body))):
        body += chunk
        if len(body) > max_bytes:
            msg = f"body is over the {max_bytes}-byte cap"
            raise ScrapeFailed(msg)
    if length is not None and len(body) != length:
        msg = f"body cut short: {len(body)} of {length} bytes (Content-Length)"
        raise ScrapeFailed(msg)
    return bytes(body)


def one_line(text: object) -> str:
    """``text`` with every run of whitespace as one space: an untrusted reason phrase
    or error message cannot break the one-line log.
    """
    return re.sub(r"\s+", " ", str(text)).strip()


def http_target(url: str, label: str, max_body_bytes: int) -> urllib.parse.SplitResult:
    """``url`` split, or a one-line error (``<label> is not an http(s) URL``) when it is
    not a usable http(s) URL or the body cap is below 1 byte; shared by the scraper and
    the Prometheus API client so both refuse the same inputs with the same words.
    """
    parts = urllib.parse.urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = -1
    if parts.scheme not in ("http", "https") or not parts.hostname or port == -1:
        msg = f"{label} is not an http(s) URL"
        raise GpuTraceError(msg)
    if max_body_bytes < 1:
        msg = "the body cap must be at least 1 byte"
        raise GpuTraceError(msg)
    return parts


def http_connection(parts: urllib.parse.SplitResult, timeout: float) -> http.client.HTTPConnection:
    """An (unopened) connection to ``parts``' host, TLS-verified for https."""
    host, port = parts.hostname or "", parts.port
    if parts.scheme == "https":
        return http.client.HTTPSConnection(
            host, port, timeout=timeout, context=ssl.create_default_context()
        )
    return http.client.HTTPConnection(host, port, timeout=timeout)


def send_get(conn: http.client.HTTPConnection, path: str, accept: str) -> http.client.HTTPResponse:
    """Connect and send ``GET path`` (identity encoding, one request per connection, our
    User-Agent), returning the response with its headers read; the scraper and the
    Prometheus API client send the same request apart from ``Accept``.
    """
    conn.connect()
    conn.request(
        "GET",
        path,
        headers={
            "Accept": accept,
            "Accept-Encoding": "identity",
            "Connection": "close",
            "User-Agent": f"gpu-trace/{__version__}",
        },
    )
    return conn.getresponse()


@dataclass
class Scraper:
    """Scrapes one dcgm-exporter URL into a store (see the module docstring); the
    clock, sleep and log are parameters so tests drive it without waiting.
    """

    url: str
    store: Path
    interval_s: float = 15.0
    timeout_s: float = 5.0
    """Total time one scrape may take: connect, headers and body."""
    flush_s: float = 300.0
    host: str | None = None
    max_body_bytes: int = MAX_BODY
    clock: Callable[[], float] = _time.time
    sleep: Callable[[float], None] = _time.sleep
    log: Callable[[str], None] = print
    frames: dict[str, list[pl.DataFrame]] = field(default_factory=dict)
    flushes: int = 0
    results: list[ScrapeResult] = field(default_factory=list)
    end: float | None = None
    """``clock()`` value at which the run stops (set by :meth:`run`); no scrape runs past it."""

    def __post_init__(self) -> None:
        parts = http_target(self.url, repr(self.url), self.max_body_bytes)
        self.parts = parts
        self.target = slug(f"{parts.hostname}-{parts.port or 80}")
        self.start = dt.datetime.fromtimestamp(self.clock(), dt.UTC)

    @property
    def failures(self) -> int:
        """Scrapes that failed so far (the CLI's closing line and exit code)."""
        return sum(not r.ok for r in self.results)

    def budget_s(self) -> float:
        """Seconds the next scrape may take: ``timeout_s``, cut to the run's end."""
        if self.end is None:
            return self.timeout_s
        return max(0.0, min(self.timeout_s, self.end - self.clock()))

    def fetch(self, budget_s: float | None = None) -> str:
        """The whole body as text, or raise: every byte arrived within ``budget_s``, it
        is at most ``max_body_bytes`` and as long as its ``Content-Length``.
        """
        budget = self.timeout_s if budget_s is None else budget_s
        conn = http_connection(self.parts, max(budget, 0.001))
        path = self.parts.path or "/"
        if self.parts.query:
            path += "?" + self.parts.query
        watchdog = Watchdog(conn, budget)
        try:
            with watchdog:
                return self._body(send_get(conn, path, "text/plain"))
        except TRANSPORT_ERRORS as exc:
            if watchdog.fired:
                msg = "deadline"
                raise TimeoutError(msg) from exc
            raise
        finally:
            conn.close()

    def _body(self, resp: http.client.HTTPResponse) -> str:
        if resp.status != 200:
            msg = f"HTTP {resp.status} {one_line(resp.reason)}"
            raise ScrapeFailed(msg)
        encoding = (resp.getheader("Content-Encoding") or "identity").strip().lower()
        if encoding != "identity":
            msg = f"unsupported Content-Encoding {encoding!r}"
            raise ScrapeFailed(msg)
        return read_body(resp, self.max_body_bytes).decode("utf-8", errors="replace")

    def scrape_once(self) -> ScrapeResult:
        """One scrape within its budget: fetched and buffered, or failed and skipped
        with one log line; never raises for what the target sends.
        """
        when = dt.datetime.fromtimestamp(self.clock(), dt.UTC)
        n = len(self.results) + 1
        budget = self.budget_s()
        try:
            text = self.fetch(budget)
        except TimeoutError:
            res = ScrapeResult(False, message=f"scrape {n}: timed out after {budget:g}s; skipped")
        except ScrapeFailed as exc:
            res = ScrapeResult(False, message=f"scrape {n}: {one_line(exc)}; skipped")
        except TRANSPORT_ERRORS as exc:
            reason = one_line(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
            res = ScrapeResult(False, message=f"scrape {n}: {reason}; skipped")
        else:
            res = self.ingest_text(text, when, n)
        self.results.append(res)
        if res.message:
            self.log(res.message)
        return res

    def ingest_text(self, text: str, when: dt.datetime, n: int) -> ScrapeResult:
        """Parse one page stamped ``when`` and buffer its samples, events and
        quarantined lines; a page with no sample line is a failed scrape (nothing kept).
        """
        lines = text.splitlines()
        frame = pl.LazyFrame(
            {LINE: list(range(1, len(lines) + 1)), RAW: lines},
            schema={LINE: pl.Int64, RAW: pl.String},
        )
        dataset = self.dataset()
        samples, events, quarantine, _no, _skip, n_data = parse(
            frame,
            when=when,
            host=self.host,
            default_host=self.target,
            source=SOURCE,
            dataset=dataset,
            file=Path(f"scrape-{n:06d}"),
        )
        if n_data == 0 or samples.height + events.height == 0:
            return ScrapeResult(
                False,
                quarantined=quarantine.height,
                message=f"scrape {n}: no Prometheus sample lines in the response "
                f"({quarantine.height} lines quarantined); skipped",
            )
        for name, f in (("gpu_samples", samples), ("events", events), ("quarantine", quarantine)):
            if f.height:
                self.frames.setdefault(name, []).append(f)
        msg = f"scrape {n}: {quarantine.height} lines quarantined" if quarantine.height else ""
        return ScrapeResult(True, samples.height, quarantine.height, msg)

    def dataset(self) -> str:
        """The name of the next flush's dataset: target, start time, flush number."""
        return f"{self.target}-{self.start:%Y%m%dt%H%M%Sz}-{self.flushes:05d}"

    def flush(self) -> None:
        """Write the buffered scrapes as one dataset in one store transaction."""
        if not self.frames:
            return
        dataset = self.dataset()
        with StoreTransaction(self.store) as tx:
            for table, frames in self.frames.items():
                f = pl.concat(frames, how="diagonal_relaxed").with_columns(
                    pl.lit(SOURCE).alias("source"), pl.lit(dataset).alias("dataset")
                )
                tx.write(
                    table,
                    f,
                    source=SOURCE,
                    dataset=dataset,
                    metadata={"time_basis": "scrape", "source_tz": "UTC", "url": self.url},
                )
        self.frames = {}
        self.flushes += 1

    def run(self, duration_s: float | None) -> None:
        """Scrape until ``duration_s`` has passed (or Ctrl-C): no scrape and no sleep
        extends past it, whatever the target does.
        """
        self.end = None if duration_s is None else self.clock() + duration_s

        def sleep(delay: float) -> None:
            if self.end is not None:
                delay = min(delay, max(0.0, self.end - self.clock()))
            if delay > 0:
                self.sleep(delay)

        run_periodic(
            self.scrape_once,
            self.flush,
            clock=self.clock,
            sleep=sleep,
            interval_s=self.interval_s,
            flush_s=self.flush_s,
            duration_s=duration_s,
        )
