"""``--tz`` values that Python's zoneinfo opens but polars (chrono-tz) cannot use.

zoneinfo opens any file under the tzdata folder (``ZoneInfo("posix/Europe/Berlin")``,
``"right/UTC"``, ``"localtime"``, ``"Factory"`` all succeed on a Debian tzdata; see the
zoneinfo docs: "the key ... is the relative path to a TZif file under a tzdata
directory"), while polars' zone names are the IANA ``zone1970``/backward names
chrono-tz compiles in. tzdata's own ``Makefile`` builds ``posix/`` as a copy of the
plain zones and ``right/`` as the leap-second variants, and ``Factory`` is its
placeholder zone (abbreviation ``-00``). Before, each of these was a polars traceback
in slurm, acme and helios.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpu_trace.cli import app
from gpu_trace.errors import UsageError
from gpu_trace.loaders.helios import HeliosLoader
from gpu_trace.loaders.zones import parse_tz
from gpu_trace.store.catalog import connect
from tests.conftest import SAMPLES

runner = CliRunner()

# one sacct -P line (Submit/Start/End are local times without an offset, sacct(1))
SACCT = (
    "JobID|User|State|Submit|Start|End|Elapsed|AllocTRES|NodeList\n"
    "7|alice|COMPLETED|2026-01-05T09:00:00|2026-01-05T09:00:00|2026-01-05T10:00:00|"
    "01:00:00|cpu=1,gres/gpu=1|n1\n"
)
# Helios cluster_log.csv (HeliosData README columns), naive local times
HELIOS = (
    "job_id,user,vc,jobname,gpu_num,cpu_num,node_num,state,submit_time,start_time,"
    "end_time,duration,queue\n"
    "1,uA,vcB,n,1,1,1,COMPLETED,2020-06-09 18:41:01,2020-06-09 18:41:01,"
    "2020-06-09 18:41:02,1,0\n"
)
# AcmeTrace job trace columns (the release's trace_seren.csv header); a time written without an offset reads in --tz
ACME = (
    "job_id,user,node_num,gpu_num,cpu_num,type,state,submit_time,start_time,end_time,"
    "duration,queue,gpu_time\n"
    "j1,u1,1,1,4,Other,COMPLETED,2023-03-01 00:00:00,2023-03-01 00:00:00,"
    "2023-03-01 01:00:00,3600,0,3600.0\n"
)


def _file(kind: str, tmp_path: Path) -> Path:
    if kind == "slurm":
        f = tmp_path / "c.psv"
        f.write_text(SACCT)
    elif kind == "helios":
        (tmp_path / "venus").mkdir()
        f = tmp_path / "venus" / "cluster_log.csv"
        f.write_text(HELIOS)
    elif kind == "acme":
        f = tmp_path / "trace_seren.csv"
        f.write_text(ACME)
    else:
        f = SAMPLES / "telemetry" / "nvidia-smi-query-gpu-h100.csv"
    return f


LOADERS = ["slurm", "helios", "acme", "nvidia-smi"]


@pytest.mark.parametrize("kind", LOADERS)
@pytest.mark.parametrize("tz", ["right/UTC", "localtime", "Factory", "posixrules", "utc", "X/Y"])
def test_unusable_tz_is_one_usage_line(tmp_path: Path, kind: str, tz: str) -> None:
    result = runner.invoke(
        app,
        ["ingest", kind, str(_file(kind, tmp_path)), "--store", str(tmp_path / "s"), "--tz", tz],
    )
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error" in ln.lower()]
    assert "Traceback" not in result.output
    assert len(errors) == 1 and "--tz" in errors[0] and repr(tz) in errors[0], result.stderr
    assert not (tmp_path / "s").exists() or not list((tmp_path / "s").rglob("*.parquet"))


@pytest.mark.parametrize("kind", ["slurm", "helios", "acme"])
def test_posix_zone_is_read_as_the_plain_zone(tmp_path: Path, kind: str) -> None:
    """``posix/Europe/Berlin`` is tzdata's copy of ``Europe/Berlin``: the same times,
    recorded as ``Europe/Berlin``. 09:00 / 18:41:01 / 00:00 local in January, June and
    March (CET +1, CEST +2, CET +1)."""
    store = tmp_path / "s"
    f = _file(kind, tmp_path)
    result = runner.invoke(
        app, ["ingest", kind, str(f), "--store", str(store), "--tz", "posix/Europe/Berlin"]
    )
    assert result.exit_code == 0, result.output
    got = connect(store).execute("select submit_time, source_tz from jobs").fetchall()
    utc = {
        "slurm": dt.datetime(2026, 1, 5, 8, 0, tzinfo=dt.UTC),
        "helios": dt.datetime(2020, 6, 9, 16, 41, 1, tzinfo=dt.UTC),
        "acme": dt.datetime(2023, 2, 28, 23, 0, tzinfo=dt.UTC),
    }[kind]
    assert got == [(utc, "Europe/Berlin")]


def test_parse_tz_through_the_python_api(tmp_path: Path) -> None:
    assert parse_tz("posix/Asia/Shanghai") == "Asia/Shanghai"
    assert parse_tz("Etc/GMT-14") == "Etc/GMT-14"
    with pytest.raises(UsageError, match=r"--tz 'right/Europe/Berlin'.*'Europe/Berlin'"):
        parse_tz("right/Europe/Berlin")
    f = _file("helios", tmp_path)
    with pytest.raises(UsageError, match="'Factory'"):
        list(HeliosLoader().batches(f, tz="Factory"))
