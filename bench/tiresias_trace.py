"""A seeded job trace in the Tiresias simulator's own CSV format, for the side-by-side.

``python -m bench.tiresias_trace OUT.csv [--jobs 5000] [--gpus 256] [--load 1.0] [--seed 0]``
writes ``job_id,num_gpu,submit_time,iterations,model_name,duration,interval`` (the fields
SymbioticLab/Tiresias ``simulator/README.md`` lists as necessary): integer seconds,
Philly-like marginals (mostly 1-GPU jobs, a tail up to 16 GPUs, log-normal durations),
Poisson arrivals at a rate that offers ``load`` x the cluster's GPUs on average.
Integer times keep both simulators on the same clock (no rounding question).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

GPUS = np.array([1, 2, 4, 8, 16])
WEIGHTS = np.array([0.62, 0.14, 0.12, 0.10, 0.02])
MODELS = ("vgg19", "vgg16", "vgg11", "alexnet", "resnet152", "resnet101", "resnet50")


def write(out: Path, jobs: int = 5000, gpus: int = 256, load: float = 1.0, seed: int = 0) -> None:
    """Write the trace (columns in the order of the simulator's own ``60_job.csv``)."""
    rng = np.random.default_rng(seed)
    dur = np.rint(np.exp(rng.normal(np.log(600.0), 1.6, size=jobs))).clip(10, 20 * 86400)
    size = rng.choice(GPUS, size=jobs, p=WEIGHTS)
    rate = load * gpus / float((dur * size).mean())
    submit = np.rint(np.cumsum(rng.exponential(1.0 / rate, size=jobs))).astype(np.int64)
    submit -= submit[0]
    interval = np.diff(submit, append=submit[-1])
    model = rng.integers(0, len(MODELS), size=jobs)
    lines = ["job_id,num_gpu,submit_time,iterations,model_name,duration,interval"]
    lines += [
        f"{i},{size[i]},{submit[i]},{int(dur[i]) * 10},{MODELS[model[i]]},{int(dur[i])},{interval[i]}"
        for i in range(jobs)
    ]
    out.write_text("\n".join(lines) + "\n")


def main() -> None:
    """Command line: see the module docstring."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("out", type=Path)
    p.add_argument("--jobs", type=int, default=5000)
    p.add_argument("--gpus", type=int, default=256)
    p.add_argument("--load", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    write(a.out, a.jobs, a.gpus, a.load, a.seed)


if __name__ == "__main__":
    main()
