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
                        labels = {
                            "__name__": fam,
                            "gpu": str(g),
                            "UUID": f"GPU-{h:04d}-{g:04d}",
                            "Hostname": f"node{h:03d}",
                            "modelName": "NVIDIA H100 80GB HBM3",
                            "instance": f"10.0.{h // 256}.{h % 256}:9400",
                            "job": "dcgm",
                        }
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
