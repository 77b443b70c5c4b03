"""``gpu-trace report``: build the HTML report site from the store."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from gpu_trace.cli._boundary import domain_errors, err
from gpu_trace.cli.options import (
    AsOfOpt,
    ClusterOpt,
    PartitionOpt,
    SinceOpt,
    UntilOpt,
    check_sources,
    scope_from,
)
from gpu_trace.progress import task
from gpu_trace.settings import STORE_ENV, existing_store
from gpu_trace.values import choose, split_list

IMAGE_FORMATS = ("svg", "png")


@domain_errors
def report(
    store: Annotated[
        Path | None,
        typer.Option(
            "--store",
            help="Store folder (must exist). Default: $GPU_TRACE_STORE, else the store "
            "--sweep wrote to, else data/store.",
            show_default=False,
        ),
    ] = None,
    out: Annotated[Path, typer.Option("--out", help="Folder to write the site to.")] = Path(
        "reports/site"
    ),
    title: Annotated[str, typer.Option("--title", help="Page title.")] = "gpu-trace report",
    source: Annotated[
        list[str] | None,
        typer.Option("--source", "-s", help="Only these sources (a,b or repeated)."),
    ] = None,
    replay: Annotated[
        list[str] | None,
        typer.Option(
            "--replay",
            help="Add a policy scorecard for these replay run ids (a,b or repeated; 'all').",
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
            help="Also export every chart as svg and/or png into OUT/charts/ (svg,png or "
            "repeated).",
        ),
    ] = None,
    as_of: AsOfOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    cluster: ClusterOpt = None,
    partition: PartitionOpt = None,
) -> None:
    """Build a self-contained HTML report site (works offline, from a file:// URL)."""
    # Imported here: the report pulls in altair, vl-convert, scipy and DuckDB (~2 s),
    # which every other command (and --help) should not pay for.
    from gpu_trace.reports import build_site

    formats = [choose("image format", f.lower(), IMAGE_FORMATS) for f in split_list(images)]
    if sweep is not None and store is None and not os.environ.get(STORE_ENV):
        from gpu_trace.replay.sweep import read_manifest

        store = Path(read_manifest(sweep)["store"])  # the store the sweep wrote to
    root = existing_store(store)
    sources = check_sources(root, split_list(source)) or None
    scope = scope_from(
        root,
        as_of=as_of,
        since=since,
        until=until,
        cluster=cluster,
        partition=partition,
        sources=sources,
    )
    with task("report: sections", console=err) as update:
        index = build_site(
            root,
            out,
            title=title,
            sources=sources,
            images=formats,
            replay=split_list(replay),
            sweep=sweep,
            on_progress=update,
            scope=scope,
        )
    sys.stdout.write(f"{index}\n")
