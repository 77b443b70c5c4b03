"""Synthetic traces in each family's **raw** format, at any scale.

A generator writes files byte-compatible with the real trace (same names, columns,
units, missing markers and quirks), so the very same loaders read them; distributions
are calibrated to the published statistics with each trace (its README and paper; each module names its figures). They feed the
loader tests and every benchmark.

``SYNTHS`` maps a family to ``"module:function"``; the function has the signature
``write(out: Path, *, jobs: int, seed: int) -> list[Path]`` and returns the files it wrote.
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
}

Writer = Callable[..., list[Path]]


def get_writer(family: str) -> Writer:
    """The ``write`` function of ``family``'s generator, imported only when asked for
    (each pulls in its own calibration tables).
    """
    module, _, func = SYNTHS[family].partition(":")
    writer: Writer = getattr(importlib.import_module(module), func)
    return writer
