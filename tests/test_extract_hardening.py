"""Hostile archives against ``gpu-trace datasets fetch`` extraction.

Every archive is built here with ``zipfile`` / ``tarfile``: link chains that climb out
of the destination one ``x -> .`` at a time, special files, name tricks, and zip / tar
bombs (kept small by passing a small cap, never by writing hundreds of megabytes). Each
is run through the public extraction functions and through the real CLI path
(``--mirror`` pointing at a loopback HTTP server); the assertions are that nothing
exists outside the destination, nothing half-extracted is left inside it, and the error
is one line with exit code 1.
"""

from __future__ import annotations

import hashlib
import io
import os
import stat
import tarfile
import threading
import zipfile
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpu_trace.cli import app
from gpu_trace.datasets import MIRROR_ENV, DataFile, Dataset, registry
from gpu_trace.datasets.extract import (
    MAX_EXTRACT_BYTES,
    MIN_EXTRACT_BYTES,
    ArchiveTooLarge,
    ExtractLimits,
    UnsafeArchive,
    extract_tar,
    extract_zip,
)
from gpu_trace.errors import DatasetError

runner = CliRunner()
SYMLINK = 0o120777 << 16
CHAIN = [("a", "."), ("a/c", "."), ("a/c/d", "."), ("a/c/d/b", "../../../PWNED.txt")]
"""Each ``x -> .`` is harmless read as text, but ``a/c/d`` is the destination itself,
so ``a/c/d/b`` (that is, ``b``) points three levels above it."""


# ---------------------------------------------------------------------- builders


def zip_of(members: list[tuple[str, bytes, int]]) -> bytes:
    """(name, data, external_attr) members; attr 0 = a plain file."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data, attr in members:
            info = zipfile.ZipInfo(name)
            info.create_system = 3
            info.external_attr = attr
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    return buf.getvalue()


def chain_zip() -> bytes:
    return zip_of([(n, t.encode(), SYMLINK) for n, t in CHAIN] + [("b", b"pwned\n", 0)])


def tar_of(members: list[tarfile.TarInfo | tuple[str, bytes]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for m in members:
            if isinstance(m, tarfile.TarInfo):
                tar.addfile(m)
            else:
                info = tarfile.TarInfo(m[0])
                info.size = len(m[1])
                tar.addfile(info, io.BytesIO(m[1]))
    return buf.getvalue()


def symlink(name: str, target: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.SYMTYPE
    info.linkname = target
    return info


def everything(root: Path) -> set[str]:
    """Every path under ``root`` (links not followed), relative, as text."""
    out: set[str] = set()
    for here, dirs, files in os.walk(root):
        for n in dirs + files:
            out.add(str((Path(here) / n).relative_to(root)))
    return out


def write(tmp_path: Path, name: str, data: bytes) -> tuple[Path, Path]:
    """The archive at ``tmp_path/name`` and an empty destination three levels down (so
    a three-level climb still lands inside ``tmp_path``, where the test can see it)."""
    archive = tmp_path / name
    archive.write_bytes(data)
    into = tmp_path / "x" / "y" / "dest"
    into.mkdir(parents=True)
    return archive, into


# -------------------------------------------------------------- public functions


def test_zip_symlink_chain_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    archive, into = write(tmp_path, "data.zip", chain_zip())
    with pytest.raises(UnsafeArchive) as info:
        extract_zip(archive, into)
    assert str(info.value) == (
        f"{archive}: refusing to extract member 'a': symlink to '.' "
        "(links are refused in zip archives)"
    )
    assert everything(tmp_path) == {"data.zip", "x", "x/y", "x/y/dest"}


def test_tar_symlink_chain_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    members: list[tarfile.TarInfo | tuple[str, bytes]] = [symlink(n, t) for n, t in CHAIN]
    archive, into = write(tmp_path, "t.tar.gz", tar_of([*members, ("b", b"pwned\n")]))
    with pytest.raises(DatasetError, match=r"refusing to extract") as info:
        extract_tar(archive, into)
    assert "\n" not in str(info.value)
    assert everything(tmp_path) == {"t.tar.gz", "x", "x/y", "x/y/dest"}


@pytest.mark.parametrize(
    ("member", "attr", "reason"),
    [
        ("dev", (stat.S_IFCHR | 0o644) << 16, "device, fifo or socket member"),
        ("fifo", (stat.S_IFIFO | 0o644) << 16, "device, fifo or socket member"),
        ("sock", (stat.S_IFSOCK | 0o644) << 16, "device, fifo or socket member"),
        ("inside", SYMLINK, "symlink to 'ok.csv' (links are refused in zip archives)"),
        ("up", SYMLINK, "symlink points outside the destination (../../x)"),
        ("/etc/evil", 0, "absolute path"),
        ("C:/evil", 0, "absolute path"),
        ("C:evil", 0, "absolute path"),
        ("\\\\server\\share\\evil", 0, "absolute path"),
        ("sub\\..\\..\\evil", 0, "backslash in the name"),
        ("a\\b", 0, "backslash in the name"),
        ("../evil", 0, "path escapes the destination (..)"),
        ("a/../../evil", 0, "path escapes the destination (..)"),
    ],
)
def test_zip_special_members_and_names_are_refused(
    tmp_path: Path, member: str, attr: int, reason: str
) -> None:
    target = {"inside": b"ok.csv", "up": b"../../x"}.get(member, b"x")
    data = zip_of([("ok.csv", b"1\n", 0), (member, target, attr)])
    archive, into = write(tmp_path, "z.zip", data)
    with pytest.raises(UnsafeArchive) as info:
        extract_zip(archive, into)
    assert str(info.value) == f"{archive}: refusing to extract member {member!r}: {reason}"
    assert everything(tmp_path) == {"z.zip", "x", "x/y", "x/y/dest"}


def special(name: str, kind: bytes) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    return info


@pytest.mark.parametrize(
    ("member", "reason"),
    [
        (special("dev", tarfile.CHRTYPE), "device or fifo member"),
        (special("fifo", tarfile.FIFOTYPE), "device or fifo member"),
        (("a\\b", b"x"), "backslash in the name"),
        (("C:/evil", b"x"), "absolute path"),
        (("x" * 1100, b"x"), "NUL byte or over-long name"),
        (symlink("abs", "/etc/passwd"), "symlink to an absolute path (/etc/passwd)"),
        (symlink("up", "../x"), "symlink points outside the destination (../x)"),
    ],
)
def test_tar_special_members_and_names_are_refused(
    tmp_path: Path, member: tarfile.TarInfo | tuple[str, bytes], reason: str
) -> None:
    archive, into = write(tmp_path, "t.tar.gz", tar_of([("ok.csv", b"1\n"), member]))
    name = member.name if isinstance(member, tarfile.TarInfo) else member[0]
    with pytest.raises(UnsafeArchive) as info:
        extract_tar(archive, into)
    assert str(info.value) == f"{archive}: refusing to extract member {name!r}: {reason}"
    assert everything(tmp_path) == {"t.tar.gz", "x", "x/y", "x/y/dest"}  # ok.csv removed


def test_writes_are_resolved_against_the_real_destination(tmp_path: Path) -> None:
    """Second line of defence: a link already in the destination (planted by anything)
    is resolved before each write, so a plain member name cannot write through it."""
    outside = tmp_path / "outside"
    outside.mkdir()
    for name, data in (
        ("z.zip", zip_of([("sub/x.csv", b"1\n", 0)])),
        ("t.tar.gz", tar_of([("sub/x.csv", b"1\n")])),
    ):
        archive = tmp_path / name
        archive.write_bytes(data)
        into = tmp_path / f"dest-{name}"
        into.mkdir()
        (into / "sub").symlink_to(outside)
        extract = extract_zip if name.endswith(".zip") else extract_tar
        with pytest.raises(DatasetError) as info:
            extract(archive, into)
        assert "'sub/x.csv'" in str(info.value) and "\n" not in str(info.value)
        assert list(outside.iterdir()) == []
        assert list(into.iterdir()) == []  # the output (here: the planted link) is removed


def test_default_limits_are_a_multiple_of_the_known_size() -> None:
    # 40 x the published size; at least 64 MiB; at most 64 GiB; an explicit cap wins.
    philly = 1_055_988_361
    assert ExtractLimits.for_archive(philly, philly).max_total_bytes == 42_239_534_440
    assert ExtractLimits.for_archive(36_400_000).max_total_bytes == 1_456_000_000
    assert ExtractLimits.for_archive(300_000).max_total_bytes == MIN_EXTRACT_BYTES == 67_108_864
    assert ExtractLimits.for_archive(10**12).max_total_bytes == MAX_EXTRACT_BYTES == 64 * 1024**3
    assert ExtractLimits.for_archive(300_000, None, 1000).max_total_bytes == 1000
    # The published size counts, not what a mirror sent.
    assert ExtractLimits.for_archive(10, 1_000_000_000).max_total_bytes == 40_000_000_000
    assert ExtractLimits(1000).member_cap == 1000
    assert ExtractLimits(1000, 10).member_cap == 10


ZEROS = b"\x00" * 2_000_000
"""2 MB of zeros compress to about 2 kB: a bomb at 1000x, with a 1 MB cap."""


def test_zip_bomb_total_and_member_caps(tmp_path: Path) -> None:
    data = zip_of([("small.csv", b"1\n", 0), ("data/big.csv", ZEROS, 0)])
    archive, into = write(tmp_path, "z.zip", data)
    assert archive.stat().st_size < 20_000
    with pytest.raises(ArchiveTooLarge) as info:
        extract_zip(archive, into, limits=ExtractLimits(max_total_bytes=1_000_000))
    assert str(info.value) == (
        f"{archive}: member 'data/big.csv' expands past 1000000 bytes (the per-member "
        "extraction cap); nothing was extracted (see --max-extract-bytes)"
    )
    assert list(into.iterdir()) == []
    # Two members of 600 kB each pass a 1 MB member cap but not a 1 MB total.
    two = zip_of([("a.csv", ZEROS[:600_000], 0), ("b.csv", ZEROS[:600_000], 0)])
    archive.write_bytes(two)
    with pytest.raises(ArchiveTooLarge, match=r"expands past 1000000 bytes .* member 'b.csv'"):
        extract_zip(archive, into, limits=ExtractLimits(max_total_bytes=1_000_000))
    assert list(into.iterdir()) == []
    with pytest.raises(ArchiveTooLarge, match=r"member 'a.csv' expands past 500000 bytes"):
        extract_zip(archive, into, limits=ExtractLimits(10_000_000, 500_000))
    assert list(into.iterdir()) == []
    with pytest.raises(ArchiveTooLarge, match=r"more than 1 members \(at 'b.csv'\)"):
        extract_zip(archive, into, limits=ExtractLimits(10_000_000, max_members=1))
    assert extract_zip(archive, into, limits=ExtractLimits(1_200_000)) == ["a.csv", "b.csv"]
    assert (into / "b.csv").stat().st_size == 600_000


def test_tar_bomb_is_counted_while_streaming_and_leaves_nothing(tmp_path: Path) -> None:
    data = tar_of([("ok.csv", b"1\n"), ("t/big.csv", ZEROS)])
    archive, into = write(tmp_path, "t.tar.gz", data)
    assert archive.stat().st_size < 20_000
    with pytest.raises(ArchiveTooLarge) as info:
        extract_tar(archive, into, limits=ExtractLimits(max_total_bytes=1_000_000))
    assert str(info.value) == (
        f"{archive}: member 't/big.csv' expands past 1000000 bytes (the per-member "
        "extraction cap); nothing was extracted (see --max-extract-bytes)"
    )
    assert list(into.iterdir()) == []  # ok.csv, written first, is gone too
    assert extract_tar(archive, into, limits=ExtractLimits(2_000_002)) == ["ok.csv", "t/big.csv"]
    assert (into / "t" / "big.csv").read_bytes() == ZEROS


# ------------------------------------------------------------ the real CLI path


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = self.server.files.get(self.path)  # type: ignore[attr-defined]
        if body is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def mirror(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, dict[str, bytes]]]:
    """A loopback HTTP server serving ``files`` (path -> body); no proxy, no env mirror."""
    monkeypatch.delenv(MIRROR_ENV, raising=False)
    for var in ("http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
        monkeypatch.delenv(var.upper(), raising=False)
    monkeypatch.setenv("no_proxy", "*")
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    files: dict[str, bytes] = {}
    httpd.files = files  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", files
    httpd.shutdown()
    httpd.server_close()


def fetch_cli(*args: str) -> tuple[int, list[str]]:
    """Exit code and the ``error:`` lines of stderr (an unpinned download is preceded by
    its "unverified" warning); the error, if any, must be the last line."""
    result = runner.invoke(app, ["datasets", "fetch", *args])
    lines = result.stderr.strip().splitlines()
    errors = [line for line in lines if line.startswith("error:")]
    assert "Traceback" not in result.output
    assert not errors or lines[-1] == errors[-1]
    return result.exit_code, errors


def test_cli_helios_mirror_with_a_link_chain(
    mirror: tuple[str, dict[str, bytes]], tmp_path: Path
) -> None:
    base, files = mirror
    files["/helios/data.zip"] = chain_zip()
    dest = tmp_path / "p" / "raw"  # helios' temporary folder is dest/helios/.extract-...
    code, lines = fetch_cli("helios", "--dest", str(dest), "--mirror", base)
    assert code == 1
    assert len(lines) == 1, lines
    assert lines[0] == (
        f"error: {dest}/helios/data.zip: refusing to extract member 'a': symlink to '.' "
        "(links are refused in zip archives); the unverified download was deleted"
    )
    # Nothing anywhere but the (now empty) record of verified files.
    assert everything(tmp_path) == {
        "p",
        "p/raw",
        "p/raw/helios",
        "p/raw/helios/.gpu-trace-datasets.json",
    }


def test_cli_zip_bomb_from_a_mirror_is_capped(
    mirror: tuple[str, dict[str, bytes]], tmp_path: Path
) -> None:
    base, files = mirror
    files["/helios/data.zip"] = zip_of(
        [("data/Venus/cluster_gpu_number.csv", b"a\n", 0), ("data/Venus/cluster_log.csv", ZEROS, 0)]
    )
    dest = tmp_path / "raw"
    code, lines = fetch_cli(
        "helios", "--dest", str(dest), "--mirror", base, "--max-extract-bytes", "1M"
    )
    assert code == 1 and len(lines) == 1, lines
    assert lines[0] == (
        f"error: {dest}/helios/data.zip: member 'data/Venus/cluster_log.csv' expands past "
        "1000000 bytes (the per-member extraction cap); nothing was extracted (see "
        "--max-extract-bytes); the unverified download was deleted"
    )
    assert sorted(p.name for p in (dest / "helios").iterdir()) == [".gpu-trace-datasets.json"]
    code, lines = fetch_cli(
        "helios", "--dest", str(dest), "--mirror", base, "--max-extract-bytes", "nope"
    )
    assert code == 2 and lines == ["error: 'nope' is not a size (e.g. 500M, 2G, 100000)"]


def test_cli_tar_bomb_keeps_the_pinned_archive_only(
    mirror: tuple[str, dict[str, bytes]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base, files = mirror
    body = tar_of([("ok.csv", b"1\n"), ("big.csv", ZEROS)])
    files["/toy/t.tar.gz"] = body
    sha = hashlib.sha256(body).hexdigest()
    f = DataFile(
        "t.tar.gz", ("https://example.invalid/t.tar.gz",), len(body), sha, "test", "tar.gz"
    )
    ds = Dataset("toy", "Toy", "https://example.invalid", "CC0", "", "Nobody", (f,))
    monkeypatch.setitem(registry(), "toy", ds)
    dest = tmp_path / "raw"
    args = ("toy", "--dest", str(dest), "--mirror", base)
    code, lines = fetch_cli(*args, "--max-extract-bytes", "1M")
    assert code == 1 and len(lines) == 1, lines
    assert lines[0].startswith(f"error: {dest}/toy/t.tar.gz: member 'big.csv' expands past 1000000")
    # The archive matches its published checksum, so it stays; nothing was extracted.
    assert sorted(p.name for p in (dest / "toy").iterdir()) == [
        ".gpu-trace-datasets.json",
        "t.tar.gz",
    ]
    code, lines = fetch_cli(*args, "--max-extract-bytes", "3M")
    assert code == 0, lines
    assert (dest / "toy" / "big.csv").stat().st_size == 2_000_000
