"""A declared analysis' report table is capped (a per-job result of a million-job store
made a 22 MB page with 109,497 table rows); the caption says how many rows there are and
which command prints them all."""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from gpu_trace.plugins import AnalysisPlugin
from gpu_trace.reports.sections import SECTION_ROWS, plugin_section


def _plugin(rows: int) -> AnalysisPlugin:
    def run(inputs: Any, options: Any) -> pl.DataFrame:
        return pl.DataFrame({"job_id": [f"j{i}" for i in range(rows)], "gpus": list(range(rows))})

    return AnalysisPlugin(name="toy", help="Toy per-job table.", run=run)


def test_long_result_shows_the_first_rows_and_says_so() -> None:
    sec = plugin_section(_plugin(SECTION_ROWS + 70))(None)  # type: ignore[arg-type]
    assert sec.html.count("<tr>") == 1 + SECTION_ROWS  # header + the first rows
    assert ">j0<" in sec.html and f">j{SECTION_ROWS - 1}<" in sec.html
    assert f">j{SECTION_ROWS}<" not in sec.html
    caption = re.search(r"<caption>(.*?)</caption>", sec.html)
    assert caption is not None
    assert f"first {SECTION_ROWS} of {SECTION_ROWS + 70} rows" in caption.group(1)
    assert "gpu-trace analyze toy" in caption.group(1)


def test_short_result_is_shown_whole() -> None:
    sec = plugin_section(_plugin(3))(None)  # type: ignore[arg-type]
    assert sec.html.count("<tr>") == 4
    assert "first" not in sec.html
