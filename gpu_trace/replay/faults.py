"""Node failures in replay: a seeded failure / repair process on the engine's one event
heap, jobs killed on a failed node restarting from their last checkpoint.

Model (``docs/replay.md``, "Faults and energy"): every node fails independently with
exponential times between failures (mean ``mtbf_s``) and is repaired after an
exponential time (mean ``mttr_s``). The superposition of the up nodes' processes is one
Poisson process of rate ``up nodes / mtbf_s`` with the failing node drawn uniformly
among them (memoryless, so the same distribution), which keeps one pending failure
event instead of one per node and lets the process stop when the work is done.

A failure kills every job on the node. A job's useful progress ``p`` is checkpointed at
multiples of ``checkpoint_s`` (and is kept at a preemption, which suspends); the work
since the last checkpoint is lost, and the restart pays ``restore_s`` first. After more
than ``retries`` failures a job ends ``failed``. The node holds no placement while down
(:meth:`ClusterState.set_down`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from gpu_trace import values
from gpu_trace.errors import GpuTraceError
from gpu_trace.replay.kernel.engine import STOP_FAIL, Engine, Timeline


def parse_duration(text: str, what: str) -> float:
    """``30m``, ``2h``, ``50000h``, ``1d``, ``120`` (seconds) -> seconds (>= 0); the one
    duration syntax of every option (:func:`gpu_trace.values.parse_duration`).
    """
    return values.parse_duration(text, what)


@dataclass(frozen=True)
class FaultModel:
    """Per-node mean time between failures and to repair (seconds)."""

    mtbf_s: float
    mttr_s: float
    origin: str = "given"
    """``given`` (``--faults mtbf=...``) or ``trace`` (derived, see :func:`from_trace`)."""
    derived: tuple[tuple[str, float], ...] = ()
    """What a trace-derived model was computed from (printed and saved)."""
    script: tuple[tuple[float, int], ...] = ()
    """Scripted failures (time s, node): no random draws, repairs after exactly mttr."""

    def as_dict(self) -> dict[str, Any]:
        """The model as plain JSON (rates, origin, what a derived one came from, the
        script): saved in the config's ``fault_model`` so a rerun uses the same one.
        """
        out: dict[str, Any] = {
            "mtbf_s": self.mtbf_s,
            "mttr_s": self.mttr_s,
            "origin": self.origin,
            **dict(self.derived),
        }
        if self.script:
            out["script"] = [list(x) for x in self.script]
        return out


DEFAULT_MTTR_S = 2 * 3600.0
"""Repair time when the trace cannot tell (none of the public traces records one)."""


def parse_faults(text: str) -> tuple[str, dict[str, float], list[tuple[float, int]]]:
    """``trace[,mttr=D]``, ``mtbf=D,mttr=D`` or a script ``fail=T@NODE,...,mttr=D``
    (failures at given times, each repaired after exactly ``mttr``) -> (mode,
    durations in seconds, scripted failures).
    """
    parts = [p.strip() for p in text.split(",") if p.strip()]
    mode = "trace" if parts and parts[0] == "trace" else "given"
    values: dict[str, float] = {}
    script: list[tuple[float, int]] = []
    for p in parts[1:] if mode == "trace" else parts:
        key, eq, val = p.partition("=")
        if eq and key == "fail" and mode != "trace":
            when, at, node = val.partition("@")
            if not at or not node.strip().isdigit():
                msg = f"--faults {text!r}: fail= needs TIME@NODE, got {val!r}"
                raise GpuTraceError(msg)
            script.append((parse_duration(when, "--faults fail"), int(node)))
            continue
        if not eq or key not in {"mtbf", "mttr"}:
            msg = f"--faults {text!r}: expected trace, mtbf=D,mttr=D or fail=T@NODE, got {p!r}"
            raise GpuTraceError(msg)
        values[key] = parse_duration(val, f"--faults {key}")
    if script:
        if "mtbf" in values:
            msg = f"--faults {text!r}: give either mtbf= or fail= entries"
            raise GpuTraceError(msg)
        return "script", values, sorted(script)
    if mode == "given" and "mtbf" not in values:
        msg = f"--faults {text!r} needs mtbf=D (or `trace`)"
        raise GpuTraceError(msg)
    if values.get("mtbf", 1.0) <= 0:
        msg = f"--faults {text!r}: mtbf must be > 0"
        raise GpuTraceError(msg)
    return mode, values, script


def from_trace(summary: pl.DataFrame, mttr_s: float | None) -> FaultModel:
    """A model from the trace's failure rates (``analyses.failures.mtbf`` rows: node
    failures = GPU jobs ended ``node_fail`` + XID / ECC / lost-GPU events, over the
    node-hours GPU jobs held): MTBF = node-hours / failures, summed over clusters.
    """
    node_h = float(summary["node_hours"].sum()) if summary.height else 0.0
    fails = int(summary["node_failures"].sum()) if summary.height else 0
    if fails == 0 or node_h <= 0:
        msg = (
            "--faults trace: the store has no node failures (node_fail jobs or XID / "
            "lost-GPU events) for this source; give --faults mtbf=D,mttr=D"
        )
        raise GpuTraceError(msg)
    return FaultModel(
        mtbf_s=node_h / fails * 3600.0,
        mttr_s=DEFAULT_MTTR_S if mttr_s is None else mttr_s,
        origin="trace",
        derived=(
            ("node_hours", node_h),
            ("node_failures", float(fails)),
            ("node_fail_jobs", float(summary["node_fail_jobs"].sum())),
            ("device_events", float(summary["device_events"].sum())),
        ),
    )


class Faults:
    """The failure process bound to one engine, and its accounting (engine seconds x
    GPUs; divide by 3600 for GPU-hours).
    """

    def __init__(
        self,
        engine: Engine,
        model: FaultModel,
        checkpoint_s: float,
        retries: int,
        restore_s: float,
        seed: int,
    ) -> None:
        if retries < 0 or checkpoint_s < 0 or restore_s < 0:
            msg = "--retries, --checkpoint and --restore-s must be >= 0"
            raise GpuTraceError(msg)
        self.e = engine
        self.model = model
        self.checkpoint_s = checkpoint_s
        self.retries = retries
        self.restore_s = restore_s
        self.rng = np.random.default_rng([seed, 0xFA17])
        n = engine.w.n
        self.up: list[int] = list(range(engine.spec.nodes))
        self.pos: dict[int, int] = {v: i for i, v in enumerate(self.up)}
        self.ver = 0
        self.failures = np.zeros(n, dtype=np.int32)
        self.ov_fail = np.zeros(n, dtype=np.float64)
        """Part of ``engine.overhead`` added by failure restarts."""
        self.restarts = np.zeros(n, dtype=np.int64)
        self.discard_pre = np.zeros(n, dtype=np.float64)
        self.discard_fail = np.zeros(n, dtype=np.float64)
        self.failed_at: dict[int, float] = {}
        self.lost_failure = 0.0
        self.events: list[tuple[float, int, str, int]] = []
        self.last_arrival = engine.arrival[-1] if n else 0.0
        self._fail_hook = engine.add_hook(self._on_fail)
        self._repair_hook = engine.add_hook(self._on_repair)
        if model.script:
            script_hook = engine.add_hook(self._on_script)
            for i, (t, node) in enumerate(model.script):
                if not 0 <= node < engine.spec.nodes:
                    msg = f"--faults fail=...@{node}: the cluster has nodes 0..{engine.spec.nodes - 1}"
                    raise GpuTraceError(msg)
                engine.at(t, script_hook, i)
        else:
            self._schedule_next()

    # -- the process -------------------------------------------------------------------

    def _schedule_next(self) -> None:
        self.ver += 1
        if not self.up or math.isinf(self.model.mtbf_s):
            return
        gap = float(self.rng.exponential(self.model.mtbf_s / len(self.up)))
        self.e.at(self.e.now + gap, self._fail_hook, self.ver)

    def _work_left(self) -> bool:
        e = self.e
        return bool(e.alloc) or e.waiting > 0 or e.now < self.last_arrival

    def _on_fail(self, ver: int) -> None:
        if ver != self.ver or not self._work_left():
            return
        node = self.up[int(self.rng.integers(len(self.up)))]
        if node in self.e.state.down:  # powered off (power-off policy): cannot fail
            self._schedule_next()
            return
        self._fail_node(node)
        repair = float(self.rng.exponential(self.model.mttr_s))
        self.e.at(self.e.now + repair, self._repair_hook, node)
        self._schedule_next()

    def _on_script(self, i: int) -> None:
        node = self.model.script[i][1]
        if node in self.pos and node not in self.e.state.down:
            self._fail_node(node)
            self.e.at(self.e.now + self.model.mttr_s, self._repair_hook, node)

    def _fail_node(self, node: int) -> None:
        """Kill the node's jobs (ascending job index) and take it out of service."""
        i = self.pos.pop(node)
        last = self.up.pop()
        if last != node:
            self.up[i] = last
            self.pos[last] = i
        victims = sorted(j for j, parts in self.e.alloc.items() if any(p[0] == node for p in parts))
        for j in victims:
            self._kill(j)
        self.e.state.set_down(node)
        self.events.append((self.e.now, node, "failure", len(victims)))

    def _on_repair(self, node: int) -> None:
        self.e.state.set_up(node)
        self.pos[node] = len(self.up)
        self.up.append(node)
        self.events.append((self.e.now, node, "repair", 0))
        if not self.model.script:
            self._schedule_next()

    def _kill(self, j: int) -> None:
        """Job ``j`` dies with its node: keep its last checkpoint, requeue it with the
        restore cost, or end it ``failed`` after ``retries`` restarts.
        """
        e = self.e
        g = e.gpus[j]
        worked = (e.now - e.seg_start[j]) / e.slow[j]
        ov = e.overhead[j]
        ov_fail = min(float(self.ov_fail[j]), ov)
        paid = min(ov, worked)
        unpaid = ov - paid
        paid_pre = min(ov - ov_fail, paid)
        # the unpaid overhead is never paid: preemption's share first was paid first
        self.discard_pre[j] += (ov - ov_fail) - paid_pre
        self.discard_fail[j] += unpaid - ((ov - ov_fail) - paid_pre)
        left_at_start = e.remaining[j] - ov
        done_before = e.duration[j] - left_at_start
        p = done_before + (worked - paid)
        c = self.checkpoint_s
        saved = max(done_before, math.floor(p / c + 1e-9) * c) if c > 0 else done_before
        saved = min(saved, p)
        self.lost_failure += (p - saved) * g
        e._stop(j, STOP_FAIL)
        e.version[j] += 1
        e.end_time[j] = math.inf
        self.failures[j] += 1
        e.scheduler.on_finish(j)
        if self.failures[j] > self.retries:
            self.lost_failure += saved * g  # the job gives up: its saved work is wasted
            e.overhead[j] = 0.0
            self.ov_fail[j] = 0.0
            e.remaining[j] = e.duration[j] - saved
            self.failed_at[j] = e.now
            return
        e.remaining[j] = e.duration[j] - saved + self.restore_s
        e.overhead[j] = self.restore_s
        self.ov_fail[j] = self.restore_s
        self.restarts[j] += 1
        e.waiting += 1
        e.waiting_milli += e.ngpu[j] * e.milli[j]
        e.scheduler.on_arrival(j)

    # -- after the run -----------------------------------------------------------------

    def accounting(self, finished: np.ndarray[Any, np.dtype[np.bool_]]) -> dict[str, float]:
        """Consumed, useful and lost GPU-seconds by cause."""
        e = self.e
        g = np.asarray(e.gpus, dtype=np.float64)
        dur = np.asarray(e.duration, dtype=np.float64)
        consumed = float(np.asarray(e.attained_gpu_s, dtype=np.float64).sum())
        for j in e.alloc:  # still running at the end (packing runs): its open segment
            consumed += (e.now - e.seg_start[j]) * e.gpus[j]
        useful = float((dur * g)[finished].sum())
        pre = np.asarray(e.preemptions, dtype=np.float64) * e.options.restore_s
        left = np.asarray(e.overhead, dtype=np.float64)
        left[finished] = 0.0  # a finished job paid its restore first
        for j in e.alloc:
            left[j] = max(0.0, left[j] - (e.now - e.seg_start[j]) / e.slow[j])
        left_fail = np.minimum(self.ov_fail, left)
        left_pre = left - left_fail
        lost_pre = float(((pre - self.discard_pre - left_pre) * g).sum())
        added_fail = self.restarts.astype(np.float64) * self.restore_s
        lost_restore = float(((added_fail - self.discard_fail - left_fail) * g).sum())
        return {
            "consumed": consumed,
            "useful": useful,
            "failure": self.lost_failure,
            "preemption": max(lost_pre, 0.0),
            "restore": max(lost_restore, 0.0),
        }

    def event_frame(self) -> pl.DataFrame:
        """The failure / repair log (``fault_events.csv`` of a run directory)."""
        return pl.DataFrame(
            self.events,
            schema={
                "time_s": pl.Float64,
                "node": pl.Int64,
                "event": pl.String,
                "jobs_killed": pl.Int64,
            },
            orient="row",
        )

    def describe(self) -> str:
        """The model and the checkpoint / retry / restore settings as one JSON string
        (``replay_runs.fault_model_json``).
        """
        return json.dumps(
            {
                **self.model.as_dict(),
                "checkpoint_s": self.checkpoint_s,
                "retries": self.retries,
                "restore_s": self.restore_s,
            },
            sort_keys=True,
        )


def trim_timeline(tl: Timeline) -> None:
    """Drop timeline points after the work ended (a last pending repair, failure or
    power check would stretch the run's time series and energy span).
    """
    busy = np.flatnonzero(
        (np.asarray(tl.running, dtype=np.int64) > 0) | (np.asarray(tl.waiting, dtype=np.int64) > 0)
    )
    keep = int(busy[-1]) + 2 if busy.size else len(tl.time)
    for name in tl.__dataclass_fields__:
        col = getattr(tl, name)
        del col[keep:]
