"""A replay experiment is one unit: every policy of a comparison replays the same jobs,
the scorecard ranks only runs of one experiment, estimating policies declare it, oracle
variants are named, and exports / ids / validation tell the truth."""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

import polars as pl
import pytest
from typer.testing import CliRunner

from gpu_trace.cli import app
from gpu_trace.cli.replay import _live_id
from gpu_trace.replay import ReplayConfig, policy, replay
from gpu_trace.replay.cluster import parse_spec
from gpu_trace.replay.live.executor import LiveOptions
from gpu_trace.replay.policy import EngineView, PolicyBase
from gpu_trace.reports.replay_section import replay_section, resolve_runs
from gpu_trace.store.catalog import connect
from gpu_trace.store.scan import scan

POD_LIST = Path(__file__).resolve().parents[1] / "data/samples/openb/openb_pod_list_default.csv"
runner = CliRunner()


def pods() -> list[dict[str, str]]:
    with POD_LIST.open(newline="") as f:
        return list(csv.DictReader(f))


def cli(*args: object) -> Any:
    return runner.invoke(app, [str(a) for a in args])


def runs_of(store: Path) -> pl.DataFrame:
    return scan(store, "replay_runs").collect()


def jobs_of(store: Path) -> pl.DataFrame:
    return scan(store, "replay_jobs").collect()


def test_compare_replays_one_job_set_for_every_policy(store_copy: Path) -> None:
    # 64x8 at load 4 still queues hard (fifo waits ~39 h on average, backfill ~1.6 h):
    # the policies differ; at 32x8 backfill's scans of a longer queue took most of a minute.
    result = cli(
        "replay", "compare", "--source", "openb", "--store", store_copy, "--gpus", "64x8",
        "--load", "4", "--policies", "fifo,sjf,qssf,backfill", "--estimator", "model",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    # expected by hand from the raw pod list: with the training split asked for, qssf
    # trains on the first 25 % by creation time, so all four replay only the jobs from
    # the cut on
    rows = pods()
    created = sorted(int(p["creation_time"]) for p in rows)
    cut = created[int(len(rows) * 0.25)]
    training = sum(1 for t in created if t < cut)
    after = [p for p in rows if int(p["creation_time"]) >= cut]
    pending = sum(1 for p in after if p["scheduled_time"] == "")  # no run time
    cpu_only = sum(
        1
        for p in after
        if p["scheduled_time"] != "" and int(p["num_gpu"]) * int(p["gpu_milli"] or 1000) == 0
    )
    runs = runs_of(store_copy).sort("scheduler")
    assert runs["scheduler"].to_list() == ["backfill", "fifo", "qssf", "sjf"]
    assert set(runs["jobs_input"].to_list()) == {len(rows)} == {8152}
    assert set(runs["jobs_skipped"].to_list()) == {training + pending + cpu_only}
    assert runs["experiment_id"].n_unique() == 1
    reasons = json.loads(runs["jobs_skipped_reasons"][0])
    assert reasons == {
        "training split": training,
        "no run_s": pending,
        "cpu-only (gpus = 0)": cpu_only,
    }
    replayed = jobs_of(store_copy).filter(pl.col("outcome") != "skipped")
    per_run = replayed.group_by("run_id").agg(pl.col("job_id").sort())
    ids = per_run["job_id"].to_list()
    assert all(x == ids[0] for x in ids) and len(ids) == 4
    assert len(ids[0]) == len(rows) - training - pending - cpu_only
    # the experiment and its job counts are shown once, not per row
    exp = runs["experiment_id"][0]
    assert result.stderr.count(exp) == 1
    assert result.stderr.count("jobs in 8,152") == 1
    assert f"training split {training:,}" in result.stderr
    assert "jobs_skipped" not in result.stdout.splitlines()[0]


def test_oracle_variant_is_named_and_gets_true_durations(store_copy: Path) -> None:
    result = cli(
        "replay", "compare", "--source", "openb", "--store", store_copy, "--gpus", "32x8",
        "--policies", "qssf,qssf-oracle", "--window", "1970-02-01..1970-03-01",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    runs = runs_of(store_copy).sort("scheduler")
    assert runs["scheduler"].to_list() == ["qssf", "qssf-oracle"]
    assert runs["run_id"][1].startswith("qssf-oracle-consolidate-")
    assert runs["estimator_mae_s"][1] == 0.0 and runs["estimator_mae_s"][0] > 0
    assert runs["experiment_id"].n_unique() == 1
    jobs = jobs_of(store_copy).filter(
        (pl.col("run_id") == runs["run_id"][1]) & (pl.col("outcome") != "skipped")
    )
    assert (jobs["estimate_s"] == jobs["duration_s"]).all()


def test_scorecard_ranks_each_experiment_apart(store_copy: Path) -> None:
    for gpus in ("32x8", "512x8"):  # two clusters: two experiments
        result = cli(
            "replay", "compare", "--source", "openb", "--store", store_copy, "--gpus", gpus,
            "--policies", "fifo,sjf", "--window", "1970-02-01..1970-02-15",
        )  # fmt: skip
        assert result.exit_code == 0, result.stderr
    runs = runs_of(store_copy)
    assert runs["experiment_id"].n_unique() == 2
    con = connect(store_copy)
    html = replay_section(con, resolve_runs(con, ["all"])).html
    blocks = html.split("<h3>")[1:]
    assert len(blocks) == 2
    for block in blocks:
        exp = block.split("</h3>")[0]
        mine = runs.filter(pl.col("experiment_id") == exp)
        assert mine.height == 2
        assert "jobs in" in block and "cluster" in block
        # the starred JCT mean of this table is this experiment's own minimum
        best = float(mine["jct_mean_s"].min())  # type: ignore[arg-type]
        starred = re.findall(r"<td><b>([\d,.]+) ★</b></td>", block)
        assert f"{best:,.0f}" in starred
        for run_id in mine["run_id"]:
            assert run_id in block
        assert "no users" in block  # openb has no users: no fairness index
    assert runs["jain_slowdown"].null_count() == runs.height


def test_compare_checks_every_name_before_running(store_copy: Path) -> None:
    result = cli(
        "replay", "compare", "--source", "openb", "--store", store_copy, "--gpus", "32x8",
        "--policies", "fifo,sjf,fair",
    )  # fmt: skip
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "'fair'" in lines[0] and "did you mean 'fairshare'" in lines[0]
    assert not list((store_copy / "replay_runs").glob("source=openb/*.parquet"))
    bad_opt = cli(
        "replay", "compare", "--source", "openb", "--store", store_copy, "--gpus", "32x8",
        "--policies", "fifo,sjf", "--placements", "consolidate,fgd", "-o", "placement.bogus=1",
    )  # fmt: skip
    assert bad_opt.exit_code == 2 and "bogus" in bad_opt.stderr
    assert not list((store_copy / "replay_runs").glob("source=openb/*.parquet"))
    place = cli(
        "replay", "run", "--source", "openb", "--store", store_copy, "--placement", "best_fit",
    )  # fmt: skip
    assert place.exit_code == 2 and "did you mean 'best-fit'" in place.stderr


T0 = datetime(2020, 1, 1, tzinfo=UTC)


def frame(rows: list[tuple[float, float, str]]) -> pl.DataFrame:
    """(submit offset s, run_s, user) rows of 1-GPU jobs."""
    n = len(rows)
    return pl.DataFrame(
        {
            "job_id": [f"j{i}" for i in range(n)],
            "user": [r[2] for r in rows],
            "vc": ["vc0"] * n,
            "name": ["job"] * n,
            "submit_time": [T0 + timedelta(seconds=r[0]) for r in rows],
            "start_time": [None] * n,
            "run_s": [r[1] for r in rows],
            "gpus": [1.0] * n,
            "gpu_type": [None] * n,
        },
        schema_overrides={"start_time": pl.Datetime("us", "UTC"), "gpu_type": pl.String},
    )


@dataclass(frozen=True)
class _NoConfig:
    pass


class EstimateRecorder(PolicyBase):
    """FIFO that records the estimates it is given."""

    Config = _NoConfig
    needs_estimates: ClassVar[bool] = True
    seen: ClassVar[dict[int, float]] = {}

    def __init__(self, config: Any, engine: EngineView) -> None:
        super().__init__(config, engine)
        self.queue: list[int] = []

    def on_arrival(self, j: int) -> None:
        EstimateRecorder.seen[j] = float(self.e.estimate_s[j])
        self.queue.append(j)

    def schedule(self) -> None:
        while self.queue and self.e.try_start(self.queue[0]):
            self.queue.pop(0)


def test_registered_estimating_scheduler_gets_estimates() -> None:
    # --estimator model: 40 jobs of one user: the first 10 (25 %) train the estimator, all 100 s; the 30
    # replayed jobs run 500 s. Fewer than 200 training jobs -> the user's mean log
    # duration: expm1(log1p(100)) = 100 s for every replayed job, not their true 500 s.
    rows = [(float(i), 100.0 if i < 10 else 500.0, "alice") for i in range(40)]
    policy.register("scheduler", "recorder", EstimateRecorder)
    EstimateRecorder.seen.clear()
    try:
        result = replay(
            frame(rows),
            parse_spec("8x8"),
            ReplayConfig(source="t", scheduler="recorder", estimator="model"),
        )
    finally:
        policy.unregister("scheduler", "recorder")
    assert len(EstimateRecorder.seen) == 30
    assert all(v == pytest.approx(100.0) for v in EstimateRecorder.seen.values())
    row = result.runs.row(0, named=True)
    assert row["scheduler"] == "recorder"
    assert (row["jobs_input"], row["jobs_skipped"]) == (40, 10)
    assert json.loads(row["jobs_skipped_reasons"]) == {"training split": 10}
    assert row["estimator_mae_s"] == pytest.approx(400.0)


def test_jain_is_a_real_value_with_users() -> None:
    # one GPU, FIFO: alice's 100-s job runs first (bsld 1), bob's waits 100 s (JCT 200,
    # bsld 2): Jain = (1 + 2)^2 / (2 (1 + 4)) = 0.9
    rows = [(0.0, 100.0, "alice"), (0.0, 100.0, "bob")]
    result = replay(frame(rows), parse_spec("1x1"), ReplayConfig(source="t", scheduler="fifo"))
    assert result.runs["jain_slowdown"][0] == pytest.approx(0.9)
    alone = replay(
        frame([(0.0, 100.0, "alice"), (0.0, 100.0, "alice")]),
        parse_spec("1x1"),
        ReplayConfig(source="t", scheduler="fifo"),
    )
    assert alone.runs["jain_slowdown"][0] is None  # one user: no fairness to measure


def test_openb_export_keeps_cpu_memory_phase(store_copy: Path, tmp_path: Path) -> None:
    out = tmp_path / "pods.csv"
    result = cli("replay", "export", "--source", "openb", "--store", store_copy, "-f", "openb",
                 "--output", out)  # fmt: skip
    assert result.exit_code == 0, result.stderr
    with out.open(newline="") as f:
        written = {r["name"]: r for r in csv.DictReader(f)}
    raw = {p["name"]: p for p in pods()}
    # hand-checked against the raw pod list
    assert [written["openb-pod-0000"][k] for k in ("cpu_milli", "memory_mib", "pod_phase")] == [
        "12000",
        "16384",
        "Running",
    ]
    pod17 = written["openb-pod-0017"]  # 88000,327680,8,1000,,Burstable,Succeeded
    assert (pod17["cpu_milli"], pod17["memory_mib"], pod17["qos"], pod17["pod_phase"]) == (
        "88000",
        "327680",
        "Burstable",
        "Succeeded",
    )
    pod33 = written["openb-pod-0033"]  # 3152,5600,1,1000,,BE,Failed
    assert (pod33["cpu_milli"], pod33["memory_mib"], pod33["qos"], pod33["pod_phase"]) == (
        "3152",
        "5600",
        "BE",
        "Failed",
    )
    for name, row in written.items():
        for k in ("cpu_milli", "memory_mib", "qos", "pod_phase"):
            assert row[k] == raw[name][k], (name, k)
    pending = sum(1 for p in raw.values() if p["scheduled_time"] == "")
    assert len(written) == len(raw) - pending
    assert (
        f"wrote {len(written):,} of {len(raw):,} jobs to {out}; skipped {pending:,} "
        f"(no run_s (never started or end unknown) {pending:,})"
    ) in result.stderr.replace("\n", "")


def test_live_run_ids_cover_every_option() -> None:
    config = ReplayConfig(source="openb", scheduler="fifo", estimator="oracle")
    ids = {
        _live_id(config, LiveOptions(devices="emulated:8", jobs=10)),
        _live_id(config, LiveOptions(devices="emulated:8", jobs=20)),
        _live_id(config, LiveOptions(devices="emulated:8", jobs=10, time_scale=100.0)),
        _live_id(config, LiveOptions(devices="emulated:8", jobs=10, dataset="gpushare40")),
    }
    assert len(ids) == 4
    assert all(i.startswith("live-fifo-consolidate-") and i.endswith("-emulated8") for i in ids)
    same = _live_id(config, LiveOptions(devices="emulated:8", jobs=10))
    assert same in ids  # deterministic
    qssf = ReplayConfig(source="openb", scheduler="qssf", estimator="oracle")
    assert _live_id(qssf, LiveOptions()).startswith("live-qssf-oracle-consolidate-")
