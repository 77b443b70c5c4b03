"""gpu-trace: one data model for GPU-cluster traces and live GPU telemetry.

The package is organised as the data flows: ``schemas`` (the canonical tables),
``loaders`` and ``telemetry`` (raw inputs -> canonical frames), ``store`` (the one
Parquet writer and the DuckDB catalog), ``analyses``, ``replay`` and ``reports``
(consumers of the store) and ``cli`` (a thin typer skin over all of them).

Python API (``docs/python-api.md``)::

    import gpu_trace as gt
    s = gt.open("data/store")          # one generation, read-only
    s.jobs                             # polars LazyFrame
    s.sql("select count(*) from jobs") # polars DataFrame
    gt.analyses.queueing.queue_by(s.jobs, "gpus").collect()

``open``, ``Store`` and ``analyses`` are imported on first use, so ``import gpu_trace``
(and the CLI's start-up) stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from gpu_trace.version import __version__

if TYPE_CHECKING:
    from gpu_trace import analyses as analyses
    from gpu_trace.api import Store as Store
    from gpu_trace.api import open as open

__all__ = ["Store", "__version__", "analyses", "open"]


def __getattr__(name: str) -> Any:
    """PEP 562 lazy attributes: the API pulls in polars, DuckDB and the analyses."""
    if name in ("open", "Store"):
        return getattr(importlib.import_module("gpu_trace.api"), name)
    if name == "analyses":
        return importlib.import_module("gpu_trace.analyses")
    msg = f"module 'gpu_trace' has no attribute {name!r}"
    raise AttributeError(msg)
