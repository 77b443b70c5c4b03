"""``gpu-trace telemetry pull``: DCGM series out of a Prometheus server's HTTP API.

Which families: ``/api/v1/label/__name__/values`` over the window, kept where gpu-trace
maps the name (the ``/metrics`` parser's DCGM table, old and DCGM 4.6 names), or the
``--metric`` names given. Each family is fetched with ``/api/v1/query_range`` in chunks:
Prometheus refuses a range query of more than 11,000 points per series ("exceeded
maximum resolution"), so a window of *P* points is cut into ``ceil(P / max_points)``
consecutive, non-overlapping requests of at most ``max_points`` (default 10,000)
evaluation times each: chunk *k* starts at ``start + k * max_points * step``, the last
ends at ``end``, so the union is exactly the points one unlimited query would return.
Times are sent as unix seconds with millisecond precision (integer milliseconds are
used throughout, so no float drift moves an evaluation time).

Every request is bounded like the scraper's (:mod:`gpu_trace.telemetry.scrape`): a
watchdog shuts the socket at ``timeout_s`` (or at what is left of the whole pull's
``deadline_s``, whichever is first), the body is read in chunks up to
``max_body_bytes``, plain ``http.client`` (no redirects, no proxy). Any failure ends the
pull with one line naming the URL, the request and the reason: connection refused, a
timeout or the deadline, an HTTP error (with Prometheus' ``errorType: error`` text when
the body has one), a body that is not JSON or not ``"status": "success"``. Nothing is
stored then: the answers are written to a temporary file that only becomes ``--save``'s
file, and is only ingested, when every request succeeded. Prometheus' ``warnings`` are
passed to ``log``.

The answers are kept as JSON lines (one per request, the body as received when it is
one line) and ingested with the ``prometheus-range`` loader, so a pull and a later
``gpu-trace ingest prometheus-range FILE`` of its ``--save`` file give the same rows.
"""

from __future__ import annotations

import datetime as dt
import http.client
import json
import re
import time as _time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpu_trace.errors import GpuTraceError
from gpu_trace.loaders.prometheus import FIELDS
from gpu_trace.store.atomic import atomic_bytes
from gpu_trace.store.parquet import slug
from gpu_trace.telemetry.scrape import (
    TRANSPORT_ERRORS,
    ScrapeFailed,
    Watchdog,
    http_connection,
    http_target,
    one_line,
    read_body,
    send_get,
)
from gpu_trace.values import parse_duration

PROMETHEUS_MAX_POINTS = 11_000
"""Prometheus' own limit on points per series of one range query."""
DEFAULT_MAX_POINTS = 10_000
MAX_BODY = 256 * 1024 * 1024
"""Default cap on one answer: 10,000 points are ~0.3 MB per series, so this is room for
hundreds of GPUs' series of one family in one chunk."""


class PullError(GpuTraceError):
    """A request of a pull failed; nothing was stored."""


def parse_when(text: str, now_ms: int) -> int:
    """Epoch milliseconds of ``--start`` / ``--end``: ISO-8601 (naive = UTC), unix
    seconds, ``now`` or ``now-<duration>`` (``now-6h``).
    """
    t = text.strip()
    if t == "now" or t.startswith("now-"):
        return now_ms - (
            round(parse_duration(t[4:], "--start/--end offset") * 1000) if t != "now" else 0
        )
    if re.fullmatch(r"\d+(\.\d+)?", t):
        return round(float(t) * 1000)
    try:
        when = dt.datetime.fromisoformat(t)
    except ValueError:
        msg = f"{text!r} is not a time (ISO-8601, unix seconds, now or now-6h)"
        raise GpuTraceError(msg) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return round(when.timestamp() * 1000)


def unix(ms: int) -> str:
    """Milliseconds as the unix-seconds text the API takes (exact, no float)."""
    sign = "-" if ms < 0 else ""
    return f"{sign}{abs(ms) // 1000}.{abs(ms) % 1000:03d}"


def iso(ms: int) -> str:
    """Milliseconds as ISO-8601 UTC with milliseconds (``...T00:00:00.000Z``), for
    error messages and chunk descriptions.
    """
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def compact(ms: int) -> str:
    """``20260101t000000z``: a time as a dataset-name part (as the scraper names them)."""
    return f"{dt.datetime.fromtimestamp(ms / 1000, dt.UTC):%Y%m%dt%H%M%Sz}"


@dataclass(frozen=True)
class Window:
    """A range query's evaluation times: ``start, start + step, ... <= end`` (ms)."""

    start_ms: int
    end_ms: int
    step_ms: int

    def __post_init__(self) -> None:
        if self.step_ms < 1:
            msg = "--step must be at least 1ms"
            raise GpuTraceError(msg)
        if self.end_ms < self.start_ms:
            msg = f"--end {iso(self.end_ms)} is before --start {iso(self.start_ms)}"
            raise GpuTraceError(msg)

    @property
    def points(self) -> int:
        """How many evaluation times the window has (both ends included)."""
        return (self.end_ms - self.start_ms) // self.step_ms + 1

    def chunks(self, max_points: int) -> list[tuple[int, int]]:
        """Consecutive (start, end) of at most ``max_points`` evaluation times each."""
        if not 1 <= max_points <= PROMETHEUS_MAX_POINTS:
            msg = f"--max-points must be 1..{PROMETHEUS_MAX_POINTS}"
            raise GpuTraceError(msg)
        span = max_points * self.step_ms
        out = []
        s = self.start_ms
        while s <= self.end_ms:
            e = min(self.end_ms, s + (max_points - 1) * self.step_ms)
            e = s + (e - s) // self.step_ms * self.step_ms
            out.append((s, e))
            s += span
        return out


@dataclass
class PromClient:
    """GETs on one Prometheus server's HTTP API, each bounded in time and size."""

    url: str
    timeout_s: float = 30.0
    deadline_s: float = 600.0
    max_body_bytes: int = MAX_BODY
    clock: Callable[[], float] = _time.monotonic
    log: Callable[[str], None] = print
    requests: int = 0
    began: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        self.parts = http_target(
            self.url.rstrip("/"), f"--prometheus {self.url!r}", self.max_body_bytes
        )
        self.began = self.clock()

    @property
    def target(self) -> str:
        """``host-port`` of the server, as a dataset-name part."""
        default = 443 if self.parts.scheme == "https" else 80
        return slug(f"{self.parts.hostname}-{self.parts.port or default}")

    def get(self, api: str, params: dict[str, str], what: str) -> tuple[dict[str, Any], bytes]:
        """The parsed ``"status": "success"`` answer of ``GET <url><api>?params`` and
        its bytes, or :class:`PullError`.
        """
        left = self.deadline_s - (self.clock() - self.began)
        if left <= 0:
            msg = f"{self.url}: {what}: the --deadline of {self.deadline_s:g}s passed"
            raise PullError(msg)
        budget, limit = (
            (self.timeout_s, "--timeout") if self.timeout_s <= left else (left, "--deadline")
        )
        path = (self.parts.path or "") + api + "?" + urllib.parse.urlencode(params)
        conn = http_connection(self.parts, max(budget, 0.001))
        watchdog = Watchdog(conn, budget)
        self.requests += 1
        try:
            with watchdog:
                resp = send_get(conn, path, "application/json")
                body = read_body(resp, self.max_body_bytes)
        except ScrapeFailed as exc:
            msg = f"{self.url}: {what}: {one_line(exc)}"
            raise PullError(msg) from None
        except TRANSPORT_ERRORS as exc:
            if watchdog.fired or isinstance(exc, TimeoutError):
                reason = (
                    f"no complete answer within {budget:g}s (--timeout)"
                    if limit == "--timeout"
                    else f"the --deadline of {self.deadline_s:g}s passed before an answer"
                )
            elif isinstance(exc, ConnectionRefusedError):
                reason = "cannot connect: connection refused (is Prometheus running there?)"
            else:
                text = one_line(exc)
                reason = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
            msg = f"{self.url}: {what}: {reason}"
            raise PullError(msg) from None
        finally:
            conn.close()
        return self._answer(resp, body, what), body

    def _answer(self, resp: http.client.HTTPResponse, body: bytes, what: str) -> dict[str, Any]:
        where = f"{self.url}: {what}"
        try:
            doc = json.loads(body)
        except (ValueError, RecursionError) as exc:
            if resp.status != 200:
                text = one_line(body[:200].decode("utf-8", "replace"))
                msg = f"{where}: HTTP {resp.status} {one_line(resp.reason)}: {text}"
                raise PullError(msg) from None
            detail = (
                f"{exc.msg} at line {exc.lineno} column {exc.colno}"
                if isinstance(exc, json.JSONDecodeError)
                else type(exc).__name__
            )
            msg = f"{where}: the answer is not JSON ({detail})"
            raise PullError(msg) from None
        if not isinstance(doc, dict):
            msg = f"{where}: the answer is not a JSON object"
            raise PullError(msg)
        if doc.get("status") == "error":
            http_part = f"HTTP {resp.status}: " if resp.status != 200 else ""
            msg = (
                f"{where}: {http_part}Prometheus error {one_line(doc.get('errorType'))}: "
                f"{one_line(doc.get('error'))}"
            )
            raise PullError(msg)
        if resp.status != 200:
            msg = f"{where}: HTTP {resp.status} {one_line(resp.reason)}"
            raise PullError(msg)
        if doc.get("status") != "success":
            msg = f"{where}: status {one_line(doc.get('status'))!r}, not success"
            raise PullError(msg)
        for w in doc.get("warnings") or []:
            self.log(f"warning: {what}: {one_line(w)}")
        return doc


def known_names() -> list[str]:
    """The family names gpu-trace maps, in the DCGM table's order."""
    return list(FIELDS)


def discover(client: PromClient, window: Window) -> list[str]:
    """The DCGM families the server has in the window that gpu-trace maps."""
    doc, _ = client.get(
        "/api/v1/label/__name__/values",
        {"start": unix(window.start_ms), "end": unix(window.end_ms)},
        "label __name__ values",
    )
    names = doc.get("data")
    if not isinstance(names, list):
        msg = f"{client.url}: label __name__ values: data is not a list"
        raise PullError(msg)
    present = {str(n) for n in names}
    return [n for n in known_names() if n in present]


def selector(name: str, matchers: str | None) -> str:
    """The PromQL series selector: ``name`` or ``name{matchers}``."""
    return f"{name}{{{matchers}}}" if matchers else name


@dataclass
class PullResult:
    """What a pull wrote: the file, the families asked for, HTTP requests made,
    chunks per family, and the series and samples received.
    """

    file: Path
    families: list[str]
    requests: int
    chunks: int
    series: int = 0
    samples: int = 0


def _lines(
    client: PromClient, window: Window, families: list[str], matchers: str | None, max_points: int
) -> Iterator[tuple[bytes, int, int]]:
    chunks = window.chunks(max_points)
    step = unix(window.step_ms)
    for name in families:
        for k, (s, e) in enumerate(chunks, start=1):
            what = f"query_range {selector(name, matchers)} chunk {k}/{len(chunks)} ({iso(s)}..{iso(e)})"
            doc, body = client.get(
                "/api/v1/query_range",
                {"query": selector(name, matchers), "start": unix(s), "end": unix(e), "step": step},
                what,
            )
            line = body.strip()
            if b"\n" in line or b"\r" in line:
                line = json.dumps(doc, separators=(",", ":")).encode()
            result = doc.get("data", {}).get("result", [])
            n_series = len(result) if isinstance(result, list) else 0
            n_samples = (
                sum(len(r.get("values", [])) for r in result if isinstance(r, dict))
                if isinstance(result, list)
                else 0
            )
            yield line, n_series, n_samples


def pull(
    client: PromClient,
    window: Window,
    out: Path,
    *,
    metrics: list[str] | None = None,
    matchers: str | None = None,
    max_points: int = DEFAULT_MAX_POINTS,
) -> PullResult:
    """Fetch every chunk of every family into ``out`` (JSON lines), atomically: ``out``
    appears only once every request succeeded.
    """
    if metrics:
        unknown = [m for m in metrics if m not in FIELDS]
        if unknown:
            msg = (
                f"--metric {unknown[0]}: no canonical metric for it (gpu-trace maps "
                f"{len(FIELDS)} DCGM families; see `gpu-trace schema gpu_samples`)"
            )
            raise GpuTraceError(msg)
        families = list(dict.fromkeys(metrics))
    else:
        families = discover(client, window)
        if not families:
            msg = (
                f"{client.url}: no DCGM series between {iso(window.start_ms)} and "
                f"{iso(window.end_ms)} (none of the server's metric names is a DCGM "
                "field gpu-trace maps)"
            )
            raise PullError(msg)
    chunks = len(window.chunks(max_points))
    result = PullResult(out, families, 0, chunks)
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_bytes(out) as fh:
        for line, n_series, n_samples in _lines(client, window, families, matchers, max_points):
            fh.write(line + b"\n")
            result.series += n_series
            result.samples += n_samples
    result.requests = client.requests
    return result
