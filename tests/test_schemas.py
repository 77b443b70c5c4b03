"""The canonical schemas: exported contracts match the code; every column documented."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from gpu_trace.schemas import GPU_METRICS, HOST_METRICS, TABLES
from gpu_trace.schemas.export import DEFAULT_DIR, export, rendered
from tests.conftest import ROOT

UNIT_SUFFIXES = {"_s": "s", "_bytes": "bytes", "_w": "W", "_pct": "pct"}


def test_exported_contracts_match_code() -> None:
    """Fails when schemas/ drifts from gpu_trace/schemas (run `make schemas`)."""
    expected = rendered()
    on_disk = {p.name: p.read_text(encoding="utf-8") for p in (ROOT / DEFAULT_DIR).iterdir()}
    assert set(on_disk) == set(expected), "schemas/ has missing or extra files"
    for name, text in expected.items():
        assert on_disk[name] == text, f"schemas/{name} is stale: run `make schemas`"


def test_one_json_per_table_and_views(tmp_path) -> None:
    written = {p.name for p in export(tmp_path)}
    assert written == {f"{t}.json" for t in TABLES} | {"views.sql"}
    jobs = json.loads((tmp_path / "jobs.json").read_text())
    assert jobs["table"] == "jobs"
    names = [c["name"] for c in jobs["columns"]]
    for required in ("submit_time", "queue_s", "run_s", "gpus", "status", "raw_status"):
        assert required in names


@pytest.mark.parametrize("table", list(TABLES.values()), ids=list(TABLES))
def test_columns_documented_and_unit_named(table) -> None:
    schema = table.schema
    assert schema.metadata[b"gpu_trace.schema_version"] == str(table.version).encode()
    assert schema.names[:3] == ["source", "dataset", "cluster"]
    for col in table.columns:
        assert len(col.description) > 10, f"{table.name}.{col.name} needs a description"
        for suffix, unit in UNIT_SUFFIXES.items():
            if col.name.endswith(suffix) and not col.name.endswith("_raw"):
                assert col.unit == unit, f"{table.name}.{col.name} must carry unit {unit}"
        if pa.types.is_timestamp(col.type):
            assert col.type.tz == "UTC" and col.type.unit == "us"
    assert set(table.sort_by) <= set(table.column_names)


def test_metric_vocabularies_have_units_in_names() -> None:
    for name, (unit, meaning) in {**GPU_METRICS, **HOST_METRICS}.items():
        assert meaning
        for suffix, want in UNIT_SUFFIXES.items():
            if name.endswith(suffix) and not name.endswith("_per_s"):
                assert unit == want, name
        if name.endswith("_per_s"):
            assert unit.endswith("/s"), name
