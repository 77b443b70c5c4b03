"""The public-trace registry: list, fetch and verify the official downloads.

``registry.toml`` (package data) lists every dataset's official URLs, mirrors, sizes,
sha256 checksums, licence and citation. :mod:`.fetch` puts each file in place:
:mod:`.transfer` downloads it with resume, :mod:`.verify` checks its size and sha256
before it is moved, :mod:`.state` records what was verified (so ``list`` needs no
re-hash), and :mod:`.unpack` extracts archives through :mod:`.extract`, which lets no
member escape the destination. Nothing here runs at import time, and nothing else in
gpu-trace downloads anything: fetching is always an explicit ``gpu-trace datasets fetch``.
"""

from __future__ import annotations

from gpu_trace.datasets.extract import UnsafeArchive
from gpu_trace.datasets.fetch import FetchResult, fetch
from gpu_trace.datasets.registry import (
    DEFAULT_DEST,
    MIRROR_ENV,
    DataFile,
    Dataset,
    Member,
    get,
    parse_registry,
    registry,
    resolve_urls,
)
from gpu_trace.datasets.state import DatasetStatus, FileStatus, Status, status
from gpu_trace.datasets.transfer import ProgressHook
from gpu_trace.datasets.verify import Check, sha256_of, verify

__all__ = [
    "DEFAULT_DEST",
    "MIRROR_ENV",
    "Check",
    "DataFile",
    "Dataset",
    "DatasetStatus",
    "FetchResult",
    "FileStatus",
    "Member",
    "ProgressHook",
    "Status",
    "UnsafeArchive",
    "fetch",
    "get",
    "parse_registry",
    "registry",
    "resolve_urls",
    "sha256_of",
    "status",
    "verify",
]
