"""Raw trace loaders: each turns one public trace family into canonical batches.

``LOADERS`` maps a source name (the ``gpu-trace ingest <source>`` argument) to its loader.
"""

from __future__ import annotations

from gpu_trace.loaders.acme import AcmeLoader
from gpu_trace.loaders.base import Batch, IngestReport, Loader, ingest
from gpu_trace.loaders.dcgmi import DcgmiLoader
from gpu_trace.loaders.helios import HeliosLoader
from gpu_trace.loaders.interchange import ChronusLoader, GavelLoader
from gpu_trace.loaders.kubernetes import KubernetesLoader
from gpu_trace.loaders.openb import OpenbLoader
from gpu_trace.loaders.pai2020 import Pai2020Loader
from gpu_trace.loaders.philly import PhillyLoader
from gpu_trace.loaders.prometheus import PrometheusLoader
from gpu_trace.loaders.promrange import PromRangeLoader
from gpu_trace.loaders.slurm import SlurmLoader
from gpu_trace.loaders.smi import NvidiaSmiLoader

LOADERS: dict[str, Loader] = {
    "openb": OpenbLoader(),
    "philly": PhillyLoader(),
    "helios": HeliosLoader(),
    "pai2020": Pai2020Loader(),
    "kubernetes": KubernetesLoader(),
    "acme": AcmeLoader(),
    "slurm": SlurmLoader(),
    "nvidia-smi": NvidiaSmiLoader(),
    "dcgmi": DcgmiLoader(),
    "prometheus": PrometheusLoader(),
    "prometheus-range": PromRangeLoader(),
    "chronus": ChronusLoader(),
    "gavel": GavelLoader(),
}

__all__ = ["LOADERS", "Batch", "IngestReport", "Loader", "ingest"]
