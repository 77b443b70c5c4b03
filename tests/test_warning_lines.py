"""A command prints each distinct input warning once: the demo report printed the same
relative-time warning six times (each page ran the analysis that warns)."""

from __future__ import annotations

import warnings

import pytest

from gpu_trace.cli._boundary import domain_errors
from gpu_trace.errors import InputWarning


def test_the_same_warning_twice_is_one_line_and_distinct_ones_each_show(
    capsys: pytest.CaptureFixture[str],
) -> None:
    @domain_errors
    def command() -> None:
        for text in ("a.csv: 3 rows relative", "a.csv: 3 rows relative", "b.csv: 1 row bad"):
            warnings.warn(text, InputWarning, stacklevel=1)

    command()
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert lines == ["warning: a.csv: 3 rows relative", "warning: b.csv: 1 row bad"]
