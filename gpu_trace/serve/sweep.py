"""``serve sweep``: a grid over :class:`~gpu_trace.serve.config.ServeConfig` fields,
through ``replay sweep``'s machinery.

The grid is :mod:`gpu_trace.replay.sweep_grid`'s (the same file format, ranges, type
checks and "did you mean", over ``ServeConfig`` instead of ``ReplayConfig``); the sweep
folder is ``replay sweep``'s (``sweep.json`` manifest, one marker per finished run in
``runs/``, the folder claimed with :func:`gpu_trace.replay.sweep.claim_folder`,
``--resume`` skipping the runs marked done and present in the store, refused when the
source's ingests changed), and so is its backend: in this process with ``workers=1``,
else on Ray (:mod:`gpu_trace.replay.sweep_ray`: a local Ray with ``workers`` CPUs, or
the cluster at ``address``), both calling the one run function :func:`execute_point`,
so a point gives the same summary either way. Finished runs are committed to the store
as they come (in process: one generation per run; on Ray: the runs that finished within
a commit interval together) and marked after their commit: a killed sweep loses only
the runs in flight.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from gpu_trace.errors import GpuTraceError, UsageError
from gpu_trace.plugins import option_specs
from gpu_trace.replay import sweep as sw
from gpu_trace.replay import sweep_grid as sg
from gpu_trace.serve import runs
from gpu_trace.serve.config import ServeConfig
from gpu_trace.store.atomic import atomic_text
from gpu_trace.store.parquet import StoreTransaction
from gpu_trace.store.scan import scan


@dataclass
class Outcome(sw.SweepSummary):
    """What a serving sweep did (``replay sweep``'s summary: counts, backend, timings,
    and its closing line) and the finished runs' summary rows.
    """

    rows: list[pl.DataFrame] = field(default_factory=list)


@dataclass(frozen=True)
class PointOutput:
    """What one run sends back to the driver: the scored run (nothing written) and the
    measurements that are not results (they go to the run's marker, as replay's do).
    """

    run: runs.ServeRun
    wall_s: float
    pid: int
    host: str
    node: str | None = None
    """The Ray node id the run ran on (None in process)."""


def execute_point(window: runs.Window, config: ServeConfig) -> PointOutput:
    """THE run function of a serving sweep (in process and as the Ray task's
    ``point``): :func:`gpu_trace.serve.runs.execute` on the sweep's window.
    """
    started = time.perf_counter()
    run = runs.execute(window, config)
    return PointOutput(run, time.perf_counter() - started, os.getpid(), socket.gethostname())


Key = tuple[str, ServeConfig]
"""A run of the grid as the backends carry it: (run id, config)."""
Batch = list[tuple[Key, "PointOutput | str"]]
"""Runs that finished together: written in one store commit."""


def parse(doc: dict[str, Any], origin: str) -> sg.SweepSpec:
    """A grid over ``ServeConfig`` (a sweep file's document or the flags')."""
    return sg.parse(doc, origin, ServeConfig)


def load(path: Path) -> sg.SweepSpec:
    """A sweep file over ``ServeConfig`` fields."""
    return sg.load(path, ServeConfig)


def validate(config: ServeConfig) -> ServeConfig:
    """Run every field's command-line check on a config built from a grid (a sweep file
    skips the flags' parsers): text fields through their ``parse`` (``disaggregate``,
    ``slo``, name=value lists), numbers through their ``check`` (``tp`` >= 1).
    """
    for spec in option_specs(ServeConfig):
        value = getattr(config, spec.name)
        if value is None:
            continue
        if spec.parse is not None and isinstance(value, str):
            spec.parse(value)
        if spec.check is not None:
            spec.check(value)
    return config


def planned(spec: sg.SweepSpec) -> list[tuple[str, dict[str, Any], ServeConfig]]:
    """(run id, grid point, checked config) per point; a usage error names the sweep's
    origin when a value does not pass its field's check or two points are one run.
    """
    out = []
    for point, config in spec.configs():
        try:
            validate(config)
        except GpuTraceError as exc:
            msg = f"{spec.origin}: {exc}"
            raise UsageError(msg) from None
        out.append((config.resolved_run_id(), point, config))
    ids = [i for i, _, _ in out]
    if len(set(ids)) != len(ids):
        msg = f"{spec.origin}: two grid points resolve to the same run"
        raise UsageError(msg)
    first = out[0][2] if out else None
    if first is not None and any(runs.window_of(c) != runs.window_of(first) for _, _, c in out):
        msg = f"{spec.origin}: a sweep replays one window: dataset, start and duration are fixed"
        raise UsageError(msg)
    return out


def spec_from_manifest(out: Path) -> sg.SweepSpec:
    """The grid a serving sweep folder was started with (``--resume`` without flags)."""
    manifest = sw.read_manifest(out)
    if manifest.get("kind") != "serve":
        msg = f"{out / sw.MANIFEST}: a replay sweep, not a serve sweep (use replay sweep --resume)"
        raise sw.SweepError(msg)
    doc = dict(manifest["spec"])
    grid = doc.get("grid", {})
    order: list[str] = list(manifest.get("axes") or grid)
    doc["grid"] = {a: grid[a] for a in order if a in grid}
    return parse(doc, str(out / sw.MANIFEST))


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_text(path) as f:
        f.write(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def _stored(store: Path, source: str) -> set[str]:
    ids = scan(store, "serve_runs", [source]).select("run_id").collect()["run_id"]
    return set(ids.to_list())


def run_sweep(
    store: Path,
    spec: sg.SweepSpec,
    out: Path,
    *,
    workers: int | None = None,
    address: str | None = None,
    resume: bool = False,
    on_run: Callable[[str, str, int, int], None] | None = None,
) -> Outcome:
    """Run every unfinished point of ``spec`` (see the module): in this process for
    ``workers=1`` without ``address``, else on Ray; ``on_run(run id, done | failed,
    runs done, total)`` after each.
    """
    started = time.perf_counter()
    todo = planned(spec)
    if not todo:
        return Outcome(0, 0)
    first = todo[0][2]
    runs.check_source(store, first.source, first.dataset)
    for _, _, c in todo:
        runs.check_names(c)
    window = runs.load_requests(store, first.source, first.dataset, first.start_s, first.duration_s)
    ids = pl.DataFrame({"request_id": window.requests.request_id})
    fingerprint = sw.workload_fingerprint(store, first.source, ids)
    with sw.claim_folder(out):
        done = _finished(store, out, first.source, fingerprint, resume)
        manifest = {
            "version": sw.MANIFEST_VERSION,
            "kind": "serve",
            "spec": spec.to_json(),
            "origin": spec.origin,
            "store": str(store.resolve()),
            "workload": fingerprint,
            "axes": list(spec.axes),
            "runs": [{"run_id": i, "point": p} for i, p, _ in todo],
        }
        outcome = Outcome(total=len(todo), already_done=len(done))
        left = [((i, c), c) for i, _, c in todo if i not in done]
        results = _backend(window, left, workers, address, outcome)
        unpublished = True  # as replay's: a sweep that never started leaves the folder
        try:
            for batch in results:
                if unpublished:
                    _write_json(out / sw.MANIFEST, manifest)
                    unpublished = False
                _commit(store, out, first.source, batch, outcome, on_run)
        finally:
            results.close()
        if unpublished:
            _write_json(out / sw.MANIFEST, manifest)
    order = {i: n for n, (i, _, _) in enumerate(todo)}  # Ray's come as they finish
    outcome.rows.sort(key=lambda row: order[row["run_id"][0]])
    outcome.wall_s = time.perf_counter() - started
    return outcome


def _backend(
    window: runs.Window,
    left: list[tuple[Key, ServeConfig]],
    workers: int | None,
    address: str | None,
    outcome: Outcome,
) -> Generator[Batch, None, None]:
    """The batches of finished runs: in this process for ``workers=1`` without
    ``address`` (one run per batch), else from a Ray session (replay sweep's).
    """
    if not left:
        return
    if address is None and (workers or 0) == 1:
        for key, config in left:
            try:
                yield [(key, execute_point(window, config))]
            except GpuTraceError as exc:
                yield [(key, str(exc))]
        return
    from gpu_trace.replay import sweep_ray

    yield from sweep_ray.run_on_ray(execute_point, window, left, workers, address, outcome)


def _commit(
    store: Path,
    out: Path,
    source: str,
    batch: Batch,
    outcome: Outcome,
    on_run: Callable[[str, str, int, int], None] | None,
) -> None:
    """Commit a batch's finished runs (one generation), then mark each run: ``done``,
    or ``failed`` with the run's own error (the sweep goes on).
    """
    finished = [o for _, o in batch if isinstance(o, PointOutput)]
    if finished:
        with StoreTransaction(store) as tx:
            for point in finished:
                runs.stage(tx, point.run, source)
    for (run_id, _), o in batch:
        marker = out / sw.MARKERS / f"{run_id}.json"
        if isinstance(o, PointOutput):
            where = {"pid": o.pid, "host": o.host} | ({"node": o.node} if o.node else {})
            _write_json(marker, {"run_id": run_id, "status": "done", "wall_s": o.wall_s, **where})
            outcome.ran += 1
            outcome.run_wall_s.append(o.wall_s)
            outcome.rows.append(o.run.row())
            status = "done"
        else:
            outcome.failed.append((run_id, o))
            _write_json(marker, {"run_id": run_id, "status": "failed", "error": o})
            status = "failed"
        if on_run is not None:
            done = outcome.already_done + outcome.ran + len(outcome.failed)
            on_run(run_id, status, done, outcome.total)


def _finished(store: Path, out: Path, source: str, fingerprint: str, resume: bool) -> set[str]:
    """The run ids already done in ``out`` (marked done and in the store); a folder
    holding another sweep, or this one without ``resume``, is refused.
    """
    if not (out / sw.MANIFEST).exists():
        return set()
    if not resume:
        msg = f"{out} already holds a sweep: pass --resume to continue it, or another --out"
        raise sw.SweepError(msg)
    old = sw.read_manifest(out)
    if old.get("kind") != "serve" or old.get("workload") != fingerprint:
        msg = (
            f"{out / sw.MANIFEST}: not this serve sweep, or the store's {source} requests "
            "changed since it started; use another --out"
        )
        raise sw.SweepError(msg)
    stored = _stored(store, source)
    markers = sw.read_markers(out)
    return {k for k, m in markers.items() if m.get("status") == "done" and k in stored}
