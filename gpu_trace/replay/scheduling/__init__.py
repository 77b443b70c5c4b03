"""Scheduling policies: which waiting job starts (or is preempted) and when.

One module per registered family, named after what it registers (``fifo.py``: ``fifo``
and ``fifo-skip``; ``las.py``: ``las``, ``tiresias``, ``las-lucid``; ...), each
declaring its policies in a module-level ``PLUGINS`` (or ``PLUGIN``). The bases a new
policy builds on: :class:`~gpu_trace.replay.policy.PolicyBase` (any scheduler),
:class:`~gpu_trace.replay.scheduling.ranked.Ranked` (non-preemptive, by a fixed rank),
:class:`~gpu_trace.replay.scheduling.preemptive.Preemptive` (preemptive, by rank; the
public contract is documented there) and the wait queue
:class:`~gpu_trace.replay.scheduling.queue.ClassedQueue`. A new module here is a new
built-in scheduler: nothing else changes.
"""
