"""Placement policies: which GPUs of which nodes a job gets.

One module per registered policy, named after it (``best_fit.py``: ``best-fit``;
``random_fit.py``: ``random``, not ``random.py``, which would shadow the standard
library module for tools that put this folder on the path), each declaring it in a
module-level ``PLUGINS`` (or ``PLUGIN``). :mod:`~gpu_trace.replay.placement.base` holds
what they share: :class:`~gpu_trace.replay.placement.base.PlacementBase` (the rules for
multi-node and fractional jobs) and
:class:`~gpu_trace.replay.placement.base.ScoredPlacement` (the FGD paper's frame: score
every feasible option with numpy, break ties as its simulator does). A new module here is
a new built-in placement: nothing else changes.
"""
