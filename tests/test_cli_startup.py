"""Start-up cost of the command line (issue #17): building it imports no heavy library.

Typer builds every command (each signature, and the ``ingest`` / ``analyze`` commands
generated from the plugin declarations) before it parses anything, so ``--version``
and every ``--help`` load the whole command tree. That tree must not pull in what only
running a command needs: SciPy (sweep statistics), Altair and vl-convert (the report),
scikit-learn (the runtime estimator), Ray (sweeps), DuckDB (queries). Each of those
costs 0.3-1.5 s of start-up and belongs inside the function that uses it.

Issue #25 goes further: the tree is built on demand (``gpu_trace.cli.lazy``), so
``--version`` and ``--help`` import no command's module, and ``ingest helios`` imports
the Helios loader's module and no other loader's, analysis, replay or report module.

A behaviour test, not a timing test: it checks which modules a fresh interpreter
loaded, read from ``python -X importtime`` (one line per module imported, on stderr)
and from ``sys.modules``. polars and pyarrow do load: the plugin modules declare
their options next to their polars code, and the canonical schemas are Arrow types.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

DEFERRED = ("scipy", "altair", "vl_convert", "sklearn", "ray", "duckdb")
"""Top-level packages the command line must not import until a command runs."""


COMMAND_MODULES = {
    f"gpu_trace.cli.{m}"
    for m in ("ingest", "sql", "schema", "report", "synth", "datasets", "telemetry", "analyze")
} | {"gpu_trace.cli.replay"}
"""The modules of the top-level commands (``gpu_trace.cli.ROOT_COMMANDS``, spelled out)."""


def _env() -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path}


def _importtime_modules(stderr: str) -> set[str]:
    """Module names from ``-X importtime`` lines: ``import time: self | cumulative | name``."""
    names = set()
    for line in stderr.splitlines():
        m = re.match(r"import time:\s+\d+ \|\s+\d+ \|\s+(\S+)$", line)
        if m:
            names.add(m.group(1))
    return names


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in DEFERRED)


def test_version_imports_no_heavy_library() -> None:
    """``python -m gpu_trace --version``, the console script's own path (``cli.main``)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "gpu_trace", "--version"],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("gpu-trace ")
    modules = _importtime_modules(done.stderr)
    # The parse saw gpu-trace's own modules load (else an empty set would pass).
    assert {"gpu_trace.cli", "gpu_trace.cli._boundary"} <= modules
    assert _heavy(modules) == []
    # Issue #25: the version needs no command, so no command's module and no data library.
    assert sorted(m for m in modules if m in COMMAND_MODULES) == []
    assert sorted(m for m in modules if m.split(".")[0] in ("polars", "pyarrow", "numpy")) == []


# Run in one fresh interpreter: every group's and command's --help through typer's
# CliRunner, handed the click command built once (typer rebuilds it on every call), then
# the modules loaded by all of them together.
_EVERY_HELP = """
import json, sys
import typer.testing
from typer.main import get_command
from gpu_trace.cli import app

def walk(cmd, path):
    yield path
    for name, sub in sorted(getattr(cmd, "commands", {}).items()):
        yield from walk(sub, [*path, name])

runner = typer.testing.CliRunner()
failed = []
root = get_command(app)
typer.testing._get_command = lambda _app: root
paths = list(walk(root, []))
for path in paths:
    result = runner.invoke(app, [*path, "--help"], prog_name="gpu-trace")
    if result.exit_code != 0 or "Usage: gpu-trace" not in result.output:
        failed.append([path, result.exit_code, result.output[-500:]])
print(json.dumps({"paths": len(paths), "failed": failed, "modules": sorted(sys.modules)}))
"""


def test_every_help_imports_no_heavy_library() -> None:
    """``gpu-trace <group> --help`` and ``<group> <command> --help`` for every command:
    asking how to use a command must not load what running it needs."""
    done = subprocess.run(
        [sys.executable, "-c", _EVERY_HELP],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["paths"] > 40 and found["failed"] == []
    modules = set(found["modules"])
    assert {"gpu_trace.cli.sql", "gpu_trace.cli.report", "gpu_trace.cli.analyze"} <= modules
    assert _heavy(modules) == []


_OPEN_CATALOG = "from gpu_trace.store.catalog import connect"
"""The store's query layer is what loads DuckDB."""


def test_the_check_sees_a_heavy_import() -> None:
    """The same reading, on an interpreter that does import one of them, finds it: the
    two tests above cannot pass because the parse or the list is empty."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", _OPEN_CATALOG],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "duckdb" in {m.split(".")[0] for m in _heavy(_importtime_modules(done.stderr))}


# Issue #25: a command loads its own modules only. Run as the console script does
# (``cli.main``), the loaded modules read from ``sys.modules`` when the process exits
# (``--help`` exits through SystemExit, so at exit, not after ``main()``).
_MODULES_AT_EXIT = """
import atexit, json, sys
atexit.register(lambda: sys.stderr.write("MODULES " + json.dumps(sorted(sys.modules)) + "\\n"))
sys.argv = ["gpu-trace", *sys.argv[1:]]
from gpu_trace.cli import main
main()
"""


def _modules_of(*args: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", _MODULES_AT_EXIT, *args],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    line = [x for x in done.stderr.splitlines() if x.startswith("MODULES ")][-1]
    return set(json.loads(line.removeprefix("MODULES ")))


def _loader_modules() -> dict[str, set[str]]:
    """Loader name -> the module declaring it, read from the modules themselves (every
    module of ``gpu_trace.loaders`` imported here, in the test process), not from the
    generated index the command line uses.
    """
    import importlib
    import pkgutil

    from gpu_trace.plugins import LoaderPlugin

    out: dict[str, set[str]] = {}
    for info in pkgutil.iter_modules([str(ROOT / "gpu_trace" / "loaders")]):
        module = importlib.import_module(f"gpu_trace.loaders.{info.name}")
        declared = [getattr(module, "PLUGIN", None), *getattr(module, "PLUGINS", ())]
        for plugin in declared:
            if isinstance(plugin, LoaderPlugin):
                out.setdefault(plugin.name, set()).add(module.__name__)
    return out


def _upper_layers(modules: set[str]) -> list[str]:
    """Analyses, replay and reports modules: above the loaders, never needed to ingest."""
    tops = ("gpu_trace.analyses", "gpu_trace.replay", "gpu_trace.reports")
    return sorted(m for m in modules if m.split(".")[:2] in [t.split(".") for t in tops])


def test_ingest_helios_help_imports_no_other_loader() -> None:
    """``gpu-trace ingest helios --help`` builds the helios command only: its own loader
    module, no other loader's, no analysis, replay or report module, no other command."""
    modules = _modules_of("ingest", "helios", "--help")
    declared = _loader_modules()
    assert declared["helios"] <= modules  # the check sees the command being built
    others = set().union(*(m for name, m in declared.items() if name != "helios"))
    assert len(others) > 10
    assert sorted(others & modules) == []
    assert _upper_layers(modules) == []
    assert sorted(m for m in modules if m in COMMAND_MODULES) == ["gpu_trace.cli.ingest"]
    assert _heavy(modules) == []


def test_ingest_helios_run_imports_no_other_loader(tmp_path: Path) -> None:
    """Running ``gpu-trace ingest helios FILE`` (the bundled sample, a real ingest) loads
    no other loader's module and nothing above the loaders either."""
    sample = ROOT / "data" / "samples" / "helios" / "Venus_cluster_gpu_number.csv"
    assert sample.is_file()
    modules = _modules_of("-q", "ingest", "helios", str(sample), "--store", str(tmp_path / "s"))
    assert (tmp_path / "s").is_dir()  # it did ingest
    declared = _loader_modules()
    others = set().union(*(m for name, m in declared.items() if name != "helios"))
    assert declared["helios"] <= modules
    assert sorted(others & modules) == []
    assert _upper_layers(modules) == []


def test_root_and_ingest_help_import_no_command_module_but_their_own() -> None:
    """``gpu-trace --help`` lists the commands without importing any of them, and
    ``gpu-trace ingest --help`` lists the loaders without importing any loader module."""
    root = _modules_of("--help")
    assert "gpu_trace.cli._boundary" in root
    assert sorted(m for m in root if m in COMMAND_MODULES) == []
    listing = _modules_of("ingest", "--help")
    assert sorted(m for m in listing if m in COMMAND_MODULES) == ["gpu_trace.cli.ingest"]
    loaders = set().union(*_loader_modules().values())
    assert sorted(loaders & listing) == []
    assert _upper_layers(listing) == []


def _complete(words: str) -> tuple[str, set[str]]:
    """typer's zsh completion protocol (``_GPU_TRACE_COMPLETE=complete_zsh``, the words
    typed in ``_TYPER_COMPLETE_ARGS``): the answer on stdout, and the modules loaded."""
    env = {**_env(), "_GPU_TRACE_COMPLETE": "complete_zsh", "_TYPER_COMPLETE_ARGS": words}
    done = subprocess.run(
        [sys.executable, "-c", _MODULES_AT_EXIT],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    line = [x for x in done.stderr.splitlines() if x.startswith("MODULES ")][-1]
    return done.stdout, set(json.loads(line.removeprefix("MODULES ")))


def test_completion_lists_commands_without_building_them() -> None:
    """Completing a command name reads the listing, not the commands; completing an
    option of ``ingest helios`` builds that one command (its ``--tz`` is offered)."""
    top, modules = _complete("gpu-trace ")
    for name in ("sql", "ingest", "analyze", "replay", "synth"):
        assert f'"{name}":' in top
    assert sorted(m for m in modules if m in COMMAND_MODULES) == []
    loaders, modules = _complete("gpu-trace ingest he")
    assert re.findall(r'"([a-z0-9-]+)":', loaders) == ["helios"]
    assert sorted(m for m in modules if m.startswith("gpu_trace.loaders.")) == []
    options, modules = _complete("gpu-trace ingest helios --")
    assert '"--tz":' in options and '"--store":' in options
    others = set().union(*(m for name, m in _loader_modules().items() if name != "helios"))
    assert sorted(others & modules) == []


BLAS_PROBE = """
import os, sys
from gpu_trace.cli import main
sys.argv = ["gpu-trace", "--version"]
try:
    main()
except SystemExit:
    pass
import numpy  # after the command line: it reads the setting as it loads OpenBLAS
from threadpoolctl import threadpool_info
print(os.environ.get("OPENBLAS_NUM_THREADS"),
      sorted({p["num_threads"] for p in threadpool_info() if p["internal_api"] == "openblas"}))
"""


def _blas(env: dict[str, str]) -> str:
    out = subprocess.run(
        [sys.executable, "-c", BLAS_PROBE], env=env, cwd=ROOT, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


def test_one_blas_thread_unless_the_user_asks_for_more() -> None:
    # numpy's import self-check wakes one OpenBLAS thread per core, which then spin: the
    # command line asks for one (no command does BLAS-heavy work); a user's setting wins
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    assert _blas(env) == "1 [1]"
    assert _blas({**env, "OPENBLAS_NUM_THREADS": "2"}).startswith("2 ")
