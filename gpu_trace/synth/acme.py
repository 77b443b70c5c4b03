"""Synthetic AcmeTrace (Seren and Kalos) in the release's raw layout.

Writes ``data/job_trace/trace_seren.csv``, ``data/job_trace/trace_kalos.csv`` (the
README's columns and value formats: Seren times ``+08:00``, integer ``queue``; Kalos
times ``+00:00``, ``queue`` as ``10.0``, ``duration`` = end - submit as in the README's
Kalos examples, ``fail_time`` on FAILED jobs and ``stop_time`` on CANCELLED ones) and
``data/utilization/<cluster>/<METRIC>.csv`` wide files (``Time`` every 15 s, one column
per node IP or per ``<ip>-<gpu>``), so ``gpu-trace ingest acme OUT/data`` reads them
exactly as it reads the release.

Calibration (``data/cluster_summary.csv`` of InternLM/AcmeTrace): jobs split
Seren / Kalos 1,031,550 : 62,413; GPU-job share 64.4 % / 31.9 %; GPU jobs' median run
122 s / 124 s with means 1,414 s / 1,260 s; median queue 1 s / 17 s with means
446 s / 214 s; GPUs per GPU job median 1, mean 5.68 / 26.77 (powers of two up to 1,024);
final states of GPU jobs completed / cancelled / failed 49.7 / 7.5 / 42.9 % and
54.1 / 6.2 / 39.7 %, of CPU jobs 85.8 / 3.9 / 10.2 % and 86.0 / 0.1 / 14.0 %. The
workload classes are the release's (Seren: Eval, Pretrain, SFT, MLLM, Debug, Other;
Kalos: Eval, Pretrain, Debug, Other) with weights that are **not** calibrated (the
release gives no per-class counts in a table). Utilization values are illustrative
(no published distribution is matched). Same seed, same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import numpy.typing as npt
import polars as pl

from gpu_trace.synth.common import choice, diurnal_arrivals, lognormal_seconds


@dataclass(frozen=True)
class Spec:
    """One cluster's calibration: job count, GPU-job share, run / queue time (median,
    mean) and final-state shares, the time span, the UTC offset its times are written
    in, workload classes and node count.
    """

    name: str
    jobs: int
    gpu_share: float
    gpus_mean: float
    run_gpu: tuple[float, float]
    run_cpu: tuple[float, float]
    queue_gpu: tuple[float, float]
    state_gpu: tuple[float, float, float]
    state_cpu: tuple[float, float, float]
    start: datetime
    days: int
    offset_h: int
    types: dict[object, float]
    nodes: int


SEREN = Spec(
    "seren", 1_031_550, 0.6435, 5.68, (122, 1_414.3), (14, 733.9), (1, 446.0),
    (0.497, 0.075, 0.429), (0.858, 0.039, 0.102), datetime(2023, 3, 1, tzinfo=UTC), 183, 8,
    {"Eval": 0.45, "Other": 0.2, "Debug": 0.15, "SFT": 0.1, "Pretrain": 0.05, "MLLM": 0.05},
    286,
)  # fmt: skip
KALOS = Spec(
    "kalos", 62_413, 0.319, 26.77, (124, 1_259.7), (22, 118.4), (17, 214.2),
    (0.541, 0.062, 0.397), (0.86, 0.001, 0.14), datetime(2023, 5, 1, tzinfo=UTC), 122, 0,
    {"Eval": 0.6, "Other": 0.25, "Debug": 0.1, "Pretrain": 0.05},
    302,
)  # fmt: skip
SPECS = (SEREN, KALOS)

SEREN_COLUMNS = (
    "job_id", "user", "node_num", "gpu_num", "cpu_num", "type", "state", "submit_time",
    "start_time", "end_time", "duration", "queue", "gpu_time",
)  # fmt: skip
KALOS_COLUMNS = (
    "job_id", "user", "node_num", "gpu_num", "cpu_num", "mem_per_pod_GB",
    "shared_mem_per_pod", "type", "state", "submit_time", "start_time", "end_time",
    "fail_time", "stop_time", "duration", "queue", "gpu_time",
)  # fmt: skip
STATES = ("COMPLETED", "CANCELLED", "FAILED")
GPU_SIZES = 2 ** np.arange(0, 11)
SAMPLE_S = 15
UTIL_METRICS = (
    "GPU_UTIL", "FB_USED", "POWER_USAGE", "SM_ACTIVE", "XID_ERRORS",
    "NODE_CPU_UTILIZATION", "NODE_MEMORY_UTILIZATION",
)  # fmt: skip

IntArray = npt.NDArray[np.int64]


def split_jobs(total: int) -> list[int]:
    """``total`` split Seren : Kalos in the published proportion (both get one)."""
    kalos = max(1, round(total * KALOS.jobs / (KALOS.jobs + SEREN.jobs))) if total > 1 else 0
    return [total - kalos, kalos]


def _mean_matched_sigma(median: float, mean: float) -> float:
    return float(np.sqrt(2 * np.log(mean / median))) if mean > median else 0.5


def _gpus(rng: np.random.Generator, n: int, mean: float) -> IntArray:
    """Median 1 (over half are 1 GPU), powers of two above, mean close to ``mean``."""
    single = rng.random(n) < 0.55
    # geometric over exponents 1..10 with a rate fitted so the mean is about right
    p = min(0.95, max(0.05, 1.6 / np.log2(max(mean, 2.0) * 2)))
    k = np.minimum(rng.geometric(p, size=n), 10)
    return np.where(single, 1, GPU_SIZES[k]).astype(np.int64)


def _fmt(seconds: IntArray, offset_h: int, present: npt.NDArray[np.bool_]) -> pl.Series:
    """Unix seconds as pandas writes zone-aware times (``2023-03-01 00:18:22+08:00``),
    null where not ``present``.
    """
    zone = "UTC" if offset_h == 0 else f"Etc/GMT{-offset_h:+d}"
    return pl.select(
        pl.when(pl.lit(pl.Series(present)))
        .then(
            pl.from_epoch(pl.lit(pl.Series(seconds)), "s")
            .dt.replace_time_zone("UTC")
            .dt.convert_time_zone(zone)
            .dt.strftime("%Y-%m-%d %H:%M:%S%:z")
        )
        .alias("t")
    ).to_series()


def jobs_frame(spec: Spec, n: int, rng: np.random.Generator) -> pl.DataFrame:
    """``n`` jobs of one cluster as the release writes them (text columns)."""
    start_s = int(spec.start.timestamp())
    submit = diurnal_arrivals(
        rng, n, start_s=start_s, days=spec.days, utc_offset_s=8 * 3600
    )  # both clusters' users are in Shanghai
    is_gpu = rng.random(n) < spec.gpu_share
    gpus = np.where(is_gpu, _gpus(rng, n, spec.gpus_mean), 0)
    nodes = np.maximum(1, (gpus + 7) // 8)
    cpus = np.where(is_gpu, gpus * 16, rng.choice([1, 4, 8, 16, 32], size=n))
    run = np.where(
        is_gpu,
        lognormal_seconds(
            rng, n, median_s=spec.run_gpu[0],
            sigma=_mean_matched_sigma(*spec.run_gpu), max_s=14 * 86400,
        ),
        lognormal_seconds(
            rng, n, median_s=spec.run_cpu[0],
            sigma=_mean_matched_sigma(*spec.run_cpu), max_s=7 * 86400,
        ),
    )  # fmt: skip
    waits = rng.random(n) < 0.5
    queue = np.where(
        waits,
        lognormal_seconds(rng, n, median_s=max(spec.queue_gpu[0] * 4, 4), sigma=2.5, max_s=86400),
        rng.integers(0, 2, size=n),
    ).astype(np.int64)
    p_gpu, p_cpu = np.asarray(spec.state_gpu), np.asarray(spec.state_cpu)
    u = rng.random(n)
    cum_gpu, cum_cpu = np.cumsum(p_gpu / p_gpu.sum()), np.cumsum(p_cpu / p_cpu.sum())
    state_idx = np.where(
        is_gpu, np.searchsorted(cum_gpu, u, side="right"), np.searchsorted(cum_cpu, u)
    ).clip(0, 2)
    state = np.asarray(STATES, dtype=object)[state_idx]
    start = submit + queue
    end = start + run
    users = rng.zipf(1.6, size=n) % 400
    prefix = "u" if spec is SEREN else "uf"
    kinds = choice(rng, n, spec.types)
    always = np.ones(n, dtype=bool)
    if spec is SEREN:
        ids = (5_778_432 + np.cumsum(rng.integers(1, 40, size=n))).astype(str).tolist()
        duration = run
        cols: dict[str, object] = {"queue": queue.astype(str).tolist()}
    else:
        alphabet = np.array(list("0123456789abcdefghijklmnopqrstuvwxyz"))
        raw = rng.integers(0, 36, size=(n, 13))
        ids = ["dlc" + "".join(row) for row in alphabet[raw]]
        duration = end - submit  # as the README's Kalos examples
        cols = {"queue": np.char.add(queue.astype(str), ".0").tolist()}
    out: dict[str, object] = {
        "job_id": list(ids),
        "user": [f"{prefix}{u:03x}" for u in users.tolist()],
        "node_num": nodes.astype(str).tolist(),
        "gpu_num": gpus.astype(str).tolist(),
        "cpu_num": cpus.astype(str).tolist(),
        "type": kinds.tolist(),
        "state": state.tolist(),
        "submit_time": _fmt(submit, spec.offset_h, always),
        "start_time": _fmt(start, spec.offset_h, always),
        "end_time": _fmt(end, spec.offset_h, always),
        "duration": duration.astype(str).tolist(),
        "gpu_time": pl.Series((gpus * duration).astype(np.float64)).cast(pl.String),
        **cols,
    }
    if spec is KALOS:
        out["mem_per_pod_GB"] = np.where(is_gpu, 1000, 50).astype(str).tolist()
        out["shared_mem_per_pod"] = np.where(is_gpu, "100.0", "10.0").tolist()
        out["fail_time"] = _fmt(end, 0, state == "FAILED")
        out["stop_time"] = _fmt(end, 0, state == "CANCELLED")
    columns = SEREN_COLUMNS if spec is SEREN else KALOS_COLUMNS
    return pl.DataFrame(
        [pl.Series(c, out[c], dtype=pl.String) for c in columns]  # type: ignore[arg-type]
    )


def util_frames(
    spec: Spec, *, nodes: int, ticks: int, rng: np.random.Generator, gpus_per_node: int = 8
) -> dict[str, pl.DataFrame]:
    """Wide utilization tables (``Time`` + one text column per device) for ``nodes``
    nodes over ``ticks`` 15-second samples from the cluster's first day.
    """
    base = "10.140" if spec is SEREN else "172.31"
    ips = [f"{base}.{1 + i // 250}.{10 + i % 250}" for i in range(nodes)]
    gpus = [f"{ip}-{g}" for ip in ips for g in range(gpus_per_node)]
    t0 = int(spec.start.timestamp())
    times = _fmt(t0 + SAMPLE_S * np.arange(ticks, dtype=np.int64), 8, np.ones(ticks, dtype=bool))
    busy = rng.random((ticks, len(gpus))) < 0.7
    offline = rng.random((ticks, len(gpus))) < 0.01

    def fmt(
        values: npt.NDArray[np.float64], decimals: int, mask: npt.NDArray[np.bool_]
    ) -> list[pl.Series]:
        text = np.char.mod(f"%.{decimals}f", values)
        text = np.where(mask, "", text)
        return [pl.Series(name, text[:, j]) for j, name in enumerate(names)]

    out: dict[str, pl.DataFrame] = {}
    names = gpus
    util = np.where(busy, rng.uniform(40, 100, busy.shape), rng.uniform(0, 5, busy.shape))
    sm = util * rng.uniform(0.3, 0.9, busy.shape)
    frames = {
        "GPU_UTIL": fmt(np.round(util).astype(np.float64), 1, offline),
        "FB_USED": fmt(np.where(busy, rng.uniform(20_000, 80_000, busy.shape), 3.0), 1, offline),
        "POWER_USAGE": fmt(60 + util * rng.uniform(2.5, 3.4, busy.shape), 1, offline),
        "SM_ACTIVE": fmt(sm, 3, offline),
        "XID_ERRORS": fmt(np.where(rng.random(busy.shape) < 0.0005, 43.0, 0.0), 1, offline),
    }
    names = ips
    node_busy = rng.random((ticks, nodes))
    frames["NODE_CPU_UTILIZATION"] = fmt(node_busy * 30, 3, np.zeros_like(node_busy, bool))
    frames["NODE_MEMORY_UTILIZATION"] = fmt(10 + node_busy * 40, 3, np.zeros_like(node_busy, bool))
    for metric, series in frames.items():
        out[metric] = pl.DataFrame([times.alias("Time"), *series])
    return out


def write_util(out: Path, spec: Spec, *, nodes: int, ticks: int, seed: int) -> list[Path]:
    """Only the utilization files of one cluster (benchmarks)."""
    rng = np.random.default_rng([seed, 1 if spec is SEREN else 2])
    folder = out / "data" / "utilization" / spec.name
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for metric, frame in util_frames(spec, nodes=nodes, ticks=ticks, rng=rng).items():
        path = folder / f"{metric}.csv"
        frame.write_csv(path, quote_style="never")
        paths.append(path)
    return paths


def write(out: Path, *, jobs: int, seed: int) -> list[Path]:
    """Write both job traces (``jobs`` split Seren : Kalos as published) and a small
    utilization set per cluster (4 nodes; ``min(max(jobs, 8), 240)`` samples).
    """
    rng = np.random.default_rng(seed)
    trace = out / "data" / "job_trace"
    trace.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    for spec, n in zip(SPECS, split_jobs(jobs), strict=True):
        if n == 0:
            continue
        path = trace / f"trace_{spec.name}.csv"
        jobs_frame(spec, n, rng).write_csv(path, null_value="", quote_style="never")
        paths.append(path)
    ticks = min(max(jobs, 8), 240)
    for spec in SPECS:
        paths += write_util(out, spec, nodes=4, ticks=ticks, seed=seed)
    return paths
