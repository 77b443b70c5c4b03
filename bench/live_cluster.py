"""The live-cluster store of issue 26's performance target, and its timings.

``python -m bench.live_cluster STORE`` builds the store (once; reused when STORE holds
it), then runs every ``analyze`` command and ``report`` on it, each as its own process
(wall and CPU seconds, its own peak RSS from ``wait4``, the 1-minute load average read
just before it), and prints one JSON line. Targets: every ``analyze`` < 10 s, the whole
report < 60 s, peak memory < 4 GB.

The store: ``gpu-trace synth slurm --jobs 1000000`` ingested with ``ingest slurm``
(January 2026, hosts ``gpu0001``.. and ``cpu001``..), a 2,000-node inventory through
``ingest nodes-csv`` (1,600 8-GPU nodes named as the export names them, 400 CPU nodes),
and one week (2026-01-10 .. 01-17 UTC) of 1-minute ``gpu_util_pct`` samples for 1,000
GPUs (125 hosts x 8; 10,080,000 rows) written straight into ``gpu_samples`` as the
``prometheus-range`` loader writes them (source, metric, unit, raw DCGM field name):
building 10 M samples through a 400 MB JSON answer would time the loader, which other
cases do, not the analyses. Utilization is a seeded random walk per GPU.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

from gpu_trace.store.parquet import StoreTransaction

WEEK_START = "2026-01-10T00:00:00"
MINUTES = 7 * 24 * 60
HOSTS = 125
GPUS_PER_HOST = 8


def _run(args: list[str], env: dict[str, str] | None = None) -> dict[str, object]:
    load = os.getloadavg()[0]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(args, stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        err.seek(0)
        tail = err.read().strip().splitlines()[-1:] or [""]
    return {
        "rc": os.waitstatus_to_exitcode(status),
        "wall_s": round(wall, 2),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
        "rss_mib": round(usage.ru_maxrss / 1024),
        "load": round(load, 1),
        "stderr_tail": tail[0][:160],
    }


def _inventory(path: Path) -> None:
    gpu = [f"gpu{i:04d},8,{'a100' if i <= 1200 else 'v100'},128,1024G" for i in range(1, 1601)]
    cpu = [f"cpu{i:03d},0,,64,256G" for i in range(1, 401)]
    path.write_text("node,gpus,gpu_type,cpus,mem\n" + "\n".join(gpu + cpu) + "\n")


def _samples(store: Path) -> int:
    rng = np.random.default_rng(0)
    gpus = HOSTS * GPUS_PER_HOST
    steps = rng.normal(0, 6, size=(gpus, MINUTES)).astype(np.float32)
    util = np.clip(50 + np.cumsum(steps, axis=1), 0, 100).round(0)
    start = pl.Series([WEEK_START]).str.to_datetime(time_zone="UTC")[0]
    times = pl.datetime_range(
        start, start + pl.duration(minutes=MINUTES - 1), "1m", eager=True, time_zone="UTC"
    )
    hosts = [f"gpu{h:04d}" for h in range(1, HOSTS + 1)]
    frame = pl.DataFrame(
        {
            "time": pl.concat([times] * gpus),
            "host": np.repeat(np.array(hosts), GPUS_PER_HOST * MINUTES),
            "gpu_index": np.tile(np.repeat(np.arange(GPUS_PER_HOST), MINUTES), HOSTS),
            "value": util.ravel().astype(np.float64),
        }
    ).with_columns(
        pl.lit("prometheus-range").alias("source"),
        pl.lit("dcgm").alias("dataset"),
        pl.col("gpu_index").cast(pl.Int16),
        pl.lit("gpu_util_pct").alias("metric"),
        pl.lit("pct").alias("unit"),
        pl.lit("DCGM_FI_DEV_GPU_UTIL").alias("raw_field"),
    )
    with StoreTransaction(store) as tx:
        staged = tx.write("gpu_samples", frame, source="prometheus-range", dataset="dcgm")
    return staged.rows


def build(store: Path, py: str) -> dict[str, object]:
    """The store, unless ``store`` already holds it (a ``.built`` marker)."""
    if (store / ".built").exists():
        return {"reused": True}
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "slurm"
        cli = [py, "-m", "gpu_trace", "-q"]
        synth = _run([*cli, "synth", "slurm", "--jobs", "1000000", "--out", str(raw)])
        slurm = _run([*cli, "ingest", "slurm", str(raw / "sacct_jobs.psv"), "--cluster", "c",
                      "--tz", "Europe/Berlin", "--store", str(store)])  # fmt: skip
        inv = Path(tmp) / "nodes.csv"
        _inventory(inv)
        nodes = _run([*cli, "ingest", "nodes-csv", str(inv), "--cluster", "c",
                      "--snapshot-time", "2025-12-31T23:00:00Z", "--store", str(store)])  # fmt: skip
    # in a child: a forked child starts with its parent's peak RSS, so this process stays
    # small for the timed children's wait4 figures to be theirs
    code = f"from pathlib import Path; from bench.live_cluster import _samples; print(_samples(Path({str(store)!r})))"
    samples = _run([py, "-c", code])
    (store / ".built").touch()
    return {"synth": synth, "ingest_slurm": slurm, "ingest_nodes": nodes, "samples": samples}


def analyze_commands() -> list[str]:
    """Every ``analyze`` subcommand (the declared analyses)."""
    from gpu_trace.plugins import analyses

    return sorted(a.name for a in analyses())


def live_cluster(store: Path | None = None) -> dict[str, object]:
    """The ``make bench`` case: build the store (in a temporary folder unless ``store``
    is given), then time every ``analyze`` command and the report on it.
    """
    if store is None:
        with tempfile.TemporaryDirectory() as tmp:
            return live_cluster(Path(tmp) / "store")
    py = sys.executable
    result: dict[str, object] = {"build": build(store, py)}
    cli = [py, "-m", "gpu_trace", "-q"]
    for name in analyze_commands():
        result[f"analyze {name}"] = _run([*cli, "analyze", name, "--store", str(store)])
    with tempfile.TemporaryDirectory() as site:
        result["report"] = _run([*cli, "report", "--store", str(store), "--out", site])
    return result


if __name__ == "__main__":
    print(json.dumps(live_cluster(Path(sys.argv[1]))))
