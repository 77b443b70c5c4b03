"""Device specs for live replay: ``cuda:0-7`` / ``cuda:0,2`` (real GPUs on this host) or
``emulated:16`` / ``emulated:16x8`` (slots the executor enforces, no GPU needed).

The devices become the :class:`~gpu_trace.replay.cluster.ClusterSpec` the policies see:
real GPUs are one node (one host); ``emulated:N`` is one node of N slots and
``emulated:NxG`` is N slots in nodes of G (the simulator's spec syntax), so a multi-node
cluster can be emulated on one host. The cluster is recorded as a simulator spec string
so ``replay validate`` can rebuild the identical cluster.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from gpu_trace.errors import GpuTraceError
from gpu_trace.replay.cluster import ClusterSpec, parse_spec

_CUDA = re.compile(r"^cuda:(?P<ids>[0-9,\- ]+)$")
_EMU = re.compile(r"^emulated:(?P<n>[0-9]+)(?:x(?P<per>[0-9]+))?$")


@dataclass(frozen=True)
class Devices:
    """The devices of a live run."""

    kind: str
    """``cuda`` or ``emulated``."""
    text: str
    """The spec as given."""
    cluster: str
    """Equivalent simulator cluster spec (``8x8``, ``16x8``)."""
    physical: tuple[tuple[int, ...], ...]
    """physical[node][gpu] = the device id handed to the worker (CUDA ordinal or slot)."""

    @property
    def spec(self) -> ClusterSpec:
        """The simulator cluster these devices amount to (the engine's bookkeeping)."""
        return parse_spec(self.cluster)

    def ids(self, parts: Sequence[tuple[int, int, int]]) -> list[int]:
        """Device ids of an allocation, in part order, each once (shares of one GPU)."""
        seen: list[int] = []
        for n, g, _ in parts:
            d = self.physical[n][g]
            if d not in seen:
                seen.append(d)
        return seen


def _ranges(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            msg = f"device list {text!r} is not like 0-7 or 0,2,3"
            raise GpuTraceError(msg)
        a, b = int(lo), int(hi) if sep else int(lo)
        if b < a:
            msg = f"device range {part!r} goes backwards"
            raise GpuTraceError(msg)
        out.extend(range(a, b + 1))
    if not out or len(set(out)) != len(out):
        msg = f"device list {text!r} is empty or repeats a device"
        raise GpuTraceError(msg)
    return out


def parse_devices(text: str) -> Devices:
    """``cuda:0-7``, ``cuda:0,2``, ``emulated:16`` or ``emulated:16x8``."""
    text = text.strip()
    m = _CUDA.match(text)
    if m:
        ids = _ranges(m["ids"])
        return Devices("cuda", text, f"{len(ids)}x{len(ids)}", (tuple(ids),))
    m = _EMU.match(text)
    if m:
        n = int(m["n"])
        per = int(m["per"]) if m["per"] else n
        if n <= 0 or per <= 0:
            msg = f"{text!r}: device counts must be positive"
            raise GpuTraceError(msg)
        spec = parse_spec(f"{n}x{per}")
        physical: list[tuple[int, ...]] = []
        k = 0
        for g in spec.node_gpus:
            physical.append(tuple(range(k, k + g)))
            k += g
        return Devices("emulated", text, f"{n}x{per}", tuple(physical))
    msg = f"--devices {text!r} is not cuda:LIST (cuda:0-7, cuda:0,2) or emulated:N[xG]"
    raise GpuTraceError(msg)
