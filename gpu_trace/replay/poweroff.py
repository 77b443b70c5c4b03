"""Power-off policy (Helios CES-style): switch off nodes idle longer than ``idle_s``,
keep ``reserve`` idle nodes on, and wake nodes when jobs wait; a woken node is out of
service for ``boot_s`` before it takes jobs.

It runs as a periodic timed event on the engine's heap (every ``check_s``, default
``min(60 s, idle_s / 2)``): a node's idle time is measured from the last check that saw
it busy, so a node goes off between ``idle_s`` and ``idle_s + check_s`` after its last
job. Nodes off or booting are held by the cluster state's out-of-service
pseudo-allocation (:meth:`ClusterState.set_down`): no placement uses them and the
energy accounting charges them nothing; each boot is charged ``boot_s`` at the node's
idle draw instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from gpu_trace.errors import GpuTraceError
from gpu_trace.replay.cluster import MILLI
from gpu_trace.replay.faults import parse_duration
from gpu_trace.replay.kernel.engine import Engine


@dataclass(frozen=True)
class PowerOffConfig:
    """``--power-off`` as parsed: idle time before a node goes off, boot time, idle
    nodes kept on, and the check period (None = ``min(60 s, idle_s / 2)``, at least 1 s).
    """

    idle_s: float
    boot_s: float
    reserve: int = 0
    check_s: float | None = None


def parse_power_off(text: str) -> PowerOffConfig:
    """``idle=30m,boot=5m[,reserve=R][,check=60]``."""
    vals: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        key, eq, val = part.partition("=")
        if not eq or key not in {"idle", "boot", "reserve", "check"}:
            msg = (
                f"--power-off {text!r}: expected idle=D,boot=D[,reserve=N][,check=D], got {part!r}"
            )
            raise GpuTraceError(msg)
        vals[key] = val.strip()
    if "idle" not in vals:
        msg = f"--power-off {text!r} needs idle=D"
        raise GpuTraceError(msg)
    reserve = vals.get("reserve", "0")
    if not reserve.isdigit():
        msg = f"--power-off reserve {reserve!r} is not a whole number >= 0"
        raise GpuTraceError(msg)
    return PowerOffConfig(
        idle_s=parse_duration(vals["idle"], "--power-off idle"),
        boot_s=parse_duration(vals.get("boot", "0"), "--power-off boot"),
        reserve=int(reserve),
        check_s=parse_duration(vals["check"], "--power-off check") if "check" in vals else None,
    )


class PowerOff:
    """The policy bound to one engine; counts boots and off node-seconds."""

    def __init__(self, engine: Engine, config: PowerOffConfig) -> None:
        self.e = engine
        self.c = config
        spec = engine.spec
        self.cap = np.asarray(spec.node_gpus, dtype=np.int64) * MILLI
        self.idle_since = np.zeros(spec.nodes, dtype=np.float64)
        self.off: set[int] = set()
        self.booting: set[int] = set()
        self.boots = 0
        self.off_gpu_s = 0.0
        """GPU-seconds of nodes off or booting (what always-on would have powered)."""
        self._off_gpus = 0.0
        self._since = 0.0
        self.last_ready = -math.inf
        """When the last boot ended: a check right after it lets the scheduler try first."""
        self.events: list[tuple[float, int, str]] = []
        """(time s, node, ``off`` / ``boot`` / ``on``) per state change, as the failure
        log (``Faults.events``) keeps them: the event trace draws them."""
        self.check_s = config.check_s or max(1.0, min(60.0, config.idle_s / 2))
        self.last_arrival = engine.arrival[-1] if engine.w.n else 0.0
        self._tick_hook = engine.add_hook(self._tick)
        self._boot_hook = engine.add_hook(self._booted)
        engine.at(engine.arrival[0] if engine.w.n else 0.0, self._tick_hook, 0)

    def _mark(self, delta_gpus: float) -> None:
        now = self.e.now
        self.off_gpu_s += self._off_gpus * (now - self._since)
        self._since = now
        self._off_gpus += delta_gpus

    def _tick(self, _: int) -> None:
        e, s = self.e, self.e.state
        now = e.now
        node_free = np.asarray(s.node_free, dtype=np.int64)
        held = np.zeros_like(node_free, dtype=bool)
        if s.down:
            held[list(s.down)] = True
        idle = (node_free == self.cap) & ~held
        self.idle_since[~idle] = now
        if e.waiting > 0:
            self._wake()
        else:
            long_idle = np.flatnonzero(idle & (now - self.idle_since >= self.c.idle_s))
            can = int(idle.sum()) - self.c.reserve
            for n in long_idle[::-1][: max(0, can)].tolist():
                s.set_down(n)
                self.off.add(n)
                self.events.append((now, n, "off"))
                self._mark(self.cap[n] / MILLI)
        if e.alloc or e.waiting > 0 or now < self.last_arrival:
            e.at(now + self.check_s, self._tick_hook, 0)

    def _wake(self) -> None:
        """Jobs wait: boot enough off nodes to cover the waiting demand beyond the free
        capacity in service (at least one when none is booting or just booted).
        """
        e, s = self.e, self.e.state
        if not self.off:
            return
        free_on = s.capacity_milli - s.used_milli
        booting = sum(int(self.cap[n]) for n in self.booting)
        short = e.waiting_milli - free_on - booting
        per = int(self.cap.max())
        k = max(0, math.ceil(short / per))
        if not self.booting and e.now - self.last_ready >= self.check_s:
            k = max(k, 1)  # the free capacity does not fit what waits (fragments, types)
        for n in sorted(self.off)[:k]:
            self.off.discard(n)
            self.booting.add(n)
            self.boots += 1
            self.events.append((e.now, n, "boot"))
            e.at(e.now + self.c.boot_s, self._boot_hook, n)

    def _booted(self, n: int) -> None:
        self.booting.discard(n)
        self.e.state.set_up(n)
        self.events.append((self.e.now, n, "on"))
        self._mark(-self.cap[n] / MILLI)
        self.idle_since[n] = self.e.now
        self.last_ready = self.e.now

    def finish(self, end: float) -> None:
        """Close the off-time count at the run's end (its last timeline point)."""
        self.off_gpu_s += self._off_gpus * (end - self._since)
        self._since = end
