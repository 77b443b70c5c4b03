"""The two occupancy counting rules, checked against HeliosArtifact's own published
per-minute sequence (``data/samples/processed/helios-artifact/``, provenance in
``data/samples/PROVENANCE-upstream.md``).

HeliosArtifact ``analysis/trace_parser.py`` ``parse_sequence`` (read, not copied): each
job's start and end are floored to the minute (``.replace(second=0)``), the job adds
its ``gpu_num`` to every minute ``t`` with ``start <= t <= end``, and
``running_gpu_num`` is then capped with ``combine(total_gpu_num, min)``;
``gpu_utilization = (running_gpu_num / total_gpu_num).round(3)``.
"""

from __future__ import annotations

import datetime as dt

import polars as pl
import pytest

from gpu_trace.analyses import occupancy as occ
from tests.conftest import SAMPLES

U = dt.UTC
EXCERPT = SAMPLES / "processed" / "helios-artifact" / "Earth_vcJkd_cluster_sequence_vc.head.csv"
NO_MACHINES = pl.LazyFrame(
    schema={
        "source": pl.String,
        "cluster": pl.String,
        "dataset": pl.String,
        "gpus": pl.Int32,
        "gpu_type": pl.String,
    }
)


def _published() -> pl.DataFrame:
    return pl.read_csv(EXCERPT, try_parse_dates=True).with_columns(
        pl.col("time").dt.replace_time_zone("UTC")
    )


def _jobs(spans: list[tuple[dt.datetime, dt.datetime, float]]) -> pl.LazyFrame:
    return pl.LazyFrame(
        {
            "source": ["helios"] * len(spans),
            "cluster": ["earth"] * len(spans),
            "vc": ["vcJkd"] * len(spans),
            "start_time": [s for s, _, _ in spans],
            "end_time": [e for _, e, _ in spans],
            "gpus": [g for _, _, g in spans],
        },
        schema_overrides={
            "start_time": pl.Datetime("us", "UTC"),
            "end_time": pl.Datetime("us", "UTC"),
        },
    )


def _capacity(gpus: int, days: list[dt.datetime]) -> pl.LazyFrame:
    return pl.LazyFrame(
        {
            "source": ["helios"] * len(days),
            "cluster": ["earth"] * len(days),
            "vc": ["vcJkd"] * len(days),
            "time": days,
            "gpus": [gpus] * len(days),
            "basis": ["published"] * len(days),
        },
        schema_overrides={"time": pl.Datetime("us", "UTC")},
    )


def _at(hh: int, mm: int, ss: int) -> dt.datetime:
    return dt.datetime(2020, 5, 14, hh, mm, ss, tzinfo=U)


def test_helios_rule_reproduces_the_published_sequence() -> None:
    pub = _published()
    # The excerpt's only changes: +1 GPU at 22:01, -1 at 22:20, +1 at 22:47, -1 at 23:07,
    # i.e. under the artifact's rule two 1-GPU jobs whose floored start / end minutes are
    # 22:01-22:19 and 22:47-23:06. Their seconds are not published: any second inside
    # those minutes gives the same sequence, so two different choices are checked.
    steps = pub.filter(pl.col("running_gpu_num").diff() != 0)
    assert steps["time"].dt.strftime("%H:%M").to_list() == ["22:01", "22:20", "22:47", "23:07"]
    assert set(pub["total_gpu_num"].to_list()) == {16}
    days = [dt.datetime(2020, 5, d, tzinfo=U) for d in range(1, 15)]
    for sec_in, sec_out in ((0, 59), (37, 5)):
        jobs = _jobs(
            [
                (_at(22, 1, sec_in), _at(22, 19, sec_out), 1.0),
                (_at(22, 47, sec_in), _at(23, 6, sec_out), 1.0),
            ]
        )
        got = occ.occupancy(
            jobs, _capacity(16, days), NO_MACHINES, freq="1min", by="vc", rule=occ.Rule.helios
        ).collect()
        full = pub.select("time", "running_gpu_num", "gpu_utilization").join(
            got.select("time", "allocated_gpus", "capacity_gpus"), on="time", how="left"
        )
        ours = full["allocated_gpus"].fill_null(0.0)  # we report from first start to last end
        assert ours.to_list() == full["running_gpu_num"].cast(pl.Float64).to_list()
        shown = (full["allocated_gpus"] / full["capacity_gpus"]).round(3).fill_null(0.0)
        assert shown.to_list() == full["gpu_utilization"].to_list()


def test_rules_agree_only_where_no_job_starts_or_ends() -> None:
    # One 1-GPU job 22:01:37 - 22:19:05: the artifact counts the whole start and end
    # minutes; the time-weighted mean counts 23 s of 22:01 and 5 s of 22:19.
    jobs = _jobs([(_at(22, 1, 37), _at(22, 19, 5), 1.0)])
    helios = occ.allocation(jobs, freq="1min", rule=occ.Rule.helios).collect()
    weighted = occ.allocation(jobs, freq="1min").collect()
    assert helios["time"].to_list() == weighted["time"].to_list()
    h = dict(zip(helios["time"].dt.strftime("%H:%M"), helios["allocated_gpus"], strict=True))
    w = dict(zip(weighted["time"].dt.strftime("%H:%M"), weighted["allocated_gpus"], strict=True))
    assert h["22:01"] == 1.0 and w["22:01"] == pytest.approx(23 / 60)
    assert h["22:19"] == 1.0 and w["22:19"] == pytest.approx(5 / 60)
    inner = [k for k in h if k not in ("22:01", "22:19")]
    assert inner and all(h[k] == w[k] == 1.0 for k in inner)


def test_helios_rule_counts_a_job_within_one_minute_and_caps_at_installed() -> None:
    # A 10 s job counts a whole minute under the artifact's rule; 20 GPUs running on a
    # 16-GPU VC show 16 (``combine(total_gpu_num, min)``), the time-weighted rule 20.
    jobs = _jobs(
        [
            (_at(10, 0, 20), _at(10, 0, 30), 2.0),
            (_at(11, 0, 0), _at(11, 5, 0), 12.0),
            (_at(11, 0, 0), _at(11, 5, 0), 8.0),
        ]
    )
    cap = _capacity(16, [dt.datetime(2020, 5, 14, tzinfo=U)])
    helios = occ.occupancy(jobs, cap, NO_MACHINES, freq="1min", by="vc", rule=occ.Rule.helios)
    weighted = occ.occupancy(jobs, cap, NO_MACHINES, freq="1min", by="vc")
    h = helios.collect().filter(pl.col("allocated_gpus") > 0)
    w = weighted.collect().filter(pl.col("allocated_gpus") > 0)
    assert h["time"].dt.strftime("%H:%M").to_list()[0] == "10:00"
    assert h["allocated_gpus"][0] == 2.0
    assert w["allocated_gpus"][0] == pytest.approx(2 * 10 / 60)
    at_11 = h.filter(pl.col("time").dt.strftime("%H:%M") == "11:02")
    assert at_11["allocated_gpus"].to_list() == [16.0]
    assert at_11["allocation_pct"].to_list() == [100.0]
    assert w.filter(pl.col("time").dt.strftime("%H:%M") == "11:02")["allocated_gpus"][0] == 20.0


@pytest.mark.parametrize("rule", list(occ.Rule))
def test_no_gpu_job_gives_an_empty_series(rule: occ.Rule) -> None:
    jobs = _jobs([(_at(10, 0, 0), _at(11, 0, 0), 0.0)])  # a CPU job only
    got = occ.occupancy(jobs, _capacity(16, [_at(0, 0, 0)]), NO_MACHINES, by="vc", rule=rule)
    frame = got.collect()
    assert frame.height == 0
    assert {"time", "allocated_gpus", "allocation_pct"} <= set(frame.columns)


def _oracle(
    spans: list[tuple[str, int, int, float]], step: int, rule: occ.Rule
) -> dict[tuple[str, int], float]:
    """Each group's bins from first start to last end, by the rules' definitions, one
    job and one bin at a time (seconds since 2020-05-14 00:00)."""
    out: dict[tuple[str, int], float] = {}
    for group in {g for g, _, _, _ in spans}:
        mine = [(s, e, n) for g, s, e, n in spans if g == group]
        lo = min(s for s, _, _ in mine) // step
        hi = max(e for _, e, _ in mine) // step
        for k in range(lo, hi + 1):
            a, b = k * step, (k + 1) * step
            if rule is occ.Rule.time_weighted:
                value = sum(n * max(0, min(e, b) - max(s, a)) for s, e, n in mine) / step
            else:
                value = sum(n for s, e, n in mine if s // step <= k <= e // step)
            out[(group, k)] = value
    return out


@pytest.mark.parametrize("rule", list(occ.Rule))
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_sweep_matches_a_job_by_job_count_across_groups(rule: occ.Rule, seed: int) -> None:
    """Several VCs side by side: an event in a group's last bin (or, for the helios rule,
    the bin after a job's end) must not spill into the next group's bins."""
    import random

    rng = random.Random(seed)
    spans = []
    for _ in range(40):
        group = rng.choice(["vcA", "vcB", "vcC"])
        start = rng.randrange(0, 4 * 3600)
        spans.append((group, start, start + rng.randrange(1, 5400), float(rng.choice([1, 2, 8]))))
    base = dt.datetime(2020, 5, 14, tzinfo=U)
    jobs = pl.LazyFrame(
        {
            "source": ["helios"] * len(spans),
            "cluster": ["earth"] * len(spans),
            "vc": [g for g, _, _, _ in spans],
            "start_time": [base + dt.timedelta(seconds=s) for _, s, _, _ in spans],
            "end_time": [base + dt.timedelta(seconds=e) for _, _, e, _ in spans],
            "gpus": [n for _, _, _, n in spans],
        },
        schema_overrides={
            "start_time": pl.Datetime("us", "UTC"),
            "end_time": pl.Datetime("us", "UTC"),
        },
    )
    for freq, step in (("1min", 60), ("10min", 600)):
        got = occ.allocation(jobs, freq=freq, by=["vc"], rule=rule).collect()
        seconds = (got["time"] - base).dt.total_seconds()
        keys = [(g, int(s) // step) for g, s in zip(got["vc"], seconds, strict=True)]
        want = _oracle(spans, step, rule)
        assert sorted(keys) == sorted(want)
        for key, value in zip(keys, got["allocated_gpus"], strict=True):
            assert value == pytest.approx(want[key], abs=1e-9), (freq, key)
