"""Why the memory-bound tests read ``VmHWM`` (tests/peak_rss.py), not ``ru_maxrss``: a
child started by a parent that once held 300 MB reads >= 300 MB in ``ru_maxrss`` (Linux
folds the old address space's peak into it at exec) but its own small peak in
``VmHWM``."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.peak_rss import OWN_PEAK_KIB

CHILD = f"import json, resource; print(json.dumps([resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, {OWN_PEAK_KIB}]))"

PARENT = f"""
import subprocess, sys
held = bytearray(300 * 2**20)
for i in range(0, len(held), 4096):
    held[i] = 1
print(subprocess.run([sys.executable, "-c", {CHILD!r}], capture_output=True, text=True, check=True).stdout)
"""


def test_a_childs_own_peak_is_not_its_parents() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PARENT], capture_output=True, text=True, check=True
    ).stdout
    maxrss_kib, own_kib = json.loads(out)
    assert maxrss_kib > 300 * 1024  # the parent's 300 MB, inherited through exec
    assert own_kib < 100 * 1024  # a bare interpreter: a few MB
