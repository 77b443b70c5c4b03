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
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from gpu_trace.cli._boundary import escape, fail, warn
from gpu_trace.errors import GpuTraceError, UsageError
from gpu_trace.settings import existing_store
from gpu_trace.values import check_number, parse_duration, split_list, unknown

if TYPE_CHECKING:  # the scope module loads polars: only when a command runs
    from gpu_trace.analyses.scope import Scope

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


SweepOutOpt = Annotated[Path, typer.Option("--out", help="Sweep folder: manifest + run markers.")]
"""``--out`` of ``replay sweep`` and ``serve sweep``: the folder their grid runs into."""
RayAddressOpt = Annotated[
    str | None, typer.Option(help="Ray cluster: auto or ray://HOST:10001 (default: local).")
]
"""``--address`` of a sweep: the Ray cluster it joins (local Ray when omitted)."""
SweepWorkersOpt = Annotated[
    int | None,
    typer.Option(
        callback=number(ge=1),
        help="Parallel runs (default: every core; 1 = in process, no Ray).",
    ),
]
"""``--workers`` of a sweep: 1 runs in process, more on Ray."""
SweepResumeOpt = Annotated[
    bool, typer.Option(help="Continue the sweep in --out, skipping finished runs.")
]
"""``--resume`` of a sweep: the finished runs' markers are kept and skipped."""


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
    from gpu_trace.store.scan import store_sources

    have = store_sources(store)
    for name in names:
        if name in have:
            continue
        from gpu_trace.loaders import LOADERS  # only to word the error (its import is not free)

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


# -- scope: --as-of, --since, --until, --cluster, --partition (--period where tabled) ----

_INSTANT = "ISO date or time; UTC unless it has an offset"

AsOfOpt = Annotated[
    str | None,
    typer.Option(
        "--as-of",
        metavar="TIME",
        help="Read the store as it stood at this instant: running jobs count up to it, "
        "pending ones wait until it. Default: each dataset's own (the export's time, "
        f"else its latest timestamp). {_INSTANT}.",
        show_default=False,
    ),
]
SinceOpt = Annotated[
    str | None,
    typer.Option(
        "--since",
        metavar="TIME",
        help=f"Window start (inclusive); jobs straddling it count only their overlap. {_INSTANT}.",
        show_default=False,
    ),
]
UntilOpt = Annotated[
    str | None,
    typer.Option(
        "--until",
        metavar="TIME",
        help=f"Window end (exclusive); jobs straddling it count only their overlap. {_INSTANT}.",
        show_default=False,
    ),
]
ClusterOpt = Annotated[
    list[str] | None,
    typer.Option("--cluster", help="Only these clusters (a,b or repeated).", show_default=False),
]
PartitionOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--partition",
        help="Only these partitions (a,b or repeated): jobs' vc (Slurm Partition), nodes' "
        "partition; capacity is the partitions' own.",
        show_default=False,
    ),
]


def _period_check(ctx: typer.Context, value: str | None) -> str | None:
    """``--period`` must be day, week or month (exit 2 otherwise)."""
    from gpu_trace.analyses.scope import PERIODS

    if value is None or ctx.resilient_parsing:
        return value
    if value not in PERIODS:
        msg = f"{value!r} is not one of {', '.join(PERIODS)}"
        raise typer.BadParameter(msg)
    return value


PeriodOpt = Annotated[
    str | None,
    typer.Option(
        "--period",
        metavar="day|week|month",
        help="One row per day, week or month (sreport-style), in each source's time zone.",
        show_default=False,
        callback=_period_check,
    ),
]

SCOPE_OPTIONS: tuple[tuple[str, object], ...] = (
    ("as_of", AsOfOpt),
    ("since", SinceOpt),
    ("until", UntilOpt),
    ("cluster", ClusterOpt),
    ("partition", PartitionOpt),
)
"""The scope options every ``analyze`` command and ``report`` take (parameter name,
annotation), declared once; ``period`` (:data:`PeriodOpt`) only where a table has
periods."""


def scope_from(
    store: Path,
    *,
    as_of: str | None = None,
    since: str | None = None,
    until: str | None = None,
    cluster: list[str] | None = None,
    partition: list[str] | None = None,
    period: str | None = None,
    sources: list[str] | None = None,
) -> Scope:
    """The :class:`~gpu_trace.analyses.scope.Scope` the scope options ask for, each name
    checked against the store: a cluster or partition it does not hold is a usage error
    with "did you mean" (``--cluster gpu-a`` must not print an empty table).
    """
    from gpu_trace.analyses.scope import scope_of

    scope = scope_of(
        as_of=as_of,
        since=since,
        until=until,
        cluster=split_list(cluster),
        partition=split_list(partition),
        period=period,
    )
    if scope.cluster or scope.partition:
        clusters, partitions = _store_names(store, sources)
        for what, names, have in (
            ("cluster", scope.cluster, clusters),
            ("partition", scope.partition, partitions),
        ):
            for name in names:
                if name not in have:
                    raise unknown(what, name, sorted(have))
    return scope


def _store_names(store: Path, sources: list[str] | None) -> tuple[set[str], set[str]]:
    """The clusters and partitions the store's jobs, machines and capacity name."""
    import polars as pl

    from gpu_trace.store.generations import snapshot_root
    from gpu_trace.store.scan import scan

    root = snapshot_root(store)
    clusters: set[str] = set()
    partitions: set[str] = set()
    for table, col in (("jobs", "vc"), ("machines", "partition"), ("capacity", "vc")):
        lf = scan(root, table, sources)
        clusters.update(lf.select(pl.col("cluster").unique()).collect().to_series().drop_nulls())
        names = lf.select(pl.col(col).str.split(",").explode().str.strip_chars().unique())
        partitions.update(names.collect().to_series().drop_nulls())
    return clusters, partitions
