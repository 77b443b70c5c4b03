"""The workload process of one live-replay job: ``python -m gpu_trace.replay.live.worker``.

It holds its devices until an absolute ``--deadline`` on the system-wide monotonic clock
(``CLOCK_MONOTONIC`` is shared by every process of the host), so the time Python takes
to start is not added to the job's duration: a job started at wall time t for d seconds
exits at t + d however late the interpreter came up. It exits with ``os._exit`` to skip
interpreter teardown, which would otherwise delay every completion by milliseconds.

Backends:

- ``emulated``: the executor enforces the device slots and passes them in
  ``GPU_TRACE_SLOTS``; the process sleeps, or busy-waits ``--duty`` of every 100 ms
  period to load a CPU like a training loop would.
- ``cuda``: ``CUDA_VISIBLE_DEVICES`` pins the process; it allocates ``--mem-mb`` MiB on
  each visible GPU and runs a matmul loop busy ``--duty`` of every period, using CuPy if
  importable, else PyTorch. With neither it exits 2 with a one-line error.

Failure injection: ``--fail-after S`` exits 3 after S seconds (a job failure the
executor must surface). SIGTERM (preemption) exits 143 at once. If the executor dies,
the worker notices its parent changed and exits, so no orphan holds a GPU.

Imports are stdlib only at module level: one of these starts per job.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import time
from types import FrameType
from typing import Any

EXIT_INJECTED = 3
EXIT_NO_LIBRARY = 2
PERIOD_S = 0.1
CHECK_S = 0.5
"""Longest sleep between checks that the executor is still alive."""


def _log(job: str, text: str) -> None:
    sys.stderr.write(f"[worker {job} pid {os.getpid()}] {text}\n")
    sys.stderr.flush()


def array_library() -> tuple[str, Any]:
    """(name, module) of the first GPU array library importable: CuPy, then PyTorch."""
    for name in ("cupy", "torch"):
        try:
            return name, importlib.import_module(name)
        except ImportError:
            continue
    msg = (
        "no GPU array library: install CuPy (pip install cupy-cuda12x) or PyTorch to run "
        "live replay on cuda devices"
    )
    raise RuntimeError(msg)


class _GpuLoad:
    """Memory footprint and a matmul kernel on every visible GPU."""

    def __init__(self, mem_mb: float) -> None:
        self.name, self.lib = array_library()
        self.buffers: list[Any] = []
        self.mats: list[Any] = []
        nbytes = int(mem_mb * 1024 * 1024)
        n = 2048
        if self.name == "cupy":
            cp = self.lib
            self.count = cp.cuda.runtime.getDeviceCount()
            for i in range(self.count):
                with cp.cuda.Device(i):
                    buf = cp.ones(max(nbytes, 1), dtype=cp.uint8)
                    self.buffers.append(buf)
                    self.mats.append(cp.random.rand(n, n, dtype=cp.float32))
        else:
            torch = self.lib
            self.count = torch.cuda.device_count()
            for i in range(self.count):
                dev = f"cuda:{i}"
                self.buffers.append(torch.ones(max(nbytes, 1), dtype=torch.uint8, device=dev))
                self.mats.append(torch.rand(n, n, device=dev))
        if not self.count:
            msg = "no CUDA device is visible to the worker"
            raise RuntimeError(msg)

    def burst(self, seconds: float) -> None:
        """Issue matmuls on every GPU for ``seconds`` (synchronising each round)."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if self.name == "cupy":
                cp = self.lib
                for i, a in enumerate(self.mats):
                    with cp.cuda.Device(i):
                        a @ a  # the kernel is the point
                for i in range(self.count):
                    cp.cuda.Device(i).synchronize()
            else:
                torch = self.lib
                for a in self.mats:
                    a @ a
                for i in range(self.count):
                    torch.cuda.synchronize(i)


def hold(
    deadline: float,
    *,
    duty: float,
    fail_at: float | None,
    load: _GpuLoad | None,
    parent: int,
) -> int:
    """Hold the devices until ``deadline`` (monotonic); the exit code to use."""
    while True:
        now = time.monotonic()
        if fail_at is not None and now >= fail_at:
            return EXIT_INJECTED
        if now >= deadline:
            return 0
        if os.getppid() != parent:
            return 1
        stop = min(deadline, fail_at if fail_at is not None else deadline)
        if duty <= 0:
            time.sleep(min(stop - now, CHECK_S))
            continue
        busy = min(duty * PERIOD_S, stop - now)
        if load is not None:
            load.burst(busy)
        else:
            end = now + busy
            while time.monotonic() < end:
                pass
        rest = min(PERIOD_S - busy, stop - time.monotonic())
        if rest > 0:
            time.sleep(rest)


def main(argv: list[str] | None = None) -> int:
    """The worker process the live executor starts per attempt: hold its devices (a
    duty cycle, emulated or on CUDA) until the deadline, or fail at the injected time;
    SIGTERM is a preemption. The exit code is the outcome the executor reads.
    """
    p = argparse.ArgumentParser(prog="gpu_trace.replay.live.worker")
    p.add_argument("--job", required=True)
    p.add_argument("--backend", choices=("emulated", "cuda"), default="emulated")
    p.add_argument("--deadline", type=float, required=True, help="time.monotonic() to exit at")
    p.add_argument("--fail-at", type=float, default=None, help="time.monotonic() to fail at")
    p.add_argument("--duty", type=float, default=0.0, help="busy share of every 100 ms")
    p.add_argument("--mem-mb", type=float, default=0.0, help="cuda: MiB to hold per GPU")
    p.add_argument("--restore-s", type=float, default=0.0, help="restore phase (logged)")
    p.add_argument("--parent", type=int, default=None, help="executor pid")
    a = p.parse_args(argv)
    parent = a.parent if a.parent is not None else os.getppid()

    def on_term(signum: int, frame: FrameType | None) -> None:
        left = a.deadline - time.monotonic()
        _log(a.job, f"preempted (SIGTERM) with {left:.3f} s of work left")
        os._exit(128 + signal.SIGTERM)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the executor owns shutdown
    load: _GpuLoad | None = None
    if a.backend == "cuda":
        try:
            load = _GpuLoad(a.mem_mb)
        except Exception as exc:  # any library or driver failure ends the job
            _log(a.job, f"error: {str(exc).splitlines()[0] if str(exc) else exc!r}")
            return EXIT_NO_LIBRARY
    code = hold(a.deadline, duty=a.duty, fail_at=a.fail_at, load=load, parent=parent)
    if code == EXIT_INJECTED:
        _log(a.job, "injected failure")
    return code


if __name__ == "__main__":
    sys.stdout.flush()
    os._exit(main())
