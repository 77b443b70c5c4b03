"""One large Prometheus ``query_range`` answer on a single line (no line break), for the
memory test and benchmark of ``ingest prometheus-range``: what ``curl
'/api/v1/query_range?...'`` saves for a long range of many GPUs (Prometheus' HTTP API
answer shape: ``{"status":"success","data":{"resultType":"matrix","result":[{"metric":
{...},"values":[[<unix s>,"<value>"],...]}]}}``, values as strings). Deterministic.

``python -m bench.promrange_big OUT SAMPLES`` prints the number of samples written.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bench.promrange_synth import dcgm_labels

FAMILIES = (
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_FREE",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_XID_ERRORS",
)
T0 = 1767225600


def write(out: Path, samples: int, *, hosts: int = 4, gpus: int = 8) -> int:
    """Write about ``samples`` points as one answer on one line; returns the number written."""
    series = len(FAMILIES) * hosts * gpus
    points = max(samples // series, 1)
    parts: list[str] = []
    for fam_no, fam in enumerate(FAMILIES):
        for h in range(hosts):
            for g in range(gpus):
                labels = dcgm_labels(fam, h, g)
                if fam == "DCGM_FI_DEV_XID_ERRORS":
                    vals = (("79" if (i // 1000) % 2 else "0") for i in range(points))
                elif fam.startswith("DCGM_FI_DEV_FB"):
                    vals = (str((i * 7 + g + fam_no) % 40000) for i in range(points))
                else:
                    vals = (f"{(i * 13 + g) % 10000 / 100:.2f}" for i in range(points))
                body = ",".join(
                    f'[{T0 + 15 * i},"{v}"]' for i, v in zip(range(points), vals, strict=True)
                )
                parts.append(
                    f'{{"metric":{json.dumps(labels, separators=(",", ":"))},"values":[{body}]}}'
                )
    with out.open("w") as fh:
        fh.write('{"status":"success","data":{"resultType":"matrix","result":[')
        fh.write(",".join(parts))
        fh.write("]}}")
    return series * points


if __name__ == "__main__":
    sys.stdout.write(f"{write(Path(sys.argv[1]), int(sys.argv[2]))}\n")
