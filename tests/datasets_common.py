"""Helpers shared by the tests/test_datasets_*.py files (split from test_datasets.py).

The loopback server (``http.server`` in a thread) supports ``Range``, can drop or stall
a response mid-way and can serve wrong bytes; every file it serves is built by the tests
(or is a bundled upstream sample), and every expected checksum is computed with hashlib.
The fixtures themselves are declared in each test file (two lines each), so that the
autouse one applies to those files only.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import re
import socket
import stat
import tarfile
import threading
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from typer.testing import CliRunner

from gpu_trace.datasets import MIRROR_ENV, DataFile, Dataset, Member
from tests.conftest import SAMPLES

runner = CliRunner()
OPENB_FILES = (
    "openb_pod_list_default.csv",
    "openb_pod_list_gpushare40.csv",
    "openb_pod_list_multigpu50.csv",
    "openb_node_list_all_node.csv",
    "openb_node_list_gpu_node.csv",
)


def sha(data: bytes) -> str:
    """Hex sha256 of ``data``: how every expected checksum in these tests is worked out."""
    return hashlib.sha256(data).hexdigest()


def payload(n: int, seed: int = 0) -> bytes:
    """``n`` deterministic bytes that differ with ``seed`` (no two offsets alike mod 251)."""
    return bytes((i * 7 + seed) % 251 for i in range(n))


# ----------------------------------------------------------------- loopback server


@dataclass
class Served:
    """One file the loopback server serves, and how it misbehaves."""

    body: bytes
    faults: list[tuple[str, int]] = field(default_factory=list)
    """One fault per request, in order: ("drop", n) sends n bytes then closes;
    ("stall", n) sends n bytes then goes silent for ``Server.stall_s``."""
    ignore_range: bool = False


@dataclass
class Server:
    """The loopback server's state: what it serves and every request it received."""

    base: str
    files: dict[str, Served] = field(default_factory=dict)
    requests: list[tuple[str, str | None]] = field(default_factory=list)
    stall_s: float = 1.0

    def serve(self, path: str, body: bytes, **kw: object) -> Served:
        """Serve ``body`` at ``path`` (``kw``: the :class:`Served` fault options)."""
        spec = Served(body, **kw)  # type: ignore[arg-type]
        self.files[path] = spec
        return spec


class Handler(BaseHTTPRequestHandler):
    """GET with ``Range: bytes=N-`` (206 / 416) and the faults of :class:`Served`."""

    server: ThreadingHTTPServer

    def do_GET(self) -> None:
        """Answer one request from the :class:`Server` state, recording it first."""
        state: Server = self.server.state  # type: ignore[attr-defined]
        rng = self.headers.get("Range")
        state.requests.append((self.path, rng))
        spec = state.files.get(self.path)
        if spec is None:
            self.send_error(404)
            return
        body, start = spec.body, 0
        if rng and not spec.ignore_range:
            m = re.fullmatch(r"bytes=(\d+)-", rng)
            assert m, rng
            start = int(m[1])
            if start >= len(body):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(body)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        else:
            self.send_response(200)
        payload = body[start:]
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if spec.faults:
            kind, n = spec.faults.pop(0)
            self.wfile.write(payload[:n])
            self.wfile.flush()
            if kind == "stall":
                time.sleep(state.stall_s)
            self.close_connection = True
            return
        self.wfile.write(payload)

    def log_message(self, format: str, *args: object) -> None:
        """Silent: the tests assert on ``Server.requests``, not on a log."""


def loopback_server() -> Iterator[Server]:
    """The body of the ``server`` fixture: a threaded server on 127.0.0.1, shut down
    after the test."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    state = Server(f"http://127.0.0.1:{httpd.server_address[1]}")
    httpd.state = state  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    yield state
    httpd.shutdown()
    httpd.server_close()


def no_mirror_no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """No mirror from the environment, and no proxy that would carry loopback requests
    off this machine (urllib honours ``*_proxy`` variables)."""
    monkeypatch.delenv(MIRROR_ENV, raising=False)
    for var in ("http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
        monkeypatch.delenv(var.upper(), raising=False)
    monkeypatch.setenv("no_proxy", "*")


def unused_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def dataset(
    server: Server,
    files: dict[str, bytes],
    *,
    name: str = "toy",
    pinned: bool = True,
    extract: str | None = None,
    contents: tuple[Member, ...] = (),
) -> Dataset:
    """A one-off registry entry whose URLs point at the loopback server."""
    out = []
    for fname, body in files.items():
        server.serve(f"/{name}/{fname}", body)
        out.append(
            DataFile(
                fname,
                (f"{server.base}/{name}/{fname}",),
                len(body) if pinned else None,
                sha(body) if pinned else None,
                "test",
                extract,  # type: ignore[arg-type]
                contents,
            )
        )
    return Dataset(name, "Toy", "https://example.invalid", "CC0", "", "Nobody", tuple(out))


def serve_openb(server: Server, corrupt: str | None = None) -> None:
    """Serve the bundled openb files as a mirror would (``corrupt``: one file with its
    last byte changed)."""
    for name in OPENB_FILES:
        data = (SAMPLES / "openb" / name).read_bytes()
        if name == corrupt:
            data = data[:-2] + b"9\n"
        server.serve(f"/openb/{name}", data)


# ------------------------------------------------------------------------ archives


def tar_gz(members: list[tarfile.TarInfo | tuple[str, bytes]]) -> bytes:
    """A tar.gz of (name, data) files and ready-made entries (links, folders); gzip's
    mtime is 0, so the same members give the same bytes on every run (and in every
    pytest-xdist worker)."""
    buf = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w") as tar,
    ):
        for m in members:
            if isinstance(m, tarfile.TarInfo):
                tar.addfile(m)
            else:
                info = tarfile.TarInfo(m[0])
                info.size = len(m[1])
                tar.addfile(info, io.BytesIO(m[1]))
    return buf.getvalue()


def link(name: str, target: str, *, hard: bool = False) -> tarfile.TarInfo:
    """A tar symlink (or hardlink) entry ``name -> target``."""
    info = tarfile.TarInfo(name)
    info.type = tarfile.LNKTYPE if hard else tarfile.SYMTYPE
    info.linkname = target
    return info


def zip_bytes(members: list[tuple[str, bytes | str, bool]]) -> bytes:
    """A zip of (name, data, is_symlink) members; a link's data is its target."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data, is_link in members:
            info = zipfile.ZipInfo(name)
            if is_link:
                info.create_system = 3
                info.external_attr = (stat.S_IFLNK | 0o777) << 16
            zf.writestr(info, data)
    return buf.getvalue()
