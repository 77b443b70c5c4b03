"""Sweeps and readers beside other processes: two sweeps started into one folder, and
readers that outlive several commits. Real processes, started together; the asserted
outcome holds whatever the interleaving."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from gpu_trace.replay import sweep as sw
from gpu_trace.store.scan import scan

WAIT_FOR_GO = """
import sys, time
from pathlib import Path
import gpu_trace.replay.sweep
from gpu_trace.cli import main  # imported before the start line, so both start together
go, ready = Path(sys.argv[1]), Path(sys.argv[2])
ready.touch()
while not go.exists():
    time.sleep(0.001)
sys.argv = ["gpu-trace", *sys.argv[3:]]
main()
"""


def sweep_file(path: Path, seeds: str) -> Path:
    path.write_text(
        f"""
source = "openb"
name = "{path.stem}"
[fixed]
cluster = "32x8"
[grid]
scheduler = ["fifo", "sjf"]
seed = "{seeds}"
""",
        encoding="utf-8",
    )
    return path


def test_two_sweeps_into_one_folder_do_not_both_succeed(store_copy: Path, tmp_path: Path) -> None:
    """Issue 27: both sweeps used to pass the 'folder already holds a sweep' check before
    either wrote its manifest; both succeeded and the later manifest orphaned the other
    grid's runs. Now exactly one succeeds, whatever the interleaving, and every stored
    run is one the folder's manifest names."""
    out = tmp_path / "sw"
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [
                sys.executable, "-c", WAIT_FOR_GO, str(go), str(tmp_path / f"{name}.ready"),
                "replay", "sweep",
                str(sweep_file(tmp_path / f"{name}.toml", seeds)), "--out", str(out),
                "--store", str(store_copy), "--workers", "1",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, seeds in (("a", "0-1"), ("b", "2-3"))
    ]  # fmt: skip
    deadline = time.monotonic() + 300  # a guard against a hang, not a measurement
    while not all((tmp_path / f"{n}.ready").exists() for n in "ab"):
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs)
        time.sleep(0.01)
    go.touch()
    results = [(p.wait(timeout=600), p.stderr.read() if p.stderr else "") for p in procs]
    codes = sorted(code for code, _ in results)
    assert codes == [0, 1], results
    loser = next(err for code, err in results if code == 1)
    last = loser.strip().splitlines()[-1]
    assert last.startswith("error: ") and str(out) in last, loser
    assert "Traceback" not in loser
    manifest = {r["run_id"] for r in sw.read_manifest(out)["runs"]}
    stored = set(scan(store_copy, "replay_runs", ["openb"]).collect()["run_id"].to_list())
    assert len(manifest) == 4
    assert stored == manifest  # no orphaned grid
    assert set(sw.read_markers(out)) == manifest


def test_a_reader_keeps_its_generation_while_sweep_commits_land(
    store_copy: Path, tmp_path: Path
) -> None:
    """Issue 27: a commit deleted every generation older than the two before current, so a
    report or an ``sql`` connection failed once three sweep commits passed it. Readers
    now pin their generation; it is deleted once they let go."""
    import gpu_trace
    from gpu_trace.replay import sweep_grid as sg
    from gpu_trace.store import catalog
    from gpu_trace.store.generations import release

    con = catalog.connect(store_copy)
    api_store = gpu_trace.open(store_copy)
    pinned = api_store.root
    jobs = con.execute("SELECT count(*) FROM jobs").fetchone()
    spec = sg.load(sweep_file(tmp_path / "a.toml", "0-1"))
    summary = sw.run_sweep(store_copy, spec, tmp_path / "sw", workers=1)
    assert summary.ran == 4  # in process: one commit per run, four generations on
    assert (store_copy / "current").resolve().name != pinned.name
    # both readers still read their own generation: no replay runs there, same jobs
    assert con.execute("SELECT count(*) FROM jobs").fetchone() == jobs
    assert con.execute("SELECT count(*) FROM replay_runs").fetchone() == (0,)
    assert api_store.table("replay_runs").collect().height == 0
    assert api_store.table("jobs").collect().height == jobs[0]  # type: ignore[index]
    # once both let go, the next commit deletes it
    con.close()
    release(pinned)  # the connection's pin
    del api_store  # the API Store's pin, released when it is collected
    sw.run_sweep(store_copy, sg.load(sweep_file(tmp_path / "b.toml", "2")), tmp_path / "sw2")
    assert not pinned.exists()
