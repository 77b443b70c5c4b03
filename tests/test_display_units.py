"""Numbers shown right (issue 26): table formatting comes from declared column units,
never from part of a computed name; shares exact to the shown digit; ordered buckets
in order; relative-time traces on an elapsed-time axis.

Expected values are worked out by hand in each test (or read from the command's own raw
CSV output of the same query, to check the table view shows that value)."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from gpu_trace.analyses import occupancy as occ
from gpu_trace.analyses.inputs import Inputs
from gpu_trace.cli import app
from gpu_trace.loaders import LOADERS, ingest
from gpu_trace.reports import charts, sections
from gpu_trace.schemas import TABLES
from gpu_trace.store.parquet import conform
from gpu_trace.telemetry.fake_nvml import eight_gpus
from tests.conftest import SAMPLES
from tests.telemetry_common import run_sampler

# The Helios paper's job-size buckets (SC'21, Fig. 6), smallest first, with our CPU
# and shared-GPU classes in front.
SIZE_ORDER = ["0 (CPU)", "<1 (shared)", "1", "2", "3-4", "5-8", "9-16", "17-32", "33-64", ">64"]


def _table(stdout: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")] for line in stdout.splitlines()[2:]]


def _plain(value: float) -> str:
    """One decimal; digit groups only from five integer digits (display's rule)."""
    return f"{value:,.1f}" if abs(value) >= 10_000 else f"{value:.1f}"


def test_sql_computed_gpu_hours_are_a_plain_number(openb_store: Path) -> None:
    """``sum(gpus*run_s)/3600`` was shown as a duration ("1 h 07 min") because ``run_s``
    appears inside the computed name."""
    query = "select sum(gpus*run_s)/3600 as x, sum(gpus*run_s)/3600 from jobs"
    runner = CliRunner()
    raw = runner.invoke(app, ["sql", query, "--store", str(openb_store), "-f", "csv"])
    assert raw.exit_code == 0, raw.output
    values = [float(v) for v in raw.stdout.splitlines()[1].split(",")]
    shown = runner.invoke(app, ["sql", query, "--store", str(openb_store)])
    assert shown.exit_code == 0, shown.output
    row = _table(shown.stdout)[0]
    assert row == [_plain(values[0]), _plain(values[1])]
    assert not re.search(r"[a-z]", "".join(row))  # no "h", "min", "s", "B"


def test_sql_schema_columns_keep_their_declared_units(openb_store: Path) -> None:
    """``run_s`` (seconds) and ``mem_bytes`` (bytes) are declared by the jobs schema."""
    query = "select run_s, mem_bytes, run_s / 60 as minutes from jobs where run_s > 7200 limit 1"
    runner = CliRunner()
    raw = runner.invoke(app, ["sql", query, "--store", str(openb_store), "-f", "csv"])
    run_s, mem, minutes = (float(v) for v in raw.stdout.splitlines()[1].split(","))
    row = _table(runner.invoke(app, ["sql", query, "--store", str(openb_store)]).stdout)[0]
    whole = round(run_s)
    if whole < 86400:
        assert row[0] == f"{whole // 3600} h {(whole // 60) % 60:02d} min"
    else:
        assert row[0] == f"{whole // 86400:,} d {(whole // 3600) % 24:02d} h"
    assert row[1].endswith(("MiB", "GiB", "KiB", "TiB"))
    assert row[2] == _plain(minutes) or row[2] == f"{minutes:.2f}"  # a number, not a time
    assert mem > 0


def test_sample_counts_are_counts_not_bytes(store: Path, tmp_path: Path) -> None:
    """``mem_used_bytes_samples`` (how many samples) was shown as ``6 B``."""
    run_sampler(store, eight_gpus()[:4], 6)
    jobs = tmp_path / "jobs.csv"
    jobs.write_text(
        "job_id,host,gpu_indices,start,end\n"
        "a,node-1,1;2,2026-01-01T00:00:00Z,2026-01-01T00:00:03Z\n"
    )
    result = CliRunner().invoke(
        app, ["telemetry", "jobs", "--jobs-file", str(jobs), "--store", str(store)]
    )
    assert result.exit_code == 0, result.output
    cells = dict(_table(result.stdout))  # one job: printed as metric | value
    # GPUs 1 and 2 at ticks 0, 1, 2: six samples of each metric
    assert cells["mem_used_bytes_samples"] == "6"
    assert cells["gpu_util_pct_samples"] == "6"
    assert cells["mem_used_bytes_p50"] == "4.0 GiB"  # the fake device's 4 GiB in use


def test_report_share_is_exact_to_the_shown_digit() -> None:
    """One of seven GPU jobs started at once: 1/7 = 14.29 % shows as 14.3 %, not as
    10.0 % (0.143 rounded to one decimal before display)."""
    submit = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    waits = [0.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0]
    frame = pl.DataFrame(
        {
            "source": ["t"] * 7,
            "dataset": ["d"] * 7,
            "job_id": [str(i) for i in range(7)],
            "cluster": ["c"] * 7,
            "vc": ["v"] * 7,
            "gpus": [1.0] * 7,
            "submit_time": [submit] * 7,
            "start_time": [submit + dt.timedelta(seconds=w) for w in waits],
            "end_time": [submit + dt.timedelta(seconds=w + 100) for w in waits],
            "queue_s": waits,
            "run_s": [100.0] * 7,
            "status": ["completed"] * 7,
            "time_basis": ["absolute"] * 7,
        }
    )
    jobs = conform(frame, TABLES["jobs"])  # every column of the store's jobs table
    empty = pl.LazyFrame()
    inp = Inputs(jobs, empty, empty, empty, empty, empty, empty, empty, empty)
    html = sections.queueing_section(inp).html
    assert "14.3 %" in html
    assert "10.0 %" not in html


@pytest.fixture(scope="module")
def helios_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("helios") / "store"
    ingest(LOADERS["helios"], SAMPLES / "helios" / "synthetic", store)
    return store


def test_size_buckets_in_order_in_tables(helios_store: Path) -> None:
    """``jobs --by size`` sorted the labels as text: "33-64" came before "5-8"."""
    out = CliRunner().invoke(
        app, ["analyze", "jobs", "--by", "size", "--store", str(helios_store), "-f", "csv"]
    )
    assert out.exit_code == 0, out.output
    frame = pl.read_csv(out.stdout.encode())
    for (_, _), part in frame.group_by("source", "cluster"):
        ranks = [SIZE_ORDER.index(b) for b in part["size_bucket"]]
        assert ranks == sorted(ranks), part["size_bucket"].to_list()
    assert frame["size_bucket"].n_unique() > 4


def test_size_buckets_in_order_on_chart_axes() -> None:
    """Two traces, the second with a bucket the first lacks: the axis order came from
    first appearance, so "3-4" landed after "9-16"."""
    from gpu_trace.analyses.definitions import size_bucket

    jobs = pl.DataFrame(
        {
            "source": ["a", "a", "b", "b"],
            "cluster": ["c", "c", "c", "c"],
            "gpus": [1.0, 16.0, 1.0, 4.0],
            "queue_s": [1.0, 2.0, 3.0, 4.0],
        }
    )
    frame = (
        jobs.with_columns(size_bucket())
        .group_by("source", "cluster", "size_bucket")
        .agg(pl.col("queue_s").median().alias("median_s"), pl.col("queue_s").max().alias("p90_s"))
        .sort("source", "cluster", "size_bucket")
    )
    spec = charts.queue_by(frame, "size_bucket").to_dict()
    assert spec["encoding"]["x"]["sort"] == ["1", "3-4", "9-16"]


def test_relative_time_allocation_axis_is_elapsed(openb_store: Path) -> None:
    """openb times are not calendar instants (its README: ``creation_time`` is a
    "Timestamp of creation (in seconds)", e.g. 9437497, i.e. 109 days after time 0):
    the allocation chart showed calendar dates ("Jan 04 ... May 24")."""
    inp = Inputs.from_store(openb_store)
    series = occ.occupancy(inp.jobs, inp.capacity, inp.machines, freq="1d").collect()
    spec = charts.allocation_series(series).to_dict()
    text = str(spec)
    assert "'type': 'temporal'" not in text
    upper = spec["vconcat"][0]
    assert upper["encoding"]["x"]["field"] == "elapsed_d"
    assert upper["encoding"]["x"]["type"] == "quantitative"
    assert "days since trace start" in text


def test_a_name_by_the_convention_declares_its_unit_an_expression_does_not(
    openb_store: Path,
) -> None:
    """An alias ending in ``_s`` follows the project's naming convention (units in
    column names) and is a duration; the bare expression ``avg(queue_s)`` is not an
    identifier and stays a number, though ``queue_s`` appears inside it."""
    query = "select avg(run_s), avg(run_s) as mean_run_s from jobs"
    runner = CliRunner()
    raw = runner.invoke(app, ["sql", query, "--store", str(openb_store), "-f", "csv"])
    value = float(raw.stdout.splitlines()[1].split(",")[0])
    row = _table(runner.invoke(app, ["sql", query, "--store", str(openb_store)]).stdout)[0]
    whole = round(value)
    assert row[0] == _plain(value) or row[0] == f"{value:.2f}"
    days, hours = whole // 86400, (whole // 3600) % 24
    assert row[1] == (
        f"{days} d {hours:02d} h"
        if whole >= 86400
        else f"{whole // 3600} h {(whole // 60) % 60:02d} min"
    )
