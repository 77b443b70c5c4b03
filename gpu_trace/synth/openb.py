"""Synthetic Alibaba 2023 "openb" traces, byte-compatible with ``cluster-trace-gpu-v2023``.

Writes ``openb_pod_list_default.csv`` (the 11-column pod list) and the two node lists
``openb_node_list_all_node.csv`` / ``openb_node_list_gpu_node.csv`` exactly as upstream
formats them (the trace's README, github.com/alibaba/clusterdata cluster-trace-gpu-v2023): same headers, LF endings, empty
``gpu_spec`` (the default list never fills it), empty ``scheduled_time`` for ``Pending``
pods, empty ``model`` for CPU-only nodes, names ``openb-pod-0000`` zero-padded to at
least four digits, and integer seconds from the first pod's creation (pod 0 at 0).

Why it looks the way it does: the real ``default`` list is a *snapshot* of pods alive in
the last ~34 days of a 149-day window (alibaba/clusterdata#218). So almost every pod is
created inside ``[SNAPSHOT_START_S, TRACE_END_S)`` with the real day-by-day and
hour-of-day profile, a small share of long-lived ``Running`` pods go back to 0, and
``Running`` pods still alive at the end carry the end-of-trace sentinel
``TRACE_END_S`` (12,902,960) as their ``deletion_time``. The time window stays the real
one whatever ``jobs`` is: more pods means a denser snapshot, not a longer trace.

Pod shapes (``num_gpu, gpu_milli, cpu_milli, memory_mib``) are drawn *jointly* with
``qos`` and ``pod_phase`` from the real file's frequency table, so sharing shares,
CPU/memory per GPU class and e.g. the many failed best-effort 3.152-core pods keep their
correlations. The node lists are the real cluster's composition (the per-model and
per-GPU-count counts of section 4.4, with each node type's CPU and memory), in a
seeded order; the product never reads ``data/samples`` at run time.

Everything is vectorized numpy plus one polars ``write_csv`` per file; the same seed
gives the same bytes.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import numpy.typing as npt
import polars as pl

from gpu_trace.loaders.openb import POD_COLUMNS

POD_FILE = "openb_pod_list_default.csv"
ALL_NODE_FILE = "openb_node_list_all_node.csv"
GPU_NODE_FILE = "openb_node_list_gpu_node.csv"


TRACE_END_S = 12_902_960
"""The real file's maximum ``deletion_time``: the end-of-trace sentinel that ``Running``
pods still alive at the snapshot carry (34 of them in the real file)."""
SNAPSHOT_START_S = 9_964_972
"""The real file's earliest ``deletion_time``: pods deleted before it are not listed."""

LONG_LIVED_SHARE = 32 / 8152
"""Share of pods that are ``Running`` and were created before ``SNAPSHOT_START_S``
(32 of 8,152 in the real file; the oldest, ``openb-pod-0000``, at 0)."""
LONG_LIVED_AT_SENTINEL = 17 / 32
"""Of those, the share still alive at the end (``deletion_time == TRACE_END_S``); the
rest end uniformly inside the snapshot window."""

QOS = ("LS", "BE", "Burstable", "Guaranteed")
PHASES = ("Running", "Failed", "Pending", "Succeeded")

# Lifetimes (deletion - creation) and queueing delays (scheduled - creation), fitted per
# phase on the real default list's pods created inside the snapshot window (medians and
# the standard deviation of log-seconds). Queue: share of zero delays, then a lognormal.
LIFETIME_MEDIAN_S = {"Running": 874.0, "Failed": 243.0, "Pending": 94.0, "Succeeded": 3898.0}
LIFETIME_SIGMA = {"Running": 1.63, "Failed": 1.51, "Pending": 1.28, "Succeeded": 1.75}
QUEUE_ZERO_SHARE = {"Running": 0.144, "Failed": 0.617, "Pending": 1.0, "Succeeded": 0.75}
QUEUE_MEDIAN_S = {"Running": 6.0, "Failed": 2.0, "Pending": 1.0, "Succeeded": 1.0}
QUEUE_SIGMA = {"Running": 1.93, "Failed": 2.32, "Pending": 0.0, "Succeeded": 1.72}

FIRST_DAY = SNAPSHOT_START_S // 86_400
"""Absolute day index (seconds // 86,400) of the first entry in ``DAY_COUNTS``."""
DAY_COUNTS = (
    69, 163, 157, 247, 277, 260, 183, 220, 341, 258, 198, 210, 183, 139, 183, 350, 254, 256,
    232, 170, 103, 166, 237, 228, 236, 319, 221, 119, 223, 241, 212, 286, 413, 678, 87,
)  # fmt: skip
"""Pods created per day (days 115-149 of the trace) among the real file's 8,119 pods
created inside the snapshot window: the weekly dips and the final surge."""
HOUR_COUNTS = (
    511, 453, 362, 434, 425, 315, 290, 329, 242, 146, 222, 204,
    152, 149, 136, 270, 299, 424, 549, 465, 349, 430, 426, 537,
)  # fmt: skip
"""The same pods per hour of day (``creation_time % 86,400 // 3,600``)."""

# Joint frequency table of the real openb_pod_list_default.csv (8,152 pods; computed
# once with polars: group_by(num_gpu, gpu_milli, cpu_milli, memory_mib, qos, pod_phase)
# .len()). Columns: num_gpu gpu_milli cpu_milli memory_mib qos pod_phase pods.
_POD_TABLE = """
1  810   3152   5600 BE         Failed     957
1 1000  11300  49152 LS         Running    801
1 1000  11400  48128 LS         Running    492
1 1000   3152   5600 BE         Failed     463
0    0  12500  57344 LS         Running    347
0    0  32000  49152 BE         Running    281
1  470  11908  47104 LS         Running    255
1 1000  18708  64512 LS         Running    207
1  650  11908  47104 LS         Running    202
1  470   8000  30517 BE         Running    196
0    0   8000  30517 BE         Running    163
1  470   8000  30517 BE         Pending    162
1 1000   9810  41560 LS         Running    159
1 1000  15700  58368 LS         Running    136
1  470  11908  47104 LS         Pending    133
0    0  15400  51200 LS         Running    114
1 1000   4000  24576 LS         Succeeded  104
1 1000   8000  16384 LS         Running    100
1 1000  12000  16384 LS         Running     99
1 1000  11908  47104 BE         Pending     93
1  320   4000  22888 BE         Running     92
0    0  16500  51200 LS         Running     90
1 1000  12000  24576 LS         Running     83
1 1000  14200  58368 LS         Running     79
1 1000  24200  93184 LS         Failed      78
1 1000  16000  32768 LS         Running     77
1  550   4152  10600 BE         Failed      69
1  320   8000  30517 BE         Running     67
1  320   4000  15258 BE         Running     63
1  590   3152   5600 BE         Failed      61
1 1000  11908  47104 BE         Running     60
1  810   3152   5600 BE         Pending     59
1 1000  11300  49152 LS         Pending     56
1  230   4000  30517 BE         Running     55
1  160   4000  15258 BE         Running     51
1  460   6000   6144 LS         Running     51
1 1000  11400  77824 LS         Running     50
1 1000   8000  32768 LS         Running     49
1 1000  18708  64512 LS         Pending     48
1 1000  11900  77824 LS         Running     47
1  370   4152  10600 BE         Failed      45
1 1000  12000  15360 LS         Running     44
1  320   4000  30517 BE         Running     42
1 1000  11400  48128 LS         Pending     42
1 1000   4000  31250 LS         Running     40
1 1000   8200  33792 LS         Failed      38
1 1000   9810  41560 LS         Pending     36
1  650  11908  47104 LS         Pending     35
1 1000  15200  80896 LS         Failed      33
1 1000  16000  65536 LS         Running     33
1  810   3152   5600 BE         Running     31
1 1000  16000  32768 LS         Succeeded   31
1  230   4000  30517 BE         Pending     29
1  460   6000  12288 LS         Running     29
1 1000  12000  24576 Burstable  Succeeded   27
1 1000  16400 125952 LS         Running     27
1  810   4152  10600 BE         Failed      26
1  220   4000  15258 BE         Running     23
1  320   1000   2048 BE         Running     22
1 1000  12000  24576 Burstable  Failed      22
1 1000  15700  58368 LS         Pending     22
1  230   4000  22888 BE         Running     21
1  160   6000  22888 BE         Running     19
1  320   4000  22888 BE         Pending     19
1  220   8000  30517 BE         Running     18
1  460   6000  18432 LS         Running     18
1  480   4000  22888 BE         Running     18
0    0  12500  57344 LS         Pending     17
1 1000  11300  37888 LS         Running     16
8 1000  64200 263168 LS         Failed      16
1  320   4000  15258 BE         Pending     15
1 1000   1000   6144 LS         Running     15
1 1000  11400  77824 LS         Pending     15
1 1000  14200  58368 LS         Pending     14
1  590   3152   5600 BE         Pending     13
1  650   8000  30517 BE         Running     12
8 1000  88000 327680 Burstable  Failed      12
1  220   4000  22888 BE         Running     11
1  230   8000  30517 BE         Running     11
1 1000   7000  30000 Burstable  Running     11
0    0  11400  57344 LS         Running     10
1 1000  12000  24576 LS         Failed      10
0    0   8000  15625 LS         Running      9
1  460   6000   8192 LS         Running      9
4 1000  32200 132096 LS         Failed       9
0    0  16000  31250 LS         Running      8
1  220   4000  30517 BE         Running      8
1 1000  12000  32768 LS         Running      8
1 1000  15400  90112 LS         Running      8
1  110   4000  15258 BE         Running      7
1  230   4000  15258 BE         Running      7
1  230   8000  30517 BE         Pending      7
1  330   4000  22888 BE         Running      7
1  460   6000  16384 LS         Running      7
1 1000   3152   5600 BE         Pending      7
1 1000   4000  16384 LS         Running      7
1 1000  14900  73728 LS         Running      7
0    0  15400  51200 LS         Pending      6
1  110   4000  22888 BE         Pending      6
1  460   6000  23552 LS         Running      6
1  460  12000  18432 LS         Running      6
1 1000   6000  32768 LS         Running      6
1 1000   9400  52224 LS         Running      6
1 1000  12000  24576 LS         Succeeded    6
2 1000  16200  66560 LS         Failed       6
0    0   8000  31250 LS         Running      5
0    0  16500  51200 LS         Pending      5
1  230   4000  15258 BE         Pending      5
1  230   4000  22888 BE         Pending      5
1  320   8000  30517 BE         Pending      5
1  350   4000  22888 BE         Running      5
1 1000   2000  16384 LS         Running      5
1 1000   4000  32768 LS         Running      5
1 1000  12000  24576 Guaranteed Running      5
1 1000  24200  93184 LS         Running      5
1   50   6000  22888 BE         Running      4
1  110   6000  22888 BE         Running      4
1 1000  11900  77824 LS         Pending      4
1 1000  12000  47104 Burstable  Succeeded    4
8 1000  88000 327680 Burstable  Succeeded    4
0    0  32000  49152 BE         Pending      3
0    0  32000  62500 LS         Running      3
1   50   4000  15258 BE         Running      3
1  110   4000  22888 BE         Running      3
1  270   4152  10600 BE         Failed       3
1  810   4152  10600 BE         Running      3
1 1000   2000   8192 LS         Running      3
1 1000   8000  32768 BE         Failed       3
1 1000  11900  43008 LS         Running      3
1 1000  16000  49152 LS         Running      3
2 1000   6000  65536 LS         Running      3
2 1000  30200 160768 LS         Failed       3
4 1000  60200 320512 LS         Failed       3
8 1000 120000 737280 Burstable  Failed       3
0    0   8000   8192 LS         Succeeded    2
0    0   8000  15625 LS         Pending      2
0    0  12000  24576 LS         Succeeded    2
0    0  16000  32768 BE         Running      2
0    0  20000  65536 LS         Running      2
1  110   8000  30517 BE         Running      2
1  160   4000  15258 BE         Pending      2
1  320   6000  30517 BE         Running      2
1  460   8000  16000 LS         Running      2
1  470   4000  15258 BE         Running      2
1  470   8000  30517 LS         Running      2
1  550   4152  10600 BE         Running      2
1  650   1000   2048 BE         Running      2
1  650   4000  15258 BE         Running      2
1  810   4152  10600 BE         Pending      2
1 1000   8000  32768 BE         Pending      2
1 1000   8000  65536 LS         Running      2
1 1000   8200  33792 LS         Pending      2
1 1000  12000  16000 LS         Running      2
1 1000  12000  23552 LS         Running      2
1 1000  12000  24576 Burstable  Running      2
1 1000  12000  24576 LS         Pending      2
1 1000  12000  47104 Burstable  Failed       2
1 1000  12000  47104 Burstable  Running      2
1 1000  12000  49152 LS         Succeeded    2
1 1000  15200  80896 LS         Pending      2
1 1000  16000  16384 LS         Running      2
1 1000  16000  31250 LS         Running      2
2 1000  17400  43008 LS         Running      2
4 1000  32000 131072 LS         Failed       2
8 1000  64000 262144 LS         Succeeded    2
8 1000  88000 327680 Burstable  Running      2
8 1000 120200 640000 LS         Failed       2
0    0   8000  16384 Guaranteed Running      1
0    0   8000  16384 LS         Succeeded    1
0    0   8000  61035 BE         Running      1
0    0   8000  62500 LS         Running      1
0    0  10000  48828 LS         Running      1
0    0  11400  57344 LS         Pending      1
0    0  12000  24576 Burstable  Succeeded    1
0    0  12000  24576 LS         Pending      1
0    0  12500  65536 LS         Pending      1
0    0  12500  65536 LS         Running      1
0    0  16000  15625 LS         Running      1
0    0  16000  16384 LS         Running      1
0    0  16000  62500 LS         Running      1
0    0  16000  65536 LS         Running      1
0    0  32000  32768 LS         Failed       1
0    0  32000  32768 LS         Succeeded    1
0    0  32000  65536 LS         Running      1
1  110   4000  15258 LS         Running      1
1  110   4000  30517 BE         Running      1
1  140   1000   2048 BE         Running      1
1  160   4000  22888 BE         Pending      1
1  160   6000  22888 BE         Pending      1
1  220   4000  15258 BE         Pending      1
1  220   8000  30517 BE         Pending      1
1  270   4152  10600 BE         Running      1
1  290   1000   2048 BE         Running      1
1  320   4000  30517 BE         Pending      1
1  350   4000  22888 BE         Pending      1
1  370   2000   8192 LS         Pending      1
1  370   2000   8192 LS         Running      1
1  440   8000  30517 BE         Running      1
1  440   8000  30517 LS         Running      1
1  480   8000  30517 BE         Running      1
1  550   4152  10600 BE         Pending      1
1  590   3152   5600 BE         Running      1
1 1000   4000   4096 LS         Running      1
1 1000   4000   8192 LS         Running      1
1 1000   4000  16384 LS         Pending      1
1 1000   5000  10240 LS         Running      1
1 1000   6000   8192 Guaranteed Running      1
1 1000   6000  16384 LS         Running      1
1 1000   8000   8192 LS         Succeeded    1
1 1000   8000  15625 LS         Running      1
1 1000   8000  16384 Burstable  Failed       1
1 1000   8000  16384 Burstable  Pending      1
1 1000   8000  16384 Burstable  Succeeded    1
1 1000   8000  16384 LS         Pending      1
1 1000   8000  24576 LS         Running      1
1 1000   8000  32768 LS         Failed       1
1 1000   8200  33792 LS         Running      1
1 1000   8710  41560 BE         Running      1
1 1000  11300  23552 LS         Running      1
1 1000  11800  78848 LS         Running      1
1 1000  11900  43008 LS         Pending      1
1 1000  12000  12288 LS         Running      1
1 1000  12000  24576 Burstable  Pending      1
1 1000  12000  49152 Burstable  Succeeded    1
1 1000  12000  49152 LS         Failed       1
1 1000  14000      0 Burstable  Succeeded    1
1 1000  14900  73728 LS         Pending      1
1 1000  15200  80896 LS         Running      1
1 1000  15400  90112 LS         Pending      1
1 1000  15900  90112 LS         Running      1
1 1000  16000  24576 LS         Running      1
1 1000  16000  31250 LS         Pending      1
1 1000  16400  84992 LS         Pending      1
1 1000  16400  84992 LS         Running      1
1 1000  24200  93184 LS         Pending      1
2 1000  14000  60000 Burstable  Running      1
2 1000  16200  66560 LS         Pending      1
4 1000  32000 131072 Burstable  Running      1
8 1000  64000 262144 LS         Running      1
8 1000  64200 263168 LS         Running      1
8 1000  64200 263168 LS         Succeeded    1
"""

# The real cluster (openb_node_list_all_node.csv, 1,523 nodes): node types and counts.
# Per model they add up to the published G2 549, T4 404, P100 134, V100M16 55, G3 39,
# V100M32 30, A10 2 and 310 CPU-only nodes; per GPU count to 8x617, 2x518, 4x54, 1x24.
# Columns: model (- = CPU-only, written empty) gpu cpu_milli memory_mib nodes.
_NODE_TABLE = """
-       0  32000  262144 129
-       0  96000  524288  59
-       0  64000  524288  22
-       0  96000  393216  30
-       0 104000  524288  20
-       0  64000  131072   4
-       0  32000  131072  23
-       0 104000  786432   3
-       0  64000  262144   8
-       0  32000   65536  10
-       0 104000  196608   1
-       0  96000  786432   1
G2      8  96000  393216 549
T4      2 104000  524288 387
T4      4  96000  393216  17
P100    2  64000  262144  22
P100    2  16000  122880 107
P100    1   8000   61440   3
P100    2   8000   61440   2
V100M16 4  32000  131072  28
V100M16 1   8000   32768  19
V100M16 8  64000  262144   7
V100M16 8  82000  344064   1
G3      8 128000  786432  39
V100M32 8  96000  786432  21
V100M32 4  48000  376832   9
A10     1 128000 1048576   2
"""


def _table(text: str) -> list[list[str]]:
    return [line.split() for line in text.strip().splitlines()]


def _pod_table() -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """(shape columns as int64 [k, 4], qos/phase codes [k, 2], probabilities [k])."""
    rows = _table(_POD_TABLE)
    shape = np.array([[int(v) for v in r[:4]] for r in rows], dtype=np.int64)
    codes = np.array([[QOS.index(r[4]), PHASES.index(r[5])] for r in rows], dtype=np.int64)
    counts = np.array([int(r[6]) for r in rows], dtype=np.float64)
    return shape, codes, counts / counts.sum()


def _per_phase(values: dict[str, float]) -> npt.NDArray[np.float64]:
    return np.array([values[p] for p in PHASES], dtype=np.float64)


def _lognormal(
    rng: np.random.Generator,
    median: npt.NDArray[np.float64],
    sigma: npt.NDArray[np.float64],
) -> npt.NDArray[np.int64]:
    """Integer seconds (>= 0) with the given per-row median and log-sigma."""
    return np.floor(median * np.exp(sigma * rng.standard_normal(median.shape[0]))).astype(np.int64)


def _creation_times(rng: np.random.Generator, n: int) -> npt.NDArray[np.int64]:
    """Creation instants inside the snapshot window with the real per-day and
    hour-of-day profile: pick an hour slot by weight, then a uniform second in the part
    of that slot that lies inside the window.
    """
    first = SNAPSHOT_START_S // 3600
    hours = np.arange(first, (TRACE_END_S - 1) // 3600 + 1, dtype=np.int64)
    day = np.asarray(DAY_COUNTS, dtype=np.float64)[hours // 24 - FIRST_DAY]
    weight = day * np.asarray(HOUR_COUNTS, dtype=np.float64)[hours % 24]
    lo: npt.NDArray[np.int64] = np.maximum(hours * 3600, SNAPSHOT_START_S)
    hi: npt.NDArray[np.int64] = np.minimum(hours * 3600 + 3600, TRACE_END_S)
    weight *= (hi - lo) / 3600
    slot = rng.choice(hours.size, size=n, p=weight / weight.sum())
    offset = np.floor(rng.random(n) * (hi[slot] - lo[slot])).astype(np.int64)
    return lo[slot] + offset


def pods(n: int, rng: np.random.Generator) -> pl.DataFrame:
    """``n`` pods in the upstream column order and types (nullable ``scheduled_time``,
    all-null ``gpu_spec``), sorted by creation time and named in that order.
    """
    shape, codes, p = _pod_table()
    pick = rng.choice(p.size, size=n, p=p)
    qos, phase = codes[pick, 0], codes[pick, 1]
    running = phase == PHASES.index("Running")
    pending = phase == PHASES.index("Pending")

    life = _lognormal(rng, _per_phase(LIFETIME_MEDIAN_S)[phase], _per_phase(LIFETIME_SIGMA)[phase])
    queue = _lognormal(rng, _per_phase(QUEUE_MEDIAN_S)[phase], _per_phase(QUEUE_SIGMA)[phase])
    queue = np.where(rng.random(n) < _per_phase(QUEUE_ZERO_SHARE)[phase], 0, np.maximum(queue, 1))
    created = _creation_times(rng, n)
    # Pods still running at the end carry the sentinel; finished ones end before it.
    deleted = np.minimum(created + life, np.where(running, TRACE_END_S, TRACE_END_S - 1))

    # Long-lived pods: Running pods created before the snapshot (the oldest at 0).
    candidates = np.flatnonzero(running)
    n_long = min(candidates.size, max(1, round(n * LONG_LIVED_SHARE)))
    if n_long:
        old = rng.choice(candidates, size=n_long, replace=False)
        created[old] = rng.integers(0, SNAPSHOT_START_S, size=n_long)
        created[old[0]] = 0
        deleted[old] = np.where(
            rng.random(n_long) < LONG_LIVED_AT_SENTINEL,
            TRACE_END_S,
            rng.integers(SNAPSHOT_START_S, TRACE_END_S, size=n_long),
        )
    scheduled = created + np.minimum(queue, deleted - created)

    order = np.argsort(created, kind="stable")
    width = max(4, len(str(max(n - 1, 0))))
    frame = pl.DataFrame(
        {
            "cpu_milli": shape[pick, 2][order],
            "memory_mib": shape[pick, 3][order],
            "num_gpu": shape[pick, 0][order],
            "gpu_milli": shape[pick, 1][order],
            "qos": pl.Series(QOS).gather(qos[order]),
            "pod_phase": pl.Series(PHASES).gather(phase[order]),
            "creation_time": created[order],
            "deletion_time": deleted[order],
            "scheduled_time": scheduled[order],
            "pending": pending[order],
        }
    )
    return frame.select(
        pl.format("openb-pod-{}", pl.int_range(pl.len()).cast(pl.String).str.zfill(width)).alias(
            "name"
        ),
        "cpu_milli",
        "memory_mib",
        "num_gpu",
        "gpu_milli",
        pl.lit(None, dtype=pl.String).alias("gpu_spec"),
        "qos",
        "pod_phase",
        "creation_time",
        "deletion_time",
        pl.when(~pl.col("pending")).then(pl.col("scheduled_time")).alias("scheduled_time"),
    ).select(POD_COLUMNS)


def nodes(rng: np.random.Generator) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The all-node and GPU-node lists: the real cluster's node types in a seeded order;
    the GPU list keeps that order and renumbers ``sn`` from 0, as upstream does (so
    ``sn`` is not a key across the two files).
    """
    rows = _table(_NODE_TABLE)
    counts = np.array([int(r[4]) for r in rows], dtype=np.int64)
    kind = rng.permutation(np.repeat(np.arange(len(rows)), counts))
    table = pl.DataFrame(
        {
            "cpu_milli": [int(r[2]) for r in rows],
            "memory_mib": [int(r[3]) for r in rows],
            "gpu": [int(r[1]) for r in rows],
            "model": [None if r[0] == "-" else r[0] for r in rows],
        },
        schema={"cpu_milli": pl.Int64, "memory_mib": pl.Int64, "gpu": pl.Int64, "model": pl.String},
    )
    expanded = table[kind]
    gpu = expanded.filter(pl.col("gpu") > 0)

    def named(frame: pl.DataFrame) -> pl.DataFrame:
        sn = pl.format("openb-node-{}", pl.int_range(pl.len()).cast(pl.String).str.zfill(4))
        return frame.select(sn.alias("sn"), *table.columns)

    return named(expanded), named(gpu)


def _write(frame: pl.DataFrame, path: Path) -> Path:
    """Write a CSV the way upstream does (header, LF, empty field for null, no quotes
    needed) via a temporary file and an atomic rename.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    frame.write_csv(tmp, line_terminator="\n", null_value="")
    tmp.replace(path)
    return path


def write(out: Path, *, jobs: int, seed: int) -> list[Path]:
    """Write ``jobs`` pods and the cluster's node lists into ``out``; return the files.

    Pods and nodes use independent random streams derived from ``seed``, so the node
    lists do not change with ``jobs``.
    """
    if jobs < 1:
        msg = "jobs must be at least 1"
        raise ValueError(msg)
    out.mkdir(parents=True, exist_ok=True)
    key = seed % 2**64
    pod_rng = np.random.default_rng([key, 0])
    node_rng = np.random.default_rng([key, 1])
    all_nodes, gpu_nodes = nodes(node_rng)
    return [
        _write(pods(jobs, pod_rng), out / POD_FILE),
        _write(all_nodes, out / ALL_NODE_FILE),
        _write(gpu_nodes, out / GPU_NODE_FILE),
    ]
