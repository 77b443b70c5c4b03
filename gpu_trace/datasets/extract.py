"""Safe archive extraction: every member is checked before anything is written.

A downloaded archive is untrusted input even after its checksum matched (a mirror or a
future upstream release may differ, and Helios publishes no checksum at all). Refused,
with one line naming the archive and the member:

- a name that is absolute, has a drive letter, a backslash or a NUL, or whose ``..``
  climbs out of the destination;
- in a zip, any symlink and any member that is not a plain file or folder (device,
  fifo, socket); zips with links are not needed by any registered trace, and a chain
  of in-archive links (``a -> .``, ``a/c -> .``, ...) defeats any textual check;
- in a tar, a link pointing outside, a device or fifo; the standard library's ``data``
  filter runs on every member as a second line of defence;
- more members, more bytes in one member or more bytes in all than
  :class:`ExtractLimits` allows (zip and tar bombs). Bytes are counted while they are
  decompressed, never taken from the archive's headers.

Every output path is also resolved against the *real* destination
(``os.path.realpath`` after its parent folders exist) right before it is written, and
files are opened with ``O_NOFOLLOW``, so nothing is ever written through a link. On any
failure everything written so far is removed: the destination folder is left empty.
"""

from __future__ import annotations

import gzip
import os
import posixpath
import shutil
import stat
import tarfile
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PureWindowsPath
from typing import IO

from gpu_trace.errors import DatasetError

_HAS_DATA_FILTER = hasattr(tarfile, "data_filter")
"""The stdlib's own extraction filter exists from Python 3.11.4; used when available."""
_FILTER_ERRORS: tuple[type[Exception], ...] = tuple(
    e for e in (getattr(tarfile, "FilterError", None),) if isinstance(e, type)
)
CHUNK = 1 << 20
"""Bytes decompressed and written at a time: memory stays bounded whatever the member."""
MAX_NAME = 1024
"""Longest member name accepted; longer ones exist only to confuse path resolution."""

EXTRACT_RATIO = 40
"""Extracted bytes allowed per archive byte. The registered traces expand 6.3x (Philly:
0.98 GB -> 6.6 GB) and 9.4x (Helios: 36.4 MB -> 343 MB); text rarely beats 20x."""
MIN_EXTRACT_BYTES = 64 * 1024 * 1024
"""The cap is never lower than this, so small archives always extract."""
MAX_EXTRACT_BYTES = 64 * 1024**3
"""Ceiling of the derived cap (an explicit ``max_total_bytes`` may exceed it)."""
MAX_MEMBERS = 100_000
"""Most members accepted in one archive (the registered ones have at most a dozen)."""


@dataclass(frozen=True)
class ExtractLimits:
    """How much one extraction may write; a breach aborts it and removes the output."""

    max_total_bytes: int = MAX_EXTRACT_BYTES
    max_member_bytes: int | None = None
    """None: the same as ``max_total_bytes``."""
    max_members: int = MAX_MEMBERS

    @property
    def member_cap(self) -> int:
        """The most bytes one member may expand to."""
        return self.max_total_bytes if self.max_member_bytes is None else self.max_member_bytes

    @classmethod
    def for_archive(
        cls, archive_bytes: int, registry_bytes: int | None = None, total: int | None = None
    ) -> ExtractLimits:
        """Limits for an archive of ``registry_bytes`` (its published size; else its size
        on disk, ``archive_bytes``): ``EXTRACT_RATIO`` times that, at least
        ``MIN_EXTRACT_BYTES``, at most ``MAX_EXTRACT_BYTES``; ``total`` overrides.
        """
        if total is None:
            basis = registry_bytes if registry_bytes is not None else archive_bytes
            total = min(MAX_EXTRACT_BYTES, max(MIN_EXTRACT_BYTES, EXTRACT_RATIO * basis))
        return cls(max_total_bytes=total)


class UnsafeArchive(DatasetError):
    """An archive member would land outside the destination (or is a device file)."""

    def __init__(self, archive: Path, member: str, reason: str) -> None:
        self.archive = str(archive)
        self.member = member
        self.reason = reason
        super().__init__(f"{archive}: refusing to extract member {member!r}: {reason}")


class ArchiveTooLarge(DatasetError):
    """An archive expands past :class:`ExtractLimits` (a zip or tar bomb)."""


class _Meter:
    """Counts extracted bytes and members against the limits, before they are written."""

    def __init__(self, archive: Path, limits: ExtractLimits) -> None:
        self.archive = archive
        self.limits = limits
        self.total = 0
        self.members = 0

    def member(self, name: str) -> None:
        self.members += 1
        if self.members > self.limits.max_members:
            msg = (
                f"{self.archive}: more than {self.limits.max_members} members (at {name!r}); "
                "nothing was extracted"
            )
            raise ArchiveTooLarge(msg)

    def declared(self, name: str, size: int) -> None:
        """Refuse early on a header that already announces too much."""
        self._check(name, size, self.total + size)

    def take(self, name: str, member_bytes: int, n: int) -> None:
        self.total += n
        self._check(name, member_bytes + n, self.total)

    def _check(self, name: str, member_bytes: int, total: int) -> None:
        cap = self.limits.member_cap
        if member_bytes > cap:
            msg = (
                f"{self.archive}: member {name!r} expands past {cap} bytes (the per-member "
                "extraction cap); nothing was extracted (see --max-extract-bytes)"
            )
            raise ArchiveTooLarge(msg)
        if total > self.limits.max_total_bytes:
            msg = (
                f"{self.archive}: expands past {self.limits.max_total_bytes} bytes (the "
                f"extraction cap) at member {name!r}; nothing was extracted "
                "(see --max-extract-bytes)"
            )
            raise ArchiveTooLarge(msg)


def _normalized(archive: Path, name: str) -> str:
    """The member's path relative to the destination, or raise if it escapes."""
    if name.startswith(("/", "\\")) or PureWindowsPath(name).drive:
        raise UnsafeArchive(archive, name, "absolute path")
    if "\\" in name:
        raise UnsafeArchive(archive, name, "backslash in the name")
    if "\x00" in name or len(name) > MAX_NAME:
        raise UnsafeArchive(archive, name, "NUL byte or over-long name")
    norm = posixpath.normpath(name)
    if norm == ".." or norm.startswith("../"):
        raise UnsafeArchive(archive, name, "path escapes the destination (..)")
    return "" if norm == "." else norm


def _escapes(name: str, target: str, *, hard: bool) -> bool:
    """Whether a link's target climbs out, read as text (the real check follows)."""
    base = "" if hard else posixpath.dirname(name)
    resolved = posixpath.normpath(posixpath.join(base, target.replace("\\", "/")))
    return resolved == ".." or resolved.startswith("../")


def _check_link(archive: Path, name: str, target: str, *, hard: bool) -> None:
    kind = "hardlink" if hard else "symlink"
    if "\x00" in target or len(target) > MAX_NAME:
        raise UnsafeArchive(archive, name, f"{kind} target has a NUL byte or is over-long")
    if target.startswith(("/", "\\")) or PureWindowsPath(target).drive:
        raise UnsafeArchive(archive, name, f"{kind} to an absolute path ({target})")
    # A hardlink's target is an archive path; a symlink's is relative to its folder.
    if _escapes(_normalized(archive, name), target, hard=hard):
        raise UnsafeArchive(archive, name, f"{kind} points outside the destination ({target})")


def _check_top(archive: Path, name: str, reserved: frozenset[str]) -> None:
    top = name.split("/", 1)[0]
    if top in reserved:
        raise UnsafeArchive(archive, name, "would overwrite a file the fetcher manages")


def _real(path: Path) -> Path:
    """``os.path.realpath``: every link on the way resolved (missing tails kept)."""
    return Path(os.path.realpath(path))


def _inside(root: Path, path: Path) -> bool:
    return path == root or root in path.parents


def _real_target(archive: Path, root: Path, member: str, name: str) -> Path:
    """``root/name`` with its parent folders created and every link resolved; raise
    unless it is still inside the real ``root``.
    """
    out = root / name
    if not _inside(root, _real(out.parent)):
        raise UnsafeArchive(archive, member, "path escapes the destination through a link")
    _real(out.parent).mkdir(parents=True, exist_ok=True)
    parent = _real(out.parent)  # again, now that it exists
    if not _inside(root, parent):
        raise UnsafeArchive(archive, member, "path escapes the destination through a link")
    return parent / out.name


def _write(
    archive: Path,
    root: Path,
    member: str,
    name: str,
    src: IO[bytes],
    meter: _Meter,
    mode: int,
    mtime: float | None = None,
) -> None:
    """Stream ``src`` to ``root/name``, counting bytes before writing them; never through
    a link (the parent is resolved, the file itself opened with ``O_NOFOLLOW``).
    """
    out = _real_target(archive, root, member, name)
    if out.is_symlink():
        out.unlink()  # a link from earlier in this archive: replace, never follow
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(out, flags | getattr(os, "O_CLOEXEC", 0), 0o600)
    written = 0
    with os.fdopen(fd, "wb") as dst:
        while chunk := src.read(CHUNK):
            meter.take(member, written, len(chunk))
            dst.write(chunk)
            written += len(chunk)
        os.fchmod(dst.fileno(), (mode & 0o755) | 0o600)
    if mtime is not None:
        os.utime(out, (mtime, mtime), follow_symlinks=False)


def _mkdir(archive: Path, root: Path, member: str, name: str) -> None:
    out = _real_target(archive, root, member, name)
    if out.is_symlink() or not _inside(root, _real(out)):
        raise UnsafeArchive(archive, member, "folder is a link")
    out.mkdir(parents=True, exist_ok=True)


def _clear(into: Path) -> None:
    """Remove everything under ``into`` (links are removed, never followed)."""
    for child in into.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)


def _cleaned(into: Path, body: Callable[[], list[str]]) -> list[str]:
    try:
        return body()
    except BaseException:
        _clear(into)
        raise


def _default_limits(archive: Path, limits: ExtractLimits | None) -> ExtractLimits:
    if limits is not None:
        return limits
    try:
        size = archive.stat().st_size
    except OSError:
        size = 0
    return ExtractLimits.for_archive(size)


def extract_tar(
    archive: Path,
    into: Path,
    reserved: frozenset[str] = frozenset(),
    limits: ExtractLimits | None = None,
) -> list[str]:
    """Extract a (gzip-compressed) tar archive into the empty folder ``into``.

    Streams the archive once (``r|*``), checking each member before extracting it, so a
    1 GB tarball is decompressed a single time. Regular files are written by us (bytes
    counted against ``limits``); folders and links go through ``tar.extract`` with the
    ``data`` filter. Returns the regular files written, as normalized relative paths.
    """
    meter = _Meter(archive, _default_limits(archive, limits))
    return _cleaned(into, lambda: _extract_tar(archive, into, reserved, meter))


def _extract_tar(archive: Path, into: Path, reserved: frozenset[str], meter: _Meter) -> list[str]:
    root = _real(into)
    written: list[str] = []
    try:
        with tarfile.open(archive, mode="r|*") as tar:
            for member in tar:
                name = _extract_tar_member(archive, tar, member, root, reserved, meter)
                if name is not None:
                    written.append(name)
    except _FILTER_ERRORS as exc:
        msg = f"{archive}: refusing to extract: {exc}"
        raise DatasetError(msg) from None
    except (tarfile.TarError, EOFError, gzip.BadGzipFile, zlib.error) as exc:
        # Other OSErrors (disk full, permissions) are about the destination, not the
        # archive: they propagate and the CLI reports them in one line.
        msg = f"{archive}: not a readable tar.gz archive ({exc})"
        raise DatasetError(msg) from None
    except (NotADirectoryError, FileExistsError, IsADirectoryError) as exc:
        msg = f"{archive}: members clash ({exc.strerror}: {exc.filename})"
        raise DatasetError(msg) from None
    return written


def _extract_tar_member(
    archive: Path,
    tar: tarfile.TarFile,
    member: tarfile.TarInfo,
    root: Path,
    reserved: frozenset[str],
    meter: _Meter,
) -> str | None:
    """Check one member, then extract it; the normalized name of a regular file
    written, None for a folder, a link or the archive's ``.`` entry.
    """
    meter.member(member.name)
    name = _normalized(archive, member.name)
    if not name:
        return None
    _check_top(archive, name, reserved)
    original = member.name
    _check_tar_kind(archive, member)
    member = _renamed(member, name, root)
    if member.isfile():
        _write_tar_file(archive, tar, member, root, original, name, meter)
        return name
    if member.isdir():
        _mkdir(archive, root, original, name)
    else:
        _check_real_link(archive, root, original, member)
    if _HAS_DATA_FILTER:
        tar.extract(member, root, filter="data")
    else:  # pragma: no cover - Python < 3.11.4; our own checks above still ran
        tar.extract(member, root)
    return None


def _check_tar_kind(archive: Path, member: tarfile.TarInfo) -> None:
    """Links must stay inside (read as text); devices, fifos and other types are refused."""
    if member.issym():
        _check_link(archive, member.name, member.linkname, hard=False)
    elif member.islnk():
        _check_link(archive, member.name, member.linkname, hard=True)
    elif member.isdev():
        raise UnsafeArchive(archive, member.name, "device or fifo member")
    elif not (member.isfile() or member.isdir()):
        raise UnsafeArchive(archive, member.name, "unsupported member type")


def _renamed(member: tarfile.TarInfo, name: str, root: Path) -> tarfile.TarInfo:
    """The member under its normalized ``name`` (and a hardlink's normalized target),
    passed through the stdlib's ``data`` filter where it exists.
    """
    member.name = name
    if member.islnk():
        member.linkname = posixpath.normpath(member.linkname)
    if _HAS_DATA_FILTER:
        member = tarfile.data_filter(member, str(root))
    return member


def _write_tar_file(
    archive: Path,
    tar: tarfile.TarFile,
    member: tarfile.TarInfo,
    root: Path,
    original: str,
    name: str,
    meter: _Meter,
) -> None:
    """Stream a regular member to ``root/name``, its bytes counted by ``meter``."""
    meter.declared(original, member.size)
    src = tar.extractfile(member)
    if src is None:  # pragma: no cover - isfile() members always have data
        raise UnsafeArchive(archive, original, "no data")
    mode = 0o644 if member.mode is None else member.mode
    _write(archive, root, original, name, src, meter, mode, member.mtime)


def _check_real_link(archive: Path, root: Path, member: str, info: tarfile.TarInfo) -> None:
    """A link's target, with every link already on disk resolved, stays inside."""
    out = _real_target(archive, root, member, info.name)
    target = _real((out.parent if info.issym() else root) / info.linkname)
    if not _inside(root, target):
        raise UnsafeArchive(
            archive, member, f"link points outside the destination ({info.linkname})"
        )


def _zip_link_target(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> str:
    """A zip symlink's target, for the message (a link's data is its target path)."""
    with zf.open(info) as fh:
        return fh.read(MAX_NAME).decode("utf-8", "replace")


def _zip_plan(
    archive: Path, zf: zipfile.ZipFile, reserved: frozenset[str], meter: _Meter
) -> list[tuple[zipfile.ZipInfo, str, bool]]:
    """Every member checked before the first byte is written: (info, name, is_dir)."""
    plan: list[tuple[zipfile.ZipInfo, str, bool]] = []
    for info in zf.infolist():
        meter.member(info.filename)
        name = _normalized(archive, info.filename)
        if not name:
            continue
        _check_top(archive, name, reserved)
        kind = stat.S_IFMT(info.external_attr >> 16)
        if kind == stat.S_IFLNK:
            target = _zip_link_target(zf, info)
            if _escapes(name, target, hard=False) or target.startswith(("/", "\\")):
                reason = f"symlink points outside the destination ({target})"
            else:
                reason = f"symlink to {target!r} (links are refused in zip archives)"
            raise UnsafeArchive(archive, info.filename, reason)
        if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
            raise UnsafeArchive(archive, info.filename, "device, fifo or socket member")
        if info.flag_bits & 0x1:
            raise UnsafeArchive(archive, info.filename, "encrypted member")
        is_dir = info.is_dir() or kind == stat.S_IFDIR
        if not is_dir:
            meter.declared(info.filename, info.file_size)
            meter.total += info.file_size
        plan.append((info, name, is_dir))
    meter.total = 0  # the declared sizes were a first check; now count real bytes
    return plan


def extract_zip(
    archive: Path,
    into: Path,
    reserved: frozenset[str] = frozenset(),
    limits: ExtractLimits | None = None,
) -> list[str]:
    """Extract a zip archive into the empty folder ``into``.

    All members are checked before the first byte is written (the central directory
    lists them up front); symlinks and special files are refused. Returns the regular
    files written, as normalized relative paths.
    """
    meter = _Meter(archive, _default_limits(archive, limits))
    try:
        zf = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        msg = f"{archive}: not a readable zip archive ({exc})"
        raise DatasetError(msg) from None
    with zf:
        return _cleaned(into, lambda: _extract_zip(archive, zf, into, reserved, meter))


def _extract_zip(
    archive: Path, zf: zipfile.ZipFile, into: Path, reserved: frozenset[str], meter: _Meter
) -> list[str]:
    root = _real(into)
    written: list[str] = []
    member = ""
    try:
        plan = _zip_plan(archive, zf, reserved, meter)
        for info, name, is_dir in plan:
            member = info.filename
            if is_dir:
                _mkdir(archive, root, member, name)
                continue
            with zf.open(info) as src:
                _write(archive, root, member, name, src, meter, 0o644)
            written.append(name)
    except (zipfile.BadZipFile, EOFError, zlib.error) as exc:
        msg = f"{archive}: member {member!r}: {exc}"
        raise DatasetError(msg) from None
    except (NotImplementedError, RuntimeError) as exc:  # compression method, encryption
        msg = f"{archive}: member {member!r}: {exc}"
        raise DatasetError(msg) from None
    except (NotADirectoryError, FileExistsError, IsADirectoryError) as exc:
        msg = f"{archive}: members clash ({exc.strerror}: {exc.filename})"
        raise DatasetError(msg) from None
    return written
