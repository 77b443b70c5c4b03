"""GPU power model: per-model idle and busy watts plus a per-node host baseline, read
from ``gpu_trace/power_models.toml`` (sources for every number are in that file) and
optionally overridden by a user file of the same shape.

The model is linear in utilization, ``P(u) = idle_w + (busy_w - idle_w) * u`` with u in
[0, 1] (clipped), so energy over t seconds at a constant u is ``P(u) * t``. The scalar
functions (:meth:`PowerModel.gpu_power_w`, :meth:`PowerModel.gpu_energy_j`,
:meth:`PowerModel.host_energy_j`) are what an event-driven replay calls per job; the
frame form (:meth:`PowerModel.lookup`) is what the analyses join against.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import polars as pl

from gpu_trace.errors import InputError

BUILTIN = "power_models.toml"


@dataclass(frozen=True)
class GpuPower:
    """One GPU model's idle and busy draw (W) and where each number comes from."""

    name: str
    idle_w: float
    busy_w: float
    aliases: tuple[str, ...] = ()
    idle_source: str = ""
    busy_source: str = ""

    def power_w(self, util: float) -> float:
        """Draw at utilization ``util`` (0-1, clipped)."""
        u = min(max(util, 0.0), 1.0) if math.isfinite(util) else 1.0
        return self.idle_w + (self.busy_w - self.idle_w) * u


@dataclass(frozen=True)
class PowerModel:
    """The whole table: GPU models by name, the default model and the host baseline."""

    gpus: dict[str, GpuPower]
    default: str
    host_baseline_w: float
    gpus_per_node: int
    host_source: str = ""
    origin: str = BUILTIN
    _alias: dict[str, str] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        for name, gpu in self.gpus.items():  # later entries (a user file) win
            for alias in gpu.aliases:
                self._alias[alias.strip().upper()] = name
        for name in self.gpus:  # a model's own name always means that model
            self._alias[name.strip().upper()] = name

    def resolve(self, gpu_type: str | None) -> GpuPower:
        """The entry for a trace's GPU type (first of ``a|b`` alternatives), else the default."""
        if gpu_type:
            name = self._alias.get(gpu_type.split("|")[0].strip().upper())
            if name is not None:
                return self.gpus[name]
        return self.gpus[self.default]

    def gpu_power_w(self, gpu_type: str | None, util: float = 1.0) -> float:
        """Draw of one GPU of ``gpu_type`` at utilization ``util`` (0-1)."""
        return self.resolve(gpu_type).power_w(util)

    def gpu_energy_j(self, gpu_type: str | None, seconds: float, util: float = 1.0) -> float:
        """Energy (J) of one GPU holding a job for ``seconds`` at utilization ``util``."""
        return self.gpu_power_w(gpu_type, util) * max(seconds, 0.0)

    @property
    def host_w_per_gpu(self) -> float:
        """The host baseline's share charged per GPU held."""
        return self.host_baseline_w / self.gpus_per_node

    def host_energy_j(self, gpus: float, seconds: float) -> float:
        """Host baseline energy (J) charged to a job holding ``gpus`` GPUs for ``seconds``."""
        return self.host_w_per_gpu * max(gpus, 0.0) * max(seconds, 0.0)

    def lookup(self) -> pl.DataFrame:
        """``alias`` (upper case) -> ``power_model``, ``idle_w``, ``busy_w``: for joins."""
        names = list(self._alias)
        entries = [self.gpus[self._alias[a]] for a in names]
        return pl.DataFrame(
            {
                "_alias": names,
                "power_model": [g.name for g in entries],
                "idle_w": [g.idle_w for g in entries],
                "busy_w": [g.busy_w for g in entries],
            }
        )

    def table(self) -> pl.DataFrame:
        """The table as rows, with sources (for docs and reports)."""
        return pl.DataFrame(
            [
                {
                    "power_model": g.name,
                    "idle_w": g.idle_w,
                    "busy_w": g.busy_w,
                    "idle_source": g.idle_source,
                    "busy_source": g.busy_source,
                }
                for g in self.gpus.values()
            ]
        )


def _number(raw: Any, path: str, where: str, *, positive: bool = False) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw):
        raise InputError(path, "must be a finite number", where)
    if raw < 0 or (positive and raw == 0):
        raise InputError(path, "must be > 0" if positive else "must be >= 0", where)
    return float(raw)


def _gpu_entry(entry: Any, name: str, old: GpuPower | None, path: str) -> GpuPower:
    """One ``[gpu.NAME]`` table, its missing keys taken from the entry it overrides."""
    where = f"gpu.{name}"
    if not isinstance(entry, dict):
        raise InputError(path, "must be a table with idle_w and busy_w", where)
    idle = entry.get("idle_w", old.idle_w if old else None)
    busy = entry.get("busy_w", old.busy_w if old else None)
    if idle is None or busy is None:
        raise InputError(path, "needs idle_w and busy_w", where)
    idle_w = _number(idle, path, f"{where}.idle_w")
    busy_w = _number(busy, path, f"{where}.busy_w", positive=True)
    if idle_w > busy_w:
        raise InputError(path, f"idle_w {idle_w} > busy_w {busy_w}", where)
    aliases = entry.get("aliases", list(old.aliases) if old else [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
        raise InputError(path, "aliases must be a list of strings", f"{where}.aliases")
    return GpuPower(
        name=name,
        idle_w=idle_w,
        busy_w=busy_w,
        aliases=tuple(aliases),
        idle_source=str(entry.get("idle_source", old.idle_source if old else "")),
        busy_source=str(entry.get("busy_source", old.busy_source if old else "")),
    )


def _host(doc: dict[str, Any], path: str, base: PowerModel | None) -> tuple[float, int, str]:
    """The ``[host]`` table: baseline watts, GPUs per node and their source."""
    host = doc.get("host", {})
    if not isinstance(host, dict):
        raise InputError(path, "[host] must be a table", "host")
    baseline = host.get("baseline_w", base.host_baseline_w if base else None)
    per_node = host.get("gpus_per_node", base.gpus_per_node if base else None)
    if baseline is None or per_node is None:
        raise InputError(path, "[host] needs baseline_w and gpus_per_node", "host")
    if isinstance(per_node, bool) or not isinstance(per_node, int) or per_node <= 0:
        raise InputError(path, "must be a whole number > 0", "host.gpus_per_node")
    source = str(host.get("source", base.host_source if base else ""))
    return _number(baseline, path, "host.baseline_w"), per_node, source


def _parse(doc: dict[str, Any], path: str, base: PowerModel | None) -> PowerModel:
    gpus = dict(base.gpus) if base else {}
    section = doc.get("gpu", {})
    if not isinstance(section, dict):
        raise InputError(path, "[gpu] must be a table of models", "gpu")
    for name, entry in section.items():
        gpus[name] = _gpu_entry(entry, name, gpus.get(name), path)
    default = doc.get("default", base.default if base else None)
    if not isinstance(default, str) or default not in gpus:
        raise InputError(path, f"default must name a [gpu.*] entry, got {default!r}", "default")
    baseline_w, per_node, host_source = _host(doc, path, base)
    return PowerModel(
        gpus=gpus,
        default=default,
        host_baseline_w=baseline_w,
        gpus_per_node=per_node,
        host_source=host_source,
        origin=path,
    )


def builtin() -> PowerModel:
    """The table shipped with gpu-trace."""
    text = resources.files("gpu_trace").joinpath(BUILTIN).read_text(encoding="utf-8")
    return _parse(tomllib.loads(text), BUILTIN, None)


def load(path: Path | None = None) -> PowerModel:
    """The built-in table, overridden entry by entry by ``path`` when given."""
    base = builtin()
    if path is None:
        return base
    if not path.is_file():
        raise InputError(path, "no such file")
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(path, f"not TOML: {exc}") from None
    return _parse(doc, str(path), base)
