"""``gpu-trace telemetry``: live NVML sampling, dcgm-exporter scraping, per-job usage."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Annotated

import typer

from gpu_trace.cli._boundary import domain_errors, err
from gpu_trace.cli.options import (
    JobsFileOpt,
    OldJobsFileOpt,
    ReadStoreOpt,
    StoreOpt,
    deprecated,
    number,
    seconds,
)
from gpu_trace.cli.output import Format, emit
from gpu_trace.errors import GpuTraceError
from gpu_trace.settings import resolve_store
from gpu_trace.values import choose

app = typer.Typer(
    help="Live GPU telemetry: NVML sampling, dcgm-exporter scraping, per-job GPU usage.",
    no_args_is_help=True,
)

Duration = Annotated[str | None, typer.Option(help="Stop after this long (default: Ctrl-C).")]


@app.command()
@domain_errors
def sample(
    interval: Annotated[str, typer.Option(help="Time between samples.")] = "1s",
    duration: Duration = None,
    flush: Annotated[str, typer.Option(help="Write to the store this often.")] = "60s",
    fields: Annotated[
        str | None, typer.Option(help="Comma-separated metrics to keep (default: all).")
    ] = None,
    host: Annotated[str | None, typer.Option(help="Host name (default: this host).")] = None,
    processes: Annotated[bool, typer.Option(help="Record running compute processes.")] = True,
    store: StoreOpt = None,
) -> None:
    """Sample this host's GPUs through NVML (nvidia-ml-py) into the store."""
    from gpu_trace.telemetry.nvml import Sampler, load_nvml

    nvml = load_nvml()
    sampler = Sampler(
        nvml,
        store=resolve_store(store),
        host=host or socket.gethostname(),
        interval_s=seconds(interval, "--interval"),
        flush_s=seconds(flush, "--flush"),
        fields=[f.strip() for f in fields.split(",")] if fields else None,
        processes=processes,
    )
    sampler.open()
    err.print(f"sampling {len(sampler.devices)} GPU device(s); Ctrl-C stops")
    sampler.run(seconds(duration, "--duration") if duration else None)
    err.print(
        f"{sampler.ticks} ticks, {sampler.writer.rows_written} rows in "
        f"{sampler.writer.flushes} flush(es) to {sampler.writer.store}"
    )


@app.command()
@domain_errors
def scrape(
    url: Annotated[str, typer.Argument(help="dcgm-exporter /metrics URL.")],
    interval: Annotated[str, typer.Option(help="Time between scrapes.")] = "15s",
    duration: Duration = None,
    timeout: Annotated[str, typer.Option(help="Give up on one scrape after this.")] = "5s",
    flush: Annotated[str, typer.Option(help="Write to the store this often.")] = "5m",
    host: Annotated[
        str | None, typer.Option(help="Host name (default: the hostname label, else URL host).")
    ] = None,
    max_body: Annotated[
        int,
        typer.Option(
            "--max-body-bytes",
            callback=number(ge=1),
            help="Fail a scrape whose body is larger than this.",
        ),
    ] = 16 * 1024 * 1024,  # scrape.MAX_BODY (imported lazily)
    store: StoreOpt = None,
) -> None:
    """Scrape a Prometheus exposition (dcgm-exporter) into the store.

    Each scrape must complete within --timeout (and before --duration ends); a transport
    error, a truncated or oversized body or a page without samples is a failed scrape,
    logged on one line and retried at the next interval. Exit 1 if scrapes ran and every
    one failed.
    """
    from gpu_trace.telemetry.scrape import Scraper

    scraper = Scraper(
        url,
        resolve_store(store),
        interval_s=seconds(interval, "--interval"),
        timeout_s=seconds(timeout, "--timeout"),
        flush_s=seconds(flush, "--flush"),
        host=host,
        max_body_bytes=max_body,
        log=lambda m: err.print(m, markup=False),
    )
    scraper.run(seconds(duration, "--duration") if duration else None)
    total, failed = len(scraper.results), scraper.failures
    err.print(f"{total - failed}/{total} scrapes ok, {failed} failed; {scraper.flushes} flush(es)")
    if total and failed == total:
        raise GpuTraceError(f"{url}: all {total} scrape(s) failed; nothing was stored")


@app.command()
@domain_errors
def jobs(
    jobs_file: JobsFileOpt = None,
    jobs_old: OldJobsFileOpt = None,
    by: Annotated[
        str | None, typer.Option(help="Attribute by a sample label instead: pod or job_id.")
    ] = None,
    fmt: Annotated[Format, typer.Option("--format", "-f", help="Output format.")] = Format.table,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write to this file.")
    ] = None,
    store: ReadStoreOpt = None,
) -> None:
    """Each job's mean/p50/p95 GPU utilization, memory and power from telemetry."""
    from gpu_trace.store.catalog import connect
    from gpu_trace.telemetry import jobs as tj

    jobs_file = deprecated("--jobs FILE", "--jobs-file FILE", jobs_old, jobs_file)
    root = resolve_store(store)
    if by is not None:
        choose("--by value", by, ("pod", "job_id"))
        frame = tj.usage_by_label(connect(root), by)
    elif jobs_file is not None:
        frame = tj.usage_from_file(root, jobs_file)
    else:
        frame = tj.usage_from_store(connect(root))
    emit(frame, fmt, output, 100)
