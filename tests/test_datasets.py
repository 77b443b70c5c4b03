"""The dataset registry and fetcher against a real HTTP server on 127.0.0.1.

The server (``http.server`` in a thread) supports ``Range``, can drop or stall a
response mid-way and can serve wrong bytes; every file it serves is built here (or is a
bundled upstream sample), and every expected checksum is computed here with hashlib.
No request leaves the loopback interface: the registry's official URLs are replaced by
the server's through ``--mirror`` / ``GPU_TRACE_DATASETS_MIRROR``, or tests build
their own :class:`Dataset` pointing at it.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
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
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpu_trace.cli import app
from gpu_trace.datasets import (
    MIRROR_ENV,
    DataFile,
    Dataset,
    Member,
    Status,
    UnsafeArchive,
    fetch,
    get,
    registry,
    resolve_urls,
    status,
    verify,
)
from gpu_trace.errors import DatasetError
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
    return hashlib.sha256(data).hexdigest()


# ----------------------------------------------------------------- loopback server


@dataclass
class Served:
    body: bytes
    faults: list[tuple[str, int]] = field(default_factory=list)
    """One fault per request, in order: ("drop", n) sends n bytes then closes;
    ("stall", n) sends n bytes then goes silent for ``Server.stall_s``."""
    ignore_range: bool = False


@dataclass
class Server:
    base: str
    files: dict[str, Served] = field(default_factory=dict)
    requests: list[tuple[str, str | None]] = field(default_factory=list)
    stall_s: float = 1.0

    def serve(self, path: str, body: bytes, **kw: object) -> Served:
        spec = Served(body, **kw)  # type: ignore[arg-type]
        self.files[path] = spec
        return spec


class Handler(BaseHTTPRequestHandler):
    server: ThreadingHTTPServer

    def do_GET(self) -> None:
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
        pass


@pytest.fixture
def server() -> Iterator[Server]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    state = Server(f"http://127.0.0.1:{httpd.server_address[1]}")
    httpd.state = state  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    yield state
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """No mirror from the environment, and no proxy that would carry loopback requests
    off this machine (urllib honours ``*_proxy`` variables)."""
    monkeypatch.delenv(MIRROR_ENV, raising=False)
    for var in ("http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
        monkeypatch.delenv(var.upper(), raising=False)
    monkeypatch.setenv("no_proxy", "*")


def unused_port() -> int:
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


def payload(n: int, seed: int = 0) -> bytes:
    return bytes((i * 7 + seed) % 251 for i in range(n))


# ------------------------------------------------------------------------ registry


def test_registry_carries_the_published_numbers() -> None:
    reg = registry()
    assert list(reg) == ["philly", "helios", "pai2020", "openb", "acme"]
    philly = reg["philly"].file("trace-data.tar.gz")
    assert philly.size == 1_055_988_361
    assert philly.sha256 == "2037ccf63a725a02be718b0e1aeee6142c90b7f62d0d849295120e9f6ba13d2c"
    assert (
        philly.urls[0] == "https://github.com/msr-fiddle/philly-traces/raw/master/trace-data.tar.gz"
    )
    helios = reg["helios"].file("data.zip")
    assert helios.sha256 is None and helios.size is None and not helios.verifiable
    assert helios.urls == ("https://github.com/S-Lab-System-Group/HeliosData/raw/master/data.zip",)
    tarballs = [f for f in reg["pai2020"].files if f.extract == "tar.gz"]
    assert len(tarballs) == 7
    assert all(
        f.urls[0] == f"https://aliopentrace.oss-cn-beijing.aliyuncs.com/v2020GPUTraces/{f.name}"
        for f in tarballs
    )
    job = reg["pai2020"].file("pai_job_table.tar.gz")
    assert job.sha256 == "5aad7f7caac501136d14ed6a48e40546f825d7b0617a3a4f337e2348fe0a6cb0"
    assert job.contents == (
        Member(
            "pai_job_table.csv",
            "379ecb3becaba347f44a53bf7eb53e54b185221b2a0338a3f828828d269ba96c",
        ),
    )
    acme = reg["acme"]
    # upstream publishes no sizes or checksums for the job traces: unverified downloads
    assert [f.name for f in acme.files] == ["trace_seren.csv", "trace_kalos.csv"]
    assert all(f.sha256 is None and f.size is None and not f.verifiable for f in acme.files)
    assert acme.file("trace_kalos.csv").urls[0] == (
        "https://raw.githubusercontent.com/InternLM/AcmeTrace/master/data/job_trace/trace_kalos.csv"
    )
    for ds in reg.values():
        assert ds.license and ds.citation and ds.homepage.startswith("https://")
        assert all(u.startswith("https://") for f in ds.files for u in f.urls)


def test_registry_checksums_match_the_bundled_upstream_copies() -> None:
    openb = get("openb")
    assert [f.name for f in openb.files] == list(OPENB_FILES)
    for name in OPENB_FILES:
        data = (SAMPLES / "openb" / name).read_bytes()
        f = openb.file(name)
        assert (f.size, f.sha256) == (len(data), sha(data))
        assert f.urls[0] == (
            "https://raw.githubusercontent.com/alibaba/clusterdata/master/"
            f"cluster-trace-gpu-v2023/csv/{name}"
        )
    pai = get("pai2020")
    headers = sorted((SAMPLES / "pai2020" / "headers").glob("*.header"))
    assert len(headers) == 7
    for h in headers:
        f = pai.file(h.name)
        data = h.read_bytes()
        assert (f.size, f.sha256) == (len(data), sha(data))
    spec = pai.file("pai_machine_spec.tar.gz").contents[0]
    data = (SAMPLES / "pai2020" / "pai_machine_spec.csv").read_bytes()
    assert (spec.path, spec.size, spec.sha256) == ("pai_machine_spec.csv", len(data), sha(data))


def test_mirror_replaces_scheme_host_and_path(monkeypatch: pytest.MonkeyPatch) -> None:
    ds = get("openb")
    f = ds.files[0]
    assert resolve_urls(ds, f) == f.urls
    assert resolve_urls(ds, f, "http://mirror.local/traces/") == (
        f"http://mirror.local/traces/openb/{f.name}",
    )
    monkeypatch.setenv(MIRROR_ENV, "https://proxy.example/raw")
    assert resolve_urls(ds, f) == (f"https://proxy.example/raw/openb/{f.name}",)
    with pytest.raises(DatasetError, match="must be an http"):
        resolve_urls(ds, f, "ftp://x")


# --------------------------------------------------------------- fetch and verify


def serve_openb(server: Server, corrupt: str | None = None) -> None:
    for name in OPENB_FILES:
        data = (SAMPLES / "openb" / name).read_bytes()
        if name == corrupt:
            data = data[:-2] + b"9\n"
        server.serve(f"/openb/{name}", data)


def test_cli_fetch_verify_list_openb_from_a_mirror(server: Server, tmp_path: Path) -> None:
    serve_openb(server)
    dest = tmp_path / "raw"
    result = runner.invoke(
        app, ["datasets", "fetch", "openb", "--dest", str(dest), "--mirror", server.base]
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.split() == [str(dest / "openb" / n) for n in OPENB_FILES]
    for name in OPENB_FILES:
        assert (dest / "openb" / name).read_bytes() == (SAMPLES / "openb" / name).read_bytes()
        assert not (dest / "openb" / (name + ".part")).exists()
    assert "5 downloaded, 0 already in place" in result.stderr
    assert f"gpu-trace ingest openb {dest / 'openb'}" in result.stderr
    assert sorted(p for p, _ in server.requests) == sorted(f"/openb/{n}" for n in OPENB_FILES)

    # Already verified: nothing is requested again (the mirror comes from the env now).
    before = len(server.requests)
    again = runner.invoke(
        app, ["datasets", "fetch", "openb", "--dest", str(dest)], env={MIRROR_ENV: server.base}
    )
    assert again.exit_code == 0, again.output
    assert len(server.requests) == before
    assert "0 downloaded, 5 already in place" in again.stderr

    checked = runner.invoke(app, ["datasets", "verify", "openb", "--dest", str(dest)])
    assert checked.exit_code == 0, checked.output
    lines = checked.stdout.splitlines()[1:]
    assert len(lines) == 5 and all(line.split()[0] == "ok" for line in lines)
    default = (SAMPLES / "openb" / "openb_pod_list_default.csv").read_bytes()
    assert re.search(rf"^ok +openb_pod_list_default\.csv +{sha(default)}$", checked.stdout, re.M)

    listed = runner.invoke(app, ["datasets", "list", "--dest", str(dest)])
    assert listed.exit_code == 0
    rows = {line.split()[0]: line for line in listed.stdout.splitlines()[1:]}
    assert set(rows) == {"philly", "helios", "pai2020", "openb", "acme"}
    assert " verified " in rows["openb"] and " missing " in rows["philly"]
    assert "CC BY 4.0" in rows["philly"] and "Jeon et al., USENIX ATC'19" in rows["philly"]

    damaged = dest / "openb" / "openb_node_list_gpu_node.csv"
    damaged.write_bytes(damaged.read_bytes().replace(b"P100", b"P200", 1))
    failed = runner.invoke(app, ["datasets", "verify", "openb", "--dest", str(dest)])
    assert failed.exit_code == 1
    lines = failed.stderr.strip().splitlines()
    assert (
        len(lines) == 1
        and "1 of 5 check(s) failed; openb_node_list_gpu_node.csv: mismatch" in lines[0]
    )
    assert re.search(r"^mismatch +openb_node_list_gpu_node\.csv ", failed.stdout, re.M)
    listed = runner.invoke(app, ["datasets", "list", "--dest", str(dest), "-f", "json"])
    assert {d["name"]: d["status"] for d in json.loads(listed.stdout)}["openb"] == "unchecked"


def test_list_json_reports_each_state(server: Server, tmp_path: Path) -> None:
    dest = tmp_path / "raw"
    serve_openb(server)
    fetch("openb", dest, mirror=server.base)
    # pai2020: one header placed by hand (never verified) and one interrupted download.
    (dest / "pai2020").mkdir(parents=True)
    header = SAMPLES / "pai2020" / "headers" / "pai_job_table.header"
    (dest / "pai2020" / header.name).write_bytes(header.read_bytes())
    (dest / "pai2020" / "pai_task_table.tar.gz.part").write_bytes(b"x" * 10)
    result = runner.invoke(app, ["datasets", "list", "--dest", str(dest), "-f", "json"])
    assert result.exit_code == 0, result.output
    entries = {d["name"]: d for d in json.loads(result.stdout)}
    assert {k: v["status"] for k, v in entries.items()} == {
        "philly": "missing",
        "helios": "missing",
        "pai2020": "partial",
        "openb": "verified",
        "acme": "missing",
    }
    files = {f["name"]: f for f in entries["pai2020"]["files"]}
    assert files["pai_job_table.header"]["status"] == "unchecked"
    assert files["pai_task_table.tar.gz"]["status"] == "partial"
    assert files["pai_task_table.tar.gz"]["detail"] == "interrupted: 10 bytes"
    assert entries["philly"]["size_bytes"] == 1_055_988_361
    assert entries["helios"]["size_bytes"] is None
    assert entries["openb"]["license"].startswith("none")
    # verify records the hand-placed header: it becomes verified, the rest stay missing.
    checks = {c.path: c for c in verify("pai2020", dest)}
    assert checks["pai_job_table.header"].ok and not checks["pai_job_table.tar.gz"].ok
    assert status("pai2020", dest).files[7].status is Status.verified
    # Touching a verified file makes it unchecked again (size/mtime no longer match).
    f = dest / "openb" / "openb_node_list_gpu_node.csv"
    f.write_bytes(f.read_bytes() + b"\n")
    assert status("openb", dest).status is Status.unchecked


def test_interrupted_download_resumes_with_range(server: Server, tmp_path: Path) -> None:
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
    body = payload(200_000, seed=3)
    ds = dataset(server, {"blob.bin": body})
    server.files["/toy/blob.bin"].faults.append(("stall", 50_000))
    server.stall_s = 3.0
    (result,) = fetch(ds, tmp_path, timeout_s=0.5, retries=2, backoff_s=0)
    assert [r for _, r in server.requests] == [None, "bytes=50000-"]
    assert result.resumed_from == 50_000
    assert (tmp_path / "toy" / "blob.bin").read_bytes() == body


def test_server_ignoring_range_starts_over(server: Server, tmp_path: Path) -> None:
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


def test_cli_checksum_mismatch_is_one_line(server: Server, tmp_path: Path) -> None:
    serve_openb(server, corrupt="openb_pod_list_default.csv")
    result = runner.invoke(
        app,
        [
            "datasets",
            "fetch",
            "openb",
            "--dest",
            str(tmp_path),
            "--file",
            "openb_pod_list_default.csv",
            "--mirror",
            server.base,
        ],
    )
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "sha256 mismatch" in lines[0], result.stderr
    assert "Traceback" not in result.output
    assert not (tmp_path / "openb" / "openb_pod_list_default.csv").exists()
    assert not (tmp_path / "openb" / "openb_pod_list_default.csv.part").exists()


def test_file_placed_by_hand_is_checked_not_overwritten(server: Server, tmp_path: Path) -> None:
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


# ------------------------------------------------------------------------ archives


def tar_gz(members: list[tarfile.TarInfo | tuple[str, bytes]]) -> bytes:
    buf = io.BytesIO()
    # gzip's mtime=0: the same bytes on every run. They are part of the test ids, which
    # pytest-xdist's workers must collect identically (a clock second apart, they did not).
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
    info = tarfile.TarInfo(name)
    info.type = tarfile.LNKTYPE if hard else tarfile.SYMTYPE
    info.linkname = target
    return info


def zip_bytes(members: list[tuple[str, bytes | str, bool]]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data, is_link in members:
            info = zipfile.ZipInfo(name)
            if is_link:
                info.create_system = 3
                info.external_attr = (stat.S_IFLNK | 0o777) << 16
            zf.writestr(info, data)
    return buf.getvalue()


def test_safe_tar_and_zip_extract_and_verify(server: Server, tmp_path: Path) -> None:
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
)
def test_unsafe_archives_are_refused(
    server: Server, tmp_path: Path, archive: bytes, kind: str, member: str, reason: str
) -> None:
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
    junk = b"\x1f\x8b\x08\x00" + payload(500)
    ds = dataset(server, {"x.tar.gz": junk}, extract="tar.gz")
    with pytest.raises(DatasetError, match=r"x\.tar\.gz: not a readable tar\.gz archive"):
        fetch(ds, tmp_path)
    zds = dataset(server, {"x.zip": junk}, name="z", extract="zip")
    with pytest.raises(DatasetError, match=r"x\.zip: not a readable zip archive"):
        fetch(zds, tmp_path)


def test_cli_unsafe_archive_is_one_line(
    server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ds = dataset(server, {"x.tar.gz": tar_gz([("../evil", b"x")])}, extract="tar.gz")
    monkeypatch.setitem(registry(), "toy", ds)
    result = runner.invoke(app, ["datasets", "fetch", "toy", "--dest", str(tmp_path / "d")])
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "refusing to extract member '../evil'" in lines[0]


# ------------------------------------------------------------------------- offline


def test_offline_connection_refused_is_one_line(tmp_path: Path) -> None:
    port = unused_port()
    result = runner.invoke(
        app,
        [
            "datasets",
            "fetch",
            "openb",
            "--dest",
            str(tmp_path),
            "--mirror",
            f"http://127.0.0.1:{port}",
        ],
    )
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert f"cannot reach 127.0.0.1:{port}:" in lines[0]
    assert "refused" in lines[0] and lines[0].endswith("(offline?)")
    assert "Traceback" not in result.output
    assert not any((tmp_path / "openb").glob("*.csv"))


def test_offline_timeout_and_dns_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as silent:  # accepts connections (backlog) but never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        host = f"127.0.0.1:{silent.getsockname()[1]}"
        start = time.monotonic()
        with pytest.raises(
            DatasetError, match=rf"^cannot reach {host}: .*timed out.*\(offline\?\)$"
        ):
            fetch("openb", tmp_path, mirror=f"http://{host}", timeout_s=0.2, retries=1, backoff_s=0)
        assert time.monotonic() - start < 5

    def no_dns(*args: object, **kwargs: object) -> None:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    with pytest.raises(DatasetError) as info:
        fetch("openb", tmp_path, mirror="http://mirror.invalid", retries=3)
    assert str(info.value) == (
        f"cannot reach mirror.invalid: [Errno {socket.EAI_NONAME}] Name or service not known "
        "(offline?)"
    )


def test_unknown_names_are_one_line_errors(tmp_path: Path) -> None:
    result = runner.invoke(app, ["datasets", "fetch", "nope", "--dest", str(tmp_path)])
    assert result.exit_code == 2  # an unknown name is a usage mistake
    assert "unknown dataset 'nope'; did you mean 'openb'?" in result.stderr
    result = runner.invoke(
        app, ["datasets", "fetch", "openb", "--dest", str(tmp_path), "--file", "x.csv"]
    )
    assert result.exit_code == 1 and "has no file 'x.csv'" in result.stderr
    result = runner.invoke(app, ["datasets", "verify", "philly", "--dest", str(tmp_path)])
    assert result.exit_code == 1
    assert "not found in" in result.stderr and "gpu-trace datasets fetch philly" in result.stderr
