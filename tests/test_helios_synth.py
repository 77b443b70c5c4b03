"""helios: synthetic-trace tests (the generator, its calibration, ingesting its output).

The Helios loader and synthetic generator.

Expected values are hand-computed from the fixtures (the three README rows of
HeliosData's README, a ``jobname`` variant, a file of bad rows) or computed
here with the standard library (csv, datetime, zipfile) from the real
``cluster_gpu_number.csv`` files and from the synthetic output, never read back from
our own results.
"""

from __future__ import annotations

import csv
import hashlib
import io
import itertools
import re
import statistics
from collections import Counter
from datetime import datetime
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from gpu_trace.loaders import ingest
from gpu_trace.store.catalog import connect
from gpu_trace.store.parquet import dataset_path
from gpu_trace.synth import get_writer
from gpu_trace.synth.helios import CLUSTERS, split_jobs
from tests.helios_common import HELIOS, LOG_HEADER, lines

# ---------------------------------------------------------------- synthetic generator

SYNTH_JOBS = 30_000


@pytest.fixture(scope="module")
def synth_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("synth")
    get_writer("helios")(out, jobs=SYNTH_JOBS, seed=7)
    return out


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


PUBLISHED = {
    # cluster: (jobs, GPU-job share, GPU-job completed / cancelled share, GPUs)
    "Venus": (246_708, 0.508, 0.526, 0.272, 1022),
    "Earth": (872_886, 0.489, 0.735, 0.136, 997),
    "Saturn": (1_753_078, 0.399, 0.582, 0.272, 2080),
    "Uranus": (490_309, 0.671, 0.607, 0.201, 2119),
}


def test_synth_split_follows_published_proportions() -> None:
    total = sum(p[0] for p in PUBLISHED.values())
    assert total == 3_362_981
    for n in (1, 7, SYNTH_JOBS, total):
        parts = split_jobs(n)
        assert sum(parts) == n
        for part, c in zip(parts, CLUSTERS, strict=True):
            assert abs(part - n * PUBLISHED[c.name][0] / total) < 1
    assert split_jobs(total) == [p[0] for p in PUBLISHED.values()]


def test_synth_is_calibrated(synth_dir: Path) -> None:
    gpu_runs: list[int] = []
    for cluster, (_, gpu_share, completed, cancelled, gpus) in PUBLISHED.items():
        folder = synth_dir / "data" / cluster
        with (folder / "cluster_log.csv").open(newline="") as fh:
            assert fh.readline() == LOG_HEADER + "\n"
        log = _csv(folder / "cluster_log.csv")
        gpu = [r for r in log if r["gpu_num"] != "0"]
        assert abs(len(gpu) / len(log) - gpu_share) < 0.03
        state = Counter(r["state"] for r in gpu)
        assert abs(state["COMPLETED"] / len(gpu) - completed) < 0.04
        assert abs(state["CANCELLED"] / len(gpu) - cancelled) < 0.04
        assert statistics.median(int(r["queue"]) for r in gpu) == 0
        assert statistics.median(int(r["gpu_num"]) for r in gpu) == 1
        assert all(int(r["gpu_num"]) & (int(r["gpu_num"]) - 1) == 0 for r in gpu)
        gpu_runs += [int(r["duration"]) for r in gpu]
        ids = [int(r["job_id"]) for r in log]
        assert all(a < b for a, b in itertools.pairwise(ids))
        fmt = "%Y-%m-%d %H:%M:%S"
        submit = [datetime.strptime(r["submit_time"], fmt) for r in log]
        assert all(a <= b for a, b in itertools.pairwise(submit))
        assert datetime(2020, 4, 1) <= submit[0] and submit[-1] < datetime(2020, 9, 29)
        for r in log[:: max(1, len(log) // 500)]:
            s, b, e = (
                datetime.strptime(r[k], fmt) for k in ("submit_time", "start_time", "end_time")
            )
            assert (b - s).total_seconds() == int(r["queue"])
            assert (e - b).total_seconds() == int(r["duration"])
        assert all(re.fullmatch(r"u[0-9A-Za-z]{4}", r["user"]) for r in log)
        hours = Counter(t.hour for t in submit)
        assert sum(hours[h] for h in range(2, 6)) < 0.5 * sum(hours[h] for h in range(14, 18))
        cap = _csv(folder / "cluster_gpu_number.csv")
        assert (
            len(cap) == 181 and cap[0]["date"] == "2020-04-01" and cap[-1]["date"] == "2020-09-28"
        )
        vcs = [k for k in cap[0] if k not in ("date", "total")]
        assert all(re.fullmatch(r"vc[0-9A-Za-z]{3}", v) for v in vcs)
        assert {r["vc"] for r in log} <= set(vcs)
        for row in cap:
            assert int(row["total"]) == sum(int(row[v]) for v in vcs)
            assert all(int(row[v]) % 8 == 0 for v in vcs)
        mean = statistics.mean(int(r["total"]) for r in cap)
        assert abs(mean - gpus) / gpus < 0.03
    assert 150 <= statistics.median(gpu_runs) <= 260  # published median GPU run: 206 s
    venus = _csv(synth_dir / "data" / "Venus" / "cluster_gpu_number.csv")
    assert (venus[0]["total"], venus[-1]["total"]) == ("968", "1080")
    earth = _csv(synth_dir / "data" / "Earth" / "cluster_gpu_number.csv")
    assert (earth[0]["total"], earth[-1]["total"]) == ("784", "1208")


def test_synth_is_deterministic(tmp_path: Path, synth_dir: Path) -> None:
    def digest(root: Path) -> str:
        h = hashlib.sha256()
        for f in sorted(root.rglob("*.csv")):
            h.update(f.relative_to(root).as_posix().encode() + f.read_bytes())
        return h.hexdigest()

    get_writer("helios")(tmp_path / "a", jobs=SYNTH_JOBS, seed=7)
    get_writer("helios")(tmp_path / "b", jobs=500, seed=8)
    assert digest(tmp_path / "a") == digest(synth_dir)
    assert digest(tmp_path / "b") != digest(synth_dir)


def test_synth_ingests_cleanly(synth_dir: Path, store: Path) -> None:
    report = ingest(HELIOS, synth_dir, store)
    expected = set()
    for cluster in PUBLISHED:
        folder = synth_dir / "data" / cluster
        n = len(_csv(folder / "cluster_log.csv"))
        cap = list(csv.reader(io.StringIO((folder / "cluster_gpu_number.csv").read_text())))
        slug = cluster.lower()
        expected |= {
            ("cluster_log.csv", "jobs", slug, n, n, 0),
            ("cluster_gpu_number.csv", "capacity", slug, 181 * 26, 181 * 26, 0),
        }
        assert len(cap[0]) == 27
    assert lines(report) == expected
    assert sum(r.rows_written for r in report.lines if r.table == "jobs") == SYNTH_JOBS
    for cluster in PUBLISHED:
        meta = pq.read_metadata(dataset_path(store, "jobs", "helios", cluster.lower())).metadata
        assert meta[b"gpu_trace.duration_mismatch_rows"] == b"0"
        assert meta[b"gpu_trace.queue_mismatch_rows"] == b"0"
    suspended = (
        connect(store)
        .execute("SELECT dataset, count(*) FROM jobs WHERE status = 'unknown' GROUP BY ALL")
        .fetchall()
    )
    assert suspended == [("uranus", 1)]


def test_pandas_baselines_build_the_same_table(tmp_path: Path, synth_dir: Path) -> None:
    """The benchmark's two pandas baselines (bench/baseline_helios.py) run and write
    every job of the synthetic trace: the owners' all-cluster CSV and the rewrite's
    Parquet files."""
    from bench.baseline_helios import owners, rewrite

    data = synth_dir / "data"
    n = sum(len(_csv(f)) for f in data.rglob("cluster_log.csv"))
    assert owners(data, tmp_path)["baseline_rows"] == n
    assert rewrite(data, tmp_path)["baseline_rows"] == n
    with (tmp_path / "all_cluster_log.csv").open() as fh:
        assert fh.readline().split(",")[:2] == ["job_id", "cluster"]
        assert sum(1 for _ in fh) == n
    assert sum(pq.read_metadata(f).num_rows for f in tmp_path.glob("*.parquet")) == n
