"""The package's import graph: subpackages in layers (no upward import, even a lazy one
inside a function), no cycles between subpackages, none between modules at load time.

The graph comes from the source (``tests/import_graph.py``: ast, ``TYPE_CHECKING`` blocks
left out), so a cycle is caught even when today's import order happens to work.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import import_graph as ig

ROOT = Path(__file__).resolve().parents[1]


def _describe(edges: dict[str, set[str]], component: list[str]) -> str:
    first, second = component[0], component[1]
    there = ig.path_between(edges, first, second)
    back = ig.path_between(edges, second, first)
    return f"{' -> '.join(there)} and back: {' -> '.join(back)}"


LAYERS: dict[str, int] = {
    # foundations: no gpu_trace imports, or only each other
    "version": 0, "errors": 0, "schemas": 0, "formats": 0, "values": 0,
    "command_index": 0, "generated_text": 0, "progress": 0,
    "plugins": 1, "column_units": 1, "display": 1,
    "store": 2, "datasets": 2,
    "loaders": 3, "settings": 3,
    "telemetry": 4, "synth": 4,
    "analyses": 5,
    "replay": 6,  # scores runs with the analyses' own measures (failures, power, sharing)
    "serve": 6,  # the serving replay: its plugins are replay policy kinds (replay.policy)
    "reports": 7, "api": 7, "plugin_docs": 7,  # consumers of everything below
    "cli": 8, "__main__": 8, "gpu_trace": 8,  # the package's __init__ is the public API
    "analysis_docs": 8,  # runs the CLI to write docs/analyses/
}  # fmt: skip
"""Rank of each subpackage and top-level module (``tests/import_graph.subpackage``): a
module may import only from its own or a lower rank. A new subpackage must be placed
here. Reports own how analyses are drawn (``reports/analysis_charts.py``), so no
analysis imports a report module; the version lives in ``gpu_trace.version`` so the
writer does not import the package's API ``__init__``."""


def test_no_upward_imports_even_inside_functions() -> None:
    edges = ig.graph(ROOT, functions=True)
    groups = {ig.subpackage(m) for m in edges}
    assert sorted(groups - LAYERS.keys()) == [], "place new subpackages in LAYERS"
    upward = sorted(
        f"{src} -> {dst}"
        for src, targets in edges.items()
        for dst in targets
        if LAYERS[ig.subpackage(dst)] > LAYERS[ig.subpackage(src)]
    )
    assert upward == []


def test_no_cycles_between_subpackages() -> None:
    edges = ig.graph(ROOT, functions=True)
    packages = ig.subpackage_graph(edges)
    found = ig.cycles(packages)
    detail = []
    for component in found:
        members = set(component)
        for src, targets in sorted(edges.items()):
            for dst in sorted(targets):
                a, b = ig.subpackage(src), ig.subpackage(dst)
                if a != b and a in members and b in members:
                    detail.append(f"{src} -> {dst}")
    assert not found, f"subpackage cycles {found}; edges: " + "; ".join(detail)


def test_no_cycles_between_modules() -> None:
    edges = ig.graph(ROOT)
    found = ig.cycles(edges)
    assert not found, "module cycles: " + " | ".join(_describe(edges, c) for c in found)


def test_the_graph_sees_the_import_forms(tmp_path: Path) -> None:
    """A hand-made package with a cycle made of each import form the checker must see
    (absolute, ``from . import x``, ``from .. import``), plus the forms the load-time
    graph ignores (``TYPE_CHECKING`` and function-level imports; the dependency graph
    sees the function-level one)."""
    pkg = tmp_path / "gpu_trace"
    (pkg / "a").mkdir(parents=True)
    (pkg / "b").mkdir()
    files = {
        "__init__.py": "",
        "a/__init__.py": "from . import one\n",
        "a/one.py": "from ..b import two\n",
        "b/__init__.py": "",
        "b/two.py": "import gpu_trace.b.three\n",
        "b/three.py": """
            from typing import TYPE_CHECKING
            if TYPE_CHECKING:
                from gpu_trace.a import one
            def f():
                import gpu_trace.a.one
            """,
    }
    for name, text in files.items():
        (pkg / name).write_text(textwrap.dedent(text))
    edges = ig.graph(tmp_path)
    assert edges["gpu_trace.a"] == {"gpu_trace.a.one"}
    assert edges["gpu_trace.a.one"] == {"gpu_trace.b", "gpu_trace.b.two"}
    assert edges["gpu_trace.b.two"] == {"gpu_trace.b.three"}
    assert edges["gpu_trace.b.three"] == set()
    assert ig.cycles(edges) == []
    # The dependency graph sees the import inside f() (a lazy import is still a
    # dependency, so b -> a is an upward edge for the layers), never TYPE_CHECKING's.
    deps = ig.graph(tmp_path, functions=True)
    assert deps["gpu_trace.b.three"] == {"gpu_trace.a", "gpu_trace.a.one"}
    assert ig.cycles(ig.subpackage_graph(deps)) == [["a", "b"]]
    # One real module-level import back closes the loop a -> b -> a (through the package
    # gpu_trace.a too: importing a.one runs a/__init__.py first, which imports one).
    (pkg / "b/three.py").write_text("from gpu_trace.a import one\n")
    edges = ig.graph(tmp_path)
    assert ig.cycles(edges) == [
        ["gpu_trace.a", "gpu_trace.a.one", "gpu_trace.b.three", "gpu_trace.b.two"]
    ]
    assert ig.cycles(ig.subpackage_graph(edges)) == [["a", "b"]]


def test_moved_telemetry_parsers_keep_their_old_paths() -> None:
    """The parsers moved to gpu_trace.loaders; the old gpu_trace.telemetry.* names are the
    same module objects (so monkeypatching either name patches both)."""
    import importlib

    for old, new in [
        ("smi", "smi"),
        ("dcgmi", "dcgmi"),
        ("prometheus", "prometheus"),
        ("promrange", "promrange"),
        ("common", "telemetry_common"),
        ("fields", "telemetry_fields"),
    ]:
        moved = importlib.import_module(f"gpu_trace.loaders.{new}")
        assert importlib.import_module(f"gpu_trace.telemetry.{old}") is moved


POLICY_PACKAGES = (
    "gpu_trace.replay.scheduling",
    "gpu_trace.replay.placement",
    "gpu_trace.replay.admission",
)
POLICY_MAY_IMPORT = (
    "gpu_trace.replay.policy",  # the contracts (EngineView, PolicyBase) and the registry
    "gpu_trace.replay.cluster",  # the cluster model and its read-only view
    "gpu_trace.replay.workload",
    *POLICY_PACKAGES,  # the shared bases (queue, preemptive, placement.base)
)


def test_policies_see_the_engine_only_through_the_contract() -> None:
    """A policy module imports, of replay, only the contracts, the cluster and workload
    models and the policy packages' own bases (``TYPE_CHECKING`` imports aside): never the
    engine or the driver, so a new policy is one file written against a public contract
    (issue 28)."""
    edges = ig.graph(ROOT, functions=True)
    reach = sorted(
        f"{src} -> {dst}"
        for src, targets in edges.items()
        if src.startswith(POLICY_PACKAGES)
        for dst in targets
        if dst.startswith("gpu_trace.replay") and not dst.startswith(POLICY_MAY_IMPORT)
    )
    assert reach == []
    assert any(src.startswith(POLICY_PACKAGES) for src in edges)  # the packages were seen
