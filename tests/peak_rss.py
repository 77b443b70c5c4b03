"""A child process's own peak RSS, for the memory-bound tests that run a fresh process.

Not ``getrusage(RUSAGE_SELF).ru_maxrss``: on Linux a process's ``maxrss`` survives
``execve`` (the old address space's high-water mark is folded into it), and Python
starts a child with ``fork``/``vfork`` + ``exec``, so the child reads at least its
parent's peak. Under a pytest-xdist worker that has grown past 1 GB every child read
more than 1 GB (a hostile-input test failed in CI with a 0.5 GB child), and a
before/after difference read 0 whatever the child did (those tests passed vacuously).
``VmHWM`` in ``/proc/self/status`` is the peak of the child's own address space.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

OWN_PEAK_KIB = (
    "int(next(ln.split()[1] for ln in open('/proc/self/status') if ln.startswith('VmHWM:')))"
)
"""A Python expression (for ``python -c`` code) giving this process's own peak RSS, KiB."""


_CLI = f"""
import sys
from typer.testing import CliRunner
from gpu_trace.cli import app
import gpu_trace.loaders.promrange  # a loader's imports done before the baseline
before = {OWN_PEAK_KIB}
r = CliRunner().invoke(app, sys.argv[1:])
after = {OWN_PEAK_KIB}
print(r.exit_code, after - before)
print(r.stderr)
"""


def cli_peak_growth(args: list[str], cwd: Path) -> tuple[int, int, list[str]]:
    """Run ``gpu-trace ARGS`` in a fresh process: its exit code, how many KiB its own
    peak RSS grew during the command, and the non-empty lines it wrote to stderr.
    """
    out = subprocess.run(
        [sys.executable, "-c", _CLI, *args], capture_output=True, text=True, check=True, cwd=cwd
    ).stdout.splitlines()
    code, grown = (int(x) for x in out[0].split())
    return code, grown, [ln for ln in out[1:] if ln.strip()]
