"""Benchmarks: ``make bench`` (or ``python -m bench.run [NAME ...]``).

Each case runs in its own subprocess so that its peak memory (max RSS of the child) is
measured in isolation; wall time is measured around the child. Results are printed as
a Markdown table and written to ``bench/out/results.json``; BENCHMARKS.md records them
with the machine they ran on.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.cases import CASES

OUT = Path("bench/out")


def run_case(name: str) -> dict[str, object]:
    """Run one case in a child process; return wall seconds, the child's own peak RSS
    (from ``wait4``, so earlier cases do not leak into it) and the case's report.
    """
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "bench.cases", name], stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            msg = f"benchmark {name} failed:\n{err.read()}"
            raise SystemExit(msg)
        detail = json.loads(out.read().strip().splitlines()[-1])
    return {
        "case": name,
        "wall_s": round(wall, 3),
        "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),
        **detail,
    }


def main(names: list[str]) -> None:
    """Run the named cases (all when none), write ``results.json`` and print the
    Markdown table.
    """
    OUT.mkdir(parents=True, exist_ok=True)
    selected = names or list(CASES)
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    results = [run_case(n) for n in selected]
    (OUT / "results.json").write_text(
        json.dumps({"machine": machine, "results": results}, indent=2)
    )
    sys.stdout.write(
        f"machine: {machine}\n\n| case | wall s | peak RSS MiB | detail |\n|---|---|---|---|\n"
    )
    for r in results:
        detail = ", ".join(
            f"{k}={v}" for k, v in r.items() if k not in {"case", "wall_s", "peak_rss_mib"}
        )
        sys.stdout.write(f"| {r['case']} | {r['wall_s']} | {r['peak_rss_mib']} | {detail} |\n")


if __name__ == "__main__":
    main(sys.argv[1:])
