"""A sweep on a real two-node Ray cluster on loopback: ``ray start --head``, then a
second ``ray start --address`` with its own resources (a custom resource, as a second
machine would declare), both on this machine, one CPU each. Every run is stored once
and the runs' markers name both nodes. Skipped only where the ``ray`` extra is missing,
unless ``GPU_TRACE_REQUIRE_RAY=1`` (CI) makes a missing Ray a failure.

Ray's CLI (docs.ray.io, "Launching an On-Premise Cluster"): ``ray start --head
--port=6379`` on the head, ``ray start --address=<head-ip>:6379`` on each worker node;
``--num-cpus`` and ``--resources='{"name": n}'`` declare a node's resources.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpu_trace.replay import sweep as sw
from gpu_trace.store.scan import scan

if os.environ.get("GPU_TRACE_REQUIRE_RAY") != "1":
    pytest.importorskip("ray")

RAY = Path(sys.executable).with_name("ray")
ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ray_start(*args: str, env: dict[str, str], sessions: list[int]) -> None:
    """``ray start ARGS`` in a session of its own: the daemons it leaves keep that session
    id, so :func:`_stop` ends exactly them (``ray stop`` would end every Ray process on
    the machine, other users' too).
    """
    proc = subprocess.Popen(
        [str(RAY), "start", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    sessions.append(proc.pid)
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, output


def _in_sessions(sessions: list[int]) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()  # after "pid (comm)": state ppid pgrp sid
        if int(fields[3]) in sessions:
            found.append(int(entry.name))
    return found


def _stop(sessions: list[int]) -> None:
    """SIGTERM, then SIGKILL, every process left in the sessions of our ``ray start``s."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = _in_sessions(sessions)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        for _ in range(100):
            if not _in_sessions(sessions):
                return
            time.sleep(0.1)


NODES = """
import json, sys, ray
ray.init(address=sys.argv[1], log_to_driver=False)
print(json.dumps({n["NodeID"]: n["Resources"] for n in ray.nodes() if n["Alive"]}))
"""


@pytest.fixture
def two_nodes() -> Iterator[tuple[str, dict[str, str]]]:
    """The head's GCS address of a two-node cluster and the environment to reach it
    with, stopped afterwards.

    With a token of its own (Ray's token authentication: ``RAY_AUTH_MODE=token`` and
    ``RAY_AUTH_TOKEN`` for every node and driver), so a token another cluster left in
    ``~/.ray/auth_token`` cannot make the nodes disagree. Drivers run as processes of
    their own: Ray reads its authentication settings once per process.
    """
    assert RAY.exists(), f"the ray CLI is missing next to {sys.executable}"
    port = _free_port()
    # a short temp dir: Ray's unix sockets live under it (path length limit ~107 bytes)
    tmp = tempfile.mkdtemp(prefix="rt", dir="/tmp")
    pythonpath = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = {
        **os.environ,
        "PYTHONPATH": pythonpath,
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": secrets.token_hex(32),
    }
    small = ["--num-cpus=1", "--object-store-memory=100000000", "--disable-usage-stats"]
    sessions: list[int] = []
    try:
        _ray_start(
            "--head", "--node-ip-address=127.0.0.1", f"--port={port}",
            "--include-dashboard=false", f"--temp-dir={tmp}", *small,
            "--resources=" + json.dumps({"node_head": 1}), env=env, sessions=sessions,
        )  # fmt: skip
        _ray_start(
            "--node-ip-address=127.0.0.1", f"--address=127.0.0.1:{port}", *small,
            "--resources=" + json.dumps({"node_second": 1}), env=env, sessions=sessions,
        )  # fmt: skip
        yield f"127.0.0.1:{port}", env
    finally:
        _stop(sessions)
        shutil.rmtree(tmp, ignore_errors=True)


def test_a_sweep_runs_on_both_nodes_of_a_two_node_cluster(
    two_nodes: tuple[str, dict[str, str]], store_copy: Path, tmp_path: Path
) -> None:
    address, env = two_nodes
    sweep = tmp_path / "sweep.toml"
    sweep.write_text(
        """
source = "openb"
[fixed]
cluster = "32x8"
placement = "random"
[grid]
scheduler = ["fifo", "sjf"]
seed = "0-2"
""",
        encoding="utf-8",
    )
    out = tmp_path / "sw"
    cmd = [sys.executable, "-c", "from gpu_trace.cli import main; main()", "replay", "sweep"]
    cmd += [str(sweep), "--out", str(out), "--store", str(store_copy), "--address", address]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    assert "ran 6, failed 0" in done.stderr and f"on ray at {address} with 2 workers" in (
        done.stderr
    )
    runs = scan(store_copy, "replay_runs", ["openb"]).collect()
    assert runs.height == 6 and runs["run_id"].n_unique() == 6
    markers = sw.read_markers(out)
    assert sorted(markers) == sorted(runs["run_id"].to_list())
    # the cluster has the two nodes as declared, and both ran runs
    listed = subprocess.run(
        [sys.executable, "-c", NODES, address], env=env, capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    nodes: dict[str, dict[str, float]] = json.loads(listed.stdout.strip().splitlines()[-1])
    assert sorted(k for r in nodes.values() for k in r if k.startswith("node_")) == [
        "node_head",
        "node_second",
    ]
    used = {m["node"] for m in markers.values()}
    assert used == set(nodes), (used, nodes)
