"""A scripted stand-in for ``pynvml``, for tests and benchmarks on machines with no GPU.

It has the function names, constants and error classes the sampler uses, and plays a
script over a shared fake clock: fields a GPU does not support, a GPU lost at time *t*,
a driver reload (calls fail, ``nvmlInit`` fails for a while, energy counters restart),
MIG parents with instance handles whose utilization is not supported, and
``FunctionNotFound`` for a reader the "driver" lacks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any


class NVMLError(Exception):
    """The base of the fake's errors, as ``pynvml.NVMLError``: ``value`` is the NVML
    return code and ``str()`` the short name (``GpuIsLost``) that logs show.
    """

    value = 999

    def __str__(self) -> str:
        return type(self).__name__.removeprefix("NVMLError_")


def _error(name: str, code: int) -> type[NVMLError]:
    return type(f"NVMLError_{name}", (NVMLError,), {"value": code})


NVMLError_Uninitialized = _error("Uninitialized", 1)
NVMLError_NotSupported = _error("NotSupported", 3)
NVMLError_NoPermission = _error("NoPermission", 4)
NVMLError_NotFound = _error("NotFound", 6)
NVMLError_DriverNotLoaded = _error("DriverNotLoaded", 9)
NVMLError_LibraryNotFound = _error("LibraryNotFound", 12)
NVMLError_FunctionNotFound = _error("FunctionNotFound", 13)
NVMLError_GpuIsLost = _error("GpuIsLost", 15)


class Clock:
    """Fake time: ``sleep`` advances ``now``; ``cpu`` accumulates nothing."""

    def __init__(self, start: float = 1_767_225_600.0) -> None:
        self.now = start

    def __call__(self) -> float:
        """The fake time now (the sampler's ``clock``)."""
        return self.now

    def sleep(self, seconds: float) -> None:
        """Advance the fake time instead of waiting (the sampler's ``sleep``)."""
        self.now += seconds


@dataclass
class FakeGpu:
    """One scripted GPU. Values are functions of the tick (whole seconds since start)."""

    uuid: str
    util: int = 50
    mem_used: int = 4 * 1024**3
    mem_total: int = 80 * 1024**3
    power_mw: int = 300_000
    temp: int = 60
    sm_clock: int = 1980
    mem_clock: int = 2619
    mem_temp: int = 70
    energy_per_s_mj: int = 300_000
    unsupported: set[str] = field(default_factory=set)
    lost_at: float | None = None
    mig: list[tuple[int, int]] = field(default_factory=list)
    processes: list[tuple[int, int | None]] = field(default_factory=list)


@dataclass
class _Handle:
    gpu: FakeGpu
    mig: tuple[int, int] | None = None


class FakeNvml:
    """The module object handed to :class:`gpu_trace.telemetry.nvml.Sampler`."""

    NVML_DEVICE_MIG_ENABLE = 1
    NVMLError = NVMLError
    NVMLError_Uninitialized = NVMLError_Uninitialized
    NVMLError_NotSupported = NVMLError_NotSupported
    NVMLError_NoPermission = NVMLError_NoPermission
    NVMLError_NotFound = NVMLError_NotFound
    NVMLError_DriverNotLoaded = NVMLError_DriverNotLoaded
    NVMLError_LibraryNotFound = NVMLError_LibraryNotFound
    NVMLError_FunctionNotFound = NVMLError_FunctionNotFound
    NVMLError_GpuIsLost = NVMLError_GpuIsLost

    def __init__(
        self,
        gpus: list[FakeGpu],
        clock: Clock,
        *,
        reload_at: float | None = None,
        reload_s: float = 2.0,
        missing: set[str] | None = None,
        no_driver: bool = False,
    ) -> None:
        self.gpus = gpus
        self.clock = clock
        self.t0 = clock.now
        self.reload_at = None if reload_at is None else self.t0 + reload_at
        self.reload_s = reload_s
        self.missing = missing or set()
        self.no_driver = no_driver
        self.initialised = False
        self.inits = 0
        self.calls = 0
        self.energy_base = self.t0

    # -- state ---------------------------------------------------------------------------
    def _reloading(self) -> bool:
        t = self.clock.now
        return self.reload_at is not None and self.reload_at <= t < self.reload_at + self.reload_s

    def _check(self, h: _Handle | None = None, what: str = "") -> None:
        self.calls += 1
        if what in self.missing:
            raise NVMLError_FunctionNotFound()
        if not self.initialised or self._reloading():
            self.initialised = False
            raise NVMLError_Uninitialized()
        if h is not None:
            if h.gpu.lost_at is not None and self.clock.now >= self.t0 + h.gpu.lost_at:
                raise NVMLError_GpuIsLost()
            if what in h.gpu.unsupported or (h.mig is not None and what == "utilization"):
                raise NVMLError_NotSupported()

    # -- API -----------------------------------------------------------------------------
    def nvmlInit(self) -> None:
        """Fails with no driver or during a reload; the first init after a reload
        restarts the energy counters, as a real driver reload does.
        """
        if self.no_driver:
            raise NVMLError_LibraryNotFound()
        if self._reloading():
            raise NVMLError_DriverNotLoaded()
        if self.reload_at is not None and self.clock.now >= self.reload_at and self.inits:
            self.energy_base = self.clock.now  # the driver reload resets energy counters
            self.reload_at = None
        self.initialised = True
        self.inits += 1

    def nvmlShutdown(self) -> None:
        """Every call fails as uninitialised until the next :meth:`nvmlInit`."""
        self.initialised = False

    def nvmlDeviceGetCount(self) -> int:
        """The GPUs not yet lost (a lost GPU drops out of the count)."""
        self._check()
        return sum(
            1 for g in self.gpus if g.lost_at is None or self.clock.now < self.t0 + g.lost_at
        )

    def nvmlDeviceGetHandleByIndex(self, i: int) -> _Handle:
        """The handle of the ``i``-th GPU still present."""
        self._check()
        alive = [g for g in self.gpus if g.lost_at is None or self.clock.now < self.t0 + g.lost_at]
        return _Handle(alive[i])

    def nvmlDeviceGetUUID(self, h: _Handle) -> str:
        """The GPU's UUID, or a ``MIG-...-<gi>-<ci>`` one for a MIG instance."""
        self._check(h)
        return h.gpu.uuid if h.mig is None else f"MIG-{h.gpu.uuid[4:]}-{h.mig[0]}-{h.mig[1]}"

    def nvmlDeviceGetMigMode(self, h: _Handle) -> list[int]:
        """(current, pending): enabled when the script gives the GPU MIG instances."""
        self._check(h, "mig")
        return [1, 1] if h.gpu.mig else [0, 0]

    def nvmlDeviceGetMaxMigDeviceCount(self, h: _Handle) -> int:
        """7, as on an A100/H100; slots past the scripted instances are not found."""
        self._check(h)
        return 7

    def nvmlDeviceGetMigDeviceHandleByIndex(self, h: _Handle, i: int) -> _Handle:
        """The handle of MIG slot ``i``; ``NotFound`` for an empty slot."""
        self._check(h)
        if i >= len(h.gpu.mig):
            raise NVMLError_NotFound()
        return _Handle(h.gpu, h.gpu.mig[i])

    def nvmlDeviceGetGpuInstanceId(self, h: _Handle) -> int:
        """The MIG instance's GPU instance id (the ``gi`` of ``gi/ci``)."""
        assert h.mig is not None
        return h.mig[0]

    def nvmlDeviceGetComputeInstanceId(self, h: _Handle) -> int:
        """The MIG instance's compute instance id (the ``ci`` of ``gi/ci``)."""
        assert h.mig is not None
        return h.mig[1]

    def nvmlDeviceGetUtilizationRates(self, h: _Handle) -> Any:
        """GPU and memory utilization (memory = GPU / 5); not supported on MIG."""
        self._check(h, "utilization")
        return SimpleNamespace(gpu=h.gpu.util, memory=h.gpu.util // 5)

    def nvmlDeviceGetMemoryInfo(self, h: _Handle) -> Any:
        """Used / free / total bytes; a MIG instance sees a seventh of the GPU's."""
        self._check(h, "memory")
        share = 1 if h.mig is None else 7
        used, total = h.gpu.mem_used // share, h.gpu.mem_total // share
        return SimpleNamespace(used=used, free=total - used, total=total)

    def nvmlDeviceGetPowerUsage(self, h: _Handle) -> int:
        """Power draw in milliwatts, as NVML reports it; not supported on MIG."""
        self._check(h, "power")
        if h.mig is not None:
            raise NVMLError_NotSupported()
        return h.gpu.power_mw

    def nvmlDeviceGetTemperature(self, h: _Handle, sensor: int) -> int:
        """The GPU temperature in degrees C (any sensor)."""
        self._check(h, "temperature")
        return h.gpu.temp

    def nvmlDeviceGetClockInfo(self, h: _Handle, clock: int) -> int:
        """The SM clock (``clock`` 1) or the memory clock (otherwise), in MHz."""
        self._check(h, "clock")
        return h.gpu.sm_clock if clock == 1 else h.gpu.mem_clock

    def nvmlDeviceGetFieldValues(self, h: _Handle, ids: list[int]) -> list[Any]:
        """Field 82 (memory temperature) and 83 (total energy, mJ, growing with the
        fake time since the last reset), each with its own return code as NVML gives
        it: a field the GPU lacks (or energy on MIG) fails alone, not the call.
        """
        self._check(h, "field_values")
        out = []
        for fid in ids:
            ret, vtype, val = 0, 3, SimpleNamespace(ullVal=0, uiVal=0)
            if fid == 82:
                vtype, val = 1, SimpleNamespace(uiVal=h.gpu.mem_temp)
                if "mem_temp" in h.gpu.unsupported:
                    ret = 3
            elif fid == 83:
                elapsed = int(self.clock.now - self.energy_base)
                val = SimpleNamespace(ullVal=1_000_000 + elapsed * h.gpu.energy_per_s_mj)
                if h.mig is not None:
                    ret = 3
            out.append(SimpleNamespace(fieldId=fid, nvmlReturn=ret, valueType=vtype, value=val))
        return out

    def nvmlDeviceGetComputeRunningProcesses(self, h: _Handle) -> list[Any]:
        """The scripted (pid, GPU memory or None) processes; none on a MIG instance."""
        self._check(h, "processes")
        if h.mig is not None:
            return []
        return [SimpleNamespace(pid=p, usedGpuMemory=m) for p, m in h.gpu.processes]


def eight_gpus() -> list[FakeGpu]:
    """The benchmark's host: 8 GPUs, two processes each."""
    return [
        FakeGpu(
            f"GPU-{i:08d}-0000-0000-0000-000000000000",
            util=10 * i,
            processes=[(1000 + i, 1024**3), (2000 + i, None)],
        )
        for i in range(8)
    ]
