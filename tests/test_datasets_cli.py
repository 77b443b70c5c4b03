"""``gpu-trace datasets list|fetch|verify`` through the real CLI, against a loopback
HTTP server: stdout / stderr contents, one-line errors and exit codes.

The registry's official URLs are replaced by the server's through ``--mirror`` /
``GPU_TRACE_DATASETS_MIRROR`` (or a test dataset put in the registry), so no request
leaves 127.0.0.1; expected checksums are computed with hashlib from the bundled samples.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpu_trace.cli import app
from gpu_trace.datasets import MIRROR_ENV, Status, fetch, registry, status, verify
from tests.conftest import SAMPLES
from tests.datasets_common import (
    OPENB_FILES,
    Server,
    dataset,
    loopback_server,
    no_mirror_no_proxy,
    runner,
    serve_openb,
    sha,
    tar_gz,
    unused_port,
)


@pytest.fixture
def server() -> Iterator[Server]:
    """A loopback HTTP server (:func:`tests.datasets_common.loopback_server`)."""
    yield from loopback_server()


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """No mirror or proxy from the environment (:func:`~tests.datasets_common.no_mirror_no_proxy`)."""
    no_mirror_no_proxy(monkeypatch)


def test_cli_fetch_verify_list_openb_from_a_mirror(server: Server, tmp_path: Path) -> None:
    """fetch, verify and list end to end on the bundled openb files served as a mirror: the
    paths on stdout, a second fetch requests nothing, verify prints the hashlib sha256s;
    a damaged file fails verify in one line (exit 1) and list then says unchecked."""
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
    assert set(rows) == {
        "philly",
        "helios",
        "pai2020",
        "openb",
        "acme",
        "azure-llm",
        "mooncake",
        "burstgpt",
        "gentd26",
    }
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
    """``list -f json`` reports missing, partial (an interrupted .part), unchecked (placed by
    hand) and verified; verify records a hand-placed file, and touching a verified file
    makes it unchecked again."""
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
        "azure-llm": "missing",
        "mooncake": "missing",
        "burstgpt": "missing",
        "gentd26": "missing",
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


def test_cli_checksum_mismatch_is_one_line(server: Server, tmp_path: Path) -> None:
    """A corrupted mirror file is one stderr line (sha256 mismatch), exit 1, nothing on disk."""
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


def test_cli_unsafe_archive_is_one_line(
    server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An archive member escaping the destination is one stderr line and exit 1."""
    ds = dataset(server, {"x.tar.gz": tar_gz([("../evil", b"x")])}, extract="tar.gz")
    monkeypatch.setitem(registry(), "toy", ds)
    result = runner.invoke(app, ["datasets", "fetch", "toy", "--dest", str(tmp_path / "d")])
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "refusing to extract member '../evil'" in lines[0]


def test_offline_connection_refused_is_one_line(tmp_path: Path) -> None:
    """A mirror port nothing listens on: one line ``cannot reach 127.0.0.1:PORT: … refused …
    (offline?)``, exit 1, no traceback, nothing placed."""
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


def test_unknown_names_are_one_line_errors(tmp_path: Path) -> None:
    """An unknown dataset is a usage error (exit 2) with a suggestion; an unknown --file and
    verify of a dataset not present are exit 1, the latter with the fetch command to run."""
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
