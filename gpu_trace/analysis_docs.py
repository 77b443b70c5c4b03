"""``docs/analyses/``: one page per analysis, generated from its declaration, each with
a worked example run on the bundled samples.

A page says what the analysis answers (its help), how to ask (the command, its
options, the Python call), what comes back (every output column with its label,
meaning and unit) and what it reads, then shows it: the command run on a store built
from ``data/samples`` and the rows it printed (or, where the samples hold nothing it
can count, the one line saying so). Nothing on a page is written by hand, so a page
cannot drift from the code: ``make docs`` writes them, a test compares.

``python -m gpu_trace.analysis_docs [DIR] [--check]``
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path

from gpu_trace import plugins
from gpu_trace.column_units import analysis_units
from gpu_trace.display import unit_of
from gpu_trace.errors import GpuTraceError

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "data" / "samples"

SAMPLE_INGESTS: tuple[tuple[str, ...], ...] = (
    ("openb", "openb"),
    ("slurm", "slurm/jobs.psv", "--cluster", "mycluster", "--tz", "Europe/Berlin"),
    ("sinfo", "slurm/sinfo-2026-01-05T0000Z.txt", "--cluster", "mycluster"),
    ("pai2020", "pai2020"),
    ("nvidia-smi", "telemetry"),
    ("dcgmi", "telemetry"),
    ("prometheus-range", "telemetry/prometheus-range-dcgm.jsonl"),
    ("azure-llm", "azure-llm"),
    ("mooncake", "mooncake"),
)
"""The example store: bundled real samples (openb pods, the PAI 2020 sample, nvidia-smi
/ dcgmi / DCGM-exporter output) and the Slurm ``sacct`` / ``sinfo`` examples, as
``gpu-trace ingest`` arguments with paths under ``data/samples``; and the bundled serving
traces (Azure LLM inference 2023, Mooncake FAST'25) for the serving analyses."""

EXAMPLE_ROWS = 8
"""Rows of each example shown (the command prints them all)."""


def _run(args: Sequence[str]) -> tuple[int, str, str]:
    """Run the CLI in-process: exit code, stdout, stderr."""
    from typer.testing import CliRunner

    from gpu_trace.cli import app

    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200", "NO_COLOR": "1"})
    return result.exit_code, result.stdout, result.stderr


def build_example_store(store: Path) -> None:
    """Ingest :data:`SAMPLE_INGESTS` into ``store`` (raises if an ingest fails)."""
    for name, rel, *extra in SAMPLE_INGESTS:
        code, _, err = _run(
            ["-q", "ingest", name, str(SAMPLES / rel), *extra, "--store", str(store)]
        )
        if code != 0:
            msg = f"ingest {name} {rel} failed: {err.strip()}"
            raise RuntimeError(msg)


def _example(plugin: plugins.AnalysisPlugin, store: Path) -> list[str]:
    """The worked-example block of ``plugin``'s page."""
    shown = f"gpu-trace analyze {plugin.name} --max-rows {EXAMPLE_ROWS}"
    code, out, err = _run(
        ["analyze", plugin.name, "--store", str(store), "--max-rows", str(EXAMPLE_ROWS)]
    )
    lines = ["## Worked example", ""]
    lines += [
        "On a store built from the bundled samples (`data/samples`: the openb pod list, the "
        "PAI 2020 sample, nvidia-smi / dcgmi / DCGM-exporter output, the Slurm `sacct` and "
        "`sinfo` examples, the Azure LLM and Mooncake serving traces; see "
        "`gpu_trace/analysis_docs.py`):",
        "",
        "```console",
        f"$ {shown}",
    ]
    notes = [ln for ln in err.splitlines() if ln.strip()]
    body = out.rstrip("\n").splitlines() if code == 0 else []
    lines += [*body, *notes] if code == 0 else notes
    lines += ["```", ""]
    if code == 0 and len(body) <= 2:  # a header alone
        lines += ["The samples hold nothing this analysis counts; the line above says why.", ""]
    return [ln.replace(str(store), "STORE") for ln in lines]


def _options(plugin: plugins.AnalysisPlugin) -> list[str]:
    from gpu_trace.plugin_docs import option_table

    table = option_table(plugin.options)
    if not table:
        return ["No options of its own.", ""]
    return [*table[1:], ""]


def _columns(plugin: plugins.AnalysisPlugin, store: Path) -> list[str]:
    """Every output column of the default run, with the report's label and meaning
    (the analysis' glossary, the shared analysis glossary or the schema) and its unit.
    """
    from gpu_trace.api import Store
    from gpu_trace.reports.headers import header

    try:
        with warnings.catch_warnings():  # the example block prints them, once
            warnings.simplefilter("ignore")
            names = Store(store).analyze(plugin.name).columns
    except GpuTraceError:
        return []
    units = analysis_units(plugin, plugin.options())
    out = ["## Columns", "", "| column | label | unit | meaning |", "|---|---|---|---|"]
    for column in names:
        label, tip = header(column)
        meaning = tip.partition(": ")[2]
        out.append(f"| `{column}` | {label} | {unit_of(column, units) or ''} | {meaning} |")
    return [*out, ""]


def render_page(plugin: plugins.AnalysisPlugin, store: Path) -> str:
    """The page of one analysis."""
    title = plugin.title or plugin.name
    flags = " [--source NAME]" if plugin.sources else ""
    scope = "[--as-of T] [--since T] [--until T] [--cluster C] [--partition P]"
    period = " [--period day|week|month]" if plugin.periods else ""
    lines = [
        "<!-- generated by `make docs` (python -m gpu_trace.analysis_docs): do not edit -->",
        f"# `{plugin.name}`: {title}",
        "",
        *plugin.help.strip().splitlines(),
        "",
        "```console",
        f"gpu-trace analyze {plugin.name}{flags} {scope}{period} [OPTIONS]",
        "```",
        "",
        "```python",
        "import gpu_trace as gt",
        f'gt.open("data/store").analyze("{plugin.name}")  # options as keyword arguments',
        "```",
        "",
        "## Options",
        "",
        *_options(plugin),
    ]
    if plugin.needs:
        lines += [f"Reads: {', '.join(f'`{t}`' for t in plugin.needs)}.", ""]
    lines += _columns(plugin, store)
    lines += _example(plugin, store)
    return "\n".join(lines).rstrip() + "\n"


def render_all(store: Path) -> dict[str, str]:
    """File name -> text of every page and the index, for the built-in analyses."""
    built = sorted(plugins.builtins("analyses"), key=lambda p: p.rank)
    pages = {f"{p.name}.md": render_page(p, store) for p in built}
    index = [
        "<!-- generated by `make docs` (python -m gpu_trace.analysis_docs): do not edit -->",
        "# Analyses",
        "",
        "One page per `gpu-trace analyze` command, generated from its declaration, with a "
        "worked example on the bundled samples. Definitions: [metrics.md](../metrics.md).",
        "",
        "| analysis | what it answers |",
        "|---|---|",
    ]
    for p in built:
        first = " ".join(p.help.strip().split("\n\n")[0].split())
        index.append(f"| [`{p.name}`]({p.name}.md) | {first} |")
    pages["README.md"] = "\n".join(index) + "\n"
    return pages


def main(argv: list[str] | None = None) -> int:
    """Write (or with ``--check`` compare) the pages in DIR (default docs/analyses)."""
    parser = argparse.ArgumentParser(
        prog="python -m gpu_trace.analysis_docs", description="Write docs/analyses/."
    )
    parser.add_argument("target", nargs="?", default="docs/analyses", type=Path)
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 on drift")
    args = parser.parse_args(argv)
    target: Path = args.target
    with tempfile.TemporaryDirectory(prefix="gpu-trace-docs-") as tmp:
        store = Path(tmp) / "store"
        build_example_store(store)
        pages = render_all(store)
    if args.check:
        stale = sorted(
            name
            for name, text in pages.items()
            if not (target / name).is_file() or (target / name).read_text("utf-8") != text
        )
        extra = sorted(p.name for p in target.glob("*.md") if p.name not in pages)
        if stale or extra:
            sys.stderr.write(
                f"{target} is out of date ({', '.join(stale + extra)}): run `make docs`\n"
            )
            return 1
        return 0
    target.mkdir(parents=True, exist_ok=True)
    for old in target.glob("*.md"):
        if old.name not in pages:
            old.unlink()
    for name, text in pages.items():
        (target / name).write_text(text, encoding="utf-8")
    sys.stderr.write(f"wrote {len(pages)} files in {target}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
