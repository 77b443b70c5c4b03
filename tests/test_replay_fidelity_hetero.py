"""Heterogeneous GPUs: a throughput table (job class x GPU model -> speed) slows or
speeds jobs by the model they land on; ``hetero`` prefers the faster model; runs report
the effective throughput. Expected values are worked out by hand."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from gpu_trace.errors import InputError
from gpu_trace.replay.cluster import from_groups
from gpu_trace.replay.config import ReplayConfig
from gpu_trace.replay.simulate import replay
from gpu_trace.replay.throughput import load

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def jobs(names: list[str]) -> pl.DataFrame:
    n = len(names)
    return pl.DataFrame(
        {
            "job_id": [f"j{i}" for i in range(n)],
            "user": ["u"] * n,
            "vc": ["vc"] * n,
            "name": names,
            "submit_time": [T0] * n,
            "start_time": [None] * n,
            "run_s": [100.0] * n,
            "gpus": [1.0] * n,
            "gpu_type": [None] * n,
        },
        schema_overrides={"start_time": pl.Datetime("us", "UTC"), "gpu_type": pl.String},
    )


@pytest.fixture
def table(tmp_path: Path) -> Path:
    p = tmp_path / "tp.csv"
    p.write_text(
        "job_class,gpu_type,throughput\nresnet*,V100,2.0\nresnet*,K80,0.5\n*,V100,1.5\n",
        encoding="utf-8",
    )
    return p


def test_table_rules_first_match_then_default(table: Path, tmp_path: Path) -> None:
    t = load(table)
    assert t.speed("resnet50", "V100") == 2.0
    assert t.speed("resnet50", "K80") == 0.5
    assert t.speed("bert", "V100") == 1.5  # the wildcard row
    assert t.speed("bert", "K80") == 1.0  # no rule: the default
    toml = tmp_path / "tp.toml"
    toml.write_text('default = 0.8\n[throughput."bert"]\nA100 = 3\n', encoding="utf-8")
    t = load(toml)
    assert (t.speed("bert", "A100"), t.speed("bert", "V100")) == (3.0, 0.8)
    bad = tmp_path / "bad.csv"
    bad.write_text("job_class,gpu_type,throughput\nx,V100,fast\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"bad.csv.*line 2.*positive number"):
        load(bad)


def run(names: list[str], placement: str, table: Path | None) -> Any:
    spec = from_groups([(1, 1, "K80"), (1, 1, "V100")])  # node 0: K80, node 1: V100
    cfg = ReplayConfig(source="t", placement=placement, throughput=str(table) if table else None)
    return replay(jobs(names), spec, cfg)


def test_speed_follows_the_gpu_model_and_hetero_prefers_the_fast_one(table: Path) -> None:
    # one resnet job (100 s of reference work): consolidate takes the first node (K80,
    # speed 0.5): 200 s; hetero takes the V100 (2.0): 50 s.
    r = run(["resnet50"], "consolidate", table)
    assert r.jobs["jct_s"].to_list() == [200.0]
    assert r.runs["throughput_mean"][0] == 0.5
    r = run(["resnet50"], "hetero", table)
    assert r.jobs["jct_s"].to_list() == [50.0]
    assert r.jobs["speed"].to_list() == [2.0]
    # two at once: the first gets the V100 (50 s), the second the K80 (200 s);
    # effective throughput = (100 + 100) / (100 / 2 + 100 / 0.5) = 200 / 250 = 0.8
    r = run(["resnet50", "resnet18"], "hetero", table)
    assert sorted(r.jobs["jct_s"].to_list()) == [50.0, 200.0]
    assert r.runs["throughput_mean"][0] == pytest.approx(0.8)


def test_without_a_table_every_model_is_the_reference() -> None:
    r = run(["resnet50"], "hetero", None)
    assert r.jobs["jct_s"].to_list() == [100.0]
    assert r.runs["throughput_mean"][0] == 1.0
