"""The options nvidia-smi and dcgmi outputs share (``gpu-trace ingest nvidia-smi`` /
``dcgmi``), declared once so the two commands cannot drift apart.

Tool outputs without timestamps (dmon, dcgmi dmon) are placed on a tick grid: the first
tick is ``--start`` (else the last tick is the file's mtime) and ticks are ``--interval``
apart, a duration in the one syntax of every option (``500ms``, ``1s``, bare seconds).
"""

from __future__ import annotations

from typing import Any

from gpu_trace.plugins import option
from gpu_trace.values import check_number, parse_duration


def interval_seconds(text: str) -> float:
    """``--interval`` in seconds: a duration above 0 (a 0 s grid would put every tick
    at one instant), else the usual one-line usage error.
    """
    return check_number(parse_duration(text, "--interval"), "--interval", gt=0)


def host_option() -> Any:
    """``--host``: the host the samples belong to when the output does not say."""
    return option(None, "Host name (default: the hostname field/label, else the file name).")


def start_option() -> Any:
    """``--start``: the first tick of an output without timestamps."""
    return option(
        None,
        "ISO-8601 time of the first tick for outputs without timestamps "
        "(default: the last tick is the file's mtime).",
    )


def interval_option() -> Any:
    """``--interval`` (held as ``interval_s``, seconds): the time between ticks."""
    return option(
        "1s",
        "Time between ticks (dmon -d / dcgmi -d): 1s, 500ms; bare: seconds.",
        flag="--interval",
        parse=interval_seconds,
    )
