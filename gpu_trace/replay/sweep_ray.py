"""The Ray backend of a sweep: one Ray task per run, the workload in the object store
once, at most two tasks per worker in flight (a finished run's slot is refilled at
once), results handed to the driver in batches: every run that finishes within
:data:`COMMIT_INTERVAL_S` of the previous commit goes into the next one. Ray is an optional extra (``pip install 'gpu-trace[ray]'``) and is imported
only here, only when a sweep asks for it.

The backend knows nothing of what a run is: :meth:`RaySession.run` is given the
function that runs one grid point, ``point(workload, config)`` (``replay sweep``'s
:func:`gpu_trace.replay.sweep.execute_point`, ``serve sweep``'s
:func:`gpu_trace.serve.sweep.execute_point`), the workload every run shares and the
configs; the same function is what each sweep calls in process, so a run gives the
same result either way.

Ray is reached through ``importlib`` and typed ``Any`` on purpose: the type check must
give the same answer whether or not the extra is installed.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import math
import os
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from gpu_trace.errors import GpuTraceError
from gpu_trace.replay.sweep import MAX_RETRIES, SweepError

Key = TypeVar("Key")
Workload = TypeVar("Workload")
Config = TypeVar("Config")
Output = TypeVar("Output")


def sweep_run(
    point: Callable[[Workload, Config], Output], workload: Workload, config: Config
) -> Output | str:
    """The Ray task (its worker shows as ``ray::sweep_run``): ``point(workload,
    config)``, with a run's own error returned as text (deterministic, so never
    retried); an output with a ``node`` field gets the Ray node it ran on.
    """
    try:
        out = point(workload, config)
    except GpuTraceError as exc:
        return str(exc)
    if dataclasses.is_dataclass(out) and "node" in {f.name for f in dataclasses.fields(out)}:
        node = _ray().get_runtime_context().get_node_id()
        return dataclasses.replace(out, node=node)  # type: ignore[type-var]
    return out


def _ray() -> Any:
    try:
        return importlib.import_module("ray")
    except ImportError:
        msg = (
            "Ray is not installed: pip install 'gpu-trace[ray]' "
            "(or run the sweep in this process with --workers 1)"
        )
        raise SweepError(msg) from None


COMMIT_INTERVAL_S = 1.0
"""Least time between two store commits of a Ray sweep's driver: runs that finish
within it are committed together, as one generation. A commit costs the driver about
the same whatever it holds (it links every file of the store and fsyncs every folder),
and on a small machine the driver shares the cores with the workers, so one commit per
finished run is the overhead that grows with the worker count. A killed driver loses
at most this long of finished, uncommitted runs (they count as in flight: resume
reruns them)."""


@dataclass
class RaySession:
    """A connected Ray (the module), the worker count that sizes the in-flight window,
    and whether this sweep started Ray itself (then :meth:`close` shuts it down; a
    cluster given by ``--address`` is left running).
    """

    ray: Any
    workers: int
    owned: bool
    commit_interval_s: float = COMMIT_INTERVAL_S

    def run(
        self,
        point: Callable[[Workload, Config], Output],
        workload: Workload,
        todo: Sequence[tuple[Key, Config]],
    ) -> Iterator[list[tuple[Key, Output | str]]]:
        """Run ``point(workload, config)`` for each ``(key, config)`` of ``todo`` as a
        Ray task, at most 2 x workers in flight, and yield the finished runs as
        ``(key, output or error text)`` in batches, one per commit interval (the
        driver commits each batch before asking for the next). ``point`` must be a
        module-level function (Ray ships it to the workers by reference).
        """
        ray = self.ray
        task = ray.remote(num_cpus=1, max_retries=MAX_RETRIES, retry_exceptions=False)(sweep_run)
        workload_ref = ray.put(workload)
        queue = iter(todo)
        pending: dict[Any, Key] = {}
        window = max(2 * self.workers, 1)

        def submit() -> None:
            while len(pending) < window:
                item = next(queue, None)
                if item is None:
                    return
                key, config = item
                pending[task.remote(point, workload_ref, config)] = key

        submit()
        batch: list[tuple[Key, Output | str]] = []
        due = 0.0
        last_commit = -math.inf
        while pending:
            if batch:
                left = due - time.monotonic()
                if left <= 0:
                    yield batch  # the driver commits it (one generation) before resuming
                    batch = []
                    last_commit = time.monotonic()
                    continue
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=left)
            else:
                ready, _ = ray.wait(list(pending), num_returns=1)
                due = last_commit + self.commit_interval_s
            rest = [ref for ref in pending if ref not in ready]
            if rest:
                more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
                ready += more
            batch += [(pending.pop(ref), self._get(ref)) for ref in ready]
            submit()  # every finished run frees a slot at once, before any commit
        if batch:
            yield batch

    def _get(self, ref: Any) -> Any:
        """A task's result (the run's output or its error text); a worker that died
        more than MAX_RETRIES times is the run's failure, not the sweep's.
        """
        try:
            return self.ray.get(ref)
        except (self.ray.exceptions.WorkerCrashedError, self.ray.exceptions.NodeDiedError):
            return f"its worker died {MAX_RETRIES + 1} times"

    def close(self) -> None:
        """Shut Ray down if this sweep started it."""
        if self.owned and self.ray.is_initialized():
            self.ray.shutdown()


CONNECT_TIMEOUT_S = 5.0


def _reachable(address: str) -> None:
    """Fail in seconds, with one line, when ``HOST:PORT`` (or ``ray://HOST:PORT``) does
    not accept a connection: Ray itself retries for minutes. ``auto`` is left to Ray,
    which answers at once when no cluster runs on this machine.
    """
    if address == "auto":
        return
    hostport = address.removeprefix("ray://")
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit():
        msg = f"--address {address!r} is not auto, HOST:PORT or ray://HOST:PORT"
        raise SweepError(msg)
    try:
        socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        msg = f"cannot reach the Ray cluster at {address}: {exc}"
        raise SweepError(msg) from None


def connect(workers: int | None, address: str | None) -> RaySession:
    """Reuse a running Ray (a test fixture, a notebook), connect to ``address``, or
    start a local one with ``workers`` CPUs (default: every core).
    """
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
            msg = f"cannot reach the Ray cluster at {address}: {why}"
            raise SweepError(msg) from None
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
    return RaySession(ray, min(workers, cpus) if workers else cpus, owned, COMMIT_INTERVAL_S)


def run_on_ray(
    point: Callable[[Workload, Config], Output],
    workload: Workload,
    todo: Sequence[tuple[Key, Config]],
    workers: int | None,
    address: str | None,
    summary: Any,
) -> Iterator[list[tuple[Key, Output | str]]]:
    """:func:`connect`, :meth:`RaySession.run` and close, for a sweep driver (replay's
    and the serving replay's): the session's start-up seconds, backend and worker count
    are written on ``summary`` (its ``startup_s``, ``backend`` and ``workers``) before
    the first batch.
    """
    t0 = time.perf_counter()
    session = connect(workers, address)
    summary.startup_s = time.perf_counter() - t0
    summary.backend = "ray" if address is None else f"ray at {address}"
    summary.workers = session.workers
    try:
        yield from session.run(point, workload, todo)
    finally:
        session.close()
