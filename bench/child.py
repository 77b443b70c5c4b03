"""One child process, timed the way every side-by-side case reports it."""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any


def timed(
    args: list[str], env: dict[str, str] | None = None, cwd: Path | None = None
) -> dict[str, Any]:
    """Run one process to its end: wall and CPU seconds (user + sys of it and its
    children, from ``wait4``), peak RSS and the last line of its output; a non-zero exit
    stops the case with the output's tail.
    """
    with tempfile.TemporaryFile("w+") as out:
        start = time.perf_counter()
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        out.seek(0)
        text = out.read()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        msg = f"{' '.join(args)} exited {code}: {text[-3000:]}"
        raise SystemExit(msg)
    return {
        "wall_s": round(wall, 3),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
        "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),
        "last_line": text.strip().splitlines()[-1] if text.strip() else "",
    }
