"""Benchmark cases, each runnable alone: ``python -m bench.cases NAME``.

A case prints one JSON line with its own measurements (timings of the phases it
contains, row counts, and the baseline it compares against where there is one).
Peak memory is measured by ``bench.run`` around the child process.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.analyses_bench import analyses_helios, report_1m
from bench.live_cluster import live_cluster
from bench.occupancy_artifact import occupancy_artifact
from gpu_trace.loaders import LOADERS, ingest
from gpu_trace.store.catalog import connect

SAMPLES = Path("data/samples")


def openb_ingest() -> dict[str, object]:
    """Ingest the real openb default pod list and both node lists (10,888 rows)."""
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        report = ingest(LOADERS["openb"], SAMPLES / "openb", Path(tmp) / "store")
        elapsed = time.perf_counter() - start
    read, written, quarantined = report.totals
    return {
        "rows_read": read,
        "rows_written": written,
        "quarantined": quarantined,
        "ingest_s": round(elapsed, 3),
    }


def openb_query() -> dict[str, object]:
    """Catalog open + a grouped query over the openb store."""
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "store"
        ingest(LOADERS["openb"], SAMPLES / "openb", store)
        start = time.perf_counter()
        con = connect(store)
        rows = con.execute(
            "SELECT status, count(*), sum(gpus), avg(queue_s) FROM jobs GROUP BY ALL"
        ).fetchall()
        elapsed = time.perf_counter() - start
    return {"groups": len(rows), "query_s": round(elapsed, 4)}


def openb_synth_ingest() -> dict[str, object]:
    """Write 1,000,000 synthetic openb pods (+ node lists) and ingest them."""
    from gpu_trace.synth.openb import write

    pods = 1_000_000
    out = _synth_then_ingest(
        lambda tmp: write(tmp, jobs=pods, seed=0),
        lambda files, tmp: ingest(LOADERS["openb"], tmp, tmp / "store"),
    )
    return {"pods": pods, **out, "ingest_rows_per_s": round(out["rows_read"] / out["ingest_s"])}


def _synth_then_ingest(
    synth: Callable[[Path], list[Path]], load: Callable[[list[Path], Path], Any]
) -> dict[str, Any]:
    """Time ``synth(tmp)`` writing raw files, then ``load(files, tmp)`` ingesting them,
    in a temporary folder: sizes, the ingest's row counts and both times.
    """
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        start = time.perf_counter()
        files = synth(tmp)
        synth_s = time.perf_counter() - start
        raw_mib = sum(f.stat().st_size for f in files) / 2**20
        start = time.perf_counter()
        report = load(files, tmp)
        ingest_s = time.perf_counter() - start
    read, written, quarantined = report.totals
    return {
        "raw_mib": round(raw_mib, 1),
        "synth_s": round(synth_s, 3),
        "rows_read": read,
        "rows_written": written,
        "quarantined": quarantined,
        "ingest_s": round(ingest_s, 3),
    }


def promrange_1m() -> dict[str, object]:
    """Write 1,000,000 query_range points (160 series, JSON lines of 2,500-point chunks)
    in a child, then ingest them here with ``prometheus-range`` (this process's peak RSS
    is the ingest's).
    """
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "answers.jsonl"
        out, synth_s, _ = _child([sys.executable, "-m", "bench.promrange_synth", str(raw)])
        points = int(out.strip())
        os.sync()
        start = time.perf_counter()
        report = ingest(LOADERS["prometheus-range"], raw, Path(tmp) / "store")
        elapsed = time.perf_counter() - start
        raw_mib = raw.stat().st_size / 2**20
    read, written, quarantined = report.totals
    return {
        "points": points,
        "raw_mib": round(raw_mib, 1),
        "synth_s": round(synth_s, 3),
        "rows_read": read,
        "rows_written": written,
        "quarantined": quarantined,
        "ingest_s": round(elapsed, 3),
        "points_per_s": round(points / elapsed),
    }


def _child(args: list[str]) -> tuple[str, float, float]:
    """Run a child process; return its stdout, wall seconds and own peak RSS (MiB)."""
    import os
    import subprocess

    with tempfile.TemporaryFile("w+") as out:
        start = time.perf_counter()
        proc = subprocess.Popen(args, stdout=out)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        if os.waitstatus_to_exitcode(status) != 0:
            msg = f"{args} failed"
            raise SystemExit(msg)
        out.seek(0)
        return out.read(), wall, usage.ru_maxrss / 1024


def _helios_dirty(raw: Path, store: Path) -> dict[str, object]:
    """Ingest the same files again after appending one bad line to each cluster log:
    the fast path then gives way to the line-exact parse for every file (the cost a
    user with a damaged copy pays). Run after the clean ingest, on the same files.
    """
    for log in sorted(raw.rglob("cluster_log.csv")):
        with log.open("a") as fh:
            fh.write("not,a,valid,row\n")
    start = time.perf_counter()
    report = ingest(LOADERS["helios"], raw, store)
    elapsed = time.perf_counter() - start
    return {"dirty_ingest_s": round(elapsed, 3), "dirty_quarantined": report.totals[2]}


def helios_full() -> dict[str, object]:
    """Synthesize the full Helios scale (3,362,981 jobs over the four clusters) in a
    child process, ingest it here (so this process's peak RSS is the ingest's), then run
    the owners' recipe and the pandas rewrite (bench/baseline_helios.py) on the same
    files, each in its own child with its own timing and peak RSS.
    """
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "raw"
        script = (
            "import sys; from pathlib import Path; from gpu_trace.synth.helios import write; "
            "write(Path(sys.argv[1]), jobs=3_362_981, seed=0)"
        )
        _, synth_s, synth_rss = _child([sys.executable, "-c", script, str(raw)])
        os.sync()  # the synthetic files at rest, as downloaded ones are: no writeback during the timing
        start = time.perf_counter()
        report = ingest(LOADERS["helios"], raw, Path(tmp) / "store")
        elapsed = time.perf_counter() - start
        baselines: dict[str, object] = {}
        for flag, key in (([], "owners"), (["--rewrite"], "rewrite")):
            out, _, rss = _child(
                [sys.executable, "-m", "bench.baseline_helios", str(raw / "data"), tmp, *flag]
            )
            result = json.loads(out.strip().splitlines()[-1])
            baselines[f"{key}_s"] = result["baseline_s"]
            baselines[f"{key}_read_s"] = result["baseline_read_s"]
            baselines[f"{key}_write_s"] = result["baseline_write_s"]
            baselines[f"{key}_peak_rss_mib"] = round(rss, 1)
            baselines[f"speedup_vs_{key}"] = round(float(result["baseline_s"]) / elapsed, 2)
        dirty = _helios_dirty(raw, Path(tmp) / "dirty-store")
    read, written, quarantined = report.totals
    jobs = sum(r.rows_written for r in report.lines if r.table == "jobs")
    return {
        "synth_s": round(synth_s, 3),
        "synth_peak_rss_mib": round(synth_rss, 1),
        "rows_read": read,
        "rows_written": written,
        "quarantined": quarantined,
        "jobs": jobs,
        "ingest_s": round(elapsed, 3),
        **baselines,
        **dirty,
    }


def nvml_sampler_overhead() -> dict[str, object]:
    """CPU time of the NVML sampler per tick at 1 Hz on 8 GPUs, through the NVML
    stand-in (fake clock, so 600 ticks = 10 simulated minutes, 10 flushes included).
    Goal: < 1 % of one core, i.e. < 10 ms of CPU per 1-second tick.
    """
    from gpu_trace.telemetry.fake_nvml import Clock, FakeNvml, eight_gpus
    from gpu_trace.telemetry.nvml import Sampler

    clock = Clock()
    with tempfile.TemporaryDirectory() as tmp:
        sampler = Sampler(
            FakeNvml(eight_gpus(), clock),
            store=Path(tmp) / "store",
            host="bench",
            interval_s=1.0,
            flush_s=60.0,
            clock=clock,
            sleep=clock.sleep,
        )
        sampler.open()
        start = time.process_time()
        sampler.run(600)
        cpu = time.process_time() - start
    return {
        "case": "nvml_sampler_overhead",
        "gpus": 8,
        "ticks": sampler.ticks,
        "flushes": sampler.writer.flushes,
        "rows": sampler.writer.rows_written,
        "cpu_ms_per_tick": round(cpu / sampler.ticks * 1000, 3),
        "core_share_pct_at_1hz": round(cpu / sampler.ticks * 100, 3),
    }


def _replay(
    n: int, gpus: int, policy: str, shape: str | None = None, resources: bool = False
) -> dict[str, object]:
    import polars as pl

    from gpu_trace.replay import ReplayConfig, replay
    from gpu_trace.replay.cluster import parse_spec
    from gpu_trace.replay.synthetic import pai_like_jobs

    jobs = pai_like_jobs(n, cluster_gpus=gpus, seed=0)
    spec = shape or f"{gpus}x8"
    if resources:
        # CPU / memory checks on: 6 cores and 48 GiB per GPU requested, nodes of 64 cores
        # and 512 GiB (so CPU, not GPUs, sometimes refuses a node)
        jobs = jobs.with_columns(
            (pl.col("gpus") * 6).alias("cpus"),
            (pl.col("gpus") * 48 * 2**30).cast(pl.Int64).alias("mem_bytes"),
        )
        spec += ",cpu=64,mem=512GiB"
    start, cpu = time.perf_counter(), time.process_time()
    config = ReplayConfig(source="synthetic", scheduler=policy, estimator="oracle")
    r = replay(jobs, parse_spec(spec), config)
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu
    row = r.runs.row(0, named=True)
    return {
        "jobs": n,
        "gpus": gpus,
        "cluster": spec,
        "replay_s": round(elapsed, 2),
        "replay_cpu_s": round(cpu, 2),
        "jobs_per_s": round(n / elapsed),
        "jct_mean_s": round(row["jct_mean_s"], 1),
        "queue_mean_s": round(row["queue_mean_s"], 1),
        "alloc_mean_ratio": round(row["alloc_mean_ratio"], 3),
        "preemptions": row["preemptions"],
    }


def replay_fifo_1m() -> dict[str, object]:
    """FIFO + consolidate, 1,000,000 PAI-like jobs on 6,500 GPUs in 8-GPU nodes
    (target < 40 s).
    """
    return _replay(1_000_000, 6500, "fifo")


def replay_fifo_1m_one_node() -> dict[str, object]:
    """The same 1,000,000 jobs on one node of 6,500 GPUs (the PAI simulator's shape;
    target < 40 s).
    """
    return _replay(1_000_000, 6500, "fifo", "6500x6500")


def replay_fifo_1m_1gpu_nodes() -> dict[str, object]:
    """The same 1,000,000 jobs on 6,500 one-GPU nodes (target < 40 s)."""
    return _replay(1_000_000, 6500, "fifo", "6500x1")


def replay_fifo_1m_multiresource() -> dict[str, object]:
    """replay_fifo_1m with CPU and memory requests and per-node limits (target < 40 s)."""
    return _replay(1_000_000, 6500, "fifo", resources=True)


def replay_fgd_openb_10seeds() -> dict[str, object]:
    """The FGD figure's 130 % point on openb default: FGD, best-fit and random x 10
    seeds on the trace's 1,213 GPU nodes with CPU and memory (``gpu_node``, the paper's
    node list; FGD alone: target < 60 s).
    """
    from gpu_trace.replay.fidelity import fgd_check

    out: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "store"
        ingest(LOADERS["openb"], SAMPLES / "openb", store)
        for name in ("fgd", "best-fit", "random"):
            start = time.perf_counter()
            (row,) = fgd_check(store, list(range(10)), (name,))
            out[f"{name}_pct"] = row.ours
            out[f"{name}_s"] = round(time.perf_counter() - start, 1)
    return out


def replay_las_100k() -> dict[str, object]:
    """LAS (discretized 2D-LAS, preemptive) on 100,000 jobs over 1,000 GPUs (< 60 s)."""
    return _replay(100_000, 1000, "las")


SIDE_RUNS = (
    # (our policy, the simulator's --schedule, its --scheme, our cluster). Its dlas-gpu
    # and shortest passes count free GPUs cluster-wide whatever --scheme says (dlas) or
    # with `count` (its shortest + yarn leaks node memory every pass and stalls), so
    # ours runs those on one pooled node of 256 GPUs; fifo uses its yarn placement.
    ("fifo", "fifo", "yarn", "256x8"),
    ("tiresias", "dlas-gpu", "yarn", "256x256"),
    ("srtf", "shortest", "count", "256x256"),
)


def replay_tiresias_side_5k() -> dict[str, object]:
    """The Tiresias simulator (``TIRESIAS_SIM``, see bench/baseline_tiresias.py) and
    gpu-trace on the same 5,000 jobs (bench/tiresias_trace.py, seed 0, load 1.0 on
    32x8 GPUs) with FIFO, its dlas-gpu defaults (= our `tiresias` preset) and SRTF:
    wall and CPU seconds, the simulator's peak RSS, the speed-up and how many jobs
    have the same start and end in both. Target: ours >= 50x faster. Without the
    simulator only our side runs.
    """
    import json
    import os

    from bench.baseline_tiresias import skip_reason
    from bench.tiresias_side import compare
    from bench.tiresias_trace import write

    out: dict[str, object] = {"load_before": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "t5000.csv"
        write(trace)
        for ours, schedule, scheme, spec in SIDE_RUNS:
            log = Path(tmp) / f"sim-{schedule}"
            if skip_reason() is None:
                text, _, _ = _child(
                    [
                        sys.executable,
                        "-m",
                        "bench.baseline_tiresias",
                        str(trace),
                        str(log),
                        schedule,
                        scheme,
                    ]
                )
                sim = json.loads(text.strip().splitlines()[-1])
            else:
                sim = {"skipped": skip_reason()}
            if "skipped" in sim:
                out["simulator"] = sim["skipped"]
            got = compare(trace, None if "skipped" in sim else log / "job.csv", ours, spec)
            row = {k: got[k] for k in ("ours_s", "ours_cpu_s", "ours_jct_mean_s")}
            if "skipped" not in sim:
                row |= {
                    "sim_s": sim["wall_s"],
                    "sim_cpu_s": sim["cpu_s"],
                    "sim_peak_rss_mib": sim["peak_rss_mib"],
                    "sim_jct_mean_s": got["sim_jct_mean_s"],
                    "speedup": round(float(sim["wall_s"]) / float(got["ours_s"]), 1),
                    "speedup_cpu": round(float(sim["cpu_s"]) / float(got["ours_cpu_s"]), 1),
                    "same_start_and_end": got["same_start_and_end"],
                    "same_start": got["same_start"],
                }
            out[ours] = row
    out["load_after"] = os.getloadavg()[0]
    return out


def replay_paisim_side_20k() -> dict[str, object]:
    """The published PAI 2020 simulator and gpu-trace end to end on the same 20,000-job
    CSV in its format (its README run: 6,500 GPUs on one node, 1,000 arrivals/min), FIFO
    (= our fifo-skip) and SJF: our ingest + replay as two processes vs its process,
    speed-ups and job-by-job agreement (bench/paisim_side.py). Target: >= 100x.
    ``PAI_SIM`` = its ``simulator/`` folder, ``PAI_SIM_PYTHON`` = a Python with numpy
    and matplotlib; without them only our side runs and the case says why.
    """
    from bench.paisim_side import side_by_side

    return side_by_side()


def serve_vidur_side() -> dict[str, object]:
    """The serving replay beside vidur (microsoft/vidur, MIT) on the same requests
    (the whole hour of the Azure LLM 2023 conversation trace, 19,366 requests), Llama-2-7b
    on A100s, vidur's vllm scheduler, 4 replicas, round-robin: p50 / p90 TTFT, TPOT and e2e
    of both, their differences and CPU seconds (bench/serve_vidur_side.py; other runs:
    ``python -m bench.serve_vidur_side --scheduler sarathi --replicas 1``). Target: >= 20x
    less CPU. ``VIDUR_SRC`` = its checkout, ``VIDUR_PYTHON`` = its venv's python,
    ``VIDUR_CACHE`` = where its fitted predictor stays between runs (the first run fits it:
    about 20 CPU minutes); skipped, saying why, without ``VIDUR_SRC``.
    """
    from bench.serve_vidur_side import side_by_side

    row = side_by_side("a100-llama-2-7b", "vllm", 4, 0.0, None)
    row.pop("table", None)
    return row


def replay_preemptive_100k(policy: str, like: str = "pai") -> dict[str, object]:
    """``policy`` on 100,000 PAI-like (or Philly-like) jobs over 2,000 GPUs (8-GPU
    nodes) at load 1.2.
    """
    from gpu_trace.replay import ReplayConfig, replay
    from gpu_trace.replay.cluster import parse_spec
    from gpu_trace.replay.synthetic import pai_like_jobs, philly_like_jobs

    make = philly_like_jobs if like == "philly" else pai_like_jobs
    jobs = make(100_000, cluster_gpus=2000, utilization=1.2, seed=0)
    start, cpu = time.perf_counter(), time.process_time()
    r = replay(
        jobs,
        parse_spec("2000x8"),
        ReplayConfig(source="synthetic", scheduler=policy, estimator="oracle"),
    )
    row = r.runs.row(0, named=True)
    return {
        "policy": policy,
        "replay_s": round(time.perf_counter() - start, 2),
        "replay_cpu_s": round(time.process_time() - cpu, 2),
        "jct_mean_s": round(row["jct_mean_s"], 1),
        "preemptions": row["preemptions"],
        "jobs": jobs.height,
    }


def replay_srtf_100k_2000gpus() -> dict[str, object]:
    """SRTF on 100,000 PAI-like jobs, 2,000 GPUs, load 1.2 (target < 60 s)."""
    return replay_preemptive_100k("srtf")


def replay_tiresias_100k_2000gpus() -> dict[str, object]:
    """The `tiresias` preset (LAS, 3,250 / 7,200 GPU-s) on the same jobs (< 60 s)."""
    return replay_preemptive_100k("tiresias")


def replay_srtf_100k_philly() -> dict[str, object]:
    """SRTF on 100,000 Philly-like jobs (1-128 GPUs), 2,000 GPUs, load 1.2 (< 60 s)."""
    return replay_preemptive_100k("srtf", "philly")


def replay_tiresias_100k_philly() -> dict[str, object]:
    """The `tiresias` preset on the same Philly-like jobs (< 60 s)."""
    return replay_preemptive_100k("tiresias", "philly")


def replay_faults_energy() -> dict[str, object]:
    """Helios-sized replay (6,400 GPUs in 8-GPU nodes, FIFO) of PAI-like jobs without
    and with node failures (MTBF 5,000 h, MTTR 2 h, 30-min checkpoints, 120 s restore)
    + energy accounting, then + the power-off policy (idle 30 m, boot 5 m): the
    overhead of faults and energy must stay within 2x. ``REPLAY_FAULTS_JOBS`` sets the
    scale (default 3,362,981, the Helios job count).
    """
    import dataclasses

    from gpu_trace.replay import ReplayConfig, replay
    from gpu_trace.replay.cluster import parse_spec
    from gpu_trace.replay.synthetic import pai_like_jobs

    n = int(os.environ.get("REPLAY_FAULTS_JOBS", "3362981"))
    jobs = pai_like_jobs(n, cluster_gpus=6400, seed=0)
    spec = parse_spec("6400x8")
    base = ReplayConfig(source="synthetic")
    faults = ReplayConfig(
        source="synthetic",
        faults="mtbf=5000h,mttr=2h",
        checkpoint_s=1800,
        restore_s=120,
        power="gpu-model",
    )
    off = dataclasses.replace(faults, power_off="idle=30m,boot=5m")
    out: dict[str, object] = {"jobs": n, "gpus": 6400}
    rows = {}
    for name, cfg in (("plain", base), ("faults_energy", faults), ("power_off", off)):
        start = time.perf_counter()
        r = replay(jobs, spec, cfg)
        out[f"{name}_s"] = round(time.perf_counter() - start, 2)
        rows[name] = r.runs.row(0, named=True)
    out["overhead_ratio"] = round(float(out["faults_energy_s"]) / float(out["plain_s"]), 2)  # type: ignore[arg-type]
    f, o, p = rows["faults_energy"], rows["power_off"], rows["plain"]
    out.update(
        {
            "jct_mean_plain_s": round(p["jct_mean_s"], 1),
            "jct_mean_faults_s": round(f["jct_mean_s"], 1),
            "node_failures": f["node_failures"],
            "jobs_failed": f["jobs_failed"],
            "lost_gpu_h_failure": round(f["lost_gpu_h_failure"], 1),
            "lost_gpu_h_restore": round(f["lost_gpu_h_restore"], 1),
            "goodput_ratio": round(f["goodput_ratio"], 4),
            "energy_mwh": round(f["energy_kwh"] / 1000, 2),
            "power_off_energy_mwh": round(o["energy_kwh"] / 1000, 2),
            "power_off_saved_mwh": round(o["energy_saved_kwh"] / 1000, 2),
            "power_off_boots": o["node_boots"],
            "jct_mean_power_off_s": round(o["jct_mean_s"], 1),
        }
    )
    return out


def _pai_20k() -> Any:
    """20,000 PAI-like jobs re-timed to 1,000 arrivals per minute (the published PAI
    simulator setup: job i arrives at floor(i / 1000) minutes).
    """
    import polars as pl

    from gpu_trace.replay.synthetic import pai_like_jobs

    return pai_like_jobs(20_000, cluster_gpus=6500, seed=0).with_columns(
        (
            pl.col("submit_time").min() + pl.duration(seconds=pl.int_range(pl.len()) * 60 // 1000)
        ).alias("submit_time")
    )


def _warm_up(jobs: Any, shape: str) -> None:
    """Replay 200 jobs once, so the timed run does not include first-use module imports
    (the tick baseline's timing has none either).
    """
    from gpu_trace.replay import ReplayConfig, replay
    from gpu_trace.replay.cluster import parse_spec

    for policy in ("fifo", "fifo-skip"):
        replay(
            jobs.head(200), parse_spec(shape), ReplayConfig(source="synthetic", scheduler=policy)
        )


def _replay_20k_shape(shape: str) -> dict[str, object]:
    """Strict ``fifo`` and ``fifo-skip`` (consolidate) on the 20,000 PAI jobs on one
    cluster shape, after a warm-up; target < 1.2 s each.
    """
    from gpu_trace.replay import ReplayConfig, replay
    from gpu_trace.replay.cluster import parse_spec

    jobs = _pai_20k()
    _warm_up(jobs, shape)
    out: dict[str, object] = {"jobs": jobs.height, "cluster": shape}
    for policy in ("fifo", "fifo-skip"):
        start, cpu = time.perf_counter(), time.process_time()
        r = replay(jobs, parse_spec(shape), ReplayConfig(source="synthetic", scheduler=policy))
        key = policy.replace("-", "_")
        out[f"{key}_s"] = round(time.perf_counter() - start, 3)
        out[f"{key}_cpu_s"] = round(time.process_time() - cpu, 3)
        out[f"{key}_jct_mean_s"] = round(r.runs["jct_mean_s"][0], 3)
    return out


def replay_fifo_20k_8gpu_nodes() -> dict[str, object]:
    """20,000 PAI jobs, 6,500 GPUs in 8-GPU nodes."""
    return _replay_20k_shape("6500x8")


def replay_fifo_20k_1gpu_nodes() -> dict[str, object]:
    """20,000 PAI jobs, 6,500 one-GPU nodes."""
    return _replay_20k_shape("6500x1")


def replay_fifo_20k_one_node() -> dict[str, object]:
    """20,000 PAI jobs, one node of 6,500 GPUs (the PAI simulator's ``6500g_1n``)."""
    return _replay_20k_shape("6500x6500")


def replay_fifo_20k_quarter_units() -> dict[str, object]:
    """20,000 PAI jobs on one node of 26,000 quarter-GPU units (6,500 GPUs)."""
    return _replay_20k_shape("26000x26000")


def replay_baseline_20k() -> dict[str, object]:
    """The PAI simulator's 1-s tick FIFO (our replica, non-blocking like the peer's
    ``alloc_job``) vs our ``fifo-skip`` on the same 20,000 jobs, one node of 6,500 GPUs,
    1,000 arrivals per minute (the published setup). Target: ours >= 20x faster.
    """
    import numpy as np

    from bench.baseline_replay import tick_fifo_jobs
    from gpu_trace.replay import ReplayConfig, replay
    from gpu_trace.replay.cluster import parse_spec

    jobs = _pai_20k()
    n = jobs.height
    _warm_up(jobs, "6500x6500")
    start, cpu = time.perf_counter(), time.process_time()
    r = replay(
        jobs, parse_spec("6500x6500"), ReplayConfig(source="synthetic", scheduler="fifo-skip")
    )
    ours = time.perf_counter() - start
    ours_cpu = time.process_time() - cpu
    cpu = time.process_time()
    sub = ((jobs["submit_time"] - jobs["submit_time"].min()).dt.total_seconds()).to_numpy()
    base, finish = tick_fifo_jobs(
        sub.astype(np.int64),
        jobs["run_s"].to_numpy().astype(np.int64),
        jobs["gpus"].to_numpy().astype(np.int64),
        6500,
    )
    base_cpu = time.process_time() - cpu
    got = r.jobs.sort(pl_int("job_id"))["finish_time_s"].to_numpy()
    return {
        "jobs": n,
        "ours_s": round(ours, 3),
        "ours_cpu_s": round(ours_cpu, 3),
        "ours_jobs_per_s": round(n / ours),
        "ours_jct_mean_s": round(r.runs["jct_mean_s"][0], 3),
        "baseline_s": base["wall_s"],
        "baseline_cpu_s": round(base_cpu, 3),
        "baseline_jobs_done": base["jobs_done"],
        "baseline_jobs_per_s": base["jobs_per_s"],
        "baseline_jct_mean_s": round(base["jct_mean_s"], 3),
        "jobs_same_finish": int((got == finish).sum()),
        "speedup": round(base["wall_s"] / ours * n / max(base["jobs_done"], 1), 1),
        "speedup_cpu": round(base_cpu / ours_cpu * n / max(base["jobs_done"], 1), 1),
    }


def pl_int(column: str) -> Any:
    """``column`` cast to an integer (job ids are decimal strings here)."""
    import polars as pl

    return pl.col(column).cast(pl.Int64)


def philly_full() -> dict[str, object]:
    """Synthesize the full Philly job log (117,325 jobs) plus one day of per-minute util
    rows for all 552 machines, in a child process. Run the owners' notebook recipe
    (bench/baseline_philly.py: json.load + Python Job objects -> pandas -> Parquet) on
    that job log in another child, for the speed-up. Then ingest the job log (with
    the machine list) and the three util files separately here, timing each. ``ingest_peak_rss_mib`` is this process's own peak: the ingest only
    (the runner's peak RSS for the case is the largest of this process and its
    children).
    """
    import resource

    jobs = 117_325
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "trace-data"
        script = (
            "import sys; from pathlib import Path; from gpu_trace.synth.philly import write; "
            f"write(Path(sys.argv[1]), jobs={jobs}, seed=0, util_days=1)"
        )
        _, synth_s, _ = _child([sys.executable, "-c", script, str(raw)])
        # The baseline runs first, while this process is still small: a child's
        # peak-RSS counter starts from its parent's at fork.
        out, _, base_rss = _child(
            [
                sys.executable,
                "-m",
                "bench.baseline_philly",
                str(raw / "cluster_job_log"),
                str(Path(tmp) / "baseline.parquet"),
            ]
        )
        baseline = json.loads(out.strip().splitlines()[-1])
        log_only = Path(tmp) / "log-only"
        log_only.mkdir()
        for name in ("cluster_job_log", "cluster_machine_list"):
            (log_only / name).symlink_to(raw / name)
        store = Path(tmp) / "store"
        start = time.perf_counter()  # store set-up (zero-row file per table) included
        log_report = ingest(LOADERS["philly"], log_only, store)
        log_s = time.perf_counter() - start
        util_rows = {}
        start = time.perf_counter()
        for name in ("cluster_gpu_util", "cluster_cpu_util", "cluster_mem_util"):
            report = ingest(LOADERS["philly"], raw / name, store)
            util_rows[name] = (
                sum(r.rows_written for r in report.lines if r.table.endswith("_samples")),
                (raw / name).stat().st_size,
            )
        util_s = time.perf_counter() - start
        own_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        log_mib = (raw / "cluster_job_log").stat().st_size / 2**20
    lines = {r.table: r for r in log_report.lines if r.file == "cluster_job_log"}
    return {
        "jobs": lines["jobs"].rows_written,
        "placements": lines["placements"].rows_written,
        "job_log_mib": round(log_mib, 1),
        "synth_s": round(synth_s, 3),
        "job_log_ingest_s": round(log_s, 3),
        "gpu_samples": util_rows["cluster_gpu_util"][0],
        "host_samples": util_rows["cluster_cpu_util"][0] + util_rows["cluster_mem_util"][0],
        "util_mib": round(sum(size for _, size in util_rows.values()) / 2**20, 1),
        "util_ingest_s": round(util_s, 3),
        "ingest_peak_rss_mib": round(own_rss, 1),
        **baseline,
        "baseline_peak_rss_mib": round(base_rss, 1),
        "speedup_vs_baseline": round(baseline["baseline_s"] / log_s, 1),
    }


def live_emulated_200() -> dict[str, object]:
    """Live replay of 200 PAI-like jobs on 16 emulated devices (FIFO, time scale 1000),
    then ``validate``: average-JCT error against the simulator and executor overhead
    (~7 min of wall time: the trace spans ~430,000 s).
    Durations are clipped to 0.5-20 s of wall time: a job shorter than a worker's
    start-up (~0.1 s) cannot be timed faithfully by any process-based executor.
    """
    import tempfile

    import polars as pl

    from gpu_trace.replay import ReplayConfig
    from gpu_trace.replay.live.executor import LiveOptions, run_live
    from gpu_trace.replay.live.validate import validate
    from gpu_trace.replay.synthetic import pai_like_jobs

    scale = 1000.0
    jobs = pai_like_jobs(200, cluster_gpus=16, seed=3).with_columns(
        pl.col("run_s").clip(0.5 * scale, 20 * scale), pl.col("gpus").clip(upper_bound=8)
    )
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        start = time.perf_counter()
        live = run_live(
            jobs,
            ReplayConfig(source="synthetic", scheduler="fifo", run_id="bench-live"),
            LiveOptions(devices="emulated:16x8", time_scale=scale),
            out,
        )
        wall = time.perf_counter() - start
        v = validate(out)
    row = live.result.runs.row(0, named=True)
    return {
        "jobs": 200,
        "devices": "emulated:16x8",
        "time_scale": scale,
        "wall_s": round(wall, 1),
        "jobs_finished": row["jobs_finished"],
        "jct_mean_live_s": round(v.summary["jct_mean_live_s"], 1),
        "jct_mean_sim_s": round(v.summary["jct_mean_sim_s"], 1),
        "jct_mean_rel_error": round(v.summary["jct_mean_rel_error"], 4),
        "queue_mae_s": round(v.summary["queue_mae_s"], 1),
        "overhead_mean_ms": round(row["overhead_mean_ms"], 2),
        "overhead_p99_ms": round(row["overhead_p99_ms"], 2),
        "wake_lag_mean_ms": round(row["wake_lag_mean_ms"], 2),
        "wakeups": row["wakeups"],
    }


def live_cuda_8() -> dict[str, object]:
    """GPU benchmark case: live replay of 8 PAI-like jobs on the real GPUs of this host
    (``cuda:0-N``, workers hold memory and run kernels through CuPy or PyTorch), then
    ``validate`` against the simulator. What it measures is the same as
    ``live_emulated_200`` (start/exit latency of real processes under the same policy
    code) plus CUDA context creation; it says nothing about job speed on the GPU.
    On a machine without an NVIDIA GPU it records why it did not run instead of failing
    ``make bench``.
    """
    import shutil
    import subprocess
    import tempfile

    import polars as pl

    if shutil.which("nvidia-smi") is None:
        return {"skipped": "no nvidia-smi on this machine (no NVIDIA GPU)"}
    listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False)
    count = sum(line.startswith("GPU ") for line in listed.stdout.splitlines())
    if count == 0:
        return {"skipped": "nvidia-smi -L lists no GPU"}
    from gpu_trace.replay import ReplayConfig
    from gpu_trace.replay.live.executor import LiveOptions, run_live
    from gpu_trace.replay.live.validate import validate
    from gpu_trace.replay.synthetic import pai_like_jobs

    scale = 1000.0
    jobs = pai_like_jobs(8, cluster_gpus=count, seed=3).with_columns(
        pl.col("run_s").clip(2 * scale, 10 * scale), pl.col("gpus").clip(upper_bound=count)
    )
    devices = f"cuda:0-{count - 1}" if count > 1 else "cuda:0"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        start = time.perf_counter()
        live = run_live(
            jobs,
            ReplayConfig(source="synthetic", scheduler="fifo", run_id="bench-live-cuda"),
            LiveOptions(devices=devices, time_scale=scale),
            out,
        )
        wall = time.perf_counter() - start
        v = validate(out)
    row = live.result.runs.row(0, named=True)
    return {
        "jobs": 8,
        "devices": devices,
        "time_scale": scale,
        "wall_s": round(wall, 1),
        "jobs_finished": row["jobs_finished"],
        "jct_mean_rel_error": round(v.summary["jct_mean_rel_error"], 4),
        "overhead_p99_ms": round(row["overhead_p99_ms"], 2),
    }


def _pai_child(args: list[str]) -> tuple[dict[str, Any], float, float]:
    """:func:`_child`, parsing the child's last stdout line as JSON."""
    out, wall, rss = _child(args)
    return json.loads(out.strip().splitlines()[-1]), wall, rss


_PAI_SYNTH = (
    "import json, sys; from pathlib import Path; from gpu_trace.synth.pai2020 import write; "
    "files = write(Path(sys.argv[1]), jobs=int(sys.argv[2]), seed=0); "
    "print(json.dumps({f.name: f.stat().st_size for f in files}))"
)
_PAI_INGEST = (
    "import json, sys, time; from pathlib import Path; "
    "from gpu_trace.loaders import LOADERS, ingest; t = time.perf_counter(); "
    "r = ingest(LOADERS['pai2020'], Path(sys.argv[1]), Path(sys.argv[2]), tables=sys.argv[3]); "
    "print(json.dumps({'ingest_s': time.perf_counter() - t, 'totals': r.totals, "
    "'rows': {x.table + ':' + x.file: [x.rows_read, x.rows_written] for x in r.lines}}))"
)


def pai2020_full() -> dict[str, object]:
    """Alibaba PAI 2020 at full scale: synthesize 1,050,000 jobs (1.26 M tasks, ~6.8 M
    instance lines, ~3.6 GB of CSV), ingest job/task/instance (target < 90 s and < 4 GB
    peak RSS), then the other four tables, each in its own child process so each peak
    RSS is that ingest's alone. Then, on a 10 % trace generated in the same run, our
    loader against the owners' pandas recipe (bench/baseline_pai2020.py, as written in
    analysis/utils.py) and a vectorized rewrite of it: the owners' recipe takes minutes
    per 100,000 jobs, too long to run at full scale here. ``PAI2020_JOBS`` and
    ``PAI2020_SUBSET_JOBS`` change the two sizes.
    """
    import os

    from gpu_trace.synth.pai2020 import FULL_SCALE_JOBS

    full = int(os.environ.get("PAI2020_JOBS", FULL_SCALE_JOBS))
    subset = int(os.environ.get("PAI2020_SUBSET_JOBS", max(full // 10, 1)))
    py = sys.executable
    core, extra = "job,task,instance", "sensor,machine_metric,group_tag,machine_spec"
    with tempfile.TemporaryDirectory() as tmp:
        raw, sub = Path(tmp) / "full", Path(tmp) / "subset"
        sizes, synth_s, synth_rss = _pai_child([py, "-c", _PAI_SYNTH, str(raw), str(full)])
        ours, core_wall, core_rss = _pai_child(
            [py, "-c", _PAI_INGEST, str(raw), str(Path(tmp) / "store"), core]
        )
        more, _, extra_rss = _pai_child(
            [py, "-c", _PAI_INGEST, str(raw), str(Path(tmp) / "store"), extra]
        )
        _pai_child([py, "-c", _PAI_SYNTH, str(sub), str(subset)])
        small, _, small_rss = _pai_child(
            [py, "-c", _PAI_INGEST, str(sub), str(Path(tmp) / "store-subset"), core]
        )
        owners, _, owners_rss = _pai_child(
            [py, "-m", "bench.baseline_pai2020", str(sub), str(Path(tmp) / "owners")]
        )
        vector, _, vector_rss = _pai_child(
            [py, "-m", "bench.baseline_pai2020", str(sub), str(Path(tmp) / "vec"), "--vectorized"]
        )
    rows = ours["rows"]
    read, written, quarantined = ours["totals"]
    usage = sum(w for k, (_, w) in more["rows"].items() if k.startswith("usage:"))
    return {
        "jobs": rows["jobs:pai_job_table.csv"][1],
        "tasks": rows["tasks:pai_task_table.csv"][1],
        "instance_lines": rows["placements:pai_instance_table.csv"][0],
        "placements": rows["placements:pai_instance_table.csv"][1],
        "raw_mib": round(sum(sizes.values()) / 2**20, 1),
        "instance_csv_mib": round(sizes["pai_instance_table.csv"] / 2**20, 1),
        "synth_s": round(synth_s, 1),
        "synth_peak_rss_mib": round(synth_rss, 1),
        "core_rows_read": read,
        "core_rows_written": written,
        "core_quarantined": quarantined,
        "core_ingest_s": round(ours["ingest_s"], 1),
        "core_process_s": round(core_wall, 1),
        "core_peak_rss_mib": round(core_rss, 1),
        "extra_ingest_s": round(more["ingest_s"], 1),
        "extra_peak_rss_mib": round(extra_rss, 1),
        "usage_rows": usage,
        "subset_jobs": subset,
        "subset_ours_s": round(small["ingest_s"], 2),
        "subset_ours_peak_rss_mib": round(small_rss, 1),
        "subset_owners_s": owners["total_s"],
        "subset_owners_peak_rss_mib": round(owners_rss, 1),
        "subset_vectorized_pandas_s": vector["total_s"],
        "subset_vectorized_peak_rss_mib": round(vector_rss, 1),
        "speedup_vs_owners": round(owners["total_s"] / small["ingest_s"], 1),
        "speedup_vs_vectorized_pandas": round(vector["total_s"] / small["ingest_s"], 2),
    }


_SPIN = "s = 0\nfor i in range(20_000_000):\n    s += i\n"
"""About 1 s of one core: long enough that interpreter start-up and scheduling noise
are a small part of it (5 M iterations, 0.3 s, moved the figure by +-0.1 between
calls on a busy machine)."""


def _load1() -> float:
    """The 1-minute load average (runnable processes), recorded beside each phase."""
    return float(Path("/proc/loadavg").read_text().split()[0])


def _spin(n: int) -> float:
    """Wall seconds for ``n`` processes each running :data:`_SPIN` at once."""
    start = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", _SPIN]) for _ in range(n)]
    for p in procs:
        p.wait()
    return time.perf_counter() - start


def replay_sweep_60() -> dict[str, object]:
    """A 60-run openb sweep (fifo/sjf/las x best-fit/fgd x 5 loads x 2 seeds, whole
    sample on 32x8): in process vs Ray with 2 local workers, Ray's start-up measured
    apart, and a 16-node estimate from the per-run times.

    Target (issue 27): Ray's speed-up without start-up is within 10 % of what two
    CPU-bound processes get on this machine, measured in the same run, i.e.
    ``ray_vs_machine >= 0.9``: each sweep is timed against a spin timed beside it (one
    process around the in-process sweep, two around the Ray sweep), since the load of a
    shared machine drifts between the two sweeps. A fixed
    figure (the old >= 1.7x) measured the machine (a 2-core VM shared with other work
    gives two processes 1.6-1.7 of 2.0), not the sweep's overhead.
    """
    from gpu_trace.replay import sweep as sw
    from gpu_trace.replay import sweep_grid as sg

    doc = {
        "source": "openb",
        "fixed": {"cluster": "32x8"},
        "grid": {
            "scheduler": ["fifo", "sjf", "las"],
            "placement": ["best-fit", "fgd"],
            "load": "0.8:1.6:0.2",
            "seed": "0-1",
        },
    }
    seeds = os.environ.get("SWEEP_SEEDS")  # "0" halves the sweep (30 runs) for a short check
    if seeds:
        doc["grid"]["seed"] = seeds  # type: ignore[index]
    # The machine is timed next to each sweep: one spin process before and after the
    # in-process sweep, two at once before and after the Ray sweep. On a shared machine
    # the load drifts between the two sweeps (12 -> 8 runnable processes in one run), so
    # a speed-up of one sweep over the other measures the drift; each sweep over the
    # spin timed beside it does not (to first order).
    loads = [_load1()]
    one = [_spin(1)]
    with tempfile.TemporaryDirectory() as tmp:
        stores = {k: Path(tmp) / f"store-{k}" for k in ("local", "ray")}
        for s in stores.values():
            ingest(LOADERS["openb"], SAMPLES / "openb", s)
        spec = sg.parse(doc, "bench")
        start = time.perf_counter()
        local = sw.run_sweep(stores["local"], spec, Path(tmp) / "local", workers=1)
        local_s = time.perf_counter() - start
        loads.append(_load1())
        one.append(_spin(1))
        two = [_spin(2)]
        start = time.perf_counter()
        on_ray = sw.run_sweep(stores["ray"], spec, Path(tmp) / "ray", workers=2)
        ray_s = time.perf_counter() - start
        loads.append(_load1())
        same = _store_bytes(stores["local"]) == _store_bytes(stores["ray"])
    two.append(_spin(2))
    one_s, two_s = sum(one) / 2, sum(two) / 2
    # how much of 2.0 two CPU-bound processes get here (one alone vs two at once, between
    # the sweeps): a VM whose vCPUs share host cores, or a busy machine, gives under 2.0
    efficiency = 2 * one[1] / two[0]
    runs = sorted(local.run_wall_s)
    total = sum(runs)
    steady = ray_s - on_ray.startup_s
    per_task_overhead = max(steady - total / 2, 0.0) / (len(runs) / 2)
    slots = 16 * 16  # 16 nodes x 16 cores
    est_16 = 2.0 + max(total / slots, runs[-1]) + per_task_overhead
    # Ray's efficiency / the machine's: the in-process sweep in single-spin units (timed
    # around it) over the Ray sweep in two-spin units (timed around it), halved. 1.0:
    # Ray gets from 2 workers what 2 plain processes get here; no overhead at all.
    ray_vs_machine = (local_s / one_s) / (2 * steady / two_s)
    return {
        "runs": len(runs),
        "machine_parallel_efficiency": round(efficiency, 2),
        "spin_one_s_around_in_process": [round(t, 2) for t in one],
        "spin_two_s_around_ray": [round(t, 2) for t in two],
        "load1_before_between_after": loads,
        "ray_vs_machine": round(ray_vs_machine, 3),
        "target_ray_within_10pct_of_machine": ray_vs_machine >= 0.9,
        "in_process_s": round(local_s, 1),
        "ray_2_workers_s": round(ray_s, 1),
        "ray_startup_s": round(on_ray.startup_s, 1),
        "ray_without_startup_s": round(steady, 1),
        "speedup": round(local_s / ray_s, 2),
        "speedup_without_startup": round(local_s / steady, 2),
        "run_mean_s": round(total / len(runs), 3),
        "run_median_s": round(runs[len(runs) // 2], 3),
        "run_max_s": round(runs[-1], 3),
        "run_sum_s": round(total, 1),
        "per_task_overhead_s": round(per_task_overhead, 3),
        "estimate_16x16_cores_s": round(est_16, 1),
        "store_bytes_identical": same,
    }


def _store_bytes(store: Path) -> dict[str, bytes]:
    cur = (store / "current").resolve()
    return {
        str(p.relative_to(cur)): p.read_bytes()
        for t in ("replay_runs", "replay_jobs", "replay_timeseries")
        for p in sorted((cur / t).rglob("*.parquet"))
    }


def kubernetes_synth_ingest() -> dict[str, object]:
    """Write ``KUBERNETES_PODS`` (default 200,000) synthetic pods as one kubectl List
    plus their nodes, and ingest both (``gpu-trace ingest kubernetes``).
    """
    from gpu_trace.synth.kubernetes import write

    pods = int(os.environ.get("KUBERNETES_PODS", "200000"))
    out = _synth_then_ingest(
        lambda tmp: write(tmp, jobs=pods, seed=0),
        lambda files, tmp: ingest(
            LOADERS["kubernetes"], files[0], tmp / "store", more=(files[1],), cluster="bench"
        ),
    )
    return {"pods": pods, **out, "pods_per_s": round(pods / out["ingest_s"])}


ACME_JOBS = 1_000_000
ACME_UTIL_NODES, ACME_UTIL_TICKS = 64, 2_000
"""A Seren-sized job trace (1.03 M jobs upstream) and one wide GPU file of 512 GPU
columns x 2,000 samples (8.3 h at 15 s; 1.02 M cells per metric file)."""


def acme_ingest() -> dict[str, object]:
    """Synthetic AcmeTrace: 1 M jobs across trace_seren/kalos.csv, then the utilization
    files of 64 nodes x 2,000 samples (GPU metrics: 512 columns), ingested separately.
    """
    import numpy as np

    from gpu_trace.synth import acme

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        trace = root / "jobs" / "data" / "job_trace"
        trace.mkdir(parents=True)
        rng = np.random.default_rng(0)
        start = time.perf_counter()
        for spec, n in zip(acme.SPECS, acme.split_jobs(ACME_JOBS), strict=True):
            acme.jobs_frame(spec, n, rng).write_csv(
                trace / f"trace_{spec.name}.csv", null_value="", quote_style="never"
            )
        util = acme.write_util(
            root / "util", acme.SEREN, nodes=ACME_UTIL_NODES, ticks=ACME_UTIL_TICKS, seed=0
        )
        synth_s = time.perf_counter() - start
        start = time.perf_counter()
        jobs = ingest(LOADERS["acme"], root / "jobs", root / "store")
        jobs_s = time.perf_counter() - start
        start = time.perf_counter()
        samples = ingest(LOADERS["acme"], util[0].parent, root / "store")
        util_s = time.perf_counter() - start
    return {
        "jobs": ACME_JOBS,
        "synth_s": round(synth_s, 2),
        "jobs_rows_read": jobs.totals[0],
        "jobs_quarantined": jobs.totals[2],
        "jobs_ingest_s": round(jobs_s, 2),
        "util_files": len(util),
        "util_records_read": samples.totals[0],
        "util_quarantined": samples.totals[2],
        "util_ingest_s": round(util_s, 2),
        "util_records_per_s": round(samples.totals[0] / util_s),
    }


def slurm_1m() -> dict[str, object]:
    """Write 1,000,000 synthetic ``sacct -X -P`` rows (``gpu-trace synth slurm``) and ingest
    them (jobs + per-host placements). Target: under 15 s and 2 GB.
    """
    jobs = 1_000_000
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "raw"
        raw.mkdir()
        synth_s, _ = _child(
            [
                sys.executable,
                "-c",
                "import sys; from pathlib import Path; from gpu_trace.synth.slurm import write; "
                f"write(Path(sys.argv[1]), jobs={jobs}, seed=0)",
                str(raw),
            ]
        )[1:]
        raw_mib = sum(f.stat().st_size for f in raw.iterdir()) / 2**20
        import resource

        cpu0 = resource.getrusage(resource.RUSAGE_SELF)
        start = time.perf_counter()
        report = ingest(LOADERS["slurm"], raw, Path(tmp) / "store", tz="Europe/Berlin")
        ingest_s = time.perf_counter() - start
        cpu1 = resource.getrusage(resource.RUSAGE_SELF)
        # CPU seconds are what a shared machine distorts least: wall time grows with
        # every other process on the cores, CPU time only with cache and SMT contention
        cpu_s = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
        load = os.getloadavg()[0]
    lines = {r.table: r for r in report.lines}
    return {
        "jobs": jobs,
        "raw_mib": round(raw_mib, 1),
        "synth_s": round(synth_s, 3),
        "jobs_written": lines["jobs"].rows_written,
        "placements_written": lines["placements"].rows_written,
        "quarantined": report.totals[2],
        "ingest_s": round(ingest_s, 3),
        "ingest_cpu_s": round(cpu_s, 2),
        "load_avg_1min": round(load, 1),
        "ingest_rows_per_s": round(jobs / ingest_s),
    }


INGEST_FAMILIES = {
    # family: (what `ingest` reads under the synth folder, extra `ingest` arguments)
    "helios": (".", []),
    "philly": ("cluster_job_log", []),
    "pai2020": (".", ["--tables", "job,task"]),
    "slurm": ("sacct_jobs.psv", ["--cluster", "c", "--tz", "Europe/Berlin"]),
}


def _cli_env() -> dict[str, str]:
    """This environment without ``GPU_TRACE_FSYNC`` (the ingest commits as the CLI does
    by default: fsynced, as a user's run would) and without ``PYTHONDONTWRITEBYTECODE``
    (an installed package has its bytecode; both sides then start from compiled code).
    """
    unset = {"GPU_TRACE_FSYNC", "PYTHONDONTWRITEBYTECODE"}
    return {k: v for k, v in os.environ.items() if k not in unset}


@dataclass(frozen=True)
class ChildRun:
    """One timed child process."""

    out: str
    wall_s: float
    cpu_s: float
    """User + system CPU seconds of the child, all threads: what a shared machine
    distorts least (wall time grows with every other process on the cores)."""
    rss_mib: float
    load: float
    """1-minute load average just before the child started."""


def _timed_child(args: list[str]) -> ChildRun:
    """:func:`_child` with the CLI's default environment, also measuring CPU time and the
    load average (the machine is shared: read timings beside it).
    """
    load = os.getloadavg()[0]
    with tempfile.TemporaryFile("w+") as out:
        start = time.perf_counter()
        proc = subprocess.Popen(args, stdout=out, env=_cli_env())
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        if os.waitstatus_to_exitcode(status) != 0:
            msg = f"{args} failed"
            raise SystemExit(msg)
        out.seek(0)
        cpu = usage.ru_utime + usage.ru_stime
        return ChildRun(out.read(), wall, cpu, usage.ru_maxrss / 1024, load)


def ingest_vs_duckdb(jobs: int) -> dict[str, object]:
    """For each of Helios, Philly, PAI 2020 and Slurm: ``gpu-trace synth FAMILY --jobs N``,
    then, in the same run on the same files, the plain DuckDB script
    (``bench/baseline_duckdb_ingest.py``) and ``gpu-trace ingest`` into a fresh store,
    each as its own process (wall time with interpreter start-up, own peak RSS, load
    average before it). ``INGEST_FAMILIES=helios,slurm`` selects families;
    ``INGEST_REPEAT=N`` runs each pair N times (script and ours alternating).
    """
    py = sys.executable
    chosen = os.environ.get("INGEST_FAMILIES", ",".join(INGEST_FAMILIES)).split(",")
    repeat = int(os.environ.get("INGEST_REPEAT", "1"))
    result: dict[str, object] = {"jobs": jobs}
    # bytecode compiled once, as an installed wheel has it, so no run pays for it
    subprocess.run([py, "-m", "compileall", "-q", "gpu_trace", "bench"], check=True)
    with tempfile.TemporaryDirectory() as tmp:
        for family in chosen:
            target, extra = INGEST_FAMILIES[family]
            raw = Path(tmp) / family
            synth = _timed_child(
                [py, "-m", "gpu_trace", "synth", family, "--jobs", str(jobs), "--out", str(raw)]
            )
            os.sync()  # the raw files at rest, as downloaded ones are
            result[f"{family}_synth_s"] = round(synth.wall_s, 2)
            for run in range(repeat):
                base = _timed_child(
                    [py, "-m", "bench.baseline_duckdb_ingest", family, str(raw), f"{tmp}/dd{run}"]
                )
                shutil.rmtree(f"{tmp}/dd{run}")
                store = Path(tmp) / f"store-{family}-{run}"
                ours = _timed_child(
                    [py, "-m", "gpu_trace", "-q", "ingest", family, str(raw / target), *extra,
                     "--store", str(store)]
                )  # fmt: skip
                shutil.rmtree(store)
                key = f"{family}_{run}" if repeat > 1 else family
                result[f"{key}_ours_s"] = round(ours.wall_s, 3)
                result[f"{key}_duckdb_s"] = round(base.wall_s, 3)
                result[f"{key}_speedup"] = round(base.wall_s / ours.wall_s, 2)
                result[f"{key}_ours_cpu_s"] = round(ours.cpu_s, 3)
                result[f"{key}_duckdb_cpu_s"] = round(base.cpu_s, 3)
                result[f"{key}_cpu_speedup"] = round(base.cpu_s / ours.cpu_s, 2)
                result[f"{key}_ours_rss_mib"] = round(ours.rss_mib, 1)
                result[f"{key}_duckdb_rss_mib"] = round(base.rss_mib, 1)
                result[f"{key}_load_before"] = [round(base.load, 2), round(ours.load, 2)]
                result[f"{key}_duckdb_rows"] = json.loads(base.out.strip().splitlines()[-1])[
                    "baseline_rows"
                ]
            shutil.rmtree(raw)
    result["load_avg_after"] = [round(v, 2) for v in os.getloadavg()]
    return result


def ingest_vs_duckdb_100k() -> dict[str, object]:
    """:func:`ingest_vs_duckdb` at 100,000 jobs per family."""
    return ingest_vs_duckdb(100_000)


def ingest_vs_duckdb_300k() -> dict[str, object]:
    """:func:`ingest_vs_duckdb` at 300,000 jobs per family."""
    return ingest_vs_duckdb(300_000)


def ingest_vs_duckdb_1m() -> dict[str, object]:
    """:func:`ingest_vs_duckdb` at 1,000,000 jobs per family."""
    return ingest_vs_duckdb(1_000_000)


SERVING_REQUESTS = 10_000_000


def serving_ingest_10m() -> dict[str, object]:
    """``gpu-trace synth burstgpt --jobs N`` (default 10 M requests, release v1.2; the
    ``SERVING_REQUESTS`` environment variable overrides N), then ``gpu-trace ingest
    burstgpt`` of the file into a fresh store, each in its own child with its wall, CPU
    and peak RSS: the issue's target is the ingest, < 60 s and < 4 GB.
    """
    n = int(os.environ.get("SERVING_REQUESTS", str(SERVING_REQUESTS)))
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        made = _timed_child(
            [sys.executable, "-m", "gpu_trace", "synth", "burstgpt", "--jobs", str(n),
             "--seed", "0", "--out", str(tmp / "raw")]
        )  # fmt: skip
        raw_mib = (tmp / "raw" / "BurstGPT_1.csv").stat().st_size / 2**20
        loaded = _timed_child(
            [sys.executable, "-m", "gpu_trace", "-q", "ingest", "burstgpt",
             str(tmp / "raw" / "BurstGPT_1.csv"), "--store", str(tmp / "store")]
        )  # fmt: skip
        with connect(tmp / "store") as con:
            ((written, failed),) = con.sql(
                "SELECT count(*), count(*) FILTER (status = 'failed') FROM requests"
            ).fetchall()
            ((quarantined,),) = con.sql("SELECT count(*) FROM quarantine").fetchall()
    return {
        "requests": n,
        "raw_mib": round(raw_mib, 1),
        "synth_s": round(made.wall_s, 2),
        "synth_cpu_s": round(made.cpu_s, 2),
        "synth_rss_mib": round(made.rss_mib),
        "ingest_s": round(loaded.wall_s, 2),
        "ingest_cpu_s": round(loaded.cpu_s, 2),
        "ingest_rss_mib": round(loaded.rss_mib),
        "load_avg_1min": round(loaded.load, 1),
        "rows_written": written,
        "failed_rows": failed,
        "quarantined": quarantined,
        "ingest_rows_per_s": round(n / loaded.wall_s),
    }


def _serving_analyses() -> list[str]:
    """The serving analyses: every declared analysis that reads ``requests``."""
    from gpu_trace import plugins

    return [p.name for p in plugins.analyses() if "requests" in p.needs] + ["fidelity"]


def serving_analyses_10m() -> dict[str, object]:
    """Every serving analysis (``gpu-trace analyze NAME``, default options, csv to a
    file) on 10 M synthetic BurstGPT requests (``gpu-trace synth burstgpt``, v1.2,
    ingested), each in its own child with its wall, CPU and peak RSS (target < 10 s
    each), and ``analyze fidelity``. ``SERVING_REQUESTS`` overrides N. A child's time
    includes the interpreter and import start-up (~0.7 s: the times at 20,000 requests).
    """
    n = int(os.environ.get("SERVING_REQUESTS", str(SERVING_REQUESTS)))
    py = sys.executable
    out: dict[str, object] = {"requests": n}
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        _timed_child(
            [py, "-m", "gpu_trace", "synth", "burstgpt", "--jobs", str(n), "--seed", "0",
             "--out", str(tmp / "raw")]
        )  # fmt: skip
        loaded = _timed_child(
            [py, "-m", "gpu_trace", "-q", "ingest", "burstgpt",
             str(tmp / "raw" / "BurstGPT_1.csv"), "--store", str(tmp / "store")]
        )  # fmt: skip
        shutil.rmtree(tmp / "raw")
        out["ingest_s"] = round(loaded.wall_s, 2)
        for analysis in _serving_analyses():
            run = _timed_child(
                [py, "-m", "gpu_trace", "analyze", analysis, "--store", str(tmp / "store"),
                 "-f", "csv", "--output", str(tmp / f"{analysis}.csv")]
            )  # fmt: skip
            key = analysis.replace("-", "_")
            out[f"{key}_s"] = round(run.wall_s, 2)
            out[f"{key}_cpu_s"] = round(run.cpu_s, 2)
            out[f"{key}_rss_mib"] = round(run.rss_mib)
            out[f"{key}_load"] = round(run.load, 1)
    return out


def serving_prefix_cache_mooncake() -> dict[str, object]:
    """The LRU hit-rate curve (12 capacities, auto) of the bundled Mooncake conversation
    trace: ``prefix_cache`` on the store's requests and blocks, in process, after the
    ingest (target < 5 s). The wall and CPU time cover the scan, the stack distances and
    every capacity.
    """
    from gpu_trace.analyses.inputs import Inputs
    from gpu_trace.analyses.serving_prefix import prefix_cache

    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "store"
        ingest(LOADERS["mooncake"], SAMPLES / "mooncake" / "conversation_trace.jsonl", store)
        inputs = Inputs.from_store(store, ["mooncake"])
        prefix_cache(inputs.requests.head(10), inputs.request_blocks.head(10))  # imports
        wall, cpu = time.perf_counter(), time.process_time()
        curve = prefix_cache(inputs.requests, inputs.request_blocks)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {
        "capacities": curve.height,
        "block_refs": int(curve["block_refs"][0]),
        "unique_blocks": int(curve["unique_blocks"][0]),
        "hit_rate_at_max": round(float(curve["hit_rate"][-1]), 4),
        "curve_s": round(wall, 3),
        "curve_cpu_s": round(cpu, 3),
        "load_avg_1min": round(os.getloadavg()[0], 1),
    }


SERVE_CONV = SAMPLES / "azure-llm" / "AzureLLMInferenceTrace_conv.csv"
SERVE_PAIRS = (("round-robin", "vllm"), ("least-tokens", "sarathi"))
"""(router, replica scheduler) of the conv-hour runs."""
SERVE_1M = {"requests": 1_000_000, "replicas": 16, "rate_per_s": 10.0}
"""The synthetic serving case: 16 llama-2-7b replicas on A100-80GB at 10 conv-like
requests/s (roofline) are busy ~84 % of their time (30,000 requests: 0.838), inside the
60-90 % the issue's "a rate the cluster sustains" asks for; at 16/s they are 96 % busy."""


def serve_conv(
    csv: Path = SERVE_CONV, replicas: int = 16, pairs: tuple[tuple[str, str], ...] = SERVE_PAIRS
) -> dict[str, object]:
    """The Azure 2023 conversation file ingested into a temporary store, then for each
    (router, scheduler) of ``pairs``: ``gpu-trace serve run --source azure-llm --dataset
    conv --replicas N --model llama-2-7b --gpu a100-80gb`` (roofline) in a child (wall,
    CPU, peak RSS of the whole command: start-up, store read, metrics and the store
    write included), and ``bench.serve_speed simulate`` in another: the ``simulate()``
    call alone, timed in that process.
    """
    py = sys.executable
    out: dict[str, object] = {"replicas": replicas}
    with tempfile.TemporaryDirectory() as name:
        store = Path(name) / "store"
        report = ingest(LOADERS["azure-llm"], csv, store)
        out["requests"] = report.totals[1]
        for router, batching in pairs:
            key = f"{batching}_{router.replace('-', '_')}"
            cli = _timed_child(
                [py, "-m", "gpu_trace", "-q", "serve", "run", "--store", str(store),
                 "--source", "azure-llm", "--dataset", "conv", "--replicas", str(replicas),
                 "--model", "llama-2-7b", "--gpu", "a100-80gb", "--router", router,
                 "--batching", batching, "--json"]
            )  # fmt: skip
            (summary,) = json.loads(cli.out)
            sim = _timed_child(
                [py, "-m", "bench.serve_speed", "simulate", str(store), "--router", router,
                 "--batching", batching, "--replicas", str(replicas)]
            )  # fmt: skip
            alone = json.loads(sim.out.strip().splitlines()[-1])
            out[f"{key}_run_s"] = round(cli.wall_s, 2)
            out[f"{key}_run_cpu_s"] = round(cli.cpu_s, 2)
            out[f"{key}_run_rss_mib"] = round(cli.rss_mib)
            out[f"{key}_run_load"] = round(cli.load, 1)
            out[f"{key}_simulate_s"] = alone["simulate_s"]
            out[f"{key}_simulate_cpu_s"] = alone["simulate_cpu_s"]
            out[f"{key}_simulate_rss_mib"] = alone["rss_peak_mib"]
            out[f"{key}_iterations"] = alone["iterations"]
            out[f"{key}_utilization"] = alone["utilization"]
            out[f"{key}_finished"] = summary["requests_finished"]
            out[f"{key}_ttft_p50_s"] = summary["ttft_p50_s"]
    out["load_avg_after"] = round(os.getloadavg()[0], 1)
    return out


def serve_azure_conv_hour_16() -> dict[str, object]:
    """:func:`serve_conv` on the bundled hour (19,366 requests), 16 replicas, vllm with
    round-robin and sarathi with least-tokens (target < 5 s).
    """
    return serve_conv()


def serve_synthetic(n: int, replicas: int, rate: float) -> dict[str, object]:
    """``bench.serve_speed synthetic``: ``n`` conv-like requests at ``rate``/s on
    ``replicas`` (roofline, vllm, round-robin) in a child; the ``simulate()`` call's
    wall and CPU seconds and the child's own peak RSS (``VmHWM``) measured there, and
    the whole child's (building the requests and start-up included) from ``wait4``;
    then, timed apart, what ``serve run`` does after the engine (summary metrics, the
    run's three tables written as Parquet).
    """
    with tempfile.TemporaryDirectory() as tmp:
        run = _timed_child(
            [sys.executable, "-m", "bench.serve_speed", "synthetic", "-n", str(n),
             "--replicas", str(replicas), "--rate", str(rate), "--score", tmp]
        )  # fmt: skip
    detail = json.loads(run.out.strip().splitlines()[-1])
    return {
        "replicas": replicas,
        "rate_per_s": rate,
        **detail,
        "process_s": round(run.wall_s, 2),
        "process_cpu_s": round(run.cpu_s, 2),
        "process_rss_mib": round(run.rss_mib),
        "load_avg_1min": round(run.load, 1),
    }


def serve_1m() -> dict[str, object]:
    """1,000,000 synthetic conv-like requests (:data:`SERVE_1M`; ``SERVE_REQUESTS=N``
    overrides the count) on 16 replicas (target: < 60 s and < 2 GB).
    """
    n = int(os.environ.get("SERVE_REQUESTS", str(SERVE_1M["requests"])))
    return serve_synthetic(n, int(SERVE_1M["replicas"]), SERVE_1M["rate_per_s"])


def serve_1m_store() -> dict[str, object]:
    """The store round trip around :func:`serve_1m`'s engine run, timed apart: the same
    million requests written as an Azure trace file (``AzureLLMInferenceTrace_conv.csv``:
    ``TIMESTAMP,ContextTokens,GeneratedTokens``), ``gpu-trace -q ingest azure-llm`` of it
    in a child (wall, CPU, peak RSS), then the window read back as ``serve run`` reads
    it (:func:`gpu_trace.serve.runs.load_requests`), in this process.
    """
    import polars as pl

    from bench.serve_speed import synthetic
    from gpu_trace.serve.runs import load_requests

    n = int(os.environ.get("SERVE_REQUESTS", str(SERVE_1M["requests"])))
    reqs = synthetic(n, SERVE_1M["rate_per_s"])
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        raw = tmp / "AzureLLMInferenceTrace_conv.csv"
        pl.DataFrame(
            {
                "us": (reqs.arrival_s * 1e6).round().astype("int64"),
                "ContextTokens": reqs.input_tokens,
                "GeneratedTokens": reqs.output_tokens,
            }
        ).select(
            (pl.datetime(2023, 11, 16) + pl.duration(microseconds=pl.col("us")))
            .dt.strftime("%Y-%m-%d %H:%M:%S%.6f")
            .alias("TIMESTAMP"),
            "ContextTokens",
            "GeneratedTokens",
        ).write_csv(raw)
        raw_mib = raw.stat().st_size / 2**20
        loaded = _timed_child(
            [sys.executable, "-m", "gpu_trace", "-q", "ingest", "azure-llm", str(raw),
             "--store", str(tmp / "store")]
        )  # fmt: skip
        wall, cpu = time.perf_counter(), time.process_time()
        window = load_requests(tmp / "store", "azure-llm", "conv", 0.0, None)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {
        "requests": n,
        "raw_mib": round(raw_mib, 1),
        "ingest_s": round(loaded.wall_s, 2),
        "ingest_cpu_s": round(loaded.cpu_s, 2),
        "ingest_rss_mib": round(loaded.rss_mib),
        "load_avg_1min": round(loaded.load, 1),
        "read_back": len(window.requests),
        "read_s": round(wall, 3),
        "read_cpu_s": round(cpu, 3),
    }


CASES: dict[str, Callable[[], dict[str, object]]] = {
    "kubernetes_synth_ingest": kubernetes_synth_ingest,
    "serving_ingest_10m": serving_ingest_10m,
    "serving_analyses_10m": serving_analyses_10m,
    "serving_prefix_cache_mooncake": serving_prefix_cache_mooncake,
    "serve_azure_conv_hour_16": serve_azure_conv_hour_16,
    "serve_1m": serve_1m,
    "serve_1m_store": serve_1m_store,
    "openb_ingest": openb_ingest,
    "openb_query": openb_query,
    "openb_synth_ingest": openb_synth_ingest,
    "acme_ingest": acme_ingest,
    "promrange_1m": promrange_1m,
    "helios_full": helios_full,
    "slurm_1m": slurm_1m,
    "nvml_sampler_overhead": nvml_sampler_overhead,
    "replay_fifo_1m": replay_fifo_1m,
    "replay_fifo_1m_one_node": replay_fifo_1m_one_node,
    "replay_fifo_1m_1gpu_nodes": replay_fifo_1m_1gpu_nodes,
    "replay_fifo_1m_multiresource": replay_fifo_1m_multiresource,
    "replay_fgd_openb_10seeds": replay_fgd_openb_10seeds,
    "replay_las_100k": replay_las_100k,
    "replay_tiresias_side_5k": replay_tiresias_side_5k,
    "replay_paisim_side_20k": replay_paisim_side_20k,
    "serve_vidur_side": serve_vidur_side,
    "replay_srtf_100k_2000gpus": replay_srtf_100k_2000gpus,
    "replay_tiresias_100k_2000gpus": replay_tiresias_100k_2000gpus,
    "replay_srtf_100k_philly": replay_srtf_100k_philly,
    "replay_tiresias_100k_philly": replay_tiresias_100k_philly,
    "replay_fifo_20k_8gpu_nodes": replay_fifo_20k_8gpu_nodes,
    "replay_fifo_20k_1gpu_nodes": replay_fifo_20k_1gpu_nodes,
    "replay_fifo_20k_one_node": replay_fifo_20k_one_node,
    "replay_fifo_20k_quarter_units": replay_fifo_20k_quarter_units,
    "replay_baseline_20k": replay_baseline_20k,
    "replay_faults_energy": replay_faults_energy,
    "philly_full": philly_full,
    "live_emulated_200": live_emulated_200,
    "live_cuda_8": live_cuda_8,
    "pai2020_full": pai2020_full,
    "analyses_helios": analyses_helios,
    "occupancy_artifact": occupancy_artifact,
    "live_cluster": live_cluster,
    "report_1m": report_1m,
    "replay_sweep_60": replay_sweep_60,
    "ingest_vs_duckdb_100k": ingest_vs_duckdb_100k,
    "ingest_vs_duckdb_300k": ingest_vs_duckdb_300k,
    "ingest_vs_duckdb_1m": ingest_vs_duckdb_1m,
}

if __name__ == "__main__":
    sys.stdout.write(json.dumps(CASES[sys.argv[1]]()) + "\n")
