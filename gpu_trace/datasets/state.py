"""What is on disk for each dataset, and the record of what was verified.

Every verified file is recorded with its size, mtime and sha256 in
``DEST/<dataset>/.gpu-trace-datasets.json`` (and every extracted member with the archive
it came from), so ``gpu-trace datasets list`` can say ``verified`` by comparing size and
mtime only, without re-hashing gigabytes or touching the network. The record is written
to a temporary file and renamed into place, so an interrupted fetch never leaves it half
written; an unreadable record is treated as empty (every file becomes ``unchecked``),
never as an error.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from gpu_trace.datasets.registry import DEFAULT_DEST, DataFile, Dataset, as_dataset

STATE_FILE = ".gpu-trace-datasets.json"
"""The per-dataset record, inside ``DEST/<dataset>/``."""
PART_SUFFIX = ".part"
"""A download in progress is ``<file>.part`` next to where the file will be placed."""


class Status(StrEnum):
    """Local state of a file or a dataset."""

    missing = "missing"
    """Nothing on disk."""
    partial = "partial"
    """Some files present (or an interrupted ``.part``), not all."""
    unchecked = "unchecked"
    """Present but not verified since it was placed or changed: run ``verify``."""
    unverified = "unverified"
    """Present; no published checksum exists, our own sha256 is recorded."""
    verified = "verified"
    """Present and matching the published size and sha256."""


@dataclass(frozen=True)
class FileStatus:
    """One file's local state, with a human-readable detail for ``datasets list``."""

    name: str
    path: Path
    status: Status
    detail: str = ""


@dataclass(frozen=True)
class DatasetStatus:
    """A dataset's local state: the combination of its files' states."""

    dataset: Dataset
    folder: Path
    status: Status
    files: tuple[FileStatus, ...]


@dataclass
class State:
    """The per-dataset record of verified files and extracted members."""

    path: Path
    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    members: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def load(cls, folder: Path) -> State:
        """The record in ``folder``; empty when there is none or it cannot be read."""
        path = folder / STATE_FILE
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return cls(path)
        except (OSError, ValueError):
            return cls(path)  # unreadable: treat every file as unchecked
        if not isinstance(raw, dict):
            return cls(path)
        return cls(path, dict(raw.get("files", {})), dict(raw.get("members", {})))

    def save(self) -> None:
        """Write the record atomically (temporary file, then rename)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        body = {"version": 1, "files": self.files, "members": self.members}
        tmp.write_text(json.dumps(body, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        tmp.replace(self.path)

    def record(self, name: str, path: Path, sha256: str, checked: str, url: str | None) -> None:
        """Remember ``path`` as verified now: its size and mtime are what ``list`` checks.

        ``checked`` is ``published`` (matched the registry) or ``recorded`` (no published
        checksum: ours is the reference from now on).
        """
        st = path.stat()
        self.files[name] = {
            "size": st.st_size,
            "mtime_ns": st.st_mtime_ns,
            "sha256": sha256,
            "checked": checked,
            "url": url,
        }

    def matches(self, name: str, path: Path) -> dict[str, Any] | None:
        """The record for ``name`` if the file on disk still has its size and mtime."""
        rec = self.files.get(name)
        if rec is None:
            return None
        try:
            st = path.stat()
        except FileNotFoundError:
            return None
        if rec.get("size") != st.st_size or rec.get("mtime_ns") != st.st_mtime_ns:
            return None
        return rec

    def members_of(self, archive: str) -> dict[str, dict[str, Any]]:
        """The recorded members extracted from ``archive``, by their relative path."""
        return {m: r for m, r in self.members.items() if r.get("archive") == archive}

    def forget_members(self, archive: str) -> None:
        """Drop ``archive``'s members from the record, so the next fetch unpacks it again."""
        self.members = {m: r for m, r in self.members.items() if r.get("archive") != archive}

    def record_members(
        self,
        archive: str,
        archive_sha: str,
        folder: Path,
        written: Sequence[str],
        sums: dict[str, str],
    ) -> None:
        """Remember the files extracted from ``archive`` (whose sha256 is
        ``archive_sha``) with their size and mtime, and the sha256 of those checked
        against a published one (``sums``).
        """
        for rel in written:
            p = folder / rel
            if p.is_file():
                st = p.stat()
                self.members[rel] = {
                    "archive": archive,
                    "archive_sha256": archive_sha,
                    "size": st.st_size,
                    "mtime_ns": st.st_mtime_ns,
                    "sha256": sums.get(rel),
                }

    def extracted(self, archive: str, folder: Path, archive_sha: str) -> bool:
        """Whether ``archive`` (as it is now: ``archive_sha``) was extracted and every
        member it left is still on disk unchanged (size and mtime), so fetch can skip it.
        """
        mine = self.members_of(archive)

        def intact(rel: str, rec: dict[str, Any]) -> bool:
            try:
                st = (folder / rel).stat()
            except FileNotFoundError:
                return False
            return (st.st_size, st.st_mtime_ns) == (rec.get("size"), rec.get("mtime_ns"))

        return bool(mine) and all(
            r.get("archive_sha256") == archive_sha and intact(m, r) for m, r in mine.items()
        )


def file_status(f: DataFile, folder: Path, state: State) -> FileStatus:
    """The local state of ``f`` in ``folder``, from the record alone (no hashing)."""
    path = folder / f.name
    if not path.exists():
        part = folder / (f.name + PART_SUFFIX)
        if part.exists():
            size = part.stat().st_size
            of = f" of {f.size}" if f.size is not None else ""
            return FileStatus(f.name, path, Status.partial, f"interrupted: {size}{of} bytes")
        return FileStatus(f.name, path, Status.missing)
    rec = state.matches(f.name, path)
    if rec is None:
        return FileStatus(f.name, path, Status.unchecked, "not verified since it changed")
    if f.sha256 is not None and rec.get("sha256") != f.sha256:
        return FileStatus(f.name, path, Status.unchecked, "recorded sha256 is not the registry's")
    status = Status.verified if f.sha256 is not None else Status.unverified
    detail = "" if f.sha256 is not None else f"no published checksum; sha256 {rec['sha256']}"
    if f.extract:
        detail = _extraction_detail(f, folder, state, detail)
    return FileStatus(f.name, path, status, detail)


def _extraction_detail(f: DataFile, folder: Path, state: State, detail: str) -> str:
    """``detail`` extended with what is wrong with the archive's extraction, if anything."""
    mine = list(state.members_of(f.name))
    if not mine:
        return "; ".join(x for x in (detail, "not extracted") if x)
    if missing := [m for m in mine if not (folder / m).exists()]:
        return "; ".join(x for x in (detail, f"extracted file missing: {missing[0]}") if x)
    return detail


def _combine(statuses: Iterable[Status]) -> Status:
    s = set(statuses)
    if s <= {Status.missing}:
        return Status.missing
    if s & {Status.missing, Status.partial}:
        return Status.partial
    if Status.unchecked in s:
        return Status.unchecked
    if Status.unverified in s:
        return Status.unverified
    return Status.verified


def status(dataset: str | Dataset, dest: Path = DEFAULT_DEST) -> DatasetStatus:
    """Local state of ``dataset`` under ``dest`` without hashing or network I/O."""
    ds = as_dataset(dataset)
    folder = dest / ds.name
    state = State.load(folder)
    files = tuple(file_status(f, folder, state) for f in ds.files)
    return DatasetStatus(ds, folder, _combine(f.status for f in files), files)
