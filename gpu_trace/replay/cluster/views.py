"""What policies see of the cluster: :class:`ClusterView`, the allocation state's own
memory, read-only.

Policies decide; only the engine changes the state. Handing them the mutable
:class:`~gpu_trace.replay.cluster.state.ClusterState` would let a buggy or third-party
policy corrupt every later decision silently, and copying the state per event would cost
more than the decision. The view shares the state's buffers (non-writeable numpy views,
read-only memoryviews) and its non-mutating queries, so it costs nothing per event and any
assignment raises.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

from gpu_trace.replay.cluster.spec import ClusterSpec
from gpu_trace.replay.cluster.state import ClusterState


def _readonly(a: npt.NDArray[Any]) -> npt.NDArray[Any]:
    v = a.view()
    v.flags.writeable = False
    return v


class ClusterView:
    """What policies see of a :class:`ClusterState`: the same memory, read-only.

    Arrays are non-writeable numpy views, per-node rows read-only ``memoryview`` s,
    shapes tuples, and the queries are the state's own (non-mutating) methods; any
    assignment raises. Costs nothing per event: the views share the state's buffers.
    """

    __slots__ = (
        "_s",
        "capacity_for",
        "capacity_milli",
        "cpu_cap",
        "cpu_free",
        "first_with_whole",
        "free",
        "free_np",
        "gmax",
        "iter_by_whole",
        "mem_cap",
        "mem_free",
        "multi_resource",
        "node_gpus",
        "node_ok_np",
        "node_type",
        "node_with_whole",
        "nodes_by_whole",
        "res_ok",
        "res_ok_np",
        "room_milli",
        "spec",
        "type_np",
        "types_of",
        "whole_free",
        "whole_parts",
    )

    _s: ClusterState
    spec: ClusterSpec
    gmax: int
    node_gpus: tuple[int, ...]
    node_type: tuple[int, ...]
    type_np: npt.NDArray[np.int64]
    capacity_milli: int
    free: tuple[memoryview, ...]
    free_np: npt.NDArray[np.int32]
    types_of: Callable[[int], tuple[int, ...]]
    node_ok_np: Callable[[int], npt.NDArray[np.bool_]]
    capacity_for: Callable[[int], tuple[int, int]]
    whole_parts: Callable[[int, int], list[tuple[int, int, int]]]
    node_with_whole: Callable[[int, int, int, int], int]
    nodes_by_whole: Callable[[int], list[tuple[int, int]]]
    first_with_whole: Callable[[int, int], int]
    iter_by_whole: Callable[[int], Iterator[tuple[int, int]]]
    whole_free: Callable[[int], int]
    room_milli: Callable[[], int]
    multi_resource: bool
    cpu_cap: npt.NDArray[np.int64]
    mem_cap: npt.NDArray[np.int64]
    cpu_free: npt.NDArray[np.int64]
    mem_free: npt.NDArray[np.int64]
    res_ok_np: Callable[[int, int], npt.NDArray[np.bool_]]
    res_ok: Callable[[int, int, int], bool]

    def __init__(self, state: ClusterState) -> None:
        put = object.__setattr__
        put(self, "_s", state)
        put(self, "spec", state.spec)
        put(self, "gmax", state.gmax)
        put(self, "node_gpus", tuple(state.node_gpus))
        put(self, "node_type", tuple(state.node_type))
        put(self, "type_np", _readonly(state.type_np))
        put(self, "capacity_milli", state.capacity_milli)
        put(self, "free", tuple(memoryview(r).toreadonly() for r in state.free))
        put(self, "free_np", _readonly(state.free_np))
        put(self, "multi_resource", state.multi_resource)
        for arr in ("cpu_cap", "mem_cap", "cpu_free", "mem_free"):
            put(self, arr, _readonly(getattr(state, arr)))
        for name in (
            "res_ok_np",
            "res_ok",
            "types_of",
            "node_ok_np",
            "capacity_for",
            "whole_parts",
            "node_with_whole",
            "nodes_by_whole",
            "first_with_whole",
            "iter_by_whole",
            "whole_free",
            "room_milli",
        ):
            put(self, name, getattr(state, name))

    def __setattr__(self, name: str, value: object) -> None:
        msg = f"the cluster view is read-only (cannot set {name!r})"
        raise AttributeError(msg)

    def __delattr__(self, name: str) -> None:
        msg = f"the cluster view is read-only (cannot delete {name!r})"
        raise AttributeError(msg)

    @property
    def node_free(self) -> npt.NDArray[np.int64]:
        """Free milli-GPU per node (a fresh array: the state keeps a list, cheaper to
        update per allocation).
        """
        return np.asarray(self._s.node_free, dtype=np.int64)

    @property
    def used_milli(self) -> int:
        """Milli-GPU allocated now, cluster-wide."""
        return self._s.used_milli

    @property
    def frag_milli(self) -> int:
        """Free milli-GPU on partly used nodes now (the fragmentation measure of the
        timeline).
        """
        return self._s.frag_milli

    @property
    def ups(self) -> int:
        """Nodes put back in service so far (see :attr:`ClusterState.ups`)."""
        return self._s.ups

    @property
    def free_milli(self) -> int:
        """Free capacity, cluster-wide (a necessary, not sufficient, condition to fit)."""
        return self._s.capacity_milli - self._s.used_milli
