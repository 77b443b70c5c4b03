"""Before/after of ``gpu-trace ingest`` against the DuckDB script, on files made once.

``python -m bench.ab_ingest FAMILY RAW_DIR REPEAT OLD_TREE NEW_TREE`` runs, REPEAT times
and alternating, the DuckDB script (``bench/baseline_duckdb_ingest.py``), then
``gpu-trace -q ingest`` with the old tree's code, then with the new tree's (each a
child process, ``PYTHONPATH`` set to its tree, fsync on as the CLI defaults), on the
same synthetic files (``gpu-trace synth FAMILY --jobs N --out RAW_DIR`` first), with the
arguments ``ingest_vs_duckdb`` uses (``bench/cases.py``). Prints one JSON line per
process: CPU seconds (user + system, all threads), wall seconds, peak RSS and the
1-minute load average before it. Made for issue 25, where the machine is shared and
only CPU seconds of processes run side by side compare.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from bench.cases import INGEST_FAMILIES, _timed_child


def main(family: str, raw: Path, repeat: int, trees: dict[str, Path]) -> None:
    """Time the script and each tree's ingest ``repeat`` times, printing each run."""
    py = sys.executable
    target, extra = INGEST_FAMILIES[family]
    keep, here = os.environ.get("PYTHONPATH"), Path.cwd()
    raw = raw.resolve()
    with tempfile.TemporaryDirectory() as tmp:
        # children start in tmp: ``python -m`` puts the working folder first on sys.path,
        # which would shadow the PYTHONPATH tree with this one
        os.chdir(tmp)
        for run in range(repeat):
            out = Path(tmp) / "dd"
            runs = {
                "script": [py, "-m", "bench.baseline_duckdb_ingest", family, str(raw), str(out)]
            }
            for name in trees:
                store = Path(tmp) / f"store-{name}"
                runs[name] = [py, "-m", "gpu_trace", "-q", "ingest", family, str(raw / target),
                              *extra, "--store", str(store)]  # fmt: skip
            for name, args in runs.items():
                os.environ["PYTHONPATH"] = str(trees.get(name, here))
                r = _timed_child(args)
                row = {"family": family, "run": run, "who": name, "cpu_s": round(r.cpu_s, 2),
                       "wall_s": round(r.wall_s, 2), "rss_mib": round(r.rss_mib),
                       "load": round(r.load, 1)}  # fmt: skip
                sys.stdout.write(json.dumps(row) + "\n")
                sys.stdout.flush()
                for leftover in (out, *(Path(tmp) / f"store-{n}" for n in trees)):
                    shutil.rmtree(leftover, ignore_errors=True)
        os.chdir(here)
    if keep is not None:
        os.environ["PYTHONPATH"] = keep


if __name__ == "__main__":
    main(
        sys.argv[1],
        Path(sys.argv[2]),
        int(sys.argv[3]),
        {"old": Path(sys.argv[4]).resolve(), "new": Path(sys.argv[5]).resolve()},
    )
