"""The DuckDB baseline of ``ingest_vs_duckdb_*`` (bench/baseline_duckdb_ingest.py) must
compute the same canonical values as ``ingest`` for the rows both keep, or the speed
comparison would be between different jobs (issue 25, "Performance").

Run on the bundled synthetic samples; rows ``ingest`` quarantines are left out (the
script has no quarantine), every job ``ingest`` writes must be in the script's output.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from bench.baseline_duckdb_ingest import FAMILIES
from gpu_trace.loaders import LOADERS, ingest
from gpu_trace.store.scan import scan

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "samples"
SAME = ["submit_time", "start_time", "end_time", "queue_s", "run_s", "gpus", "status"]


@pytest.mark.parametrize(
    ("family", "folder", "options"),
    [
        ("helios", SAMPLES / "helios" / "synthetic", {}),
        ("philly", SAMPLES / "philly" / "synthetic", {}),
        ("pai2020", SAMPLES / "pai2020" / "synthetic", {"tables": "job,task"}),
    ],
)
def test_script_matches_ingest(
    tmp_path: Path, family: str, folder: Path, options: dict[str, str]
) -> None:
    import duckdb

    con = duckdb.connect()
    con.sql("SET TimeZone = 'UTC'")
    FAMILIES[family](con, folder, tmp_path)
    script = pl.read_parquet(sorted(tmp_path.glob("*.parquet"))).select("job_id", *SAME)
    store = tmp_path / "store"
    target = folder / "cluster_job_log" if family == "philly" else folder
    ingest(LOADERS[family], target, store, **options)
    ours = scan(store, "jobs").select("job_id", *SAME).collect()
    assert ours.height > 0
    both = ours.join(script, on="job_id", how="left", suffix="_script")
    assert both.height == ours.height  # job ids are unique on both sides
    for column in SAME:
        left, right = both[column], both[f"{column}_script"]
        close = (left - right).abs() < 1e-9 if left.dtype == pl.Float64 else left == right
        same = close | (left.is_null() & right.is_null())
        assert same.fill_null(False).all(), (family, column, both.filter(~same).head(3))
