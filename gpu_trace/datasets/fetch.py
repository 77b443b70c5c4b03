"""Fetch, verify and report the local state of the registered public traces.

The contract (pooch's, see ``docs/style.md`` part 5):

- **Explicit.** Only :func:`fetch` touches the network, and only when a file is not
  already in place and verified; nothing else in gpu-trace downloads anything.
- **Verify before move.** Bytes go to ``DEST/<dataset>/<file>.part``; the size and
  sha256 are checked there, and only a matching file is renamed into place (an atomic
  rename in the same folder). A mismatching download is deleted, so a bad file is never
  mistaken for a good one.
- **Resumable.** An interrupted download keeps its ``.part``; the next attempt (an
  automatic retry, or the same command run again) asks for the rest with an HTTP
  ``Range`` request and appends. Servers that ignore ``Range`` are handled by starting
  over.
- **Cheap status.** Every verified file is recorded with its size, mtime and sha256 in
  ``DEST/<dataset>/.gpu-trace-datasets.json``; ``list`` compares size and mtime only
  (no re-hash of gigabytes), ``verify`` re-hashes everything.
- **Unpinned files** (Helios' ``data.zip`` has no published checksum) are downloaded
  with a warning, and the sha256 computed at download is recorded so later changes are
  still detected.

Standard library only (``urllib``): proxies from ``$https_proxy`` work as usual, and no
dependency is added for a feature most users run once.
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import http.client
import json
import os
import shutil
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from gpu_trace import __version__
from gpu_trace.datasets.extract import ExtractLimits, extract_tar, extract_zip
from gpu_trace.datasets.registry import DEFAULT_DEST, DataFile, Dataset, get, resolve_urls
from gpu_trace.errors import DatasetError

STATE_FILE = ".gpu-trace-datasets.json"
PART_SUFFIX = ".part"
CHUNK = 1 << 20
USER_AGENT = f"gpu-trace/{__version__} (python-urllib)"


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


class ProgressHook(Protocol):
    """Receives byte counts while a file downloads (the CLI draws a rich bar)."""

    def start(self, label: str, total: int | None, completed: int) -> None:
        """A (re)started transfer of ``label``: ``completed`` bytes already on disk."""

    def advance(self, nbytes: int) -> None:
        """``nbytes`` more bytes were written."""


Notify = Callable[[str], None]


@dataclass(frozen=True)
class FetchResult:
    """What :func:`fetch` did for one file."""

    dataset: str
    file: str
    path: Path
    size: int
    sha256: str
    status: Status
    """``verified`` or ``unverified`` (no published checksum)."""
    downloaded: bool
    """False when the file was already in place and verified: no network I/O."""
    resumed_from: int = 0
    """Bytes of an earlier ``.part`` that were kept (HTTP Range)."""
    url: str | None = None
    extracted: tuple[str, ...] = ()


@dataclass(frozen=True)
class FileStatus:
    name: str
    path: Path
    status: Status
    detail: str = ""


@dataclass(frozen=True)
class DatasetStatus:
    dataset: Dataset
    folder: Path
    status: Status
    files: tuple[FileStatus, ...]


@dataclass(frozen=True)
class Check:
    """One line of :func:`verify`: a downloaded file or an extracted member."""

    path: str
    """Relative to ``DEST/<dataset>/``."""
    ok: bool
    result: str
    """``ok``, ``ok (unpinned)``, ``ok (size)``, ``not extracted``, ``mismatch``,
    ``size mismatch`` or ``missing``."""
    expected: str | None = None
    actual: str | None = None


# --------------------------------------------------------------------------- state


@dataclass
class _State:
    """The per-dataset record of verified files and extracted members."""

    path: Path
    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    members: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def load(cls, folder: Path) -> _State:
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
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        body = {"version": 1, "files": self.files, "members": self.members}
        tmp.write_text(json.dumps(body, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        tmp.replace(self.path)

    def record(self, name: str, path: Path, sha256: str, checked: str, url: str | None) -> None:
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


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file, streamed (gigabyte archives never sit in memory)."""
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def _dataset(dataset: str | Dataset) -> Dataset:
    return get(dataset) if isinstance(dataset, str) else dataset


def _select(ds: Dataset, files: Sequence[str] | None) -> tuple[DataFile, ...]:
    if not files:
        return ds.files
    return tuple(ds.file(name) for name in dict.fromkeys(files))


# -------------------------------------------------------------------------- status


def _file_status(ds: Dataset, f: DataFile, folder: Path, state: _State) -> FileStatus:
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
        mine = [m for m, r in state.members.items() if r.get("archive") == f.name]
        if not mine:
            detail = "; ".join(x for x in (detail, "not extracted") if x)
        elif missing := [m for m in mine if not (folder / m).exists()]:
            detail = "; ".join(x for x in (detail, f"extracted file missing: {missing[0]}") if x)
    return FileStatus(f.name, path, status, detail)


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
    ds = _dataset(dataset)
    folder = dest / ds.name
    state = _State.load(folder)
    files = tuple(_file_status(ds, f, folder, state) for f in ds.files)
    return DatasetStatus(ds, folder, _combine(f.status for f in files), files)


# ------------------------------------------------------------------------ download


class _Unreachable(Exception):
    def __init__(self, host: str, reason: str) -> None:
        self.host = host
        self.reason = reason
        super().__init__(f"{host}: {reason}")


class _Failed(Exception):
    """This URL cannot serve the file (HTTP error, or it keeps dropping)."""


_OFFLINE_ERRNOS = {
    errno.ECONNREFUSED,
    errno.ENETUNREACH,
    errno.EHOSTUNREACH,
    errno.ENETDOWN,
    errno.EHOSTDOWN,
    errno.EADDRNOTAVAIL,
}


def _reason(exc: BaseException) -> str:
    if isinstance(exc, urllib.error.URLError) and isinstance(exc.reason, BaseException):
        return _reason(exc.reason)
    if isinstance(exc, urllib.error.URLError):
        return str(exc.reason)
    text = str(exc) or type(exc).__name__
    return " ".join(text.split())


def _is_offline(exc: BaseException) -> bool:
    """DNS failure, refused or unroutable connection: retrying now will not help."""
    inner = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    if isinstance(inner, socket.gaierror):
        return True
    return isinstance(inner, OSError) and inner.errno in _OFFLINE_ERRNOS


def _content_range(value: str | None) -> tuple[int | None, int | None]:
    """(start, total) from ``bytes START-END/TOTAL`` or ``bytes */TOTAL``."""
    if not value or not value.startswith("bytes "):
        return None, None
    span, _, total = value[6:].partition("/")
    start = span.split("-", 1)[0]
    return (
        int(start) if start.isdigit() else None,
        int(total) if total.isdigit() else None,
    )


@dataclass
class _Transfer:
    """Downloads one URL into ``part``, resuming and retrying."""

    url: str
    part: Path
    size: int | None
    label: str
    timeout_s: float
    retries: int
    backoff_s: float
    progress: ProgressHook | None
    resumed_from: int = 0

    def _sleep(self, attempt: int) -> None:
        time.sleep(min(self.backoff_s * 2 ** (attempt - 1), 30.0))

    def _offset(self) -> int:
        offset = self.part.stat().st_size if self.part.exists() else 0
        if self.size is not None and offset > self.size:
            self.part.unlink()
            return 0
        return offset

    def run(self) -> None:
        opener = urllib.request.build_opener()
        host = urlsplit(self.url).netloc
        attempt = 0
        while True:
            offset = self._offset()
            if self.size is not None and offset == self.size:
                return
            headers = {"User-Agent": USER_AGENT, "Accept-Encoding": "identity"}
            if offset:
                headers["Range"] = f"bytes={offset}-"
            try:
                resp = opener.open(
                    urllib.request.Request(self.url, headers=headers), timeout=self.timeout_s
                )
            except urllib.error.HTTPError as exc:
                exc.close()
                if exc.code == 416 and offset:
                    _, total = _content_range(exc.headers.get("Content-Range"))
                    if total == offset and self.size is None:
                        return  # the .part already holds the whole file
                    self.part.unlink()  # stale or foreign partial file: start over
                    attempt += 1
                    if attempt > self.retries:
                        raise _Failed(f"HTTP 416 from {self.url}") from None
                    continue
                raise _Failed(f"HTTP {exc.code} {exc.reason} from {self.url}") from None
            except (OSError, http.client.HTTPException) as exc:
                # No response at all: retry a little (a blip), but a silent host should
                # not cost (retries + 1) x timeout before the user hears "offline?".
                attempt += 1
                if _is_offline(exc) or attempt > min(self.retries, 2):
                    raise _Unreachable(host, _reason(exc)) from None
                self._sleep(attempt)
                continue
            with resp:
                done = self._receive(resp, offset)
            if done is None:
                return
            attempt += 1
            if attempt > self.retries:
                of = f" of {self.size}" if self.size is not None else ""
                raise _Failed(
                    f"download from {self.url} interrupted at byte {done}{of} "
                    f"({self.part.name} kept: run the same command again to resume)"
                )
            self._sleep(attempt)

    def _receive(self, resp: http.client.HTTPResponse, offset: int) -> int | None:
        """Stream the body into the ``.part``; None when complete, else the bytes now
        on disk after an interruption (the caller retries with ``Range``)."""
        if offset and resp.status == 206:
            start, _ = _content_range(resp.headers.get("Content-Range"))
            if start != offset:
                self.part.unlink()
                return 0
            mode = "ab"
            self.resumed_from = self.resumed_from or offset
        else:
            offset, mode = 0, "wb"  # 200: the server sent the whole file
            self.resumed_from = 0
        length = resp.headers.get("Content-Length")
        expected = offset + int(length) if length and length.isdigit() else self.size
        if self.progress is not None:
            self.progress.start(self.label, expected, offset)
        written = offset
        try:
            with self.part.open(mode) as out:
                try:
                    # read1: whatever has arrived (up to CHUNK), so bytes received
                    # before a stall are on disk when the timeout fires.
                    while chunk := resp.read1(CHUNK):
                        out.write(chunk)
                        written += len(chunk)
                        if self.progress is not None:
                            self.progress.advance(len(chunk))
                finally:
                    out.flush()
                    os.fsync(out.fileno())
        except (TimeoutError, ConnectionError, http.client.HTTPException):
            return written
        except OSError as exc:
            if exc.filename is not None or exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise  # our disk, not the network: the CLI reports it in one line
            return written
        if expected is not None and written < expected:
            return written  # the server closed the connection early
        return None


def _download(
    ds: Dataset,
    f: DataFile,
    part: Path,
    urls: Sequence[str],
    *,
    timeout_s: float,
    retries: int,
    backoff_s: float,
    progress: ProgressHook | None,
) -> tuple[str, int]:
    """Download ``f`` into ``part`` from the first URL that works; return (url, bytes
    of an earlier partial download that were reused)."""
    unreachable: list[_Unreachable] = []
    failures: list[str] = []
    for url in urls:
        transfer = _Transfer(
            url,
            part,
            f.size,
            f"{ds.name}/{f.name}",
            timeout_s,
            retries,
            backoff_s,
            progress,
        )
        try:
            transfer.run()
        except _Unreachable as exc:
            unreachable.append(exc)
            continue
        except _Failed as exc:
            failures.append(str(exc))
            continue
        return url, transfer.resumed_from
    if failures:
        raise DatasetError(f"cannot download {ds.name}/{f.name}: {'; '.join(failures)}")
    hosts = ", ".join(dict.fromkeys(u.host for u in unreachable))
    raise DatasetError(f"cannot reach {hosts}: {unreachable[-1].reason} (offline?)")


# ------------------------------------------------------------------------- extract


def _reserved(ds: Dataset, f: DataFile) -> frozenset[str]:
    names = {STATE_FILE, f".extract-{f.name}.tmp"}
    for other in ds.files:
        names.update({other.name, other.name + PART_SUFFIX})
    return frozenset(names)


def _extracted(f: DataFile, folder: Path, state: _State, archive_sha: str) -> bool:
    mine = {m: r for m, r in state.members.items() if r.get("archive") == f.name}

    def intact(rel: str, rec: dict[str, Any]) -> bool:
        try:
            st = (folder / rel).stat()
        except FileNotFoundError:
            return False
        return (st.st_size, st.st_mtime_ns) == (rec.get("size"), rec.get("mtime_ns"))

    return bool(mine) and all(
        r.get("archive_sha256") == archive_sha and intact(m, r) for m, r in mine.items()
    )


def _merge(src_root: Path, dst_root: Path) -> None:
    """Move every file and symlink of ``src_root`` to the same place under ``dst_root``
    (atomic renames within one file system); files the archive does not contain are
    left alone, so archives sharing a folder do not erase each other."""
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


def _extract(
    ds: Dataset,
    f: DataFile,
    folder: Path,
    state: _State,
    archive_sha: str,
    notify: Notify | None,
    max_extract_bytes: int | None = None,
) -> tuple[str, ...]:
    """Extract a verified archive into a temporary folder, check the members that have
    published checksums, then move the extracted files into ``folder``.

    The bytes written are capped (:meth:`ExtractLimits.for_archive`: a multiple of the
    published size, else of the size on disk; ``max_extract_bytes`` overrides). An
    archive with no published checksum that fails to extract is deleted with its record,
    so the next fetch downloads it again instead of trusting it."""
    archive = folder / f.name
    tmp = folder / f".extract-{f.name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        reserved = _reserved(ds, f)
        limits = ExtractLimits.for_archive(archive.stat().st_size, f.size, max_extract_bytes)
        try:
            if f.extract == "zip":
                written = extract_zip(archive, tmp, reserved, limits)
            else:
                written = extract_tar(archive, tmp, reserved, limits)
        except DatasetError as exc:
            if f.sha256 is None:
                archive.unlink(missing_ok=True)
                state.files.pop(f.name, None)
                exc.args = (f"{exc}; the unverified download was deleted",)
            raise
        sums: dict[str, str] = {}
        absent: list[str] = []
        for m in f.contents:
            p = tmp / m.path
            if not p.is_file():
                if m.sha256 is not None:
                    raise DatasetError(f"{archive}: expected member {m.path!r} is missing")
                absent.append(m.path)
                continue
            if m.size is not None and p.stat().st_size != m.size:
                raise DatasetError(
                    f"{archive}: member {m.path!r} is {p.stat().st_size} bytes, "
                    f"expected {m.size}; nothing was extracted"
                )
            if m.sha256 is not None:
                got = sha256_of(p)
                if got != m.sha256:
                    raise DatasetError(
                        f"{archive}: member {m.path!r} sha256 mismatch (expected {m.sha256}, "
                        f"got {got}); nothing was extracted"
                    )
                sums[m.path] = got
        _merge(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    state.members = {m: r for m, r in state.members.items() if r.get("archive") != f.name}
    for rel in written:
        p = folder / rel
        if p.is_file():
            st = p.stat()
            state.members[rel] = {
                "archive": f.name,
                "archive_sha256": archive_sha,
                "size": st.st_size,
                "mtime_ns": st.st_mtime_ns,
                "sha256": sums.get(rel),
            }
    if absent and notify is not None:
        notify(
            f"{archive}: expected file(s) not in the archive: {', '.join(absent)} "
            "(the upstream layout may have changed)"
        )
    return tuple(written)


# --------------------------------------------------------------------------- fetch


def _mismatch(what: str, expected: object, got: object) -> str:
    return f"{what} mismatch (expected {expected}, got {got})"


def _place(
    ds: Dataset,
    f: DataFile,
    folder: Path,
    state: _State,
    *,
    mirror: str | None,
    timeout_s: float,
    retries: int,
    backoff_s: float,
    progress: ProgressHook | None,
    notify: Notify | None,
) -> FetchResult:
    """Make sure ``folder/f.name`` is in place and verified; download only if needed."""
    path = folder / f.name
    current = _file_status(ds, f, folder, state)
    if current.status in (Status.verified, Status.unverified):
        rec = state.files[f.name]
        return FetchResult(
            ds.name, f.name, path, int(rec["size"]), str(rec["sha256"]), current.status, False
        )
    if path.exists():
        # Placed by hand (or changed since it was verified): check it, never overwrite it.
        got = sha256_of(path)
        size = path.stat().st_size
        if (f.sha256 is not None and got != f.sha256) or (f.size is not None and size != f.size):
            raise DatasetError(
                f"{path} exists but does not match the registry "
                f"({_mismatch('sha256', f.sha256, got)}); move it away and fetch again"
            )
        checked = "published" if f.sha256 is not None else "recorded"
        state.record(f.name, path, got, checked, None)
        status_ = Status.verified if f.sha256 is not None else Status.unverified
        return FetchResult(ds.name, f.name, path, size, got, status_, False)

    part = folder / (f.name + PART_SUFFIX)
    url, resumed = _download(
        ds,
        f,
        part,
        resolve_urls(ds, f, mirror),
        timeout_s=timeout_s,
        retries=retries,
        backoff_s=backoff_s,
        progress=progress,
    )
    size = part.stat().st_size
    if f.size is not None and size != f.size:
        part.unlink()
        raise DatasetError(
            f"{ds.name}/{f.name} from {url}: {_mismatch('size', f.size, size)}; "
            "the download was discarded"
        )
    got = sha256_of(part)
    if f.sha256 is not None and got != f.sha256:
        part.unlink()
        raise DatasetError(
            f"{ds.name}/{f.name} from {url}: {_mismatch('sha256', f.sha256, got)}; "
            "the download was discarded"
        )
    part.replace(path)  # atomic: same folder, and only after the checks above
    if f.sha256 is None:
        state.record(f.name, path, got, "recorded", url)
        if notify is not None:
            notify(
                f"{ds.name}/{f.name} has no published size or sha256: the download is "
                f"unverified; its sha256 {got} is recorded in {state.path}"
            )
        return FetchResult(ds.name, f.name, path, size, got, Status.unverified, True, resumed, url)
    state.record(f.name, path, got, "published", url)
    return FetchResult(ds.name, f.name, path, size, got, Status.verified, True, resumed, url)


def fetch(
    dataset: str | Dataset,
    dest: Path = DEFAULT_DEST,
    *,
    files: Sequence[str] | None = None,
    mirror: str | None = None,
    extract: bool = True,
    timeout_s: float = 30.0,
    retries: int = 5,
    backoff_s: float = 1.0,
    progress: ProgressHook | None = None,
    notify: Notify | None = None,
    max_extract_bytes: int | None = None,
) -> list[FetchResult]:
    """Download ``dataset`` (or only ``files`` of it) into ``dest/<name>/``, verify
    every file before it is moved into place, and extract archives.

    A file already in place and verified is not downloaded again (no network I/O).
    ``mirror`` (else ``$GPU_TRACE_DATASETS_MIRROR``) replaces the official URLs with
    ``<mirror>/<dataset>/<file>``. ``retries`` is the number of reconnections allowed
    per URL after a timeout or a dropped connection; each one resumes with HTTP
    ``Range`` (with exponential back-off from ``backoff_s``). Refused connections and
    DNS failures are not retried: they mean offline, and say so.
    ``max_extract_bytes`` caps what one archive may expand to (default: derived from
    its size, see :class:`~gpu_trace.datasets.extract.ExtractLimits`).
    Raises :class:`DatasetError` with a one-line message on any failure.
    """
    ds = _dataset(dataset)
    selected = _select(ds, files)
    folder = dest / ds.name
    folder.mkdir(parents=True, exist_ok=True)
    state = _State.load(folder)
    results: list[FetchResult] = []
    try:
        for f in selected:
            result = _place(
                ds,
                f,
                folder,
                state,
                mirror=mirror,
                timeout_s=timeout_s,
                retries=retries,
                backoff_s=backoff_s,
                progress=progress,
                notify=notify,
            )
            state.save()
            if extract and f.extract and not _extracted(f, folder, state, result.sha256):
                members = _extract(ds, f, folder, state, result.sha256, notify, max_extract_bytes)
                state.save()
                result = dataclasses.replace(result, extracted=members)
            results.append(result)
    finally:
        state.save()
    return results


# -------------------------------------------------------------------------- verify


def verify(
    dataset: str | Dataset, dest: Path = DEFAULT_DEST, *, files: Sequence[str] | None = None
) -> list[Check]:
    """Re-hash every file of ``dataset`` (or ``files``) under ``dest`` and the archive
    members that carry published checksums; update the record of what is verified.

    Files without a published checksum are compared with the sha256 recorded when they
    were downloaded (or recorded now, if there is none). Raises :class:`DatasetError`
    when nothing of the dataset is present.
    """
    ds = _dataset(dataset)
    selected = _select(ds, files)
    folder = dest / ds.name
    if not any((folder / f.name).exists() for f in selected):
        raise DatasetError(
            f"dataset {ds.name!r} not found in {dest}; run `gpu-trace datasets fetch "
            f"{ds.name} --dest {dest}`"
        )
    state = _State.load(folder)
    checks: list[Check] = []
    for f in selected:
        path = folder / f.name
        if not path.exists():
            state.files.pop(f.name, None)
            checks.append(Check(f.name, False, "missing", f.sha256))
            continue
        got = sha256_of(path)
        size = path.stat().st_size
        pinned = f.sha256
        recorded = state.files.get(f.name, {}).get("sha256")
        if f.size is not None and size != f.size:
            state.files.pop(f.name, None)
            checks.append(Check(f.name, False, "size mismatch", str(f.size), str(size)))
            continue
        if pinned is not None:
            ok = got == pinned
            checks.append(Check(f.name, ok, "ok" if ok else "mismatch", pinned, got))
        elif recorded is not None:
            ok = got == recorded
            result = "ok (unpinned)" if ok else "mismatch"
            checks.append(Check(f.name, ok, result, recorded, got))
        else:
            ok = True
            checks.append(Check(f.name, True, "ok (unpinned, recorded now)", None, got))
        if ok:
            prior = state.files.get(f.name, {})
            state.record(f.name, path, got, "published" if pinned else "recorded", prior.get("url"))
        else:
            state.files.pop(f.name, None)
        members = _verify_members(f, folder, state)
        if not all(c.ok for c in members):
            # Forget this archive's extraction so the next fetch unpacks it again.
            state.members = {m: r for m, r in state.members.items() if r.get("archive") != f.name}
        checks.extend(members)
    state.save()
    return checks


def _verify_members(f: DataFile, folder: Path, state: _State) -> list[Check]:
    checks: list[Check] = []
    pinned = {m.path: m for m in f.contents if m.sha256 is not None}
    recorded = {m: r for m, r in state.members.items() if r.get("archive") == f.name}
    for rel in sorted(set(pinned) | set(recorded)):
        p = folder / rel
        if not p.is_file():
            if not recorded:  # never extracted (--no-extract): the archive was checked
                checks.append(Check(rel, True, "not extracted", pinned[rel].sha256))
            else:
                checks.append(Check(rel, False, "missing"))
            continue
        if rel in pinned:
            want = pinned[rel].sha256
            got = sha256_of(p)
            checks.append(Check(rel, got == want, "ok" if got == want else "mismatch", want, got))
        else:
            want_size = recorded[rel].get("size")
            size = p.stat().st_size
            ok = size == want_size
            result = "ok (size)" if ok else "size mismatch"
            checks.append(Check(rel, ok, result, str(want_size), str(size)))
    return checks
