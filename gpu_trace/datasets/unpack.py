"""A verified archive's contents into ``DEST/<dataset>/``, all or nothing.

The archive is extracted by :mod:`.extract` (which refuses anything that could escape
or explode) into ``DEST/<dataset>/.extract-<file>.tmp``; the members with published
checksums are checked there (:func:`.verify.check_members`); only then is every file
moved to its place with a rename in the same file system. A failure at any step removes
the temporary folder and leaves the previous extraction as it was. Files the archive
does not contain are left alone, so archives sharing a folder do not erase each other.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from gpu_trace.datasets.extract import ExtractLimits, extract_tar, extract_zip
from gpu_trace.datasets.registry import DataFile, Dataset
from gpu_trace.datasets.state import PART_SUFFIX, STATE_FILE, State
from gpu_trace.datasets.verify import check_members
from gpu_trace.errors import DatasetError

Notify = Callable[[str], None]
"""Receives warnings that do not stop a fetch (the CLI prints them on stderr)."""


def _tmp_name(f: DataFile) -> str:
    return f".extract-{f.name}.tmp"


def _reserved(ds: Dataset, f: DataFile) -> frozenset[str]:
    """Top-level names no member may take: the fetcher's own files and folders."""
    names = {STATE_FILE, _tmp_name(f)}
    for other in ds.files:
        names.update({other.name, other.name + PART_SUFFIX})
    return frozenset(names)


def _merge(src_root: Path, dst_root: Path) -> None:
    """Move every file and symlink of ``src_root`` to the same place under ``dst_root``
    (atomic renames within one file system); files the archive does not contain are
    left alone, so archives sharing a folder do not erase each other.
    """
    for root, dirs, files in os.walk(src_root):
        here = Path(root)
        links = [d for d in dirs if (here / d).is_symlink()]
        dirs[:] = sorted(d for d in dirs if d not in links)
        for name in sorted([*files, *links]):
            src = here / name
            dst = dst_root / src.relative_to(src_root)
            dst.parent.mkdir(parents=True, exist_ok=True)
            if dst.is_dir() and not dst.is_symlink():
                shutil.rmtree(dst)
            src.replace(dst)


def _extract_archive(
    ds: Dataset,
    f: DataFile,
    archive: Path,
    into: Path,
    state: State,
    max_extract_bytes: int | None,
) -> list[str]:
    """Unpack ``archive`` into the empty folder ``into`` within the byte cap; an
    archive with no published checksum that fails is deleted with its record.
    """
    limits = ExtractLimits.for_archive(archive.stat().st_size, f.size, max_extract_bytes)
    unpack_into = extract_zip if f.extract == "zip" else extract_tar
    try:
        return unpack_into(archive, into, _reserved(ds, f), limits)
    except DatasetError as exc:
        if f.sha256 is None:
            archive.unlink(missing_ok=True)
            state.files.pop(f.name, None)
            exc.args = (f"{exc}; the unverified download was deleted",)
        raise


def unpack(
    ds: Dataset,
    f: DataFile,
    folder: Path,
    state: State,
    archive_sha: str,
    notify: Notify | None,
    max_extract_bytes: int | None = None,
) -> tuple[str, ...]:
    """Extract a verified archive into a temporary folder, check the members that have
    published checksums, then move the extracted files into ``folder``.

    The bytes written are capped (:meth:`ExtractLimits.for_archive`: a multiple of the
    published size, else of the size on disk; ``max_extract_bytes`` overrides). An
    archive with no published checksum that fails to extract is deleted with its record,
    so the next fetch downloads it again instead of trusting it. Returns the regular
    files written, relative to ``folder``; ``state`` records them (the caller saves it).
    """
    archive = folder / f.name
    tmp = folder / _tmp_name(f)
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        written = _extract_archive(ds, f, archive, tmp, state, max_extract_bytes)
        sums, absent = check_members(archive, tmp, f.contents)
        _merge(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    state.forget_members(f.name)
    state.record_members(f.name, archive_sha, folder, written, sums)
    if absent and notify is not None:
        notify(
            f"{archive}: expected file(s) not in the archive: {', '.join(absent)} "
            "(the upstream layout may have changed)"
        )
    return tuple(written)
