"""Synthetic Prometheus ``query_range`` answers for the benchmark (``promrange_1m``).

Shaped like what ``gpu-trace telemetry pull`` saves: JSON lines, one answer per family
and chunk, every series of the family in it, values as strings, unix-second times
(dcgm-exporter label set: gpu, UUID, Hostname, modelName, instance, job). Not a
``gpu-trace synth`` family: those are job traces sized by ``--jobs``; this is telemetry
sized by samples. Deterministic per seed.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

FAMILIES = (
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_XID_ERRORS",
)
T0 = 1767225600


def dcgm_labels(family: str, host: int, gpu: int) -> dict[str, str]:
    """The labels dcgm-exporter puts on one GPU's series (as Prometheus returns them)."""
    return {
        "__name__": family,
        "gpu": str(gpu),
        "UUID": f"GPU-{host:04d}-{gpu:04d}",
        "Hostname": f"node{host:03d}",
        "modelName": "NVIDIA H100 80GB HBM3",
        "instance": f"10.0.{host // 256}.{host % 256}:9400",
        "job": "dcgm",
    }


def write(
    out: Path,
    *,
    samples: int = 1_000_000,
    hosts: int = 4,
    gpus: int = 8,
    chunk: int = 2500,
    seed: int = 0,
) -> int:
    """Write about ``samples`` points to ``out``; returns the exact number written."""
    rng = random.Random(seed)
    series = len(FAMILIES) * hosts * gpus
    points = samples // series
    total = 0
    with out.open("w") as fh:
        for fam in FAMILIES:
            for first in range(0, points, chunk):
                n = min(chunk, points - first)
                result = []
                for h in range(hosts):
                    for g in range(gpus):
                        labels = dcgm_labels(fam, h, g)
                        if fam == "DCGM_FI_DEV_XID_ERRORS":
                            vals = ["79" if rng.random() < 0.001 else "0" for _ in range(n)]
                        elif fam == "DCGM_FI_DEV_FB_USED":
                            vals = [str(rng.randrange(81559)) for _ in range(n)]
                        else:
                            vals = [f"{rng.uniform(0, 100):.3f}" for _ in range(n)]
                        times = [T0 + 15 * (first + i) for i in range(n)]
                        result.append(
                            {
                                "metric": labels,
                                "values": [list(p) for p in zip(times, vals, strict=True)],
                            }
                        )
                        total += n
                doc = {"status": "success", "data": {"resultType": "matrix", "result": result}}
                fh.write(json.dumps(doc, separators=(",", ":")) + "\n")
    return total


if __name__ == "__main__":
    sys.stdout.write(f"{write(Path(sys.argv[1]))}\n")
