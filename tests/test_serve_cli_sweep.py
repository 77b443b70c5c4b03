"""``gpu-trace serve sweep``: a grid over ServeConfig fields through replay sweep's grid
and folder (manifest, markers, --resume), in process (``--workers 1``: the stand-in
engine of tests/serve_standin.py is patched into this process only); the same sweeps on
Ray are in tests/test_serve_sweep_ray.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.serve_standin import standins
from tests.serving_common import SAMPLES, cli, ingest_ok, rows


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("serve-sweep") / "store"
    ingest_ok(root, "azure-llm", SAMPLES / "azure-llm")
    return root


GRID = [
    "--workers", "1", "--source", "azure-llm", "--set", "dataset=conv", "--set", "duration_s=60",
    "--set", "latency=standin", "--grid", "router=round-robin,least-tokens",
    "--grid", "replicas=1-2",
]  # fmt: skip


def test_sweep_runs_the_grid_and_resumes(
    store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "sw"
    with standins(monkeypatch) as engine:
        code, table, err = cli("serve", "sweep", "--out", out, "--store", store, *GRID)
        assert code == 0, err
        assert engine.calls == 4
        assert len([ln for ln in table.splitlines() if ln.startswith("| round-robin-")]) == 2
        manifest = json.loads((out / "sweep.json").read_text())
        ids = ", ".join(f"'{r['run_id']}'" for r in manifest["runs"])
        # the module's store holds other tests' runs too: this sweep's, by their ids
        got = rows(
            store, f"select router, replicas from serve_runs where run_id in ({ids}) order by all"
        )
        assert got == [
            ("least-tokens", 1),
            ("least-tokens", 2),
            ("round-robin", 1),
            ("round-robin", 2),
        ]
        assert manifest["kind"] == "serve" and len(manifest["runs"]) == 4
        assert {p.stem for p in (out / "runs").glob("*.json")} == {
            r["run_id"] for r in manifest["runs"]
        }
        assert "ran 4" in err
        # again into the same folder: refused without --resume; with it, nothing reruns
        code, _, err = cli("serve", "sweep", "--out", out, "--store", store, *GRID)
        assert code == 1 and "already holds a sweep" in err
        code, _, err = cli(
            "serve", "sweep", "--out", out, "--store", store, "--resume", "--workers", "1"
        )
        assert code == 0, err
        assert engine.calls == 4 and "4 already done" in err


def test_a_failed_run_is_marked_and_rerun_on_resume(
    store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "sw"
    grid = [*GRID[:-2], "--grid", "seed=7-8"]
    with standins(monkeypatch) as engine:
        engine.fail_router = "least-tokens"
        code, _, err = cli("serve", "sweep", "--out", out, "--store", store, *grid)
        assert code == 1
        assert "2 of 4 runs failed" in err.splitlines()[-1]
        markers = [json.loads(p.read_text()) for p in (out / "runs").glob("*.json")]
        assert sorted(m["status"] for m in markers) == ["done", "done", "failed", "failed"]
        engine.fail_router = None
        code, _, err = cli(
            "serve", "sweep", "--out", out, "--store", store, "--resume", "--workers", "1"
        )
        assert code == 0, err
        assert engine.calls == 6 and "2 already done" in err


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["--grid", "routr=a,b"], 1, "unknown ServeConfig field 'routr'; did you mean 'router'?"),
        (["--grid", "disaggregate=0,2"], 2, "'2' is not P:D"),
        (["--grid", "tp=0-1"], 2, "--tp"),
        (["--grid", "router"], 2, "--grid 'router' is not FIELD=VALUES"),
        (["--grid", "run_id=a,b"], 1, "run_id cannot be set here"),
    ],
)
def test_bad_grids_are_one_error_line(
    store: Path, tmp_path: Path, args: list[str], code: int, words: str
) -> None:
    got, _, err = cli(
        "serve", "sweep", "--out", tmp_path / "sw", "--store", store, "--source", "azure-llm", *args
    )
    assert got == code, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and words in lines[0], err
    assert not (tmp_path / "sw" / "sweep.json").exists()


def test_an_unreachable_ray_address_is_one_line_and_leaves_the_folder_free(
    store: Path, tmp_path: Path
) -> None:
    """replay sweep's Ray connection, so its checks: a closed port answers at once (Ray
    alone retries for minutes); no Ray needed."""
    import socket

    grid = ["--source", "azure-llm", "--set", "dataset=conv", "--grid", "replicas=1-2"]
    out = tmp_path / "sw"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: connections are refused
        code, _, err = cli(
            "serve", "sweep", "--out", out, "--store", store, "--address", f"127.0.0.1:{port}",
            *grid,
        )  # fmt: skip
    assert code == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"error: cannot reach the Ray cluster at 127.0.0.1:{port}: ")
    assert not (out / "sweep.json").exists()  # a sweep that never started: the folder is free
    code, _, err = cli("serve", "sweep", "--out", out, "--store", store, "--address", "nope", *grid)
    assert code == 1
    assert err.strip() == "error: --address 'nope' is not auto, HOST:PORT or ray://HOST:PORT"
