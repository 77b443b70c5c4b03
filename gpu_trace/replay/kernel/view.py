"""The read-only window policies get on a running engine.

Policies read per-job state and the cluster, and act only through the view's methods
(``try_start``, ``preempt``, ``set_timer``, ``reject`` and the what-ifs
``placeable_after`` / ``fit_probe``, which leave the state as it was), so a policy bug cannot corrupt the engine: static per-job columns
are tuples, the engine's mutable per-job columns are exported as read-only
``memoryview`` s of the engine's own ``array`` buffers, the running set and the VC
quotas are ``MappingProxyType`` s of the engine's dicts, numpy arrays are non-writeable
views, and the view object itself refuses attribute assignment. Everything shares the
engine's memory, so the view costs nothing per event (the engine sets ``now`` once per
instant).

This guards against mistakes, not against a hostile policy: Python cannot hide the
engine from code that goes looking for it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from gpu_trace.replay.cluster import ClusterView
from gpu_trace.replay.kernel.job_table import PolicyColumns, policy_columns
from gpu_trace.replay.workload import Workload

if TYPE_CHECKING:
    from gpu_trace.replay.kernel.engine import Engine
    from gpu_trace.replay.kernel.whatif import FitProbe, Placeable

_MEMBERS = (
    "now",
    "w",
    "state",
    "estimate_s",
    "running",
    "vc_quota_milli",
    "rng",
)
"""What a view holds besides the per-job columns."""
_ACTIONS = ("try_start", "preempt", "set_timer", "reject", "placeable_after", "fit_probe")
"""The engine's methods policies may call (bound methods: the view only forwards)."""
_COLUMNS = tuple(name for name, _ in policy_columns())
_SLOTS = _MEMBERS + _COLUMNS + _ACTIONS


def _ro(a: npt.NDArray[Any]) -> npt.NDArray[Any]:
    v = a.view()
    v.flags.writeable = False
    return v


def readonly_workload(w: Workload) -> Workload:
    """The same workload with every numpy column a non-writeable view (no copy)."""
    changes = {
        f.name: _ro(getattr(w, f.name))
        for f in dataclasses.fields(w)
        if isinstance(getattr(w, f.name), np.ndarray)
    }
    return dataclasses.replace(w, **changes)  # type: ignore[arg-type]


class PolicyView(PolicyColumns[Sequence[float]]):
    """Read-only view of an :class:`~gpu_trace.replay.kernel.engine.Engine` (satisfies
    :class:`~gpu_trace.replay.policy.EngineView`). Its per-job columns are the
    ones :mod:`~gpu_trace.replay.kernel.job_table` declares for policies: static ones shared
    as the engine's tuples, state ones as read-only memoryviews of its buffers.
    """

    __slots__ = _SLOTS

    now: float
    w: Workload
    state: ClusterView
    estimate_s: npt.NDArray[np.float64]
    running: MappingProxyType[int, Any]
    vc_quota_milli: MappingProxyType[int, int]
    rng: np.random.Generator
    try_start: Callable[..., bool]
    preempt: Callable[[int], None]
    set_timer: Callable[[float, int, int], None]
    reject: Callable[[int, str], None]
    placeable_after: Callable[..., Placeable | None]
    fit_probe: Callable[[int], FitProbe]

    def __init__(self, e: Engine) -> None:
        put = object.__setattr__
        put(self, "now", e.now)
        put(self, "w", readonly_workload(e.w))
        put(self, "state", ClusterView(e.state))
        put(self, "estimate_s", _ro(e.estimate_s))
        for name, col in policy_columns():
            value = getattr(e, name)
            if col.role == "state":  # the engine's array: read-only, same memory
                value = memoryview(value).toreadonly()
            put(self, name, value)  # static: the engine's tuple
        put(self, "running", MappingProxyType(e.alloc))
        put(self, "vc_quota_milli", MappingProxyType(e.vc_quota_milli))
        put(self, "rng", e.rng)
        for name in _ACTIONS:
            put(self, name, getattr(e, name))

    def __setattr__(self, name: str, value: object) -> None:
        msg = f"policies see the engine read-only (cannot set {name!r})"
        raise AttributeError(msg)

    def __delattr__(self, name: str) -> None:
        msg = f"policies see the engine read-only (cannot delete {name!r})"
        raise AttributeError(msg)


set_now: Callable[[PolicyView, float], None] = PolicyView.now.__set__  # type: ignore[attr-defined]
"""The engine's one way to move the view's clock (a slot descriptor: C speed)."""
