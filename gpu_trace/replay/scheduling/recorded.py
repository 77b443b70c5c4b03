"""``recorded``: start every job exactly when the trace started it.

The fidelity baseline: each job starts at its arrival plus its *recorded* queueing
delay (trace ``start_time - submit_time``; 0 when the trace has no start), so on a
cluster large enough to hold the trace's own concurrency the replay reproduces the
trace's queueing delays exactly. If the emulated cluster cannot hold a job at its
recorded start, the job waits in FIFO order and starts as soon as it fits; such
deviations show as larger queueing delays.
"""

from __future__ import annotations

import math
from collections import deque

from gpu_trace.plugins import PolicyPlugin
from gpu_trace.replay.policy import EngineView, HasView, NoConfig, PolicyBase

START = 3


class Recorded(PolicyBase):
    """Replay the trace's own start times."""

    Config = NoConfig  # the trace decides every start

    def __init__(self, config: NoConfig, engine: EngineView | HasView) -> None:
        super().__init__(config, engine)
        w = self.e.w
        raw_arrival = (w.arrival_s * w.load_factor).tolist()
        rec = w.recorded_start_s.tolist()
        self.delay = [
            0.0 if math.isnan(r) else max(0.0, r - a) for r, a in zip(rec, raw_arrival, strict=True)
        ]
        self.late: deque[int] = deque()

    def on_arrival(self, j: int) -> None:
        """Set a timer for the job's recorded start (arrival + recorded delay)."""
        self.e.set_timer(self.e.arrival[j] + self.delay[j], j, START)

    def on_timer(self, j: int, tag: int) -> None:
        """The recorded start is due: the job joins the FIFO line of due jobs."""
        if tag == START:
            self.late.append(j)

    def schedule(self) -> None:
        """Start due jobs in the order they fell due; one that does not fit waits,
        and the ones behind it with it (FIFO: deviations show as queueing delay).
        """
        q = self.late
        while q and self.e.try_start(q[0]):
            q.popleft()


PLUGINS = (PolicyPlugin("scheduler", "recorded", Recorded, rank=9),)
