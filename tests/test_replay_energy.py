"""Energy in replay: a fixed schedule against the analytic sum, a user power file,
failed nodes drawing nothing, and energy never negative."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpu_trace.errors import InputError
from gpu_trace.replay import ReplayConfig, replay
from gpu_trace.replay.cluster import parse_spec
from tests.replay_frames import jobs_frame

KWH = 3.6e6


def by_id(result: Any, col: str) -> dict[str, float]:
    return dict(zip(result.jobs["job_id"], result.jobs[col], strict=True))


def test_fixed_schedule_energy_equals_analytic_sum() -> None:
    # two A100 nodes of 2 GPUs (built-in model: A100 idle 50 W, busy 400 W; host 400 W
    # per 8-GPU node = 50 W per GPU). j0: 2 GPUs 0..100 s; j1: 1 GPU 10..60 s.
    # run (0..100 s): baseline 4 GPUs x (50 + 50) = 400 W x 100 s = 40,000 J
    #   + busy extra (400 - 50) W: j0 2 x 350 x 100 = 70,000 J, j1 1 x 350 x 50 = 17,500 J
    #   = 127,500 J = 0.0354167 kWh; mean power 1,275 W
    # per job (busy + host share): j0 2 x 100 x 450 = 90,000 J; j1 1 x 50 x 450 = 22,500 J
    cfg = ReplayConfig(source="t", power="gpu-model", bin_s=50)
    r = replay(jobs_frame([(0, 100, 2), (10, 50, 1)]), parse_spec("4x2:A100"), cfg)
    row = r.runs.row(0, named=True)
    assert row["energy_kwh"] == pytest.approx(127_500 / KWH)
    assert row["power_mean_w"] == pytest.approx(1275.0)
    e = by_id(r, "energy_kwh")
    assert e["j0"] == pytest.approx(90_000 / KWH)
    assert e["j1"] == pytest.approx(22_500 / KWH)
    # bins of 50 s: [0, 50) 400 + 700 + 350 x 40/50 = 1,380 W; [50, 100) 400 + 700 +
    # 350 x 10/50 = 1,170 W
    assert r.timeseries["power_w"].to_list() == pytest.approx([1380.0, 1170.0])


def test_user_power_file_overrides_the_table(tmp_path: Path) -> None:
    # a file making A100 draw 0 idle / 100 busy and no host: energy = busy GPU-s x 100 W
    f = tmp_path / "p.toml"
    f.write_text(
        "[gpu.A100]\nidle_w = 0.0\nbusy_w = 100.0\n[host]\nbaseline_w = 0.0\ngpus_per_node = 8\n"
    )
    cfg = ReplayConfig(source="t", power=str(f))
    r = replay(jobs_frame([(0, 100, 2), (10, 50, 1)]), parse_spec("4x2:A100"), cfg)
    # (2 x 100 + 1 x 50) GPU-s x 100 W = 25,000 J
    assert r.runs["energy_kwh"][0] == pytest.approx(25_000 / KWH)
    bad = tmp_path / "bad.toml"
    bad.write_text("[gpu.A100]\nidle_w = 500.0\nbusy_w = 100.0\n")
    with pytest.raises(InputError, match=r"idle_w 500\.0 > busy_w 100\.0"):
        replay(
            jobs_frame([(0, 10, 1)]),
            parse_spec("2x2:A100"),
            ReplayConfig(source="t", power=str(bad)),
        )


def test_failed_node_draws_nothing_while_down() -> None:
    # V100 (idle 40, busy 300, host 50 per GPU), two 1-GPU nodes. j0 1 GPU 0..1000 s on
    # node 0; node 1 fails at 200 s and is repaired at 700 s (no job on it).
    # baseline: 2 x 90 W x 1000 s - 1 x 90 W x 500 s = 135,000 J; busy extra 260 x 1000
    # = 260,000 J -> 395,000 J
    cfg = ReplayConfig(source="t", power="gpu-model", faults="fail=200@1,mttr=500")
    r = replay(jobs_frame([(0, 1000, 1)]), parse_spec("2x1:V100"), cfg)
    assert r.runs["energy_kwh"][0] == pytest.approx(395_000 / KWH)
    assert r.runs["node_failures"][0] == 1


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.integers(0, 500), st.integers(0, 300), st.sampled_from([0.5, 1.0, 2.0, 4.0])),
        min_size=1,
        max_size=15,
    ),
    st.booleans(),
)
def test_energy_never_negative_and_bounded(
    rows: list[tuple[int, int, float]], faults: bool
) -> None:
    cfg = ReplayConfig(
        source="t",
        power="gpu-model",
        faults="mtbf=2000,mttr=100" if faults else None,
        checkpoint_s=60,
    )
    spec = parse_spec("16x4:V100")
    r = replay(jobs_frame([(float(a), float(d), g) for a, d, g in rows]), spec, cfg)
    row = r.runs.row(0, named=True)
    e = r.jobs["energy_kwh"].to_numpy()
    assert (e >= 0).all()
    if r.timeseries.height:
        assert (r.timeseries["power_w"] >= 0).all()
    # never above every GPU busy with every node on, over the run's span
    t = r.engine.timeline.time
    span = (t[-1] - t[0]) if len(t) > 1 else 0.0
    assert (
        row["energy_kwh"] is None or 0 <= row["energy_kwh"] <= 16 * (300 + 50) * span / KWH + 1e-12
    )


def test_power_off_saving_and_jct_hand_computed() -> None:
    # two V100 nodes of 2 GPUs (idle 40 + host 50 = 90 W per GPU, 180 W per node; busy
    # 300 W). j0 1 GPU 0..100 s on node 0; j1 2 GPUs arrives at 5000 s. Power-off: idle
    # 600 s, boot 300 s, checks every 60 s.
    # node 1 idle from 0: off at the 600 s check; node 0 last seen busy at the 60 s
    # check: off at 660. j1 waits; the 5040 s check wakes one node (node 0), which
    # boots until 5340: j1 runs 5340..5440 (JCT 440 s instead of 100 s always-on).
    rows = [(0, 100, 1), (5000, 100, 2)]
    spec = parse_spec("4x2:V100")
    cfg = ReplayConfig(source="t", power="gpu-model", power_off="idle=600,boot=300,check=60")
    r = replay(jobs_frame(rows), spec, cfg)
    assert by_id(r, "finish_time_s") == {"j0": 100.0, "j1": 5440.0}
    row = r.runs.row(0, named=True)
    assert row["node_boots"] == 1
    # baseline 360 W x 5440 s - 180 W x (5440 - 600) [node 1] - 180 W x (5340 - 660)
    # [node 0] = 244,800 J; busy extra 260 W x (1 x 100 + 2 x 100) GPU-s = 78,000 J; the
    # boot 300 s x 180 W = 54,000 J -> 376,800 J
    assert row["energy_kwh"] == pytest.approx(376_800 / KWH)
    # saved vs always-on: 90 W x (2 x 4840 + 2 x 4680) GPU-s - 54,000 J = 1,659,600 J
    assert row["energy_saved_kwh"] == pytest.approx(1_659_600 / KWH)
    on = replay(jobs_frame(rows), spec, ReplayConfig(source="t", power="gpu-model"))
    assert by_id(on, "finish_time_s")["j1"] == 5100.0
    # always-on: 360 W x 5100 s + 78,000 J = 1,914,000 J
    assert on.runs["energy_kwh"][0] == pytest.approx(1_914_000 / KWH)


def test_power_off_reserve_keeps_idle_nodes_on() -> None:
    # as above with reserve=1: at 600 s two nodes are idle, one may go (node 1); at 660
    # node 0 is the only idle node on, kept as the reserve: j1 starts at once at 5000.
    rows = [(0, 100, 1), (5000, 100, 2)]
    cfg = ReplayConfig(
        source="t", power="gpu-model", power_off="idle=600,boot=300,reserve=1,check=60"
    )
    r = replay(jobs_frame(rows), parse_spec("4x2:V100"), cfg)
    assert by_id(r, "finish_time_s")["j1"] == 5100.0
    row = r.runs.row(0, named=True)
    assert row["node_boots"] == 0
    # 360 W x 5100 s - 180 W x (5100 - 600) + 78,000 J = 1,104,000 J
    assert row["energy_kwh"] == pytest.approx(1_104_000 / KWH)
    assert row["energy_saved_kwh"] == pytest.approx(180 * 4500 / KWH)


def test_bad_power_off_is_an_error() -> None:
    from gpu_trace.errors import GpuTraceError

    for bad, want in (
        ("boot=5m", "needs idle"),
        ("idle=x", "not a duration"),
        ("idle=1m,zz=1", "expected"),
    ):
        with pytest.raises(GpuTraceError, match=want):
            replay(
                jobs_frame([(0, 10, 1)]), parse_spec("2x2"), ReplayConfig(source="t", power_off=bad)
            )
