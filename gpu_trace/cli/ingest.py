"""``gpu-trace ingest <source> PATH``: raw trace files into the store.

One command per declared loader (:mod:`gpu_trace.plugins`), generated from its
declaration: PATH (or PATHS... for a loader that reads several files), ``--store`` and
the loader's options, durations, comma lists and checked names included (``option(parse=)``).
There are no hand-written ingest commands: adding a loader is adding its module.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
import typer.main

from gpu_trace import plugins, progress
from gpu_trace.cli._boundary import detail, err
from gpu_trace.cli.generated import add_command, path_parameter
from gpu_trace.cli.lazy import Command, LazyGroup, stub
from gpu_trace.cli.options import StoreOpt
from gpu_trace.settings import resolve_store

if TYPE_CHECKING:
    from gpu_trace.loaders import Batch, IngestReport


class IngestGroup(LazyGroup):
    """``gpu-trace ingest``: one command per declared loader, in name order, each built
    (its loader module imported) only when it is used; listed from the generated index.
    """

    def names(self) -> list[str]:
        """Every loader's name, read once per group (installed plugins load here)."""
        if not hasattr(self, "_names"):
            self._names = plugins.loader_names()
        return self._names

    def known(self, name: str) -> bool:
        """A built-in loader from the index, without reading installed plugins' entry
        points (``ingest helios`` needs no other loader); else from the full list.
        """
        from gpu_trace import command_index

        return name in command_index.INGEST_HELP or name in self.names()

    def build(self, name: str) -> Command:
        """The ``ingest NAME`` command generated from the loader's declaration."""
        holder = typer.Typer()
        _generate(holder, plugins.loader(name))
        return typer.main.get_group(holder).commands[name]

    def listed(self, name: str) -> Command:
        """A built-in loader's stand-in from the index; an installed one as built."""
        from gpu_trace import command_index

        text = command_index.INGEST_HELP.get(name)
        return self.commands[name] if text is None else stub(name, text)


app = typer.Typer(
    cls=IngestGroup,
    help=(
        "Read raw trace or telemetry files into the store (re-ingesting replaces; slurm and "
        "kubernetes exports merge, one row per job)."
    ),
    no_args_is_help=True,
)


def run_ingest(source: str, path: Path, store: Path | None, **options: Any) -> IngestReport:
    """Run one loader with a progress display on stderr and print the reconciliation
    (rows read = written + quarantined + merged) on stdout.
    """
    from gpu_trace.loaders import get as get_loader
    from gpu_trace.loaders import ingest

    root = resolve_store(store)
    # the shared progress helper: nothing drawn (and rich's progress not even imported)
    # when quiet or when stderr is not a terminal
    with progress.task(f"ingest {source}", console=err) as update:

        def on_batch(batch: Batch) -> None:
            update(0, None, f"{batch.file.path.name} -> {batch.table}")
            detail(f"{batch.file.path} -> {batch.table} (dataset {batch.dataset})")  # -v

        report = ingest(get_loader(source), path, root, on_batch=on_batch, **options)
    print_report(report)
    return report


def print_report(report: IngestReport) -> None:
    """The reconciliation table (one line per file and table, then the totals) on
    stdout, so scripts can read it, and the one-line summary on stderr.
    """
    header = ("file", "table", "dataset", "read", "written", "quarantined", "merged")
    rows = [
        (
            r.file,
            r.table,
            r.dataset,
            str(r.rows_read),
            str(r.rows_written),
            str(r.rows_quarantined),
            str(r.rows_merged),
        )
        for r in report.lines
    ]
    read, written, quarantined = report.totals
    merged = report.merged
    rows.append(("total", "", "", str(read), str(written), str(quarantined), str(merged)))
    widths = [max(len(x[i]) for x in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        sys.stdout.write(
            "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() + "\n"
        )
    err.print(
        f"{report.source}: read {read} = written {written} + quarantined {quarantined} "
        f"+ merged {merged}; "
        f"store {report.store}"
    )


def _generate(target: typer.Typer, plugin: plugins.LoaderPlugin) -> None:
    """Add the ``ingest NAME`` command of one declared loader, built-in or installed, to
    ``target``: PATH (or PATHS...), ``--store``, then the declaration's options.
    """
    store = inspect.Parameter(
        "store", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=StoreOpt
    )

    def body(given: dict[str, Any], options: Any) -> None:
        kwargs = plugin.loader_kwargs(options)
        if plugin.many_paths:
            first, *more = given["paths"]
            run_ingest(plugin.name, first, given["store"], more=tuple(more), **kwargs)
        else:
            run_ingest(plugin.name, given["path"], given["store"], **kwargs)

    path = path_parameter(plugin.path_help, many=plugin.many_paths)
    add_command(target, plugin.name, plugin.help, [path, store], plugin.options, body)
