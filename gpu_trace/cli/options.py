"""Options shared by several commands, declared once, and the checks every command's
options go through.

Conventions (README "Command line"): ``--store DIR``; ``--output/-o FILE`` for a data
file; ``--out DIR`` for a folder a command writes; ``--format/-f`` is the output format
only; durations are ``90s``, ``15m``, ``2h``, ``1d`` or bare seconds; lists of names are
comma-separated and may also be given by repeating the flag.

A command that only reads the store declares ``store: ReadStoreOpt``: a path without a
store is refused before the command runs ("no store at X"). Writers declare
``StoreOpt`` and create the store. A numeric option gets ``callback=number(...)`` (a
finite value in range, else exit 2), a renamed option keeps its old spelling through
:func:`deprecated`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, TypeVar

import typer

from gpu_trace.cli._boundary import escape, fail, warn
from gpu_trace.errors import GpuTraceError, UsageError
from gpu_trace.settings import existing_store
from gpu_trace.values import check_number, parse_duration, unknown

T = TypeVar("T")

_STORE_HELP = "Store folder. Default: $GPU_TRACE_STORE, else data/store."

StoreOpt = Annotated[
    Path | None,
    typer.Option("--store", help=_STORE_HELP + " Created if missing.", show_default=False),
]
"""``--store`` of a command that writes (ingest, telemetry sample/scrape)."""


def _existing_store(ctx: typer.Context, value: Path | None) -> Path | None:
    """Refuse a store path that holds no store, before the command runs (exit 1)."""
    if ctx.resilient_parsing:  # shell completion: never fail or print
        return value
    try:
        return existing_store(value)
    except GpuTraceError as exc:
        raise fail(escape(str(exc))) from None


ReadStoreOpt = Annotated[
    Path | None,
    typer.Option(
        "--store",
        help=_STORE_HELP + " Must exist (reads never create a store).",
        show_default=False,
        callback=_existing_store,
    ),
]
"""``--store`` of a command that reads: refused with "no store at X" when missing."""


def number(
    *, gt: float | None = None, ge: float | None = None, le: float | None = None
) -> Callable[[typer.Context, typer.CallbackParam, T], T]:
    """A typer callback that refuses NaN, infinities and values out of range with one
    line and exit 2 (``--load 0``, ``--fail-rate 2``); None (not given) passes.
    """

    def check(ctx: typer.Context, param: typer.CallbackParam, value: T) -> T:
        if value is None or ctx.resilient_parsing:
            return value
        flag = max(param.opts, key=len) if param.opts else str(param.name)
        try:
            check_number(float(value), flag, gt=gt, ge=ge, le=le)  # type: ignore[arg-type]
        except UsageError as exc:
            raise fail(escape(str(exc)), 2) from None
        return value

    return check


def seconds(text: str, what: str = "duration") -> float:
    """A duration option (``500ms``, ``90s``, ``15m``, ``2h``, ``1d``, bare seconds) in
    seconds, > 0 (:func:`gpu_trace.values.parse_duration`).
    """
    return check_number(parse_duration(text, what), what, gt=0)


def deprecated(old: str, new: str, old_value: T | None, value: T) -> T:
    """The value of a renamed option: ``old_value`` (with a one-line deprecation
    warning) when the old spelling was used, else ``value``. The old spelling stays a
    hidden option, so scripts written against it keep working.
    """
    if old_value is None or old_value == []:
        return value
    warn(f"{old} is deprecated: use {new}")
    return old_value


def check_sources(store: Path, names: list[str]) -> list[str]:
    """``names`` if the store holds data for each; a source the store lacks is exit 1
    when gpu-trace knows it (ingest it first) and a usage error with "did you mean"
    when it names nothing (``report -s nope`` must not build an empty report).
    """
    from gpu_trace.loaders import LOADERS
    from gpu_trace.store.scan import store_sources

    have = store_sources(store)
    for name in names:
        if name in have:
            continue
        if name in LOADERS:
            msg = (
                f"no data for source {name!r} in the store {store} "
                f"(it holds: {', '.join(have) or 'nothing'}); ingest it first"
            )
            raise GpuTraceError(msg)
        msg = "source"
        raise unknown(msg, name, [*have, *(n for n in LOADERS if n not in have)])
    return names


JobsFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--jobs-file",
        help="CSV job_id,host,gpu_indices,start,end (gpu_indices like 0;1; ISO times): the "
        "jobs to charge telemetry to. Default: the store's placements.",
        show_default=False,
    ),
]
"""A jobs file (``--jobs N`` elsewhere is a count, so the file has its own name)."""

OldJobsFileOpt = Annotated[Path | None, typer.Option("--jobs", hidden=True)]
"""The deprecated spelling of :data:`JobsFileOpt`."""
