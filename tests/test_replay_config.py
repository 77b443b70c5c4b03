"""One config, one engine builder: ``replay run`` / ``compare`` / ``live`` / ``sweep``
take their run options from :class:`ReplayConfig`'s declarations, ``run`` and
``compare`` share every option, and the simulator and the live executor both build
their engine with :func:`gpu_trace.replay.build.build_engine`."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import typer
from typer.testing import CliRunner

from gpu_trace.cli import app
from gpu_trace.cli import replay as replay_cli
from gpu_trace.plugins import option_specs
from gpu_trace.replay import build
from gpu_trace.replay.cluster import parse_spec
from gpu_trace.replay.config import ReplayConfig
from gpu_trace.replay.kernel.engine import Engine
from gpu_trace.replay.live.executor import LiveEngine, LiveOptions, run_live
from gpu_trace.replay.simulate import replay

runner = CliRunner()
T0 = datetime(2020, 1, 1, tzinfo=UTC)

AXES = {"--policy": "--policies", "--placement": "--placements"}
"""What `run` names once and `compare` varies (its axes, lists of names)."""
RUN_ONLY = {"--run-id"}
"""One run's id: each run of a comparison gets its own, derived from its config."""


def commands() -> dict[str, Any]:
    """The replay group's commands as click builds them (what a user's flags meet)."""
    return dict(typer.main.get_group(replay_cli.app).commands)


def flags(command: Any) -> set[str]:
    """Every spelling the command accepts, hidden (deprecated) ones included."""
    return {o for p in command.params for o in (*p.opts, *p.secondary_opts)}


def by_flag(command: Any) -> dict[str, Any]:
    return {o: p for p in command.params for o in p.opts if o.startswith("--")}


def test_run_and_compare_share_every_option() -> None:
    # An option added to one of the two commands only fails here: they differ only in
    # compare's axes (lists of names where run takes one) and run's single run id.
    cmds = commands()
    run, compare = flags(cmds["run"]), flags(cmds["compare"])
    assert run - set(AXES) - RUN_ONLY == compare - set(AXES.values())
    assert set(AXES) <= run and set(AXES.values()) <= compare


def test_declared_config_options_are_the_commands_options() -> None:
    # Each ReplayConfig field declared with a help text is an option of run (and of
    # compare unless it is an axis or the run id), with the declaration's flag, help
    # and default: the commands do not keep copies of their own.
    cmds = commands()
    declared = [s for s in option_specs(ReplayConfig) if s.help]
    assert {s.name for s in declared} >= {"load", "faults", "power_off", "checkpoint_s"}
    for name in ("run", "compare", "live", "sweep"):
        params = by_flag(cmds[name])
        for spec in declared:
            if spec.flag not in params:
                assert name != "run", spec.flag
                assert name != "compare" or spec.flag in AXES or spec.flag in RUN_ONLY
                continue
            param = params[spec.flag]
            assert getattr(param, "help", None) == spec.help, (name, spec.flag)
            if spec.parse is None:
                assert param.default == spec.default, (name, spec.flag)


def test_a_declared_check_refuses_a_value_in_every_command() -> None:
    # --restore-s is declared once with its range; run, compare and live all refuse
    # a negative one as a usage error (exit 2) before anything runs.
    for cmd in (["run"], ["compare"], ["live", "--out", "x"]):
        result = runner.invoke(app, ["replay", *cmd, "-s", "openb", "--restore-s", "-5"])
        assert result.exit_code == 2, (cmd, result.output)
        assert "--restore-s must be >= 0" in result.output


def _jobs(rows: list[tuple[float, float, float]]) -> pl.DataFrame:
    """(submit offset s, run_s, gpus) rows as canonical jobs."""
    return pl.DataFrame(
        {
            "job_id": [f"j{i}" for i in range(len(rows))],
            "user": ["u"] * len(rows),
            "submit_time": [T0 + timedelta(seconds=r[0]) for r in rows],
            "run_s": [float(r[1]) for r in rows],
            "gpus": [float(r[2]) for r in rows],
        }
    )


def test_simulation_and_live_replay_build_through_build_engine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Both paths must bind their policies through the one builder: a driver that
    # assembled its own engine would not be seen here.
    seen: list[tuple[type[Engine], str, str, Any]] = []
    bind = build.bind_policies

    def spy(engine: Engine, config: ReplayConfig) -> None:
        bind(engine, config)
        seen.append(
            (type(engine), type(engine.scheduler).__name__, type(engine.placement).__name__, 0)
        )

    monkeypatch.setattr(build, "bind_policies", spy)
    config = ReplayConfig(source="synthetic", scheduler="sjf", placement="spread", run_id="b")
    jobs = _jobs([(0, 10, 1), (1, 5, 1)])
    replay(jobs, parse_spec("2x1"), config)
    run_live(jobs, config, LiveOptions(devices="emulated:2", time_scale=1000.0), tmp_path / "r")
    assert [(kind, sched, place) for kind, sched, place, _ in seen] == [
        (Engine, "Sjf", "Spread"),
        (LiveEngine, "Sjf", "Spread"),
    ]


def test_build_engine_takes_the_configs_mechanism_options() -> None:
    # restore_s, multinode slowdown, seed and departures come from the config.
    config = ReplayConfig(
        source="s", restore_s=7.0, multinode_slowdown=1.5, seed=3, departures=False
    )
    e = build.build_engine(config, _workload(), parse_spec("2x1"))
    assert (e.options.restore_s, e.options.multinode_slowdown) == (7.0, 1.5)
    assert (e.options.seed, e.options.departures) == (3, False)
    with pytest.raises(ValueError, match="not both"):
        build.build_engine(config, _workload(), parse_spec("2x1"), e.clock, make=lambda *a: e)


def _workload() -> Any:
    from gpu_trace.replay.workload import Workload

    return Workload.from_jobs(_jobs([(0, 10, 1)]))


def test_compare_writes_run_directories_with_out(store_copy: Path, tmp_path: Path) -> None:
    # compare gained run's --out: one run directory per run, named by its run id.
    out = tmp_path / "runs"
    result = runner.invoke(
        app,
        [
            "replay", "compare", "-s", "openb", "--store", str(store_copy), "--gpus", "64x8",
            "--policies", "fifo,sjf", "--out", str(out),
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    dirs = sorted(p.name for p in out.iterdir())
    assert len(dirs) == 2
    for d in dirs:
        resolved = json.loads((out / d / "config.resolved.json").read_text(encoding="utf-8"))
        assert resolved["run_id"] == d
        assert (out / d / "replay_jobs.parquet").exists()
    assert {d.split("-")[0] for d in dirs} == {"fifo", "sjf"}


@pytest.mark.parametrize(
    ("fixed", "message"),
    [
        ('faults = "mtbf=50000h,mtr=2h"', "--faults 'mtbf=50000h,mtr=2h': expected"),
        ('power_off = "boot=5m"', "--power-off 'boot=5m' needs idle=D"),
    ],
)
def test_a_bad_text_option_in_a_sweep_fails_before_any_run(
    tmp_path: Path, fixed: str, message: str
) -> None:
    # The text options are parsed where they are given: a sweep file's are checked with
    # the grid (naming the file), not once per run after the sweep has started.
    from gpu_trace.replay import sweep_grid as sg

    path = tmp_path / "s.toml"
    path.write_text(f'source = "openb"\n[fixed]\n{fixed}\n[grid]\nseed = "0-1"\n')
    with pytest.raises(sg.SweepSpecError, match=re.escape(f"{path}: {message}")):
        sg.load(path).configs()


def test_run_gained_by_and_format(store_copy: Path) -> None:
    # run takes compare's --by and --format: the summary as CSV, then the per-user
    # breakdown; every finished job of the run is counted once in it.
    result = runner.invoke(
        app,
        [
            "replay", "run", "-s", "openb", "--store", str(store_copy), "--gpus", "64x8",
            "--run-id", "by-test", "--by", "user", "-f", "csv",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    lines = result.stdout.strip().splitlines()  # tables one after the other
    head = lines[0].split(",")
    assert head[:3] == ["run_id", "scheduler", "placement"]
    row = dict(zip(head, lines[1].split(","), strict=True))
    assert row["run_id"] == "by-test"
    start = next(i for i, line in enumerate(lines) if line.startswith("user,"))
    per_user = pl.read_csv("\n".join(lines[start:]).encode())
    assert per_user.columns[:2] == ["user", "jobs"]
    assert int(per_user["jobs"].sum()) == int(row["jobs_finished"])
