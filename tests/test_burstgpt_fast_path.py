"""The BurstGPT loader checks only the lines its pattern cannot vouch for: good lines of
unusual form (padded numbers, a non-ASCII model name, extra fields) must still be
accepted, bad ones quarantined with their reason, and the rows kept in file order
whichever path each line took.

Fixture lines follow the HPMLL/BurstGPT README "Schema" (v1.2 columns; ``Response
tokens`` 0 marks a failure; ``Elapsed time`` seconds).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from gpu_trace.loaders.burstgpt import OPTIONAL, REQUIRED, read, vouch
from gpu_trace.loaders.requests_common import header_positions

HEADER = (
    "Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type"
)
LINES = [
    "5,1,43.5,GPT-4,906,446,1352,Conversation log",  # vouched
    " 6 ,,2, ChatGPT ,36, 7 ,43,API log",  # padded numbers: checked, good
    "7,,1.0,ChatGPT\u00e9,1,1,2,API log",  # non-ASCII model: checked, good
    "8,,1,ChatGPT,1,1,2,API log,extra",  # an extra field: vouched, good
    "9,,,ChatGPT,1,1,2,API log",  # no Elapsed time: vouched, good
    "10,,1,ChatGPT,1.0,1,2,API log",  # fractional count: quarantined
    "11,,1,,1,1,2,API log",  # no model: quarantined
    "-12,,1,ChatGPT,1,1,2,API log",  # negative time: quarantined
    "13,,1,ChatGPT,1,1",  # short line: quarantined
    "",  # empty line: quarantined
    "1e3,,1,ChatGPT,1,1,2,API log",  # exponent: checked, good
    "15,,1,ChatGPT,0000000000012,1,2,API log",  # 13 digits: checked, good (12)
    "16,,1,ChatGPT,1234567890123,1,2,API log",  # 13 digits above 2^40: quarantined
]


def test_only_good_lines_are_vouched_for(tmp_path: Path) -> None:
    path = tmp_path / "BurstGPT_1.csv"
    path.write_text("\n".join([HEADER, *LINES]) + "\n")
    pattern = vouch(header_positions(path, REQUIRED, OPTIONAL), 8)
    vouched = pl.Series(LINES).str.contains(pattern).to_list()
    assert vouched == [True, False, False, True, True, False, False, False, False, False,
                       False, False, False]  # fmt: skip
    batch = read(path)
    rows = batch.rows.lazy().collect()
    assert rows["line"].to_list() == [2, 3, 4, 5, 6, 12, 13]
    assert rows["input_tokens"].to_list() == [906, 36, 1, 1, 1, 1, 12]
    assert rows["output_tokens"].to_list() == [446, 7, 1, 1, 1, 1, 1]
    assert rows["arrival_raw"].to_list() == ["5", "6", "7", "8", "9", "1e3", "15"]
    assert rows["latency_s"].to_list() == [43.5, 2.0, 1.0, 1.0, None, 1.0, 1.0]
    assert rows["model"].to_list()[:3] == ["GPT-4", "ChatGPT", "ChatGPT\u00e9"]


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("10,,1,ChatGPT,1.0,1,2,API log", "Request tokens '1.0' is not a whole number"),
        ("11,,1,,1,1,2,API log", "Model is missing"),
        ("-12,,1,ChatGPT,1,1,2,API log", "Timestamp -12 is negative"),
        ("13,,1,ChatGPT,1,1", "expected at least 8 fields, found 6"),
    ],
)
def test_lines_the_pattern_refuses_get_their_reason(tmp_path: Path, line: str, reason: str) -> None:
    path = tmp_path / "BurstGPT_1.csv"
    path.write_text("\n".join([HEADER, "5,1,1,GPT-4,1,1,2,API log", line]) + "\n")
    batch = read(path)
    assert batch.rejected is not None
    bad = batch.rejected.lazy().collect()
    assert bad["locator"].to_list() == ["line 3"]
    assert reason in bad["reason"][0]
    assert bad["raw"][0] == line
