"""Variance that is real (issue 27): the sweep page never claims an interval where the
replicates did not vary, stars the best value within one load, shows durations and
shares in human units, and ``replay sweep --help`` prints its range syntax verbatim.

Expected values are worked by hand below (Student-t 95 % critical value for n = 3 is
4.3027, from any printed t table).
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
from typer.testing import CliRunner

from gpu_trace.cli import app
from gpu_trace.replay import sweep_stats as st
from gpu_trace.reports import sweep_section as ss
from gpu_trace.store.parquet import StoreTransaction
from gpu_trace.store.scan import scan

runner = CliRunner()
T0 = datetime(2020, 1, 1, tzinfo=UTC)


def _runs(values: dict[tuple[str, float], list[float]], metric: str = "jct_mean_s") -> pl.DataFrame:
    """One row per (placement, load, seed) with ``metric``."""
    rows = [
        {"placement": p, "load": load, "seed": s, metric: v}
        for (p, load), vs in values.items()
        for s, v in enumerate(vs)
    ]
    return pl.DataFrame(rows)


def test_identical_replicates_show_deterministic_not_a_zero_interval() -> None:
    # placement a: 100 s on every seed, b: 200 s on every seed -> no spread at all.
    frame = _runs({("a", 1.0): [100.0] * 3, ("b", 1.0): [200.0] * 3})
    by = ["placement"]
    stats = st.summarize(frame, by, ["jct_mean_s"])
    html = ss.scorecard_html(stats, by, ["jct_mean_s"])
    assert "1 min 40 s, deterministic (no spread)" in html
    assert "± 0" not in html and "n=3)" not in html
    # the paired comparison b - a = 100 s on every seed: no interval, no "excludes 0"
    paired = ss.paired_html(frame, by, ["jct_mean_s"])
    assert "excludes 0" not in paired and "± 0" not in paired
    assert "1 comparison(s) by placement left out: deterministic (no spread)" in paired


def test_replicates_with_spread_keep_interval_in_human_units() -> None:
    # 3600, 3660, 3720 s: mean 3660 s = 1 h 01 min; sd = 60; half = 4.3027 * 60 / sqrt(3)
    # = 149.05 s = 2 min 29 s. Allocation 0.50, 0.52, 0.54: mean 52.0 %, sd 0.02,
    # half = 4.3027 * 0.02 / sqrt(3) = 0.0497 -> 5.0 pp.
    frame = _runs({("a", 1.0): [3600.0, 3660.0, 3720.0]}).with_columns(
        pl.Series("alloc_mean_ratio", [0.50, 0.52, 0.54])
    )
    assert math.isclose(4.3027 * 60 / math.sqrt(3), 149.05, abs_tol=0.01)
    metrics = ["jct_mean_s", "alloc_mean_ratio"]
    html = ss.scorecard_html(st.summarize(frame, [], metrics), [], metrics)
    assert "1 h 01 min ± 2 min 29 s (n=3)" in html
    assert "52.0 % ± 5.0 pp (n=3)" in html
    assert "JCT mean (s)" not in html  # the values carry their unit


def test_best_value_is_starred_within_each_load_not_across_loads() -> None:
    # load 1.0: a = 100 s (best), b = 200 s; load 2.0: a = 900 s, b = 500 s (best).
    # Across loads only a at 1.0 would be starred; within each load, a@1.0 and b@2.0.
    frame = _runs(
        {
            ("a", 1.0): [100.0, 110.0, 120.0],
            ("b", 1.0): [200.0, 210.0, 220.0],
            ("a", 2.0): [900.0, 910.0, 920.0],
            ("b", 2.0): [500.0, 510.0, 520.0],
        }
    )
    by = ["placement", "load"]
    html = ss.scorecard_html(st.summarize(frame, by, ["jct_mean_s"]), by, ["jct_mean_s"])
    starred = re.findall(r"<tr><td>(\w)</td><td>([\d.]+)</td><td><b>", html)
    assert starred == [("a", "1.0"), ("b", "2.0")]


def test_header_fixed_fields_are_named_and_empty_ones_left_out() -> None:
    assert ss.fixed_text({}) == ""
    assert ss.fixed_text({"cluster": "32x8", "load": 1.2}) == " Fixed: cluster = 32x8; load = 1.2."


def test_sweep_help_shows_the_range_syntax_not_an_emoji() -> None:
    # Rich turns ":b:" into an emoji (U+1F171) in help text.
    result = runner.invoke(app, ["replay", "sweep", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "\U0001f171" not in result.stdout
    assert "START:STOP:STEP" in result.stdout
    assert "[fixed]" in result.stdout or "fixed and grid tables" in result.stdout


def _store(
    tmp_path: Path,
    rows: list[tuple[float, float, float]],
    source: str = "x",
    users: list[str] | None = None,
) -> Path:
    """A store whose ``source`` holds (submit offset s, run_s, gpus) completed jobs
    (ended at submit + run_s, as recorded)."""
    n = len(rows)
    jobs = pl.DataFrame(
        {
            "source": [source] * n,
            "dataset": ["d"] * n,
            "cluster": ["c"] * n,
            "job_id": [str(i) for i in range(n)],
            "user": users or [f"u{i % 2}" for i in range(n)],
            "vc": ["v"] * n,
            "gpus": [float(r[2]) for r in rows],
            "submit_time": [T0 + timedelta(seconds=r[0]) for r in rows],
            "start_time": [T0 + timedelta(seconds=r[0]) for r in rows],
            "end_time": [T0 + timedelta(seconds=r[0] + r[1]) for r in rows],
            "run_s": [float(r[1]) for r in rows],
            "status": ["completed"] * n,
            "time_basis": ["absolute"] * n,
        }
    )
    store = tmp_path / "store"
    with StoreTransaction(store) as tx:
        tx.write("jobs", jobs, source=source, dataset="d")
    return store


def _rows(stdout: str) -> list[list[str]]:
    """Table body rows of a ``--format csv`` print (every table, header rows included)."""
    return [line.split(",") for line in stdout.strip().splitlines()]


def test_compare_accepts_the_fault_and_slowdown_options_of_run(tmp_path: Path) -> None:
    # One 1-GPU node, one job of 1000 s submitted at 0. Scripted failure of node 0 at
    # 400 s, repaired 300 s later, no checkpoint: the 400 s are lost and the job reruns
    # 1000 s from 700 -> JCT 1700 s under every policy (docs/replay.md, Faults).
    store = _store(tmp_path, [(0, 1000, 1)])
    args = ["replay", "compare", "--source", "x", "--store", str(store), "--gpus", "1x1"]
    args += ["--policies", "fifo,sjf", "--faults", "fail=400@0,mttr=300", "--retries", "3"]
    args += ["--checkpoint", "0", "--restore-s", "0", "--multinode-slowdown", "1"]
    result = runner.invoke(app, [*args, "--format", "csv"])
    assert result.exit_code == 0, result.stderr
    table = _rows(result.stdout)
    head = table[0]
    jct = head.index("jct_mean_s")
    assert [float(r[jct]) for r in table[1:3]] == [1700.0, 1700.0]
    # the failure table is printed as `run` prints it: one failure per run
    fault_head = next(r for r in table if "node_failures" in r)
    k = fault_head.index("node_failures")
    start = table.index(fault_head)
    assert [r[k] for r in table[start + 1 : start + 3]] == ["1", "1"]


# (submit s, run_s, 1 GPU) and users: recorded ends j0 100, j1 60, j2 80, j3 130, j4 80,
# j5 210.
ONLINE_ROWS = [(0, 100, 1), (10, 50, 1), (50, 30, 1), (90, 40, 1), (60, 20, 1), (200, 10, 1)]
ONLINE_USERS = ["u0", "u1", "u0", "u0", "u1", "u2"]
# Each job's estimate = mean run_s of its user's jobs that ended strictly before its
# submission, else of all jobs that had ended, else 0:
#   j0 @0, j1 @10, j2 @50: nothing has ended -> 0
#   j3 @90 (u0): u0's j2 ended at 80 -> 30
#   j4 @60 (u1): u1's j1 ends at 60, not before 60; nothing else ended -> 0
#   j5 @200 (u2): no u2 job; all five others ended -> (100+50+30+40+20)/5 = 48
ONLINE_EXPECTED = [0.0, 0.0, 0.0, 30.0, 0.0, 48.0]


def test_online_estimates_use_only_jobs_finished_before_submission() -> None:
    from gpu_trace.replay import estimator as est

    subs = [T0 + timedelta(seconds=r[0]) for r in ONLINE_ROWS]
    known = pl.DataFrame(
        {
            "user": ONLINE_USERS,
            "submit_time": subs,
            "end_time": [T0 + timedelta(seconds=r[0] + r[1]) for r in ONLINE_ROWS],
            "run_s": [float(r[1]) for r in ONLINE_ROWS],
        }
    )
    pred, _ = est.online(known, known.select("user", "submit_time", "run_s"))
    assert pred.tolist() == ONLINE_EXPECTED


def test_adding_an_estimating_policy_keeps_every_policys_job_set(tmp_path: Path) -> None:
    store = _store(tmp_path, ONLINE_ROWS, users=ONLINE_USERS)
    base = ["replay", "compare", "--source", "x", "--store", str(store), "--gpus", "1x8"]
    result = runner.invoke(app, [*base, "--policies", "fifo,qssf", "--format", "csv"])
    assert result.exit_code == 0, result.stderr
    runs = scan(store, "replay_runs", ["x"]).collect()
    assert sorted(runs["jobs_skipped"].to_list()) == [0, 0]  # no training split
    jobs = scan(store, "replay_jobs", ["x"]).collect().filter(pl.col("outcome") != "skipped")
    per_run = jobs.group_by("run_id").agg(pl.col("job_id").sort()).sort("run_id")
    assert per_run["job_id"].to_list() == [[str(i) for i in range(6)]] * 2
    qssf_id = runs.filter(pl.col("scheduler") == "qssf")["run_id"][0]
    qssf = jobs.filter(pl.col("run_id") == qssf_id).sort(pl.col("job_id").cast(pl.Int64))
    assert qssf["estimate_s"].to_list() == ONLINE_EXPECTED
    # the training split stays available, asked for by name
    split = runner.invoke(
        app, [*base, "--policies", "fifo,qssf", "--estimator", "model", "--load", "1.0"]
    )
    assert split.exit_code == 0, split.stderr
    assert "training split" in split.stderr


def _summary(stdout: str) -> list[dict[str, str]]:
    """The last csv table of a ``--format csv`` print (the mean/spread summary)."""
    blocks = [b for b in stdout.strip().split("\n\n") if b.strip()]
    lines = blocks[-1].strip().splitlines() if len(blocks) > 1 else []
    if not lines:  # tables printed back to back: the summary starts at its header
        all_lines = stdout.strip().splitlines()
        start = max(i for i, line in enumerate(all_lines) if line.startswith("scheduler,"))
        lines = all_lines[start:]
    head = lines[0].split(",")
    return [dict(zip(head, line.split(","), strict=True)) for line in lines[1:]]


# One 1-GPU node; j0 (submit 0, 100 s) and j1 (submit 0, 10 s), input order j0, j1.
# FIFO: j0 runs 0-100, j1 100-110 -> JCT mean (100 + 110) / 2 = 105 s.
# SJF: j1 runs 0-10, j0 10-110 -> JCT mean (10 + 110) / 2 = 60 s.
TWO_JOBS = [(0, 100, 1), (0, 10, 1)]


def test_seeds_that_change_nothing_read_deterministic_not_zero_spread(tmp_path: Path) -> None:
    store = _store(tmp_path, TWO_JOBS)
    args = ["replay", "compare", "--source", "x", "--store", str(store), "--gpus", "1x1"]
    result = runner.invoke(app, [*args, "--policies", "fifo,sjf", "--seeds", "0-2", "-f", "csv"])
    assert result.exit_code == 0, result.stderr
    summary = {r["scheduler"]: r for r in _summary(result.stdout)}
    assert float(summary["fifo"]["jct_mean_s_mean"]) == 105.0
    assert float(summary["sjf"]["jct_mean_s_mean"]) == 60.0
    for row in summary.values():
        assert row["spread"] == "deterministic (no spread)"
        assert row["jct_mean_s_ci95"] == ""  # no interval, not +- 0


def test_replicates_bootstrap_the_jobs_and_give_a_real_interval(tmp_path: Path) -> None:
    # --replicates 3 = seeds 0, 1, 2, each drawing 2 jobs with replacement from
    # {j0, j1}. numpy's default_rng(seed).integers(0, 2, 2), sorted: seed 0 -> (j1, j1),
    # seeds 1 and 2 -> (j0, j1). FIFO JCT means: (j1, j1) both at 0 -> 10 and 20 -> 15 s;
    # (j0, j1) -> 105 s. Mean 75 s, sd = sqrt((60^2 + 30^2 + 30^2) / 2) = 51.96 s,
    # half-width = 4.3027 * 51.96 / sqrt(3) = 129.08 s.
    import numpy as np

    draws = [tuple(sorted(np.random.default_rng(s).integers(0, 2, 2).tolist())) for s in range(3)]
    assert draws == [(1, 1), (0, 1), (0, 1)]
    store = _store(tmp_path, TWO_JOBS)
    args = ["replay", "compare", "--source", "x", "--store", str(store), "--gpus", "1x1"]
    result = runner.invoke(app, [*args, "--policies", "fifo", "--replicates", "3", "-f", "csv"])
    assert result.exit_code == 0, result.stderr
    runs = scan(store, "replay_runs", ["x"]).collect().sort("seed")
    assert runs["jct_mean_s"].to_list() == [15.0, 105.0, 105.0]
    assert runs["experiment_id"].n_unique() == 3  # one experiment per replicate
    (row,) = _summary(result.stdout)
    assert row["spread"] == "95 % t interval"
    assert float(row["jct_mean_s_mean"]) == 75.0
    assert math.isclose(float(row["jct_mean_s_ci95"]), 129.08, abs_tol=0.01)
    # the same replicates again: the same draws (seeded), bit for bit
    again = runner.invoke(app, [*args, "--policies", "fifo", "--replicates", "3", "-f", "csv"])
    assert _summary(again.stdout) == _summary(result.stdout)


def test_resample_jitter_moves_arrivals_only_and_bad_values_fail(tmp_path: Path) -> None:
    from gpu_trace.replay.resample import resample

    jobs = pl.DataFrame(
        {
            "job_id": ["a", "b", "c"],
            "submit_time": [T0, T0 + timedelta(seconds=100), T0 + timedelta(seconds=900)],
            "run_s": [1.0, 2.0, 3.0],
        }
    )
    end = T0 + timedelta(seconds=500)  # c is outside the window: kept as it is
    out = resample(jobs, "jitter=60", 7, None, end).sort("job_id")
    assert out["run_s"].to_list() == [1.0, 2.0, 3.0]
    moved = [(t - T0).total_seconds() for t in out["submit_time"]]
    assert abs(moved[0] - 0) <= 60 and abs(moved[1] - 100) <= 60 and moved[2] == 900
    assert moved[:2] != [0.0, 100.0]
    assert resample(jobs, "jitter=60", 7, None, end).equals(
        resample(jobs, "jitter=60", 7, None, end)
    )
    boot = resample(jobs, "bootstrap", 3, None, end)
    assert boot.height == 3 and boot.filter(pl.col("job_id") == "c").height == 1
    store = _store(tmp_path, TWO_JOBS)
    args = ["replay", "run", "--source", "x", "--store", str(store), "--gpus", "1x1"]
    result = runner.invoke(app, [*args, "--resample", "shuffle"])
    assert result.exit_code == 2
    assert "use bootstrap or jitter=D" in result.stderr and "Traceback" not in result.stderr


def test_a_cluster_too_large_warns_no_wait_and_same_schedule(tmp_path: Path) -> None:
    # TWO_JOBS on two 1-GPU nodes: both start at 0 under FIFO and SJF alike (j0 0-100,
    # j1 0-10), so no job waits and both runs are the same schedule.
    store = _store(tmp_path, TWO_JOBS)
    args = ["replay", "compare", "--source", "x", "--store", str(store), "--policies", "fifo,sjf"]
    big = runner.invoke(app, [*args, "--gpus", "2x1"])
    assert big.exit_code == 0, big.stderr
    assert "warning: no job waited in any of the 2 run(s)" in big.stderr
    assert "warning: all 2 runs produced the same schedule" in big.stderr
    # on one node FIFO runs j1 at 100, SJF runs j0 at 10: jobs wait, schedules differ
    small = runner.invoke(app, [*args, "--gpus", "1x1"])
    assert small.exit_code == 0, small.stderr
    assert "warning" not in small.stderr
    # the report says the same under the big cluster's experiment, and only there
    site = tmp_path / "site"
    report = runner.invoke(
        app, ["report", "--store", str(store), "--out", str(site), "--replay", "all"]
    )
    assert report.exit_code == 0, report.stderr
    html = (site / "index.html").read_text("utf-8")
    assert html.count("<b>Warning:</b> no job waited") == 1
    assert html.count("<b>Warning:</b> all 2 runs produced the same schedule") == 1


def test_a_preempted_job_waited_so_no_no_wait_warning(tmp_path: Path) -> None:
    # One 1-GPU node, SRTF (shortest remaining time first, preemptive): j0 (100 s) runs
    # from 0; j1 (10 s) arrives at 5 with less left than j0's 95 s, so it starts at
    # once and j0 waits from 5 to 15. Every first start is on arrival, yet j0 waited:
    # the "no job waited" warning (cluster too large) must not be printed.
    store = _store(tmp_path, [(0, 100, 1), (5, 10, 1)])
    args = ["replay", "run", "--source", "x", "--store", str(store), "--gpus", "1x1"]
    result = runner.invoke(app, [*args, "--policy", "srtf"])
    assert result.exit_code == 0, result.stderr
    jobs = scan(store, "replay_jobs", ["x"]).collect().sort("job_id")
    assert jobs["queue_s"].to_list() == [0.0, 0.0]
    assert jobs["finish_time_s"].to_list() == [110.0, 15.0]
    assert "no job waited" not in result.stderr


def test_jobs_dropped_as_unfit_are_counted_with_the_reason(tmp_path: Path) -> None:
    # a 2-GPU job on one 1-GPU node can never run: dropped, the 1-GPU job runs.
    store = _store(tmp_path, [(0, 100, 2), (0, 10, 1)])
    args = ["replay", "run", "--source", "x", "--store", str(store), "--gpus", "1x1"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.stderr
    jobs = scan(store, "replay_jobs", ["x"]).collect()
    (reason,) = jobs.filter(pl.col("outcome") == "rejected")["reason"].to_list()
    assert f"warning: 1 job(s) dropped as unfit ({reason}: 1) in every run" in result.stderr


def test_fidelity_ordering_fails_on_a_tie_where_published_is_strict(tmp_path: Path) -> None:
    # The PAI simulator's published mean JCTs are strictly ordered (SJF 5,988.61 s <
    # FIFO 7,918 s). Two jobs (100 s and 10 s) on the check's 6,500 x 8 GPUs both start
    # on arrival under either policy: JCT mean (100 + 10) / 2 = 55 s for both. A tie is
    # not the published "SJF < FIFO": the check must say OUT, and why.
    store = _store(tmp_path, TWO_JOBS, source="pai2020")
    args = ["replay", "fidelity", "--store", str(store), "--checks", "pai-fifo-sjf", "-f", "csv"]
    result = runner.invoke(app, args)
    assert result.exit_code == 1
    rows = {r["policy"]: r for r in _summary_rows(result.stdout)}
    assert float(rows["sjf"]["ours"]) == 55.0 == float(rows["fifo"]["ours"])
    assert rows["sjf"]["status"] == "OUT"
    assert "tie where the published ordering is strict: sjf = fifo" in rows["sjf"]["note"]
    assert "no job waited" in rows["sjf"]["note"]
    assert "out of tolerance: pai-fifo-sjf/sjf" in result.stderr


def _summary_rows(stdout: str) -> list[dict[str, str]]:
    """Rows of a one-table csv print (fields may be quoted)."""
    import csv
    import io

    return list(csv.DictReader(io.StringIO(stdout)))


def test_a_config_without_an_estimator_choice_replays_every_job() -> None:
    # A sweep point or API config that names qssf but no estimator must not hold out a
    # training share that the fifo point of the same grid replays: the default is online.
    from gpu_trace.replay.cluster import parse_spec
    from gpu_trace.replay.config import ReplayConfig
    from gpu_trace.replay.simulate import replay

    jobs = pl.DataFrame(
        {
            "job_id": [str(i) for i in range(len(ONLINE_ROWS))],
            "user": ONLINE_USERS,
            "vc": ["v"] * len(ONLINE_ROWS),
            "name": ["n"] * len(ONLINE_ROWS),
            "submit_time": [T0 + timedelta(seconds=r[0]) for r in ONLINE_ROWS],
            "end_time": [T0 + timedelta(seconds=r[0] + r[1]) for r in ONLINE_ROWS],
            "run_s": [float(r[1]) for r in ONLINE_ROWS],
            "gpus": [1.0] * len(ONLINE_ROWS),
        }
    )
    runs = [
        replay(jobs, parse_spec("1x8"), ReplayConfig(source="t", scheduler=p)).runs
        for p in ("fifo", "qssf")
    ]
    assert [r["jobs_skipped"][0] for r in runs] == [0, 0]
    assert runs[0]["experiment_id"][0] == runs[1]["experiment_id"][0]


def test_sweep_page_warns_about_runs_without_waits_and_flat_replicates() -> None:
    # 6 runs: in two of them no job waited (queue mean 0). Configuration a has three
    # identical JCTs (deterministic), b spreads: 1 of 2 cells with n > 1 is flat.
    frame = _runs({("a", 1.0): [100.0] * 3, ("b", 1.0): [200.0, 210.0, 220.0]}).with_columns(
        pl.Series("queue_mean_s", [0.0, 0.0, 5.0, 5.0, 6.0, 7.0])
    )
    stats = st.summarize(frame, ["placement"], ["jct_mean_s"])
    html = ss.sweep_warnings(frame, stats)
    assert "in 2 of 6 runs no job waited" in html
    assert "1 of 2 configuration x metric cells are deterministic" in html
