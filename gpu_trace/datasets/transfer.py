"""The network side of ``gpu-trace datasets fetch``: one file's bytes into its ``.part``.

- **Resumable.** An interrupted download keeps its ``.part``; the next attempt (an
  automatic retry, or the same command run again) asks for the rest with an HTTP
  ``Range`` request and appends. Servers that ignore ``Range`` are handled by starting
  over; a ``.part`` the server disowns (416, or a ``Content-Range`` that starts
  elsewhere) is deleted and the download starts over.
- **Offline is one line.** A refused or unroutable connection or a DNS failure is not
  retried (it will not get better in a second): the error names the host and ends in
  ``(offline?)``. A silent host costs at most three timeouts, not one per retry.
- **Nothing is checked or placed here**: :mod:`.verify` checks the finished ``.part``
  and :mod:`.fetch` renames it into place.

Standard library only (``urllib``): proxies from ``$https_proxy`` work as usual, and no
dependency is added for a feature most users run once.
"""

from __future__ import annotations

import errno
import http.client
import os
import socket
import time
import urllib.error
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol
from urllib.parse import urlsplit

from gpu_trace.datasets.registry import DataFile, Dataset
from gpu_trace.errors import DatasetError
from gpu_trace.version import __version__

if TYPE_CHECKING:
    # Imported where a download starts: ``urllib.request`` costs ~50 ms, and every loader
    # that opens archives imports this package (``ingest`` must not pay for HTTP, #25).
    import urllib.request

CHUNK = 1 << 20
"""Most bytes read from the socket and written to the ``.part`` at a time."""
USER_AGENT = f"gpu-trace/{__version__} (python-urllib)"


class ProgressHook(Protocol):
    """Receives byte counts while a file downloads (the CLI draws a rich bar)."""

    def start(self, label: str, total: int | None, completed: int) -> None:
        """A (re)started transfer of ``label``: ``completed`` bytes already on disk."""

    def advance(self, nbytes: int) -> None:
        """``nbytes`` more bytes were written."""


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
    attempt: int = 0
    """Retries used so far (each failed request or interrupted body counts one)."""

    def _sleep(self) -> None:
        time.sleep(min(self.backoff_s * 2 ** (self.attempt - 1), 30.0))

    def _offset(self) -> int:
        offset = self.part.stat().st_size if self.part.exists() else 0
        if self.size is not None and offset > self.size:
            self.part.unlink()
            return 0
        return offset

    def _request(self, offset: int) -> urllib.request.Request:
        import urllib.request

        headers = {"User-Agent": USER_AGENT, "Accept-Encoding": "identity"}
        if offset:
            headers["Range"] = f"bytes={offset}-"
        return urllib.request.Request(self.url, headers=headers)

    def run(self) -> None:
        """Request and receive until the ``.part`` is complete, or raise :class:`_Failed`
        (this URL will not serve it) or :class:`_Unreachable` (no answer from the host).
        """
        import urllib.request

        opener = urllib.request.build_opener()
        while True:
            offset = self._offset()
            if self.size is not None and offset == self.size:
                return
            try:
                resp = opener.open(self._request(offset), timeout=self.timeout_s)
            except urllib.error.HTTPError as exc:
                exc.close()
                if self._http_error(exc, offset):
                    return
                continue
            except (OSError, http.client.HTTPException) as exc:
                self._no_response(exc)
                continue
            with resp:
                done = self._receive(resp, offset)
            if done is None:
                return
            self._interrupted(done)

    def _http_error(self, exc: urllib.error.HTTPError, offset: int) -> bool:
        """True when a 416 says the ``.part`` already holds the whole file; False to
        retry from scratch (a stale or foreign ``.part`` was deleted); else raise.
        """
        if exc.code != 416 or not offset:
            msg = f"HTTP {exc.code} {exc.reason} from {self.url}"
            raise _Failed(msg) from None
        _, total = _content_range(exc.headers.get("Content-Range"))
        if total == offset and self.size is None:
            return True  # the .part already holds the whole file
        self.part.unlink()  # stale or foreign partial file: start over
        self.attempt += 1
        if self.attempt > self.retries:
            msg = f"HTTP 416 from {self.url}"
            raise _Failed(msg) from None
        return False

    def _no_response(self, exc: BaseException) -> None:
        """No response at all: retry a little (a blip), but a silent host should not
        cost (retries + 1) x timeout before the user hears "offline?".
        """
        self.attempt += 1
        if _is_offline(exc) or self.attempt > min(self.retries, 2):
            raise _Unreachable(urlsplit(self.url).netloc, _reason(exc)) from None
        self._sleep()

    def _interrupted(self, done: int) -> None:
        """The body stopped at byte ``done``: back off and resume, or give up keeping
        the ``.part`` for the next run.
        """
        self.attempt += 1
        if self.attempt > self.retries:
            of = f" of {self.size}" if self.size is not None else ""
            msg = (
                f"download from {self.url} interrupted at byte {done}{of} "
                f"({self.part.name} kept: run the same command again to resume)"
            )
            raise _Failed(msg)
        self._sleep()

    def _receive(self, resp: http.client.HTTPResponse, offset: int) -> int | None:
        """Stream the body into the ``.part``; None when complete, else the bytes now
        on disk after an interruption (the caller retries with ``Range``).
        """
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


def download(
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
    of an earlier partial download that were reused).
    """
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
        msg = f"cannot download {ds.name}/{f.name}: {'; '.join(failures)}"
        raise DatasetError(msg)
    hosts = ", ".join(dict.fromkeys(u.host for u in unreachable))
    msg = f"cannot reach {hosts}: {unreachable[-1].reason} (offline?)"
    raise DatasetError(msg)
