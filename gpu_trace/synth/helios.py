"""Synthetic SenseTime Helios trace in the raw HeliosData layout.

Writes ``data/<Cluster>/cluster_log.csv`` (with the ``jobname`` column the released
files carry) and ``data/<Cluster>/cluster_gpu_number.csv`` for Venus, Earth, Saturn and
Uranus, so ``gpu-trace ingest helios OUT`` reads them exactly as it reads the unzipped
``data.zip``. Format: the trace's README, github.com/S-Lab-System-Group/HeliosData.

Calibration (per cluster, from ``helios_cluster_summary.csv``, HeliosArtifact ``analysis``):

- ``jobs`` is split across the clusters in the published proportions
  (246,708 / 872,886 / 1,753,078 / 490,309 of 3,362,981);
- share of GPU jobs (50.8 / 48.9 / 39.9 / 67.1 %); the rest are CPU jobs with
  ``gpu_num`` 0;
- mean GPUs per GPU job (6.736 / 2.101 / 4.01 / 4.038), median 1, powers of two;
- run time: lognormal with the published median and mean, separately for GPU and CPU
  jobs (GPU medians 204 / 234 / 124 / 280 s), capped at 60 days; median queue 0 with a
  zero-inflated lognormal tail matching the published mean queue;
- final state: the published completed / cancelled / failed rates, separately for GPU
  and CPU jobs; 4% of failures are TIMEOUT or NODE_FAIL, and Uranus carries the one
  ``SUSPENDED`` job of the real trace;
- submissions over 2020-04-01 .. 2020-09-28 with a day/night and weekday profile in
  local time (UTC+8); ``job_id`` grows with submission order within a cluster;
- users ``u`` + 4 and VCs ``vc`` + 3 base-62 characters (``uXBbc``, ``vcJkd``), users
  Zipf-active and bound to one VC; recurring job names per user;
- daily GPUs per VC in multiples of 8, growing in steps from the first to the last day
  (Venus 968 -> 1,080, Earth 784 -> 1,208, as in the real files); ``total`` is their sum.

Every column is drawn with numpy and written with polars, so millions of jobs take
seconds; the same seed writes the same bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import polars as pl

from gpu_trace.synth.common import diurnal_arrivals

TZ_OFFSET_S = 8 * 3600
"""Helios local time is China Standard Time (UTC+8, no DST)."""
START_S = 1_585_670_400
"""2020-04-01 00:00:00 local, as a Unix time."""
DAYS = 181
"""2020-04-01 .. 2020-09-28 inclusive."""
RUN_CAP_S = 60 * 86400
QUEUE_CAP_S = 20 * 86400
GPU_SIZES = 2 ** np.arange(1, 11)
"""GPU counts above 1 (2 .. 1,024); 1 GPU has its own fixed share."""
SINGLE_GPU_SHARE = 0.6
VCS_PER_CLUSTER = 25
NAMES_PER_USER = 8
_ALPHABET = np.array(list("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"))

HOURLY = (
    0.55, 0.45, 0.35, 0.3, 0.25, 0.25, 0.3, 0.4, 0.6, 0.9, 1.1, 1.2,
    1.0, 1.1, 1.3, 1.4, 1.4, 1.3, 1.1, 1.0, 1.1, 1.1, 0.9, 0.7,
)  # fmt: skip
"""Relative submission rate by local hour: quiet nights, busy afternoons."""
WEEKDAY = (1.0, 1.0, 1.0, 1.0, 0.95, 0.7, 0.65)
"""Relative submission rate Monday .. Sunday."""


def helios_arrivals(
    rng: np.random.Generator, n: int, *, start_s: int, days: float, utc_offset_s: int
) -> npt.NDArray[np.int64]:
    """``n`` sorted submission instants with the Helios day and week profile
    (``HOURLY``, ``WEEKDAY``) in local time ``utc_offset_s`` east of UTC.

    One place for the Helios submission clock, which the Slurm generator borrows for
    its own month and zone; the draws are exactly ``diurnal_arrivals``' so seeded output
    does not change.
    """
    return diurnal_arrivals(
        rng,
        n,
        start_s=start_s,
        days=days,
        hourly_weight=HOURLY,
        weekday_weight=WEEKDAY,
        utc_offset_s=utc_offset_s,
    )


@dataclass(frozen=True)
class ClusterSpec:
    """Published figures one synthetic cluster is calibrated to."""

    name: str
    jobs: int
    gpu_jobs: int
    gpus_per_gpu_job: float
    run_gpu: tuple[float, float]
    """(median, mean) run seconds of GPU jobs."""
    run_cpu: tuple[float, float]
    queue_gpu_mean: float
    queue_cpu_mean: float
    state_gpu: tuple[float, float, float]
    """completed, cancelled, failed shares of GPU jobs."""
    state_cpu: tuple[float, float, float]
    capacity: tuple[int, int]
    """Cluster GPUs on the first and the last day."""
    gpus: int
    """Published cluster size: the mean of the daily totals."""


CLUSTERS = (
    ClusterSpec(
        "Venus", 246_708, 125_303, 6.736, (204, 13_040.598), (21, 1_649.859), 1_253.288,
        773.009, (0.526, 0.272, 0.202), (0.86, 0.097, 0.043), (968, 1_080), 1_022,
    ),
    ClusterSpec(
        "Earth", 872_886, 427_148, 2.101, (234, 5_130.609), (1, 162.73), 319.483,
        3.281, (0.735, 0.136, 0.129), (0.885, 0.005, 0.11), (784, 1_208), 997,
    ),
    ClusterSpec(
        "Saturn", 1_753_078, 698_896, 4.01, (124, 5_252.927), (2, 619.062), 611.561,
        16.255, (0.582, 0.272, 0.145), (0.943, 0.019, 0.037), (1_960, 2_200), 2_080,
    ),
    ClusterSpec(
        "Uranus", 490_309, 329_117, 4.038, (280, 9_163.725), (32, 1_211.799), 1_949.182,
        119.704, (0.607, 0.201, 0.192), (0.791, 0.116, 0.092), (2_000, 2_240), 2_119,
    ),
)  # fmt: skip

LOG_COLUMNS = (
    "job_id", "user", "vc", "jobname", "gpu_num", "cpu_num", "node_num", "state",
    "submit_time", "start_time", "end_time", "duration", "queue",
)  # fmt: skip
"""Column order of the released ``cluster_log.csv`` (README order plus ``jobname``)."""

IntArray = npt.NDArray[np.int64]


def split_jobs(total: int) -> list[int]:
    """``total`` split across the clusters in the published proportions (largest
    remainder, so the parts always add up to ``total``).
    """
    weights = np.array([c.jobs for c in CLUSTERS], dtype=float)
    quota = total * weights / weights.sum()
    parts = np.floor(quota).astype(np.int64)
    order = np.argsort(-(quota - parts), kind="stable")
    parts[order[: total - int(parts.sum())]] += 1
    return [int(p) for p in parts]


def _capped_lognormal_mean(mu: float, sigma: float, cap: float) -> float:
    """E[min(X, cap)] for X ~ lognormal(mu, sigma)."""
    z = (math.log(cap) - mu) / sigma
    phi = 0.5 * (1 + math.erf((z - sigma) / math.sqrt(2)))
    tail = 0.5 * math.erfc(z / math.sqrt(2))
    return math.exp(mu + sigma * sigma / 2) * phi + cap * tail


def lognormal_sigma(median: float, mean: float, cap: float) -> float:
    """The sigma of a lognormal with this median whose mean, once capped at ``cap``,
    is ``mean`` (bisection; the capped mean grows with sigma over this range).
    """
    mu = math.log(median)
    lo, hi = 1e-6, 6.0
    for _ in range(80):
        mid = (lo + hi) / 2
        if _capped_lognormal_mean(mu, mid, cap) < mean:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def gpu_size_weights(mean: float) -> npt.NDArray[np.float64]:
    """Weights over ``GPU_SIZES`` (geometric in the exponent) so that GPU jobs have
    mean ``mean`` GPUs given the fixed single-GPU share.
    """
    target = (mean - SINGLE_GPU_SHARE) / (1 - SINGLE_GPU_SHARE)
    j = np.arange(1, len(GPU_SIZES) + 1, dtype=float)
    lo, hi = 1e-9, 1.0
    for _ in range(80):
        r = (lo + hi) / 2
        w = r**j
        if float((GPU_SIZES * w).sum() / w.sum()) < target:
            lo = r
        else:
            hi = r
    best: npt.NDArray[np.float64] = ((lo + hi) / 2) ** j
    return best / float(best.sum())


def _durations(rng: np.random.Generator, n: int, median: float, mean: float) -> IntArray:
    sigma = lognormal_sigma(median, mean, RUN_CAP_S)
    d = rng.lognormal(math.log(median), sigma, size=n)
    return np.rint(np.minimum(d, RUN_CAP_S)).astype(np.int64)


def _queues(rng: np.random.Generator, n: int, mean: float, zero_share: float) -> IntArray:
    """Zero-inflated queue delays: ``zero_share`` of jobs start at once (median 0), the
    rest wait a lognormal time whose overall mean is ``mean``.
    """
    cond_mean = mean / (1 - zero_share)
    median = min(60.0, cond_mean / 2)
    sigma = lognormal_sigma(median, cond_mean, QUEUE_CAP_S)
    wait = np.rint(np.minimum(rng.lognormal(math.log(median), sigma, size=n), QUEUE_CAP_S))
    return np.where(rng.random(n) < zero_share, 0, np.maximum(wait, 1)).astype(np.int64)


def _states(rng: np.random.Generator, n: int, shares: tuple[float, float, float]) -> IntArray:
    """Indices into ``STATES``: completed / cancelled / failed at the published shares,
    failures split 96% FAILED, 3% TIMEOUT, 1% NODE_FAIL.
    """
    completed, cancelled, failed = shares
    p = np.array([completed, cancelled, failed * 0.96, failed * 0.03, failed * 0.01])
    return rng.choice(len(p), size=n, p=p / p.sum()).astype(np.int64)


STATES = np.array(["COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "SUSPENDED"])


def hashes(rng: np.random.Generator, n: int, prefix: str, length: int) -> npt.NDArray[np.str_]:
    """``n`` distinct trace-style hashes: ``prefix`` + ``length`` base-62 characters."""
    out: npt.NDArray[np.str_] = np.array([], dtype=f"<U{len(prefix) + length}")
    while len(out) < n:
        draw = _ALPHABET[rng.integers(0, len(_ALPHABET), size=(2 * n, length))]
        words = np.char.add(prefix, draw.view(f"<U{length}").ravel())
        out = np.unique(np.concatenate([out, words]))
    return rng.permutation(out)[:n]


def capacity(
    rng: np.random.Generator, spec: ClusterSpec, vcs: npt.NDArray[np.str_]
) -> pl.DataFrame:
    """Daily GPUs per VC (multiples of 8) and their ``total``: the cluster grows in a
    few steps from the first-day to the last-day size; each VC has a fixed share of
    it while it exists (some VCs open late or close early, leaving zeros).
    """
    first, last = spec.capacity
    # Six growth steps centred so that the mean daily total is the published size.
    share = (spec.gpus - first) / (last - first)
    centre = DAYS * (1 - share)
    spread = min(1.0, (min(centre, DAYS - centre) - 6) / 75)
    offsets = spread * np.array([-75, -45, -15, 15, 45, 75]) + rng.integers(-5, 6, size=6)
    steps = np.sort(np.clip(np.rint(centre + offsets), 1, DAYS - 1))
    progress = np.searchsorted(steps, np.arange(DAYS), side="right") / len(steps)
    units = np.rint((first + (last - first) * progress) / 8).astype(np.int64)
    k = len(vcs)
    opens = np.where(rng.random(k) < 0.2, rng.integers(0, DAYS, size=k), 0)
    closes = np.where(rng.random(k) < 0.2, rng.integers(0, DAYS, size=k), DAYS)
    day = np.arange(DAYS)[:, None]
    active = (day >= np.minimum(opens, closes - 1)) & (day < np.maximum(closes, opens + 1))
    weights = rng.dirichlet(np.full(k, 1.2)) * active
    quota = units[:, None] * weights / weights.sum(axis=1, keepdims=True)
    alloc = np.floor(quota).astype(np.int64)
    left = units - alloc.sum(axis=1)
    rank = np.argsort(np.argsort(-(quota - alloc), axis=1, kind="stable"), axis=1)
    alloc += rank < left[:, None]
    dates = pl.date_range(
        pl.date(2020, 4, 1), pl.date(2020, 9, 28), interval="1d", eager=True
    ).dt.strftime("%Y-%m-%d")
    return pl.DataFrame(
        [dates.alias("date")]
        + [pl.Series(str(v), 8 * alloc[:, i]) for i, v in enumerate(vcs)]
        + [pl.Series("total", 8 * units)]
    )


def cluster_log(
    rng: np.random.Generator,
    spec: ClusterSpec,
    n: int,
    vcs: npt.NDArray[np.str_],
    vc_weight: npt.NDArray[np.float64],
    user_pool: npt.NDArray[np.str_],
) -> pl.DataFrame:
    """``n`` jobs of one cluster in submission order, columns as in the raw file."""
    submit = helios_arrivals(rng, n, start_s=START_S, days=DAYS, utc_offset_s=TZ_OFFSET_S)
    gpu_job = rng.random(n) < spec.gpu_jobs / spec.jobs
    n_gpu = int(gpu_job.sum())
    multi = rng.random(n_gpu) >= SINGLE_GPU_SHARE
    sizes = GPU_SIZES[
        rng.choice(len(GPU_SIZES), size=n_gpu, p=gpu_size_weights(spec.gpus_per_gpu_job))
    ]
    gpu_num = np.zeros(n, dtype=np.int64)
    gpu_num[gpu_job] = np.where(multi, sizes, 1)
    cpu_per_gpu = rng.choice(np.array([1, 2, 4, 8]), size=n, p=[0.3, 0.2, 0.3, 0.2])
    cpu_only = rng.choice(
        np.array([1, 2, 4, 8, 16, 32]), size=n, p=[0.4, 0.2, 0.2, 0.1, 0.07, 0.03]
    )
    cpu_num = np.where(gpu_job, gpu_num * cpu_per_gpu, cpu_only)
    node_num = np.maximum(1, -(-gpu_num // 8))

    duration = np.where(
        gpu_job, _durations(rng, n, *spec.run_gpu), _durations(rng, n, *spec.run_cpu)
    )
    queue = np.where(
        gpu_job,
        _queues(rng, n, spec.queue_gpu_mean, 0.62),
        _queues(rng, n, spec.queue_cpu_mean, 0.8),
    )
    state = np.where(gpu_job, _states(rng, n, spec.state_gpu), _states(rng, n, spec.state_cpu))
    if spec.name == "Uranus" and n:
        state[rng.integers(0, n)] = len(STATES) - 1

    n_users = int(np.clip(1.2 * math.sqrt(n), 3, len(user_pool)))
    users = rng.choice(user_pool, size=n_users, replace=False)
    user_vc = rng.choice(len(vcs), size=n_users, p=vc_weight)
    activity = 1.0 / np.arange(1, n_users + 1) ** 1.1
    who = rng.choice(n_users, size=n, p=activity / activity.sum())
    names = hashes(rng, n_users * NAMES_PER_USER, "", 6)
    habit = 1.0 / np.arange(1, NAMES_PER_USER + 1) ** 1.5
    which = who * NAMES_PER_USER + rng.choice(NAMES_PER_USER, size=n, p=habit / habit.sum())

    gaps = 1 + np.where(rng.random(n) < 0.02, rng.integers(1, 40, size=n), 0)
    job_id = int(rng.integers(100_000, 2_000_000)) + np.cumsum(gaps)
    local = submit + TZ_OFFSET_S
    return pl.DataFrame(
        {
            "job_id": job_id,
            "user": users[who],
            "vc": vcs[user_vc[who]],
            "jobname": names[which],
            "gpu_num": gpu_num,
            "cpu_num": cpu_num,
            "node_num": node_num,
            "state": STATES[state],
            "submit_time": local,
            "start_time": local + queue,
            "end_time": local + queue + duration,
            "duration": duration,
            "queue": queue,
        }
    ).with_columns(
        pl.from_epoch(pl.col(c), time_unit="s") for c in ("submit_time", "start_time", "end_time")
    )


def write(out: Path, *, jobs: int, seed: int) -> list[Path]:
    """Write the four clusters' ``cluster_log.csv`` and ``cluster_gpu_number.csv`` under
    ``out/data/<Cluster>/``; returns the files written.
    """
    rng = np.random.default_rng([seed, 0x4E11])
    vc_pool = hashes(rng, 60, "vc", 3)
    user_pool = hashes(rng, 4000, "u", 4)
    written: list[Path] = []
    for index, (spec, n) in enumerate(zip(CLUSTERS, split_jobs(jobs), strict=True)):
        crng = np.random.default_rng([seed, 0x4E11, index])
        folder = out / "data" / spec.name
        folder.mkdir(parents=True, exist_ok=True)
        vcs = crng.choice(vc_pool, size=VCS_PER_CLUSTER, replace=False)
        cap = capacity(crng, spec, vcs)
        share = cap.select(pl.exclude("date", "total")).sum().to_numpy().ravel().astype(float)
        vc_weight = (share + share.sum() * 0.01) / (share.sum() * (1 + 0.01 * len(share)))
        log = cluster_log(crng, spec, n, vcs, vc_weight, user_pool)
        log_file = folder / "cluster_log.csv"
        log.write_csv(log_file, datetime_format="%Y-%m-%d %H:%M:%S", line_terminator="\n")
        cap_file = folder / "cluster_gpu_number.csv"
        cap.write_csv(cap_file, line_terminator="\n")
        written += [log_file, cap_file]
    return written
