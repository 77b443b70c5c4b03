"""Every input that made ``make fuzz`` (bench/fuzz.py) end in a traceback, kept as a
regression case (tests/fixtures/fuzz/<kind>-<case>/). Each now either ingests with
rows read = written + quarantined or is refused with one ``error:`` line, and the
expected outcome is stated per case: what the file's damage is and what it must do."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpu_trace.cli import app

runner = CliRunner()
FUZZ = Path(__file__).parent / "fixtures" / "fuzz"

# (case folder, input inside it, expected exit code, text the outcome must show)
CASES = [
    # Chronus submit times that are NaN, inf or beyond int64: the rows are quarantined.
    *[
        (f"chronus-{n}", "trace_job_Philly_MIX1.csv", 0, "quarantined")
        for n in (3445, 6037, 61, 610, 6442, 6703)
    ],
    # Gavel arrival times the same way.
    *[
        (f"gavel-{n}", "msr_seed0_103959.trace", 0, "quarantined")
        for n in (1430, 3689, 4805, 602, 9638)
    ],
    # Helios end times in year 9999: quarantined as out of range.
    ("helios-4699", "Venus/cluster_log.csv", 0, "quarantined"),
    ("helios-8353", "Venus/cluster_log.csv", 0, "quarantined"),
    # A capacity header with a brace in a column name: a column name, not a format.
    ("helios-5041", "Earth/cluster_gpu_number.csv", 0, "read 3 = written 3"),
    # A zip whose deflate stream is corrupt: refused as unreadable.
    ("helios-7138", "data.zip", 1, "not a readable zip archive"),
    # Compute-apps memory too large for int64 bytes: that row is quarantined.
    ("nvidia-smi-301", "nvidia-smi-query-compute-apps-h100.csv", 0, "quarantined 1"),
    # Query CSVs whose first line became a dmon-style '# gpu' header: refused.
    ("nvidia-smi-3415", "nvidia-smi-query-gpu-h100-mig.csv", 1, "names no metric column"),
    ("nvidia-smi-6295", "nvidia-smi-query-compute-apps-h100.csv", 1, "names no metric column"),
    # A PAI table holding only a UTF-8 byte-order mark is an empty file: refused.
    ("pai2020-1541", "pai_instance_table.csv", 1, "only a byte-order mark"),
    # A JSON-lines pod whose "kind" key was damaged away (a silent drop, not a traceback:
    # it was neither written nor quarantined): quarantined as having no kind, beside the
    # sample's pod with a bad memory quantity.
    ("kubernetes-16", "pods.jsonl", 0, "quarantined 2"),
    # A query_range answer whose resultType holds the bytes ED A0 80 (a lone surrogate
    # U+D800 encoded as if UTF-8, which json.loads accepts): that line is quarantined,
    # the other answers ingest.
    (
        "prometheus-range-46",
        "prometheus-range-dcgm.jsonl",
        0,
        "read 47 = written 46 + quarantined 1",
    ),
    # A Philly util header gpu<40 digits>_util: refused, naming line 1.
    ("philly-6483", "cluster_gpu_util", 1, "GPU index above 32767"),
    # A sacct export (CRLF) with a 40-digit memory amount in one TRES list and damaged
    # Submit times: the two lines are quarantined (read 48 = written 46 + quarantined 2).
    ("slurm-61", "jobs.psv", 0, "quarantined 2"),
]


@pytest.mark.parametrize(("case", "name", "code", "shows"), CASES, ids=[c[0] for c in CASES])
def test_fuzz_reproducer(tmp_path: Path, case: str, name: str, code: int, shows: str) -> None:
    kind = case.rsplit("-", 1)[0]
    path = FUZZ / case / name
    assert path.exists()
    result = runner.invoke(app, ["ingest", kind, str(path), "--store", str(tmp_path / "s")])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    assert shows in result.output
    if code == 0:
        total = result.stdout.splitlines()[-1].split()
        read, written, quarantined, merged = (int(x) for x in total[1:5])
        assert read == written + quarantined + merged
    else:
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error:")
