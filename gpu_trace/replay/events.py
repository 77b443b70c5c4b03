"""The event trace of a replay (``replay run ... --events FILE``): every arrival, run
segment (start, and how it ended: finish, preemption, failure), node state change (failed
and repaired; powered off, booting and back on) and the queue / usage counters, written in
the Chrome Trace Event Format so a schedule can be looked at in ui.perfetto.dev or
chrome://tracing.

The format (the Trace Event Format document,
https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU, JSON
Object Format) is ``{"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}``;
``ts`` and ``dur`` are microseconds. What is written:

- one process (``pid`` 1, ``process_name`` = the run) for the cluster;
- a ``queue`` thread: an instant event (``ph: "i"``, thread scope ``s: "t"``) per job
  arrival, and per job rejected (at its arrival: the reason in ``args``);
- per node one or more threads (named by ``M`` events ``thread_name``, ordered by
  ``thread_sort_index``): a complete event (``ph: "X"``) per run segment on every node
  the segment held, ``args`` = job id, GPUs on that node, GPUs of the job, the segment's
  number and how it ended (``finish``, ``preempt``, ``fail``, ``reassign``: stopped and
  restarted (on the same GPUs or others) in the same instant, which the engine does
  not count as a preemption, or ``running``: still running when the replay ended); and an ``X`` event
  per period the node was out of service (``failed``, ``off``, ``booting``);
- counters (``ph: "C"``): waiting jobs, GPUs used by jobs and, with failures or
  power-off, GPUs out of service, from the engine's timeline (one sample per change;
  Perfetto names a JSON counter track "<event name> <series>": "waiting jobs", "GPUs
  used by jobs", "GPUs out of service").

Jobs sharing a node overlap in time, and the format does not allow that on one thread:
"duration events ... must be nested. It is not possible to have non-nested duration
events for a given thread" (the format document, Duration Events). Perfetto follows the
rule strictly: "Perfetto's data model requires duration events (B/E pairs and X events)
to nest, as mandated by the spec. Overlapping, non-nested events are out of spec" and go
to an overflow track (https://perfetto.dev/docs/getting-started/other-formats, Chrome
JSON format; also its FAQ, "Why are overlapping events in JSON traces not displayed
correctly?"). So each node gets as many threads ("lanes") as it ever runs segments at
once: every interval of the node goes, in start order, to its lowest lane that is free
by then (greedy interval partitioning, which uses the fewest lanes possible); no two
``X`` events of one thread overlap, so Perfetto and chrome://tracing draw them as they
are. The lanes of node ``n`` are named ``node n``, ``node n (2)``, ... and sorted
together. (Async events, the spec's other answer, are laid out per process and name,
not per node, so they would lose the one track per node.)

Recording costs nothing unless asked for: :class:`EventRecorder` adds one watcher to
:attr:`Engine.watchers <gpu_trace.replay.kernel.engine.Engine.watchers>` (the engine calls it
when a segment ends); without one the engine only tests an empty list per stop.
Arrivals and counters are read after the run from the workload and the timeline. The
file is written one event per line through :func:`gpu_trace.store.atomic.atomic_text`
(temporary file, then rename). The serving replay writes its trace through the same
:func:`write_events`, as a :class:`TraceSource` (:mod:`gpu_trace.serve.events`).
"""

from __future__ import annotations

import heapq
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from gpu_trace.errors import GpuTraceError
from gpu_trace.replay.cluster import MILLI
from gpu_trace.replay.kernel.engine import STOP_FAIL, STOP_FINISH, STOP_PREEMPT, Engine
from gpu_trace.store import atomic
from gpu_trace.version import __version__

if TYPE_CHECKING:
    from gpu_trace.replay.faults import Faults
    from gpu_trace.replay.poweroff import PowerOff
    from gpu_trace.replay.score import RunResult

PID = 1
"""The cluster's process."""
QUEUE_TID = 1
"""The queue's thread; node lanes follow from 2, in node order."""
US_PER_S = 1_000_000

ENDED = {STOP_FINISH: "finish", STOP_PREEMPT: "preempt", STOP_FAIL: "fail"}
"""``args.ended`` of a job segment by the engine's stop kind."""

_ENCODE = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode
"""One compact encoder for every event (``json.dumps`` with options builds one per call)."""

NODE_STATES = {"failure": "failed", "off": "off", "boot": "booting"}
"""Node log entry that starts an out-of-service period -> the period's name."""


def to_us(t: float) -> int:
    """Engine seconds -> integer microseconds (rounded: a segment that ends where the
    next one starts still touches it, never overlaps it).
    """
    return round(t * US_PER_S)


class EventRecorder:
    """The run segments of one engine, collected while it runs (one watcher call per
    segment end); the node logs of its failure and power-off processes, if any.
    """

    def __init__(
        self, engine: Engine, faults: Faults | None = None, power_off: PowerOff | None = None
    ) -> None:
        self.e = engine
        self.faults = faults
        self.power_off = power_off
        self.segments: list[tuple[int, float, float, list[tuple[int, int, int]], int]] = []
        """(job, start s, end s, parts, how) per ended segment, in the order they ended."""
        engine.watchers.append(self._stopped)

    def _stopped(self, j: int, start: float, parts: list[tuple[int, int, int]], how: int) -> None:
        self.segments.append((j, start, self.e.now, parts, how))


@dataclass(frozen=True)
class _Interval:
    """One ``X`` event before its lane is known."""

    start: float
    end: float
    name: str
    cat: str
    args: dict[str, Any]


def _segments(
    rec: EventRecorder,
) -> list[tuple[int, float, float, list[tuple[int, int, int]], str]]:
    """Every segment with how it ended as a word, the open ones (``running``) ending at
    the last instant. A preemption followed by the same job's restart in that instant
    is a ``reassign``: in simulation the engine undoes such a preemption
    (:meth:`Engine.try_start`), so the trace's preemptions match the run's count.
    """
    e = rec.e
    every = [(j, s, t, parts, ENDED[how]) for j, s, t, parts, how in rec.segments]
    every += [(j, e.seg_start[j], e.now, list(e.alloc[j]), "running") for j in sorted(e.alloc)]
    last: dict[int, int] = {}
    for i, (j, s, *_) in enumerate(every):
        prev = last.get(j)
        if prev is not None and e.reassign_in_instant:
            pj, ps, pt, pparts, pended = every[prev]
            if pended == "preempt" and pt == s:
                every[prev] = (pj, ps, pt, pparts, "reassign")
        last[j] = i
    return every


def _node_periods(rec: EventRecorder, end: float) -> list[tuple[int, _Interval]]:
    """Out-of-service periods per node from the failure and power-off logs (a period
    still open at the end closes at ``end``).
    """
    log: list[tuple[float, int, str]] = []
    if rec.faults is not None:
        log += [(t, n, what) for t, n, what, _ in rec.faults.events]
    if rec.power_off is not None:
        log += rec.power_off.events
    out: list[tuple[int, _Interval]] = []
    open_: dict[int, tuple[float, str]] = {}
    for t, n, what in sorted(log, key=lambda x: x[0]):  # stable: each log is in time order
        if n in open_:
            since, state = open_.pop(n)
            out.append((n, _Interval(since, t, state, "node", {"node": n, "state": state})))
        if what in NODE_STATES:
            open_[n] = (t, NODE_STATES[what])
    for n, (since, state) in sorted(open_.items()):
        out.append((n, _Interval(since, end, state, "node", {"node": n, "state": state})))
    return out


def _lanes(intervals: list[_Interval]) -> list[tuple[int, _Interval]]:
    """(lane, interval): each interval, in (start, end) order, on the lowest lane free
    by its start (a lane is free once its last interval ended, touching allowed).
    """
    busy: list[tuple[float, int]] = []
    free: list[int] = []
    out: list[tuple[int, _Interval]] = []
    lanes = 0
    for iv in sorted(intervals, key=lambda x: (x.start, x.end)):
        while busy and busy[0][0] <= iv.start:
            heapq.heappush(free, heapq.heappop(busy)[1])
        if free:
            lane = heapq.heappop(free)
        else:
            lane, lanes = lanes, lanes + 1
        heapq.heappush(busy, (iv.end, lane))
        out.append((lane, iv))
    return out


def _job_intervals(rec: EventRecorder, ids: list[str]) -> tuple[dict[int, list[_Interval]], float]:
    """Per node, one interval per segment that held it; the last instant seen."""
    e = rec.e
    per_node: dict[int, list[_Interval]] = {}
    seen: dict[int, int] = {}
    end = e.now
    for j, s, t, parts, ended in _segments(rec):
        end = max(end, t)
        k = seen[j] = seen.get(j, 0) + 1
        on: dict[int, int] = {}
        for n, _, m in parts:
            on[n] = on.get(n, 0) + m
        for n, m in on.items():
            args = {
                "job": ids[j],
                "gpus_on_node": m / MILLI,
                "gpus": e.gpus[j],
                "segment": k,
                "ended": ended,
            }
            per_node.setdefault(n, []).append(_Interval(s, t, ids[j], "job", args))
    return per_node, end


def meta_event(name: str, tid: int, args: dict[str, Any]) -> dict[str, Any]:
    """A metadata event (``M``: process / thread name or sort index) of the process."""
    return {"name": name, "ph": "M", "pid": PID, "tid": tid, "args": args}


def trace_events(rec: EventRecorder, title: str = "replay") -> Iterator[dict[str, Any]]:
    """The trace's events, one at a time: metadata, the queue's instants, the
    counters, then every node's ``X`` events lane by lane.
    """
    e = rec.e
    spec = e.spec
    ids = [str(x) for x in e.w.frame["job_id"].to_list()]
    per_node, end = _job_intervals(rec, ids)
    for n, iv in _node_periods(rec, end):
        per_node.setdefault(n, []).append(iv)
    laned = {n: _lanes(per_node.get(n, [])) for n in range(spec.nodes)}
    yield meta_event("process_name", QUEUE_TID, {"name": title})
    yield meta_event("thread_name", QUEUE_TID, {"name": "queue"})
    yield meta_event("thread_sort_index", QUEUE_TID, {"sort_index": QUEUE_TID})
    tid_of: dict[tuple[int, int], int] = {}
    tid = QUEUE_TID
    typed = len(spec.type_names) > 1
    for n in range(spec.nodes):
        label = f"node {n}" + (f" {spec.type_names[spec.node_type[n]]}" if typed else "")
        for lane in range(max((ln for ln, _ in laned[n]), default=0) + 1):
            tid += 1
            tid_of[(n, lane)] = tid
            name = label if lane == 0 else f"{label} ({lane + 1})"
            yield meta_event("thread_name", tid, {"name": name})
            yield meta_event("thread_sort_index", tid, {"sort_index": tid})
    yield from _queue_events(e, ids)
    yield from _counters(e)
    for n in range(spec.nodes):
        for lane, iv in sorted(laned[n], key=lambda x: (x[0], x[1].start, x[1].end)):
            ts = to_us(iv.start)
            yield {
                "name": iv.name,
                "cat": iv.cat,
                "ph": "X",
                "ts": ts,
                "dur": to_us(iv.end) - ts,
                "pid": PID,
                "tid": tid_of[(n, lane)],
                "args": iv.args,
            }


def _queue_events(e: Engine, ids: list[str]) -> Iterator[dict[str, Any]]:
    """An instant per arrival (and per rejected job, at its arrival)."""
    for j, t in enumerate(e.arrival):
        ts = to_us(t)
        yield _instant(f"arrive {ids[j]}", ts, {"job": ids[j], "gpus": e.gpus[j]})
        reason = e.rejected.get(j)
        if reason is not None:
            yield _instant(f"reject {ids[j]}", ts, {"job": ids[j], "reason": reason})


def _instant(name: str, ts: int, args: dict[str, Any]) -> dict[str, Any]:
    """An instant event of the queue thread (thread scope)."""
    return {
        "name": name,
        "cat": "queue",
        "ph": "i",
        "s": "t",
        "ts": ts,
        "pid": PID,
        "tid": QUEUE_TID,
        "args": args,
    }


def _number(v: float) -> float | int:
    return int(v) if v == int(v) else v


def _counters(e: Engine) -> Iterator[dict[str, Any]]:
    """Counter samples from the timeline (state after each instant), one per change.

    Two counters, named so that Perfetto's track names (the event name, a space, the
    series) read plainly: ``waiting`` / ``jobs`` and ``GPUs`` / ``used by jobs`` (and
    ``out of service`` with failures or power-off: chrome://tracing stacks the two).
    """
    tl = e.timeline
    down = any(tl.down_milli)
    series: list[tuple[str, list[dict[str, float | int]]]] = [
        ("waiting", [{"jobs": v} for v in tl.waiting]),
        (
            "GPUs",
            [
                {"used by jobs": _number((u - d) / MILLI)}
                | ({"out of service": _number(d / MILLI)} if down else {})
                for u, d in zip(tl.used_milli, tl.down_milli, strict=True)
            ],
        ),
    ]
    for name, samples in series:
        last: dict[str, float | int] | None = None
        for t, args in zip(tl.time, samples, strict=True):
            if args != last:
                last = args
                yield {
                    "name": name,
                    "cat": "cluster",
                    "ph": "C",
                    "ts": to_us(t),
                    "pid": PID,
                    "tid": QUEUE_TID,
                    "args": args,
                }


def attach(
    engine: Engine, faults: Faults | None, power_off: PowerOff | None, on: bool
) -> EventRecorder | None:
    """A recorder on ``engine`` (before :meth:`Engine.run`) when ``on``; else nothing is
    attached and the run pays nothing.
    """
    return EventRecorder(engine, faults, power_off) if on else None


def keep(result: RunResult, recorder: EventRecorder | None) -> RunResult:
    """``result`` with its recorder (``result.extra["events"]``) for :func:`write_events`."""
    if recorder is not None:
        result.extra["events"] = recorder
    return result


def check_target(path: Path) -> None:
    """Refuse an ``--events`` path whose folder does not exist or that is a folder,
    before the replay runs.
    """
    atomic.check_target(path, "--events")


def target(base: Path, tag: str) -> Path:
    """The trace file of one run among several: ``tag`` (``compare``: the run id;
    ``--seeds``: ``s<seed>``) between ``base``'s stem and suffix (``trace.json`` ->
    ``trace.fifo-consolidate-1a2b3c4d.json``).
    """
    return base.with_name(f"{base.stem}.{tag}{base.suffix or '.json'}")


@runtime_checkable
class TraceSource(Protocol):
    """Any other simulator's trace (the serving replay's,
    :class:`gpu_trace.serve.events.ServeTrace`): its ``otherData`` and its events, in
    the order they go to the file. :func:`write_events` adds the generator and writes
    them the one way every trace is written.
    """

    def trace_other(self) -> dict[str, Any]:
        """The ``otherData`` object (the run's settings, time origin and unit)."""
        ...

    def trace_events(self) -> Iterator[dict[str, Any]]:
        """The trace's events, one at a time (streamed to the file)."""
        ...


def _replay_trace(
    source: RunResult | EventRecorder,
) -> tuple[dict[str, Any], Iterator[dict[str, Any]]]:
    """The ``otherData`` and events of a job replay (a run's result or a recorder)."""
    if isinstance(source, EventRecorder):
        rec, other, title = source, {}, "replay"
    else:
        got = source.extra.get("events")
        if not isinstance(got, EventRecorder):
            msg = "this run recorded no events: replay it with record_events=True"
            raise GpuTraceError(msg)
        c = source.config
        rec, title = got, f"replay {source.run_id}"
        other = {
            "run_id": source.run_id,
            "source": c.source,
            "scheduler": c.label(),
            "placement": c.placement,
            "admission": c.admission,
            "load_factor": c.load,
            "seed": c.seed,
        }
    origin = rec.e.w.origin
    other = {
        **other,
        "cluster": rec.e.spec.describe(),
        "time_origin_utc": origin.isoformat() if origin is not None else None,
        "time_unit": "ts and dur: microseconds since time_origin_utc (replay seconds x 1e6)",
        "jobs_replayed": rec.e.w.n,
    }
    return other, trace_events(rec, title)


def write_events(source: RunResult | EventRecorder | TraceSource, path: Path) -> int:
    """Write the trace of a run (a :class:`RunResult` of ``replay(...,
    record_events=True)``, a recorder, or another simulator's :class:`TraceSource`) to
    ``path`` atomically, one event per line; the number of events.
    """
    if isinstance(source, TraceSource):
        other, events = source.trace_other(), source.trace_events()
    else:
        other, events = _replay_trace(source)
    other = {"generator": f"gpu-trace {__version__}", **other}
    check_target(path)
    count = 0
    try:
        with atomic.atomic_text(path) as fh:
            fh.write('{"displayTimeUnit":"ms","otherData":')
            fh.write(json.dumps(other, sort_keys=True, default=str, allow_nan=False))
            fh.write(',"traceEvents":[\n')
            sep = ""
            for ev in events:
                fh.write(sep + _ENCODE(ev))
                sep = ",\n"
                count += 1
            fh.write("\n]}\n")
    except OSError as exc:
        msg = f"--events {path}: {exc.strerror or exc}"
        raise GpuTraceError(msg) from None
    return count


def report(path: Path, count: int) -> None:
    """The one stderr line that says where the trace went."""
    sys.stderr.write(f"events: {count} trace events written to {path}\n")
