"""Live replay: the simulator's policy objects drive real OS processes on real GPUs or
emulated device slots, in wall-clock time, and ``validate`` compares the measured run
with the simulated one.

- :mod:`.executor` -- :class:`~.executor.LiveEngine` (the engine's bookkeeping and
  policies, with processes instead of a simulated clock) and :func:`~.executor.run_live`.
- :mod:`.worker` -- the workload process one job runs as (stdlib only at import time).
- :mod:`.devices` -- ``cuda:0-7`` / ``emulated:16`` device specs.
- :mod:`.validate` -- live vs simulated, job by job.

This package's ``__init__`` imports nothing: the worker process imports it.
"""
