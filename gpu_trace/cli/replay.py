"""``gpu-trace replay ...``: re-schedule a trace under policies and score them."""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import polars as pl
import typer

from gpu_trace.cli._boundary import domain_errors, err, fail, interrupted
from gpu_trace.cli.generated import option_parameters, option_values
from gpu_trace.cli.options import (
    RayAddressOpt,
    ReadStoreOpt,
    SweepOutOpt,
    SweepResumeOpt,
    SweepWorkersOpt,
    check_sources,
    deprecated,
    number,
)
from gpu_trace.cli.output import Format, FormatOpt, check_output, emit
from gpu_trace.display import duration_text
from gpu_trace.progress import task
from gpu_trace.replay import experiment as xp
from gpu_trace.replay import policy as base
from gpu_trace.replay.config import ReplayConfig
from gpu_trace.settings import resolve_store
from gpu_trace.values import choose, parse_bool, split_list

# The replay driver (DuckDB, the store writer, the estimator) is imported by the
# commands that run it, so building the command line stays cheap; the config module
# holds only the declarations the options are generated from.

app = typer.Typer(
    help="Re-schedule a trace under allocation policies and score them.", no_args_is_help=True
)

SUMMARY_COLUMNS = [
    "run_id",
    "scheduler",
    "placement",
    "jobs_finished",
    "jobs_rejected",
    "jobs_skipped",
    "jct_mean_s",
    "jct_p50_s",
    "jct_p99_s",
    "queue_mean_s",
    "bsld_mean",
    "makespan_s",
    "alloc_mean_ratio",
    "preemptions",
    "jain_slowdown",
    "throughput_mean",
    "wall_s",
]

FAULT_ENERGY_COLUMNS = [
    "node_failures",
    "jobs_failed",
    "lost_gpu_h_failure",
    "lost_gpu_h_preemption",
    "lost_gpu_h_restore",
    "goodput_ratio",
    "energy_kwh",
    "power_mean_w",
    "energy_saved_kwh",
    "node_boots",
]
"""Printed after the summary when a run has faults or energy accounting."""

COMPARE_COLUMNS = [c for c in SUMMARY_COLUMNS if c != "jobs_skipped"]
"""One row per policy; the shared job counts are printed once, with the experiment."""

SourceArg = Annotated[str, typer.Option("--source", "-s", help="Source to replay.")]
GpusOpt = Annotated[
    str | None,
    typer.Option(
        "--gpus",
        help="Cluster spec: N GPUs in nodes of G, e.g. 6500x8 (CPU / memory unlimited) "
        "or 6500x8,cpu=96,mem=768GiB.",
    ),
]
WindowOpt = Annotated[
    str | None, typer.Option("--window", help="Submit-time window START..END (ISO dates).")
]
OptionOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--option",
        help="Policy option KEY=VALUE, placement.KEY=VALUE for the placement (repeatable; "
        "see `replay policies`).",
        show_default=False,
    ),
]
OldOptionOpt = Annotated[list[str] | None, typer.Option("-o", hidden=True)]
"""``-o KEY=VALUE``: deprecated, -o is --output everywhere else."""
ByOpt = Annotated[str | None, typer.Option(help="Also print a per-`user` or per-`vc` breakdown.")]


def _options(option: list[str] | None, old: list[str] | None) -> list[str]:
    return [*(option or []), *deprecated("-o KEY=VALUE", "--option KEY=VALUE", old, [])]


def _opts(items: list[str] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    sched: dict[str, Any] = {}
    place: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep:
            msg = f"option {item!r} is not KEY=VALUE"
            raise xp.UsageError(msg)
        if key.startswith("placement."):
            place[key.removeprefix("placement.")] = value
        else:
            sched[key.removeprefix("scheduler.")] = value
    return sched, place


def _window(text: str | None) -> tuple[str | None, str | None]:
    if not text:
        return None, None
    start, sep, end = text.partition("..")
    if not sep:
        msg = "--window must be START..END (either side may be empty)"
        raise xp.UsageError(msg)
    return start or None, end or None


def _cluster(cluster: str | None, gpus: str | None) -> str:
    if cluster and gpus:
        msg = "give --cluster or --gpus, not both"
        raise xp.UsageError(msg)
    if cluster == "machines":
        return "from-trace"  # the store's machines inventory of the source
    return gpus or cluster or "from-trace"


ReplicatesOpt = Annotated[
    int | None,
    typer.Option(
        callback=number(ge=2),
        help="Replay N resampled workloads (seeds --seed .. --seed+N-1, --resample): "
        "mean and 95 % interval, or 'deterministic (no spread)'.",
    ),
]
SeedsOpt = Annotated[
    str | None,
    typer.Option("--seeds", help="Repeat over seeds (0-9, 0,3,5): mean and spread reported."),
]
InflateOpt = Annotated[
    str | None,
    typer.Option(
        help="Packing: grow the workload until arrived GPU demand = X x capacity; "
        "START:STOP:STEP reads the curve at every point (the FGD figure)."
    ),
]

# -- options generated from ReplayConfig's declarations --------------------------------


EventsOpt = Annotated[
    Path | None,
    typer.Option(
        "--events",
        help="Write the schedule as a Chrome trace-event JSON file (open it in "
        "ui.perfetto.dev or chrome://tracing): arrivals, every run segment on each node "
        "and how it ended, node failures and power states. Several runs (compare, "
        "--seeds): one file each, FILE's stem + run id (or s<seed>).",
        show_default=False,
    ),
]


@dataclass(frozen=True)
class Flags:
    """The replay commands' options that are not one :class:`ReplayConfig` field each
    (composite flags that set several, repetition, output), declared once: a command
    names in its order the ones it takes, and gets them here (the others at their
    defaults).
    """

    store: ReadStoreOpt = None
    gpus: GpusOpt = None
    window: WindowOpt = None
    inflate_to: InflateOpt = None
    seeds: SeedsOpt = None
    replicates: ReplicatesOpt = None
    option: OptionOpt = None
    option_old: OldOptionOpt = None
    by: ByOpt = None
    fmt: FormatOpt = Format.table
    events: EventsOpt = None
    """Not a config field: where the trace goes does not change the run (or its id)."""

    def policy_options(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """(scheduler options, placement options) from --option (and the old -o)."""
        return _opts(_options(self.option, self.option_old))


def _flag_parameters() -> dict[str, inspect.Parameter]:
    """:class:`Flags` as typer parameters (its annotations carry the typer options)."""
    hints = typing.get_type_hints(Flags, include_extras=True)
    return {
        f.name: inspect.Parameter(
            f.name, inspect.Parameter.KEYWORD_ONLY, annotation=hints[f.name], default=f.default
        )
        for f in dataclasses.fields(Flags)
    }


def config_command(
    name: str | None, order: Sequence[str]
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Register a replay command with the options named in ``order``, in that order:
    the function's own parameters, else a :class:`Flags` field, else a
    :class:`ReplayConfig` field, generated from its declaration (flag, help, parse:
    :mod:`gpu_trace.cli.generated`). The function gets its own parameters, ``flags``
    (a :class:`Flags`) and ``fields``: the config fields given (a ``parse`` field left
    out is missing, so the dataclass default holds).
    """

    def register(fn: Callable[..., None]) -> Callable[..., None]:
        own = {
            k: p
            for k, p in inspect.signature(fn, eval_str=True).parameters.items()
            if k not in {"fields", "flags"}
        }
        shared = _flag_parameters()
        flag_names = [n for n in order if n not in own and n in shared]
        generated_names = [n for n in order if n not in own and n not in shared]
        generated = {p.name: p for p in option_parameters(ReplayConfig, generated_names)}
        missing = set(own) - set(order)
        if missing:
            msg = f"{fn.__name__}: parameters {sorted(missing)} are not placed in its order"
            raise AssertionError(msg)
        known = {**generated, **shared, **own}
        params = [known[n].replace(kind=inspect.Parameter.KEYWORD_ONLY) for n in order]

        def command(**values: Any) -> None:
            fields = option_values(ReplayConfig, values, generated_names)
            flags = Flags(**{k: values[k] for k in flag_names})
            fn(fields=fields, flags=flags, **{k: values[k] for k in own})

        command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        command.__doc__ = fn.__doc__
        command.__name__ = fn.__name__
        app.command(name)(domain_errors(command))
        return fn

    return register


def _edge_fields(
    source: str, fields: dict[str, Any], flags: Flags, *, packing: bool
) -> dict[str, Any]:
    """The config fields of the composite flags (--gpus with --cluster, --window,
    --packing, --inflate-to) added to the declared ones.
    """
    start, end = _window(flags.window)
    target, points = _inflate(flags.inflate_to, packing)
    return {
        **fields,
        "source": source,
        "cluster": _cluster(fields.get("cluster"), flags.gpus),
        "window_start": start,
        "window_end": end,
        "departures": not packing,
        "inflate_to": target,
        "packing_points": points,
    }


def _inflate(text: str | None, packing: bool) -> tuple[float | None, tuple[float, ...] | None]:
    if text is None:
        return None, None
    if not packing:
        msg = "--inflate-to needs --packing (arrival-only)"
        raise xp.UsageError(msg)
    from gpu_trace.replay.seeds import parse_points

    return parse_points(text)


def _checked(
    source: str, flags: Flags, fields: dict[str, Any]
) -> tuple[str | None, str | None, dict[str, Any], dict[str, Any]]:
    """What `run` and `compare` check first (the source, --replicates, --by, --option):
    (seeds text, resample method, scheduler options, placement options).
    """
    check_sources(resolve_store(flags.store), [source])
    seeds, resample = _replicates(flags, fields)
    if flags.by is not None:
        choose("--by value", flags.by, ("user", "vc"))
    return (seeds, resample, *flags.policy_options())


def _replicates(flags: Flags, fields: dict[str, Any]) -> tuple[str | None, str | None]:
    """(seeds text, resample method) for --replicates: N seeds from --seed, each
    redrawing the workload (bootstrap unless --resample says otherwise).
    """
    seeds, replicates, resample = flags.seeds, flags.replicates, fields.get("resample")
    seed = fields["seed"]
    if replicates is None:
        return seeds, resample
    if seeds is not None:
        msg = "give --seeds or --replicates, not both"
        raise xp.UsageError(msg)
    return f"{seed}-{seed + replicates - 1}", resample or "bootstrap"


def _emit_seeds(results: list[Any], fmt: Format = Format.table) -> None:
    """Mean and spread over seeds (stdout), after the per-run rows."""
    from gpu_trace.replay.seeds import packing_summary, run_summary

    curve = packing_summary(results)
    emit(curve if curve.height else run_summary(results), fmt)


def _policy(name: str, sched_opts: dict[str, Any]) -> tuple[str, bool, dict[str, Any]]:
    """(scheduler, oracle, options): ``qssf-oracle`` or ``-o oracle=true`` give an
    estimating policy the true durations.
    """
    scheduler, oracle = xp.parse_scheduler(name)
    opts = dict(sched_opts)
    if parse_bool(str(opts.pop("oracle", "false")), "option oracle"):
        if not base.needs_estimates(scheduler):
            msg = f"--option oracle applies to policies that read estimates, not {name}"
            raise xp.UsageError(msg)
        oracle = True
    return scheduler, oracle, opts


def _warn(results: list[Any]) -> None:
    """Sanity warnings (:mod:`gpu_trace.replay.sanity`) on stderr, after the tables:
    no job waited, every run the same schedule, jobs dropped as unfit.
    """
    from gpu_trace.replay import sanity

    results = [r for r in results if r.config.departures]  # packing: nobody departs
    if not results:
        return
    runs = pl.concat([r.runs for r in results], how="diagonal_relaxed")
    jobs = pl.concat(
        [r.jobs.with_columns(pl.lit(r.run_id).alias("run_id")) for r in results],
        how="diagonal_relaxed",
    )
    for text in sanity.by_experiment(runs, jobs):
        err.print(f"warning: {text}", markup=False)


def _print_experiment(runs: pl.DataFrame) -> None:
    """The shared experiment of ``runs``, once (stderr: the table stays parseable)."""
    err.print(xp.describe(runs.row(0, named=True)), markup=False)


@config_command(
    "run",
    (
        "source",
        "store",
        "cluster",
        "gpus",
        "scheduler",
        "placement",
        "load",
        "window",
        "estimator",
        "seed",
        "restore_s",
        "multinode_slowdown",
        "packing",
        "inflate_to",
        "inflate_mode",
        "seeds",
        "replicates",
        "resample",
        "throughput",
        "option",
        "option_old",
        "run_id",
        "out",
        "by",
        "fmt",
        "faults",
        "checkpoint_s",
        "retries",
        "power",
        "power_off",
        "events",
    ),
)
def run_cmd(
    fields: dict[str, Any],
    flags: Flags,
    source: SourceArg,
    packing: Annotated[
        bool, typer.Option(help="Arrival-only packing (FGD): jobs never depart.")
    ] = False,
    out: Annotated[Path | None, typer.Option("--out", help="Run directory.")] = None,
) -> None:
    """Replay one source under one policy; results go to the store and --out. With
    --seeds, once per seed (run directories OUT/s<seed>), then the mean and spread.
    """
    from gpu_trace.replay.simulate import run

    store, by, fmt = flags.store, flags.by, flags.fmt
    seeds, resample, sched_opts, place_opts = _checked(source, flags, fields)
    scheduler, oracle, sched_opts = _policy(
        "packing" if packing else fields["scheduler"], sched_opts
    )
    edge = _edge_fields(source, fields, flags, packing=packing)
    config = ReplayConfig(
        **{
            **edge,
            "scheduler": scheduler,
            "oracle": oracle,
            "scheduler_options": sched_opts,
            "placement_options": place_opts,
            "resample": resample,
        }
    )
    if seeds is not None:
        from gpu_trace.replay.seeds import for_seeds, parse_seeds

        configs = for_seeds(config, parse_seeds(seeds))
        for c in configs:
            c.validate()
        root = resolve_store(store)
        results = [
            run(root, c, out / f"s{c.seed}" if out else None, events=_events(flags.events, c.seed))
            for c in configs
        ]
        _print_experiment(results[0].runs)
        emit(
            pl.concat([r.runs for r in results], how="diagonal_relaxed").select(
                ["seed", *SUMMARY_COLUMNS]
            ),
            fmt,
        )
        _emit_seeds(results, fmt)
        _warn(results)
        return
    result = run(resolve_store(store), config, out, events=flags.events)
    _print_experiment(result.runs)
    if result.accuracy is not None:
        a = result.accuracy
        err.print(
            f"estimator {a.method}: trained on {a.train_jobs} jobs, MAE {a.mae_s:.1f} s, "
            f"within 10/50/100 %: {a.within_10:.1%} / {a.within_50:.1%} / {a.within_100:.1%}"
        )
    emit(result.runs.select(SUMMARY_COLUMNS), fmt)
    extra_cols = [c for c in FAULT_ENERGY_COLUMNS if c in result.runs.columns]
    if extra_cols:
        emit(result.runs.select(extra_cols), fmt)
    if "packing" in result.extra:
        emit(result.extra["packing"], fmt)
    if by:
        emit(_breakdown([result], by), fmt)
    _warn([result])


@config_command(
    "compare",
    (
        "source",
        "store",
        "policies",
        "placements",
        "cluster",
        "gpus",
        "load",
        "window",
        "seed",
        "seeds",
        "replicates",
        "resample",
        "packing",
        "inflate_to",
        "inflate_mode",
        "throughput",
        "estimator",
        "option",
        "option_old",
        "out",
        "by",
        "fmt",
        "restore_s",
        "multinode_slowdown",
        "faults",
        "checkpoint_s",
        "retries",
        "power",
        "power_off",
        "events",
    ),
)
def compare(
    fields: dict[str, Any],
    flags: Flags,
    source: SourceArg,
    policies: Annotated[
        list[str] | None,
        typer.Option(help="Scheduling policies (a,b or repeated).", show_default="fifo,sjf"),
    ] = None,
    placements: Annotated[
        list[str] | None,
        typer.Option(help="Placements (a,b or repeated).", show_default="consolidate"),
    ] = None,
    packing: Annotated[
        bool, typer.Option(help="Arrival-only packing (FGD): --policies is `packing`.")
    ] = False,
    out: Annotated[
        Path | None, typer.Option("--out", help="Run directories: OUT/<run id> per run.")
    ] = None,
) -> None:
    """Replay under every policy x placement as ONE experiment (the same jobs, cluster,
    load, seed; estimates are online by default, so every policy replays every job; with
    --estimator model the training split applies to all) and print one row per run.
    Every name and option is checked before anything runs; --replicates N repeats it
    on N resampled workloads and prints the mean and interval, warnings on stderr.
    """
    from gpu_trace.replay.simulate import one_experiment

    store, by, fmt = flags.store, flags.by, flags.fmt
    seeds, resample, sched_opts, place_opts = _checked(source, flags, fields)
    names = split_list(policies) if policies is not None else ["fifo", "sjf"]
    if packing:
        names = ["packing"]
    edge = _edge_fields(source, fields, flags, packing=packing)
    places = split_list(placements) if placements is not None else ["consolidate"]
    if not names or not places:
        msg = "--policies and --placements need at least one name each"
        raise xp.UsageError(msg)
    # What every run of the experiment shares; each (policy, placement) varies only those.
    shared = ReplayConfig(**{**edge, "placement_options": place_opts, "resample": resample})
    configs = _policy_grid(shared, names, places, sched_opts)
    one_experiment(configs)  # every name and option, before the first run is stored
    if seeds is not None:
        _compare_seeds(resolve_store(store), configs, seeds, fmt, out, flags.events)
        return
    _compare_once(
        resolve_store(store), configs, fmt, packing=packing, by=by, out=out, events=flags.events
    )


def _policy_grid(
    shared: ReplayConfig, names: list[str], places: list[str], sched_opts: dict[str, Any]
) -> list[ReplayConfig]:
    """One config per (policy, placement), in the order given: ``shared`` with only the
    scheduler (and its options) and the placement changed.
    """
    configs = []
    for p in names:
        scheduler, oracle, opts = _policy(p, sched_opts)
        for pl_name in places:
            configs.append(
                dataclasses.replace(
                    shared,
                    scheduler=scheduler,
                    oracle=oracle,
                    placement=pl_name,
                    scheduler_options=opts,
                )
            )
    return configs


def _events(events: Path | None, seed: int) -> Path | None:
    """``--events`` of one seed among several: FILE's stem + ``s<seed>``."""
    from gpu_trace.replay.events import target

    return target(events, f"s{seed}") if events is not None else None


def _compare_seeds(
    root: Path,
    configs: list[ReplayConfig],
    seeds: str,
    fmt: Format,
    out: Path | None,
    events: Path | None = None,
) -> None:
    """``replay compare --seeds``: the whole grid once per seed, one row per run, then the
    mean and spread per policy.
    """
    from gpu_trace.replay.seeds import parse_seeds
    from gpu_trace.replay.simulate import compare as compare_runs

    results = []
    seed_list = parse_seeds(seeds)
    total = len(seed_list) * len(configs)
    with task("replay compare: runs", total) as update:
        for k, s in enumerate(seed_list):

            def seed_progress(
                done: int, _total: int | None, what: str, k: int = k, s: int = s
            ) -> None:
                update(k * len(configs) + done, total, f"seed {s}: {what}")

            results += compare_runs(
                root, [dataclasses.replace(c, seed=s) for c in configs], seed_progress, out, events
            )
    runs = pl.concat([r.runs for r in results], how="diagonal_relaxed")
    _print_experiment(runs)
    emit(runs.select(["seed", *COMPARE_COLUMNS]), fmt)
    _emit_seeds(results, fmt)
    _warn(results)


def _compare_once(
    root: Path,
    configs: list[ReplayConfig],
    fmt: Format,
    *,
    packing: bool,
    by: str | None,
    out: Path | None,
    events: Path | None = None,
) -> None:
    """``replay compare`` with one seed: one row per run, the packing curve with
    --packing, and the per-user / per-vc breakdown with --by.
    """
    from gpu_trace.replay.simulate import compare as compare_runs

    with task("replay compare: runs", len(configs)) as update:
        results = compare_runs(root, configs, update, out, events)
    runs = pl.concat([r.runs for r in results], how="diagonal_relaxed")
    _print_experiment(runs)
    emit(runs.select(COMPARE_COLUMNS), fmt)
    extra_cols = [c for c in FAULT_ENERGY_COLUMNS if c in runs.columns]
    if extra_cols:
        emit(runs.select("scheduler", "placement", *extra_cols), fmt)
    if packing:
        _emit_seeds(results, fmt)
    if by:
        emit(_breakdown(results, by), fmt)
    _warn(results)


def _breakdown(results: list[Any], by: str) -> pl.DataFrame:
    """``--by user|vc``: each run's per-user or per-vc table, scheduler and placement
    named.
    """
    from gpu_trace.replay.metrics import breakdown

    parts = [
        breakdown(r.jobs, by).with_columns(
            pl.lit(r.config.label()).alias("scheduler"),
            pl.lit(r.config.placement).alias("placement"),
        )
        for r in results
    ]
    return pl.concat(parts)


@app.command()
@domain_errors
def fidelity(
    store: ReadStoreOpt = None,
    checks: Annotated[
        list[str] | None,
        typer.Option(
            help="Checks (a,b or repeated): fgd-openb-130, pai-fifo-sjf, philly-qssf.",
            show_default="all three",
        ),
    ] = None,
    seeds: Annotated[str, typer.Option(help="Seeds for the FGD figure (mean over them).")] = "0-9",
    fmt: Annotated[Format, typer.Option("--format", "-f", help="Output format.")] = Format.table,
) -> None:
    """Re-run the published results the store has data for and print ours beside the
    published figure. Exit 1 when a judged value is out of tolerance (FGD / best-fit /
    random at 130 %: +-1.5 pp of the paper's 10-seed mean; the PAI and Philly checks:
    their published ordering); a check without its data is shown as skipped.
    """
    from gpu_trace.replay import fidelity as fd
    from gpu_trace.replay.seeds import parse_seeds

    names = [choose("check", n, fd.CHECKS) for n in split_list(checks)] or list(fd.CHECKS)
    table = fd.run_checks(resolve_store(store), names, parse_seeds(seeds))
    emit(table, fmt)
    if fd.failed(table):
        out = table.filter(pl.col("status") == "OUT")
        raise fail(
            f"{out.height} published value(s) out of tolerance: "
            + ", ".join(f"{c}/{p}" for c, p in zip(out["check"], out["policy"], strict=True)),
            1,
        )


def _first_sentence(doc: str) -> str:
    """A docstring's first sentence, over line breaks (its first line alone is often cut
    mid-sentence: "2D-LAS ... with optional").
    """
    paragraph = " ".join(doc.strip().split("\n\n", 1)[0].split())
    end = paragraph.find(". ")
    return paragraph if end < 0 else paragraph[: end + 1]


@app.command()
@domain_errors
def policies() -> None:
    """List the registered policies with their options."""
    lines = []
    kinds: tuple[base.Kind, ...] = ("scheduler", "placement", "admission")
    for kind in kinds:
        lines.append(f"{kind} policies:")
        for name in base.names(kind):
            cls = base.get(kind, name)
            doc = _first_sentence(cls.__doc__ or "")
            if kind == "scheduler" and base.needs_estimates(name):
                doc += f" [reads estimates; {name}{xp.ORACLE_SUFFIX} = true durations]"
            lines.append(f"  {name:<12} {doc}")
            for field_name, default, help_text in base.config_help(cls.Config):
                lines.append(f"      {field_name} = {default}  {help_text}")
    typer.echo("\n".join(lines))


EXPORT_FORMATS = ("chronus", "tiresias", "gavel", "gavel10", "openb", "paisim")


@app.command("export")
@domain_errors
def export_cmd(
    source: SourceArg,
    output: Annotated[
        Path, typer.Option("--output", "-o", help="File to write (its folder must exist).")
    ],
    to: Annotated[
        str | None,
        typer.Option(
            "--to",
            help="Trace format: " + ", ".join(EXPORT_FORMATS) + ".",
            show_default=False,
        ),
    ] = None,
    to_old: Annotated[str | None, typer.Option("--format", "-f", hidden=True)] = None,
    store: ReadStoreOpt = None,
) -> None:
    """Export a source's jobs to another simulator's trace format (--to)."""
    from gpu_trace.replay import interchange
    from gpu_trace.store.scan import scan

    check_sources(resolve_store(store), [source])
    fmt = deprecated("--format (a trace format)", "--to", to_old, to)
    if fmt is None:
        raise xp.UsageError("give the trace format: --to " + "|".join(EXPORT_FORMATS))
    choose("trace format", fmt, EXPORT_FORMATS)
    check_output(output)
    jobs = scan(resolve_store(store), "jobs", [source]).collect()
    n = interchange.export(jobs, fmt, output)
    skipped = interchange.export_skipped(jobs)
    why = ", ".join(f"{k} {v:,}" for k, v in skipped.items())
    left = sum(skipped.values())
    err.print(
        f"wrote {n:,} of {jobs.height:,} jobs to {output}; skipped {left:,}"
        + (f" ({why})" if why else ""),
        markup=False,
    )


LIVE_COLUMNS = [
    "run_id",
    "scheduler",
    "devices",
    "time_scale",
    "jobs_finished",
    "jobs_failed",
    "jobs_crashed",
    "jobs_unfinished",
    "jct_mean_s",
    "queue_mean_s",
    "preemptions",
    "overhead_mean_ms",
    "overhead_p99_ms",
    "wake_lag_mean_ms",
    "wakeups",
    "wall_s",
]


@config_command(
    "live",
    (
        "source",
        "out",
        "store",
        "devices",
        "time_scale",
        "max_wall_s",
        "jobs",
        "dataset",
        "scheduler",
        "placement",
        "option",
        "option_old",
        "seed",
        "restore_s",
        "fail_rate",
        "duty",
        "gpu_mem_mb",
        "keep_gpu_type",
        "telemetry",
        "run_id",
    ),
)
def live_cmd(
    fields: dict[str, Any],
    flags: Flags,
    source: SourceArg,
    out: Annotated[Path, typer.Option("--out", help="Run directory (required).")],
    devices: Annotated[
        str, typer.Option("--devices", help="cuda:0-7 | cuda:0,2 | emulated:16 | emulated:16x8.")
    ] = "emulated:8",
    time_scale: Annotated[
        float | None,
        typer.Option(
            "--time-scale",
            callback=number(gt=0),
            help="Trace seconds per wall second (default: chosen so the run takes about "
            "2 min, at least 3600).",
        ),
    ] = None,
    max_wall_s: Annotated[
        float,
        typer.Option(
            "--max-wall-s",
            callback=number(gt=0),
            help="Refuse a --time-scale whose run would take longer (s).",
        ),
    ] = 3600.0,
    jobs: Annotated[
        int | None,
        typer.Option(
            "--jobs", callback=number(ge=1), help="First N replayable jobs by submit time."
        ),
    ] = None,
    dataset: Annotated[
        str | None, typer.Option("--dataset", help="Only this dataset of the source.")
    ] = None,
    fail_rate: Annotated[
        float,
        typer.Option(
            callback=number(ge=0, le=1), help="Share of jobs whose worker fails part-way (seeded)."
        ),
    ] = 0.0,
    duty: Annotated[
        float | None,
        typer.Option(
            callback=number(ge=0, le=1),
            help="Busy share per 100 ms (emulated default 0, cuda default 0.8).",
        ),
    ] = None,
    gpu_mem_mb: Annotated[
        float, typer.Option(callback=number(ge=0), help="cuda: MiB held per GPU per job.")
    ] = 1024.0,
    keep_gpu_type: Annotated[
        bool, typer.Option(help="Keep the trace's GPU-type constraints.")
    ] = False,
    telemetry: Annotated[bool, typer.Option(help="cuda: sample NVML during the run.")] = True,
) -> None:
    """Run a trace's schedule for real: each job a process on its devices, in wall-clock
    time scaled by --time-scale; results go to the store and --out.
    """
    store = flags.store
    check_sources(resolve_store(store), [source])
    from gpu_trace.replay.live.budget import choose_scale, span_s
    from gpu_trace.replay.live.executor import LiveOptions, run_live, select_live_jobs
    from gpu_trace.replay.workload import Workload

    sched_opts, place_opts = flags.policy_options()
    scheduler, oracle, sched_opts = _policy(fields["scheduler"], sched_opts)
    config = ReplayConfig(
        **{
            **fields,
            "source": source,
            "scheduler": scheduler,
            "oracle": oracle,
            "scheduler_options": sched_opts,
            "placement_options": place_opts,
            "estimator": "oracle",
        }
    )
    config.validate()
    root = resolve_store(store)
    chosen = select_live_jobs(root, source, jobs, dataset, keep_gpu_type)
    span = span_s(Workload.from_jobs(chosen))
    scale = choose_scale(span, time_scale, max_wall_s)
    if time_scale is None:
        err.print(
            f"time scale {scale:g} trace s per wall s: at least "
            f"{duration_text(span / scale)} for a trace span of {duration_text(span)} "
            "(--time-scale to choose)"
        )
    live = LiveOptions(
        devices=devices,
        time_scale=scale,
        jobs=jobs,
        dataset=dataset,
        fail_rate=fail_rate,
        duty=duty,
        gpu_mem_mb=gpu_mem_mb,
        telemetry=telemetry,
        keep_gpu_type=keep_gpu_type,
    )
    if config.run_id is None:
        config = dataclasses.replace(config, run_id=_live_id(config, live))
    with task("replay live: jobs", len(chosen), console=err) as update:
        result = run_live(chosen, config, live, out, store=root, on_progress=update)
    emit(result.result.runs.select(LIVE_COLUMNS), Format.table)
    if result.usage is not None:
        emit(result.usage, Format.table)
    if result.engine.interrupted:  # after the partial results: Ctrl-C still exits 130
        msg = "interrupted: workers stopped, results so far written"
        raise interrupted(msg)


@app.command("validate")
@domain_errors
def validate_cmd(
    run_dir: Annotated[Path, typer.Argument(help="A `replay live` run directory.")],
    store: ReadStoreOpt = None,
    fmt: Annotated[Format, typer.Option("--format", "-f", help="Output format.")] = Format.table,
) -> None:
    """Compare a live run with the simulation of the same jobs and policies, job by job."""
    from gpu_trace.replay.live.validate import validate

    v = validate(run_dir, resolve_store(store))
    summary = pl.DataFrame([v.summary]).select(
        "run_id",
        "jobs_compared",
        "jobs_not_compared",
        "jct_mean_live_s",
        "jct_mean_sim_s",
        "jct_mean_rel_error",
        "jct_mae_s",
        "queue_mae_s",
        "start_mae_s",
        "finish_mae_s",
        "jobs_jct_within_5pct_ratio",
    )
    emit(summary, fmt)


def _live_id(config: ReplayConfig, live: Any) -> str:
    """``live-<scheduler>-<placement>-<hash>-<devices>``, the hash over every option
    that defines the run (the replay config and all live options: --jobs, --time-scale,
    --dataset, --fail-rate, ...), slug-safe (the store uses it as a dataset name).
    """
    blob = json.dumps(
        {"replay": dataclasses.asdict(config), "live": dataclasses.asdict(live)},
        sort_keys=True,
        default=str,
    ).encode()
    slug = live.devices.replace(":", "").replace(",", "_")
    digest = hashlib.sha256(blob).hexdigest()[:8]
    return f"live-{config.label()}-{config.placement}-{digest}-{slug}"


# --- replay sweep: many runs over a grid, in process or on Ray ----------------------


def _sweep_flags(
    source: str | None,
    grid_flags: dict[str, str | None],
    grid: list[str] | None,
    fixed: list[str] | None,
    window: str | None,
) -> dict[str, Any] | None:
    """The flags as a sweep-file document (same parser, same checks); None if none."""
    doc_grid: dict[str, Any] = {k: v for k, v in grid_flags.items() if v is not None}
    doc_fixed: dict[str, Any] = {}
    for items, target, flag in ((grid, doc_grid, "--grid"), (fixed, doc_fixed, "--set")):
        for item in items or []:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                msg = f"{flag} {item!r} is not FIELD=VALUES"
                raise xp.UsageError(msg)
            if key.strip() in doc_grid or key.strip() in doc_fixed:
                msg = f"{flag} {key.strip()} is given twice"
                raise xp.UsageError(msg)
            target[key.strip()] = value
    start, end = _window(window)
    for key, bound in (("window_start", start), ("window_end", end)):
        if bound is not None:
            doc_fixed[key] = bound
    if source is None and not doc_grid and not doc_fixed:
        return None
    return {"source": source, "grid": doc_grid, "fixed": doc_fixed}


@config_command(
    "sweep",
    (
        "out",
        "sweep_file",
        "store",
        "source",
        "policies",
        "placements",
        "loads",
        "seeds",
        "gpus",
        "cluster",
        "window",
        "grid",
        "fixed",
        "address",
        "workers",
        "resume",
    ),
)
def sweep_cmd(
    fields: dict[str, Any],
    flags: Flags,
    out: SweepOutOpt,
    sweep_file: Annotated[
        Path | None, typer.Argument(help="Sweep file (TOML: source, fixed and grid tables).")
    ] = None,
    source: Annotated[str | None, typer.Option("--source", "-s", help="Source.")] = None,
    policies: Annotated[str | None, typer.Option(help="Scheduling policies, a,b,c.")] = None,
    placements: Annotated[str | None, typer.Option(help="Placements, a,b.")] = None,
    loads: Annotated[
        str | None, typer.Option(help="Loads: START:STOP:STEP (both ends) or a,b.")
    ] = None,
    seeds: Annotated[str | None, typer.Option(help="Seeds: 0-9 or 1,2,3.")] = None,
    gpus: Annotated[
        str | None, typer.Option("--gpus", help="Cluster spec(s), e.g. 32x8 or 32x8,64x8.")
    ] = None,
    grid: Annotated[
        list[str] | None,
        typer.Option("--grid", help="Sweep any ReplayConfig field: FIELD=VALUES (repeatable)."),
    ] = None,
    fixed: Annotated[
        list[str] | None,
        typer.Option("--set", help="Hold any ReplayConfig field: FIELD=VALUE (repeatable)."),
    ] = None,
    address: RayAddressOpt = None,
    workers: SweepWorkersOpt = None,
    resume: SweepResumeOpt = False,
) -> None:
    """Replay every point of a grid (policies x placements x loads x seeds x clusters,
    or any ReplayConfig field) in parallel on Ray, or in process with --workers 1; each
    run goes to the store as it finishes, and --resume skips the finished ones.
    """
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from gpu_trace.replay import sweep as sw
    from gpu_trace.replay import sweep_grid as sg

    store, window = flags.store, flags.window
    cluster = fields.get("cluster")
    if cluster and gpus:
        msg = "give --cluster or --gpus, not both"
        raise xp.UsageError(msg)
    doc = _sweep_flags(
        source,
        {
            "scheduler": policies,
            "placement": placements,
            "load": loads,
            "seed": seeds,
            "cluster": gpus or cluster,
        },
        grid,
        fixed,
        window,
    )
    if sweep_file is not None and doc is not None:
        msg = "give a sweep file or grid flags (--source, --policies, ...), not both"
        raise xp.UsageError(msg)
    if sweep_file is not None:
        spec = sg.load(sweep_file)
    elif doc is not None:
        spec = sg.parse(doc, "command line")
    elif resume:
        spec = sw.spec_from_manifest(out)
    else:
        msg = "give a sweep file, grid flags (--source ...), or --resume"
        raise xp.UsageError(msg)
    if workers is None and address is None and not _have_ray():
        err.print(
            "Ray is not installed (pip install 'gpu-trace[ray]'): running in process",
            markup=False,
        )
        workers = 1
    columns = (
        TextColumn("sweep"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("runs, {task.fields[failed]} failed"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=err, transient=False) as bar:
        task = bar.add_task("sweep", total=None, failed=0)
        failed = 0

        def on_event(e: sw.Event) -> None:
            nonlocal failed
            failed += e.status == "failed"
            bar.update(task, completed=e.done, total=e.total, failed=failed)

        summary = sw.run_sweep(
            resolve_store(store),
            spec,
            out,
            workers=workers,
            address=address,
            resume=resume,
            on_event=on_event,
        )
    err.print(summary.line(), markup=False)
    typer.echo(str(out))
    if summary.failed:
        run_id, why = summary.failed[0]
        raise fail(
            f"{len(summary.failed)} of {summary.total} runs failed (first: {run_id}: {why}); "
            "fix the cause and rerun with --resume".replace("[", "\\["),
            1,
        )


def _have_ray() -> bool:
    import importlib.util

    return importlib.util.find_spec("ray") is not None
