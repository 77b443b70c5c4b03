"""One-file plugins: a loader, an analysis or a replay policy declares itself here, once.

A declaration names the plugin, its options (a dataclass whose fields carry their help
text, built with :func:`option`) and, for an analysis, its chart and glossary entries.
Everything else is generated from it: the ``gpu-trace ingest`` / ``analyze`` commands,
the ``replay`` policy registry, the report's plugin sections, the glossary and
``docs/plugins.md``. So adding one is adding one file:

- built in: a module under ``gpu_trace/loaders/``, ``gpu_trace/analyses/`` or one of
  ``gpu_trace/replay/scheduling/``, ``placement/``, ``admission/`` with a module-level
  ``PLUGIN`` (or ``PLUGINS``, a tuple);
- third party: a package whose ``pyproject.toml`` names the declaration (or its module)
  under the entry-point group ``gpu_trace.loaders``, ``gpu_trace.analyses`` or
  ``gpu_trace.policies``.

This module imports nothing of gpu-trace but ``errors`` and ``values`` at load time (the plugin modules
import it, so it must sit below them in the import graph).
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal

from gpu_trace.errors import GpuTraceError
from gpu_trace.values import unknown

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

Group = Literal["loaders", "analyses", "policies"]
PolicyKind = Literal["scheduler", "placement", "admission", "batching", "router", "latency"]
"""Training replay kinds (scheduler, placement, admission) and the serving replay's
(batching: replica schedulers, router, latency: iteration-time models)."""

#: Entry-point group per plugin kind, and the package whose modules hold the built-ins.
ENTRY_POINT_GROUPS: dict[Group, str] = {
    "loaders": "gpu_trace.loaders",
    "analyses": "gpu_trace.analyses",
    "policies": "gpu_trace.policies",
}
_BUILTIN_PACKAGES: dict[Group, tuple[str, ...]] = {
    "loaders": ("gpu_trace.loaders",),
    "analyses": ("gpu_trace.analyses",),
    "policies": (
        "gpu_trace.replay.scheduling",
        "gpu_trace.replay.placement",
        "gpu_trace.replay.admission",
        "gpu_trace.serve.batching",
        "gpu_trace.serve.routing",
        "gpu_trace.serve.latency",
    ),
}


@dataclass(frozen=True)
class NoOptions:
    """This plugin has no options."""


def option(
    default: Any,
    help: str,
    *,
    flag: str | None = None,
    choices: tuple[str, ...] | None = None,
    parse: Callable[[str], Any] | None = None,
    metavar: str | None = None,
    deprecated: str | None = None,
    repeat: bool = False,
    check: Callable[[Any], Any] | None = None,
) -> Any:
    """A field of a plugin's options dataclass: its default and help text, optionally the
    command-line flag (default ``--field-name``) and the values it accepts.

    ``parse`` is for values typed as text on the command line but held parsed (a
    duration, a comma list, a checked name): the command takes a string (shown as
    ``metavar``), ``parse`` turns it into the field's value, and a ``ValueError`` or
    :class:`gpu_trace.errors.UsageError` it raises becomes the usual one-line usage error.
    Left out, the field's default holds.

    A ``flag`` given is used as is (a bool then has no ``--no-`` form, like ``--per-user``).
    ``deprecated`` is an old spelling of the flag, kept as a hidden option that still
    works, with a one-line deprecation warning (renamed options must not break scripts).
    The warning names the value as ``metavar`` (``--jobs FILE``) when one is declared;
    ``--help`` shows ``metavar`` for ``parse`` options only (others keep typer's own).

    ``repeat`` (with ``parse``) lets the flag be given more than once; the texts are
    joined with commas before ``parse`` sees them, so ``--x a --x b`` means ``--x a,b``
    (the house convention for every list option). A ``parse`` option's default may be
    given as text, as a user would type it (``"1s"``): it is parsed here, once, and the
    help shows the text.

    ``check`` (for options not read as text) is called with the value given on the
    command line before the command runs: a number's range (``--load 0``), raising
    :class:`gpu_trace.errors.UsageError` (one ``error:`` line, exit 2).
    """
    typed = None
    if parse is not None and isinstance(default, str):
        typed, default = default, parse(default)
    metadata = {
        "help": help,
        "flag": flag,
        "choices": choices,
        "parse": parse,
        "metavar": metavar,
        "deprecated": deprecated,
        "repeat": repeat,
        "typed": typed,
        "check": check,
    }
    if isinstance(default, list | dict | set):
        return field(default_factory=lambda: type(default)(default), metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass(frozen=True)
class OptionSpec:
    """One option of a plugin, read from its options dataclass (for CLIs and docs)."""

    name: str
    flag: str
    type: Any
    default: Any
    help: str
    choices: tuple[str, ...] | None
    parse: Callable[[str], Any] | None = None
    metavar: str | None = None
    #: Whether the declaration named the flag (then it is used exactly as given).
    flag_given: bool = False
    #: A hidden old spelling of the flag that still works, with a warning.
    deprecated: str | None = None
    repeat: bool = False
    typed: str | None = None
    #: Called with a given value before the command runs (a number's range).
    check: Callable[[Any], Any] | None = None

    @property
    def default_text(self) -> str | None:
        """The default as one would type it (as declared, else a comma list for a tuple
        or list), for help and docs of options read as text; None when there is none.
        """
        if self.typed is not None:
            return self.typed
        if self.default is None:
            return None
        if isinstance(self.default, tuple | list):
            return ",".join(str(v) for v in self.default)
        return str(self.default)


def option_specs(options: type[Any]) -> list[OptionSpec]:
    """The options a plugin declares, in field order."""
    hints = _type_hints(options)
    out = []
    for f in dataclasses.fields(options):
        default = f.default
        if f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        out.append(
            OptionSpec(
                name=f.name,
                flag=f.metadata.get("flag") or "--" + f.name.replace("_", "-"),
                type=hints.get(f.name, str),
                default=None if default is dataclasses.MISSING else default,
                help=str(f.metadata.get("help", "")),
                choices=f.metadata.get("choices"),
                parse=f.metadata.get("parse"),
                metavar=f.metadata.get("metavar"),
                flag_given=f.metadata.get("flag") is not None,
                deprecated=f.metadata.get("deprecated"),
                repeat=bool(f.metadata.get("repeat", False)),
                typed=f.metadata.get("typed"),
                check=f.metadata.get("check"),
            )
        )
    return out


def _type_hints(options: type[Any]) -> dict[str, Any]:
    import typing

    return typing.get_type_hints(options)


@dataclass(frozen=True)
class LoaderPlugin:
    """A raw-format loader: ``gpu-trace ingest NAME PATH [options]``.

    ``loader`` builds the :class:`gpu_trace.loaders.base.Loader`; ``kwargs`` turns the
    parsed options into the loader's keyword arguments (default: the fields as they are).
    ``many_paths``: the command takes one or more paths (``NAME PATHS...``, help
    ``path_help``); the first is the ingest's path, the rest reach the loader's
    ``batches`` as ``more`` (a tuple of paths), e.g. pods and nodes in two files.
    """

    name: str
    loader: Callable[[], Any]
    help: str
    options: type[Any] = NoOptions
    path_help: str = "Folder or file with the raw input."
    kwargs: Callable[[Any], dict[str, Any]] | None = None
    many_paths: bool = False

    def loader_kwargs(self, options: Any) -> dict[str, Any]:
        """The keyword arguments the loader's ``batches`` gets for these options."""
        if self.kwargs is not None:
            return self.kwargs(options)
        return {f.name: getattr(options, f.name) for f in dataclasses.fields(options)}


@dataclass(frozen=True)
class AnalysisPlugin:
    """A characterization analysis: ``gpu-trace analyze NAME [options]``, a report section
    (when it has a chart) and glossary entries.

    ``run(inputs, options)`` gets the store's :class:`gpu_trace.analyses.inputs.Inputs`
    and returns a (lazy) frame; ``chart(frame)`` an altair chart of that frame (the
    report section shows the table and the chart, run with the default options);
    ``glossary`` maps each output column to its (header label, meaning), used by the
    report's column headers and ``docs/plugins.md``.

    ``sources``: whether the command takes ``--source`` (an analysis of the whole store's
    telemetry has none); ``needs_jobs``: whether a ``--source`` that selects no jobs is
    an error (it is not for analyses of telemetry alone). ``rank`` orders the commands
    in ``gpu-trace analyze --help`` (built-ins keep their historical order).

    ``units``: the display unit of output columns (name -> unit, or a function of the
    options giving that mapping; vocabulary in :mod:`gpu_trace.column_units`), so
    tables show durations, sizes and percentages from declarations, not from names.
    ``needs``: the tables the analysis reads (``jobs``, ``gpu_samples``, ...), named in
    the one stderr line an empty result prints; ``empty``: ``(inputs, options) -> str |
    None``, a more specific reason when the result is empty
    (:mod:`gpu_trace.analyses.empty`).

    Every command also takes the scope options (``--as-of``, ``--since``, ``--until``,
    ``--cluster``, ``--partition``): ``inputs`` arrive already restricted
    (:class:`gpu_trace.analyses.scope.Scope`).
    """

    name: str
    help: str
    run: Callable[[Any, Any], Any]
    options: type[Any] = NoOptions
    title: str = ""
    chart: Callable[[Any], Any] | None = None
    glossary: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    sources: bool = True
    needs_jobs: bool = True
    rank: int = 1000
    units: Mapping[str, str] | Callable[[Any], Mapping[str, str]] = field(default_factory=dict)
    needs: tuple[str, ...] = ()
    empty: Callable[[Any, Any], str | None] | None = None
    #: Whether the command takes ``--period day|week|month`` (an sreport-style table:
    #: ``run`` reads ``inputs.scope.period``).
    periods: bool = False


@dataclass(frozen=True)
class PolicyPlugin:
    """A replay policy: ``kind`` (scheduler, placement or admission), the name used by
    ``--policy`` / ``--placement``, and the class (with a ``Config`` options dataclass).
    """

    kind: PolicyKind
    name: str
    policy: type[Any]
    #: Listing order (``replay policies``); built-ins keep their historical order.
    rank: int = 1000
    #: Old names that still select it, with a one-line deprecation warning (a renamed
    #: policy must not break scripts); never listed.
    deprecated: tuple[str, ...] = ()


Plugin = LoaderPlugin | AnalysisPlugin | PolicyPlugin
_KIND: dict[Group, type[Any]] = {
    "loaders": LoaderPlugin,
    "analyses": AnalysisPlugin,
    "policies": PolicyPlugin,
}


class PluginError(GpuTraceError):
    """A plugin that cannot be loaded or is declared twice."""


def _declared(module: ModuleType) -> list[Any]:
    found: list[Any] = []
    if hasattr(module, "PLUGIN"):
        found.append(module.PLUGIN)
    found.extend(getattr(module, "PLUGINS", ()))
    return found


def _builtin(group: Group) -> list[Any]:
    """The declarations of the group's built-in packages, package by package, each
    package's own first, then its modules in name order.
    """
    found: list[Any] = []
    for name in _BUILTIN_PACKAGES[group]:
        package = importlib.import_module(name)
        found.extend(_declared(package))
        for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
            if not info.ispkg:
                found.extend(_declared(importlib.import_module(f"{name}.{info.name}")))
    return found


def entry_points(group: str) -> Iterable[EntryPoint]:
    """Installed entry points of ``group``. ``importlib.metadata`` is imported here, not
    at the top: it costs ~20 ms that a command naming a built-in plugin never needs.
    """
    from importlib.metadata import entry_points as installed

    return installed(group=group)


def _third_party(group: Group) -> list[Any]:
    """Installed plugins. One that does not load, or is not a declaration, is left out
    with one ``warning:`` line on stderr: a broken add-on must not take the built-in
    commands down with it, and must not vanish silently either.
    """
    found: list[Any] = []
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUPS[group]), key=lambda e: e.name):
        try:
            target = ep.load()
        except Exception as exc:
            _warn(f"plugin {ep.name!r} ({ep.value}, group {ep.group}) does not load: {exc}")
            continue
        declared = _declared(target) if isinstance(target, ModuleType) else [target]
        for plugin in declared:
            if isinstance(plugin, _KIND[group]):
                found.append(plugin)
            else:
                _warn(
                    f"plugin {ep.name!r} ({ep.value}, group {ep.group}) is not a "
                    f"{_KIND[group].__name__}: skipped"
                )
    return found


def _warn(message: str) -> None:
    sys.stderr.write(f"warning: {message}\n")


def builtins(group: Group) -> tuple[Any, ...]:
    """The plugins gpu-trace itself declares (``docs/plugins.md`` lists these)."""
    return tuple(_builtin(group))


@cache
def discover(group: Group) -> tuple[Any, ...]:
    """Every declared plugin of ``group``: the built-ins (module order), then the installed
    entry points (name order). Cached: entry points are read once per process.
    """
    out: list[Any] = []
    seen: set[tuple[str, str]] = set()
    for plugin in _builtin(group):  # ours: a wrong or doubled declaration is a bug
        if not isinstance(plugin, _KIND[group]):
            msg = f"{plugin!r} is not a {_KIND[group].__name__} declaration"
            raise PluginError(msg)
        key = (getattr(plugin, "kind", group), plugin.name)
        if key in seen:
            msg = f"two {group} plugins are named {plugin.name!r}"
            raise PluginError(msg)
        seen.add(key)
        out.append(plugin)
    for plugin in _installed(group):  # an installed one never replaces a name in use
        key = (getattr(plugin, "kind", group), plugin.name)
        if key in seen:
            _warn(f"installed {group} plugin {plugin.name!r} is already declared: skipped")
            continue
        seen.add(key)
        out.append(plugin)
    return tuple(out)


def _package_modules(group: Group) -> list[str]:
    """The names of the built-in package's modules, read from its folder without
    importing the package (importing ``gpu_trace.loaders`` loads polars and pyarrow).
    """
    (package,) = _BUILTIN_PACKAGES[group]
    folder = Path(__file__).parent.joinpath(*package.split(".")[1:])
    return sorted(m.name for m in pkgutil.iter_modules([str(folder)]) if not m.ispkg)


def _loader_index() -> dict[str, tuple[str, ...]]:
    """Built-in loader module -> the loader names it declares (``__init__``: the package
    itself), from the generated :mod:`gpu_trace.command_index`.
    """
    from gpu_trace import command_index

    return command_index.LOADER_MODULES


def _unindexed_loaders() -> list[LoaderPlugin]:
    """Loaders declared by built-in modules the generated index does not know (a loader
    file just added): those modules are imported, so adding a loader stays adding a file.
    """
    index = _loader_index()
    (package,) = _BUILTIN_PACKAGES["loaders"]
    found: list[LoaderPlugin] = []
    for stem in _package_modules("loaders"):
        if stem not in index:
            module = importlib.import_module(f"{package}.{stem}")
            found.extend(p for p in _declared(module) if isinstance(p, LoaderPlugin))
    return found


@cache
def _installed(group: Group) -> tuple[Any, ...]:
    """The installed (entry-point) declarations of ``group``, loaded once per process."""
    return tuple(_third_party(group))


def loader_names() -> list[str]:
    """Every loader's name (the ``gpu-trace ingest`` commands), built-in or installed, in
    name order. Imports no built-in loader module the generated index knows: listing the
    commands must not cost loading every format's parser.
    """
    index = _loader_index()
    present = set(_package_modules("loaders"))
    names = {n for stem, declared in index.items() if stem in present for n in declared}
    names.update(index.get("__init__", ()))
    names.update(p.name for p in _unindexed_loaders())
    names.update(p.name for p in _installed("loaders") if isinstance(p, LoaderPlugin))
    return sorted(names)


def loader(name: str) -> LoaderPlugin:
    """The declaration of the loader ``name``, importing only its own module when it is
    a built-in the index knows; otherwise (a new file, an installed plugin, an unknown
    name) as :func:`loaders` finds it, unknown names failing in :func:`lookup`.
    """
    (package,) = _BUILTIN_PACKAGES["loaders"]
    present = {*_package_modules("loaders"), "__init__"}
    for stem, declared in _loader_index().items():
        if name in declared and stem in present:
            module = package if stem == "__init__" else f"{package}.{stem}"
            for plugin in _declared(importlib.import_module(module)):
                if isinstance(plugin, LoaderPlugin) and plugin.name == name:
                    return plugin
    for plugin in (*_unindexed_loaders(), *_installed("loaders")):
        if isinstance(plugin, LoaderPlugin) and plugin.name == name:
            return plugin
    found: LoaderPlugin = lookup("loader", name, {p.name: p for p in loaders()})
    return found


def loaders() -> tuple[LoaderPlugin, ...]:
    """Every declared loader (the ``gpu-trace ingest`` commands), built-ins first."""
    return tuple(p for p in discover("loaders") if isinstance(p, LoaderPlugin))


def analyses() -> tuple[AnalysisPlugin, ...]:
    """Every declared analysis, in ``rank`` order (then discovery order)."""
    found = [p for p in discover("analyses") if isinstance(p, AnalysisPlugin)]
    return tuple(sorted(found, key=lambda p: p.rank))


def policies(kind: PolicyKind) -> tuple[PolicyPlugin, ...]:
    """The declared replay policies of one ``kind``, in listing (rank) order."""
    found = [p for p in discover("policies") if isinstance(p, PolicyPlugin) and p.kind == kind]
    return tuple(sorted(found, key=lambda p: p.rank))


def lookup(what: str, name: str, known: Mapping[str, Any]) -> Any:
    """The one place a plugin name is resolved (loaders, analyses, policies), so an
    unknown name always fails the same way: :func:`gpu_trace.values.unknown`, a usage
    error (exit 2) with "did you mean".
    """
    try:
        return known[name]
    except KeyError:
        raise unknown(what, name, known) from None


__all__ = [
    "AnalysisPlugin",
    "LoaderPlugin",
    "NoOptions",
    "Plugin",
    "PluginError",
    "PolicyPlugin",
    "analyses",
    "builtins",
    "discover",
    "loader",
    "loader_names",
    "loaders",
    "lookup",
    "option",
    "option_specs",
    "policies",
]
