"""How time passes in the replay loop: the one pluggable part of the kernel.

:class:`SimClock` is simulated time (the engine jumps from event to event); the live
executor (:mod:`gpu_trace.replay.live.executor`) is a clock on the wall clock whose jobs
end when their processes do. A request-level serving simulator plugs in here the same
way (docs/replay.md, "Seams for a second simulator").
"""

from __future__ import annotations

from typing import Protocol


class Clock(Protocol):
    """How time passes and how jobs end: the one pluggable part of the loop.

    ``simulated = True`` (:class:`SimClock`): the engine itself jumps to the next event
    and ends jobs at their expected finish through heap events, with no call into the
    clock per event (what a 1 M-job replay needs). ``simulated = False`` (the live
    executor, or any other backend): the engine pushes no finish events and, at every
    instant, asks the clock for the time (``wait``) and to end the jobs that ended
    (``complete``, through :meth:`Engine.finished` / ``_stop``), and tells it when the
    pass is over (``after_pass``).
    """

    simulated: bool

    def wait(self, due: float, arrivals_left: bool) -> float | None:
        """Block until the next instant: ``due`` (the next arrival or timer, INF if
        none) or earlier if a job ends; its time, or None when the run is over.
        """
        ...

    def complete(self) -> None:
        """End the jobs that ended by ``engine.now`` (before arrivals)."""
        ...

    def after_pass(self) -> None:
        """After the instant's scheduling pass."""
        ...


class SimClock:
    """Simulated time: the engine jumps from event to event; jobs end at their expected
    finish (heap events). Nothing to call per event, so no methods run.
    """

    simulated = True

    def wait(self, due: float, arrivals_left: bool) -> float | None:
        """Nothing to wait for: the engine jumps to ``due`` itself."""
        msg = "the engine advances simulated time itself"
        raise AssertionError(msg)

    def complete(self) -> None:
        """Nothing to do: finish events end jobs in simulated time."""
        msg = "the engine ends simulated jobs itself"
        raise AssertionError(msg)

    def after_pass(self) -> None:
        """Nothing to do after a pass in simulated time."""
        msg = "the engine runs simulated passes itself"
        raise AssertionError(msg)
