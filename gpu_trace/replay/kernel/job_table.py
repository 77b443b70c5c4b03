"""The per-job columns of a replay, declared once.

A replay keeps one value per job in about twenty columns: what the job asks (static,
from the workload), what the engine changes as it runs (its state) and what the result
reports (its outcome). Each column is declared here, once, as an annotated attribute of
:class:`PolicyColumns` (what policies may read) or :class:`EngineColumns` (what only the
engine and its accounting read). Everything else is derived from these declarations:

- the engine's containers (:func:`fill`): a tuple per static column (C-speed indexing,
  immutable), an ``array('d')`` per state column (mutable, exportable read-only), a
  list per outcome column;
- the read-only view policies get (:mod:`gpu_trace.replay.kernel.view` builds its slots and
  exports from :func:`policy_columns`);
- the policy protocol: :class:`~gpu_trace.replay.policy.EngineView` extends
  :class:`PolicyColumns`, so a type checker sees every column a policy reads;
- the per-job result frame (:func:`result_arrays`: the outcome columns that name a
  result field).

Why a protocol with type parameters: the engine holds a state column as a mutable
``array('d')`` while a policy sees the same buffer as a read-only sequence, so the
container type is a parameter (``EngineColumns[array.array[float]]`` for the engine,
``PolicyColumns[Sequence[float]]`` for the view) and the name, role and meaning are
written once. A new column is one annotated line here; the engine, the view, the
protocol and the result follow.
"""

from __future__ import annotations

import array
import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import (
    TYPE_CHECKING,
    Annotated,
    Any,
    Generic,
    Literal,
    Protocol,
    TypeAlias,
    TypeVar,
    get_type_hints,
)

import numpy as np
import numpy.typing as npt

from gpu_trace.replay.cluster import ANY_TYPE

if TYPE_CHECKING:
    from gpu_trace.replay.cluster import ClusterSpec
    from gpu_trace.replay.workload import Workload

Role = Literal["static", "state", "outcome"]

DECLARED: Any = None
"""The class-level placeholder of every column (each instance sets its own in
:func:`fill`): a declared protocol member with a value is not abstract, so the engine
and the view can subclass the protocols."""

INF = math.inf

FloatArray: TypeAlias = "array.array[float]"
"""How the engine holds a state column (mutable, exportable read-only)."""

S = TypeVar("S", bound=Sequence[float])
"""How a state column is held: ``array.array[float]`` by the engine (mutable), a
read-only ``Sequence[float]`` by the view."""


@dataclass(frozen=True)
class Column:
    """What a per-job column is: its role, its meaning, where it comes from.

    ``static`` columns are read from the workload by ``source`` (once, at engine set-up)
    and never change; ``state`` columns start at ``initial`` (or a copy of the static
    column named by ``like``) and the engine updates them; ``outcome`` columns start at
    ``initial`` and the engine records the job's outcome in them; ``result`` names the
    field of the per-job result that an outcome becomes (``None``: not reported).
    """

    role: Role
    doc: str
    source: Callable[[Any, Any], Sequence[Any]] | None = None
    """Reads the column from (workload, cluster spec): any workload type, so another
    simulator's table (requests) is filled the same way."""
    initial: float = 0.0
    like: str | None = None
    result: str | None = None
    dtype: str = "float64"
    """numpy dtype of the result field (outcomes)."""


def _static(doc: str, source: Callable[[Workload, ClusterSpec], Sequence[Any]]) -> Column:
    return Column("static", doc, source=source)


def _cpu(w: Workload, spec: ClusterSpec) -> Sequence[int]:
    """CPUs enforced only on a multi-resource cluster (zeros: nothing to check)."""
    return tuple(w.cpu().tolist()) if spec.multi_resource else (0,) * w.n


def _mem(w: Workload, spec: ClusterSpec) -> Sequence[int]:
    return tuple(w.mem().tolist()) if spec.multi_resource else (0,) * w.n


def _mask(w: Workload, spec: ClusterSpec) -> Sequence[int]:
    """The allowed GPU types as a bit mask, one lookup per distinct type name."""
    masks: dict[str | None, int] = {}
    return tuple(
        masks.setdefault(t, spec.type_mask(t)) if t else ANY_TYPE
        for t in w.frame["gpu_type"].to_list()
    )


class PolicyColumns(Protocol, Generic[S]):
    """The per-job columns a policy may read (job ``j`` is index ``j`` everywhere)."""

    __slots__ = ()

    arrival: Annotated[
        Sequence[float],
        _static(
            "Arrival time of each job (s, from the replay's origin).",
            lambda w, _: tuple(w.arrival_s.tolist()),
        ),
    ] = DECLARED
    ngpu: Annotated[
        Sequence[int],
        _static("GPUs (or GPU slots) each job asks for.", lambda w, _: tuple(w.ngpu.tolist())),
    ] = DECLARED
    milli: Annotated[
        Sequence[int],
        _static(
            "Milli-GPU each job takes per GPU (1000 = whole GPUs).",
            lambda w, _: tuple(w.milli.tolist()),
        ),
    ] = DECLARED
    gpus: Annotated[
        Sequence[float],
        _static(
            "GPUs each job asks for, as in the trace (fractional for shared GPUs).",
            lambda w, _: tuple(w.gpus.tolist()),
        ),
    ] = DECLARED
    vc: Annotated[
        Sequence[int], _static("VC code of each job.", lambda w, _: tuple(w.vc_code.tolist()))
    ] = DECLARED
    mask: Annotated[Sequence[int], _static("Allowed GPU types per job, as a bit mask.", _mask)] = (
        DECLARED
    )
    cpu_req: Annotated[
        Sequence[int],
        _static("CPU milli-cores each job holds per node (zeros on a GPU-only cluster).", _cpu),
    ] = DECLARED
    mem_req: Annotated[
        Sequence[int], _static("Memory bytes each job holds (zeros on a GPU-only cluster).", _mem)
    ] = DECLARED
    remaining: Annotated[
        S, Column("state", "Work left per job, in seconds at full speed.", like="duration")
    ] = DECLARED
    attained_gpu_s: Annotated[
        S, Column("state", "GPU-seconds each job has run so far (LAS ranks by it).")
    ] = DECLARED
    end_time: Annotated[
        S,
        Column(
            "state", "Expected finish time of each running job (inf when not running).", initial=INF
        ),
    ] = DECLARED
    seg_start: Annotated[S, Column("state", "Start of each running job's current segment (s).")] = (
        DECLARED
    )
    slow: Annotated[
        S,
        Column(
            "state",
            "Wall seconds per second of work of each running job at its placement "
            "(multi-node slowdown, heterogeneous speed; 1 = full pace).",
            initial=1.0,
        ),
    ] = DECLARED


class EngineColumns(PolicyColumns[S], Protocol):
    """The per-job columns only the engine and its accounting read or write."""

    __slots__ = ()

    duration: Annotated[
        Sequence[float],
        _static(
            "Work of each job at full speed (s), as in the workload.",
            lambda w, _: tuple(w.duration_s.tolist()),
        ),
    ] = DECLARED
    speed_code: Annotated[
        Sequence[int],
        _static(
            "Row of each job in the workload's speed table (empty without one).",
            lambda w, _: tuple(w.speed_code.tolist()) if w.speed_code is not None else (),
        ),
    ] = DECLARED
    overhead: Annotated[
        S,
        Column(
            "state",
            "Restore time (engine seconds) still to pay at the start of a job's next "
            "segment: what a preemption or a failure restart added to ``remaining``.",
        ),
    ] = DECLARED
    first_start: Annotated[
        list[float],
        Column(
            "outcome",
            "Start of each job's first run (inf: never started).",
            initial=INF,
            result="start",
        ),
    ] = DECLARED
    finish: Annotated[
        list[float],
        Column(
            "outcome", "When each job finished (inf: not finished).", initial=INF, result="finish"
        ),
    ] = DECLARED
    preemptions: Annotated[
        list[int],
        Column("outcome", "Times each job was preempted.", result="preemptions", dtype="int32"),
    ] = DECLARED
    first_nodes: Annotated[
        list[int],
        Column("outcome", "Nodes of each job's first placement.", result="nodes", dtype="int32"),
    ] = DECLARED
    first_speed: Annotated[
        list[float],
        Column(
            "outcome",
            "Speed of the GPU model(s) of each job's first placement (heterogeneity).",
            initial=1.0,
            result="speed",
        ),
    ] = DECLARED
    version: Annotated[
        list[int],
        Column(
            "outcome",
            "Bumped at every preemption: a finish event of an older version is stale.",
            dtype="int64",
        ),
    ] = DECLARED


@cache
def declared(cls: Any) -> tuple[tuple[str, Column], ...]:
    """The columns a columns class declares (its ``Annotated`` attributes carrying a
    :class:`Column`), bases first: how any per-item table of a simulator (jobs here,
    requests in a serving simulator) is read.
    """
    hints = get_type_hints(cls, include_extras=True)
    out = []
    for name, hint in hints.items():
        meta = [m for m in getattr(hint, "__metadata__", ()) if isinstance(m, Column)]
        if meta:
            out.append((name, meta[0]))
    return tuple(out)


def policy_columns() -> tuple[tuple[str, Column], ...]:
    """The columns policies read, in declaration order."""
    return declared(PolicyColumns)


def engine_columns() -> tuple[tuple[str, Column], ...]:
    """Every column, policies' first (the engine holds them all)."""
    return declared(EngineColumns)


def fill(target: Any, workload: Any, spec: Any, table: Hashable = EngineColumns) -> None:
    """Set every declared column on ``target`` (the engine), each in the container its
    role calls for: static columns as tuples read from the workload, state columns as
    ``array('d')`` buffers, outcomes as lists.
    """
    n = workload.n
    made: dict[str, Any] = {}
    cols = declared(table)
    for name, col in cols:  # static first: a state column may start as a copy of one
        if col.role == "static":
            assert col.source is not None
            made[name] = col.source(workload, spec)
    for name, col in cols:
        if col.role == "state":
            made[name] = (
                array.array("d", made[col.like])
                if col.like
                else array.array("d", [col.initial]) * n
            )
        elif col.role == "outcome":
            init: float | int = int(col.initial) if col.dtype.startswith("int") else col.initial
            made[name] = [init] * n
    for name, value in made.items():
        setattr(target, name, value)


def result_arrays(source: Any, table: Hashable = EngineColumns) -> dict[str, npt.NDArray[Any]]:
    """The per-job outcome fields of a finished run (NaN where a time does not exist):
    one array per outcome column that names a ``result``.
    """
    out: dict[str, npt.NDArray[Any]] = {}
    for name, col in declared(table):
        if col.result is None:
            continue
        a = np.asarray(getattr(source, name), dtype=col.dtype)
        if col.dtype.startswith("float"):
            a[np.isinf(a)] = np.nan
        out[col.result] = a
    return out
