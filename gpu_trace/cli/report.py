"""``gpu-trace report``: build the HTML report site from the store."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from gpu_trace.cli._boundary import domain_errors, err
from gpu_trace.cli.options import StoreOpt
from gpu_trace.reports import build_site
from gpu_trace.settings import resolve_store


@domain_errors
def report(
    store: StoreOpt = None,
    out: Annotated[Path, typer.Option("--out", help="Folder to write the site to.")] = Path(
        "reports/site"
    ),
    title: Annotated[str, typer.Option("--title", help="Page title.")] = "gpu-trace report",
) -> None:
    """Build a self-contained HTML report (works offline, from a file:// URL)."""
    with err.status("building report"):
        index = build_site(resolve_store(store), out, title=title)
    sys.stdout.write(f"{index}\n")
