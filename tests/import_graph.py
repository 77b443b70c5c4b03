"""The import graph of ``gpu_trace``, built from the source with ``ast`` (nothing is imported).

By default edges are module-level imports, including ``from . import x`` and imports inside
module-level ``try`` / ``if`` blocks: what runs when the importing module is loaded (the
load-time graph, for cycles). With ``functions=True`` imports inside functions and methods
count too (the dependency graph, for layering: a lazy import is still a dependency).
Imports under ``if TYPE_CHECKING:`` are left out of both.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = "gpu_trace"


def module_files(root: Path) -> dict[str, Path]:
    """Module name -> file, for every ``.py`` under ``root / PACKAGE``."""
    files: dict[str, Path] = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        files[".".join(parts)] = path
    return files


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _module_level(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                yield from _module_level(node.body)
            yield from _module_level(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody):
                yield from _module_level(block)
            for handler in node.handlers:
                yield from _module_level(handler.body)


def _anywhere(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement in ``body`` at any depth (functions, classes, blocks), except
    under ``if TYPE_CHECKING:``."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from _anywhere(node.orelse)
        else:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.stmt):
                    yield from _anywhere([child])
                elif isinstance(child, ast.excepthandler):
                    yield from _anywhere(child.body)


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The longest known module that ``name`` is or lies in."""
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def imports_of(
    module: str, path: Path, known: dict[str, Path], *, functions: bool = False
) -> set[str]:
    """The ``gpu_trace`` modules that ``module`` imports when it is loaded (and, with
    ``functions``, inside its functions too)."""
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    walk = _anywhere if functions else _module_level
    for node in walk(ast.parse(path.read_text(encoding="utf-8")).body):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            if node.level:
                base = module.split(".")
                drop = node.level - 1 if is_package else node.level
                base = base[: len(base) - drop] if drop else base
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            # `from a import b` loads a, and a.b when b is a submodule.
            targets = [prefix] + [f"{prefix}.{alias.name}" for alias in node.names]
        for target in targets:
            resolved = _resolve(target, known)
            # A module's own packages are loaded before it, so importing them is no edge.
            if resolved is not None and not f"{module}.".startswith(f"{resolved}."):
                out.add(resolved)
    return out


def graph(root: Path, *, functions: bool = False) -> dict[str, set[str]]:
    """Module -> the modules it imports at load time (with ``functions``: anywhere).
    Importing ``a.b.c`` also loads the packages ``a`` and ``a.b``, so those are edges
    too."""
    known = module_files(root)
    edges: dict[str, set[str]] = {}
    for module, path in known.items():
        targets = imports_of(module, path, known, functions=functions)
        for target in list(targets):
            parts = target.split(".")
            for i in range(1, len(parts)):
                parent = ".".join(parts[:i])
                if parent in known and parent != module and not module.startswith(parent + "."):
                    targets.add(parent)
        edges[module] = targets
    return edges


def subpackage(module: str) -> str:
    """``gpu_trace.loaders.philly`` -> ``loaders``; top-level modules are their own group."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def subpackage_graph(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for src, targets in edges.items():
        a = subpackage(src)
        out.setdefault(a, set())
        for dst in targets:
            b = subpackage(dst)
            if a != b:
                out[a].add(b)
    return out


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(found)


def path_between(edges: dict[str, set[str]], start: str, goal: str) -> list[str]:
    """One shortest import path start -> goal (breadth first), for error messages."""
    previous: dict[str, str] = {}
    frontier = [start]
    seen = {start}
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(edges.get(v, ())):
                if w in seen:
                    continue
                previous[w] = v
                if w == goal:
                    path = [w]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return path[::-1]
                seen.add(w)
                nxt.append(w)
        frontier = nxt
    return []
