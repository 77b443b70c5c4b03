"""philly: synthetic-trace tests (the generator, its calibration, ingesting its output).

The Philly loader: a hand-written ``trace-data/`` fixture with hand-computed values,
the real machine list (checked with stdlib csv), the real marwage job rows converted
back to the raw job-log format (checked with stdlib json + zoneinfo), fuzzing of both
parsers, and the synthetic generator.
"""

from __future__ import annotations

import csv
import json
import re
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from statistics import median

import pytest

from gpu_trace.loaders import LOADERS, ingest
from gpu_trace.store.catalog import connect
from gpu_trace.synth.philly import write as synth_write

# --- synthetic generator ----------------------------------------------------------------


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("synth") / "trace-data"
    synth_write(out, jobs=8_000, seed=3, util_days=0.1)
    return out


def test_synth_is_deterministic(synth: Path, tmp_path: Path) -> None:
    again = tmp_path / "again"
    files = synth_write(again, jobs=8_000, seed=3, util_days=0.1)
    assert [f.name for f in files] == [
        "cluster_job_log",
        "cluster_machine_list",
        "cluster_gpu_util",
        "cluster_cpu_util",
        "cluster_mem_util",
    ]
    for f in files:
        assert f.read_bytes() == (synth / f.name).read_bytes()
    other = tmp_path / "other"
    synth_write(other, jobs=2_000, seed=4, util_days=0)
    assert (other / "cluster_job_log").read_bytes() != (synth / "cluster_job_log").read_bytes()
    assert not (other / "cluster_gpu_util").exists()


def test_synth_raw_format(synth: Path) -> None:
    log = json.loads((synth / "cluster_job_log").read_text())
    assert len(log) == 8_000
    assert list(log[0]) == ["status", "vc", "jobid", "attempts", "submitted_time", "user"]
    assert {j["status"] for j in log} == {"Pass", "Killed", "Failed"}
    assert len({j["vc"] for j in log}) == 15
    assert all(re.fullmatch(r"application_\d{13}_\d{4,}", j["jobid"]) for j in log)
    times = [t for j in log for a in j["attempts"] for t in (a["start_time"], a["end_time"])]
    assert "None" in times and None not in times
    assert all(t == "None" or re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", t) for t in times)
    assert min(j["submitted_time"] for j in log) == "2017-08-07 10:03:01"
    assert max(j["submitted_time"] for j in log) <= "2017-12-22 08:03:22"
    with (synth / "cluster_machine_list").open(newline="") as fh:
        text = fh.read()
    assert text.startswith("machineId, number of GPUs, single GPU mem\nm0,")
    listed = list(csv.DictReader(text.splitlines(), skipinitialspace=True))
    assert Counter(r["number of GPUs"] for r in listed) == {"2": 321, "8": 231}
    assert {r["single GPU mem"] for r in listed} == {"12GB", "24GB"}
    assert ", 12GB" in text
    gpu = (synth / "cluster_gpu_util").read_text().splitlines()
    assert gpu[0] == "time,machineId," + ",".join(f"gpu{k}_util" for k in range(8))
    assert len(gpu) - 1 == 552 * 144  # 0.1 day of minutes x every machine
    assert all(line.endswith(",") for line in gpu[1:])
    assert any(line.startswith("2017-11-05 01:10:00 PDT,") for line in gpu)
    assert any(line.startswith("2017-11-05 01:10:00 PST,") for line in gpu)
    assert ",NA," in gpu[1]
    assert (synth / "cluster_cpu_util").read_text().startswith("time,machine_id,cpu_util\n")
    mem = (synth / "cluster_mem_util").read_text()
    assert mem.startswith("time,machine_id,mem_total,mem_free\n")


def test_synth_calibration(synth: Path) -> None:
    log = json.loads((synth / "cluster_job_log").read_text())
    status = Counter(j["status"] for j in log)
    assert status["Pass"] / len(log) == pytest.approx(0.604, abs=0.02)
    assert status["Killed"] / len(log) == pytest.approx(0.090, abs=0.01)
    no_attempt = sum(1 for j in log if not j["attempts"]) / len(log)
    assert 0.04 < no_attempt < 0.06
    sizes = [sum(len(d["gpus"]) for d in j["attempts"][0]["detail"]) for j in log if j["attempts"]]
    assert median(sizes) == 1 and 1.6 < sum(sizes) / len(sizes) < 2.3 and max(sizes) <= 128
    retried = sum(1 for j in log if len(j["attempts"]) > 1) / len(log)
    assert 0.08 < retried < 0.16

    def t(s: str) -> datetime:
        return datetime.strptime(s, "%Y-%m-%d %H:%M:%S")

    runs = [
        (t(j["attempts"][-1]["end_time"]) - t(j["attempts"][0]["start_time"])).total_seconds()
        for j in log
        if j["attempts"]
        and "None" not in (j["attempts"][0]["start_time"], j["attempts"][-1]["end_time"])
    ]
    assert 500 < median(runs) < 1300
    assert sum(runs) / len(runs) > 8 * median(runs)  # heavy tail
    hours = Counter(t(j["submitted_time"]).hour for j in log)
    assert hours[14] > 2 * hours[3]  # diurnal arrivals
    # the shipped list is wrong on purpose: 8-GPU jobs on machines listed with 2 GPUs
    listed = {
        r["machineId"]: int(r["number of GPUs"])
        for r in csv.DictReader(
            (synth / "cluster_machine_list").read_text().splitlines(), skipinitialspace=True
        )
    }
    assert any(
        listed[d["ip"]] == 2 and len(d["gpus"]) == 8
        for j in log
        for a in j["attempts"]
        for d in a["detail"]
    )


def test_synth_ingests_cleanly(synth: Path, store: Path) -> None:
    report = ingest(LOADERS["philly"], synth, store)
    lines = {(r.file, r.table): r for r in report.lines}
    with (synth / "cluster_mem_util").open(newline="") as fh:
        zero = sum(1 for r in csv.DictReader(fh) if r["mem_total"] == "0.0")
    assert zero > 0
    for (file, _), r in lines.items():
        assert r.rows_quarantined == (zero if file == "cluster_mem_util" else 0), file
    assert lines[("cluster_job_log", "jobs")].rows_written == 8_000
    with (synth / "cluster_gpu_util").open(newline="") as fh:
        rows = list(csv.reader(fh))[1:]
    assert lines[("cluster_gpu_util", "gpu_samples")].rows_written == sum(
        1 for r in rows for v in r[2:10] if v != "NA"
    )
    con = connect(store)
    inferred = dict(
        con.execute(
            "SELECT dataset, sum(gpus) FROM machines WHERE source='philly' GROUP BY 1"
        ).fetchall()
    )
    assert inferred["machine_list"] == 2490
    assert inferred["inferred_util"] == 3205  # the hidden true inventory, recovered
    assert inferred["inferred_jobs"] <= 3205


@pytest.mark.slow
def test_synth_full_scale_is_fast(tmp_path: Path) -> None:
    start = datetime.now()
    synth_write(tmp_path, jobs=117_325, seed=0)
    assert datetime.now() - start < timedelta(seconds=60)
    assert len(json.loads((tmp_path / "cluster_job_log").read_text())) == 117_325
