"""Policies see the engine read-only, and the engine's one loop takes a pluggable clock."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import pytest

from gpu_trace.replay import ReplayConfig, replay
from gpu_trace.replay import policy as base
from gpu_trace.replay.build import build_engine
from gpu_trace.replay.cluster import MILLI, parse_spec
from gpu_trace.replay.kernel.engine import Engine
from gpu_trace.replay.live.executor import LiveEngine
from gpu_trace.replay.policy import EngineView, HasView, PolicyBase
from gpu_trace.replay.workload import Workload
from tests.test_replay_golden import frame, times


@dataclass(frozen=True)
class NoConfig:
    """No options."""


WRITES: list[tuple[str, Any]] = [
    ("remaining", lambda e, j: e.remaining.__setitem__(j, 0.0)),
    ("attained", lambda e, j: e.attained_gpu_s.__setitem__(j, 1e9)),
    ("end_time", lambda e, j: e.end_time.__setitem__(j, 0.0)),
    ("ngpu", lambda e, j: e.ngpu.__setitem__(j, 0)),
    ("arrival", lambda e, j: e.arrival.__setitem__(j, 0.0)),
    ("now", lambda e, j: setattr(e, "now", 0.0)),
    ("state attr", lambda e, j: setattr(e, "state", None)),
    ("running", lambda e, j: e.running.__setitem__(j, [])),
    ("quota", lambda e, j: e.vc_quota_milli.__setitem__(0, 1)),
    ("estimate", lambda e, j: e.estimate_s.__setitem__(j, 1.0)),
    ("workload", lambda e, j: e.w.duration_s.__setitem__(j, 1.0)),
    ("free_np", lambda e, j: e.state.free_np.__setitem__((0, 0), MILLI)),
    ("free row", lambda e, j: e.state.free[0].__setitem__(0, MILLI)),
    ("used_milli", lambda e, j: setattr(e.state, "used_milli", 0)),
]


class Vandal(PolicyBase):
    """FIFO that tries every write above before each start and records what raised."""

    Config = NoConfig

    def __init__(self, config: NoConfig, engine: EngineView | HasView) -> None:
        super().__init__(config, engine)
        self.queue: list[int] = []
        self.raised: dict[str, type[BaseException]] = {}

    def on_arrival(self, j: int) -> None:
        self.queue.append(j)

    def schedule(self) -> None:
        for name, write in WRITES:
            try:
                write(self.e, self.queue[0] if self.queue else 0)
            except (TypeError, ValueError, AttributeError) as exc:
                self.raised[name] = type(exc)
        while self.queue and self.e.try_start(self.queue[0]):
            self.queue.pop(0)


def test_policy_writes_raise_and_the_schedule_is_untouched() -> None:
    base.register("scheduler", "vandal-test", Vandal)
    try:
        # 2x2 (one node of 2): j0 (2 GPUs, 10 s) 0..10, j1 (1 GPU, 5 s) waits: 10..15,
        # j2 (1 GPU, 7 s) 10..17 - as plain FIFO, whatever the policy tried to write.
        rows = [(0, 10, 2), (1, 5, 1), (2, 7, 1)]
        r = replay(
            frame(rows),
            parse_spec("2x2"),
            ReplayConfig(source="t", scheduler="vandal-test"),
            record_log=True,
        )
        policy = r.engine.scheduler
        assert isinstance(policy, Vandal)
        assert set(policy.raised) == {name for name, _ in WRITES}
        assert times(r) == {"j0": (0, 10), "j1": (10, 15), "j2": (10, 17)}
        # engine invariants: the log replays within capacity and adds up to each duration
        e = r.engine
        free = [MILLI, MILLI]
        ran: dict[int, float] = defaultdict(float)
        opened: dict[int, float] = {}
        for t, kind, j, parts in e.log:
            for _, g, m in parts:
                free[g] += -m if kind == "start" else m
                assert 0 <= free[g] <= MILLI
            if kind == "start":
                opened[j] = t
            else:
                ran[j] += t - opened.pop(j)
        assert dict(ran) == {0: 10.0, 1: 5.0, 2: 7.0}
        assert e.state.used_milli == 0 and list(e.state.free[0]) == [MILLI, MILLI]
    finally:
        base.unregister("scheduler", "vandal-test")


class Corrupt(Vandal):
    """Writes without catching: the run must stop with the error, not go on corrupted."""

    def schedule(self) -> None:
        self.e.remaining[0] = 0.0  # type: ignore[index]


def test_an_uncaught_policy_write_stops_the_run() -> None:
    base.register("scheduler", "corrupt-test", Corrupt)
    try:
        with pytest.raises(TypeError, match="read-only"):
            replay(
                frame([(0, 10, 1)]),
                parse_spec("1x1"),
                ReplayConfig(source="t", scheduler="corrupt-test"),
            )
    finally:
        base.unregister("scheduler", "corrupt-test")


class TickClock:
    """A third backend for the one loop: it ends jobs itself, and the engine only sees
    time in 10-s ticks (events are handled at the next tick)."""

    simulated = False

    def __init__(self, e: Engine) -> None:
        self.e = e

    def wait(self, due: float, arrivals_left: bool) -> float | None:
        e = self.e
        nxt = min([due, *(e.end_time[j] for j in e.running)])
        return None if nxt == math.inf else math.ceil(nxt / 10) * 10

    def complete(self) -> None:
        e = self.e
        for j in [j for j in e.running if e.end_time[j] <= e.now]:
            e.finished(j)

    def after_pass(self) -> None:
        return None


def test_the_loop_runs_on_a_plugged_in_clock() -> None:
    # 1x1, FIFO. j0 (15 s) at 0, j1 (5 s) at 3. Ticks of 10 s: j0 starts at 0, is due at
    # 15, seen at tick 20; j1 (arrived at tick 10) starts at 20, due 25, seen at 30.
    w = Workload.from_jobs(frame([(0, 15, 1), (3, 5, 1)]))
    e = build_engine(ReplayConfig(source="tick"), w, parse_spec("1x1"))
    e.clock = TickClock(e)  # the clock reads the engine, so it is plugged in after
    e.run()
    assert list(zip(e.first_start, e.finish, strict=True)) == [(0, 20), (20, 30)]
    assert e.timeline.time == [0, 10, 20, 30]


def test_live_engine_has_no_loop_of_its_own() -> None:
    # the live executor plugs its wall clock into Engine.run instead of copying the loop
    assert "run" in vars(LiveEngine) and LiveEngine.run is not Engine.run
    for name in ("wait", "complete", "after_pass"):
        assert name in vars(LiveEngine)
    assert "_loop" not in vars(LiveEngine)
    assert LiveEngine.simulated is False
