"""Tiny canonical-like job frames for hand-computed replay scenarios, shared by the
replay test files (golden schedules, FIFO modes, faults, energy)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl

T0 = datetime(2020, 1, 1, tzinfo=UTC)


def jobs_frame(
    rows: list[tuple[float, float, float]],
    users: list[str] | None = None,
    vcs: list[str] | None = None,
) -> pl.DataFrame:
    """(submit offset s, run_s, gpus) rows -> jobs j0, j1, ... submitted at T0 + offset."""
    n = len(rows)
    return pl.DataFrame(
        {
            "job_id": [f"j{i}" for i in range(n)],
            "user": users or ["u"] * n,
            "vc": vcs or ["vc"] * n,
            "name": ["job"] * n,
            "submit_time": [T0 + timedelta(seconds=r[0]) for r in rows],
            "start_time": [None] * n,
            "run_s": [float(r[1]) for r in rows],
            "gpus": [float(r[2]) for r in rows],
            "gpu_type": [None] * n,
        },
        schema_overrides={"start_time": pl.Datetime("us", "UTC"), "gpu_type": pl.String},
    )
