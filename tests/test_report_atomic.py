"""`gpu-trace report` swaps a whole new site in, refuses folders it did not build, and a
build killed before the swap leaves the old site whole."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpu_trace.cli import app
from gpu_trace.reports.publish import SITE_MARKER, recover
from tests.conftest import SAMPLES
from tests.kill_child import kill_when_paused

runner = CliRunner()
CSV = "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n0,1,10,5,vgg,100,1\n"
GAVEL = SAMPLES / "processed" / "gavel" / "msr_seed0_103959.trace"

CHILD = """
import os, sys, time
from gpu_trace.cli import main
marker = sys.argv[1]
def hook(name, args):
    if name == "open" and str(args[0]).endswith("/.gpu-trace-site") and ".build-" in str(args[0]):
        open(marker, "w").close()
        time.sleep(600)
sys.addaudithook(hook)
sys.argv = ["gpu-trace", *sys.argv[2:]]
main()
"""


@pytest.fixture(scope="module")
def two_sources(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("two")
    (root / "t.csv").write_text(CSV)
    store = root / "store"
    for cmd, path in (("chronus", root / "t.csv"), ("gavel", GAVEL)):
        result = runner.invoke(app, ["ingest", cmd, str(path), "--store", str(store)])
        assert result.exit_code == 0, result.output
    return store


def report(store: Path, out: Path, *extra: str):
    return runner.invoke(app, ["report", "--store", str(store), "--out", str(out), *extra])


def pages(out: Path) -> list[str]:
    return sorted(p.name for p in out.iterdir())


def test_rebuild_replaces_the_whole_site(two_sources: Path, tmp_path: Path) -> None:
    out = tmp_path / "site"
    assert report(two_sources, out).exit_code == 0
    assert pages(out) == [SITE_MARKER, "chronus.html", "gavel.html", "index.html"]
    result = report(two_sources, out, "--source", "chronus", "--title", "second")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == str(out / "index.html")
    # the gavel page of the first build is gone with it: no page from two builds
    assert pages(out) == [SITE_MARKER, "chronus.html", "index.html"]
    index = (out / "index.html").read_text()
    assert "second" in index and "gavel.html" not in index
    assert pages(tmp_path) == ["site"]  # no build or old folder left beside it


def test_refuses_folders_it_did_not_build(
    two_sources: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user = tmp_path / "papers"
    user.mkdir()
    (user / "notes.txt").write_text("mine")
    result = report(two_sources, user)
    assert result.exit_code == 1
    err = result.stderr.strip()
    assert "\n" not in err and "Traceback" not in err
    assert f"{user}: not empty and not a gpu-trace report site" in err
    assert pages(user) == ["notes.txt"] and (user / "notes.txt").read_text() == "mine"
    assert pages(tmp_path) == ["papers"]

    monkeypatch.chdir(user)
    result = report(two_sources, Path())
    assert result.exit_code == 1
    assert "refusing to replace the current folder" in result.stderr
    assert pages(user) == ["notes.txt"]

    empty = tmp_path / "empty"
    empty.mkdir()
    assert report(two_sources, empty).exit_code == 0
    assert "index.html" in pages(empty)


def test_kill_before_swap_keeps_old_site(two_sources: Path, tmp_path: Path) -> None:
    out = tmp_path / "site"
    assert report(two_sources, out).exit_code == 0
    before = {n: (out / n).read_bytes() for n in pages(out)}
    marker = tmp_path / "paused"
    kill_when_paused(
        [
            CHILD,
            str(marker),
            "report",
            "--store",
            str(two_sources),
            "--out",
            str(out),
            "--source",
            "chronus",
        ],
        marker,
        180,
    )
    assert {n: (out / n).read_bytes() for n in pages(out)} == before
    leftovers = [n for n in pages(tmp_path) if n.startswith(".site.build-")]
    assert len(leftovers) == 1 and (tmp_path / leftovers[0] / "index.html").exists()

    assert report(two_sources, out, "--source", "chronus").exit_code == 0
    assert pages(out) == [SITE_MARKER, "chronus.html", "index.html"]
    assert pages(tmp_path) == ["paused", "site"]


def test_site_moved_aside_by_a_crash_is_put_back(two_sources: Path, tmp_path: Path) -> None:
    """The two-rename fallback can die between its renames; the next run restores."""
    out = tmp_path / "site"
    assert report(two_sources, out).exit_code == 0
    before = (out / "index.html").read_bytes()
    out.rename(tmp_path / ".site.old-4242-0abc")
    recover(out)
    assert (out / "index.html").read_bytes() == before
    assert pages(tmp_path) == ["site"]


def test_site_built_before_the_marker_is_replaced(two_sources: Path, tmp_path: Path) -> None:
    out = tmp_path / "site"
    assert report(two_sources, out, "--images", "svg").exit_code == 0
    (out / SITE_MARKER).unlink()  # as an older gpu-trace left it
    assert report(two_sources, out, "--source", "chronus").exit_code == 0
    assert pages(out) == [SITE_MARKER, "chronus.html", "index.html"]
    (out / SITE_MARKER).unlink()
    (out / "my-notes.md").write_text("mine")  # a user file: no longer only our pages
    result = report(two_sources, out)
    assert result.exit_code == 1 and "not a gpu-trace report site" in result.stderr
    assert (out / "my-notes.md").read_text() == "mine"
