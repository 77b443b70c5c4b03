"""Benchmarks, baselines and the ingest fuzz campaign (``make bench``, ``make fuzz``);
not part of the library or of ``make test``.
"""
