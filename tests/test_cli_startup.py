"""Start-up cost of the command line (issue #17): building it imports no heavy library.

Typer builds every command (each signature, and the ``ingest`` / ``analyze`` commands
generated from the plugin declarations) before it parses anything, so ``--version``
and every ``--help`` load the whole command tree. That tree must not pull in what only
running a command needs: SciPy (sweep statistics), Altair and vl-convert (the report),
scikit-learn (the runtime estimator), Ray (sweeps), DuckDB (queries). Each of those
costs 0.3-1.5 s of start-up and belongs inside the function that uses it.

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
    # The parse saw the command tree being built (else an empty set would pass).
    assert {"gpu_trace.cli", "gpu_trace.cli.ingest", "gpu_trace.cli.replay"} <= modules
    assert _heavy(modules) == []


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
