"""The one place an :class:`~gpu_trace.replay.kernel.engine.Engine` is set up for a
:class:`~gpu_trace.replay.config.ReplayConfig`: the engine options read from the config
and the three policies (admission, scheduling, placement) built with their options and
bound to it.

The simulator (:func:`gpu_trace.replay.simulate.replay`), the live executor
(:func:`gpu_trace.replay.live.executor.run_live`) and the tests that drive an engine by
hand all build through :func:`build_engine`, so a config field that changes the engine
(a new mechanism option, a new policy kind) is wired once, and a live run cannot drift
from the simulation of the same config.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar, overload

import numpy as np
import numpy.typing as npt

from gpu_trace.replay import policy as base
from gpu_trace.replay.cluster import ClusterSpec
from gpu_trace.replay.config import ReplayConfig
from gpu_trace.replay.kernel.clock import Clock
from gpu_trace.replay.kernel.engine import Engine, EngineOptions
from gpu_trace.replay.workload import Workload

E = TypeVar("E", bound=Engine)

EngineMaker = Callable[[Workload, ClusterSpec, EngineOptions, "npt.NDArray[np.float64] | None"], E]
"""Makes the engine from (workload, cluster, options, estimates): another engine class,
e.g. the live executor's, which is its own clock and takes its devices and workers."""


def engine_options(config: ReplayConfig, *, record_log: bool = False) -> EngineOptions:
    """The mechanism settings of ``config`` (shared by every policy)."""
    return EngineOptions(
        seed=config.seed,
        restore_s=config.restore_s,
        multinode_slowdown=config.multinode_slowdown,
        departures=config.departures,
        record_log=record_log,
    )


def bind_policies(engine: Engine, config: ReplayConfig) -> None:
    """Build ``config``'s scheduler, placement and admission with their options (on the
    engine's view) and bind them to ``engine``.
    """
    sched_cls = base.get("scheduler", config.scheduler)
    place_cls = base.get("placement", config.placement)
    adm_cls = base.get("admission", config.admission)
    engine.bind(
        sched_cls(base.build_config(sched_cls.Config, config.scheduler_options), engine),
        place_cls(base.build_config(place_cls.Config, config.placement_options), engine),
        adm_cls(adm_cls.Config(), engine),
    )


@overload
def build_engine(
    config: ReplayConfig,
    workload: Workload,
    cluster: ClusterSpec,
    clock: Clock | None = None,
    *,
    estimate_s: npt.NDArray[np.float64] | None = None,
    record_log: bool = False,
) -> Engine: ...


@overload
def build_engine(
    config: ReplayConfig,
    workload: Workload,
    cluster: ClusterSpec,
    clock: None = None,
    *,
    estimate_s: npt.NDArray[np.float64] | None = None,
    record_log: bool = False,
    make: EngineMaker[E],
) -> E: ...


def build_engine(
    config: ReplayConfig,
    workload: Workload,
    cluster: ClusterSpec,
    clock: Clock | None = None,
    *,
    estimate_s: npt.NDArray[np.float64] | None = None,
    record_log: bool = False,
    make: EngineMaker[E] | None = None,
) -> Engine:
    """An engine for ``workload`` on ``cluster`` with ``config``'s options and policies
    bound, ready to :meth:`~gpu_trace.replay.kernel.engine.Engine.run`.

    ``clock``: how time passes (default simulated); ``estimate_s``: the duration
    estimates policies read (default the true durations); ``record_log``: keep the
    start/stop log. ``make`` builds another engine class instead (then ``clock`` must be
    left out: such an engine brings its own).
    """
    options = engine_options(config, record_log=record_log)
    engine: Engine
    if make is None:
        engine = Engine(workload, cluster, options, estimate_s, clock)
    elif clock is not None:
        msg = "give build_engine a clock or an engine maker, not both"
        raise ValueError(msg)
    else:
        engine = make(workload, cluster, options, estimate_s)
    bind_policies(engine, config)
    return engine
