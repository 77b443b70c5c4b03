"""Replay: re-schedule a trace under admission / scheduling / placement policies on an
emulated cluster and score the outcome.

``run(store, ReplayConfig(...))`` replays a source from the store; ``replay(jobs, spec,
config)`` replays any canonical jobs frame. Policies are listed by
``gpu_trace.replay.policies.base.names`` and added with ``register``.

The live-replay worker (``python -m gpu_trace.replay.live.worker``) is started once
per job; the executor sets ``GPU_TRACE_LIVE_WORKER=1`` in its environment so that this
package does not import polars and the engine (~0.7 s of CPU per process) for a
process that only sleeps or runs a kernel loop.
"""

import os

if os.environ.get("GPU_TRACE_LIVE_WORKER") != "1":
    from gpu_trace.replay.run import ReplayConfig, RunResult, replay, run

__all__ = ["ReplayConfig", "RunResult", "replay", "run"]
