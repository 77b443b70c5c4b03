"""Replay: re-schedule a trace under admission / scheduling / placement policies on an
emulated cluster and score the outcome.

``run(store, ReplayConfig(...))`` replays a source from the store; ``replay(jobs, spec,
config)`` replays any canonical jobs frame. Policies are listed by
``gpu_trace.replay.policy.names`` and added with ``register``.

Those four names are imported on first use (``ReplayConfig`` from
:mod:`gpu_trace.replay.config`, ``RunResult`` from :mod:`gpu_trace.replay.score`, the
two functions from the driver :mod:`gpu_trace.replay.simulate`): importing a submodule
(a policy for plugin discovery, the cluster model, the live-replay worker ``python -m
gpu_trace.replay.live.worker``) does not load the replay driver, which pulls in the
engine, the accounting, the estimator and the store writer. So the command line's
start-up and each live-replay worker process stay cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpu_trace.replay.config import ReplayConfig as ReplayConfig
    from gpu_trace.replay.score import RunResult as RunResult
    from gpu_trace.replay.simulate import replay as replay
    from gpu_trace.replay.simulate import run as run

__all__ = ["ReplayConfig", "RunResult", "replay", "run"]

_HOME = {
    "ReplayConfig": "gpu_trace.replay.config",
    "RunResult": "gpu_trace.replay.score",
    "replay": "gpu_trace.replay.simulate",
    "run": "gpu_trace.replay.simulate",
}


def __getattr__(name: str) -> Any:
    """The four public names, each from its module on first use."""
    if name in _HOME:
        return getattr(importlib.import_module(_HOME[name]), name)
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)
