"""Sweeps on a real local Ray (2 CPUs, no dashboard): the same store bytes as in
process, and a worker killed mid-run is retried with every run exactly once in the
store. Skipped only where the ``ray`` extra is missing, unless
``GPU_TRACE_REQUIRE_RAY=1`` (CI) makes a missing Ray a failure."""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpu_trace.replay import sweep as sw
from gpu_trace.replay import sweep_grid as sg
from gpu_trace.store.generations import snapshot_root
from gpu_trace.store.scan import scan

if os.environ.get("GPU_TRACE_REQUIRE_RAY") == "1":
    import ray
else:
    ray = pytest.importorskip("ray")

TASK_TITLE = b"ray::sweep_run"
"""Ray names a worker process after the task it runs."""


@pytest.fixture(scope="module")
def local_ray() -> Iterator[Any]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def small_grid() -> sg.SweepSpec:
    return sg.parse(
        {
            "source": "openb",
            "fixed": {
                "cluster": "32x8",
                "window_start": "1970-05-01",
                "window_end": "1970-05-08",
            },
            "grid": {"scheduler": ["fifo", "sjf"], "placement": ["random"], "seed": "0-2"},
        },
        "test",
    )


def sweep_files(store: Path) -> dict[str, bytes]:
    cur = (store / "current").resolve()
    return {
        str(p.relative_to(cur)): p.read_bytes()
        for table in sw.TABLES
        for p in sorted((cur / table / "source=openb").glob("*.parquet"))
    }


def test_ray_sweep_writes_the_same_bytes_as_in_process(
    local_ray: Any, openb_store: Path, tmp_path: Path
) -> None:
    stores = {k: tmp_path / f"store-{k}" for k in ("ray", "local")}
    for s in stores.values():
        shutil.copytree(openb_store, s)
    on_ray = sw.run_sweep(stores["ray"], small_grid(), tmp_path / "ray", workers=2)
    local = sw.run_sweep(stores["local"], small_grid(), tmp_path / "local", workers=1)
    assert (on_ray.backend, on_ray.workers, on_ray.ran) == ("ray", 2, 6)
    assert (local.backend, local.ran) == ("in-process", 6)
    ray_files = sweep_files(stores["ray"])
    assert len(ray_files) == 3 * 6
    assert ray_files == sweep_files(stores["local"])
    # the tasks ran in Ray workers, not in this process
    pids = {m["pid"] for m in sw.read_markers(tmp_path / "ray").values()}
    assert os.getpid() not in pids


def test_runs_finishing_within_the_commit_interval_share_one_commit(
    local_ray: Any, store_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With an interval longer than the sweep, the first finished run is committed alone
    (it publishes the sweep) and the other five together: two generations, not six.
    Every run is still stored once and marked only after its commit."""
    from gpu_trace.replay import sweep_ray

    store = store_copy
    snapshot_root(store)  # the copy followed the `current` symlink: give it one again
    monkeypatch.setattr(sweep_ray, "COMMIT_INTERVAL_S", 600.0)
    before = int((store / "current").readlink().name.removeprefix("gen-"))
    summary = sw.run_sweep(store, small_grid(), tmp_path / "sw", workers=2)
    after = int((store / "current").readlink().name.removeprefix("gen-"))
    assert summary.ran == 6 and not summary.failed
    assert after - before == 2
    runs = scan(store, "replay_runs", ["openb"]).collect()
    assert runs.height == 6 and runs["run_id"].n_unique() == 6
    assert sorted(sw.read_markers(tmp_path / "sw")) == sorted(runs["run_id"].to_list())


def _descendants(root: int) -> list[int]:
    """Every process below ``root`` (this test's Ray: its raylet and workers are children
    of the driver), read from ``/proc/<pid>/task/<tid>/children``. Scanning all of
    ``/proc`` instead would find another pytest-xdist worker's Ray (or another user's)
    and kill its task: that test then sees a retry it did not cause, and this one kills
    nothing of its own.
    """
    found: list[int] = []
    todo = [root]
    while todo:
        pid = todo.pop()
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                kids = [int(k) for k in (task / "children").read_text().split()]
            except OSError:
                continue
            found += kids
            todo += kids
    return found


def _title(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _kill_mid_run(pid: int) -> bool:
    """SIGKILL ``pid`` if it is still inside a sweep run, checked while it is stopped.

    Ray titles a worker ``ray::sweep_run`` from the call of the task's function until it
    returns (``ray._private.worker._changeproctitle``), before the result is stored and
    sent to the driver. Read once and killed later, a worker (under load, seconds later)
    may have sent its result, or finished that run and begun the next: the test then
    kills a worker whose pid is in a marker. Stopped first, the title cannot change
    before the kill.
    """
    os.kill(pid, signal.SIGSTOP)
    if _title(pid).startswith(TASK_TITLE):
        os.kill(pid, signal.SIGKILL)
        return True
    os.kill(pid, signal.SIGCONT)
    return False


def test_a_killed_worker_is_retried_and_every_run_is_stored_once(
    local_ray: Any, store_copy: Path, tmp_path: Path
) -> None:
    # the whole openb sample: about a second per run, long enough to kill one mid-run
    spec = sg.parse(
        {
            "source": "openb",
            "fixed": {"cluster": "32x8", "placement": "fgd"},
            "grid": {"scheduler": ["sjf"], "seed": "0-3"},
        },
        "test",
    )
    killed: list[int] = []
    done = threading.Event()

    def killer() -> None:
        # until the sweep returns, however long a busy machine makes it (no deadline);
        # only a worker's first run of this sweep: one that finished a run before the
        # kill would rightly have its pid in that run's marker
        ran_before: set[int] = set()
        while not done.is_set() and not killed:
            for pid in _descendants(os.getpid()):
                if not _title(pid).startswith(TASK_TITLE) or pid in ran_before:
                    continue
                if _kill_mid_run(pid):
                    killed.append(pid)
                    break
                ran_before.add(pid)
            time.sleep(0.002)

    thread = threading.Thread(target=killer)
    thread.start()
    try:
        summary = sw.run_sweep(store_copy, spec, tmp_path / "sw", workers=2)
    finally:
        done.set()
        thread.join()
    assert killed, "no running sweep task was seen"
    assert summary.ran == 4 and not summary.failed
    runs = scan(store_copy, "replay_runs", ["openb"]).collect()
    assert runs.height == 4 and runs["run_id"].n_unique() == 4
    markers = sw.read_markers(tmp_path / "sw")
    assert sorted(markers) == sorted(runs["run_id"].to_list())
    # the killed worker returned nothing: every result came from a live worker
    assert killed[0] not in {m["pid"] for m in markers.values()}


def test_a_runs_own_error_on_ray_is_recorded_not_retried(
    local_ray: Any, store_copy: Path, tmp_path: Path
) -> None:
    spec = sg.parse(
        {
            "source": "openb",
            "fixed": {"cluster": "32x8", "window_end": "1970-05-03"},
            "grid": {"window_start": ["1970-05-01", "not-a-date"]},
        },
        "test",
    )
    summary = sw.run_sweep(store_copy, spec, tmp_path / "sw", workers=2)
    assert summary.ran == 1
    assert [why for _, why in summary.failed] == [
        "window bound 'not-a-date' is not an ISO date/time"
    ]
    assert scan(store_copy, "replay_runs", ["openb"]).collect().height == 1
