"""pai2020: synthetic-trace tests (the generator, its calibration, ingesting its output).

The PAI 2020 loader on a hand-written fixture trace (every expected value below is
worked out by hand from the fixture lines, quoted in the comments), on the real machine
spec (checked against counts computed here with the csv module), under fuzzing, and on
the synthetic generator's output.
"""

from __future__ import annotations

import csv
from pathlib import Path

from gpu_trace.loaders import LOADERS, ingest
from gpu_trace.loaders.pai2020_files import SPECS
from gpu_trace.store.catalog import connect
from gpu_trace.synth.pai2020 import COLUMNS
from gpu_trace.synth.pai2020 import write as synth

# ---------------------------------------------------------------------------- synthetic


def test_synth_is_deterministic_and_raw_format(tmp_path: Path) -> None:
    a = synth(tmp_path / "a", jobs=300, seed=3)
    b = synth(tmp_path / "b", jobs=300, seed=3)
    assert [p.name for p in a] == [p.name for p in b]
    assert all(pa.read_bytes() == pb.read_bytes() for pa, pb in zip(a, b, strict=True))
    assert synth(tmp_path / "c", jobs=300, seed=4)[2].read_bytes() != a[2].read_bytes()
    for stem, cols in COLUMNS.items():
        header = (tmp_path / "a" / f"{stem}.header").read_text()
        assert header == ",".join(cols) + "\n" == ",".join(SPECS[_short(stem)].names) + "\n"
        with (tmp_path / "a" / f"{stem}.csv").open(newline="") as fh:
            rows = list(csv.reader(fh))
        assert rows and rows[0] != list(cols)  # no header line
        assert {len(r) for r in rows} == {len(cols)}
    jobs = list(csv.reader((tmp_path / "a" / "pai_job_table.csv").open(newline="")))
    assert all(r[4].endswith(".0") for r in jobs)  # 4550879.0 style
    assert {len(r[0]) for r in jobs} == {24} and {len(r[1]) for r in jobs} == {60}
    tasks = list(csv.reader((tmp_path / "a" / "pai_task_table.csv").open(newline="")))
    assert all(r[2].endswith(".0") for r in tasks)
    assert all(float(r[7]) * 1024 == round(float(r[7]) * 1024) for r in tasks)  # MiB / 1024
    metric = list(csv.reader((tmp_path / "a" / "pai_machine_metric.csv").open(newline="")))
    assert all(r[2].isdigit() and r[3].isdigit() for r in metric)  # integer times
    spec = list(csv.reader((tmp_path / "a" / "pai_machine_spec.csv").open(newline="")))
    assert len(spec) == 1897 and sum(int(r[4]) for r in spec) == 6742


def _short(stem: str) -> str:
    return next(s.short for s in SPECS.values() if s.stem == stem)


def test_synth_loads_and_matches_published_shape(tmp_path: Path) -> None:
    synth(tmp_path / "t", jobs=6000, seed=11)
    store = tmp_path / "store"
    report = ingest(LOADERS["pai2020"], tmp_path / "t", store)
    lines = {r.table + "/" + r.file: r for r in report.lines}
    for r in report.lines:
        if r.table != "placements":
            assert r.rows_quarantined == 0, r
    inst = lines["placements/pai_instance_table.csv"]
    assert 0 < inst.rows_quarantined < 0.02 * inst.rows_read  # duplicates and nameless rows
    con = connect(store)
    tasks, gpu_tasks, mean_gpu, median_gpu, max_gpu = con.execute(
        "SELECT count(*), count(*) FILTER (WHERE gpus_per_instance > 0), "
        "avg(gpus_per_instance) FILTER (WHERE gpus_per_instance > 0), "
        "median(gpus_per_instance) FILTER (WHERE gpus_per_instance > 0), max(gpus_per_instance) FROM tasks"
    ).fetchone()
    assert 1.15 < tasks / 6000 < 1.25  # 1,260,920 tasks for ~1.05 M jobs
    assert 0.78 < gpu_tasks / tasks < 0.86  # 1,037,085 / 1,260,920 = 82 %
    assert 0.6 < mean_gpu < 0.76 and median_gpu == 0.5 and max_gpu == 8.0  # 0.683 / 0.5 / 8
    median_run = con.execute(  # the owners' runtime_i: mean instance runtime per task
        "SELECT median(r) FROM (SELECT job_id, task, avg(epoch(end_time) - epoch(start_time)) r "
        "FROM placements WHERE status = 'completed' GROUP BY ALL)"
    ).fetchone()[0]
    assert 300 < median_run < 750  # 480.7 s
    # submissions peak in working hours, UTC+8
    hours = dict(
        con.execute(
            "SELECT hour(submit_time + INTERVAL 8 HOUR) h, count(*) FROM jobs GROUP BY 1"
        ).fetchall()
    )
    assert sum(hours[h] for h in range(9, 18)) > 2 * sum(hours[h] for h in range(0, 9))
    over = con.execute(
        "SELECT avg((u.value < t.cpus_per_instance)::INT) FROM usage u JOIN placements p "
        "ON u.instance = p.instance JOIN tasks t ON t.job_id = p.job_id AND t.task = p.task "
        "WHERE u.raw_field = 'cpu_usage'"
    ).fetchone()[0]
    assert 0.8 < over < 0.89  # 84.46 % of tasks request more CPU than they use
