"""Live GPU telemetry: the NVML sampler, the dcgm-exporter scraper and the Prometheus
``query_range`` client.

The file parsers (nvidia-smi, ``dcgmi dmon``, Prometheus text and ``query_range`` JSON)
are loaders and live in ``gpu_trace.loaders`` (``smi``, ``dcgmi``, ``prometheus``,
``promrange``, ``telemetry_common``, ``telemetry_fields``); collectors here reuse them,
so a saved file and a live scrape go through the same code (``docs/telemetry.md``).
Per-job GPU usage is an analysis: ``gpu_trace.analyses.job_usage``. The old module paths
(``gpu_trace.telemetry.smi`` ...) still import, as aliases of the moved modules.
"""
