"""Table output is for reading: no scientific notation, durations and sizes spelled
out, a wide one-row result printed as metric | value; csv / json keep the raw values.

Expected strings are worked out by hand in each test from the input values."""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl
from typer.testing import CliRunner

from gpu_trace.cli import app
from gpu_trace.cli.output import table_text

SCI = re.compile(r"\d[eE][+-]?\d")


def _cells(text: str) -> dict[str, str]:
    """``| name | value |`` lines of a two-column table as a dict."""
    out = {}
    for line in text.splitlines()[2:]:
        parts = [p.strip() for p in line.strip("|").split("|")]
        out[parts[0]] = parts[1]
    return out


def test_numbers_fixed_decimals_no_scientific() -> None:
    frame = pl.DataFrame(
        {
            "x": [1e-9, 0.5],  # largest 0.5 -> 3 decimals; 1e-9 rounds to 0.000
            "big": [123456789.123, 1.0],  # >= 1000 -> 1 decimal, grouped from 5 digits
            "n": [12345, 1234],  # a 4-digit number is never grouped (1,234 reads as 1.234)
            "job_id": [99999999999, 1],  # identifiers are never grouped
            "failed_rate": [0.2294, 1e-9],  # a 0-1 share: x 100, one decimal
        }
    )
    text = table_text(frame, 0)
    assert not SCI.search(text), text
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines()[2:]]
    assert rows[0] == ["0.000", "123,456,789.1", "12,345", "99999999999", "22.9 %"]
    assert rows[1] == ["0.500", "1.0", "1234", "1", "0.0 %"]


def test_durations_and_sizes_humanized() -> None:
    frame = pl.DataFrame(
        {
            "run_s": [7380.0, 3.5, 245.0, 3 * 86400 + 7200.0, None],
            "mem_bytes": [1.5 * 2**40, 512.0, 2**20 * 1.25, 0.0, None],
            "memory_mib": [16384, 1, 0, 1024, None],
        }
    )
    text = table_text(frame, 0)
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines()[2:]]
    # 7380 s = 2 h 3 min; 245 s = 4 min 5 s; 3 d 2 h; 16384 MiB = 16 GiB; 1 MiB
    assert rows[0] == ["2 h 03 min", "1.5 TiB", "16.0 GiB"]
    assert rows[1] == ["3.5 s", "512 B", "1.0 MiB"]
    assert rows[2] == ["4 min 05 s", "1.2 MiB", "0 B"]  # 1.25 MiB rounds half to even
    assert rows[3] == ["3 d 02 h", "0 B", "1.0 GiB"]
    assert rows[4] == ["null", "null", "null"]


def test_summary_is_two_columns_and_machine_formats_stay_raw(openb_store: Path) -> None:
    runner = CliRunner()
    table = runner.invoke(app, ["analyze", "summary", "--store", str(openb_store)])
    assert table.exit_code == 0, table.output
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["|", "metric", "|", "value", "|"]
    cells = _cells(table.stdout)
    assert cells["source"] == "openb" and cells["jobs"] == "8152"
    assert not SCI.search(table.stdout)
    assert max(len(line) for line in lines) < 60  # readable in an 80-column terminal
    js = json.loads(
        runner.invoke(app, ["analyze", "summary", "--store", str(openb_store), "-f", "json"]).stdout
    )
    raw = js[0]["avg_run_s_gpu"]
    assert isinstance(raw, float)  # the raw seconds, not text
    # the table shows the same seconds as h/min: rebuild the text from the raw value
    whole = round(raw)
    assert cells["avg_run_s_gpu"] == f"{whole // 3600} h {(whole // 60) % 60:02d} min"
    csv = runner.invoke(app, ["analyze", "summary", "--store", str(openb_store), "-f", "csv"])
    header, row = csv.stdout.splitlines()[:2]
    assert len(header.split(",")) == len(cells) and "h" not in row.split(",")[6]


def test_policy_descriptions_are_whole_sentences() -> None:
    """`replay policies` printed the docstring's first line: "2D-LAS ... with optional"."""
    out = CliRunner().invoke(app, ["replay", "policies"]).stdout
    rows = [line for line in out.splitlines() if line.startswith("  ") and line[2] != " "]
    assert rows
    for line in rows:
        doc = line[15:].split(" [reads estimates", 1)[0]
        assert doc.endswith((".", ")")), line
    las = next(line for line in rows if line.split()[0] == "las")
    assert "with optional starvation promotion." in las
