"""The serving replay: request-level simulation of LLM inference clusters.

Order 6 of the plan (issue 30). It replays a serving trace of the store (the ``requests``
and ``request_blocks`` tables of order 5) on an emulated inference cluster, request by
request, and scores it: TTFT, TPOT, end-to-end latency, SLO attainment, goodput, GPU
seconds, energy and cost per token.

It is built on the replay kernel (docs/replay.md, "Seams for a second simulator"), not
beside it: per-request columns are declared with :mod:`gpu_trace.replay.kernel.job_table`,
replica schedulers, routers and latency models are policy plugins of their own kinds
(one file each, options declared once with :func:`gpu_trace.plugins.option`), the run
is written through the store's one atomic writer, sweeps use ``replay sweep``'s grid.

Layout, by role:

- :mod:`~gpu_trace.serve.workload`: the requests a run replays (:class:`RequestSet`),
  built from the store's frames (the run driver, :func:`gpu_trace.serve.runs.load_requests`,
  cuts the window);
- :mod:`~gpu_trace.serve.latency`: how long one iteration of a replica takes
  (:class:`~gpu_trace.serve.latency.base.LatencyModel`): a roofline from GPU and model
  tables, or measured profile tables (vidur's CSV format);
- :mod:`~gpu_trace.serve.batching`: replica schedulers (continuous batching, chunked
  prefill), with the paged KV cache and the prefix cache they manage;
- :mod:`~gpu_trace.serve.routing`: routers (round-robin, least outstanding tokens,
  prefix affinity);
- :mod:`~gpu_trace.serve.engine`: the event loop (arrivals, iteration ends, KV
  transfers between disaggregated pools, autoscaler ticks and cold starts);
- :mod:`~gpu_trace.serve.result`: what a run produces (:class:`ServeResult`), the
  contract between the engine, the metrics, the store and the report.
"""
