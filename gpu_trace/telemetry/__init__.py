"""Live GPU telemetry: file ingesters (nvidia-smi, ``dcgmi dmon``, Prometheus/dcgm-exporter
text), the NVML sampler, the dcgm-exporter scraper and per-job GPU usage.

Parsing is split from collecting (``docs/telemetry.md``): every text source has a pure
parser over a frame of ``(_line, _raw)`` lines, so the same code serves a saved file
(``gpu-trace ingest ...``) and a live scrape, and is tested offline on real captures.
"""

# The loaders registry imports the telemetry loaders, and they import loader helpers:
# importing the registry first makes either import order work (no partial modules).
import gpu_trace.loaders  # noqa: F401
