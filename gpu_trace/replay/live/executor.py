"""The live executor: the simulator's policies schedule real processes in wall-clock time.

:class:`LiveEngine` *is* an :class:`~gpu_trace.replay.kernel.engine.Engine` (same per-job state,
same cluster bookkeeping, same ``try_start`` / ``preempt`` / ``set_timer`` / ``reject``
that the admission, scheduling and placement objects call, through the same read-only
view) and runs the engine's own loop (:meth:`Engine.run`); it only plugs in another
:class:`~gpu_trace.replay.kernel.engine.Clock` (itself):

- time is measured, not advanced: ``now`` = (wall seconds since the run began) x
  ``time_scale``, so every time written is in trace seconds like the simulator's;
- a start launches a worker process pinned to its devices and a completion is that
  process exiting, not a heap event (``simulated = False``: the engine pushes no
  expected-finish events; ``end_time`` is still kept, SRTF reads it).

``wait`` blocks in one ``selectors`` call on the workers' pidfds (readable when the
process exits) with a timeout at the next due arrival, policy timer or SIGKILL
escalation, so the executor sleeps between events: no polling, and each wakeup is
measured (``wake_lag`` = how late it woke; ``overhead`` = how long the pass took,
spawns included). At one instant, as in the simulator: exits, then arrivals, then
timers, then one ``schedule()`` pass.

Process outcomes: exit 0 = finished; any other exit = ``failed`` (the injected
``--fail-rate`` failures exit 3); killed by a signal the executor did not send =
``crashed``. Failed and crashed jobs release their devices and the policy is told
(``on_finish``) exactly as for a completion; the executor keeps going. Preemption sends
SIGTERM to the worker's process group (SIGKILL after ``grace_s``); the job is requeued
with the engine's remaining time plus ``restore_s`` and restarts as a new process.
Ctrl-C (or SIGTERM to the executor) stops every worker the same way and the results so
far are written, running and queued jobs as ``unfinished`` (reason ``interrupted``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO, Any

import numpy as np
import numpy.typing as npt
import polars as pl

from gpu_trace.errors import GpuTraceError
from gpu_trace.replay import policy as base
from gpu_trace.replay.build import build_engine
from gpu_trace.replay.cluster import ClusterSpec
from gpu_trace.replay.config import ReplayConfig
from gpu_trace.replay.kernel.engine import INF, STOP_FAIL, Engine, EngineOptions
from gpu_trace.replay.live.devices import Devices, parse_devices
from gpu_trace.replay.score import RunResult, score
from gpu_trace.replay.simulate import write
from gpu_trace.replay.workload import WORKLOAD_COLUMNS, Workload
from gpu_trace.store.scan import scan

POLL_S = 0.005
"""Exit polling period where ``os.pidfd_open`` is missing (not Linux >= 5.3)."""

WORKER_MODULE = "gpu_trace.replay.live.worker"


@dataclass(frozen=True)
class LiveOptions:
    """How the trace is run for real; saved under ``live`` in ``config.resolved.json``."""

    devices: str = "emulated:8"
    time_scale: float = 3600.0
    """Trace seconds per wall-clock second (3600: one trace hour per second)."""
    jobs: int | None = None
    """Replay the first N replayable jobs by submit time (None = all)."""
    dataset: str | None = None
    """Only this dataset of the source (openb has three pod lists with the same names)."""
    fail_rate: float = 0.0
    """Share of jobs (seeded draw) whose worker fails at a random 10-90 % of its work."""
    fail_at: dict[str, float] = field(default_factory=dict)
    """Explicit failures: job_id -> fraction of its work after which its worker fails."""
    duty: float | None = None
    """Busy share of each 100 ms period: emulated default 0 (sleep), cuda default 0.8
    (x the job's GPU share for fractional jobs)."""
    gpu_mem_mb: float = 1024.0
    """cuda: MiB each worker holds per GPU (x its GPU share)."""
    grace_s: float = 5.0
    """Wall seconds between SIGTERM and SIGKILL when stopping a worker."""
    telemetry: bool = True
    """cuda: run the NVML sampler for the run's duration and join it to the jobs."""
    telemetry_interval_s: float = 1.0
    keep_gpu_type: bool = False
    """Keep the trace's GPU-type constraints (off: the host's devices are one type, and
    a constraint naming another model would reject every job)."""


@dataclass
class _Proc:
    j: int
    attempt: int
    popen: subprocess.Popen[bytes]
    fd: int | None
    devices: list[int]
    start_s: float
    row: int
    """Index of its :class:`_Attempt` in ``LiveEngine.attempts``."""
    stopping: str | None = None
    """Why the executor is stopping it (preempted / interrupted); None while it runs."""
    kill_at: float = INF


@dataclass
class _Attempt:
    job_id: str
    attempt: int
    pid: int
    devices: str
    start_time_s: float
    end_time_s: float | None = None
    exit_code: int | None = None
    ended_by: str | None = None
    start_wall: float = 0.0
    end_wall: float | None = None


class LiveEngine(Engine):
    """The engine with real processes and a measured clock (see the module docstring);
    it is its own :class:`~gpu_trace.replay.kernel.engine.Clock`.
    """

    reassign_in_instant = False  # a stop kills the worker: a restart pays its restore

    simulated = False

    def __init__(
        self,
        workload: Workload,
        devices: Devices,
        options: EngineOptions,
        live: LiveOptions,
        *,
        estimate_s: npt.NDArray[np.float64] | None = None,
        fail_at: npt.NDArray[np.float64] | None = None,
        log: IO[bytes] | None = None,
        on_launch: Callable[[int, int], None] | None = None,
        on_progress: Callable[[int, int | None, str], None] | None = None,
    ) -> None:
        if live.time_scale <= 0:
            msg = "--time-scale must be positive"
            raise GpuTraceError(msg)
        super().__init__(workload, devices.spec, options, estimate_s)
        self.clock = self
        self.devices = devices
        self.live = live
        self.scale = float(live.time_scale)
        n = workload.n
        self.fail_at = fail_at if fail_at is not None else np.full(n, np.nan)
        self.worker_log = log
        self.on_launch = on_launch
        self.on_progress = on_progress
        self.jobs_ended = 0
        """Jobs whose worker ended for good (finished, failed or crashed), for progress."""
        self.job_ids: list[str] = workload.frame["job_id"].to_list()
        self.t0 = time.monotonic()
        self.t0_unix = time.time()
        self.sel = selectors.DefaultSelector()
        self.pidfd = hasattr(os, "pidfd_open")
        self.procs: dict[int, _Proc] = {}
        self.stopping: dict[int, _Proc] = {}
        self.attempts: list[_Attempt] = []
        self.n_attempts = [0] * n
        self.outcome: dict[int, str] = {}
        self.ended: list[float] = [INF] * n
        self.exit_code: list[int | None] = [None] * n
        self.overhead_s: list[float] = []
        self.lag_s: list[float] = []
        self.wakeups = 0
        self.interrupted = False
        self.wall_s = 0.0
        self._exited_now: list[_Proc] = []
        self._wake = 0.0

    # -- the seams the policies call ---------------------------------------------------

    def try_start(self, j: int, hold: Sequence[tuple[int, int, int]] = ()) -> bool:
        """The engine's start, then launch the job's worker on its devices."""
        if not super().try_start(j, hold):
            return False
        self._launch(j)
        return True

    def preempt(self, j: int) -> None:
        """The engine's preemption, then stop the job's worker (SIGTERM, SIGKILL after
        the grace); the devices are free for the engine at once.
        """
        proc = self.procs.pop(j)
        super().preempt(j)
        self._terminate(proc, "preempted")

    # -- processes -------------------------------------------------------------------------

    def _wall(self, trace_s: float) -> float:
        return self.t0 + trace_s / self.scale

    def _launch(self, j: int) -> None:
        dev = self.devices
        ids = dev.ids(self.alloc[j])
        share = self.milli[j] / 1000.0
        # the job ends where the engine expects it: start + remaining x slowdown
        deadline = self._wall(self.now + self.remaining[j] * self.slow[j])
        cmd = [
            sys.executable,
            "-m",
            WORKER_MODULE,
            "--job",
            self.job_ids[j],
            "--backend",
            dev.kind,
            "--deadline",
            repr(deadline),
            "--parent",
            str(os.getpid()),
        ]
        fa = float(self.fail_at[j])
        if fa == fa:  # not NaN: fail once the work left reaches (1 - fa) x duration
            at = self.now + (self.remaining[j] - (1.0 - fa) * self.duration[j]) * self.slow[j]
            cmd += ["--fail-at", repr(self._wall(max(at, self.now)))]
        env = dict(os.environ)
        env["GPU_TRACE_LIVE_WORKER"] = "1"
        env["GPU_TRACE_JOB"] = self.job_ids[j]
        env["GPU_TRACE_SLOTS"] = ",".join(str(i) for i in ids)
        if dev.kind == "cuda":
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in ids)
            duty = (0.8 if self.live.duty is None else self.live.duty) * share
            cmd += ["--duty", repr(duty), "--mem-mb", repr(self.live.gpu_mem_mb * share)]
        else:
            cmd += ["--duty", repr(self.live.duty or 0.0)]
        if self.preemptions[j]:
            cmd += ["--restore-s", repr(self.options.restore_s / self.scale)]
        popen = subprocess.Popen(
            cmd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self.worker_log if self.worker_log is not None else subprocess.DEVNULL,
            start_new_session=True,  # no terminal SIGINT; killpg reaches its children
            close_fds=True,
        )
        fd: int | None = None
        attempt = self.n_attempts[j]
        self.n_attempts[j] += 1
        proc = _Proc(j, attempt, popen, None, ids, self.now, len(self.attempts))
        if self.pidfd:
            try:
                fd = os.pidfd_open(popen.pid)
            except OSError:
                self.pidfd = False
        if fd is not None:
            proc.fd = fd
            self.sel.register(fd, selectors.EVENT_READ, proc)
        self.procs[j] = proc
        self.attempts.append(
            _Attempt(
                self.job_ids[j],
                attempt,
                popen.pid,
                ";".join(str(i) for i in ids),
                self.now,
                start_wall=time.time(),
            )
        )
        if self.on_launch is not None:
            self.on_launch(j, popen.pid)

    def _signal(self, proc: _Proc, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.popen.pid, sig)

    def _terminate(self, proc: _Proc, why: str) -> None:
        proc.stopping = why
        proc.kill_at = time.monotonic() + self.live.grace_s
        self.stopping[proc.popen.pid] = proc
        self._signal(proc, signal.SIGTERM)

    def _reap(self, proc: _Proc) -> None:
        rc = proc.popen.wait()
        if proc.fd is not None:
            self.sel.unregister(proc.fd)
            os.close(proc.fd)
        att = self.attempts[proc.row]
        att.end_time_s = self.now
        att.end_wall = time.time()
        att.exit_code = rc
        if proc.stopping is not None:
            self.stopping.pop(proc.popen.pid, None)
            att.ended_by = proc.stopping
            return
        j = proc.j
        self.procs.pop(j, None)
        self.exit_code[j] = rc
        self.ended[j] = self.now
        self.jobs_ended += 1
        self.version[j] += 1
        if rc == 0:
            att.ended_by = "finished"
            self.finished(j)
            return
        outcome = "crashed" if rc < 0 else "failed"
        att.ended_by = outcome
        self.outcome[j] = outcome
        self._stop(j, STOP_FAIL)
        self.end_time[j] = INF
        self.scheduler.on_finish(j)

    def _exited(self, timeout: float | None) -> list[_Proc]:
        """Block until a worker exits or ``timeout``; the exited workers."""
        if self.pidfd:
            return [key.data for key, _ in self.sel.select(timeout)]
        if timeout is None or timeout > POLL_S:
            timeout = POLL_S
        time.sleep(max(timeout, 0.0))
        every = [*self.procs.values(), *self.stopping.values()]
        return [p for p in every if p.popen.poll() is not None]

    # -- the loop: Engine.run with this clock -------------------------------------------

    def run(self, until: float = INF) -> None:
        """Run every job for real; returns when all ended (or on Ctrl-C)."""
        previous = None
        if threading.current_thread() is threading.main_thread():
            previous = signal.signal(signal.SIGTERM, _raise_interrupt)
        start = time.perf_counter()
        self.t0 = time.monotonic()
        self.t0_unix = time.time()
        try:
            super().run(until)
        except KeyboardInterrupt:
            self.interrupted = True
        finally:
            self._shutdown()
            self.wall_s = time.perf_counter() - start
            if self.on_progress is not None:  # the last exits are reaped after a wait
                self.on_progress(self.jobs_ended, self.w.n, f"trace clock {self.now / 3600:,.2f} h")
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)

    def wait(self, due: float, arrivals_left: bool) -> float | None:
        """Sleep until ``due`` (trace s), a worker exit or a SIGKILL escalation; the
        measured time, or None when nothing runs and nothing is due.
        """
        idle = not self.procs and not self.stopping and (not self.heap or not self.waiting)
        if (not arrivals_left or due == INF) and idle:
            return None
        timeout: float | None = None
        if due < INF:
            timeout = max(0.0, self._wall(due) - time.monotonic())
        if self.stopping:
            kill = min(p.kill_at for p in self.stopping.values()) - time.monotonic()
            timeout = max(0.0, kill) if timeout is None else min(timeout, max(0.0, kill))
        self._exited_now = self._exited(timeout)
        wake = self._wake = time.monotonic()
        self.wakeups += 1
        now = (wake - self.t0) * self.scale
        if due < INF and now >= due - 1e-9:
            self.lag_s.append(max(0.0, wake - self._wall(due)))
            now = max(now, due)
        if self.on_progress is not None:
            self.on_progress(self.jobs_ended, self.w.n, f"trace clock {now / 3600:,.2f} h")
        return now

    def complete(self) -> None:
        """Reap the workers that exited (finished, failed, crashed or stopped) and
        escalate overdue stops to SIGKILL.
        """
        for proc in self._exited_now:
            self._reap(proc)
        self._exited_now = []
        for proc in list(self.stopping.values()):
            if self._wake >= proc.kill_at:
                self._signal(proc, signal.SIGKILL)
                proc.kill_at = INF

    def after_pass(self) -> None:
        """Measure the pass (wakeup to now, spawns included) as scheduling overhead."""
        self.overhead_s.append(time.monotonic() - self._wake)

    def _shutdown(self) -> None:
        """Stop every worker still alive (SIGTERM, then SIGKILL after the grace) and
        reap them, so no process outlives the executor.
        """
        self.set_now((time.monotonic() - self.t0) * self.scale)
        for proc in list(self.procs.values()):
            self.procs.pop(proc.j)
            self._terminate(proc, "interrupted")
        while self.stopping:
            wait = min(p.kill_at for p in self.stopping.values()) - time.monotonic()
            try:
                exited = self._exited(max(0.0, min(wait, 1.0)))
            except KeyboardInterrupt:  # a second Ctrl-C: kill now
                exited = []
                for proc in self.stopping.values():
                    proc.kill_at = 0.0
            self.set_now((time.monotonic() - self.t0) * self.scale)
            for proc in exited:
                self._reap(proc)
            for proc in list(self.stopping.values()):
                if time.monotonic() >= proc.kill_at:
                    self._signal(proc, signal.SIGKILL)
                    proc.kill_at = time.monotonic() + 1.0
        self.sel.close()

    # -- results -------------------------------------------------------------------------

    def attempts_frame(self) -> pl.DataFrame:
        """One row per worker process (a preempted job has several): devices, trace
        times, exit code, what ended it, and its wall-clock start/end in UTC; saved as
        the run's ``attempts.parquet`` and joined with telemetry.
        """
        rows = [dataclasses.asdict(a) for a in self.attempts]
        schema = {
            "job_id": pl.String,
            "attempt": pl.Int32,
            "pid": pl.Int64,
            "devices": pl.String,
            "start_time_s": pl.Float64,
            "end_time_s": pl.Float64,
            "exit_code": pl.Int32,
            "ended_by": pl.String,
            "start_wall": pl.Float64,
            "end_wall": pl.Float64,
        }
        frame = (
            pl.DataFrame(rows, schema=schema, orient="row") if rows else pl.DataFrame(schema=schema)
        )
        return frame.with_columns(
            pl.from_epoch((pl.col("start_wall") * 1e6).cast(pl.Int64), "us")
            .dt.replace_time_zone("UTC")
            .alias("start_utc"),
            pl.from_epoch((pl.col("end_wall") * 1e6).cast(pl.Int64), "us")
            .dt.replace_time_zone("UTC")
            .alias("end_utc"),
        ).drop("start_wall", "end_wall")


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


# -- preparing a run ---------------------------------------------------------------------


def select_jobs(jobs: pl.DataFrame, n: int | None, *, keep_gpu_type: bool = False) -> pl.DataFrame:
    """The first ``n`` replayable jobs by submit time (the simulator's own selection and
    order, via :class:`Workload`), as canonical rows in that order.
    """
    have = jobs.columns
    frame = jobs.with_columns(
        pl.lit(None, dtype=pl.String).alias(c)
        for c in ("user", "vc", "name", "gpu_type")
        if c not in have
    )
    if "start_time" not in have:
        frame = frame.with_columns(pl.lit(None, dtype=pl.Datetime("us", "UTC")).alias("start_time"))
    frame = frame.select(WORKLOAD_COLUMNS)
    if not keep_gpu_type:
        frame = frame.with_columns(pl.lit(None, dtype=pl.String).alias("gpu_type"))
    keyed = frame.with_row_index("_row").with_columns(
        pl.col("_row").cast(pl.String).alias("job_id")
    )
    w = Workload.from_jobs(keyed.drop("_row"))
    rows = w.frame["job_id"].cast(pl.UInt32)
    if n is not None:
        rows = rows.head(n)
    return frame[rows.to_list()]


def failure_plan(
    job_ids: list[str], rate: float, explicit: dict[str, float], seed: int
) -> npt.NDArray[np.float64]:
    """Per job: the fraction of its work after which its worker fails (NaN = never).
    Seeded, so the simulated twin in ``validate`` knows the same plan.
    """
    if not 0.0 <= rate <= 1.0:
        msg = "--fail-rate must be within 0..1"
        raise GpuTraceError(msg)
    rng = np.random.default_rng([seed, 8])
    n = len(job_ids)
    draw = rng.random(n) < rate
    frac = rng.uniform(0.1, 0.9, n)
    plan = np.where(draw, frac, np.nan)
    if explicit:
        for k, jid in enumerate(job_ids):
            if jid in explicit:
                f = float(explicit[jid])
                if not 0.0 <= f <= 1.0:
                    msg = f"fail_at for {jid} must be within 0..1"
                    raise GpuTraceError(msg)
                plan[k] = f
    return plan


@dataclass
class LiveResult:
    """A live run: the replay tables (``mode = live``), its worker attempts and paths."""

    result: RunResult
    engine: LiveEngine
    attempts: pl.DataFrame
    out_dir: Path
    usage: pl.DataFrame | None = None
    telemetry_datasets: list[str] = field(default_factory=list)


class _Telemetry:
    """The NVML sampler in a thread for the run's duration (ticks on the sampler's
    public ``tick``; one flush at the end through the store's writer).
    """

    def __init__(self, nvml: Any, store: Path, interval_s: float) -> None:
        from gpu_trace.telemetry.nvml import Sampler

        self.sampler = Sampler(
            nvml, store=store, host=socket.gethostname(), interval_s=interval_s, flush_s=INF
        )
        self.sampler.open()
        self.interval_s = interval_s
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, name="nvml-sampler", daemon=True)
        self.datasets: list[str] = []
        self.error: str | None = None

    def _run(self) -> None:
        try:
            while True:
                self.sampler.tick()
                if self.stop_event.wait(self.interval_s):
                    return
        except Exception as exc:  # telemetry must never kill the run
            self.error = f"{type(exc).__name__}: {exc}"

    def __enter__(self) -> _Telemetry:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_event.set()
        self.thread.join()
        self.sampler.tick()  # a last sample at the end of the run
        ds = self.sampler.flush()
        if ds:
            self.datasets.append(ds)
        with contextlib.suppress(Exception):
            self.sampler.nvml.nvmlShutdown()


def _check_backend(devices: Devices) -> None:
    """Fail before the run, in one line, when cuda devices cannot be driven."""
    if devices.kind != "cuda":
        return
    import importlib.util

    if not any(importlib.util.find_spec(m) for m in ("cupy", "torch")):
        msg = (
            "--devices cuda:... needs a GPU array library: install CuPy (pip install "
            "cupy-cuda12x) or PyTorch; use --devices emulated:N without a GPU"
        )
        raise GpuTraceError(msg)


def run_live(
    jobs: pl.DataFrame,
    config: ReplayConfig,
    live: LiveOptions,
    out_dir: Path,
    *,
    store: Path | None = None,
    nvml: Any = None,
    on_launch: Callable[[int, int], None] | None = None,
    on_progress: Callable[[int, int | None, str], None] | None = None,
) -> LiveResult:
    """Run canonical ``jobs`` (already selected, see :func:`select_jobs`) for real and
    write the results to ``out_dir`` and the store.
    """
    devices = parse_devices(live.devices)
    _check_backend(devices)
    config.validate()
    if base.needs_estimates(config.scheduler) and config.estimator != "oracle":
        config = dataclasses.replace(config, estimator="oracle")  # shown as <name>-oracle
    config = dataclasses.replace(config, cluster=devices.cluster, load=1.0)
    out_dir.mkdir(parents=True, exist_ok=True)
    # replayable rows only, in the workload's order, so row k is workload job k
    jobs = select_jobs(jobs, None, keep_gpu_type=True)
    w = Workload.from_jobs(jobs)
    if not w.n:
        msg = "no replayable jobs (each needs submit_time, run_s and gpus)"
        raise GpuTraceError(msg)
    ids = w.frame["job_id"].to_list()
    plan = failure_plan(ids, live.fail_rate, live.fail_at, config.seed)
    jobs.with_columns(pl.Series("fail_at", plan).fill_nan(None)).write_parquet(
        out_dir / "input_jobs.parquet"
    )
    telemetry: _Telemetry | None = None
    if devices.kind == "cuda" and live.telemetry and store is not None:
        from gpu_trace.telemetry.nvml import NvmlUnavailable, load_nvml

        try:
            telemetry = _Telemetry(nvml or load_nvml(), store, live.telemetry_interval_s)
        except NvmlUnavailable as exc:
            sys.stderr.write(f"warning: no telemetry: {exc}\n")
    elif nvml is not None and store is not None:
        telemetry = _Telemetry(nvml, store, live.telemetry_interval_s)
    with (out_dir / "workers.log").open("ab") as log:

        def make(
            w: Workload,
            spec: ClusterSpec,
            options: EngineOptions,
            estimate_s: npt.NDArray[np.float64] | None,
        ) -> LiveEngine:
            return LiveEngine(
                w,
                devices,
                options,
                live,
                estimate_s=estimate_s,
                fail_at=plan,
                log=log,
                on_launch=on_launch,
                on_progress=on_progress,
            )

        engine = build_engine(config, w, devices.spec, make=make)
        with telemetry if telemetry is not None else contextlib.nullcontext():
            engine.run()
    result = _live_result(config, live, devices, w, engine)
    attempts = engine.attempts_frame()
    attempts.write_parquet(out_dir / "attempts.parquet")
    write(result, store, out_dir)
    datasets = telemetry.datasets if telemetry is not None else []
    usage = None
    if telemetry is not None and store is not None and attempts.height:
        usage = _join_telemetry(store, attempts, out_dir)
    resolved = json.loads((out_dir / "config.resolved.json").read_text(encoding="utf-8"))
    resolved.update(
        {
            "mode": "live",
            "replay": dataclasses.asdict(config),
            "live": dataclasses.asdict(live),
            "devices_resolved": {"kind": devices.kind, "ids": devices.physical},
            "store": None if store is None else str(store),
            "interrupted": engine.interrupted,
            "telemetry_datasets": datasets,
            "telemetry_error": telemetry.error if telemetry is not None else None,
            "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(engine.t0_unix)),
        }
    )
    (out_dir / "config.resolved.json").write_text(
        json.dumps(resolved, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8"
    )
    return LiveResult(result, engine, attempts, out_dir, usage, datasets)


def _live_result(
    config: ReplayConfig, live: LiveOptions, devices: Devices, w: Workload, engine: LiveEngine
) -> RunResult:
    """Score with the simulator's own :func:`~gpu_trace.replay.score.score`, then add
    what only a live run has.
    """
    live_fields = {k: v for k, v in dataclasses.asdict(live).items() if k != "telemetry"}
    base_result = score(
        config,
        devices.spec,
        w,
        engine,
        w.duration_s,
        None,
        engine.wall_s,
        experiment={"mode": "live", "live": live_fields},
    )
    n = w.n
    jobs = base_result.jobs
    extra = jobs.height - n
    outcome = jobs["outcome"].to_list()
    reason = jobs["reason"].to_list()
    for j, o in engine.outcome.items():
        outcome[j] = o
        reason[j] = f"worker exit status {engine.exit_code[j]}"
    if engine.interrupted:
        for j in range(n):
            if outcome[j] == "unfinished":
                reason[j] = "interrupted"
    ended = [None if e == INF else e for e in engine.ended]
    jobs = jobs.with_columns(
        pl.Series("outcome", outcome, dtype=pl.String),
        pl.Series("reason", reason, dtype=pl.String),
        pl.lit("live").alias("mode"),
        pl.Series("end_time_s", ended + [None] * extra, dtype=pl.Float64),
        pl.Series("exit_code", engine.exit_code + [None] * extra, dtype=pl.Int32),
        pl.Series("attempts", engine.n_attempts + [None] * extra, dtype=pl.Int32),
    )
    over = np.asarray(engine.overhead_s, dtype=np.float64) * 1000
    lag = np.asarray(engine.lag_s, dtype=np.float64) * 1000
    count = {o: outcome.count(o) for o in ("unfinished", "failed", "crashed")}
    runs = base_result.runs.with_columns(
        pl.lit(int(count.get("unfinished", 0))).cast(pl.Int64).alias("jobs_unfinished"),
        pl.lit("live").alias("mode"),
        pl.lit(devices.text).alias("devices"),
        pl.lit(float(live.time_scale)).alias("time_scale"),
        pl.lit(int(count.get("failed", 0))).cast(pl.Int64).alias("jobs_failed"),
        pl.lit(int(count.get("crashed", 0))).cast(pl.Int64).alias("jobs_crashed"),
        pl.lit(float(over.mean()) if over.size else None, dtype=pl.Float64).alias(
            "overhead_mean_ms"
        ),
        pl.lit(float(np.percentile(over, 99)) if over.size else None, dtype=pl.Float64).alias(
            "overhead_p99_ms"
        ),
        pl.lit(float(lag.mean()) if lag.size else None, dtype=pl.Float64).alias("wake_lag_mean_ms"),
        pl.lit(engine.wakeups).cast(pl.Int64).alias("wakeups"),
        pl.lit(engine.wall_s).alias("wall_s"),
    )
    return dataclasses.replace(base_result, runs=runs, jobs=jobs)


def _join_telemetry(store: Path, attempts: pl.DataFrame, out_dir: Path) -> pl.DataFrame:
    """Per-job GPU usage from the samples taken during the run: the attempts become a
    ``telemetry jobs --jobs`` file (job_id,host,gpu_indices,start,end) and go through the
    telemetry package's interval join as is.
    """
    from gpu_trace.analyses.job_usage import usage_from_file

    host = socket.gethostname()
    path = out_dir / "placements.csv"
    attempts.filter(pl.col("end_utc").is_not_null()).select(
        "job_id",
        pl.lit(host).alias("host"),
        pl.col("devices").alias("gpu_indices"),
        pl.col("start_utc").dt.strftime("%Y-%m-%dT%H:%M:%S%.6f+00:00").alias("start"),
        pl.col("end_utc").dt.strftime("%Y-%m-%dT%H:%M:%S%.6f+00:00").alias("end"),
    ).write_csv(path)
    usage = usage_from_file(store, path)
    usage.write_parquet(out_dir / "job_usage.parquet")
    return usage


def select_live_jobs(
    store: Path,
    source: str,
    n: int | None = None,
    dataset: str | None = None,
    keep_gpu_type: bool = False,
) -> pl.DataFrame:
    """The source's jobs a live run replays (``--jobs``, ``--dataset``), in order."""
    jobs = scan(store, "jobs", [source]).collect()
    if dataset is not None:
        jobs = jobs.filter(pl.col("dataset") == dataset)
    if not jobs.height:
        what = f" dataset {dataset!r}" if dataset else ""
        msg = f"no jobs in the store for source {source!r}{what}"
        raise GpuTraceError(msg)
    return select_jobs(jobs, n, keep_gpu_type=keep_gpu_type)


def live_from_store(
    store: Path,
    config: ReplayConfig,
    live: LiveOptions,
    out_dir: Path,
    *,
    write_store: bool = True,
) -> LiveResult:
    """``gpu-trace replay live``: select the source's jobs from the store and run them."""
    chosen = select_live_jobs(store, config.source, live.jobs, live.dataset, live.keep_gpu_type)
    return run_live(chosen, config, live, out_dir, store=store if write_store else None)
