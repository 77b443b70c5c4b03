"""A seeded job CSV in the PAI 2020 simulator's own format, for the side-by-side.

``python -m bench.paisim_trace OUT.csv [--jobs 20000] [--seed 0]``

The simulator's own input (``traces/pai/pai_job_duration_estimate_100K.csv``) is a
large file absent from the public snapshot, so this writes a substitute: ``gpu-trace
synth pai2020`` (seeded, calibrated to the PAI 2020 trace; it includes CPU-only jobs and
CPU requests), ``ingest pai2020``, then ``replay export --to paisim``, i.e. the
simulator's columns ``job_id,user,num_gpu,num_cpu,num_inst,submit_time,duration,
gpu_type``. Three changes are made to the exported rows, each so that both simulators
model the same thing:

- the first ``--jobs`` jobs by submit time are kept, exactly as many as the
  simulator's ``-n``: with a longer file it draws a random subset (``random.shuffle``
  after ``random.seed(42)``, ``simulator.py:init_go``) that no other program can
  reproduce; with exactly ``-n`` rows it keeps them all;
- ids are renumbered 0..n-1 in (submit time, id) order: the simulator compares ids as
  numbers when a cell is all digits and as text otherwise (``utils._add_job``), and a
  file mixing both makes its sort fail (``int < str``); the synthetic ids are hex;
- GPU requests are rounded up to whole GPUs: the simulator's one node is a flat pool of
  GPU percent (a 0.3-GPU job takes 30 of 650,000 units, wherever), while gpu-trace
  shares per GPU (a 0.3-GPU job needs one GPU with 0.3 free) and skips fractional
  requests above one GPU; with whole GPUs both models are the same.

CPU-only jobs (``num_gpu`` 0) and CPU requests are kept.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import polars as pl


def _cli(*args: str) -> None:
    env = os.environ | {"GPU_TRACE_FSYNC": "0"}
    subprocess.run(
        [sys.executable, "-m", "gpu_trace", *args], check=True, env=env, capture_output=True
    )


def write(out: Path, jobs: int = 20_000, seed: int = 0) -> None:
    """Write ``jobs`` rows of the simulator's CSV to ``out``."""
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        # ~8 % of synthetic PAI jobs have no run time (never started): draw enough.
        _cli(
            "synth",
            "pai2020",
            "--jobs",
            str(jobs * 5 // 4),
            "--seed",
            str(seed),
            "--out",
            str(t / "raw"),
        )
        (t / "store").mkdir()
        _cli("ingest", "pai2020", str(t / "raw"), "--store", str(t / "store"))
        _cli(
            "replay",
            "export",
            "--source",
            "pai2020",
            "--store",
            str(t / "store"),
            "--to",
            "paisim",
            "-o",
            str(t / "all.csv"),
        )
        df = pl.read_csv(t / "all.csv", schema_overrides={"job_id": pl.String, "user": pl.String})
    if df.height < jobs:
        msg = f"only {df.height} exportable jobs, {jobs} asked"
        raise SystemExit(msg)
    df = (
        df.sort(["submit_time", "job_id"], maintain_order=True)
        .head(jobs)
        .with_columns(
            pl.int_range(pl.len()).cast(pl.String).alias("job_id"),
            pl.col("num_gpu").ceil(),
        )
    )
    df.write_csv(out)


def main() -> None:
    """Command line: see the module docstring."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("out", type=Path)
    p.add_argument("--jobs", type=int, default=20_000)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    write(a.out, a.jobs, a.seed)


if __name__ == "__main__":
    main()
