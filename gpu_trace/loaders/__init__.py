"""Raw trace loaders: each turns one public trace family into canonical batches.

``LOADERS`` maps a source name (the ``gpu-trace ingest <source>`` argument) to its loader.
"""

from __future__ import annotations

from gpu_trace.loaders.base import Batch, IngestReport, Loader, ingest
from gpu_trace.loaders.openb import OpenbLoader

LOADERS: dict[str, Loader] = {
    "openb": OpenbLoader(),
}

__all__ = ["LOADERS", "Batch", "IngestReport", "Loader", "ingest"]
