"""Every ``gpu-trace analyze`` command is generated from an analysis declaration
(``PLUGIN`` / ``PLUGINS`` in ``gpu_trace/analyses/``), none is hand-written; the
generator's general extensions (a bool with one explicit flag, a hidden deprecated
spelling, no ``--source``) behave like the hand-written options they replaced; and one
migrated command's value, worked out by hand on a three-pod store, comes out of the CLI.
"""

from __future__ import annotations

import ast
import inspect
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from gpu_trace import plugins
from gpu_trace.cli import analyze as analyze_cli
from gpu_trace.cli import app
from gpu_trace.cli.generated import add_command
from gpu_trace.plugins import option

runner = CliRunner()

#: The analyze commands gpu-trace has had since before the declarations; each must
#: still exist, under the same name.
HISTORICAL = (
    "summary",
    "utilization",
    "queueing",
    "failures",
    "energy",
    "jobs",
    "users",
    "sharing",
    "fragmentation",
    "provisioning",
    "per-job",
    "arrivals",
)


def _registered() -> dict[str, Any]:
    return {c.name or "": c.callback for c in analyze_cli.app.registered_commands}


def test_every_analyze_command_comes_from_a_declaration() -> None:
    declared = {p.name for p in plugins.builtins("analyses")}
    registered = _registered()
    assert set(HISTORICAL) <= declared
    # Every command is a built-in or installed declaration, in declared (rank) order.
    assert list(registered) == [p.name for p in plugins.analyses()]
    for name, callback in registered.items():
        # add_command wraps a generated closure; a hand-written command would be a
        # module-level function of cli/analyze.py with its own name.
        assert callback is not None and callback.__wrapped__.__qualname__.endswith(
            "add_command.<locals>.command"
        ), name


def test_cli_analyze_hand_writes_no_command() -> None:
    """No ``@app.command`` decorator is left in cli/analyze.py."""
    tree = ast.parse(Path(inspect.getfile(analyze_cli)).read_text(encoding="utf-8"))
    decorated = [
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and node.decorator_list
    ]
    assert decorated == []


def test_each_declaration_lives_in_its_analysis_module() -> None:
    for plugin in plugins.builtins("analyses"):
        module = plugin.run.__module__
        assert module.startswith("gpu_trace.analyses."), (plugin.name, module)
        assert plugin.help.strip() and plugin.options.__doc__


def test_per_user_is_one_flag_and_per_job_has_no_source() -> None:
    users = runner.invoke(app, ["analyze", "users", "--help"], terminal_width=200)
    assert "--per-user" in users.output and "--no-per-user" not in users.output
    assert "--source" in users.output
    per_job = runner.invoke(app, ["analyze", "per-job", "--help"], terminal_width=200)
    assert per_job.exit_code == 0 and "--source" not in per_job.output
    assert "--jobs " not in runner.invoke(app, ["analyze", "energy", "--help"]).output


@dataclass(frozen=True)
class _Renamed:
    path: Path | None = option(None, "A file.", flag="--new-file", deprecated="--old")


def test_deprecated_spelling_still_works_with_a_warning(tmp_path: Path) -> None:
    seen: list[Any] = []
    toy = typer.Typer()
    add_command(toy, "toy", "A toy.", [], _Renamed, lambda fixed, opts: seen.append(opts))
    toy.command("other")(lambda: None)  # a second command keeps "toy" a subcommand
    r = runner.invoke(toy, ["toy", "--old", "x.csv"])
    assert r.exit_code == 0, r.output
    assert seen == [_Renamed(path=Path("x.csv"))]
    assert "--old is deprecated: use --new-file" in r.output
    r = runner.invoke(toy, ["toy", "--new-file", "y.csv"])
    assert seen[-1] == _Renamed(path=Path("y.csv")) and "deprecated" not in r.output
    assert "--old" not in runner.invoke(toy, ["toy", "--help"]).output  # hidden


POD_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time"
)
PODS = (
    # name, num_gpu, gpu_milli, created, deleted, scheduled (seconds since trace start)
    ("p0", 1, 1000, 0, 1100, 100),
    ("p1", 2, 1000, 50, 2350, 350),
    ("p2", 1, 1000, 200, 700, 200),
)


@pytest.fixture
def tiny_store(tmp_path: Path) -> Path:
    raw = tmp_path / "openb"
    raw.mkdir()
    rows = [f"{n},1000,1024,{g},{m},,LS,Succeeded,{c},{d},{s}" for n, g, m, c, d, s in PODS]
    (raw / "openb_pod_list_default.csv").write_text(
        "\n".join([POD_HEADER, *rows]) + "\n", encoding="utf-8"
    )
    (raw / "openb_node_list_gpu_node.csv").write_text(
        "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,4,V100\n", encoding="utf-8"
    )
    store = tmp_path / "store"
    r = runner.invoke(app, ["ingest", "openb", str(raw), "--store", str(store)])
    assert r.exit_code == 0, r.output
    return store


def _json(store: Path, *args: str) -> list[dict[str, Any]]:
    r = runner.invoke(app, ["analyze", *args, "--store", str(store), "-f", "json"])
    assert r.exit_code == 0, r.output
    rows: list[dict[str, Any]] = json.loads(r.stdout)
    return rows


def test_queueing_by_size_worked_out_by_hand(tiny_store: Path) -> None:
    """openb: GPUs = num_gpu x gpu_milli / 1000, queueing = scheduled - created.

    p0: 1 GPU, waits 100 - 0 = 100 s; p2: 1 GPU, waits 200 - 200 = 0 s; so the "1" bucket
    has 2 jobs, mean (100 + 0) / 2 = 50 s, median 50 s, and half started at once.
    p1: 2 GPUs, waits 350 - 50 = 300 s: the "2" bucket, 1 job, mean = median = 300 s."""
    rows = {r["size_bucket"]: r for r in _json(tiny_store, "queueing")}
    assert set(rows) == {"1", "2"}
    assert rows["1"]["jobs"] == 2
    assert rows["1"]["mean_s"] == pytest.approx(50.0)
    assert rows["1"]["median_s"] == pytest.approx(50.0)
    assert rows["1"]["zero_wait_share"] == pytest.approx(0.5)
    assert rows["2"]["jobs"] == 1
    assert rows["2"]["mean_s"] == pytest.approx(300.0)


def test_summary_gpu_hours_worked_out_by_hand(tiny_store: Path) -> None:
    """GPU hours = sum of GPUs x run time / 3600, run time = deleted - scheduled:
    p0 1 x (1100 - 100) = 1000, p1 2 x (2350 - 350) = 4000, p2 1 x (700 - 200) = 500
    GPU-seconds: 5500 / 3600 = 1.52777... GPU hours, over 3 GPU jobs."""
    (row,) = _json(tiny_store, "summary")
    assert row["gpu_jobs"] == 3
    assert row["gpu_hours"] == pytest.approx(5500 / 3600)


def test_bad_by_value_is_still_the_one_line_usage_error(tiny_store: Path) -> None:
    r = runner.invoke(app, ["analyze", "queueing", "--by", "gpu", "--store", str(tiny_store)])
    assert r.exit_code == 2
    assert "unknown --by value 'gpu'" in r.output and "Traceback" not in r.output


def test_glossaries_name_real_output_columns(tiny_store: Path) -> None:
    """A glossary entry for a column no view of the analysis writes would label nothing."""
    from gpu_trace.analyses import energy, failures, users
    from gpu_trace.analyses.inputs import Inputs

    inputs = Inputs.from_store(tiny_store)
    views: list[tuple[plugins.AnalysisPlugin, list[Any]]] = [
        (
            failures.PLUGIN,
            [failures.FailuresOptions(by="cause"), failures.FailuresOptions(mtbf=True)],
        ),
        (users.PLUGIN, [users.UsersOptions(), users.UsersOptions(per_user=True)]),
        (energy.PLUGIN, [energy.EnergyOptions(), energy.EnergyOptions(by=energy.EnergyBy.vc)]),
    ]
    for plugin, options in views:
        columns: set[str] = set()
        for chosen in options:
            columns |= set(plugin.run(inputs, chosen).lazy().collect_schema().names())
        assert plugin.glossary and set(plugin.glossary) <= columns, plugin.name
