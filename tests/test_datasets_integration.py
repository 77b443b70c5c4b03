"""``fetch`` / ``verify`` / ``status`` against a real HTTP server on 127.0.0.1.

Resume, retries, checksum discards, hand-placed files, unpinned files, archive
extraction and its refusals, and offline errors, through the library functions. Every
file served is built here (``tests/datasets_common.py``) and every expected checksum is
computed with hashlib. No request leaves the loopback interface: the tests build their
own :class:`Dataset` pointing at the server, or pass it as ``mirror``.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpu_trace.datasets import Member, Status, UnsafeArchive, fetch, status, verify
from gpu_trace.errors import DatasetError
from tests.datasets_common import (
    Server,
    dataset,
    link,
    loopback_server,
    no_mirror_no_proxy,
    payload,
    sha,
    tar_gz,
    zip_bytes,
)


@pytest.fixture
def server() -> Iterator[Server]:
    """A loopback HTTP server (:func:`tests.datasets_common.loopback_server`)."""
    yield from loopback_server()


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """No mirror or proxy from the environment (:func:`~tests.datasets_common.no_mirror_no_proxy`)."""
    no_mirror_no_proxy(monkeypatch)


def test_interrupted_download_resumes_with_range(server: Server, tmp_path: Path) -> None:
    """A connection dropped after 100,000 of 300,000 bytes keeps the .part (nothing placed,
    status partial); the next fetch asks for ``bytes=100000-`` and places the whole file."""
    body = payload(300_000)
    ds = dataset(server, {"blob.bin": body})
    server.files["/toy/blob.bin"].faults.append(("drop", 100_000))
    with pytest.raises(DatasetError, match=r"interrupted at byte 100000 of 300000"):
        fetch(ds, tmp_path, retries=0, backoff_s=0)
    part = tmp_path / "toy" / "blob.bin.part"
    assert part.read_bytes() == body[:100_000]
    assert not (tmp_path / "toy" / "blob.bin").exists()
    assert status(ds, tmp_path).status is Status.partial

    (result,) = fetch(ds, tmp_path, retries=0, backoff_s=0)
    assert server.requests[-1] == ("/toy/blob.bin", "bytes=100000-")
    assert result.downloaded and result.resumed_from == 100_000
    assert (tmp_path / "toy" / "blob.bin").read_bytes() == body
    assert not part.exists()
    assert result.sha256 == sha(body) and result.status is Status.verified
    assert status(ds, tmp_path).status is Status.verified


def test_stalled_download_retries_and_resumes(server: Server, tmp_path: Path) -> None:
    """A server that goes silent after 50,000 bytes times out (0.5 s) and the automatic retry
    resumes from byte 50,000."""
    body = payload(200_000, seed=3)
    ds = dataset(server, {"blob.bin": body})
    server.files["/toy/blob.bin"].faults.append(("stall", 50_000))
    server.stall_s = 3.0
    (result,) = fetch(ds, tmp_path, timeout_s=0.5, retries=2, backoff_s=0)
    assert [r for _, r in server.requests] == [None, "bytes=50000-"]
    assert result.resumed_from == 50_000
    assert (tmp_path / "toy" / "blob.bin").read_bytes() == body


def test_server_ignoring_range_starts_over(server: Server, tmp_path: Path) -> None:
    """A server that answers a Range request with the whole file (200) is handled by starting
    over: nothing counts as resumed and the bytes are right."""
    body = payload(120_000, seed=5)
    ds = dataset(server, {"blob.bin": body})
    spec = server.files["/toy/blob.bin"]
    spec.ignore_range = True
    spec.faults.append(("drop", 40_000))
    (result,) = fetch(ds, tmp_path, retries=1, backoff_s=0)
    assert [r for _, r in server.requests] == [None, "bytes=40000-"]
    assert result.resumed_from == 0
    assert (tmp_path / "toy" / "blob.bin").read_bytes() == body


def test_checksum_mismatch_is_discarded_not_moved(server: Server, tmp_path: Path) -> None:
    """A download with one wrong byte (sha256) or five extra bytes (size: 50,000 + 5) is
    deleted, .part included: nothing is placed."""
    body = payload(50_000)
    ds = dataset(server, {"blob.bin": body})
    server.files["/toy/blob.bin"].body = body[:-1] + b"\x00"
    with pytest.raises(DatasetError, match=r"sha256 mismatch .* the download was discarded"):
        fetch(ds, tmp_path, retries=0)
    assert not (tmp_path / "toy" / "blob.bin").exists()
    assert not (tmp_path / "toy" / "blob.bin.part").exists()
    server.files["/toy/blob.bin"].body = body + b"extra"
    with pytest.raises(DatasetError, match=r"size mismatch \(expected 50000, got 50005\)"):
        fetch(ds, tmp_path, retries=0)
    assert not (tmp_path / "toy" / "blob.bin").exists()


def test_file_placed_by_hand_is_checked_not_overwritten(server: Server, tmp_path: Path) -> None:
    """A file placed by hand that does not match is refused and left as it is; one that
    matches is adopted as verified without a single request."""
    body = payload(1_000)
    ds = dataset(server, {"blob.bin": body})
    (tmp_path / "toy").mkdir()
    (tmp_path / "toy" / "blob.bin").write_bytes(b"mine")
    with pytest.raises(DatasetError, match="exists but does not match the registry"):
        fetch(ds, tmp_path)
    assert (tmp_path / "toy" / "blob.bin").read_bytes() == b"mine"
    (tmp_path / "toy" / "blob.bin").write_bytes(body)
    (result,) = fetch(ds, tmp_path)
    assert not result.downloaded and result.status is Status.verified
    assert server.requests == []


def test_unpinned_file_warns_and_records_its_sha(server: Server, tmp_path: Path) -> None:
    """A file with no published checksum is fetched with one warning naming its sha256, which
    is recorded and lets verify detect a later change."""
    body = payload(5_000)
    ds = dataset(server, {"data.bin": body}, name="loose", pinned=False)
    notes: list[str] = []
    (result,) = fetch(ds, tmp_path, notify=notes.append)
    assert result.status is Status.unverified
    assert len(notes) == 1 and "unverified" in notes[0] and sha(body) in notes[0]
    record = json.loads((tmp_path / "loose" / ".gpu-trace-datasets.json").read_text())
    assert record["files"]["data.bin"]["sha256"] == sha(body)
    assert record["files"]["data.bin"]["checked"] == "recorded"
    assert status(ds, tmp_path).status is Status.unverified
    assert [c.result for c in verify(ds, tmp_path)] == ["ok (unpinned)"]
    (tmp_path / "loose" / "data.bin").write_bytes(body[:-1] + b"!")
    (check,) = verify(ds, tmp_path)
    assert not check.ok and check.result == "mismatch" and check.expected == sha(body)


def test_safe_tar_and_zip_extract_and_verify(server: Server, tmp_path: Path) -> None:
    """Tar (with an in-archive symlink) and zip archives are extracted and their pinned members
    checked, a missing unpinned member is a warning; the next fetch re-extracts a damaged
    member without downloading; a zip holding a link is refused."""
    csv = b"a,b\n1,2\n"
    archive = tar_gz([("./t/x.csv", csv), ("t/y.csv", b"y\n"), link("t/alias.csv", "x.csv")])
    ds = dataset(
        server,
        {"t.tar.gz": archive},
        extract="tar.gz",
        contents=(Member("t/x.csv", sha(csv), len(csv)), Member("t/missing.csv")),
    )
    notes: list[str] = []
    (result,) = fetch(ds, tmp_path, notify=notes.append)
    folder = tmp_path / "toy"
    assert sorted(result.extracted) == ["t/x.csv", "t/y.csv"]
    assert (folder / "t" / "x.csv").read_bytes() == csv
    assert (folder / "t" / "alias.csv").is_symlink()
    assert (folder / "t" / "alias.csv").read_bytes() == csv
    assert notes and "t/missing.csv" in notes[0]
    assert not any(p.name.startswith(".extract-") for p in folder.iterdir())
    assert status(ds, tmp_path).status is Status.verified
    assert {c.path: c.result for c in verify(ds, tmp_path)} == {
        "t.tar.gz": "ok",
        "t/x.csv": "ok",
        "t/y.csv": "ok (size)",
    }
    (folder / "t" / "x.csv").write_bytes(b"a,b\n1,3\n")
    bad = [c for c in verify(ds, tmp_path) if not c.ok]
    assert [(c.path, c.result) for c in bad] == [("t/x.csv", "mismatch")]
    # Fetch again: the archive is not downloaded, but the damaged member is re-extracted.
    requests = len(server.requests)
    fetch(ds, tmp_path)
    assert len(server.requests) == requests
    assert (folder / "t" / "x.csv").read_bytes() == csv

    zipped = zip_bytes([("data/Venus/log.csv", csv, False), ("data/Venus/", b"", False)])
    zds = dataset(server, {"data.zip": zipped}, name="zipped", extract="zip")
    (zres,) = fetch(zds, tmp_path)
    assert zres.extracted == ("data/Venus/log.csv",)
    assert (tmp_path / "zipped" / "data" / "Venus" / "log.csv").read_bytes() == csv
    # Links in zips are refused, even ones that stay inside (tests/test_extract_hardening.py).
    linked = zip_bytes([("data/Venus/log.csv", csv, False), ("data/ln", "Venus/log.csv", True)])
    lds = dataset(server, {"data.zip": linked}, name="linked", extract="zip")
    with pytest.raises(UnsafeArchive, match=r"'data/ln': symlink to 'Venus/log.csv'"):
        fetch(lds, tmp_path)


def test_no_extract_then_extract_without_downloading(server: Server, tmp_path: Path) -> None:
    """``extract=False`` places the archive only (``not extracted``); a later fetch extracts
    it without downloading again (one request in all)."""
    csv = b"m,1\n"
    archive = tar_gz([("pai_machine_spec.csv", csv)])
    ds = dataset(
        server,
        {"spec.tar.gz": archive},
        extract="tar.gz",
        contents=(Member("pai_machine_spec.csv", sha(csv), len(csv)),),
    )
    (first,) = fetch(ds, tmp_path, extract=False)
    assert first.extracted == () and not (tmp_path / "toy" / "pai_machine_spec.csv").exists()
    assert status(ds, tmp_path).files[0].detail == "not extracted"
    assert [(c.path, c.ok, c.result) for c in verify(ds, tmp_path)] == [
        ("spec.tar.gz", True, "ok"),
        ("pai_machine_spec.csv", True, "not extracted"),
    ]
    (second,) = fetch(ds, tmp_path)
    assert not second.downloaded and second.extracted == ("pai_machine_spec.csv",)
    assert len(server.requests) == 1
    assert (tmp_path / "toy" / "pai_machine_spec.csv").read_bytes() == csv


def test_pinned_member_mismatch_extracts_nothing(server: Server, tmp_path: Path) -> None:
    """A member whose sha256 is not the registry's aborts the extraction: only the archive
    and the record are left in the folder."""
    archive = tar_gz([("pai_job_table.csv", b"1,2\n")])
    ds = dataset(
        server,
        {"pai_job_table.tar.gz": archive},
        extract="tar.gz",
        contents=(Member("pai_job_table.csv", sha(b"other")),),
    )
    with pytest.raises(DatasetError, match=r"member 'pai_job_table.csv' sha256 mismatch"):
        fetch(ds, tmp_path)
    assert not (tmp_path / "toy" / "pai_job_table.csv").exists()
    assert sorted(p.name for p in (tmp_path / "toy").iterdir()) == [
        ".gpu-trace-datasets.json",
        "pai_job_table.tar.gz",
    ]


@pytest.mark.parametrize(
    ("archive", "kind", "member", "reason"),
    [
        (tar_gz([("ok.csv", b"1\n"), ("../evil", b"x")]), "tar.gz", "../evil", "escapes"),
        (tar_gz([("a/../../evil", b"x")]), "tar.gz", "a/../../evil", "escapes"),
        (tar_gz([("/tmp/evil-abs", b"x")]), "tar.gz", "/tmp/evil-abs", "absolute path"),
        (tar_gz([link("up", "../../outside")]), "tar.gz", "up", "symlink points outside"),
        (tar_gz([link("etc", "/etc/passwd")]), "tar.gz", "etc", "symlink to an absolute"),
        (tar_gz([link("hard", "../outside", hard=True)]), "tar.gz", "hard", "hardlink points"),
        (zip_bytes([("/abs/evil.csv", b"x", False)]), "zip", "/abs/evil.csv", "absolute path"),
        (zip_bytes([("../evil.csv", b"x", False)]), "zip", "../evil.csv", "escapes"),
        (zip_bytes([("ln", "../../outside", True)]), "zip", "ln", "symlink points outside"),
        (zip_bytes([("x.zip", b"x", False)]), "zip", "x.zip", "would overwrite"),
    ],
    # The archive bytes hold gzip's mtime: left in the id, they would change every second.
    ids=lambda value: "archive" if isinstance(value, bytes) else None,
)
def test_unsafe_archives_are_refused(
    server: Server, tmp_path: Path, archive: bytes, kind: str, member: str, reason: str
) -> None:
    """Each escaping, absolute, linked-out or reserved member is refused in one line naming
    it; nothing lands outside the destination, and only the archive and the record are
    left inside it."""
    dest = tmp_path / "dest"
    ds = dataset(server, {f"x.{kind}": archive}, extract=kind)
    with pytest.raises(UnsafeArchive) as info:
        fetch(ds, dest)
    message = str(info.value)
    assert f"refusing to extract member {member!r}" in message and reason in message
    assert "\n" not in message
    assert not (tmp_path / "evil").exists() and not (dest / "evil").exists()
    assert sorted(p.name for p in (dest / "toy").iterdir()) == [
        ".gpu-trace-datasets.json",
        f"x.{kind}",
    ]


def test_corrupt_archive_is_a_one_line_error(server: Server, tmp_path: Path) -> None:
    """Bytes that are not a readable tar.gz or zip give one line naming the archive."""
    junk = b"\x1f\x8b\x08\x00" + payload(500)
    ds = dataset(server, {"x.tar.gz": junk}, extract="tar.gz")
    with pytest.raises(DatasetError, match=r"x\.tar\.gz: not a readable tar\.gz archive"):
        fetch(ds, tmp_path)
    zds = dataset(server, {"x.zip": junk}, name="z", extract="zip")
    with pytest.raises(DatasetError, match=r"x\.zip: not a readable zip archive"):
        fetch(zds, tmp_path)


def test_offline_timeout_and_dns_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A host that accepts connections but never answers gives ``cannot reach HOST: … timed
    out … (offline?)`` after the given timeout on each of retries + 1 connections; a DNS
    failure is not retried and says so."""
    # The connections are counted with their timeouts (http.client opens each through
    # socket.create_connection(address, timeout)), not timed: a wall-clock bound fails on
    # a busy machine, and proves less than the timeout each connection was given.
    opened: list[object] = []
    create = socket.create_connection

    def counted(address: object, timeout: object = None, *args: object, **kw: object) -> object:
        opened.append(timeout)
        return create(address, timeout, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "create_connection", counted)
    with socket.socket() as silent:  # accepts connections (backlog) but never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        host = f"127.0.0.1:{silent.getsockname()[1]}"
        with pytest.raises(
            DatasetError, match=rf"^cannot reach {host}: .*timed out.*\(offline\?\)$"
        ):
            fetch("openb", tmp_path, mirror=f"http://{host}", timeout_s=0.2, retries=1, backoff_s=0)
    assert opened == [0.2, 0.2]
    monkeypatch.setattr(socket, "create_connection", create)

    def no_dns(*args: object, **kwargs: object) -> None:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    with pytest.raises(DatasetError) as info:
        fetch("openb", tmp_path, mirror="http://mirror.invalid", retries=3)
    assert str(info.value) == (
        f"cannot reach mirror.invalid: [Errno {socket.EAI_NONAME}] Name or service not known "
        "(offline?)"
    )
