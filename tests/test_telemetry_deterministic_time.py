"""A telemetry file that prints no times, ingested without --start/--time, gets the
same times on every machine: relative time from 1970-01-01, never the file's mtime
(which differs between two clones of the repository)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpu_trace.cli import app
from gpu_trace.store.catalog import connect
from tests.conftest import SAMPLES

runner = CliRunner()


@pytest.mark.parametrize(
    ("kind", "sample"),
    [
        ("nvidia-smi", "nvidia-smi-dmon-h100.txt"),
        ("dcgmi", "dcgmi-dmon-h800.txt"),
        ("prometheus", "dcgm-exporter-metrics-t4.prom"),
    ],
)
def test_untimed_file_times_do_not_depend_on_mtime(tmp_path: Path, kind: str, sample: str) -> None:
    seen = []
    for copy, stamp in (("a", 1_000_000_000), ("b", 1_700_000_000)):
        folder = tmp_path / copy
        folder.mkdir()
        path = folder / sample
        shutil.copyfile(SAMPLES / "telemetry" / sample, path)
        os.utime(path, (stamp, stamp))
        store = tmp_path / f"store-{copy}"
        result = runner.invoke(app, ["ingest", kind, str(path), "--store", str(store)])
        assert result.exit_code == 0, result.output
        assert "time_basis=relative" in result.stderr
        con = connect(store)
        seen.append(
            con.execute("select min(time), max(time), count(*) from gpu_samples").fetchone()
        )
    assert seen[0] == seen[1]
    first = seen[0][0]
    assert first is not None and first.year == 1970
