"""Energy of a replay from the power model (:mod:`gpu_trace.analyses.power`).

A GPU holding a job draws ``busy_w`` of its model (the linear model at u = 1: replay
knows allocation, not utilization); a GPU in service without a job draws ``idle_w``;
every node in service draws the host baseline. A node out of service (failed, powered
off) draws nothing. Per job: ``sum over its run segments of duration x GPUs x (busy_w +
host baseline / GPUs per node)`` (the analyses' per-job convention). Per run: the
cluster's draw integrated over the run's timeline. All vectorized over the segment log
the engine keeps when :attr:`Engine.segments` is a list.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from gpu_trace.replay.kernel.engine import Engine
from gpu_trace.replay.metrics import _integral

if TYPE_CHECKING:
    # Only for annotations: importing gpu_trace.analyses runs its package, every
    # analysis module (~0.1 s), which a replay without --power never needs.
    from gpu_trace.analyses import power

F64 = npt.NDArray[np.float64]
J_PER_KWH = 3.6e6


def load_model(text: str) -> power.PowerModel:
    """``gpu-model`` = the built-in table, else a TOML file overriding it."""
    from gpu_trace.analyses import power

    return power.load(None if text == "gpu-model" else Path(text))


@dataclass
class Energy:
    """A run's energy: per job (J), the run total (J) and the draw as a step function."""

    job_j: F64
    run_j: float
    mean_w: float
    times: F64
    """Change points of the dynamic (busy - idle) draw."""
    dynamic_w: F64
    baseline_w: float
    """All nodes in service, every GPU idle."""

    def power_bins(self, engine: Engine, time_s: F64, bin_s: F64) -> F64:
        """Mean cluster draw (W) per time-series bin."""
        if not time_s.size:
            return np.zeros(0)
        edges = np.concatenate([time_s, [time_s[-1] + bin_s[-1]]])
        w = float(bin_s[0])
        dyn = np.diff(_integral(self.times, self.dynamic_w, edges)) / w
        tl = engine.timeline
        t = np.asarray(tl.time, dtype=np.float64)
        down = np.asarray(tl.down_milli, dtype=np.float64)
        cap = float(engine.state.capacity_milli)
        up = self.baseline_w * (1.0 - down / cap)
        base = np.diff(_integral(t, up, edges)) / w
        out: F64 = dyn + base
        return out


def account(engine: Engine, model: power.PowerModel) -> Energy:
    """Energy of a finished run (segments + jobs still running at the end)."""
    spec = engine.spec
    tnames = spec.type_names
    busy_t = np.asarray([model.gpu_power_w(t, 1.0) for t in tnames])
    idle_t = np.asarray([model.gpu_power_w(t, 0.0) for t in tnames])
    host_g = model.host_w_per_gpu
    node_type = np.asarray(spec.node_type, dtype=np.int64)
    node_gpus = np.asarray(spec.node_gpus, dtype=np.float64)
    baseline = float((node_gpus * (idle_t[node_type] + host_g)).sum())
    segs: list[tuple[int, float, float, int]] = list(engine.segments or [])
    segs += [(j, engine.seg_start[j], engine.now, parts[0][0]) for j, parts in engine.alloc.items()]
    n = engine.w.n
    tl = engine.timeline
    t = np.asarray(tl.time, dtype=np.float64)
    if segs:
        a = np.asarray(segs, dtype=np.float64)
        job = a[:, 0].astype(np.int64)
        start, end = a[:, 1], a[:, 2]
        typ = node_type[a[:, 3].astype(np.int64)]
        g = np.asarray(engine.gpus, dtype=np.float64)[job]
        dur = np.maximum(end - start, 0.0)
        job_j: F64 = np.bincount(job, weights=dur * g * (busy_t[typ] + host_g), minlength=n).astype(
            np.float64
        )
        delta = g * (busy_t[typ] - idle_t[typ])
        pts = np.concatenate([start, end])
        dw = np.concatenate([delta, -delta])
        order = np.argsort(pts, kind="stable")
        times = pts[order]
        dyn = np.cumsum(dw[order])
        dyn_j = float((dur * delta).sum())
    else:
        job_j = np.zeros(n, dtype=np.float64)
        times, dyn, dyn_j = np.zeros(0), np.zeros(0), 0.0
    if t.size >= 2:
        down = np.asarray(tl.down_milli, dtype=np.float64)
        up = baseline * (1.0 - down / float(engine.state.capacity_milli))
        base_j = float(_integral(t, up, np.asarray([t[-1]]))[0])
        span = float(t[-1] - t[0])
    else:
        base_j, span = 0.0, 0.0
    run_j = base_j + dyn_j
    return Energy(
        job_j=job_j,
        run_j=run_j,
        mean_w=run_j / span if span > 0 else float("nan"),
        times=times,
        dynamic_w=np.maximum(dyn, 0.0),
        baseline_w=baseline,
    )


def describe(model: power.PowerModel, spec_types: tuple[str, ...]) -> dict[str, Any]:
    """What the run used, per GPU type of the cluster (for the experiment JSON)."""
    return {
        "origin": model.origin,
        "host_baseline_w": model.host_baseline_w,
        "gpus_per_node": model.gpus_per_node,
        "types": {
            t: {
                "model": model.resolve(t).name,
                "idle_w": model.resolve(t).idle_w,
                "busy_w": model.resolve(t).busy_w,
            }
            for t in spec_types
        },
    }
