"""Helpers shared by tests/test_openb_integration.py and tests/test_fuzz.py (split from
test_openb.py)."""

from __future__ import annotations

POD_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time"
)
