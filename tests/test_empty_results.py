"""An analysis that returns no rows says why (issue 26): exit 0, the empty table on
stdout, and one stderr line naming what is missing. A DCGM-only store gave empty tables
with exit 0 and no word.

The stores are built from bundled real samples (a Prometheus ``query_range`` answer of
dcgm-exporter series; the real openb pod list) and a hand-written ``sacct -P`` export
(format: the sacct man page, ``--parsable2``: ``|``-separated, a header line of the
``--format`` fields)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpu_trace.cli import app
from gpu_trace.loaders import LOADERS, ingest
from tests.conftest import SAMPLES

DCGM = SAMPLES / "telemetry" / "prometheus-range-dcgm.jsonl"


@pytest.fixture(scope="module")
def dcgm_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("dcgm") / "store"
    ingest(LOADERS["prometheus-range"], DCGM, store)
    return store


def _run(store: Path, *args: str) -> tuple[int, list[str], list[str]]:
    result = CliRunner().invoke(app, ["analyze", *args, "--store", str(store)])
    return result.exit_code, result.stdout.splitlines(), result.stderr.splitlines()


@pytest.mark.parametrize(
    "command",
    [
        ["summary"],
        ["queueing"],
        ["jobs"],
        ["users"],
        ["arrivals"],
        ["utilization"],
        ["idle"],
        ["backlog"],
        ["accounting"],
    ],
)
def test_dcgm_only_store_says_no_jobs(dcgm_store: Path, command: list[str]) -> None:
    code, out, err = _run(dcgm_store, *command)
    assert code == 0
    assert len(out) == 2  # header and rule of the empty table
    assert len(err) == 1, err
    line = err[0]
    assert line.startswith(f"analyze {command[0]}: no rows: no jobs in this store")
    assert "GPU telemetry" in line  # what the store does hold
    assert "ingest" in line  # and how to get jobs


@pytest.mark.parametrize(
    ("command", "missing"),
    [
        (["per-job"], "no placements"),
        (["energy"], "no placements"),
        (["provisioning"], "no tasks"),
    ],
)
def test_dcgm_only_store_names_the_missing_table(
    dcgm_store: Path, command: list[str], missing: str
) -> None:
    code, out, err = _run(dcgm_store, *command)
    assert code == 0 and len(out) == 2
    assert len(err) == 1 and missing in err[0], err


def test_energy_without_placements_points_at_jobs_file(dcgm_store: Path) -> None:
    _, _, err = _run(dcgm_store, "energy")
    assert err[0].endswith("or pass --jobs-file")


def test_measured_view_without_telemetry_says_so(openb_store: Path) -> None:
    code, out, err = _run(openb_store, "utilization", "--view", "measured")
    assert code == 0 and len(out) == 2
    assert len(err) == 1
    assert "no GPU telemetry (gpu_samples) in this store" in err[0]
    assert "nvidia-smi" in err[0]


def test_cpu_only_jobs_say_no_gpu_job(tmp_path: Path) -> None:
    export = tmp_path / "sacct.psv"
    export.write_text(
        "JobID|JobIDRaw|JobName|User|Account|Partition|QOS|State|ExitCode|Submit|Eligible|"
        "Start|End|Elapsed|Timelimit|NNodes|NCPUS|ReqTRES|AllocTRES|NodeList\n"
        "7|7|prep|ann|lab|cpu|normal|COMPLETED|0:0|2026-01-05T09:00:00|2026-01-05T09:00:00|"
        "2026-01-05T09:00:05|2026-01-05T09:10:05|00:10:00|01:00:00|1|4|"
        "billing=4,cpu=4,mem=8G,node=1|billing=4,cpu=4,mem=8G,node=1|cpu01\n"
        "8|8|prep|ann|lab|cpu|normal|COMPLETED|0:0|2026-01-05T09:00:00|2026-01-05T09:00:00|"
        "2026-01-05T09:01:00|2026-01-05T09:11:00|00:10:00|01:00:00|1|4|"
        "billing=4,cpu=4,mem=8G,node=1|billing=4,cpu=4,mem=8G,node=1|cpu01\n"
    )
    store = tmp_path / "store"
    ingest(LOADERS["slurm"], export, store, tz="UTC")
    for command in ("utilization", "queueing"):
        code, out, err = _run(store, command)
        assert code == 0 and len(out) == 2
        assert err == [
            f"analyze {command}: no rows: no GPU job (gpus > 0) among the 2 jobs in this store"
        ]


def test_a_result_with_rows_prints_nothing_on_stderr(openb_store: Path) -> None:
    code, out, err = _run(openb_store, "queueing")
    assert code == 0 and len(out) > 2
    assert err == []


@pytest.fixture(scope="module")
def slurm_dcgm_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled sacct export (hosts gpu01...) beside the dcgm-exporter answer, whose
    series carry other hostnames (its ``Hostname`` labels), so nothing overlaps."""
    store = tmp_path_factory.mktemp("slurm_dcgm") / "store"
    ingest(LOADERS["slurm"], SAMPLES / "slurm" / "jobs.psv", store, tz="UTC")
    ingest(LOADERS["prometheus-range"], DCGM, store)
    return store


def test_missing_metric_is_named(slurm_dcgm_store: Path) -> None:
    code, out, err = _run(slurm_dcgm_store, "per-job", "--metric", "fan_pct")
    assert code == 0 and len(out) == 2
    assert len(err) == 1
    assert "no GPU telemetry of metric fan_pct in this store (it has " in err[0]
    assert "gpu_util_pct" in err[0]  # among the metrics the store does hold


def test_telemetry_that_misses_the_jobs_says_so(slurm_dcgm_store: Path) -> None:
    code, out, err = _run(slurm_dcgm_store, "per-job")
    assert code == 0 and len(out) == 2
    assert len(err) == 1
    assert err[0].startswith("analyze per-job: no rows: the placements (")
    assert err[0].endswith("share no host")
