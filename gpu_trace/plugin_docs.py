"""``docs/plugins.md``, generated from the plugin declarations (:mod:`gpu_trace.plugins`).

``python -m gpu_trace.plugin_docs docs/plugins.md`` rewrites it; ``tests/test_plugins.py``
fails when the committed file and the declarations drift apart. Only the built-ins are
listed (installed third-party plugins would make the file depend on the machine).
"""

from __future__ import annotations

import argparse
import sys
from enum import Enum
from pathlib import Path
from typing import Any

from gpu_trace import plugins

HEADER = """# Plugins: loaders, analyses, policies

Generated from the declarations by `python -m gpu_trace.plugin_docs docs/plugins.md`
(a test fails when it drifts). Each plugin is one file that declares its name and options
(a dataclass whose fields carry their help, built with `gpu_trace.plugins.option`); the
`gpu-trace ingest` / `analyze` commands, `replay --policy` / `--placement`, the report's
sections and column headers are generated from it.

## Adding one

- **Options**: `option(default, help, flag=, choices=, parse=, metavar=, repeat=,
  deprecated=)`. `choices` limits the values (an `Enum`-typed field is checked by its
  members); `parse` takes the option as text and turns it into the field's value (a
  duration with `values.parse_duration`, a comma list with `values.split_list`, a name
  checked with `values.choose`), its `ValueError` / `UsageError` becoming the one-line
  usage error (exit 2). A `parse` option's default may be written as typed (`"1s"`: parsed
  once, shown so in `--help`); `repeat=True` lets the flag repeat (`--x a --x b` is
  `--x a,b`); a `flag` given is used as is (a bool then has no `--no-` form); `deprecated`
  keeps an old spelling as a hidden option that still works, with a warning.
- **Analyses**: `AnalysisPlugin(sources=False)` for one without `--source`,
  `needs_jobs=False` when a source without jobs is no error, `rank` for its place in
  `gpu-trace analyze --help`, `periods=True` for one that takes `--period day|week|month`
  (its `run` reads `inputs.scope.period`). Every analysis takes `--as-of`, `--since`,
  `--until`, `--cluster` and `--partition`: its `inputs` arrive restricted to them, and
  `inputs.clipped_jobs` are the jobs as of the as-of instant, clipped to the window
  (running jobs end at as-of; pending ones carry `wait_s` so far and `wait_censored`).
- **Paths**: a loader reads `PATH` (help: `path_help`); `many_paths=True` makes it
  `PATHS...`, the first the ingest's path and the rest passed to `batches` as `more`.
- **Built in**: a new module in `gpu_trace/loaders/`, `gpu_trace/analyses/` or
  `gpu_trace/replay/scheduling/`, `placement/` or `admission/` with a module-level
  `PLUGIN` (or `PLUGINS`, a tuple) of `LoaderPlugin`, `AnalysisPlugin` or `PolicyPlugin`.
  Nothing else changes.
- **Third party**: a package that names the declaration (`module:PLUGIN`) or its module
  under the entry-point group `gpu_trace.loaders`, `gpu_trace.analyses` or
  `gpu_trace.policies` in its `pyproject.toml`; `pip install` it next to gpu-trace.
  `tests/plugin_pkg/` is a complete example (one file per plugin).

A loader yields `Batch`es like every built-in one (`gpu_trace/loaders/base.py` checks rows
read = written + quarantined); an analysis' `run(inputs, options)` returns a frame from
the store's `Inputs`, its optional `chart(frame)` an altair chart (the report shows the
table and the chart; the built-in analyses' charts are the report's own,
`gpu_trace/reports/analysis_charts.py`) and its `glossary` the (label, meaning) of each
output column; a policy is a
class with a `Config` dataclass (see `docs/replay.md`). An unknown name fails in one place,
`gpu_trace.plugins.lookup`, with the known names.
"""


def option_table(options: type[Any]) -> list[str]:
    """A Markdown table of the declared options (a blank line first; none: empty)."""
    specs = plugins.option_specs(options)
    if not specs:
        return []
    lines = ["", "| option | default | meaning |", "|---|---|---|"]
    for s in specs:
        choices = s.choices
        default = s.default
        if isinstance(s.type, type) and issubclass(s.type, Enum):  # typer checks these
            choices = tuple(str(m.value) for m in s.type)
            default = getattr(default, "value", default)
        meaning = s.help + (f" One of: {', '.join(choices)}." if choices else "")
        # An option read as text (parse=) shows its default as one would type it.
        typed = s.default_text if s.parse is not None and s.default is not None else None
        lines.append(f"| `{s.flag}` | `{typed or repr(default)}` | {meaning} |")
    return lines


def _first_line(text: str) -> str:
    return " ".join(text.strip().split("\n\n")[0].split())


def _policy_tables(title: str, kinds: tuple[plugins.PolicyKind, ...]) -> list[str]:
    """One table per policy kind: each built-in's name and first docstring line."""
    out = [title, ""]
    for kind in kinds:
        out += [f"### {kind}", "", "| name | what it does |", "|---|---|"]
        found = sorted(
            (p for p in plugins.builtins("policies") if p.kind == kind), key=lambda p: p.rank
        )
        for p in found:
            out.append(f"| `{p.name}` | {_first_line(p.policy.__doc__ or '')} |")
        out.append("")
    return out


def render() -> str:
    """The whole of ``docs/plugins.md``."""
    out = [HEADER, "## Loaders (`gpu-trace ingest NAME PATH`)", ""]
    for p in plugins.builtins("loaders"):
        out += [f"### `{p.name}`", "", _first_line(p.help), *option_table(p.options), ""]
        if p.many_paths:  # e.g. pods and nodes in two files
            out += [f"`gpu-trace ingest {p.name} PATHS...`: one or more inputs.", ""]
        if p.options is plugins.NoOptions:
            out += ["No options but `--store`.", ""]
    out += ["## Analyses (`gpu-trace analyze NAME`)", ""]
    for p in sorted(plugins.builtins("analyses"), key=lambda p: p.rank):
        out += [f"### `{p.name}`", "", _first_line(p.help), *option_table(p.options), ""]
        if p.periods:
            out += ["Also `--period day|week|month`: one row per period (sreport-style).", ""]
        if p.glossary:
            out += ["| column | label | meaning |", "|---|---|---|"]
            out += [f"| `{k}` | {label} | {m} |" for k, (label, m) in p.glossary.items()]
            out.append("")
    out += _policy_tables(
        "## Replay policies (`--policy`, `--placement`, `-o KEY=VALUE`)",
        ("scheduler", "placement", "admission"),
    )
    out += _policy_tables(
        "## Serving replay plugins (`serve run --batching`, `--router`, `--latency`)",
        ("batching", "router", "latency"),
    )
    return "\n".join(out).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write the reference to the path given (default ``docs/plugins.md``)."""
    parser = argparse.ArgumentParser(
        prog="python -m gpu_trace.plugin_docs", description="Write docs/plugins.md."
    )
    parser.add_argument("target", nargs="?", default="docs/plugins.md", type=Path)
    args = parser.parse_args(argv)
    args.target.write_text(render(), encoding="utf-8")
    sys.stderr.write(f"wrote {args.target}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
