"""One simulated replay run, end to end: select jobs, build the cluster, estimate
durations, build and run the engine (:mod:`gpu_trace.replay.build`), score it
(:mod:`gpu_trace.replay.score`), and write the results (store + run directory).

Outputs are written explicitly at the end of :func:`run` (never from constructors or
exit hooks): the store gets ``replay_runs`` / ``replay_jobs`` / ``replay_timeseries``
through the one writer (source = the replayed source, dataset = the run id), and the
run directory gets ``config.resolved.json`` plus the same three tables as Parquet.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import numpy as np
import polars as pl

from gpu_trace.errors import GpuTraceError
from gpu_trace.replay import accounting as acct
from gpu_trace.replay import estimator as est
from gpu_trace.replay import events as ev
from gpu_trace.replay import policy as base
from gpu_trace.replay.build import build_engine
from gpu_trace.replay.cluster import ClusterSpec, from_trace, load_file, parse_spec
from gpu_trace.replay.config import ReplayConfig
from gpu_trace.replay.score import RunResult, score
from gpu_trace.replay.workload import CLONE_TAG, Workload, arrival_order
from gpu_trace.store.parquet import StoreTransaction
from gpu_trace.store.scan import scan


def resolve_cluster(text: str, store: Path | None, source: str) -> ClusterSpec:
    """``from-trace`` (``machines``), ``machines:DATASET`` (one inventory of the
    source, e.g. openb's ``all_node``), a spec (``6500x8``) or a cluster file path.
    """
    head, sep, dataset = text.partition(":")
    if text in {"from-trace", "machines"} or (head == "machines" and sep and dataset):
        if store is None:
            msg = f"{text} needs a store"
            raise GpuTraceError(msg)
        return from_trace(
            scan(store, "machines", [source]),
            scan(store, "capacity", [source]),
            source,
            dataset or None,
        )
    path = Path(text)
    if path.suffix.lower() in {".toml", ".json", ".csv"}:
        if not path.exists():
            msg = f"cluster file {text} does not exist"
            raise GpuTraceError(msg)
        return load_file(path)
    return parse_spec(text)


def _ts(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        msg = f"window bound {text!r} is not an ISO date/time"
        raise GpuTraceError(msg) from None
    if parsed.tzinfo is None:
        from datetime import UTC

        parsed = parsed.replace(tzinfo=UTC)
    return parsed


def _inflate(jobs: pl.DataFrame, cluster_gpus: int, target: float, seed: int) -> pl.DataFrame:
    """Arrival-only packing (FGD): clone randomly drawn GPU jobs (seeded) after the
    trace until the arrived GPU demand reaches ``target`` x the cluster's GPUs.
    """
    gpu = jobs.filter(pl.col("gpus") > 0)
    have = float(gpu["gpus"].sum() or 0.0)
    want = target * cluster_gpus
    if have >= want or not gpu.height:
        return jobs
    rng = np.random.default_rng(seed)
    mean = float(gpu["gpus"].mean())  # type: ignore[arg-type]
    n = int((want - have) / mean * 1.2) + 16
    idx = rng.integers(0, gpu.height, size=n)
    extra = gpu[idx]
    cum = have + np.cumsum(extra["gpus"].to_numpy())
    keep = int(np.searchsorted(cum, want, side="left")) + 1
    extra = extra.head(keep)
    last = jobs["submit_time"].max()
    extra = extra.with_columns(
        (pl.col("job_id") + pl.lit(CLONE_TAG) + pl.int_range(pl.len()).cast(pl.String)).alias(
            "job_id"
        ),
        (pl.lit(last) + pl.duration(seconds=pl.int_range(1, pl.len() + 1))).alias("submit_time"),
    )
    return pl.concat([jobs, extra.select(jobs.columns)], how="vertical_relaxed")


def _inflate_paper(
    jobs: pl.DataFrame, cluster_gpus: int, target: float | None, seed: int
) -> pl.DataFrame:
    """The FGD simulator's workload (arrival-only): the trace's pods in a seeded random
    order, then pods drawn uniformly with replacement from them (seeded) until the
    arrived GPU demand reaches ``target`` x the cluster's GPUs; pod i arrives at second
    i. Without ``target`` only the shuffle.
    """
    rng = np.random.default_rng(seed)
    base = jobs.filter(pl.col("submit_time").is_not_null())
    if not base.height:
        return jobs
    order = rng.permutation(base.height)
    parts = [base[order]]
    have = float(base["gpus"].fill_null(0).clip(lower_bound=0).sum())
    want = (target or 0.0) * cluster_gpus
    if have < want:
        g = base["gpus"].fill_null(0).clip(lower_bound=0).to_numpy()
        mean = float(g.mean()) or 1.0
        n = int((want - have) / mean * 1.3) + 64
        idx = rng.integers(0, base.height, size=n)
        cum = have + np.cumsum(g[idx])
        keep = min(n, int(np.searchsorted(cum, want, side="left")) + 1)
        extra = base[idx[:keep]].with_columns(
            (pl.col("job_id") + pl.lit(CLONE_TAG) + pl.int_range(pl.len()).cast(pl.String)).alias(
                "job_id"
            )
        )
        parts.append(extra)
    out = pl.concat(parts, how="vertical_relaxed")
    first = base["submit_time"].min()
    return out.with_columns(
        (pl.lit(first) + pl.duration(seconds=pl.int_range(pl.len()))).alias("submit_time")
    )


def replay(
    jobs: pl.DataFrame | pl.LazyFrame,
    spec: ClusterSpec,
    config: ReplayConfig,
    *,
    record_log: bool = False,
    record_events: bool = False,
) -> RunResult:
    """Replay canonical ``jobs`` rows on ``spec`` (no store needed); with
    ``record_events`` the event trace is kept for :func:`gpu_trace.replay.events.write_events`.
    """
    started = time.perf_counter()
    config.validate()
    frame = jobs.lazy().collect()
    start, end = _ts(config.window_start), _ts(config.window_end)
    if config.resample is not None:
        from gpu_trace.replay.resample import resample

        frame = resample(frame, config.resample, config.seed, start, end)
    split = config.uses_model() if config.training_split is None else config.training_split
    cut = training_cut(frame, end, config.train_fraction) if split and start is None else None
    if not config.departures:
        # arrival-only packing: jobs never depart, so a missing run time does not matter
        frame = frame.with_columns(pl.col("run_s").fill_null(0.0))
        if config.inflate_mode == "paper":
            frame = _inflate_paper(frame, spec.gpus, config.inflate_to, config.seed)
        elif config.inflate_to:
            frame = _inflate(frame, spec.gpus, config.inflate_to, config.seed)
    # On a cluster that models CPUs, CPU-only jobs (no GPU, a CPU request) are replayed on
    # the CPU dimension, as the PAI simulator schedules them; on a GPU-only cluster they
    # cannot be placed and are skipped (counted) as before.
    cpu_only = spec.multi_resource and (config.departures or config.inflate_mode == "paper")
    w = Workload.from_jobs(frame, start=cut or start, end=end, load=config.load, cpu_only=cpu_only)
    if cut is not None:
        w.skipped = pl.concat([_held_out(frame, cut, end), w.skipped], how="diagonal_relaxed")
    if config.throughput:
        from gpu_trace.replay import throughput as tp

        w.speed_code, w.speed_table = tp.load(Path(config.throughput)).codes(
            w.frame["name"], spec.type_names
        )
    estimate = w.duration_s.copy()
    accuracy: est.Accuracy | None = None
    if config.uses_model():
        origin = cut or start
        history = frame.filter(pl.col("submit_time") < origin) if origin else frame.head(0)
        tgt = w.frame.with_columns(pl.Series("run_s", w.duration_s))
        estimate, accuracy = est.estimate(
            history.select("user", "vc", "name", "gpus", "submit_time", "run_s"),
            tgt.select("user", "vc", "name", "gpus", "submit_time", "run_s"),
            seed=config.seed,
        )
    elif config.uses_online():
        known = frame.select(
            "user",
            "submit_time",
            (pl.col("end_time") if "end_time" in frame.columns else pl.lit(None))
            .cast(pl.Datetime("us", "UTC"))
            .alias("end_time"),
            "run_s",
        )
        tgt = w.frame.select("user", "submit_time").with_columns(pl.Series("run_s", w.duration_s))
        estimate, accuracy = est.online(known, tgt)
    elif base.needs_estimates(config.scheduler):
        accuracy = est.score(estimate, w.duration_s, "oracle", 0)
    engine = build_engine(
        config,
        w,
        spec,
        estimate_s=np.asarray(estimate, dtype=np.float64),
        record_log=record_log,
    )
    hooks = acct.attach(engine, config)
    recorder = ev.attach(engine, hooks.faults, hooks.power_off, record_events)
    engine.run()
    acct.after_run(engine, hooks)
    wall = time.perf_counter() - started
    result = score(config, spec, w, engine, estimate, accuracy, wall, training_cut=cut)
    return ev.keep(acct.finish(result, hooks), recorder)


def training_cut(frame: pl.DataFrame, end: datetime | None, fraction: float) -> datetime | None:
    """Submit time of the first replayed job when the first ``fraction`` of the jobs
    (by submit time, before ``end``) train the estimator.
    """
    valid = frame.filter(pl.col("submit_time").is_not_null())
    if end is not None:
        valid = valid.filter(pl.col("submit_time") < end)
    if not valid.height:
        return None
    times = valid["submit_time"].sort()
    cut: datetime = times[min(valid.height - 1, int(valid.height * fraction))]
    return cut


def _held_out(frame: pl.DataFrame, cut: datetime, end: datetime | None) -> pl.DataFrame:
    """The jobs before the training cut: skipped with reason ``training split``."""
    held = frame.filter(pl.col("submit_time") < cut)
    if end is not None:
        held = held.filter(pl.col("submit_time") < end)
    cols = [c for c in ("job_id", "user", "vc", "gpus") if c in held.columns]
    return held.select(cols).with_columns(pl.lit("training split").alias("reason"))


def tag_run_frames(
    source: str, run_id: str, runs: pl.DataFrame, jobs: pl.DataFrame, timeseries: pl.DataFrame
) -> dict[str, pl.DataFrame]:
    """A run's three tables keyed as the store keeps them: source = the replayed
    source, dataset = the run id (shared by ``run`` and sweeps, so both write alike).
    """
    cols = {"source": source, "dataset": run_id, "cluster": source, "run_id": run_id}
    frames = {"replay_runs": runs, "replay_jobs": jobs, "replay_timeseries": timeseries}
    return {
        k: v.with_columns(*(pl.lit(x).alias(c) for c, x in cols.items())) for k, v in frames.items()
    }


def stage_run(
    tx: StoreTransaction, source: str, run_id: str, tagged: dict[str, pl.DataFrame]
) -> None:
    """Stage one run's tagged tables in ``tx``."""
    for table, frame in tagged.items():
        tx.write(table, frame, source=source, dataset=run_id, metadata={"run_id": run_id})


def write(result: RunResult, store: Path | None, out_dir: Path | None) -> None:
    """Write a run's three tables to the store and/or a run directory."""
    source = result.config.source
    run_id = result.run_id
    tagged = tag_run_frames(source, run_id, result.runs, result.jobs, result.timeseries)
    if store is not None:
        with StoreTransaction(store) as tx:
            stage_run(tx, source, run_id, tagged)
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        resolved = {
            **dataclasses.asdict(result.config),
            "run_id": run_id,
            "cluster_resolved": result.engine.spec.describe(),
            "estimator": result.accuracy.as_dict() if result.accuracy else None,
        }
        (out_dir / "config.resolved.json").write_text(
            json.dumps(resolved, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8"
        )
        for table, frame in tagged.items():
            frame.write_parquet(out_dir / f"{table}.parquet", compression="zstd")
        if "packing" in result.extra:
            result.extra["packing"].write_csv(out_dir / "packing_curve.csv")
        if "fault_events" in result.extra:
            result.extra["fault_events"].write_csv(out_dir / "fault_events.csv")


def run(
    store: Path,
    config: ReplayConfig,
    out_dir: Path | None = None,
    write_store: bool = True,
    events: Path | None = None,
) -> RunResult:
    """Replay ``config.source`` from the store and write the results (and the event
    trace to ``events``).
    """
    config.validate()
    if events is not None:
        ev.check_target(events)
    jobs = _source_jobs(store, config.source)
    spec = resolve_cluster(config.cluster, store, config.source)
    config = acct.resolve_faults(store, config)
    result = replay(jobs, spec, config, record_events=events is not None)
    write(result, store if write_store else None, out_dir)
    if events is not None:
        ev.report(events, ev.write_events(result, events))
    return result


def _source_jobs(store: Path, source: str) -> pl.DataFrame:
    jobs = scan(store, "jobs", [source]).collect()
    if not jobs.height:
        msg = f"no jobs in the store for source {source!r}"
        raise GpuTraceError(msg)
    return arrival_order(jobs)


def one_experiment(configs: list[ReplayConfig]) -> list[ReplayConfig]:
    """The configs of one comparison, validated and sharing one job selection: when any
    policy trains the duration model, the training split applies to every policy.
    """
    for c in configs:
        c.validate()
    split = any(c.uses_model() for c in configs)
    return [dataclasses.replace(c, training_split=split) for c in configs]


def compare(
    store: Path,
    configs: list[ReplayConfig],
    on_progress: Callable[[int, int | None, str], None] | None = None,
    out_dir: Path | None = None,
    events: Path | None = None,
) -> list[RunResult]:
    """Replay every config as one experiment (validated before anything runs; jobs and
    cluster resolved once) and write each run (to the store, and to ``out_dir/<run id>``
    when given). ``on_progress(runs done, total, what runs now)`` is called before each
    run and once at the end. With ``events``, each run's trace goes to
    :func:`gpu_trace.replay.events.target` (``events`` + run id).
    """
    resolved = one_experiment(configs)
    if not resolved:
        return []
    if events is not None:
        ev.check_target(events)
    first = resolved[0]
    jobs = _source_jobs(store, first.source)
    spec = resolve_cluster(first.cluster, store, first.source)
    results = []
    for i, config in enumerate(resolved):
        if on_progress is not None:
            on_progress(i, len(resolved), f"{config.label()} / {config.placement}")
        config = acct.resolve_faults(store, config)
        result = replay(jobs, spec, config, record_events=events is not None)
        write(result, store, out_dir / result.run_id if out_dir is not None else None)
        if events is not None:
            path = ev.target(events, result.run_id)
            ev.report(path, ev.write_events(result, path))
            del result.extra["events"]  # written: do not hold every run's segments
        results.append(result)
    if on_progress is not None:
        on_progress(len(resolved), len(resolved), "done")
    ids = {r.runs["experiment_id"][0] for r in results}
    if len(ids) != 1:
        msg = f"policies of one comparison resolved to {len(ids)} experiments"
        raise GpuTraceError(msg)
    return results
