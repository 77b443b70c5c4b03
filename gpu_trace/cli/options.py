"""Options shared by several commands, declared once."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

StoreOpt = Annotated[
    Path | None,
    typer.Option(
        "--store",
        help="Store folder. Default: $GPU_TRACE_STORE, else data/store.",
        show_default=False,
    ),
]
