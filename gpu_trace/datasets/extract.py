"""Safe archive extraction: every member is checked before anything is written.

A downloaded archive is untrusted input even after its checksum matched (a mirror or a
future upstream release may differ, and Helios publishes no checksum at all). A member
with an absolute path, a ``..`` that climbs out of the destination, a symlink or
hardlink pointing outside it, or a device file aborts the whole extraction with one
line naming the archive and the member; nothing is left behind, because extraction
goes into a fresh temporary folder that the caller moves into place only on success.
For tar the standard library's ``data`` filter runs as well, as a second line of
defence.
"""

from __future__ import annotations

import gzip
import posixpath
import shutil
import stat
import tarfile
import zipfile
from pathlib import Path, PureWindowsPath

from gpu_trace.errors import DatasetError

_HAS_DATA_FILTER = hasattr(tarfile, "data_filter")
"""The stdlib's own extraction filter exists from Python 3.11.4; used when available."""
_FILTER_ERRORS: tuple[type[Exception], ...] = tuple(
    e for e in (getattr(tarfile, "FilterError", None),) if isinstance(e, type)
)


class UnsafeArchive(DatasetError):
    """An archive member would land outside the destination (or is a device file)."""

    def __init__(self, archive: Path, member: str, reason: str) -> None:
        self.archive = str(archive)
        self.member = member
        self.reason = reason
        super().__init__(f"{archive}: refusing to extract member {member!r}: {reason}")


def _normalized(archive: Path, name: str) -> str:
    """The member's path relative to the destination, or raise if it escapes."""
    if name.startswith(("/", "\\")) or PureWindowsPath(name).drive:
        raise UnsafeArchive(archive, name, "absolute path")
    norm = posixpath.normpath(name.replace("\\", "/"))
    if norm == ".." or norm.startswith("../"):
        raise UnsafeArchive(archive, name, "path escapes the destination (..)")
    return "" if norm == "." else norm


def _check_link(archive: Path, name: str, target: str, *, hard: bool) -> None:
    kind = "hardlink" if hard else "symlink"
    if target.startswith(("/", "\\")) or PureWindowsPath(target).drive:
        raise UnsafeArchive(archive, name, f"{kind} to an absolute path ({target})")
    # A hardlink's target is an archive path; a symlink's is relative to its folder.
    base = "" if hard else posixpath.dirname(_normalized(archive, name))
    resolved = posixpath.normpath(posixpath.join(base, target.replace("\\", "/")))
    if resolved == ".." or resolved.startswith("../"):
        raise UnsafeArchive(archive, name, f"{kind} points outside the destination ({target})")


def _check_top(archive: Path, name: str, reserved: frozenset[str]) -> None:
    top = name.split("/", 1)[0]
    if top in reserved:
        raise UnsafeArchive(archive, name, "would overwrite a file the fetcher manages")


def extract_tar(archive: Path, into: Path, reserved: frozenset[str] = frozenset()) -> list[str]:
    """Extract a (gzip-compressed) tar archive into the empty folder ``into``.

    Streams the archive once (``r|*``), checking each member before extracting it, so a
    1 GB tarball is decompressed a single time. Returns the regular files written, as
    normalized relative paths.
    """
    written: list[str] = []
    try:
        with tarfile.open(archive, mode="r|*") as tar:
            for member in tar:
                name = _normalized(archive, member.name)
                if not name:
                    continue
                _check_top(archive, name, reserved)
                if member.issym():
                    _check_link(archive, member.name, member.linkname, hard=False)
                elif member.islnk():
                    _check_link(archive, member.name, member.linkname, hard=True)
                elif member.isdev():
                    raise UnsafeArchive(archive, member.name, "device or fifo member")
                elif not (member.isfile() or member.isdir()):
                    raise UnsafeArchive(archive, member.name, "unsupported member type")
                member.name = name
                if member.islnk():
                    member.linkname = posixpath.normpath(member.linkname)
                if _HAS_DATA_FILTER:
                    tar.extract(member, into, filter="data")
                else:  # pragma: no cover - Python < 3.11.4; our own checks above still ran
                    tar.extract(member, into)
                if member.isfile():
                    written.append(name)
    except _FILTER_ERRORS as exc:
        raise DatasetError(f"{archive}: refusing to extract: {exc}") from None
    except (tarfile.TarError, EOFError, gzip.BadGzipFile) as exc:
        # Other OSErrors (disk full, permissions) are about the destination, not the
        # archive: they propagate and the CLI reports them in one line.
        raise DatasetError(f"{archive}: not a readable tar.gz archive ({exc})") from None
    return written


def _zip_symlink_target(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> str | None:
    mode = info.external_attr >> 16
    if info.create_system == 3 and stat.S_ISLNK(mode):
        return zf.read(info).decode("utf-8", "surrogateescape")
    return None


def extract_zip(archive: Path, into: Path, reserved: frozenset[str] = frozenset()) -> list[str]:
    """Extract a zip archive into the empty folder ``into``.

    All members are checked before the first byte is written (the central directory
    lists them up front). Symlinks are recreated as symlinks when they stay inside.
    Returns the regular files written, as normalized relative paths.
    """
    try:
        zf = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as exc:
        raise DatasetError(f"{archive}: not a readable zip archive ({exc})") from None
    with zf:
        plan: list[tuple[zipfile.ZipInfo, str, str | None]] = []
        for info in zf.infolist():
            name = _normalized(archive, info.filename)
            if not name:
                continue
            _check_top(archive, name, reserved)
            link = _zip_symlink_target(zf, info)
            if link is not None:
                _check_link(archive, info.filename, link, hard=False)
            plan.append((info, name, link))
        root = into.resolve()
        written: list[str] = []
        for info, name, link in plan:
            out = into / name
            # Refuse to write through a symlink created earlier from this archive.
            parent = out.parent.resolve()
            if parent != root and root not in parent.parents:
                raise UnsafeArchive(archive, info.filename, "path escapes the destination")
            if info.is_dir():
                out.mkdir(parents=True, exist_ok=True)
            elif link is not None:
                out.parent.mkdir(parents=True, exist_ok=True)
                out.symlink_to(link)
            else:
                out.parent.mkdir(parents=True, exist_ok=True)
                try:
                    with zf.open(info) as src, out.open("wb") as dst:
                        shutil.copyfileobj(src, dst, 1 << 20)
                except (zipfile.BadZipFile, EOFError) as exc:
                    raise DatasetError(f"{archive}: member {info.filename!r}: {exc}") from None
                written.append(name)
    return written
