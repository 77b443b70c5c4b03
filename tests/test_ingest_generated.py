"""Every ``gpu-trace ingest`` command is generated from its loader's declaration (issue
#17: "a loader is added in one new file"): none is hand-written, each one's options are
its declaration's fields, a loader may take several paths, and an option read as text
(``option(parse=)``) reaches the loader parsed, through the real CLI.

Expected values are worked out by hand: the dmon sample has 5 readings (631, 634, 633,
634, 636 W on GPU 0), so with ``--start 08:12:49Z --interval 500ms`` they sit at 49.0,
49.5, 50.0, 50.5 and 51.0 s past 08:12.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import typer
from typer.main import get_command
from typer.testing import CliRunner

from gpu_trace import plugins
from gpu_trace.cli import app
from gpu_trace.cli import ingest as ingest_cli
from gpu_trace.cli.generated import add_command, path_parameter
from gpu_trace.store.parquet import read_table
from tests.conftest import SAMPLES
from tests.philly_common import FIXTURE

DMON = SAMPLES / "telemetry" / "nvidia-smi-dmon-h100.txt"
runner = CliRunner()


def run(*args: str | Path) -> Any:
    return runner.invoke(app, [str(a) for a in args], prog_name="gpu-trace")


def _main(toy: typer.Typer, *args: str) -> None:
    """Run a toy app's click command directly, not through ``CliRunner``: bench/fuzz.py
    (used by the fuzz tests) replaces ``typer.testing._get_command`` process-wide with
    one returning the real app's command, so after it a toy app run by ``CliRunner`` is
    the real app ("No such command 'two'")."""
    get_command(toy).main(list(args), prog_name="toy", standalone_mode=False)


def test_every_ingest_command_is_generated_from_a_declaration() -> None:
    declared = {p.name: p for p in plugins.loaders()}
    # ``ingest`` builds a command when it is used (issue #25), each through
    # ``_generate``: the command as registered on a typer app, before conversion.
    registered = {}
    for plugin in declared.values():
        holder = typer.Typer()
        ingest_cli._generate(holder, plugin)
        (info,) = holder.registered_commands
        registered[info.name] = info
    group = get_command(app).commands["ingest"]  # type: ignore[attr-defined]
    assert set(registered) == set(declared) == set(group.commands)
    # The seven that had hand-written commands until issue #17 are among them.
    for name in ("kubernetes", "philly", "helios", "pai2020", "nvidia-smi", "dcgmi", "gavel"):
        assert name in registered
    for name, info in registered.items():
        callback = info.callback
        assert callback is not None
        # add_command wraps its own closure (gpu_trace.cli.generated.add_command.command)
        # in the domain_errors boundary; a hand-written command would be its own function.
        inner = callback.__wrapped__  # type: ignore[attr-defined]
        assert inner.__module__ == "gpu_trace.cli.generated", name
        assert inner.__qualname__ == "add_command.<locals>.command", name
        plugin = declared[name]
        assert callback.__doc__ == plugin.help
        # Its options are exactly --store plus the declaration's fields, in field order.
        flags = [
            max(p.opts, key=len)
            for p in group.commands[name].params
            if isinstance(p, typer.core.TyperOption)
        ]
        assert flags == ["--store", *(s.flag for s in plugins.option_specs(plugin.options))]


def test_several_paths_are_one_argument_read_as_first_and_more() -> None:
    """``path_parameter(many=True)``: ``PATHS...`` (one or more) reach the body as one
    list; the real kubernetes command is declared so and refuses none (exit 2)."""
    seen: list[list[Path]] = []

    @dataclass(frozen=True)
    class _Opts:
        cluster: str = plugins.option("c", "Cluster.")

    toy = typer.Typer()
    add_command(
        toy,
        "two",
        "Two files.",
        [path_parameter("Inputs.", many=True)],
        _Opts,
        lambda given, opts: seen.append(given["paths"]),
    )
    toy.command("other")(lambda: None)  # a second command keeps "two" a subcommand
    _main(toy, "two", "pods.json", "nodes.json", "--cluster", "x")
    assert seen == [[Path("pods.json"), Path("nodes.json")]]

    kubernetes = {p.name: p for p in plugins.loaders()}["kubernetes"]
    assert kubernetes.many_paths
    r = run("ingest", "kubernetes")
    assert r.exit_code == 2 and "Missing argument" in r.output


def test_kubernetes_missing_second_path_is_one_line(tmp_path: Path) -> None:
    """The paths after the first reach the loader (``more``): a missing one is named."""
    pods = tmp_path / "pods.json"
    pods.write_text('{"kind": "List", "items": []}')
    r = run("ingest", "kubernetes", pods, tmp_path / "nodes.json", "--store", tmp_path / "s")
    assert r.exit_code == 1
    assert r.stderr.strip().splitlines() == [
        f"error: {tmp_path / 'nodes.json'}: no such file or directory"
    ]


def test_interval_is_parsed_as_a_duration_end_to_end(tmp_path: Path) -> None:
    store = tmp_path / "store"
    r = run(
        "ingest", "nvidia-smi", DMON, "--store", store, "--host", "h100a",
        "--start", "2026-07-14T08:12:49Z", "--interval", "500ms",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    samples = pl.from_arrow(read_table(store, "gpu_samples", "nvidia-smi"))
    assert isinstance(samples, pl.DataFrame)
    power = samples.filter(pl.col("metric") == "power_w").sort("time")
    first = datetime(2026, 7, 14, 8, 12, 49, tzinfo=UTC)
    assert power["time"].to_list() == [first + timedelta(seconds=0.5 * k) for k in range(5)]
    assert power["value"].to_list() == [631.0, 634.0, 633.0, 634.0, 636.0]


def test_bad_parsed_values_are_one_line_usage_errors(tmp_path: Path) -> None:
    """Exit 2, one ``error:`` line, nothing written (the store is not even created)."""
    store = tmp_path / "store"
    cases = [
        (["nvidia-smi", DMON, "--interval", "soon"], "error: --interval 'soon' is not a duration"),
        (["dcgmi", DMON, "--interval", "0"], "error: --interval must be > 0, got 0"),
        (["gavel", DMON, "--step-s", "x"], "error: --step-s 'x' is not a number of seconds"),
        (["helios", DMON, "--cluster", "venos"], "error: unknown Helios cluster 'venos'; did"),
        (["philly", FIXTURE, "--capacity", "inferred_util", "--capacity", "nope"],
         "error: unknown --capacity value 'nope'"),
    ]  # fmt: skip
    for args, message in cases:
        r = run("ingest", *args, "--store", store)
        assert r.exit_code == 2, (args, r.output)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(message), (args, r.stderr)
        assert "Traceback" not in r.output
    assert not store.exists()


def test_repeated_and_comma_list_options_mean_the_same(tmp_path: Path) -> None:
    """``--capacity a --capacity b`` is ``--capacity a,b`` (``option(repeat=True)``):
    the fixture then gets capacity rows for exactly those two inventories."""

    def bases(*args: str) -> list[str]:
        store = tmp_path / str(len(list(tmp_path.iterdir())))
        r = run("ingest", "philly", FIXTURE, "--store", store, *args)
        assert r.exit_code == 0, r.output
        capacity = pl.from_arrow(read_table(store, "capacity", "philly"))
        assert isinstance(capacity, pl.DataFrame)
        return sorted(capacity["basis"].to_list())

    repeated = bases("--capacity", "inferred_util", "--capacity", "inferred_jobs")
    assert repeated == ["inferred_jobs", "inferred_util"]
    assert bases("--capacity", "inferred_util,inferred_jobs") == repeated


def test_declared_text_default_is_parsed_once() -> None:
    """``option("1s", parse=...)``: the field holds the parsed value, help shows "1s"."""
    smi = {p.name: p for p in plugins.loaders()}["nvidia-smi"]
    spec = {s.name: s for s in plugins.option_specs(smi.options)}["interval_s"]
    assert spec.default == 1.0 and spec.default_text == "1s" and spec.flag == "--interval"
    assert smi.options().interval_s == 1.0
    r = run("ingest", "nvidia-smi", "--help")
    assert "1s" in r.output
    assert inspect.signature(smi.loader().batches).parameters["interval_s"].default == 1.0


def test_repeated_text_option_reaches_the_options_whole() -> None:
    """A repeatable ``parse`` option is parsed once from the joined texts and arrives as
    ``parse`` returns it (typer would take a returned string apart character by
    character if it were converted as the declared list)."""
    seen: list[Any] = []

    @dataclass(frozen=True)
    class _Opts:
        names: tuple[str, ...] = plugins.option(
            ("a",), "Names.", parse=lambda text: tuple(text.split(",")), repeat=True
        )
        table: str = plugins.option("all", "A table.", parse=str.upper, repeat=True)

    toy = typer.Typer()
    add_command(toy, "toy", "Toy.", [], _Opts, lambda given, opts: seen.append(opts))
    toy.command("other")(lambda: None)
    _main(toy, "toy", "--names", "x", "--names", "y,z", "--table", "job")
    assert seen == [_Opts(names=("x", "y", "z"), table="JOB")]
    _main(toy, "toy")
    assert seen[1] == _Opts() and seen[1].table == "ALL"  # the text default, parsed once


def test_pai2020_tables_by_comma_or_repeat(tmp_path: Path) -> None:
    """``--tables job`` reads only pai_job_table.csv; ``job,task`` and ``--tables job
    --tables task`` read the same two files (one reconciliation line per table read)."""
    pai = Path(__file__).parent / "fixtures" / "pai2020" / "basic"

    def files(*args: str) -> list[str]:
        store = tmp_path / str(len(list(tmp_path.iterdir())))
        r = run("ingest", "pai2020", pai, "--store", store, *args)
        assert r.exit_code == 0, r.output
        rows = r.stdout.splitlines()[1:-1]  # header and total left out
        return sorted({row.split()[0] for row in rows})

    assert files("--tables", "job") == ["pai_job_table.csv"]
    both = files("--tables", "job,task")
    assert both == ["pai_job_table.csv", "pai_task_table.csv"]
    assert files("--tables", "job", "--tables", "task") == both
