"""Run a sweep (:mod:`gpu_trace.replay.sweep_grid`): many replays, in process or on Ray
(local or a cluster), resumable, results streamed into the store by the driver.

Every run is a pure function of (workload, cluster, config): :func:`execute` is the one
run function, called in process (``--workers 1``, no Ray needed) or as a Ray task, so
the store rows are the same byte for byte either way. Its only measurements (wall
time, worker pid, host) are kept out of the store: ``replay_runs.wall_s`` of a sweep run
is null, the timing lives in the run's marker in the sweep folder.

The sweep folder holds ``sweep.json`` (the grid, the runs with their grid points, the
workload fingerprint) and ``runs/<run_id>.json``, one marker per finished run, written
atomically *after* the run's store commit. ``--resume`` skips every run whose marker
says done and whose rows are in the store, so a killed sweep loses only the runs that
were in flight; a run committed but not yet marked is simply run again and replaces its
own files with the same bytes (each run is exactly once in the store).

On Ray the workload is put in the object store once (``ray.put``); tasks are retried
when their worker dies (``max_retries``), never for a run's own error, which is
deterministic and recorded as ``failed`` in its marker.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from gpu_trace.errors import GpuTraceError
from gpu_trace.replay.cluster import ClusterSpec
from gpu_trace.replay.config import ReplayConfig
from gpu_trace.replay.simulate import replay, resolve_cluster, stage_run, tag_run_frames
from gpu_trace.replay.sweep_grid import SweepSpec
from gpu_trace.store.parquet import StoreTransaction
from gpu_trace.store.scan import scan

MANIFEST = "sweep.json"
MARKERS = "runs"
FOLDER_LOCK = ".sweep.lock"
"""``flock``ed by the one sweep driving a folder, from before the manifest check to its
end (released when the process dies, so a killed sweep never blocks ``--resume``)."""
MANIFEST_VERSION = 1
MAX_RETRIES = 3
"""Ray re-runs a task this many times when its worker process dies."""
TABLES = ("replay_runs", "replay_jobs", "replay_timeseries")


class SweepError(GpuTraceError):
    """The sweep folder or the store does not fit the sweep (resume of another sweep,
    a changed workload, Ray missing).
    """


@dataclass(frozen=True)
class RunOutput:
    """What a run sends back to the driver: its three tables (store-ready, ``wall_s``
    null) and the measurements that are not results.
    """

    run_id: str
    source: str
    runs: pl.DataFrame
    jobs: pl.DataFrame
    timeseries: pl.DataFrame
    wall_s: float
    pid: int
    host: str
    node: str | None = None
    """The Ray node id the run ran on (None in process): nodes sharing a host name (two
    on one machine, containers) are told apart in the markers."""


def execute(jobs: pl.DataFrame, spec: ClusterSpec, config: ReplayConfig) -> RunOutput:
    """THE run function (in process and on Ray): replay and strip the engine."""
    started = time.perf_counter()
    result = replay(jobs, spec, config)
    runs = result.runs.with_columns(pl.lit(None, pl.Float64).alias("wall_s"))
    return RunOutput(
        run_id=result.run_id,
        source=config.source,
        runs=runs,
        jobs=result.jobs,
        timeseries=result.timeseries,
        wall_s=time.perf_counter() - started,
        pid=os.getpid(),
        host=socket.gethostname(),
    )


Workload = tuple[pl.DataFrame, dict[str, ClusterSpec]]
"""What every run of a replay sweep shares: the source's jobs and the cluster specs by
name (on Ray: put in the object store once)."""


def execute_point(workload: Workload, config: ReplayConfig) -> RunOutput:
    """One grid point of a replay sweep, the function both backends call (in process,
    and as the Ray task's ``point``): :func:`execute` on the config's cluster.
    """
    jobs, specs = workload
    return execute(jobs, specs[config.cluster], config)


def write_outputs(store: Path, outputs: Sequence[RunOutput]) -> None:
    """Commit finished runs in ONE store transaction (one new generation), tagged as
    ``replay.simulate.write`` tags them (source = replayed source, dataset = run id).
    """
    if not outputs:
        return
    with StoreTransaction(store) as tx:
        for out in outputs:
            tagged = tag_run_frames(out.source, out.run_id, out.runs, out.jobs, out.timeseries)
            stage_run(tx, out.source, out.run_id, tagged)


@dataclass(frozen=True)
class PlannedRun:
    """One point of the grid as a run: its stable id, the grid values it was made from
    (for the manifest) and the replay config they resolve to.
    """

    run_id: str
    point: dict[str, Any]
    config: ReplayConfig


Batch = list[tuple["PlannedRun", RunOutput | str]]
"""Runs that finished together: written in one store commit."""


@dataclass
class Event:
    """One finished (or failed) run, for a progress display."""

    run_id: str
    status: str
    done: int
    total: int
    wall_s: float | None = None
    error: str | None = None


@dataclass
class SweepSummary:
    """What a sweep did, for the closing line and the CLI's exit code: runs planned,
    skipped as already done, ran, failed (with the error), and the backend's timings.
    """

    total: int
    already_done: int
    ran: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)
    backend: str = "in-process"
    workers: int = 1
    startup_s: float = 0.0
    wall_s: float = 0.0
    run_wall_s: list[float] = field(default_factory=list)

    def line(self) -> str:
        """The one-line summary the CLI prints at the end (counts, backend, timings)."""
        runs = sum(self.run_wall_s)
        per = f", {runs / len(self.run_wall_s):.2f} s per run" if self.run_wall_s else ""
        start = f", start-up {self.startup_s:.1f} s" if self.backend != "in-process" else ""
        return (
            f"sweep: {self.total} runs ({self.already_done} already done), ran {self.ran}, "
            f"failed {len(self.failed)}, in {self.wall_s:.1f} s on {self.backend} with "
            f"{self.workers} worker{'s' if self.workers != 1 else ''}{start}{per}"
        )


def plan(spec: SweepSpec) -> list[PlannedRun]:
    """Every run of the grid with its stable id (the config's hash)."""
    runs = [PlannedRun(c.resolved_run_id(), p, c) for p, c in spec.configs()]
    ids = [r.run_id for r in runs]
    if len(set(ids)) != len(ids):
        msg = f"{spec.origin}: two grid points resolve to the same run"
        raise SweepError(msg)
    return runs


def workload_fingerprint(store: Path, source: str, jobs: pl.DataFrame) -> str:
    """sha256 over what the source was ingested from (file checksums per table) and the
    job count, so ``--resume`` against a re-ingested store is refused.
    """
    ingests = (
        scan(store, "ingests", [source])
        .select("table", "dataset", "file", "file_sha256", "rows_written")
        .collect()
        .sort("table", "dataset", "file")
    )
    h = hashlib.sha256(ingests.write_csv().encode())
    h.update(f"jobs={jobs.height}".encode())
    return h.hexdigest()[:16]


def _atomic_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n", "utf-8")
    tmp.replace(path)


def read_manifest(out: Path) -> dict[str, Any]:
    """The sweep folder's ``sweep.json``, checked to be a manifest of this version: a
    :class:`SweepError` naming the file when it is missing, unreadable or foreign.
    """
    path = out / MANIFEST
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        msg = f"{out}: no sweep here ({MANIFEST} is missing)"
        raise SweepError(msg) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        msg = f"{path}: not a sweep manifest ({exc})"
        raise SweepError(msg) from None
    if data.get("version") != MANIFEST_VERSION or "runs" not in data:
        msg = f"{path}: not a version-{MANIFEST_VERSION} sweep manifest"
        raise SweepError(msg)
    return data


def read_markers(out: Path) -> dict[str, dict[str, Any]]:
    """Run id -> marker, for every readable marker (a torn one is treated as absent)."""
    found: dict[str, dict[str, Any]] = {}
    folder = out / MARKERS
    if not folder.is_dir():
        return found
    for path in sorted(folder.glob("*.json")):
        try:
            found[path.stem] = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
    return found


def spec_from_manifest(out: Path) -> SweepSpec:
    """The grid a sweep folder was started with (for ``--resume`` without the file),
    axes in their original order.
    """
    from gpu_trace.replay import sweep_grid

    manifest = read_manifest(out)
    doc = dict(manifest["spec"])
    grid = doc.get("grid", {})
    order: list[str] = list(manifest.get("axes") or grid)
    doc["grid"] = {a: grid[a] for a in order if a in grid}
    return sweep_grid.parse(doc, str(out / MANIFEST))


def _stored_runs(store: Path, source: str) -> set[str]:
    ids = scan(store, "replay_runs", [source]).select("run_id").collect()["run_id"]
    return set(ids.to_list())


def _prepare(
    store: Path,
    spec: SweepSpec,
    runs: list[PlannedRun],
    out: Path,
    resume: bool,
    jobs: pl.DataFrame,
) -> tuple[list[PlannedRun], dict[str, Any]]:
    """(the runs still to do, the manifest to write once the backend delivers its first
    result: a sweep that never started, e.g. Ray unreachable, leaves the folder as it
    was).
    """
    fingerprint = workload_fingerprint(store, spec.source, jobs)
    manifest_path = out / MANIFEST
    done: set[str] = set()
    if manifest_path.exists():
        if not resume:
            msg = f"{out} already holds a sweep: pass --resume to continue it, or another --out"
            raise SweepError(msg)
        old = read_manifest(out)
        if old.get("workload") != fingerprint:
            msg = (
                f"{manifest_path}: the store's {spec.source} jobs changed since this sweep "
                "started (workload fingerprint differs); start a new sweep in another --out"
            )
            raise SweepError(msg)
        markers = read_markers(out)
        stored = _stored_runs(store, spec.source)
        done = {k for k, m in markers.items() if m.get("status") == "done" and k in stored}
    manifest = {
        "version": MANIFEST_VERSION,
        "spec": spec.to_json(),
        "origin": spec.origin,
        "store": str(store.resolve()),
        "workload": fingerprint,
        "axes": list(spec.axes),
        "runs": [{"run_id": r.run_id, "point": r.point} for r in runs],
    }
    return [r for r in runs if r.run_id not in done], manifest


@contextlib.contextmanager
def claim_folder(out: Path) -> Iterator[None]:
    """Hold ``out`` for one sweep: a second sweep (or ``--resume``) started into the same
    folder while this one runs fails at once instead of racing it to the manifest, where
    the later writer would orphan the other's grid (its runs in the store, its manifest
    replaced). An exclusive ``flock`` on a file in the folder, so it also holds between
    machines sharing the folder over a file system with POSIX locks (NFSv4, Lustre).
    """
    out.mkdir(parents=True, exist_ok=True)
    fd = os.open(out / FOLDER_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            msg = f"{out}: another sweep is running into this folder; wait for it or use another --out"
            raise SweepError(msg) from None
        yield
    finally:
        os.close(fd)


def _mark(out: Path, run_id: str, data: dict[str, Any]) -> None:
    _atomic_json(out / MARKERS / f"{run_id}.json", {"run_id": run_id, **data})


def _backend(
    jobs: pl.DataFrame,
    specs: dict[str, ClusterSpec],
    todo: list[PlannedRun],
    workers: int | None,
    address: str | None,
    summary: SweepSummary,
) -> Iterator[Batch]:
    """The batches of results for ``todo``: none when nothing is left, in this process
    for ``workers=1`` without ``address``, else from Ray.
    """
    if not todo:
        return iter(())
    if address is None and (workers or 0) == 1:
        return _in_process(jobs, specs, todo)
    return _on_ray(jobs, specs, todo, workers, address, summary)


def _record(
    out: Path, run_id: str, o: RunOutput | str, summary: SweepSummary, done: int, total: int
) -> Event:
    """Count one finished run in ``summary``, write its done/failed marker, and the
    progress event that reports it.
    """
    if isinstance(o, RunOutput):
        summary.ran += 1
        summary.run_wall_s.append(o.wall_s)
        marker = {"status": "done", "wall_s": o.wall_s, "pid": o.pid, "host": o.host}
        _mark(out, run_id, marker | ({"node": o.node} if o.node else {}))
        return Event(run_id, "done", done, total, o.wall_s)
    summary.failed.append((run_id, o))
    _mark(out, run_id, {"status": "failed", "error": o})
    return Event(run_id, "failed", done, total, error=o)


def run_sweep(
    store: Path,
    spec: SweepSpec,
    out: Path,
    *,
    workers: int | None = None,
    address: str | None = None,
    resume: bool = False,
    on_event: Callable[[Event], None] | None = None,
) -> SweepSummary:
    """Run every unfinished run of ``spec``; ``workers=1`` without ``address`` runs in
    this process, anything else on Ray (``ray.init()`` locally with ``workers`` CPUs,
    or the cluster at ``address``).
    """
    started = time.perf_counter()
    jobs = scan(store, "jobs", [spec.source]).collect()
    if not jobs.height:
        msg = f"no jobs in the store for source {spec.source!r}"
        raise SweepError(msg)
    runs = plan(spec)
    clusters = sorted({r.config.cluster for r in runs})
    specs = {c: resolve_cluster(c, store, spec.source) for c in clusters}  # before any write
    with claim_folder(out):
        summary = _drive(store, spec, out, runs, resume, jobs, specs, workers, address, on_event)
    summary.wall_s = time.perf_counter() - started
    return summary


def _drive(
    store: Path,
    spec: SweepSpec,
    out: Path,
    runs: list[PlannedRun],
    resume: bool,
    jobs: pl.DataFrame,
    specs: dict[str, ClusterSpec],
    workers: int | None,
    address: str | None,
    on_event: Callable[[Event], None] | None,
) -> SweepSummary:
    """The sweep proper, run while :func:`claim_folder` holds ``out``: check and plan
    against the folder, run, commit each batch, mark each run.
    """
    todo, manifest = _prepare(store, spec, runs, out, resume, jobs)
    summary = SweepSummary(total=len(runs), already_done=len(runs) - len(todo))
    results = _backend(jobs, specs, todo, workers, address, summary)
    done = summary.already_done
    if on_event:
        on_event(Event("", "start", done, len(runs)))
    unpublished = True
    try:
        for batch in results:
            if unpublished:
                _atomic_json(out / MANIFEST, manifest)
                unpublished = False
            write_outputs(store, [o for _, o in batch if isinstance(o, RunOutput)])
            for planned, o in batch:
                done += 1
                event = _record(out, planned.run_id, o, summary, done, len(runs))
                if on_event:
                    on_event(event)
    finally:
        close = getattr(results, "close", None)
        if close:
            close()
    if unpublished:
        _atomic_json(out / MANIFEST, manifest)
    return summary


def _in_process(
    jobs: pl.DataFrame, specs: dict[str, ClusterSpec], todo: list[PlannedRun]
) -> Iterator[Batch]:
    for planned in todo:
        try:
            yield [(planned, execute_point((jobs, specs), planned.config))]
        except GpuTraceError as exc:
            yield [(planned, str(exc))]


def _on_ray(
    jobs: pl.DataFrame,
    specs: dict[str, ClusterSpec],
    todo: list[PlannedRun],
    workers: int | None,
    address: str | None,
    summary: SweepSummary,
) -> Iterator[Batch]:
    """Submit the runs as Ray tasks (at most 2 x workers in flight) and yield the
    finished ones in batches, one store commit each: the first as soon as it is done,
    then every run that finished within ``sweep_ray.COMMIT_INTERVAL_S`` of the previous
    commit (a commit costs about the same for one run or many).
    """
    from gpu_trace.replay import sweep_ray

    todo_configs = [(p, p.config) for p in todo]
    yield from sweep_ray.run_on_ray(
        execute_point, (jobs, specs), todo_configs, workers, address, summary
    )
