"""One-file plugins: a loader, an analysis and a policy are each one file.

``tests/plugin_pkg`` is a third-party package (one file per plugin plus its
``pyproject.toml`` naming them under the ``gpu_trace.*`` entry-point groups). The test
builds and installs it with pip (``--target``, offline: its in-tree build backend) and
runs the real CLI in subprocesses with that folder on ``PYTHONPATH``: the plugins show in
``--help`` and work end to end. The same three files dropped into a copy of the package
(``gpu_trace/loaders/``, ``gpu_trace/analyses/``, ``gpu_trace/replay/scheduling/``) are
built-ins, with no other file touched.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_trace import plugins
from gpu_trace.cli.generated import option_parameters
from gpu_trace.loaders import LOADERS
from gpu_trace.loaders import get as get_loader
from gpu_trace.replay import policy

ROOT = Path(__file__).resolve().parents[1]
PKG = Path(__file__).parent / "plugin_pkg"
MAIN = "from gpu_trace.cli import main; main()"

# job_id,gpus,run_s: GPU-seconds 2*100 + 1*50 + 4*10 = 290; with --min-gpus 2: 200 + 40 = 240.
TOY_CSV = "job_id,gpus,run_s\na,2,100\nb,1,50\nc,4,10\n"


def _cli(pythonpath: list[Path], *args: str | Path, store: Path | None = None) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(p) for p in pythonpath)}
    env.pop("GPU_TRACE_STORE", None)
    if store is not None:
        env["GPU_TRACE_STORE"] = str(store)
    env["COLUMNS"] = "200"  # --help lines long enough that names are not wrapped
    done = subprocess.run(
        [sys.executable, "-c", MAIN, *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        cwd=pythonpath[0],  # `python -c` puts the working folder first on sys.path
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pip-build and install tests/plugin_pkg into a fresh --target folder."""
    work = tmp_path_factory.mktemp("plugin")
    src = work / "src"
    shutil.copytree(PKG, src)  # setuptools writes build/ and *.egg-info beside the source
    target = work / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-index",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(target),
            str(src),
        ],
        check=True,
        capture_output=True,
    )
    assert (target / "gpu_trace_toy_plugins-0.1.dist-info" / "entry_points.txt").is_file()
    return target


def test_installed_plugins_show_in_help(installed: Path) -> None:
    path = [ROOT, installed]
    ingest = _cli(path, "ingest", "--help")
    assert "toy " in ingest and "installed from a plugin package" in ingest
    toy = _cli(path, "ingest", "toy", "--help")
    assert "--cluster" in toy and "Cluster name written to jobs.cluster (toy plugin)." in toy
    analyze = _cli(path, "analyze", "--help")
    assert "toy-gpus" in analyze
    assert "--min-gpus" in _cli(path, "analyze", "toy-gpus", "--help")
    assert "toy-largest" in _cli(path, "replay", "run", "--help")
    # ...and without the package on the path they are not there.
    assert "toy-gpus" not in _cli([ROOT], "analyze", "--help")


def test_installed_plugins_run(installed: Path, tmp_path: Path) -> None:
    path, store = [ROOT, installed], tmp_path / "store"
    trace = tmp_path / "lab.csv"
    trace.write_text(TOY_CSV)
    out = _cli(path, "ingest", "toy", trace, "--cluster", "lab", store=store)
    assert out.splitlines()[-1].split() == ["total", "3", "3", "0", "0"]  # read = written + 0 + 0
    csv = _cli(path, "analyze", "toy-gpus", "-f", "csv", store=store)
    assert csv.splitlines() == ["cluster,toy_gpu_s", "lab,290.0"]
    csv = _cli(path, "analyze", "toy-gpus", "--min-gpus", "2", "-f", "csv", store=store)
    assert csv.splitlines() == ["cluster,toy_gpu_s", "lab,240.0"]
    listing = _cli(path, "replay", "policies", store=store)
    assert "toy-largest  Toy: FIFO, installed from a plugin package." in listing


def test_one_file_each_as_builtins(tmp_path: Path) -> None:
    """The plugin files copied into a copy of gpu_trace: each is one new file there."""
    copy = tmp_path / "tree"
    shutil.copytree(
        ROOT / "gpu_trace", copy / "gpu_trace", ignore=shutil.ignore_patterns("__pycache__")
    )
    before = {p.relative_to(copy) for p in copy.rglob("*.py")}
    shutil.copy(PKG / "toy_loader.py", copy / "gpu_trace/loaders/toy_loader.py")
    shutil.copy(PKG / "toy_analysis.py", copy / "gpu_trace/analyses/toy_analysis.py")
    shutil.copy(PKG / "toy_policy.py", copy / "gpu_trace/replay/scheduling/toy_policy.py")
    after = {p.relative_to(copy) for p in copy.rglob("*.py")}
    assert len(after - before) == 3
    assert "toy " in _cli([copy], "ingest", "--help")
    assert "toy-gpus" in _cli([copy], "analyze", "--help")
    assert "toy-largest" in _cli([copy], "replay", "run", "--help")


def test_registries_come_from_the_declarations() -> None:
    names = {p.name for p in plugins.loaders()}
    assert names == set(LOADERS)
    # Every ingest kind the README documents is declared (the registry lost none).
    for kind in ("openb", "philly", "helios", "pai2020", "kubernetes", "acme", "slurm"):
        assert kind in names
    for kind in ("nvidia-smi", "dcgmi", "prometheus", "prometheus-range", "chronus", "gavel"):
        assert kind in names
    # Policies keep their historical order (rank) and every declared class is returned.
    assert policy.names("scheduler")[:3] == ["fifo", "fifo-skip", "sjf"]
    assert policy.names("placement")[0] == "consolidate"
    for p in plugins.policies("placement"):
        assert policy.get("placement", p.name) is p.policy


def test_unknown_names_fail_in_one_place() -> None:
    """plugins.lookup raises the house usage error (exit 2) with a suggestion."""
    from gpu_trace.errors import UsageError

    with pytest.raises(UsageError, match=r"unknown loader 'opneb'; did you mean 'openb'\?"):
        get_loader("opneb")
    with pytest.raises(UsageError, match=r"unknown scheduler policy 'fifoo'; did you mean"):
        policy.get("scheduler", "fifoo")


def test_choices_become_a_usage_check() -> None:
    """A field's ``choices`` give the generated option a check with a one-line message;
    a field without an explicit flag gets typer's own (--name, --name/--no-name)."""
    from dataclasses import dataclass

    import typer

    @dataclass(frozen=True)
    class Opts:
        cluster: str = plugins.option("all", "Which.", choices=("venus", "earth", "all"))
        tz: str = plugins.option("UTC", "Zone.", flag="--time-zone")

    (cluster, tz) = option_parameters(Opts)
    info = cluster.annotation.__metadata__[0]
    assert cluster.name == "cluster" and cluster.default == "all"
    with pytest.raises(typer.BadParameter, match="'mars' is not one of venus, earth, all"):
        info.callback("mars")
    assert info.callback("earth") == "earth"
    assert tz.annotation.__metadata__[0].default == "--time-zone"  # typer reads it as the flag


def test_docs_match_the_declarations() -> None:
    """docs/plugins.md is generated (`python -m gpu_trace.plugin_docs docs/plugins.md`)."""
    from gpu_trace.plugin_docs import render

    assert (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8") == render(), (
        "docs/plugins.md is stale: run python -m gpu_trace.plugin_docs docs/plugins.md"
    )
    assert (
        "### `slurm`" in render()
        and "| `--tz` | `None` | IANA zone of the cluster's clock" in render()
    )


def test_an_analysis_plugin_becomes_a_report_section(monkeypatch: pytest.MonkeyPatch) -> None:
    """The toy analysis' declaration gives the report a section: its table with the
    glossary's header label and meaning, and its chart."""
    import importlib
    from types import SimpleNamespace

    import polars as pl

    from gpu_trace.reports import headers, sections

    monkeypatch.syspath_prepend(str(PKG))
    toy = importlib.import_module("toy_analysis")
    monkeypatch.setattr(plugins, "analyses", lambda: (toy.PLUGIN,))
    headers._plugin_columns.cache_clear()
    try:
        jobs = pl.LazyFrame(
            {"cluster": ["x", "x", "y"], "gpus": [2.0, 1.0, 4.0], "run_s": [100.0, 50.0, 10.0]}
        )
        (build,) = sections.plugin_sections()
        section = build(SimpleNamespace(jobs=jobs))  # type: ignore[arg-type]
        assert section.title == "Toy GPU-seconds" and len(section.charts) == 1
        assert (
            '<th title="toy_gpu_s: sum of gpus x run_s in the cluster">toy GPU-seconds</th>'
            in section.html
        )
        # x: 2*100 + 1*50 = 250 GPU-seconds, y: 4*10 = 40 (shown as durations: _s column).
        assert section.charts[0].data.to_dicts() == [
            {"cluster": "x", "toy_gpu_s": 250.0},
            {"cluster": "y", "toy_gpu_s": 40.0},
        ]
    finally:
        headers._plugin_columns.cache_clear()


def test_a_broken_installed_plugin_is_skipped_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An entry point that fails to import, one that is not a declaration and one that
    reuses a built-in name: each is left out with one warning line; the built-ins stay."""
    from importlib.metadata import EntryPoint

    group = "gpu_trace.loaders"
    fake = [
        EntryPoint("broken", "no_such_module_xyz:PLUGIN", group),
        EntryPoint("wrong", "os.path:join", group),
        EntryPoint("openb2", "gpu_trace.loaders.openb:PLUGIN", group),
    ]
    import gpu_trace.loaders  # noqa: F401  (importing it lists the loaders: not under the patch)

    capsys.readouterr()
    monkeypatch.setattr(plugins, "entry_points", lambda group: fake)
    plugins.discover.cache_clear()
    plugins._installed.cache_clear()
    try:
        names = [p.name for p in plugins.loaders()]
        assert "opneb" not in LOADERS  # a plain mapping: `in` does not raise
        lines = capsys.readouterr().err.splitlines()
    finally:
        plugins.discover.cache_clear()
        plugins._installed.cache_clear()
    assert names.count("openb") == 1 and "broken" not in names
    assert len(lines) == 3 and all(line.startswith("warning: ") for line in lines)
    assert "'broken' (no_such_module_xyz:PLUGIN" in lines[0] and "does not load" in lines[0]
    assert "'wrong'" in lines[1] and "is not a LoaderPlugin" in lines[1]
    assert "'openb' is already declared: skipped" in lines[2]


def test_built_in_sections_name_declared_analyses() -> None:
    """The analyses a built-in report section shows are declared ones (a renamed analysis
    must not silently get a second section or none), and every other analysis with a
    chart gets its own section."""
    from gpu_trace.reports import sections
    from gpu_trace.reports.analysis_charts import chart_of

    declared = {p.name: p for p in plugins.analyses()}
    assert declared.keys() >= sections.COMPOSED
    assert {"summary", "failures", "energy", "sharing"} <= sections.COMPOSED
    from gpu_trace.reports.serving_section import is_serving, serving_sections

    own = {b.__name__ for b in sections.plugin_sections()}
    charted = {n for n, p in declared.items() if chart_of(p) is not None}
    serving = {n for n, p in declared.items() if is_serving(p)}
    assert own == {f"{n}_section" for n in charted - sections.COMPOSED - serving}
    assert own  # accounting, idle: charts of their own, not composed
    # the serving analyses (they read requests) are on the serving pages, each once
    on_serving = [b.__name__ for b in serving_sections()]
    assert sorted(on_serving[1:]) == sorted(f"{n}_section" for n in serving)
    assert serving <= charted and len(serving) == 11


def test_a_renamed_policy_keeps_its_old_name_with_one_warning(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`packing` named both the arrival-only scheduler and the FGD paper's GPU packing
    placement; the placement is `gpu-packing` now and its old name still selects it, with
    one warning line per process (issue 28), without being listed."""
    from gpu_trace.replay import experiment

    monkeypatch.setattr(policy, "_WARNED", set())
    new = policy.get("placement", "gpu-packing")
    assert policy.get("placement", "packing") is new
    experiment.check_policy("placement", "packing", {"ties": "first"})
    assert capsys.readouterr().err == (
        "warning: placement policy 'packing' is deprecated: use 'gpu-packing'\n"
    )
    assert "packing" not in policy.names("placement")
    assert policy.get("scheduler", "packing") is not new  # the scheduler keeps its name
    assert capsys.readouterr().err == ""
