"""The policy contracts, their registry, and what every policy shares.

Three roles (Blox's split), each a package of one module per registered family:

- :class:`AdmissionPolicy` (``replay/admission/``) decides once, at arrival, whether a
  job may ever run.
- :class:`SchedulingPolicy` (``replay/scheduling/``) owns the wait queue and decides
  *which* job starts (or is preempted) and *when*, calling :meth:`EngineView.try_start` /
  :meth:`EngineView.preempt`; preemptive ones build on the public
  :class:`~gpu_trace.replay.scheduling.preemptive.Preemptive`.
- :class:`PlacementPolicy` (``replay/placement/``) decides *where*: which GPUs of which
  nodes a job gets.

Policies never touch the cluster state directly: they get a read-only
:class:`~gpu_trace.replay.kernel.view.PolicyView`, the engine applies their decisions and keeps
the invariants (no over-allocation, no start before arrival).

A policy is a class with a ``Config`` dataclass (fields carry ``metadata={"help": ...}``;
:class:`NoConfig` when it has no options) registered by name. Each policy module declares
its policies (``PLUGINS``, a tuple of :class:`gpu_trace.plugins.PolicyPlugin`); installed
packages add theirs through the ``gpu_trace.policies`` entry-point group; :func:`register`
adds one at run time (a duplicate name is an error, never a silent override). A renamed
policy keeps its old name working (``PolicyPlugin.deprecated``) with one warning line.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

import numpy as np
import numpy.typing as npt

from gpu_trace.errors import GpuTraceError
from gpu_trace.replay.cluster import ClusterView
from gpu_trace.replay.kernel.job_table import PolicyColumns
from gpu_trace.replay.workload import Workload
from gpu_trace.values import parse_bool, unknown

if TYPE_CHECKING:
    from gpu_trace.replay.kernel.whatif import FitProbe, Placeable

Parts = list[tuple[int, int, int]]
"""An allocation: (node, GPU index, milli-GPU) triples."""

Kind = Literal["scheduler", "placement", "admission", "batching", "router", "latency"]


class EngineView(PolicyColumns[Sequence[float]], Protocol):
    """What the engine offers to policies: read-only state, and its actions.

    The per-job columns (``arrival``, ``ngpu``, ``remaining`` ...) come from
    :class:`~gpu_trace.replay.kernel.job_table.PolicyColumns`, where each is declared once.
    The engine hands policies a :class:`~gpu_trace.replay.kernel.view.PolicyView`: every
    member is read-only (tuples, read-only memoryviews / numpy views, mapping
    proxies), so writing to it raises instead of corrupting the engine's state.
    """

    @property
    def now(self) -> float:
        """Simulated time of the instant being scheduled (s)."""
        ...

    @property
    def w(self) -> Workload:
        """The workload (read-only frames and arrays)."""
        ...

    @property
    def state(self) -> ClusterView:
        """The cluster state, read-only."""
        ...

    @property
    def estimate_s(self) -> npt.NDArray[np.float64]:
        """Each job's duration as the scheduler may know it (the estimator's, or true)."""
        ...

    @property
    def running(self) -> Mapping[int, Any]:
        """Running jobs (keys) -> their allocation parts."""
        ...

    @property
    def vc_quota_milli(self) -> Mapping[int, int]:
        """GPU quota of each VC that has one, in milli-GPU."""
        ...

    @property
    def rng(self) -> np.random.Generator:
        """The run's seeded random generator (the only randomness policies may use)."""
        ...

    def try_start(self, j: int, hold: Sequence[tuple[int, int, int]] = ()) -> bool:
        """Place and start job ``j`` now; False (and nothing changed) if it cannot.
        ``hold``: free capacity the placement must leave alone (a reservation).
        """
        ...

    def preempt(self, j: int) -> None:
        """Stop running job ``j`` now, keeping its progress; the caller requeues it."""
        ...

    def set_timer(self, t: float, j: int, tag: int) -> None:
        """Call the scheduler's ``on_timer(j, tag)`` at time ``t`` (>= now)."""
        ...

    def reject(self, j: int, reason: str) -> None:
        """Give up on waiting job ``j`` (it never runs), with a reason."""
        ...

    def placeable_after(
        self, j: int, groups: Sequence[Sequence[int]], where: bool = True
    ) -> Placeable | None:
        """What-if: how many leading groups of running jobs must end before waiting job
        ``j`` can be placed, and (``where``) where it would go and which of that is free
        now.
        """
        ...

    def fit_probe(self, j: int) -> FitProbe:
        """What-if counter: release running jobs into it one by one, read whether
        waiting job ``j`` would then fit (no state change).
        """
        ...


class HasView(Protocol):
    """An engine: policies built with it keep only its read-only ``view``."""

    @property
    def view(self) -> Any:
        """The read-only view policies keep."""
        ...


def view_of(engine: EngineView | HasView) -> EngineView:
    """The read-only view policies keep (given the engine or a view)."""
    view = getattr(engine, "view", None)
    if view is not None:
        return view  # type: ignore[no-any-return]
    return engine  # type: ignore[return-value]


class SchedulingPolicy(Protocol):
    """Which waiting job runs next. ``preemptive`` policies may call ``preempt``.
    ``needs_estimates`` policies read ``estimate_s`` (the duration estimator's output);
    the others see true durations there.
    """

    preemptive: bool
    needs_estimates: ClassVar[bool]

    def on_arrival(self, j: int) -> None:
        """Job ``j`` arrived and was admitted: queue it."""
        ...

    def on_finish(self, j: int) -> None:
        """Job ``j`` finished (its GPUs are free again)."""
        ...

    def on_timer(self, j: int, tag: int) -> None:
        """A timer the policy set went off."""
        ...

    def schedule(self) -> None:
        """Called once after all events of one instant were applied."""
        ...


class PlacementPolicy(Protocol):
    """Where a job goes: the parts to allocate, or None if it does not fit now."""

    def place(self, j: int, ngpu: int, milli: int, mask: int) -> Parts | None:
        """The parts job ``j`` gets, or None if it does not fit now."""
        ...


class AdmissionPolicy(Protocol):
    """Whether an arriving job may ever run: None to admit, else the rejection reason."""

    def admit(self, j: int) -> str | None:
        """None to admit job ``j``, else the reason it can never run."""
        ...


@dataclass(frozen=True)
class NoConfig:
    """This policy has no options."""


def config_help(config: type[Any]) -> list[tuple[str, str, str]]:
    """(field, default, help) for each field of a config dataclass."""
    out = []
    for f in dataclasses.fields(config):
        default = f.default if f.default is not dataclasses.MISSING else None
        if f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        out.append((f.name, repr(default), str(f.metadata.get("help", ""))))
    return out


def build_config(config: type[Any], options: Mapping[str, Any]) -> Any:
    """Instantiate ``config`` from user options, coercing strings to the field types and
    naming unknown options.
    """
    fields = {f.name: f for f in dataclasses.fields(config)}
    extra = sorted(set(options) - set(fields))
    if extra:
        msg = "option"
        raise unknown(msg, extra[0], fields)
    kwargs: dict[str, Any] = {}
    for name, value in options.items():
        default = fields[name].default
        if isinstance(value, str):
            try:
                if isinstance(default, bool):
                    value = parse_bool(value, f"option {name}")
                elif isinstance(default, int):
                    value = int(value)
                elif isinstance(default, float):
                    value = float(value)
                elif isinstance(default, tuple):
                    value = tuple(float(x) for x in value.split(",") if x)
            except ValueError:
                msg = f"option {name}={value!r} is not a valid value"
                raise GpuTraceError(msg) from None
        kwargs[name] = value
    return config(**kwargs)


_EXTRA: dict[Kind, dict[str, type[Any]]] = {
    "scheduler": {},
    "placement": {},
    "admission": {},
    "batching": {},
    "router": {},
    "latency": {},
}


def _declared(kind: Kind) -> dict[str, type[Any]]:
    """Name -> class of every declared policy of ``kind`` (built-in and installed)."""
    from gpu_trace import plugins  # imports the policy modules, which import this one

    return {p.name: p.policy for p in plugins.policies(kind)}


def register(kind: Kind, name: str, cls: type[Any]) -> None:
    """Register a policy class (with a ``Config`` dataclass attribute) under ``name``."""
    if name in _declared(kind) or name in _EXTRA[kind]:
        msg = f"a {kind} policy named {name!r} is already registered"
        raise GpuTraceError(msg)
    if not dataclasses.is_dataclass(getattr(cls, "Config", None)):
        msg = f"{cls.__name__} needs a `Config` dataclass"
        raise GpuTraceError(msg)
    _EXTRA[kind][name] = cls


def unregister(kind: Kind, name: str) -> None:
    """Remove a run-time registration (tests)."""
    _EXTRA[kind].pop(name, None)


def names(kind: Kind) -> list[str]:
    """Names of the registered policies of ``kind`` (built-in, installed, then run-time)."""
    return [*_declared(kind), *_EXTRA[kind]]


def get(kind: Kind, name: str) -> type[Any]:
    """The policy class registered as ``name``."""
    from gpu_trace import plugins

    known = {**_declared(kind), **_EXTRA[kind]}
    if name not in known:
        new = {old: p.name for p in plugins.policies(kind) for old in p.deprecated}.get(name)
        if new is not None:
            _deprecated(kind, name, new)
            name = new
    cls: type[Any] = plugins.lookup(f"{kind} policy", name, known)
    return cls


_WARNED: set[tuple[str, str]] = set()


def _deprecated(kind: Kind, old: str, new: str) -> None:
    """One ``warning:`` line per process for a policy asked for by its old name (a
    sweep or ``compare`` resolves the name once per run: one warning is enough).
    """
    if (kind, old) not in _WARNED:
        _WARNED.add((kind, old))
        sys.stderr.write(f"warning: {kind} policy {old!r} is deprecated: use {new!r}\n")


def needs_estimates(name: str) -> bool:
    """Whether the scheduler registered as ``name`` declares that it reads estimates."""
    return bool(getattr(get("scheduler", name), "needs_estimates", False))


class PolicyBase:
    """Convenience base: default no-op hooks and the engine reference."""

    preemptive: ClassVar[bool] = False
    needs_estimates: ClassVar[bool] = False
    Config: ClassVar[type[Any]] = NoConfig

    def __init__(self, config: Any, engine: EngineView | HasView) -> None:
        self.config = config
        self.e = view_of(engine)

    def on_arrival(self, j: int) -> None:
        """Queue an arriving job (every policy must say how)."""
        raise NotImplementedError

    def on_finish(self, j: int) -> None:
        """Nothing to do by default when a job finishes."""
        return None

    def on_timer(self, j: int, tag: int) -> None:
        """Nothing to do by default when a timer fires."""
        return None

    def schedule(self) -> None:
        """Start (or preempt) jobs after an instant's events (every policy must say how)."""
        raise NotImplementedError

    def need_milli(self, j: int) -> int:
        """Milli-GPU job ``j`` needs in all (GPUs x share per GPU): its queue group's
        free-capacity check (:class:`ClassedQueue`: a group needing more than is free is
        passed over without a placement attempt).
        """
        return self.e.ngpu[j] * self.e.milli[j]

    def shape_key(self, j: int) -> Hashable:
        """Request shape: jobs with equal keys fit or not together. Includes the VC when
        quotas apply, since a quota can block one VC's job but not another's.
        """
        e = self.e
        vc = e.vc[j] if e.vc_quota_milli else -1
        return (e.ngpu[j], e.milli[j], e.mask[j], vc)
