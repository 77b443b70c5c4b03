"""Latency models: how long one iteration of a serving replica takes.

One plugin per file (kind ``latency``): ``roofline`` (GPU and model tables, no
measurement needed) and ``profile`` (measured tables in vidur's published CSV format).
The contract is :class:`gpu_trace.serve.latency.base.LatencyModel`.
"""
