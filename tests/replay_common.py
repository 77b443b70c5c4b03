"""Helpers shared by tests/test_replay_unit.py and tests/test_replay_integration.py
(split from test_replay.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

T0 = datetime(2020, 1, 1, tzinfo=UTC)
SAMPLES = Path(__file__).resolve().parents[1] / "data" / "samples"


def jobs_frame(rows: list[tuple[float, float, float]], **extra: list[Any]) -> pl.DataFrame:
    """(submit offset s, run_s, gpus) rows as canonical-like jobs."""
    n = len(rows)
    return pl.DataFrame(
        {
            "job_id": [f"j{i}" for i in range(n)],
            "user": extra.get("user", [f"u{i % 3}" for i in range(n)]),
            "vc": extra.get("vc", ["vc0"] * n),
            "name": ["job"] * n,
            "submit_time": [T0 + timedelta(seconds=r[0]) for r in rows],
            "start_time": extra.get("start_time", [None] * n),
            "run_s": [float(r[1]) for r in rows],
            "gpus": [float(r[2]) for r in rows],
            "gpu_type": extra.get("gpu_type", [None] * n),
        },
        schema_overrides={"start_time": pl.Datetime("us", "UTC"), "gpu_type": pl.String},
    )
