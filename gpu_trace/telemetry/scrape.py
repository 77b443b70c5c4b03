"""The dcgm-exporter scraper behind ``gpu-trace telemetry scrape URL``.

Every ``interval_s`` it GETs the URL (stdlib ``urllib``; a per-request timeout), parses
the body with the same tolerant parser as ``gpu-trace ingest prometheus``
(:func:`gpu_trace.telemetry.prometheus.parse`), stamps every line with the scrape time
and buffers the rows; every ``flush_s`` (and at the end / on Ctrl-C) they are written as
a new dataset through :class:`FlushWriter`, together with the quarantined lines. A
scrape that times out, fails, or returns a body with no sample line is reported on one
line and skipped; the scraper carries on.
"""

from __future__ import annotations

import datetime as dt
import time as _time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from gpu_trace.loaders.textfile import LINE, RAW
from gpu_trace.store.parquet import StoreTransaction, slug
from gpu_trace.telemetry.common import run_periodic
from gpu_trace.telemetry.prometheus import SOURCE, parse

MAX_BODY = 64 * 1024 * 1024


@dataclass
class ScrapeResult:
    ok: bool
    samples: int = 0
    quarantined: int = 0
    message: str = ""


@dataclass
class Scraper:
    url: str
    store: Path
    interval_s: float = 15.0
    timeout_s: float = 5.0
    flush_s: float = 300.0
    host: str | None = None
    clock: Callable[[], float] = _time.time
    sleep: Callable[[float], None] = _time.sleep
    log: Callable[[str], None] = print
    frames: dict[str, list[pl.DataFrame]] = field(default_factory=dict)
    flushes: int = 0
    results: list[ScrapeResult] = field(default_factory=list)

    def __post_init__(self) -> None:
        parts = urllib.parse.urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            from gpu_trace.errors import GpuTraceError

            raise GpuTraceError(f"{self.url!r} is not an http(s) URL")
        self.target = slug(f"{parts.hostname}-{parts.port or 80}")
        self.start = dt.datetime.fromtimestamp(self.clock(), dt.UTC)

    def fetch(self) -> str:
        req = urllib.request.Request(self.url, headers={"Accept": "text/plain"})
        with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
            body: bytes = resp.read(MAX_BODY)
        return body.decode("utf-8", errors="replace")

    def scrape_once(self) -> ScrapeResult:
        when = dt.datetime.fromtimestamp(self.clock(), dt.UTC)
        n = len(self.results) + 1
        try:
            text = self.fetch()
        except TimeoutError:
            res = ScrapeResult(
                False, message=f"scrape {n}: timed out after {self.timeout_s:g}s; skipped"
            )
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            res = ScrapeResult(False, message=f"scrape {n}: {reason}; skipped")
        else:
            res = self.ingest_text(text, when, n)
        self.results.append(res)
        if res.message:
            self.log(res.message)
        return res

    def ingest_text(self, text: str, when: dt.datetime, n: int) -> ScrapeResult:
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
        return f"{self.target}-{self.start:%Y%m%dt%H%M%Sz}-{self.flushes:05d}"

    def flush(self) -> None:
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
        run_periodic(
            self.scrape_once,
            self.flush,
            clock=self.clock,
            sleep=self.sleep,
            interval_s=self.interval_s,
            flush_s=self.flush_s,
            duration_s=duration_s,
        )
