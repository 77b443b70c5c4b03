"""Column layouts of the other simulators' trace formats (Tiresias / Chronus CSV, Gavel
``.trace``).

They live here, below both ``loaders`` (which reads these formats) and ``replay`` (which
writes them), so that neither package has to import the other for a tuple of names.
"""

from __future__ import annotations

TIRESIAS = ("job_id", "num_gpu", "submit_time", "iterations", "model_name", "duration", "interval")
CHRONUS = (
    "job_id",
    "user",
    "num_gpu",
    "submit_time",
    "iterations",
    "model_name",
    "duration",
    "interval",
    "expect_time_list",
    "expect_value_list",
    "best_effort",
    "job_type",
)
GAVEL7 = (
    "job_type",
    "command",
    "num_steps_arg",
    "needs_data_dir",
    "total_steps",
    "arrival_time",
    "scale_factor",
)
GAVEL10 = (
    *GAVEL7[:4],
    "total_steps",
    "arrival_time",
    "scale_factor",
    "working_directory",
    "priority_weight",
    "SLO",
)

__all__ = ["CHRONUS", "GAVEL7", "GAVEL10", "TIRESIAS"]
