"""Replay: re-schedule a trace under admission / scheduling / placement policies on an
emulated cluster and score the outcome.

``run(store, ReplayConfig(...))`` replays a source from the store; ``replay(jobs, spec,
config)`` replays any canonical jobs frame. Policies are listed by
``gpu_trace.replay.policy.names`` and added with ``register``.

Those four names are imported from :mod:`gpu_trace.replay.run` on first use: importing
a submodule (a policy for plugin discovery, the cluster model, the live-replay worker
``python -m gpu_trace.replay.live.worker``) does not load the replay driver, which pulls
in the engine, the accounting, the estimator and the store writer. So the command
line's start-up and each live-replay worker process stay cheap.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpu_trace.replay.run import ReplayConfig as ReplayConfig
    from gpu_trace.replay.run import RunResult as RunResult
    from gpu_trace.replay.run import replay as replay
    from gpu_trace.replay.run import run as run

__all__ = ["ReplayConfig", "RunResult", "replay", "run"]

_DRIVER = "gpu_trace.replay.run"


def __getattr__(name: str) -> Any:
    """``ReplayConfig``, ``RunResult`` and ``replay``, from the driver on first use."""
    if name in __all__:
        return getattr(importlib.import_module(_DRIVER), name)
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)


class _Package(types.ModuleType):
    """``gpu_trace.replay.run`` names both the driver module and its ``run`` function.
    Loading the module binds the package attribute ``run`` to the module (after the
    module ran, so no code of ours can rebind it), so ``run`` is a property: always the
    function, as it was when this package imported the driver eagerly.
    """

    @property
    def run(self) -> Any:
        return importlib.import_module(_DRIVER).run

    @run.setter
    def run(self, value: Any) -> None:
        """The import system's binding of the submodule: ``sys.modules`` keeps it."""


sys.modules[__name__].__class__ = _Package
