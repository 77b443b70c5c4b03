"""Baseline for ``replay_tiresias_side_5k``: the published Tiresias simulator, run as is.

``python -m bench.baseline_tiresias TRACE.csv OUT_DIR SCHEDULE SCHEME`` runs
``run_sim.py --trace_file=TRACE --schedule=SCHEDULE --scheme=SCHEME --log_path=OUT_DIR``
in the simulator folder named by ``TIRESIAS_SIM`` (``simulator/`` of a checkout of
SymbioticLab/Tiresias; never copied into this repository) with the interpreter named by
``TIRESIAS_PYTHON`` (a command line, default ``python2.7``, e.g. ``env
PYTHONPATH=/path/to/cplex-stub python2.7``: the simulator's README requires 2.7; it
imports ``cplex`` only for its ``balance`` placement, so a stub package on
``PYTHONPATH`` is enough for the schemes used here). Default cluster: the simulator's
flag defaults (1 switch x 32 nodes x 8 GPUs, 64 CPUs, 256 GB). Prints one JSON line:
wall and CPU seconds and peak RSS of the child, or ``{"skipped": reason}`` when
``TIRESIAS_SIM`` is unset or is not the simulator folder.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path


def skip_reason() -> str | None:
    """Why the simulator cannot be run here (None when it can)."""
    sim = os.environ.get("TIRESIAS_SIM")
    if not sim:
        return "TIRESIAS_SIM is not set (path of SymbioticLab/Tiresias simulator/)"
    if not (Path(sim) / "run_sim.py").is_file():
        return f"TIRESIAS_SIM={sim} has no run_sim.py"
    return None


def run(trace: Path, out: Path, schedule: str, scheme: str) -> dict[str, object]:
    """Run the simulator once; its ``job.csv`` lands in ``out``."""
    reason = skip_reason()
    if reason:
        return {"skipped": reason}
    sim = Path(os.environ["TIRESIAS_SIM"])
    python = shlex.split(os.environ.get("TIRESIAS_PYTHON", "python2.7"))
    args = [
        *python,
        "run_sim.py",
        f"--trace_file={trace.resolve()}",
        f"--schedule={schedule}",
        f"--scheme={scheme}",
        f"--log_path={out.resolve()}",
    ]
    start = time.perf_counter()
    proc = subprocess.Popen(args, cwd=sim, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        return {"skipped": f"{' '.join(args)} exited {os.waitstatus_to_exitcode(status)}"}
    return {
        "wall_s": round(wall, 2),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
        "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),
    }


if __name__ == "__main__":
    a = sys.argv[1:]
    print(json.dumps(run(Path(a[0]), Path(a[1]), a[2], a[3])))
