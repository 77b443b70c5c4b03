"""The NVML sampler behind ``gpu-trace telemetry sample``.

The NVML module is a parameter (default: ``import pynvml`` from the ``[nvml]`` extra),
so tests and benchmarks drive the same code through the stand-in in
:mod:`gpu_trace.telemetry.fake_nvml`. Per tick and device it reads utilization, memory,
power, temperature, clocks, and in one batched ``nvmlDeviceGetFieldValues`` call the
memory temperature and the energy counter, plus the running compute processes.

Robustness, each the behaviour of a real NVML failure:

- ``NotSupported`` / ``NoPermission``: remembered per (device, reader); never called
  again for that device (no rows, rather than a null every tick).
- ``FunctionNotFound`` (bindings newer than the driver): remembered per reader for all
  devices.
- ``GpuIsLost``: a ``gpu_lost`` event, the device is dropped, the others keep going.
- ``Uninitialized`` / ``DriverNotLoaded`` / ``LibRmVersionMismatch`` mid-run (driver
  reload): a ``driver_reload`` event, then ``nvmlInit`` again with exponential backoff,
  devices re-enumerated.
- energy counter going backwards (reset by the reload): an ``energy_reset`` event; the
  raw counter is stored as is, so deltas across the reset are never taken.
- MIG: enabled parents are sampled as whole GPUs and each MIG device handle as
  ``mig_instance = "gi/ci"``.

Rows are buffered and written every ``flush_s`` through :class:`FlushWriter`, plus a
final flush on ``--duration`` end or Ctrl-C.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import time as _time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from gpu_trace.errors import GpuTraceError
from gpu_trace.loaders.telemetry_common import run_periodic
from gpu_trace.schemas.telemetry import GPU_METRICS
from gpu_trace.telemetry.sink import Buffer, FlushWriter

SOURCE = "nvml"
FI_MEMORY_TEMP = 82
FI_TOTAL_ENERGY = 83
_FATAL_INIT = (
    "NVMLError_LibraryNotFound",
    "NVMLError_DriverNotLoaded",
    "NVMLError_LibRmVersionMismatch",
    "NVMLError_NoPermission",
)
_DRIVER_GONE = (
    "NVMLError_Uninitialized",
    "NVMLError_DriverNotLoaded",
    "NVMLError_LibRmVersionMismatch",
)


class NvmlUnavailable(GpuTraceError):
    """No NVIDIA driver / NVML library on this machine."""


class _DriverGone(Exception):
    pass


def load_nvml() -> Any:
    """The real bindings, or :class:`NvmlUnavailable` if the extra is not installed."""
    try:
        import pynvml
    except ImportError as exc:
        msg = f"no NVIDIA driver/NVML found: {exc} (pip install 'gpu-trace[nvml]')"
        raise NvmlUnavailable(msg) from None
    return pynvml


@dataclass
class Device:
    """One sampled GPU or MIG instance: its NVML handle, the physical GPU's index,
    its own UUID and, for a MIG instance, ``"<gpu instance>/<compute instance>"``.
    """

    handle: Any
    index: int
    uuid: str
    mig: str | None = None


def _err(nvml: Any, name: str) -> type[BaseException]:
    cls = getattr(nvml, name, None)
    return cls if isinstance(cls, type) else type(f"_missing_{name}", (Exception,), {})


def _field_value(nvml: Any, fv: Any) -> float | None:
    kind = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal"}
    attr = kind.get(int(fv.valueType))
    return None if attr is None else float(getattr(fv.value, attr))


class Sampler:
    """Samples every GPU of this host through ``nvml`` into a store."""

    def __init__(
        self,
        nvml: ModuleType | Any,
        *,
        store: Path,
        host: str,
        interval_s: float = 1.0,
        flush_s: float = 60.0,
        fields: Sequence[str] | None = None,
        processes: bool = True,
        clock: Callable[[], float] = _time.time,
        sleep: Callable[[float], None] = _time.sleep,
        max_backoff_s: float = 30.0,
    ) -> None:
        unknown = sorted(set(fields or ()) - set(GPU_METRICS))
        if unknown:
            msg = f"unknown --fields {unknown}; choose from {list(GPU_METRICS)}"
            raise GpuTraceError(msg)
        self.nvml = nvml
        self.host = host
        self.interval_s = interval_s
        self.flush_s = flush_s
        self.fields = set(fields) if fields else None
        self.processes = processes
        self.clock = clock
        self.sleep = sleep
        self.max_backoff_s = max_backoff_s
        self.devices: list[Device] = []
        self.unsupported: set[tuple[str, str]] = set()
        self.missing_functions: set[str] = set()
        self.energy: dict[str, float] = {}
        self.samples = Buffer("gpu_samples")
        self.events = Buffer("events")
        self.procs = Buffer("gpu_processes")
        self.ticks = 0
        start = dt.datetime.fromtimestamp(clock(), dt.UTC)
        self.writer = FlushWriter(
            store, SOURCE, host, start, __name__, {"time_basis": "nvml", "source_tz": "UTC"}
        )
        self.e_not_supported = (
            _err(nvml, "NVMLError_NotSupported"),
            _err(nvml, "NVMLError_NoPermission"),
        )
        self.e_not_found = _err(nvml, "NVMLError_NotFound")
        self.e_function = _err(nvml, "NVMLError_FunctionNotFound")
        self.e_lost = _err(nvml, "NVMLError_GpuIsLost")
        self.e_gone = tuple(_err(nvml, n) for n in _DRIVER_GONE)
        self.e_nvml = _err(nvml, "NVMLError")

    # -- setup -------------------------------------------------------------------------
    def open(self) -> None:
        """``nvmlInit`` and device discovery; no driver -> :class:`NvmlUnavailable`."""
        try:
            self.nvml.nvmlInit()
        except self.e_nvml as exc:
            if type(exc).__name__ in _FATAL_INIT:
                msg = f"no NVIDIA driver/NVML found: {exc}"
                raise NvmlUnavailable(msg) from None
            msg = f"no NVIDIA driver/NVML found: NVML init failed: {exc}"
            raise NvmlUnavailable(msg) from None
        self.discover()

    def discover(self) -> None:
        """List the GPUs and, on a GPU in MIG mode, its MIG instances (sampled as
        devices of their own); run at start and after every driver re-init.
        """
        n = self.nvml
        devices: list[Device] = []
        for i in range(n.nvmlDeviceGetCount()):
            h = n.nvmlDeviceGetHandleByIndex(i)
            devices.append(Device(h, i, _text(n.nvmlDeviceGetUUID(h))))
            try:
                current, _pending = n.nvmlDeviceGetMigMode(h)
            except (self.e_nvml, AttributeError):
                continue
            if current != getattr(n, "NVML_DEVICE_MIG_ENABLE", 1):
                continue
            for j in range(n.nvmlDeviceGetMaxMigDeviceCount(h)):
                try:
                    m = n.nvmlDeviceGetMigDeviceHandleByIndex(h, j)
                except self.e_not_found:
                    continue
                gi = n.nvmlDeviceGetGpuInstanceId(m)
                ci = n.nvmlDeviceGetComputeInstanceId(m)
                devices.append(Device(m, i, _text(n.nvmlDeviceGetUUID(m)), f"{gi}/{ci}"))
        self.devices = devices

    # -- one tick ------------------------------------------------------------------------
    def _call(self, dev: Device, reader: str, fn: Callable[[], Any]) -> Any:
        """Run one NVML read with the capability memo; None when it yields nothing."""
        if reader in self.missing_functions or (dev.uuid, reader) in self.unsupported:
            return None
        try:
            return fn()
        except self.e_not_supported:
            self.unsupported.add((dev.uuid, reader))
        except self.e_function:
            self.missing_functions.add(reader)
        except self.e_lost:
            raise
        except self.e_gone as exc:
            raise _DriverGone(str(exc)) from None
        except self.e_nvml:
            return None
        return None

    def _want(self, metric: str) -> bool:
        return self.fields is None or metric in self.fields

    def _emit(
        self, now: dt.datetime, dev: Device, metric: str, value: float | None, raw: str
    ) -> None:
        if value is None or not self._want(metric):
            return
        self.samples.add(
            time=now,
            host=self.host,
            gpu_index=dev.index,
            gpu_uuid=dev.uuid,
            mig_instance=dev.mig,
            metric=metric,
            value=float(value),
            unit=GPU_METRICS[metric][0],
            raw_field=raw,
        )

    def _event(
        self, now: dt.datetime, dev: Device | None, kind: str, code: int | None, detail: str
    ) -> None:
        self.events.add(
            time=now,
            host=self.host,
            gpu_index=None if dev is None else dev.index,
            gpu_uuid=None if dev is None else dev.uuid,
            kind=kind,
            code=code,
            detail=detail,
        )

    def sample_device(self, now: dt.datetime, dev: Device) -> None:
        """One tick's reads of one device (or MIG instance): the basic counters, the
        field values (memory temperature, energy) and, if wanted, its processes; a read
        the device does not support is remembered and skipped from then on.
        """
        self._sample_counters(now, dev)
        self._sample_fields(now, dev)
        if self.processes:
            self._sample_processes(now, dev)

    def _sample_counters(self, now: dt.datetime, dev: Device) -> None:
        """Utilization, memory, power, temperature and clocks."""
        n, h = self.nvml, dev.handle
        util = self._call(dev, "utilization", lambda: n.nvmlDeviceGetUtilizationRates(h))
        if util is not None:
            self._emit(now, dev, "gpu_util_pct", util.gpu, "nvmlDeviceGetUtilizationRates.gpu")
            self._emit(
                now, dev, "mem_util_pct", util.memory, "nvmlDeviceGetUtilizationRates.memory"
            )
        mem = self._call(dev, "memory", lambda: n.nvmlDeviceGetMemoryInfo(h))
        if mem is not None:
            self._emit(now, dev, "mem_used_bytes", mem.used, "nvmlDeviceGetMemoryInfo.used")
            self._emit(now, dev, "mem_free_bytes", mem.free, "nvmlDeviceGetMemoryInfo.free")
            self._emit(now, dev, "mem_total_bytes", mem.total, "nvmlDeviceGetMemoryInfo.total")
        mw = self._call(dev, "power", lambda: n.nvmlDeviceGetPowerUsage(h))
        if mw is not None:
            self._emit(now, dev, "power_w", mw / 1000, "nvmlDeviceGetPowerUsage")
        temp = self._call(dev, "temperature", lambda: n.nvmlDeviceGetTemperature(h, 0))
        self._emit(now, dev, "temp_c", temp, "nvmlDeviceGetTemperature")
        sm = self._call(dev, "sm_clock", lambda: n.nvmlDeviceGetClockInfo(h, 1))
        self._emit(now, dev, "sm_clock_mhz", sm, "nvmlDeviceGetClockInfo(SM)")
        mc = self._call(dev, "mem_clock", lambda: n.nvmlDeviceGetClockInfo(h, 2))
        self._emit(now, dev, "mem_clock_mhz", mc, "nvmlDeviceGetClockInfo(MEM)")

    def _sample_fields(self, now: dt.datetime, dev: Device) -> None:
        """Memory temperature and the energy counter (a drop is an ``energy_reset``
        event); a field a device answers with an error is not asked again.
        """
        n, h = self.nvml, dev.handle
        fvs = self._call(
            dev,
            "field_values",
            lambda: n.nvmlDeviceGetFieldValues(h, [FI_MEMORY_TEMP, FI_TOTAL_ENERGY]),
        )
        for fv in fvs or ():
            key = f"field_{fv.fieldId}"
            if (dev.uuid, key) in self.unsupported:
                continue
            if fv.nvmlReturn != 0:
                self.unsupported.add((dev.uuid, key))
                continue
            value = _field_value(n, fv)
            if fv.fieldId == FI_MEMORY_TEMP:
                self._emit(now, dev, "mem_temp_c", value, "NVML_FI_DEV_MEMORY_TEMP")
            elif fv.fieldId == FI_TOTAL_ENERGY and value is not None:
                last = self.energy.get(dev.uuid)
                if last is not None and value < last:
                    self._event(
                        now,
                        dev,
                        "energy_reset",
                        int(value),
                        f"energy counter went from {last:.0f} to {value:.0f} mJ",
                    )
                self.energy[dev.uuid] = value
                self._emit(now, dev, "energy_mj", value, "NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION")

    def _sample_processes(self, now: dt.datetime, dev: Device) -> None:
        """The compute processes on the device and the GPU memory each holds."""
        n, h = self.nvml, dev.handle
        procs = self._call(dev, "processes", lambda: n.nvmlDeviceGetComputeRunningProcesses(h))
        for p in procs or ():
            used = getattr(p, "usedGpuMemory", None)
            self.procs.add(
                time=now,
                host=self.host,
                gpu_index=dev.index,
                gpu_uuid=dev.uuid,
                mig_instance=dev.mig,
                pid=int(p.pid),
                process_type="C",
                used_mem_bytes=None if used is None else int(used),
            )

    def tick(self) -> None:
        """Sample every device once."""
        now = dt.datetime.fromtimestamp(self.clock(), dt.UTC)
        self.ticks += 1
        try:
            for dev in list(self.devices):
                try:
                    self.sample_device(now, dev)
                except self.e_lost as exc:
                    self._event(now, dev, "gpu_lost", None, f"NVML: {exc}")
                    lost = (
                        {dev.uuid}
                        if dev.mig
                        else {d.uuid for d in self.devices if d.index == dev.index}
                    )
                    self.devices = [d for d in self.devices if d.uuid not in lost]
        except _DriverGone as exc:
            self._event(now, None, "driver_reload", None, f"NVML: {exc}; re-initialising")
            self.reinit()

    def reinit(self) -> None:
        """Shut NVML down and init again with exponential backoff until it works."""
        with contextlib.suppress(self.e_nvml):
            self.nvml.nvmlShutdown()
        delay = min(self.interval_s, self.max_backoff_s)
        while True:
            try:
                self.nvml.nvmlInit()
                self.discover()
                return
            except self.e_nvml:
                self.sleep(delay)
                delay = min(delay * 2, self.max_backoff_s)

    def flush(self) -> str | None:
        """Write the buffered samples, events and processes to the store in one
        transaction; the dataset name written, None when there was nothing.
        """
        return self.writer.flush([self.samples, self.events, self.procs])

    def run(self, duration_s: float | None) -> None:
        """Tick every ``interval_s`` until ``duration_s`` passed or Ctrl-C, flushing
        every ``flush_s`` and once more at the end.
        """
        try:
            run_periodic(
                self.tick,
                self.flush,
                clock=self.clock,
                sleep=self.sleep,
                interval_s=self.interval_s,
                flush_s=self.flush_s,
                duration_s=duration_s,
            )
        finally:
            with contextlib.suppress(self.e_nvml):
                self.nvml.nvmlShutdown()


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
