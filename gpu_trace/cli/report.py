"""``gpu-trace report``: build the HTML report site from the store."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from gpu_trace.cli._boundary import domain_errors
from gpu_trace.cli.options import StoreOpt
from gpu_trace.errors import GpuTraceError
from gpu_trace.progress import task
from gpu_trace.reports import build_site
from gpu_trace.settings import STORE_ENV, resolve_store


@domain_errors
def report(
    store: StoreOpt = None,
    out: Annotated[Path, typer.Option("--out", help="Folder to write the site to.")] = Path(
        "reports/site"
    ),
    title: Annotated[str, typer.Option("--title", help="Page title.")] = "gpu-trace report",
    source: Annotated[
        list[str] | None, typer.Option("--source", "-s", help="Only these sources (repeatable).")
    ] = None,
    replay: Annotated[
        list[str] | None,
        typer.Option(
            "--replay", help="Add a policy scorecard for these replay run ids (repeatable; 'all')."
        ),
    ] = None,
    sweep: Annotated[
        Path | None,
        typer.Option(
            "--sweep", help="Add a sweep page (means, 95 % intervals); default store: the sweep's."
        ),
    ] = None,
    images: Annotated[
        list[str] | None,
        typer.Option(
            "--images",
            help="Also export every chart as svg and/or png into OUT/charts/ (repeatable).",
        ),
    ] = None,
) -> None:
    """Build a self-contained HTML report site (works offline, from a file:// URL)."""
    formats = [f.lower() for f in images or []]
    bad = [f for f in formats if f not in ("svg", "png")]
    if bad:
        raise GpuTraceError(f"--images takes svg or png, not {', '.join(bad)}")
    if sweep is not None and store is None and not os.environ.get(STORE_ENV):
        from gpu_trace.replay.sweep import read_manifest

        store = Path(read_manifest(sweep)["store"])  # the store the sweep wrote to
    with task("report: sections") as update:
        index = build_site(
            resolve_store(store),
            out,
            title=title,
            sources=source,
            images=formats,
            replay=replay or (),
            sweep=sweep,
            on_progress=update,
        )
    sys.stdout.write(f"{index}\n")
