"""As of, windows, periods and filters on a live cluster's own export (issue 26).

The fixture ``tests/fixtures/slurm/live_export.psv`` is written as ``sacct -P`` prints
it (``-P, --parsable2``: fields separated by ``|``, no trailing ``|``), with the fields
the sacct man page describes (https://slurm.schedmd.com/sacct.html): ``Elapsed`` is
``[days-]hours:minutes:seconds`` and, for a running job, the time so far; a running
job's ``End`` and a pending job's ``Start`` / ``End`` are ``Unknown``; a pending job has
no ``AllocTRES`` (nothing allocated) and asks in ``ReqTRES``. Read with ``--tz UTC``.

The export was printed at 2026-03-02 12:00 (the as-of instant: job 102 started
03-01 12:00 with Elapsed 1-00:00:00, job 106 started 03-02 08:00 with Elapsed 04:00:00;
both give 03-02 12:00). Every job, with its GPUs (gres/gpu):

====  =======  ========  =====  ===============  ===============  ===============
job   part.    user      GPUs   Submit           Start            End
====  =======  ========  =====  ===============  ===============  ===============
101   gpu      alice     4      03-01 00:00      03-01 01:00      03-01 07:00
102   gpu      bob       8      03-01 10:00      03-01 12:00      RUNNING
103   debug    carol     2      03-01 20:00      03-01 22:00      03-02 04:00
104   gpu      dave      32     03-02 03:00      PENDING
105   debug    alice     1      03-02 10:00      PENDING
106   debug    erin      2      03-02 06:00      03-02 08:00      RUNNING
====  =======  ========  =====  ===============  ===============  ===============

GPU-hours up to as-of (running jobs until 03-02 12:00):
101: 6 h x 4 = 24; 102: 24 h x 8 = 192; 103: 6 h x 2 = 12; 106: 4 h x 2 = 8.
Per UTC day: 03-01: 101 24 + 102 (12:00-24:00) 12 h x 8 = 96 + 103 (22:00-24:00) 2 h x
2 = 4 -> 124 GPU-h, a mean of 124 / 24 = 5.1667 GPUs; 03-02: 102 (00:00-12:00) 96 +
103 (00:00-04:00) 8 + 106 (08:00-12:00) 8 -> 112 GPU-h. Without the running jobs
03-01 held only 24 + 4 = 28 GPU-h (1.1667 GPUs): the defect of issue 26.
Waits: 101 1 h, 102 2 h, 103 2 h, 106 2 h; 104 pending 03:00 -> 12:00 = 9 h so far,
105 pending 10:00 -> 12:00 = 2 h so far.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpu_trace.cli import app

runner = CliRunner()
EXPORT = Path("tests/fixtures/slurm/live_export.psv")
H = 3600.0


def run(*args: str | Path):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("live") / "store"
    result = run("ingest", "slurm", EXPORT, "--cluster", "lab", "--tz", "UTC", "--store", root)
    assert result.exit_code == 0, result.output
    return root


def analyze(store: Path, *args: str) -> list[dict[str, object]]:
    result = run("analyze", *args, "--store", store, "--format", "json")
    assert result.exit_code == 0, result.output
    rows: list[dict[str, object]] = json.loads(result.stdout)
    return rows


# -- running jobs count up to as-of -------------------------------------------------


def test_running_jobs_count_in_utilization(store: Path) -> None:
    """The day 03-01 held 124 GPU-h (5.1667 GPUs on average), not 28 (1.1667)."""
    rows = analyze(store, "utilization", "--freq", "1d")
    day = {r["time"][:10]: r["allocated_gpus"] for r in rows}
    assert day["2026-03-01"] == pytest.approx(124 / 24)


def test_running_jobs_count_in_hourly_allocation(store: Path) -> None:
    """03-02 09:00-10:00: 102 (8 GPUs) and 106 (2 GPUs) were running: 10 GPUs. Before
    the fix the series stopped at the last end (103, 03-02 04:00)."""
    rows = analyze(store, "utilization", "--freq", "1h")
    hour = {r["time"][:13]: r["allocated_gpus"] for r in rows}
    assert hour["2026-03-02T09"] == pytest.approx(10.0)
    # 03-01 13:00-14:00: only 102 (101 ended 07:00, 103 starts 22:00)
    assert hour["2026-03-01T13"] == pytest.approx(8.0)


def test_running_jobs_count_in_summary(store: Path) -> None:
    """GPU hours 24 + 192 + 12 + 8 = 236 (c8737e0: 24 + 12 = 36)."""
    (row,) = analyze(store, "summary")
    assert row["gpu_hours"] == pytest.approx(236.0)
    assert row["jobs"] == 6 and row["unfinished_jobs"] == 4  # 102, 104, 105, 106


def test_running_jobs_count_in_users(store: Path) -> None:
    """bob's 102 has run 24 h x 8 GPUs = 192 GPU-h; erin's 106 4 h x 2 = 8."""
    rows = {r["user"]: r for r in analyze(store, "users", "--per-user")}
    assert rows["bob"]["gpu_hours"] == pytest.approx(192.0)
    assert rows["erin"]["gpu_hours"] == pytest.approx(8.0)
    assert rows["alice"]["gpu_hours"] == pytest.approx(24.0)  # 101; 105 is pending


def test_running_jobs_count_in_accounting(store: Path) -> None:
    """The sreport-style table counts like users: bob 192, erin 8, alice 24 GPU-h."""
    rows = {r["user"]: r for r in analyze(store, "accounting", "--by", "user")}
    assert rows["bob"]["gpu_hours"] == pytest.approx(192.0)
    assert rows["erin"]["gpu_hours"] == pytest.approx(8.0)
    assert rows["alice"]["gpu_hours"] == pytest.approx(24.0)


# -- pending jobs count in queueing, censored ---------------------------------------


def test_pending_jobs_count_in_queueing_censored(store: Path) -> None:
    """104 (32 GPUs, bucket 17-32) has waited 9 h so far, 105 (1 GPU) 2 h: both are in
    the table, flagged, and a note line says the statistics include censored waits."""
    result = run("analyze", "queueing", "--store", store, "--format", "json")
    assert result.exit_code == 0, result.output
    rows = {r["size_bucket"]: r for r in json.loads(result.stdout)}
    assert rows["17-32"]["jobs"] == 1
    assert rows["17-32"]["max_s"] == 9 * H
    assert rows["17-32"]["censored_jobs"] == 1
    assert rows["1"]["median_s"] == 2 * H and rows["1"]["censored_jobs"] == 1
    # 103 and 106 (2 GPUs each) both waited 2 h and started: nothing censored
    assert (rows["2"]["jobs"], rows["2"]["censored_jobs"]) == (2, 0)
    notes = [ln for ln in result.stderr.splitlines() if "censored" in ln]
    assert len(notes) == 1 and "2 job(s) still pending" in notes[0]


def test_queueing_without_pending_jobs_has_no_note(store: Path) -> None:
    """--partition gpu --as-of 03-01 23:00: 101 and 102 had started; nothing pending."""
    result = run(
        "analyze", "queueing", "--store", store, "--partition", "gpu",
        "--as-of", "2026-03-01T23:00", "--format", "json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert sum(r["censored_jobs"] for r in json.loads(result.stdout)) == 0
    assert "censored" not in result.stderr


# -- windows ------------------------------------------------------------------------


def test_window_counts_only_the_overlap(store: Path) -> None:
    """[03-01 06:00, 03-01 18:00): 101 overlaps 06:00-07:00 = 1 h x 4 = 4 GPU-h; 102
    12:00-18:00 = 6 h x 8 = 48; 103 (submitted 20:00) and later jobs are outside.
    Total 52 GPU-h over 2 jobs."""
    (row,) = analyze(store, "summary", "--since", "2026-03-01T06:00", "--until", "2026-03-01T18:00")
    assert row["jobs"] == 2
    assert row["gpu_hours"] == pytest.approx(52.0)


def test_window_with_an_offset(store: Path) -> None:
    """--since 03-02 09:00+01:00 is 08:00 UTC: 102 runs 08:00-12:00 (4 h x 8 = 32), 106
    08:00-12:00 (4 h x 2 = 8); 103 ended 04:00, 101 on 03-01: outside. The pending 104
    and 105 are in (they wait in the window) with no GPU time: 4 jobs, 40 GPU-h."""
    (row,) = analyze(store, "summary", "--since", "2026-03-02T09:00:00+01:00")
    assert row["gpu_hours"] == pytest.approx(40.0)
    assert row["jobs"] == 4


# -- as of ----------------------------------------------------------------------------


def test_as_of_reads_the_store_as_it_stood(store: Path) -> None:
    """--as-of 03-01 23:00: 101 24 GPU-h; 102 running 12:00-23:00 = 11 h x 8 = 88; 103
    running 22:00-23:00 = 1 h x 2 = 2; 104-106 not yet submitted: 3 jobs, 114 GPU-h,
    2 unfinished (102, 103)."""
    (row,) = analyze(store, "summary", "--as-of", "2026-03-01T23:00")
    assert (row["jobs"], row["unfinished_jobs"]) == (3, 2)
    assert row["gpu_hours"] == pytest.approx(114.0)


def test_as_of_before_a_start_makes_the_job_pending(store: Path) -> None:
    """--as-of 03-01 11:00: 102 was submitted 10:00 and started 12:00, so at 11:00 it had
    waited 1 h (censored); 101 had ended (its 1 h wait is whole)."""
    rows = {r["size_bucket"]: r for r in analyze(store, "queueing", "--as-of", "2026-03-01T11:00")}
    assert (rows["5-8"]["max_s"], rows["5-8"]["censored_jobs"]) == (1 * H, 1)
    assert (rows["3-4"]["max_s"], rows["3-4"]["censored_jobs"]) == (1 * H, 0)
    assert set(rows) == {"3-4", "5-8"}


# -- periods --------------------------------------------------------------------------


def test_utilization_per_day(store: Path) -> None:
    """sreport-style: 03-01 124 GPU-h, 03-02 112 GPU-h (worked out in the module doc)."""
    rows = analyze(store, "utilization", "--period", "day")
    got = {r["period"]: r["allocated_gpu_hours"] for r in rows}
    assert got == pytest.approx({"2026-03-01": 124.0, "2026-03-02": 112.0})


def test_utilization_per_month_and_week(store: Path) -> None:
    """Both days are in March 2026: 124 + 112 = 236 GPU-h. 2026-03-01 is a Sunday: its
    ISO week starts Monday 02-23 (124 GPU-h); 03-02 starts the next (112)."""
    (month,) = analyze(store, "utilization", "--period", "month")
    assert (month["period"], month["allocated_gpu_hours"]) == ("2026-03-01", pytest.approx(236.0))
    weeks = {
        r["period"]: r["allocated_gpu_hours"]
        for r in analyze(store, "utilization", "--period", "week")
    }
    assert weeks == pytest.approx({"2026-02-23": 124.0, "2026-03-02": 112.0})


def test_users_per_day(store: Path) -> None:
    """bob's 102: 03-01 12:00-24:00 = 96 GPU-h, 03-02 00:00-12:00 = 96; carol's 103:
    03-01 2 h x 2 = 4, 03-02 4 h x 2 = 8."""
    rows = analyze(store, "users", "--period", "day")
    got = {(r["user"], r["period"]): r["gpu_hours"] for r in rows}
    assert got[("bob", "2026-03-01")] == pytest.approx(96.0)
    assert got[("bob", "2026-03-02")] == pytest.approx(96.0)
    assert got[("carol", "2026-03-01")] == pytest.approx(4.0)
    assert got[("carol", "2026-03-02")] == pytest.approx(8.0)


def test_period_in_the_clusters_time_zone(tmp_path: Path) -> None:
    """Read in Europe/Berlin (UTC+1 in March), 102 started 12:00 local = 11:00 UTC and
    its local day 03-01 ends at 24:00 local: 12 h x 8 = 96 GPU-h that day, as in UTC;
    the per-day figures follow the cluster's clock, not UTC's."""
    root = tmp_path / "s"
    result = run(
        "ingest", "slurm", EXPORT, "--cluster", "lab", "--tz", "Europe/Berlin", "--store", root
    )
    assert result.exit_code == 0, result.output
    rows = analyze(root, "users", "--period", "day")
    got = {(r["user"], r["period"]): r["gpu_hours"] for r in rows}
    assert got[("bob", "2026-03-01")] == pytest.approx(96.0)
    assert got[("carol", "2026-03-02")] == pytest.approx(8.0)


# -- filters --------------------------------------------------------------------------


def test_partition_filter(store: Path) -> None:
    """--partition debug: 103, 105, 106: GPU-h 12 + 8 = 20."""
    (row,) = analyze(store, "summary", "--partition", "debug")
    assert (row["jobs"], row["gpu_hours"]) == (3, pytest.approx(20.0))


def test_cluster_filter_and_unknown_names(store: Path) -> None:
    (row,) = analyze(store, "summary", "--cluster", "lab")
    assert row["jobs"] == 6
    result = run("analyze", "summary", "--store", store, "--cluster", "labb")
    assert result.exit_code == 2
    assert "unknown cluster 'labb'; did you mean 'lab'?" in result.stderr
    result = run("analyze", "queueing", "--store", store, "--partition", "gpux")
    assert result.exit_code == 2 and "unknown partition 'gpux'" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--since", "yesterday"), "--since 'yesterday' is not a date"),
        (("--since", "2026-03-02", "--until", "2026-03-01"), "is not before --until"),
        (("--period", "year"), "'year' is not one of day, week, month"),
    ],
)
def test_bad_scope_values_are_usage_errors(
    store: Path, args: tuple[str, ...], message: str
) -> None:
    result = run("analyze", "utilization", "--store", store, *args)
    assert result.exit_code == 2
    assert message in result.stderr
    assert "Traceback" not in result.output


def test_every_analyze_command_takes_the_scope_options() -> None:
    from gpu_trace import plugins

    for plugin in plugins.analyses():
        result = run("analyze", plugin.name, "--help")
        assert result.exit_code == 0, plugin.name
        for flag in ("--as-of", "--since", "--until", "--cluster", "--partition"):
            assert flag in result.stdout, (plugin.name, flag)


def test_every_analyze_command_runs_in_a_scope(store: Path) -> None:
    """Each command accepts the options together (a window, a partition, as-of)."""
    from gpu_trace import plugins

    scope = ("--since", "2026-03-01", "--until", "2026-03-03", "--partition", "gpu,debug")
    for plugin in plugins.analyses():
        result = run(
            "analyze", plugin.name, "--store", store, *scope, "--as-of", "2026-03-02T12:00"
        )
        assert result.exit_code in (0, 1), (plugin.name, result.output)
        assert "Traceback" not in result.output, plugin.name


def test_arrivals_in_a_window_are_the_jobs_submitted_in_it(store: Path) -> None:
    """--since 03-02: submitted that day 104 (03:00), 106 (06:00), 105 (10:00). 102 runs
    on 03-02 but arrived on 03-01 at 10:00, so hour 10 counts one job, not two."""
    rows = analyze(store, "arrivals", "--since", "2026-03-02")
    assert {r["hour"]: r["jobs"] for r in rows} == {3: 1, 6: 1, 10: 1}


def test_report_takes_the_scope(store: Path, tmp_path: Path) -> None:
    """report --partition gpu: 101, 102, 104. The page's queueing section says that its
    figures include 104's censored wait (the only pending job of the partition)."""
    out = tmp_path / "site"
    result = run(
        "report",
        "--store",
        store,
        "--out",
        out,
        "--partition",
        "gpu",
        "--as-of",
        "2026-03-02T12:00",
    )
    assert result.exit_code == 0, result.output
    page = (out / "slurm.html").read_text()
    assert "pending ones have waited until it): lab: 2026-03-02 12:00 UTC." in page
    assert "the waits of 1 job(s) still pending at the as-of instant" in page
    result = run("report", "--store", store, "--out", tmp_path / "x", "--cluster", "nope")
    assert result.exit_code == 2 and "unknown cluster 'nope'" in result.stderr


def test_utilization_per_day_over_the_inventory(tmp_path: Path) -> None:
    """With the cluster's sinfo snapshot (``sinfo -N -o "%N|%P|%T|%c|%m|%G"``, the sinfo
    man page's fields: gpu01-02 in partition gpu with GRES gpu:8, gpu03 in debug with
    gpu:4, taken 2026-03-01 00:00 UTC): 20 GPUs, 16 in gpu, 4 in debug.

    Whole cluster. 03-01: the series runs from 01:00 (101's start) to 24:00, 23 h x 20
    = 460 GPU-h installed, 124 allocated: 26.957 %. 03-02: 00:00 to as-of 12:00, 12 h x
    20 = 240, 112 allocated: 46.667 %.
    --partition debug (4 GPUs): 03-01 from 22:00 (103's start): 2 h x 4 = 8, allocated
    103's 2 h x 2 = 4: 50 %. 03-02: 12 h x 4 = 48, allocated 103 (00:00-04:00) 8 + 106
    (08:00-12:00) 8 = 16: 33.333 %."""
    root = tmp_path / "s"
    assert (
        run("ingest", "slurm", EXPORT, "--cluster", "lab", "--tz", "UTC", "--store", root).exit_code
        == 0
    )
    sinfo = EXPORT.parent / "sinfo-2026-03-01T0000Z.txt"
    result = run("ingest", "sinfo", sinfo, "--cluster", "lab", "--store", root)
    assert result.exit_code == 0, result.output
    got = {
        r["period"]: (r["allocated_gpu_hours"], r["capacity_gpu_hours"], r["allocation_pct"])
        for r in analyze(root, "utilization", "--period", "day")
    }
    assert got["2026-03-01"] == pytest.approx((124.0, 460.0, 100 * 124 / 460))
    assert got["2026-03-02"] == pytest.approx((112.0, 240.0, 100 * 112 / 240))
    got = {
        r["period"]: (r["allocated_gpu_hours"], r["capacity_gpu_hours"], r["allocation_pct"])
        for r in analyze(root, "utilization", "--period", "day", "--partition", "debug")
    }
    assert got["2026-03-01"] == pytest.approx((4.0, 8.0, 50.0))
    assert got["2026-03-02"] == pytest.approx((16.0, 48.0, 100 * 16 / 48))


def test_kubernetes_pods_count_up_to_the_latest_timestamp(tmp_path: Path) -> None:
    """``kubectl get pods -o json`` carries no export time (Pod v1 in the Kubernetes API
    reference has none), so as-of is the latest instant in the pods: "done" finished at
    13:00. The Running pod "train" (4 nvidia.com/gpu, scheduled 10:00) holds its GPUs
    10:00-13:00: 3 h x 4 = 12 GPU-h, plus "done" 09:00-13:00 x 2 = 8: 20 GPU-h.
    The Pending pod "wait" (8 GPUs, created 12:00) has waited 1 h so far (censored)."""
    from tests.kubernetes_common import pod, write_lines

    def scheduled(at: str) -> dict[str, object]:
        return {
            "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": at}]
        }

    gpus = {"nvidia.com/gpu": "4"}
    train = pod(
        "train",
        requests=gpus,
        created="2026-01-05T10:00:00Z",
        node="n1",
        status={
            **scheduled("2026-01-05T10:00:00Z"),
            "containerStatuses": [
                {"name": "main", "state": {"running": {"startedAt": "2026-01-05T10:00:00Z"}}}
            ],
        },
    )
    done = pod(
        "done",
        requests={"nvidia.com/gpu": "2"},
        created="2026-01-05T09:00:00Z",
        phase="Succeeded",
        node="n1",
        status={
            **scheduled("2026-01-05T09:00:00Z"),
            "containerStatuses": [
                {
                    "name": "main",
                    "state": {
                        "terminated": {
                            "startedAt": "2026-01-05T09:00:00Z",
                            "finishedAt": "2026-01-05T13:00:00Z",
                            "exitCode": 0,
                            "reason": "Completed",
                        }
                    },
                }
            ],
        },
    )
    wait = pod(
        "wait", requests={"nvidia.com/gpu": "8"}, created="2026-01-05T12:00:00Z", phase="Pending"
    )
    pods = write_lines(tmp_path / "pods.jsonl", [train, done, wait])
    root = tmp_path / "s"
    result = run("ingest", "kubernetes", pods, "--cluster", "k", "--store", root)
    assert result.exit_code == 0, result.output
    (row,) = analyze(root, "summary")
    assert row["gpu_hours"] == pytest.approx(20.0)
    rows = {r["size_bucket"]: r for r in analyze(root, "queueing")}
    assert (rows["5-8"]["max_s"], rows["5-8"]["censored_jobs"]) == (1 * H, 1)


def test_window_restricts_telemetry(tmp_path: Path) -> None:
    """``nvidia-smi --query-gpu=timestamp,index,utilization.gpu,power.draw --format=csv``
    (header names with their units in brackets, values with units, as nvidia-smi
    ``--help-query-gpu`` lists them), one GPU sampled at 10:00 (0 %, 100 W), 11:00 (50 %,
    200 W) and 12:00 (100 %, 300 W).

    measured utilization --since 10:30: the 11:00 and 12:00 samples, mean 75 %, none idle.
    energy --by gpu --until 11:30: samples 10:00 and 11:00, (100 + 200) / 2 W x 1 h =
    150 Wh = 0.15 kWh (0.4 kWh over all three)."""
    csv = tmp_path / "smi.csv"
    csv.write_text(
        "timestamp, index, utilization.gpu [%], power.draw [W]\n"
        "2026/03/01 10:00:00.000, 0, 0 %, 100.00 W\n"
        "2026/03/01 11:00:00.000, 0, 50 %, 200.00 W\n"
        "2026/03/01 12:00:00.000, 0, 100 %, 300.00 W\n"
    )
    root = tmp_path / "s"
    result = run("ingest", "nvidia-smi", csv, "--host", "h1", "--tz", "UTC", "--store", root)
    assert result.exit_code == 0, result.output
    (row,) = analyze(root, "utilization", "--view", "measured", "--since", "2026-03-01T10:30")
    assert (row["samples"], row["mean"], row["idle_share"]) == (2, 75.0, 0.0)
    (gpu,) = analyze(root, "energy", "--by", "gpu", "--until", "2026-03-01T11:30")
    assert gpu["energy_kwh"] == pytest.approx(0.15)
    (gpu,) = analyze(root, "energy", "--by", "gpu")
    assert gpu["energy_kwh"] == pytest.approx(0.4)


def test_periods_follow_the_clusters_clock_change(tmp_path: Path) -> None:
    """Europe/Berlin moves to summer time on 2026-03-29 (02:00 CET -> 03:00 CEST), so that
    local day has 23 hours. One 1-GPU job from 03-28 12:00 to 03-30 12:00 local (sacct
    prints local times; Elapsed 1-23:00:00 = 47 h): 12 GPU-h on 03-28, 23 on 03-29, 12 on
    03-30, in the users table (each run split at local midnights) and in the allocation
    table (hourly bins summed per local day)."""
    psv = tmp_path / "dst.psv"
    psv.write_text(
        "JobID|JobName|Partition|User|State|Submit|Start|End|Elapsed|AllocTRES\n"
        "7|long|gpu|alice|COMPLETED|2026-03-28T12:00:00|2026-03-28T12:00:00|"
        "2026-03-30T12:00:00|1-23:00:00|cpu=1,gres/gpu=1\n"
    )
    root = tmp_path / "s"
    result = run("ingest", "slurm", psv, "--cluster", "b", "--tz", "Europe/Berlin", "--store", root)
    assert result.exit_code == 0, result.output
    want = {"2026-03-28": 12.0, "2026-03-29": 23.0, "2026-03-30": 12.0}
    users = {r["period"]: r["gpu_hours"] for r in analyze(root, "users", "--period", "day")}
    assert users == pytest.approx(want)
    alloc = {
        r["period"]: r["allocated_gpu_hours"]
        for r in analyze(root, "utilization", "--period", "day")
    }
    assert alloc == pytest.approx(want)
