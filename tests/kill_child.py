"""Start a real gpu-trace child process, wait until it signals that it reached the
point under test (it creates ``marker``), and kill -9 it there. Shared by the store and
report atomicity tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def kill_when_paused(args: list[str], marker: Path, timeout_s: float) -> int:
    """Run ``python -c ARGS...``; SIGKILL it once ``marker`` exists. Returns its code."""
    child = subprocess.Popen(
        [sys.executable, "-c", *args],
        env=os.environ.copy(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + timeout_s
    while not marker.exists():
        assert child.poll() is None, child.stderr.read() if child.stderr else ""
        assert time.monotonic() < deadline
        time.sleep(0.05)
    os.kill(child.pid, signal.SIGKILL)
    return child.wait()
