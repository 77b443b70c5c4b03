"""Per-minute occupancy: ours beside HeliosArtifact's own ``parse_sequence``, in one run.

``HELIOS_ARTIFACT=PATH python -m bench.run occupancy_artifact``: PATH is a clone of
https://github.com/S-Lab-System-Group/HeliosArtifact (a work tree or a bare git
directory). Its ``analysis/trace_parser.py`` is read from there at run time, into a
temporary folder, and imported unchanged; nothing of it is kept in this repository.

Both sides get the same ~300 k-job synthetic Earth ``cluster_log.csv`` (``gpu-trace
synth helios``; Earth is ~26 % of the jobs, so ``1,160,000`` gives 301,086) and run in
their own child process, which reports its own peak RSS (``VmHWM``):

- ours: the store scan + :func:`gpu_trace.analyses.occupancy.occupancy` at ``1min``;
- theirs: ``parse_sequence(dir)`` (reads ``cluster_log.csv`` and
  ``cluster_gpu_number.csv``, walks every GPU job with ``iterrows``). Two harness shims,
  neither touching their code: ``pd.date_range`` maps the ``'T'`` alias pandas 3
  removed to ``'min'``, and ``DataFrame.iterrows`` counts the rows it yields. Their loop
  is ~1-3 ms per job (hours for 300 k), so the child is stopped after
  ``ARTIFACT_LIMIT_S`` (default 120 s): its peak memory is reached once the log and the
  minute frame are built (the loop allocates nothing that stays), and the jobs walked
  per second give the estimated full time.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

JOBS_TOTAL = 1_160_000
"""Synthetic Helios jobs over the four clusters; Earth gets 301,086 of them."""


def _peak_mib() -> float:
    """This process's own peak RSS (``VmHWM``, MiB). Not ``wait4``'s ``ru_maxrss``: on
    Linux a child forked from a large parent starts with the parent's high-water mark
    there, so every child read 368.6 MiB, the parent's peak after synth and ingest.
    """
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _trace_parser(where: Path, into: Path) -> Path:
    """Their ``trace_parser.py`` written into ``into`` (from a work tree or a git dir)."""
    target = into / "trace_parser.py"
    tree = where / "analysis" / "trace_parser.py"
    if tree.is_file():
        target.write_bytes(tree.read_bytes())
        return target
    text = subprocess.run(
        ["git", "--git-dir", str(where), "show", "HEAD:analysis/trace_parser.py"],
        check=True,
        capture_output=True,
    ).stdout
    target.write_bytes(text)
    return target


def _run_ours(store: str) -> None:
    """Child: the per-minute occupancy series of the store's Earth jobs."""
    from gpu_trace.analyses.inputs import Inputs
    from gpu_trace.analyses.occupancy import occupancy

    inp = Inputs.from_store(Path(store), ["helios"])
    start = time.perf_counter()
    series = occupancy(inp.jobs, inp.capacity, inp.machines, freq="1min").collect()
    elapsed = time.perf_counter() - start
    out = {
        "ours_s": round(elapsed, 3),
        "ours_rows": series.height,
        "ours_peak_rss_mib": round(_peak_mib(), 1),
    }
    sys.stdout.write(json.dumps(out) + "\n")


def _run_artifact(folder: str, cluster_dir: str, limit_s: str) -> None:
    """Child: their ``parse_sequence`` on ``cluster_dir``, stopped after ``limit_s``."""
    import pandas as pd

    walked = [0]
    date_range = pd.date_range
    iterrows = pd.DataFrame.iterrows

    def _date_range(*args: object, freq: object = None, **kw: object) -> object:
        return date_range(*args, freq={"T": "min"}.get(str(freq), freq), **kw)  # type: ignore[call-overload]

    def _iterrows(self: pd.DataFrame) -> object:
        for row in iterrows(self):
            walked[0] += 1
            yield row

    pd.date_range = _date_range  # type: ignore[assignment]
    pd.DataFrame.iterrows = _iterrows  # type: ignore[assignment,method-assign]
    sys.path.insert(0, folder)
    import trace_parser  # their module, unchanged  # type: ignore[import-not-found]

    start = time.perf_counter()

    def report(done: bool) -> None:
        elapsed = time.perf_counter() - start
        out = {
            "artifact_walked_jobs": walked[0],
            "artifact_s": round(elapsed, 1),
            "artifact_finished": done,
            "artifact_peak_rss_mib": round(_peak_mib(), 1),
        }
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()

    def stop() -> None:
        time.sleep(float(limit_s))
        report(False)
        os._exit(0)

    threading.Thread(target=stop, daemon=True).start()
    trace_parser.parse_sequence(cluster_dir)
    report(True)


def _child(args: list[str]) -> dict[str, object]:
    """One child's last JSON line."""
    with tempfile.TemporaryFile("w+") as out:
        subprocess.run(args, stdout=out, check=True)
        out.seek(0)
        found: dict[str, object] = json.loads(out.read().strip().splitlines()[-1])
        return found


def occupancy_artifact() -> dict[str, object]:
    """Synthesize and ingest (not timed), then run ours and theirs side by side."""
    import polars as pl

    from gpu_trace.loaders import LOADERS, ingest
    from gpu_trace.synth.helios import write

    where = os.environ.get("HELIOS_ARTIFACT")
    if not where:  # `make bench` runs every case: say why this one did not run
        return {"skipped": "set HELIOS_ARTIFACT to a clone of S-Lab-System-Group/HeliosArtifact"}
    limit = os.environ.get("ARTIFACT_LIMIT_S", "120")
    with tempfile.TemporaryDirectory() as tmp:
        raw, earth, store = Path(tmp) / "raw", Path(tmp) / "earth", Path(tmp) / "store"
        write(raw, jobs=JOBS_TOTAL, seed=0)
        (earth / "data").mkdir(parents=True)
        (raw / "data" / "Earth").rename(earth / "data" / "Earth")
        ingest(LOADERS["helios"], earth, store)
        log = pl.read_csv(earth / "data" / "Earth" / "cluster_log.csv", columns=["gpu_num"])
        jobs, gpu_jobs = log.height, int((log["gpu_num"] > 0).sum())
        _trace_parser(Path(where), Path(tmp))
        me = [sys.executable, "-m", "bench.occupancy_artifact"]
        load_before = os.getloadavg()
        ours = _child([*me, "ours", str(store)])
        theirs = _child([*me, "artifact", tmp, str(earth / "data" / "Earth"), limit])
        load_after = os.getloadavg()
    walked = int(theirs["artifact_walked_jobs"])  # type: ignore[call-overload]
    per_job = float(theirs["artifact_s"]) / max(walked, 1)  # type: ignore[arg-type]
    return {
        "jobs": jobs,
        "gpu_jobs": gpu_jobs,
        "machine_cpus": os.cpu_count(),
        "polars_threads": os.environ.get("POLARS_MAX_THREADS", "default"),
        "load_avg_before": [round(v, 2) for v in load_before],
        "load_avg_after": [round(v, 2) for v in load_after],
        **ours,
        **theirs,
        "artifact_est_full_s": round(per_job * gpu_jobs),
        "memory_ratio": round(
            float(ours["ours_peak_rss_mib"]) / float(theirs["artifact_peak_rss_mib"]),  # type: ignore[arg-type]
            2,
        ),
        "own_peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


if __name__ == "__main__":
    mode, *rest = sys.argv[1:]
    if mode == "ours":
        _run_ours(*rest)
    elif mode == "artifact":
        _run_artifact(*rest)
    else:
        sys.stdout.write(json.dumps(occupancy_artifact()) + "\n")
