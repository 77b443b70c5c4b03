"""Synthetic traces in each family's **raw** format, at any scale.

A generator writes files byte-compatible with the real trace (same names, columns,
units, missing markers and quirks), so the very same loaders read them; distributions
are calibrated to the published statistics with each trace (its README and paper; each module names its figures). They feed the
loader tests and every benchmark.

``SYNTHS`` maps a family to ``"module:function"``; the function has the signature
``write(out: Path, *, jobs: int, seed: int) -> list[Path]`` and returns the files it wrote
(for the serving families ``jobs`` counts requests; those in :data:`RELEASES` also take
``release=``).
Modules are imported on use so the CLI starts fast.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path

SYNTHS: dict[str, str] = {
    "philly": "gpu_trace.synth.philly:write",
    "helios": "gpu_trace.synth.helios:write",
    "pai2020": "gpu_trace.synth.pai2020:write",
    "openb": "gpu_trace.synth.openb:write",
    "kubernetes": "gpu_trace.synth.kubernetes:write",
    "acme": "gpu_trace.synth.acme:write",
    "slurm": "gpu_trace.synth.slurm:write",
    "azure-llm": "gpu_trace.synth.azure_llm:write",
    "mooncake": "gpu_trace.synth.mooncake:write",
    "burstgpt": "gpu_trace.synth.burstgpt:write",
    "gentd26": "gpu_trace.synth.gentd26:write",
}
RELEASES: dict[str, tuple[str, ...]] = {"burstgpt": ("v1.2", "v1.1")}
"""Families whose generator takes ``release=`` (the first is the default): BurstGPT's
v1.2 columns or the older release without ``Session ID`` and ``Elapsed time``."""

Writer = Callable[..., list[Path]]


def get_writer(family: str) -> Writer:
    """The ``write`` function of ``family``'s generator, imported only when asked for
    (each pulls in its own calibration tables).
    """
    module, _, func = SYNTHS[family].partition(":")
    writer: Writer = getattr(importlib.import_module(module), func)
    return writer
