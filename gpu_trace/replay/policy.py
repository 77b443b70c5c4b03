"""The three policy seams (Blox's split) and their registries.

- :class:`AdmissionPolicy` decides once, at arrival, whether a job may ever run.
- :class:`SchedulingPolicy` owns the wait queue and decides *which* job starts (or is
  preempted) and *when*, calling :meth:`EngineView.try_start` / :meth:`EngineView.preempt`.
- :class:`PlacementPolicy` decides *where*: which GPUs of which nodes a job gets.

Policies never touch the cluster state directly: they get a read-only
:class:`~gpu_trace.replay.view.PolicyView`, the engine applies their decisions and keeps
the invariants (no over-allocation, no start before arrival).

A policy is a class with a ``Config`` dataclass (fields carry ``metadata={"help": ...}``)
registered by name. Each policy module declares its policies (``PLUGINS``, a tuple of
:class:`gpu_trace.plugins.PolicyPlugin`); installed packages add theirs through the
``gpu_trace.policies`` entry-point group; :func:`register` adds one at run time (a
duplicate name is an error, never a silent override).
"""

from __future__ import annotations

import bisect
import dataclasses
import heapq
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

import numpy as np
import numpy.typing as npt

from gpu_trace.errors import GpuTraceError
from gpu_trace.replay.cluster import ClusterView
from gpu_trace.replay.workload import Workload
from gpu_trace.values import parse_bool, unknown

if TYPE_CHECKING:
    from gpu_trace.replay.engine import FitProbe, Placeable

Parts = list[tuple[int, int, int]]
"""An allocation: (node, GPU index, milli-GPU) triples."""

Kind = Literal["scheduler", "placement", "admission"]


class EngineView(Protocol):
    """What the engine offers to policies: read-only state, and four actions.

    The engine hands policies a :class:`~gpu_trace.replay.view.PolicyView`: every
    member below is read-only (tuples, read-only memoryviews / numpy views, mapping
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
    def remaining(self) -> Sequence[float]:
        """Work left per job, in seconds at full speed."""
        ...

    @property
    def attained_gpu_s(self) -> Sequence[float]:
        """GPU-seconds each job has run so far (LAS ranks by it)."""
        ...

    @property
    def end_time(self) -> Sequence[float]:
        """Expected finish time of each running job (inf when not running)."""
        ...

    @property
    def seg_start(self) -> Sequence[float]:
        """Start of each running job's current segment."""
        ...

    @property
    def slow(self) -> Sequence[float]:
        """Wall seconds per second of work of each running job at its placement
        (multi-node slowdown, heterogeneous speed; 1 = full pace).
        """
        ...

    @property
    def ngpu(self) -> Sequence[int]:
        """GPUs (or GPU slots) each job asks for."""
        ...

    @property
    def milli(self) -> Sequence[int]:
        """Milli-GPU each job takes per GPU (1000 = whole GPUs)."""
        ...

    @property
    def mask(self) -> Sequence[int]:
        """Allowed GPU types per job, as a bit mask."""
        ...

    @property
    def gpus(self) -> Sequence[float]:
        """GPUs each job asks for, as in the trace (fractional for shared GPUs)."""
        ...

    @property
    def vc(self) -> Sequence[int]:
        """VC code of each job."""
        ...

    @property
    def arrival(self) -> Sequence[float]:
        """Arrival time of each job (s, from the replay's origin)."""
        ...

    @property
    def cpu_req(self) -> Sequence[int]:
        """CPU milli-cores each job holds per node (zeros on a GPU-only cluster)."""
        ...

    @property
    def mem_req(self) -> Sequence[int]:
        """Memory bytes each job holds (zeros on a GPU-only cluster)."""
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


_EXTRA: dict[Kind, dict[str, type[Any]]] = {"scheduler": {}, "placement": {}, "admission": {}}


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

    cls: type[Any] = plugins.lookup(f"{kind} policy", name, {**_declared(kind), **_EXTRA[kind]})
    return cls


def needs_estimates(name: str) -> bool:
    """Whether the scheduler registered as ``name`` declares that it reads estimates."""
    return bool(getattr(get("scheduler", name), "needs_estimates", False))


class ClassedQueue:
    """Waiting jobs grouped by GPU request shape, each group a heap by priority.

    Within one scheduling pass resources only shrink, so once the best job of a group
    does not fit, no job of that group needing as much CPU and memory fits for the rest
    of the pass: on a GPU-only cluster (no CPU or memory enforced) the group is done, and
    a pass costs O(starts x groups), not O(queue). Where CPUs or memory are enforced a
    refused job rules out only the jobs of its group that ask at least as much of both;
    the group's best job not ruled out is tried next (the PAI simulator tries every
    waiting job; a job refused for its CPUs must not hold back one asking fewer).
    ``fill`` starts jobs best-first across groups and is work-conserving: after it
    returns, no waiting job fits the free capacity.
    """

    def __init__(
        self,
        key_of: Callable[[int], Hashable],
        need_of: Callable[[int], int] | None = None,
    ) -> None:
        self.key_of = key_of
        owner = getattr(key_of, "__self__", None)
        self.cpu: Sequence[int] | None = None
        self.mem: Sequence[int] | None = None
        """CPU and memory each job asks (the engine's; zeros where not enforced)."""
        if isinstance(owner, PolicyBase):
            self.cpu, self.mem = owner.e.cpu_req, owner.e.mem_req
        self.need_of = need_of
        """Milli-GPU a job needs in all (the same for every job of a group), so that
        :meth:`fill` can pass over a group that cannot fit the free capacity without a
        placement attempt; None = no such check."""
        self.groups: dict[Hashable, list[tuple[Any, int]]] = {}
        self.needs: list[int] = []
        """Every group's need, ascending (groups are never dropped), and beside it
        ``by_need`` the groups in that order: a pass reads only the groups that need
        at most the free capacity (a bisection), not every shape ever seen."""
        self.by_need: list[list[tuple[Any, int]]] = []
        self.size = 0

    def push(self, prio: Any, j: int) -> None:
        """Queue job ``j`` with priority ``prio`` (smaller runs first) in its group."""
        key = self.key_of(j)
        h = self.groups.get(key)
        if h is None:
            h = self.groups[key] = []
            if self.need_of is not None:
                want = self.need_of(j)
                at = bisect.bisect_right(self.needs, want)
                self.needs.insert(at, want)
                self.by_need.insert(at, h)
        heapq.heappush(h, (prio, j))
        self.size += 1

    def best(self) -> tuple[Any, int] | None:
        """The best (smallest) ``(priority, job)`` over all groups; None if empty."""
        top: tuple[Any, int] | None = None
        for h in self.groups.values():
            if h and (top is None or h[0] < top):
                top = h[0]
        return top

    def reprioritize(self, old: Any, new: Any, j: int) -> None:
        """Give waiting job ``j`` (pushed with priority ``old``) priority ``new``.
        Linear in the job's group; meant for rare events (starvation promotions).
        """
        h = self.groups[self.key_of(j)]
        h.remove((old, j))
        heapq.heapify(h)
        heapq.heappush(h, (new, j))

    def remove_best_of(self, j: int) -> None:
        """Drop the best job of ``j``'s group (``j`` must be it), e.g. after starting it."""
        h = self.groups[self.key_of(j)]
        heapq.heappop(h)
        self.size -= 1

    def fill(self, try_start: Callable[[int], bool], room: Callable[[], int] | None = None) -> int:
        """Start jobs best-first while any group's best job fits; returns starts.

        Runs once per scheduling pass: the groups still in play (non-empty, not yet
        blocked) sit in a heap keyed by their head, so each pick is one C-level heap
        operation, not one comparison per group (a trace with hundreds of request
        shapes, e.g. the PAI simulator's GPU counts up to 1,730, made the linear pick
        the cost of a whole SJF replay). Heads are unique (a job is in one group), so
        the key decides alone and the pick does not depend on the groups' order.
        ``try_start`` must not push to this queue (no policy's does: preemption
        requeues outside ``fill``).

        ``room`` (with ``need_of``): the free milli-GPU now. A group that needs more is
        blocked without calling ``try_start``, which would refuse it first thing (the
        engine's own check), so the outcome is the same; on a full cluster most
        attempts are such refusals.
        """
        if not self.size:
            return 0
        if room is not None and self.need_of is not None:
            free = room()
            n = bisect.bisect_right(self.needs, free)
            pairs = zip(self.needs[:n], self.by_need[:n], strict=True)
            return self._fill(try_start, [(h[0], w, h) for w, h in pairs if h], room)
        return self._fill(try_start, [(h[0], 0, h) for h in self.groups.values() if h], None)

    def _fill(
        self,
        try_start: Callable[[int], bool],
        live: list[tuple[tuple[Any, int], int, list[tuple[Any, int]]]],
        room: Callable[[], int] | None,
    ) -> int:
        """:meth:`fill` over ``live`` (each group's candidate, its milli-GPU need and
        the group): the groups in play sit in a heap keyed by their candidate
        (candidates are unique, so the key decides alone), one C-level operation per
        pick. With ``room`` a group needing more than is free is passed over without
        a placement attempt (the engine would refuse it first thing: same outcome).
        """
        heapq.heapify(live)
        free = room() if room is not None else None
        refused: dict[int, list[tuple[int, int]]] = {}
        started = 0
        heappop, heapreplace = heapq.heappop, heapq.heapreplace
        while live:
            item, want, group = live[0]
            if free is not None and want > free:
                heappop(live)  # no job of the group fits the free GPUs
                continue
            if try_start(item[1]):
                self._take(group, item)
                started += 1
                if room is not None:
                    free = room()
            else:
                asked = self._asked(item[1])
                if asked is None:  # refused for its GPUs alone: the group is done
                    heappop(live)
                    continue
                refused.setdefault(id(group), []).append(asked)
            nxt = self._candidate(group, refused.get(id(group)))
            if nxt is None:
                heappop(live)
            else:
                heapreplace(live, (nxt, want, group))
        return started

    def _take(self, group: list[tuple[Any, int]], item: tuple[Any, int]) -> None:
        """Remove a started job from its group (usually the head)."""
        if group[0] == item:
            heapq.heappop(group)
        else:
            group.remove(item)
            heapq.heapify(group)
        self.size -= 1

    def _asked(self, j: int) -> tuple[int, int] | None:
        """(CPU, memory) job ``j`` asks, where the cluster enforces them; None when it
        asks none of either (nothing smaller could fit where it did not).
        """
        if self.cpu is None or self.mem is None:
            return None
        c, m = self.cpu[j], self.mem[j]
        return (c, m) if c or m else None

    def _candidate(
        self, group: list[tuple[Any, int]], refused: list[tuple[int, int]] | None
    ) -> tuple[Any, int] | None:
        """The group's best job not ruled out by a refusal of this pass (a job asking
        at least the CPU and the memory of a refused one is refused too).
        """
        if not group:
            return None
        if not refused:
            return group[0]
        assert self.cpu is not None and self.mem is not None
        cpu, mem = self.cpu, self.mem
        best: tuple[Any, int] | None = None
        for item in group:
            c, m = cpu[item[1]], mem[item[1]]
            if any(c >= rc and m >= rm for rc, rm in refused):
                continue
            if best is None or item < best:
                best = item
        return best


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
