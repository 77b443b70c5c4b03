"""Raw trace loaders: each turns one public trace family into canonical batches.

``LOADERS`` maps a source name (the ``gpu-trace ingest <source>`` argument) to its loader.
"""

from __future__ import annotations

from gpu_trace.loaders.base import Batch, IngestReport, Loader, ingest
from gpu_trace.loaders.helios import HeliosLoader
from gpu_trace.loaders.interchange import ChronusLoader, GavelLoader
from gpu_trace.loaders.kubernetes import KubernetesLoader
from gpu_trace.loaders.openb import OpenbLoader
from gpu_trace.loaders.pai2020 import Pai2020Loader
from gpu_trace.loaders.philly import PhillyLoader
from gpu_trace.telemetry.dcgmi import DcgmiLoader
from gpu_trace.telemetry.prometheus import PrometheusLoader
from gpu_trace.telemetry.smi import NvidiaSmiLoader

LOADERS: dict[str, Loader] = {
    "openb": OpenbLoader(),
    "philly": PhillyLoader(),
    "helios": HeliosLoader(),
    "pai2020": Pai2020Loader(),
    "kubernetes": KubernetesLoader(),
    "nvidia-smi": NvidiaSmiLoader(),
    "dcgmi": DcgmiLoader(),
    "prometheus": PrometheusLoader(),
    "chronus": ChronusLoader(),
    "gavel": GavelLoader(),
}

__all__ = ["LOADERS", "Batch", "IngestReport", "Loader", "ingest"]
