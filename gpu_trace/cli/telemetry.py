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
        msg = f"{url}: all {total} scrape(s) failed; nothing was stored"
        raise GpuTraceError(msg)


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
    from gpu_trace.analyses import job_usage as tj
    from gpu_trace.store.catalog import connect

    jobs_file = deprecated("--jobs FILE", "--jobs-file FILE", jobs_old, jobs_file)
    root = resolve_store(store)
    if by is not None:
        choose("--by value", by, ("pod", "job_id"))
        frame = tj.usage_by_label(connect(root), by)
    elif jobs_file is not None:
        frame = tj.usage_from_file(root, jobs_file)
    else:
        frame = tj.usage_from_store(connect(root))
    emit(frame, fmt, output, 100, tj.usage_units())


@app.command()
@domain_errors
def pull(
    prometheus: Annotated[
        str, typer.Option("--prometheus", help="Prometheus server URL, e.g. http://127.0.0.1:9090.")
    ],
    start: Annotated[
        str, typer.Option(help="First evaluation time: ISO-8601 (naive = UTC), unix s, now-6h.")
    ],
    end: Annotated[
        str, typer.Option(help="Last evaluation time (same forms; default now).")
    ] = "now",
    step: Annotated[
        str, typer.Option(help="Resolution: time between points (15s, 60s, 5m).")
    ] = "60s",
    metric: Annotated[
        list[str] | None,
        typer.Option(
            "--metric",
            help="DCGM family to pull (repeatable; default: every mapped family the server has).",
        ),
    ] = None,
    match: Annotated[
        str | None,
        typer.Option(help="Label matchers added to every query, e.g. 'job=\"dcgm\"'."),
    ] = None,
    max_points: Annotated[
        int,
        typer.Option(
            min=1,
            max=11_000,
            help="Points per series per request; longer ranges are fetched in chunks "
            "(Prometheus refuses more than 11,000).",
        ),
    ] = 10_000,
    timeout: Annotated[str, typer.Option(help="Give up on one request after this.")] = "30s",
    deadline: Annotated[str, typer.Option(help="Give up on the whole pull after this.")] = "10m",
    max_body: Annotated[
        int,
        typer.Option("--max-body-bytes", min=1, help="Refuse an answer larger than this."),
    ] = 256 * 1024 * 1024,  # promclient.MAX_BODY (imported lazily)
    save: Annotated[
        Path | None,
        typer.Option(
            help="Keep the raw answers here (JSON lines; `ingest prometheus-range` reads it). "
            "Its name is then the dataset's."
        ),
    ] = None,
    host: Annotated[
        str | None,
        typer.Option(help="Host name (default: the hostname/Hostname label, else instance)."),
    ] = None,
    store: StoreOpt = None,
) -> None:
    """Pull DCGM series from Prometheus (/api/v1/query_range) into gpu_samples / events.

    All or nothing: if any request fails (connection, --timeout, --deadline, HTTP or
    Prometheus error, an answer that is not JSON or over --max-body-bytes) the pull ends
    with one line naming the request and nothing is stored or saved.
    """
    import tempfile
    import time

    from gpu_trace.cli.ingest import run_ingest
    from gpu_trace.store.parquet import slug
    from gpu_trace.telemetry import promclient as pc

    now_ms = round(time.time() * 1000)
    window = pc.Window(
        pc.parse_when(start, now_ms), pc.parse_when(end, now_ms), round(seconds(step) * 1000)
    )
    client = pc.PromClient(
        prometheus,
        timeout_s=seconds(timeout),
        deadline_s=seconds(deadline),
        max_body_bytes=max_body,
        log=lambda m: err.print(m, markup=False),
    )
    dataset = slug(
        save.stem
        if save is not None
        else f"{client.target}-{pc.compact(window.start_ms)}-{pc.compact(window.end_ms)}"
    )
    extra = {
        "url": prometheus,
        "query_start": pc.iso(window.start_ms),
        "query_end": pc.iso(window.end_ms),
        "query_step_s": pc.unix(window.step_ms),
        **({"query_match": match} if match else {}),
    }
    with tempfile.TemporaryDirectory(prefix="gpu-trace-pull-") as tmp:
        out = save if save is not None else Path(tmp) / f"{dataset}.jsonl"
        result = pc.pull(client, window, out, metrics=metric, matchers=match, max_points=max_points)
        err.print(
            f"pulled {len(result.families)} families x {result.chunks} chunk(s) in "
            f"{result.requests} request(s): {result.series} series answers, "
            f"{result.samples} points"
        )
        if result.samples == 0:
            msg = (
                f"{prometheus}: no points between {extra['query_start']} and "
                f"{extra['query_end']}; nothing was stored"
            )
            raise GpuTraceError(msg)
        run_ingest("prometheus-range", out, store, host=host, dataset=dataset, extra=extra)
