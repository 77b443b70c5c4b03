"""The public-trace registry: list, fetch and verify the official downloads.

``registry.toml`` (package data) lists every dataset's official URLs, mirrors, sizes,
sha256 checksums, licence and citation; :mod:`.fetch` downloads with resume and
verify-before-move, :mod:`.extract` unpacks archives without letting any member escape
the destination. Nothing here runs at import time, and nothing else in gpu-trace
downloads anything: fetching is always an explicit ``gpu-trace datasets fetch``.
"""

from __future__ import annotations

from gpu_trace.datasets.extract import UnsafeArchive
from gpu_trace.datasets.fetch import (
    Check,
    DatasetStatus,
    FetchResult,
    FileStatus,
    ProgressHook,
    Status,
    fetch,
    sha256_of,
    status,
    verify,
)
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
