"""How fast ``replay live`` runs a trace: the time scale, chosen or checked up front.

A live run takes at least the trace's span (first arrival to the last job's end, if
every job started at once) divided by the time scale, in wall time. The old fixed
default of 3600 trace s per wall s ran 20 openb pods for 2.7 hours in silence. So:

- no ``--time-scale``: the scale is chosen so that this lower bound is
  :data:`AUTO_WALL_S` (two minutes), never slower than one trace hour per second;
- an explicit ``--time-scale`` whose lower bound exceeds ``--max-wall-s`` (default one
  hour) is refused with the estimate and the scale that would fit.

Queueing can only make a run longer than the bound, so the estimate is a floor.
"""

from __future__ import annotations

import math

import numpy as np

from gpu_trace.display import duration_text
from gpu_trace.errors import GpuTraceError
from gpu_trace.replay.workload import Workload

AUTO_WALL_S = 120.0
MIN_AUTO_SCALE = 3600.0
MAX_WALL_S = 3600.0


def span_s(w: Workload) -> float:
    """First arrival to the latest arrival + run time, in trace seconds."""
    if not w.n:
        return 0.0
    return float(np.max(w.arrival_s + w.duration_s) - np.min(w.arrival_s))


def choose_scale(span: float, requested: float | None, max_wall_s: float = MAX_WALL_S) -> float:
    """The time scale to run with (see the module docstring)."""
    if requested is None:
        return max(MIN_AUTO_SCALE, math.ceil(span / AUTO_WALL_S))
    if requested <= 0:
        msg = "--time-scale must be positive"
        raise GpuTraceError(msg)
    floor = span / requested
    if floor > max_wall_s:
        fit = math.ceil(span / AUTO_WALL_S)
        msg = (
            f"replay live would take at least {duration_text(floor)} of wall time "
            f"(trace span {duration_text(span)} at --time-scale {requested:g}); "
            f"use --time-scale {fit} for about {duration_text(AUTO_WALL_S)}, "
            f"or raise --max-wall-s (now {max_wall_s:g})"
        )
        raise GpuTraceError(msg)
    return requested
