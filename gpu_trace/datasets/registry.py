"""The registry of public traces as typed, frozen dataclasses.

The data lives in ``registry.toml`` next to this module (package data, read with
``tomllib``) so that adding a mirror or pinning a new checksum is a data change, not a
code change. Loading validates every entry, so a typo in a checksum or a file name that
could escape the destination folder is caught by the test suite, not by a user.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Literal, cast
from urllib.parse import urlsplit

from gpu_trace.errors import DatasetError

MIRROR_ENV = "GPU_TRACE_DATASETS_MIRROR"
"""Environment variable naming a mirror base URL (see :func:`resolve_urls`)."""
DEFAULT_DEST = Path("data") / "raw"
"""Where datasets are fetched to unless ``--dest`` says otherwise."""

Archive = Literal["tar.gz", "zip"]
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class Member:
    """A file expected inside an archive, with its own published checksum if any."""

    path: str
    sha256: str | None = None
    size: int | None = None


@dataclass(frozen=True)
class DataFile:
    """One downloadable file of a dataset."""

    name: str
    """Local file name under ``DEST/<dataset>/``; also the path on a mirror."""
    urls: tuple[str, ...]
    """Official URL first, then documented mirrors; tried in order."""
    size: int | None
    sha256: str | None
    checksum_source: str
    extract: Archive | None = None
    contents: tuple[Member, ...] = ()

    @property
    def verifiable(self) -> bool:
        """Whether a published checksum pins this file (Helios' data.zip has none)."""
        return self.sha256 is not None


@dataclass(frozen=True)
class Dataset:
    """A public trace: where to get it, how to check it, how to credit it."""

    name: str
    title: str
    homepage: str
    license: str
    license_url: str
    citation: str
    files: tuple[DataFile, ...]
    size_note: str = ""
    approx_size: int | None = None
    """Approximate total bytes from the upstream README, for display when ``size`` is
    unknown."""
    ingest_path: str = "."
    notes: tuple[str, ...] = ()
    mirror_notes: tuple[str, ...] = ()

    @property
    def size(self) -> int | None:
        """Total download size in bytes, or None when some file's size is unpublished."""
        sizes = [f.size for f in self.files]
        return None if any(s is None for s in sizes) else sum(s for s in sizes if s is not None)

    def file(self, name: str) -> DataFile:
        """The file called ``name``; an unknown name is a one-line error listing the files."""
        for f in self.files:
            if f.name == name:
                return f
        known = ", ".join(f.name for f in self.files)
        msg = f"dataset {self.name!r} has no file {name!r}; its files: {known}"
        raise DatasetError(msg)

    def select(self, names: Sequence[str] | None) -> tuple[DataFile, ...]:
        """The files ``--file`` asked for, in the order given (repeats dropped); all of
        them when none was asked for.
        """
        if not names:
            return self.files
        return tuple(self.file(name) for name in dict.fromkeys(names))


def _check_relative(path: str, what: str) -> str:
    parts = path.split("/")
    if not path or path.startswith("/") or any(p in ("", ".", "..") for p in parts):
        msg = f"registry: {what} {path!r} is not a plain relative path"
        raise DatasetError(msg)
    return path


def _member(raw: dict[str, Any], where: str) -> Member:
    sha = raw.get("sha256")
    if sha is not None and not _SHA256.match(sha):
        msg = f"registry: {where}: sha256 {sha!r} is not 64 lower-case hex digits"
        raise DatasetError(msg)
    return Member(_check_relative(str(raw["path"]), f"{where} member"), sha, raw.get("size"))


def _file(raw: dict[str, Any], dataset: str) -> DataFile:
    name = str(raw["name"])
    where = f"{dataset}/{name}"
    if not _NAME.match(name):
        msg = f"registry: file name {where!r} must be a plain file name"
        raise DatasetError(msg)
    urls = tuple(str(u) for u in raw["urls"])
    if not urls or any(urlsplit(u).scheme not in ("http", "https") for u in urls):
        msg = f"registry: {where}: urls must be one or more http(s) URLs"
        raise DatasetError(msg)
    sha = raw.get("sha256")
    if sha is not None and not _SHA256.match(sha):
        msg = f"registry: {where}: sha256 {sha!r} is not 64 lower-case hex digits"
        raise DatasetError(msg)
    size = raw.get("size")
    if size is not None and (not isinstance(size, int) or size < 0):
        msg = f"registry: {where}: size must be a non-negative integer"
        raise DatasetError(msg)
    extract = raw.get("extract")
    if extract not in (None, "tar.gz", "zip"):
        msg = f"registry: {where}: extract must be 'tar.gz' or 'zip'"
        raise DatasetError(msg)
    contents = tuple(_member(m, where) for m in raw.get("contents", ()))
    if contents and extract is None:
        msg = f"registry: {where}: contents given for a file that is not extracted"
        raise DatasetError(msg)
    return DataFile(
        name=name,
        urls=urls,
        size=size,
        sha256=sha,
        checksum_source=str(raw.get("checksum_source", "")),
        extract=cast("Archive | None", extract),
        contents=contents,
    )


def parse_registry(data: dict[str, Any]) -> dict[str, Dataset]:
    """Validate a parsed registry document and build the datasets, keyed by name."""
    if data.get("schema_version") != 1:
        msg = "registry: unsupported schema_version (expected 1)"
        raise DatasetError(msg)
    out: dict[str, Dataset] = {}
    for name, raw in data.get("datasets", {}).items():
        if not _NAME.match(name):
            msg = f"registry: dataset name {name!r} must be a plain name"
            raise DatasetError(msg)
        files = tuple(_file(f, name) for f in raw["files"])
        approx = raw.get("approx_size")
        if approx is not None and (not isinstance(approx, int) or approx < 0):
            msg = f"registry: {name}: approx_size must be a non-negative integer"
            raise DatasetError(msg)
        names = [f.name for f in files]
        if len(set(names)) != len(names):
            msg = f"registry: {name}: duplicate file names"
            raise DatasetError(msg)
        out[name] = Dataset(
            name=name,
            title=str(raw["title"]),
            homepage=str(raw["homepage"]),
            license=str(raw["license"]),
            license_url=str(raw.get("license_url", "")),
            citation=str(raw["citation"]),
            files=files,
            size_note=str(raw.get("size_note", "")),
            approx_size=approx,
            ingest_path=str(raw.get("ingest_path", ".")),
            notes=tuple(str(n) for n in raw.get("notes", ())),
            mirror_notes=tuple(str(n) for n in raw.get("mirror_notes", ())),
        )
    return out


@cache
def registry() -> dict[str, Dataset]:
    """The built-in registry (``registry.toml`` shipped in this package)."""
    text = resources.files("gpu_trace.datasets").joinpath("registry.toml").read_bytes()
    return parse_registry(tomllib.loads(text.decode("utf-8")))


def get(name: str) -> Dataset:
    """The registered dataset ``name``, or a one-line error listing the known names."""
    known = registry()
    if name not in known:
        msg = f"unknown dataset {name!r}; choose one of {', '.join(known)}"
        raise DatasetError(msg)
    return known[name]


def as_dataset(dataset: str | Dataset) -> Dataset:
    """Accept a registered name or a :class:`Dataset` (tests and callers build their own)."""
    return get(dataset) if isinstance(dataset, str) else dataset


def resolve_mirror(mirror: str | None) -> str | None:
    """The mirror base URL: the explicit argument, else ``$GPU_TRACE_DATASETS_MIRROR``
    (read at call time, so tests and users can set it per command), else None.
    """
    value = mirror if mirror is not None else os.environ.get(MIRROR_ENV)
    if not value:
        return None
    if urlsplit(value).scheme not in ("http", "https"):
        msg = f"mirror {value!r} must be an http:// or https:// URL"
        raise DatasetError(msg)
    return value.rstrip("/")


def resolve_urls(dataset: Dataset, file: DataFile, mirror: str | None = None) -> tuple[str, ...]:
    """The URLs to try for ``file``.

    With a mirror, the official scheme, host and path are replaced by
    ``<mirror>/<dataset>/<file>`` and only the mirror is tried: a mirror is any HTTP
    server whose tree looks like a ``--dest`` folder (``python -m http.server`` run in
    another machine's ``data/raw`` is one), for users behind a proxy or offline networks.
    Checksums are verified the same way whatever the URL.
    """
    base = resolve_mirror(mirror)
    if base is None:
        return file.urls
    return (f"{base}/{dataset.name}/{file.name}",)
