"""The serving replay's event trace (``serve run|compare --events FILE``): every
iteration of every replica, every request's life and the replicas' counters, in the
Chrome Trace Event Format, written by the job replay's writer
(:func:`gpu_trace.replay.events.write_events`, through its :class:`TraceSource` seam).

What is written (one process per run; ``ts`` / ``dur`` in integer microseconds of
serving-replay time, rounded as the job replay rounds them):

- per replica one thread, ``replica N ROLE`` (role ``mixed``, ``prefill`` or
  ``decode``), with one complete event (``X``) per iteration, named ``prefill``,
  ``decode`` or ``mixed`` (a chunked-prefill iteration carrying both), ``args``:
  ``prefill_tokens``, ``decode_count`` (requests producing a token), ``kv_blocks_used``
  (blocks held during it) and ``run_iterations`` (the engine's macro-step it belonged
  to: 1 for an iteration planned alone); an autoscaled replica's cold start is an ``X``
  named ``cold start``. A replica runs one iteration at a time, so its events never
  overlap;
- per request nestable async events (``b`` / ``e``, category ``request``, ``id`` = the
  request's position in the window): ``request`` from arrival to its last token, and
  inside it its phases ``queue``, ``prefill``, ``decode`` and ``kv transfer`` (the
  disaggregated hop) in order, a ``queue`` after a preemption with ``preempted`` in its
  args; an async instant (``n``) ``first token``; phases of zero length are left out;
  a dropped request is a ``request`` of zero length with the reason;
- per replica two counters (``C``): ``replica N requests`` (series ``running``: in the
  batch, ``waiting``: queued) and ``replica N KV`` (``blocks used``), one sample per
  change: at each iteration's start, when it ends, and when a request joins the queue
  or its KV leaves (a decode run's KV grows block by block, so one sample per iteration
  of the run is considered).

The macro-steps: the engine plans a run of decode iterations at once and already holds
every iteration's end time (``Replica.seg_ends``, the sequential sums it schedules
with); the recorder expands a run into one slice per iteration from those times and the
run's KV phase counts, so every slice is an iteration the engine ran, as stepping one
at a time (``jump=False``) would give them.

Nothing is recorded unless asked: :class:`TracedEngine` is a subclass of
:class:`~gpu_trace.serve.engine.Engine` built only for ``--events``
(:func:`gpu_trace.serve.engine.build`'s ``engine``); the default run's engine has no
hook at all. Memory is bounded: a run of more than :data:`MAX_ITERATIONS` iterations
is refused with one error line (the file would be too large to open in a browser).
"""

from __future__ import annotations

import itertools
from array import array
from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from gpu_trace.errors import GpuTraceError
from gpu_trace.replay import events as ev
from gpu_trace.serve.engine import DECODING, DROPPED, TRANSFERRING, Batching, Engine, build
from gpu_trace.serve.replica import Replica

if TYPE_CHECKING:
    from gpu_trace.serve.config import ServeConfig
    from gpu_trace.serve.latency.base import LatencyModel
    from gpu_trace.serve.result import ServeResult
    from gpu_trace.serve.workload import RequestSet

MAX_ITERATIONS = 1_000_000
"""Iterations a traced run may have: about 100 bytes recorded and 250 bytes of file per
iteration, so at most about 100 MB in memory and a 250 MB file (what a browser still
opens; an hour of Azure-conversation-like traffic on 16 lightly loaded replicas is
about 3.3 M iterations: a quarter of an hour fits)."""

QUEUE, PREFILL, DECODE, TRANSFER, END, REQUEUE = range(6)
"""Phase records: what a request starts at a time (END: its last token)."""
PHASE_NAMES = {QUEUE: "queue", PREFILL: "prefill", DECODE: "decode", TRANSFER: "kv transfer"}
PHASE_NAMES[REQUEUE] = "queue"
PID = ev.PID


class _Clocked:
    """The replica scheduler, telling the recorder the instant it starts a replica at
    (preemptions and swap-ins happen inside ``start`` and are not given the time).
    """

    def __init__(self, inner: Batching, eng: TracedEngine) -> None:
        self.inner = inner
        self.eng = eng
        self.mixes = getattr(inner, "mixes", False)

    def start(self, eng: Engine, rep: Replica, t: float) -> bool:
        """The scheduler's own ``start``; a counter sample if the replica stays idle."""
        self.eng.now = t
        started = self.inner.start(eng, rep, t)
        if not rep.busy:
            self.eng.sample(rep, t)
        return started


class TracedEngine(Engine):
    """The engine that records its iterations, request phases and counter samples
    (flat arrays: no Python object per record).
    """

    limit = MAX_ITERATIONS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.batching = _Clocked(self.batching, self)
        self.now = 0.0
        self.it_t0 = array("d")
        self.it_t1 = array("d")
        self.it_rep = array("q")
        self.it_prefill = array("q")
        self.it_decode = array("q")
        self.it_kv = array("q")
        self.it_run = array("q")
        self.cn_t = array("d")
        self.cn_rep = array("q")
        self.cn_running = array("q")
        self.cn_waiting = array("q")
        self.cn_kv = array("q")
        self.ph_t = array("d")
        self.ph_req = array("q")
        self.ph_code = array("b")
        self.ph_rep = array("q")
        self._open: dict[int, tuple[int, int, int, int]] = {}
        """Replica -> (batch, waiting, KV blocks used, blocks reserved) at its start."""

    # ---- records --------------------------------------------------------------------

    def phase(self, t: float, i: int, code: int, rep: int) -> None:
        """Request ``i`` starts phase ``code`` at ``t`` on replica ``rep``."""
        self.ph_t.append(t)
        self.ph_req.append(i)
        self.ph_code.append(code)
        self.ph_rep.append(rep)

    def sample(self, rep: Replica, t: float) -> None:
        """The replica's counters at ``t`` (KV blocks held at ``t``)."""
        self._samples(rep.index, [t], rep.batch(), rep.waiting(), [rep.used_at(t)])

    def _samples(self, r: int, ts: list[float], running: int, waiting: int, kv: list[int]) -> None:
        n = len(ts)
        self.cn_t.extend(ts)
        self.cn_rep.extend([r] * n)
        self.cn_running.extend([running] * n)
        self.cn_waiting.extend([waiting] * n)
        self.cn_kv.extend(kv)

    # ---- the engine's steps, recorded --------------------------------------------------

    def _begin(
        self,
        rep: Replica,
        t: float,
        ends: list[float],
        k: int,
        c: int,
        reserved: int,
        decode: bool,
        prefills: list[tuple[int, int]],
    ) -> None:
        super()._begin(rep, t, ends, k, c, reserved, decode, prefills)
        self._open[rep.index] = (rep.batch(), rep.waiting(), rep.kv.used, reserved)

    def end_iteration(self, rep: Replica, t: float) -> None:
        """Record the iterations of the run that ends (one per iteration, from the
        engine's end times), then end it.
        """
        running, waiting, used, reserved = self._open.pop(rep.index)
        k = rep.seg_k
        ends = rep.seg_ends[:k]
        starts = [rep.seg_t0, *ends[:-1]]
        if len(rep.seg_ends) == 1:
            kv = [used]
        else:  # a decode run: blocks taken step by step (the engine reserved them all)
            count = np.asarray(rep.demand.count, dtype=np.int64)
            steps = rep.seg_step0 + np.arange(k, dtype=np.int64)
            kv = (used - reserved + np.cumsum(count[(-steps) % rep.demand.block])).tolist()
        r = rep.index
        self.it_t0.extend(starts)
        self.it_t1.extend(ends)
        self.it_rep.extend([r] * k)
        self.it_prefill.extend([sum(tok for _, tok in rep.seg_prefills)] * k)
        self.it_decode.extend([rep.seg_c if rep.seg_decode else 0] * k)
        self.it_kv.extend(kv)
        self.it_run.extend([len(rep.seg_ends)] * k)
        self._samples(r, starts, running, waiting, kv)
        if len(self.it_t0) > self.limit:
            msg = (
                f"--events: the run has more than {self.limit:,} iterations, too many for "
                "an event trace; trace a shorter window (--duration)"
            )
            raise GpuTraceError(msg)
        super().end_iteration(rep, t)
        self.sample(rep, t)

    def enqueue(self, rep: Replica, i: int, t: float) -> None:
        """A routed request waits in ``rep``'s queue."""
        super().enqueue(rep, i, t)
        self.phase(t, i, QUEUE, rep.index)
        self.sample(rep, t)

    def admit(self, rep: Replica, i: int, t: float, need: int, hit: int) -> None:
        """The request's prompt (or its recompute) starts."""
        super().admit(rep, i, t, need, hit)
        self.phase(t, i, PREFILL, rep.index)

    def _prompt_done(self, rep: Replica, i: int, t: float) -> None:
        super()._prompt_done(rep, i, t)
        state = self.state[i]
        if state == TRANSFERRING:
            self.phase(t, i, TRANSFER, rep.index)
        elif state == DECODING:
            self.phase(t, i, DECODE, rep.index)

    def _done(self, rep: Replica, i: int, t: float) -> None:
        super()._done(rep, i, t)
        self.phase(t, i, END, rep.index)

    def transfer_done(self, rep: Replica, i: int, t: float, dirty: list[int]) -> None:
        """The request's KV reached a decode replica: it queues there."""
        super().transfer_done(rep, i, t, dirty)
        dest = self.replicas[self.at[i]]
        self.phase(t, i, QUEUE, dest.index)
        self.sample(rep, t)
        self.sample(dest, t)

    def swap_in(self, rep: Replica, i: int) -> float:
        """A swapped-out request (or one whose KV arrived) decodes again."""
        seconds = super().swap_in(rep, i)
        self.phase(self.now, i, DECODE, rep.index)
        return seconds

    def preempt(self, rep: Replica, i: int) -> float:
        """The request leaves the batch for the queue's front."""
        seconds = super().preempt(rep, i)
        self.phase(self.now, i, REQUEUE, rep.index)
        return seconds


def simulate_traced(
    requests: RequestSet, config: ServeConfig, latency: LatencyModel, *, jump: bool = True
) -> tuple[ServeResult, TracedEngine]:
    """Replay ``requests`` as :func:`gpu_trace.serve.engine.simulate` does, recording
    the trace; the result and the engine (for :class:`ServeTrace`).
    """
    eng = build(requests, config, latency, jump=jump, engine=TracedEngine)
    assert isinstance(eng, TracedEngine)
    return eng.run(), eng


# ---- the trace's events -----------------------------------------------------------------

_us = ev.to_us
_meta = ev.meta_event


class ServeTrace:
    """One traced run as a :class:`gpu_trace.replay.events.TraceSource`."""

    def __init__(self, eng: TracedEngine, run_id: str = "", other: dict[str, Any] | None = None):
        self.e = eng
        self.run_id = run_id
        self.other = other or {}

    def trace_other(self) -> dict[str, Any]:
        """The run's settings, the time origin and unit, the counts."""
        e = self.e
        c = e.config
        origin = _iso(e.req.origin)
        return {
            "run_id": self.run_id,
            "source": e.req.source,
            "dataset": e.req.dataset,
            "model": c.model,
            "gpu": c.gpu,
            "tp": c.tp,
            "batching": c.batching,
            "router": c.router,
            "disaggregate": c.disaggregate,
            **self.other,
            "time_origin_utc": origin,
            "time_unit": "ts and dur: microseconds since time_origin_utc (the window's first "
            "arrival; serving replay seconds x 1e6)",
            "requests_replayed": len(e.arrival),
            "iterations": len(e.it_t0),
            "iteration_slices": "one per iteration: the engine's decode runs (macro-steps) "
            "expanded from the end times it computed",
        }

    def trace_events(self) -> Iterator[dict[str, Any]]:
        """Metadata, the replicas' iterations, the counters, the requests."""
        e = self.e
        title = f"serve {self.run_id}" if self.run_id else "serve"
        yield _meta("process_name", 1, {"name": title})
        for rep in e.replicas:
            tid = rep.index + 1
            yield _meta("thread_name", tid, {"name": f"replica {rep.index} {rep.role}"})
            yield _meta("thread_sort_index", tid, {"sort_index": tid})
        yield from self._iterations()
        yield from self._counters()
        yield from self._requests()

    def _iterations(self) -> Iterator[dict[str, Any]]:
        e = self.e
        for rep in e.replicas:
            if rep.up_s > rep.start_s:
                ts = _us(rep.start_s)
                yield _x("cold start", "replica", ts, _us(rep.up_s) - ts, rep.index, {})
        rep_ = np.frombuffer(e.it_rep, dtype=np.int64)
        t0 = np.frombuffer(e.it_t0, dtype=np.float64)
        order = np.lexsort((t0, rep_)).tolist()
        t0s, t1s = e.it_t0, e.it_t1
        for j in order:
            p, c = e.it_prefill[j], e.it_decode[j]
            name = "mixed" if p and c else "prefill" if p else "decode"
            ts = _us(t0s[j])
            args = {
                "prefill_tokens": p,
                "decode_count": c,
                "kv_blocks_used": e.it_kv[j],
                "run_iterations": e.it_run[j],
            }
            yield _x(name, "iteration", ts, _us(t1s[j]) - ts, e.it_rep[j], args)

    def _counters(self) -> Iterator[dict[str, Any]]:
        """Per replica, the last sample of each instant, then one per change."""
        e = self.e
        n = len(e.cn_t)
        if not n:
            return
        t = np.frombuffer(e.cn_t, dtype=np.float64)
        r = np.frombuffer(e.cn_rep, dtype=np.int64)
        order = np.lexsort((np.arange(n), t, r))  # by replica, time, recording order
        t, r = t[order], r[order]
        us = np.rint(t * ev.US_PER_S).astype(np.int64)
        last = np.ones(n, dtype=bool)
        last[:-1] = (r[1:] != r[:-1]) | (us[1:] != us[:-1])
        series = {
            "requests": (
                ("running", np.frombuffer(e.cn_running, dtype=np.int64)[order][last]),
                ("waiting", np.frombuffer(e.cn_waiting, dtype=np.int64)[order][last]),
            ),
            "KV": (("blocks used", np.frombuffer(e.cn_kv, dtype=np.int64)[order][last]),),
        }
        r, us = r[last], us[last]
        new_rep = np.ones(r.size, dtype=bool)
        new_rep[1:] = r[1:] != r[:-1]
        for name, cols in series.items():
            changed = new_rep.copy()
            for _, v in cols:
                changed[1:] |= v[1:] != v[:-1]
            for k in np.flatnonzero(changed).tolist():
                yield {
                    "name": f"replica {int(r[k])} {name}",
                    "cat": "replica",
                    "ph": "C",
                    "ts": int(us[k]),
                    "pid": PID,
                    "tid": int(r[k]) + 1,
                    "args": {label: int(v[k]) for label, v in cols},
                }

    def _requests(self) -> Iterator[dict[str, Any]]:
        """Each request's async events, in time order (its phases nest in it)."""
        e = self.e
        req = np.frombuffer(e.ph_req, dtype=np.int64)
        order = np.argsort(req, kind="stable")
        bounds = np.searchsorted(req[order], np.arange(len(e.arrival) + 1)).tolist()
        order_l = order.tolist()
        ids = e.req.request_id.tolist()
        for i in range(len(e.arrival)):
            recs = [
                (e.ph_t[j], e.ph_code[j], e.ph_rep[j]) for j in order_l[bounds[i] : bounds[i + 1]]
            ]
            yield from self._one_request(i, ids[i], recs)

    def _one_request(
        self, i: int, request_id: int, recs: list[tuple[float, int, int]]
    ) -> Iterator[dict[str, Any]]:
        e = self.e
        arrive = _us(e.arrival[i])
        if e.state[i] == DROPPED:
            args = {"request_id": request_id, "status": "dropped", "reason": e.drop_reason[i]}
            yield _async("b", "request", i, arrive, 1, args)
            yield _async("e", "request", i, arrive, 1)
            return
        tid = recs[0][2] + 1
        args = {
            "request_id": request_id,
            "prompt_tokens": e.prompt[i],
            "output_tokens": e.output[i],
            "preemptions": e.preemptions[i],
        }
        yield _async("b", "request", i, arrive, tid, args)
        first = _us(e.first_token[i])
        told = False
        for (t, code, r), (t_next, _, _) in itertools.pairwise(recs):
            if code == END:
                break
            ts, end = _us(t), _us(t_next)
            if end == ts:
                continue
            name = PHASE_NAMES[code]
            extra = {"replica": r} | ({"preempted": True} if code == REQUEUE else {})
            yield _async("b", name, i, ts, r + 1, extra)
            yield _async("e", name, i, end, r + 1)
            if not told and end == first:
                told = True
                yield _async("n", "first token", i, first, r + 1)
        if not told:
            yield _async("n", "first token", i, first, tid)
        yield _async("e", "request", i, _us(e.finish[i]), tid)


def _iso(origin: str) -> str | None:
    """The window's first arrival (the RequestSet keeps it as text) in ISO 8601."""
    if not origin:
        return None
    try:
        return datetime.fromisoformat(origin).isoformat()
    except ValueError:
        return origin


def _x(name: str, cat: str, ts: int, dur: int, rep: int, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "cat": cat,
        "ph": "X",
        "ts": ts,
        "dur": dur,
        "pid": PID,
        "tid": rep + 1,
        "args": args,
    }


def _async(
    ph: str, name: str, i: int, ts: int, tid: int, args: dict[str, Any] | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": name,
        "cat": "request",
        "ph": ph,
        "id": i,
        "ts": ts,
        "pid": PID,
        "tid": tid,
    }
    if args is not None:
        out["args"] = args
    return out
