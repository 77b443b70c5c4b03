"""The per-job columns are declared once (gpu_trace/replay/kernel/job_table.py) and the engine,
the read-only view, the policy protocol and the result all follow the declaration; the
what-ifs leave the cluster state exactly as they found it.
"""

from __future__ import annotations

import array
import math
from typing import Any, get_type_hints

import numpy as np
import pytest

from gpu_trace.replay.admission.fits import Fits, FitsConfig
from gpu_trace.replay.cluster import parse_spec
from gpu_trace.replay.kernel import job_table, whatif
from gpu_trace.replay.kernel.engine import Engine, EngineOptions
from gpu_trace.replay.kernel.view import PolicyView
from gpu_trace.replay.placement.consolidate import Consolidate
from gpu_trace.replay.policy import EngineView, NoConfig
from gpu_trace.replay.scheduling.fifo import Fifo, FifoConfig
from gpu_trace.replay.workload import Workload
from tests.test_replay_golden import frame


def _engine(rows: list[tuple[float, float, int]], spec: str = "4x4") -> Engine:
    e = Engine(Workload.from_jobs(frame(rows)), parse_spec(spec), EngineOptions())
    e.bind(
        Fifo(FifoConfig(), e),
        Consolidate(NoConfig(), e),
        Fits(FitsConfig(), e),
    )
    return e


def test_every_declared_column_is_held_by_the_engine_in_its_roles_container() -> None:
    rows = [(0, 10, 2), (1, 5, 1), (2, 7, 4)]
    e = _engine(rows)
    names = [name for name, _ in job_table.engine_columns()]
    assert len(names) == len(set(names))
    containers = {"static": tuple, "state": array.array, "outcome": list}
    for name, col in job_table.engine_columns():
        value = getattr(e, name)
        assert isinstance(value, containers[col.role]), name
        if name != "speed_code":  # empty without a speed table
            assert len(value) == len(rows), name
    # initial values as declared: work left starts as the duration, ends unknown
    assert list(e.remaining) == [10.0, 5.0, 7.0]
    assert list(e.end_time) == [math.inf] * 3
    assert e.first_start == [math.inf] * 3 and e.preemptions == [0, 0, 0]
    assert e.ngpu == (2, 1, 4) and e.arrival == (0.0, 1.0, 2.0)


def test_policies_see_every_policy_column_read_only_and_no_engine_only_column() -> None:
    e = _engine([(0, 10, 2), (1, 5, 1)])
    view = e.view
    policy = {name for name, _ in job_table.policy_columns()}
    engine_only = {name for name, _ in job_table.engine_columns()} - policy
    assert engine_only >= {"first_start", "finish", "version", "overhead"}
    for name in policy:
        got = getattr(view, name)
        assert list(got) == list(getattr(e, name)), name
        with pytest.raises((TypeError, AttributeError)):
            got[0] = 0  # a tuple, or a read-only memoryview of the engine's buffer
        with pytest.raises(AttributeError):
            setattr(view, name, ())
    for name in engine_only:
        assert not hasattr(view, name), name
    # the view shares the engine's memory: a change by the engine shows at once
    e.remaining[1] = 1.5
    assert view.remaining[1] == 1.5


def test_the_policy_protocol_declares_every_policy_column() -> None:
    hints = get_type_hints(EngineView, include_extras=True)
    for name, _ in job_table.policy_columns():
        assert name in hints, name
    # and the view's slots are exactly its members, the columns and the actions
    slots = set(PolicyView.__slots__)
    assert {name for name, _ in job_table.policy_columns()} <= slots


def test_the_result_fields_are_the_outcome_columns_that_name_one() -> None:
    e = _engine([(0, 10, 2), (1, 5, 4)], spec="4x4")
    e.run()
    got = e.result_arrays()
    declared = [c.result for _, c in job_table.engine_columns() if c.result]
    assert list(got) == declared == ["start", "finish", "preemptions", "nodes", "speed"]
    # hand-worked: job 0 runs 0-10 on 2 GPUs; job 1 needs all 4, starts at 10, ends 15
    assert got["start"].tolist() == [0.0, 10.0]
    assert got["finish"].tolist() == [10.0, 15.0]
    assert got["preemptions"].dtype == np.int32


def test_a_never_started_job_reads_nan_not_inf() -> None:
    e = _engine([(0, 10, 8)], spec="4x4")  # larger than the cluster: never starts
    e.run()
    got = e.result_arrays()
    assert math.isnan(got["start"][0]) and math.isnan(got["finish"][0])


def _free(e: Engine) -> list[list[int]]:
    return [list(row) for row in e.state.free]


def test_placeable_after_leaves_the_cluster_state_exactly_as_it_was() -> None:
    # 1 node of 4 GPUs: jobs 0 (2 GPUs) and 1 (1 GPU) run; job 2 asks 4
    e = _engine([(0, 10, 2), (0, 20, 1), (1, 5, 4)])
    e.run(until=0.5)
    assert set(e.alloc) == {0, 1}
    before, used = _free(e), e.state.used_milli
    got = e.placeable_after(2, [[0], [1]])
    assert got is not None and got.groups == 2  # both must end first
    assert sorted(g for _, g, _ in got.parts) == [0, 1, 2, 3]
    # the free GPU now (one of 4) is what a job started now must leave alone
    assert sum(m for _, _, m in got.hold) == 1000
    assert _free(e) == before and e.state.used_milli == used
    assert e.placeable_after(2, [[0]]) is None  # ending job 0 alone leaves 3 GPUs


def test_placeable_after_restores_the_state_when_the_placement_raises() -> None:
    e = _engine([(0, 10, 2), (0, 20, 1), (1, 5, 4)])
    e.run(until=0.5)
    before = _free(e)

    class Broken:
        def place(self, *_: Any) -> None:
            msg = "placement bug"
            raise RuntimeError(msg)

    job = whatif.Asking(2, 4, 1000, e.mask[2], e.cpu_req, e.mem_req, Broken())
    with pytest.raises(RuntimeError, match="placement bug"):
        whatif.placeable_after(e.state, e.alloc, job, [[0], [1]])
    assert _free(e) == before


def test_fit_probe_counts_released_jobs_without_touching_the_state() -> None:
    e = _engine([(0, 10, 2), (0, 20, 1), (1, 5, 4)])
    e.run(until=0.5)
    before = _free(e)
    probe = e.fit_probe(2)
    assert not probe.ok
    assert not probe.release(1)  # 1 free + 1 = 2 of 4
    assert probe.release(0)  # + 2 = 4
    assert _free(e) == before
