"""The Python API: gt.open(store) -> one read-only generation; tables as LazyFrames,
SQL as DataFrames, analyses as functions. Expected counts come from the bundled real
openb sample: openb_pod_list_default.csv has 8152 data rows (wc -l minus the header)."""

from __future__ import annotations

import csv
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal
from typer.testing import CliRunner

import gpu_trace as gt
from gpu_trace import plugins
from gpu_trace.cli import app
from gpu_trace.errors import GpuTraceError, QueryError
from gpu_trace.loaders import LOADERS, ingest
from tests.conftest import OPENB


def _pod_phases() -> dict[str, int]:
    """Independent count of pod_phase values with the stdlib csv module."""
    counts: dict[str, int] = {}
    with (OPENB / "openb_pod_list_default.csv").open(newline="") as f:
        for row in csv.DictReader(f):
            counts[row["pod_phase"]] = counts.get(row["pod_phase"], 0) + 1
    return counts


def test_open_str_or_path_and_lazy_jobs(openb_store: Path) -> None:
    for arg in (str(openb_store), openb_store):
        s = gt.open(arg)
        assert isinstance(s.jobs, pl.LazyFrame)
        assert s.jobs.select(pl.len()).collect().item() == 8152
        assert s.generation.startswith("gen-")


def test_sql_returns_polars_and_is_read_only(openb_store: Path) -> None:
    s = gt.open(openb_store)
    frame = s.sql("select raw_status, count(*) as n from jobs group by 1")
    assert isinstance(frame, pl.DataFrame)
    assert dict(zip(frame["raw_status"], frame["n"], strict=True)) == _pod_phases()
    with pytest.raises(QueryError, match="read-only"):
        s.sql("create table x as select 1")
    with pytest.raises(QueryError):  # DuckDB itself refuses files outside the store
        s.sql("select * from read_csv('/etc/passwd')")


def test_analyses_as_functions(openb_store: Path) -> None:
    s = gt.open(openb_store)
    by_size = gt.analyses.queueing.queue_by(s.jobs, "gpus").collect()
    gpu_jobs = s.sql("select count(*) from jobs where gpus > 0 and queue_s is not null").item()
    assert by_size["jobs"].sum() == gpu_jobs  # each queued GPU job in one bucket
    summary = s.summary()
    assert summary.height == 1 and summary["jobs"][0] == 8152
    assert summary["unfinished_jobs"][0] == _pod_phases()["Running"] + _pod_phases()["Pending"]


def test_snapshot_is_one_generation(openb_store: Path, tmp_path: Path) -> None:
    """A Store keeps reading the generation it opened while an ingest commits a new one."""
    store = tmp_path / "store"
    ingest(LOADERS["openb"], OPENB / "openb_node_list_gpu_node.csv", store)
    s = gt.open(store)
    assert s.jobs.select(pl.len()).collect().item() == 0
    ingest(LOADERS["openb"], OPENB / "openb_pod_list_default.csv", store)
    assert s.jobs.select(pl.len()).collect().item() == 0
    assert s.sql("select count(*) from jobs").item() == 0
    assert gt.open(store).jobs.select(pl.len()).collect().item() == 8152


def test_missing_store_is_refused_not_created(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(GpuTraceError, match="no store at"):
        gt.open(missing)
    assert not missing.exists()
    (tmp_path / "empty").mkdir()
    with pytest.raises(GpuTraceError, match="no store at"):
        gt.open(tmp_path / "empty")


def _cli_frame(store: Path, out: Path, *args: str) -> pl.DataFrame | None:
    """What ``gpu-trace analyze ARGS`` writes as Parquet (None: it refused)."""
    result = CliRunner().invoke(
        app, ["analyze", *args, "--store", str(store), "--format", "parquet", "-o", str(out)]
    )
    return pl.read_parquet(out) if result.exit_code == 0 else None


def test_every_declared_analysis_runs_by_name_as_the_cli_does(
    openb_store: Path, tmp_path: Path
) -> None:
    """``Store.analyze`` is built from the declarations: each analysis, with its declared
    defaults, gives the rows ``gpu-trace analyze NAME`` writes (or refuses as it does)."""
    s = gt.open(openb_store)
    names = [p.name for p in plugins.analyses()]
    assert len(names) >= 15
    compared = 0
    for name in names:
        want = _cli_frame(openb_store, tmp_path / f"{name}.parquet", name)
        if want is None:
            with pytest.raises(GpuTraceError):
                s.analyze(name)
            continue
        got = s.analyze(name)
        assert_frame_equal(got, want, check_dtypes=False)
        compared += 1
    assert compared >= 10  # openb alone answers most analyses


def test_analyze_options_are_the_declared_fields(openb_store: Path, tmp_path: Path) -> None:
    s = gt.open(openb_store)
    want = _cli_frame(openb_store, tmp_path / "q.parquet", "queueing", "--by", "gpu_type")
    assert want is not None and want.height > 0
    assert_frame_equal(s.analyze("queueing", by="gpu_type"), want, check_dtypes=False)
    with pytest.raises(GpuTraceError, match=r"no option colour \(its options: by"):
        s.analyze("queueing", colour="red")
    with pytest.raises(GpuTraceError, match="did you mean"):
        s.analyze("queuing")
