"""The replay kernel: what every simulator of the package runs on.

- :mod:`~gpu_trace.replay.kernel.engine`: the event loop and the actions policies may
  take (start, preempt, timers, reject);
- :mod:`~gpu_trace.replay.kernel.clock`: how time passes (simulated, or the live
  executor's wall clock);
- :mod:`~gpu_trace.replay.kernel.job_table`: the per-job columns, declared once (the
  engine's arrays, the policy view and protocol, and the result follow);
- :mod:`~gpu_trace.replay.kernel.view`: the read-only view policies get;
- :mod:`~gpu_trace.replay.kernel.whatif`: would a job fit if some ended, and where
  (on the cluster state, without changing the engine).

Policies (``scheduling/``, ``placement/``, ``admission/``) sit above it and see only
the view; ``build.build_engine`` binds them to an engine from a ``ReplayConfig``.
"""
