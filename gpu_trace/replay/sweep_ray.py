"""The Ray backend of a sweep: one Ray task per run, the workload in the object store
once, at most two tasks per worker in flight, results handed to the driver as they
finish. Ray is an optional extra (``pip install 'gpu-trace[ray]'``) and is imported
only here, only when a sweep asks for it.

Ray is reached through ``importlib`` and typed ``Any`` on purpose: the type check must
give the same answer whether or not the extra is installed.
"""

from __future__ import annotations

import importlib
import logging
import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import polars as pl

from gpu_trace.errors import GpuTraceError
from gpu_trace.replay.cluster import ClusterSpec
from gpu_trace.replay.run import ReplayConfig
from gpu_trace.replay.sweep import MAX_RETRIES, Batch, PlannedRun, RunOutput, SweepError, execute


def sweep_run(jobs: pl.DataFrame, spec: ClusterSpec, config: ReplayConfig) -> RunOutput | str:
    """The Ray task (its worker shows as ``ray::sweep_run``): :func:`execute`, with a
    run's own error returned as text (deterministic, so never retried)."""
    try:
        return execute(jobs, spec, config)
    except GpuTraceError as exc:
        return str(exc)


def _ray() -> Any:
    try:
        return importlib.import_module("ray")
    except ImportError:
        raise SweepError(
            "Ray is not installed: pip install 'gpu-trace[ray]' "
            "(or run the sweep in this process with --workers 1)"
        ) from None


@dataclass
class RaySession:
    ray: Any
    workers: int
    owned: bool

    def run(
        self, jobs: pl.DataFrame, specs: dict[str, ClusterSpec], todo: list[PlannedRun]
    ) -> Iterator[Batch]:
        ray = self.ray
        task = ray.remote(num_cpus=1, max_retries=MAX_RETRIES, retry_exceptions=False)(sweep_run)
        jobs_ref = ray.put(jobs)
        spec_refs = {name: ray.put(s) for name, s in specs.items()}
        queue = iter(todo)
        pending: dict[Any, PlannedRun] = {}
        window = max(2 * self.workers, 1)

        def submit() -> None:
            while len(pending) < window:
                planned = next(queue, None)
                if planned is None:
                    return
                ref = task.remote(jobs_ref, spec_refs[planned.config.cluster], planned.config)
                pending[ref] = planned

        submit()
        while pending:
            ready, rest = ray.wait(list(pending), num_returns=1)
            if rest:
                more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
                ready += more
            batch: Batch = [(pending.pop(ref), self._get(ref)) for ref in ready]
            submit()
            yield batch

    def _get(self, ref: Any) -> RunOutput | str:
        """A task's result; a worker that died more than MAX_RETRIES times is the run's
        failure, not the sweep's."""
        try:
            out: RunOutput | str = self.ray.get(ref)
        except (self.ray.exceptions.WorkerCrashedError, self.ray.exceptions.NodeDiedError):
            return f"its worker died {MAX_RETRIES + 1} times"
        return out

    def close(self) -> None:
        if self.owned and self.ray.is_initialized():
            self.ray.shutdown()


CONNECT_TIMEOUT_S = 5.0


def _reachable(address: str) -> None:
    """Fail in seconds, with one line, when ``HOST:PORT`` (or ``ray://HOST:PORT``) does
    not accept a connection: Ray itself retries for minutes. ``auto`` is left to Ray,
    which answers at once when no cluster runs on this machine."""
    if address == "auto":
        return
    hostport = address.removeprefix("ray://")
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit():
        raise SweepError(f"--address {address!r} is not auto, HOST:PORT or ray://HOST:PORT")
    try:
        socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise SweepError(f"cannot reach the Ray cluster at {address}: {exc}") from None


def connect(workers: int | None, address: str | None) -> RaySession:
    """Reuse a running Ray (a test fixture, a notebook), connect to ``address``, or
    start a local one with ``workers`` CPUs (default: every core)."""
    if address:
        _reachable(address)
    ray = _ray()
    if ray.is_initialized():
        owned = False
    elif address:
        try:
            ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
        except (ConnectionError, TimeoutError, RuntimeError) as exc:
            why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise SweepError(f"cannot reach the Ray cluster at {address}: {why}") from None
        owned = True
    else:
        ray.init(
            num_cpus=workers or os.cpu_count() or 1,
            include_dashboard=False,
            log_to_driver=False,
            logging_level=logging.WARNING,
        )
        owned = True
    cpus = int(ray.cluster_resources().get("CPU", 1))
    return RaySession(ray, min(workers, cpus) if workers else cpus, owned)
