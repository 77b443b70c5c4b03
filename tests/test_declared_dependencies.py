"""Every third-party distribution that gpu_trace imports is declared in pyproject.toml.

An undeclared import works on a developer's machine (something else pulled it in) and
breaks a clean ``pip install gpu-trace``. The imports are read from the source with
``ast`` (module-level, inside functions and ``try`` blocks alike, plus literal
``importlib.import_module("x")`` / ``find_spec("x")`` names) and mapped to distributions
with ``importlib.metadata.packages_distributions()``.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Import names whose distribution may not be installed where the tests run (an optional
# extra), so packages_distributions() cannot map them.
NOT_INSTALLED = {"pynvml": "nvidia-ml-py", "ray": "ray", "torch": "torch"}


def _normalize(name: str) -> str:
    """PEP 503 name: lower case, runs of -_. become one -."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _imported_top_levels(path: Path) -> set[str]:
    """Top-level module names ``path`` imports, absolute imports only."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id)
            in {"import_module", "find_spec"}
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.add(node.args[0].value.split(".")[0])
    return found


def _declared() -> set[str]:
    """Distribution names in [project] dependencies and every optional extra."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        requirements.extend(extra)
    return {_normalize(re.split(r"[\s\[<>=!~;]", req, maxsplit=1)[0]) for req in requirements}


def _third_party_imports() -> dict[str, set[str]]:
    """Import name -> files of gpu_trace that import it (stdlib and gpu_trace left out)."""
    users: dict[str, set[str]] = {}
    for path in sorted((ROOT / "gpu_trace").rglob("*.py")):
        for name in _imported_top_levels(path):
            if name in sys.stdlib_module_names or name in {"gpu_trace", "__future__"}:
                continue
            users.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    return users


def test_every_imported_distribution_is_declared() -> None:
    declared = _declared()
    installed = packages_distributions()
    problems = []
    for name, files in sorted(_third_party_imports().items()):
        dists = installed.get(name) or [NOT_INSTALLED.get(name, "")]
        if not any(dists):
            problems.append(f"{name} (imported by {sorted(files)[0]}) is not installed here")
        elif not any(_normalize(d) in declared for d in dists):
            problems.append(
                f"{name} (distribution {dists[0]}, imported by {sorted(files)[0]}) is not "
                "declared in pyproject.toml dependencies or an extra"
            )
    assert not problems, "\n".join(problems)


def test_the_walk_sees_each_kind_of_import(tmp_path: Path) -> None:
    # A file with one import of each shape the walk must catch, and two it must not
    # (relative, and a non-literal import_module argument).
    source = tmp_path / "m.py"
    source.write_text(
        "import a.b\nfrom c.d import e\nfrom . import f\n"
        "def g():\n    import h\n    importlib.import_module('i.j')\n"
        "    importlib.util.find_spec('k')\n    importlib.import_module(name)\n",
        encoding="utf-8",
    )
    assert _imported_top_levels(source) == {"a", "c", "h", "i", "k"}
