"""One replay run, end to end: select jobs, build the cluster, estimate durations,
run the engine, score, and write the results (store + run directory).

Outputs are written explicitly at the end of :func:`run` (never from constructors or
exit hooks): the store gets ``replay_runs`` / ``replay_jobs`` / ``replay_timeseries``
through the one writer (source = the replayed source, dataset = the run id), and the
run directory gets ``config.resolved.json`` plus the same three tables as Parquet.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from gpu_trace.errors import GpuTraceError
from gpu_trace.replay import accounting as acct
from gpu_trace.replay import estimator as est
from gpu_trace.replay import events as ev
from gpu_trace.replay import experiment as xp
from gpu_trace.replay import metrics as mt
from gpu_trace.replay import policy as base
from gpu_trace.replay.cluster import MILLI, ClusterSpec, from_trace, load_file, parse_spec
from gpu_trace.replay.engine import Engine, EngineOptions
from gpu_trace.replay.workload import CLONE_TAG, Workload, arrival_order
from gpu_trace.store.parquet import StoreTransaction
from gpu_trace.store.scan import scan
from gpu_trace.values import check_number, choose


@dataclass(frozen=True)
class ReplayConfig:
    """Everything that defines a run; saved as ``config.resolved.json``."""

    source: str
    scheduler: str = "fifo"
    placement: str = "consolidate"
    admission: str = "fits"
    scheduler_options: dict[str, Any] = field(default_factory=dict)
    placement_options: dict[str, Any] = field(default_factory=dict)
    cluster: str = "from-trace"
    load: float = 1.0
    window_start: str | None = None
    window_end: str | None = None
    estimator: str = "online"
    """``online`` (each job's estimate from the jobs finished before its submission),
    ``model`` (trained on a held-out first share: the training split) or ``oracle``."""
    train_fraction: float = 0.25
    seed: int = 0
    restore_s: float = 0.0
    multinode_slowdown: float = 1.0
    departures: bool = True
    inflate_to: float | None = None
    inflate_mode: str = "paper"
    """How ``--inflate-to`` grows an arrival-only workload: ``paper`` (the FGD
    simulator's: shuffle the pods, seeded, then append pods drawn with replacement from
    all of them, CPU-only pods included on a multi-resource cluster) or ``gpu-clones``
    (the trace order, then clones of GPU pods only: the pre-multi-resource protocol)."""
    throughput: str | None = None
    """Path of a throughput table (job class x GPU model -> speed; see
    :mod:`gpu_trace.replay.throughput`); None = 1.0 everywhere."""
    packing_points: tuple[float, ...] | None = None
    """Arrived-demand shares the packing curve is read at (default 0.7, 0.8, ..., 1.3)."""
    bin_s: float | None = None
    run_id: str | None = None
    oracle: bool = False
    """This policy gets the true durations as estimates (shown as ``<scheduler>-oracle``)."""
    training_split: bool | None = None
    """Hold out the first ``train_fraction`` of jobs for the estimator (not replayed).
    None: only when this policy needs model estimates; a comparison sets it for all."""
    faults: str | None = None
    """Node failures: ``mtbf=D,mttr=D`` or ``trace[,mttr=D]`` (:mod:`gpu_trace.replay.faults`)."""
    checkpoint_s: float = 0.0
    """Checkpoint interval of every job (0 = none: a failure restarts the job's work)."""
    retries: int = 3
    """Restarts after node failures before a job ends ``failed``."""
    power: str | None = None
    """Energy accounting: ``gpu-model`` (built-in table) or a power-model TOML file."""
    fault_model: dict[str, Any] | None = None
    """The resolved failure model (mtbf_s, mttr_s; set from ``faults`` by :func:`run`)."""
    power_off: str | None = None
    """Power-off policy ``idle=D,boot=D[,reserve=N]`` (:mod:`gpu_trace.replay.poweroff`)."""
    resample: str | None = None
    """Workload resampling of this replicate (``bootstrap`` or ``jitter=D``, seeded by
    ``seed``; :mod:`gpu_trace.replay.resample`); None = the trace as it is."""

    def uses_model(self) -> bool:
        """Whether this run trains the duration model (its policy declares
        ``needs_estimates`` and gets no oracle).
        """
        return (
            base.needs_estimates(self.scheduler) and not self.oracle and self.estimator == "model"
        )

    def uses_online(self) -> bool:
        """Whether this run reads online estimates (each job's from the jobs finished
        before its submission; no training split).
        """
        return (
            base.needs_estimates(self.scheduler) and not self.oracle and self.estimator == "online"
        )

    def label(self) -> str:
        """Policy name as shown: ``qssf``, or ``qssf-oracle`` when fed true durations."""
        return xp.label(self.scheduler, self.oracle or self.estimator == "oracle")

    def resolved_run_id(self) -> str:
        """The given run id, else ``<policy>-<placement>-<hash of the config>``: the
        same config always gets the same id (a sweep's resume relies on it).
        """
        if self.run_id:
            return self.run_id
        fields = dataclasses.asdict(self)
        if fields["resample"] is None:  # added later: ids of runs without it stay as they were
            del fields["resample"]
        blob = json.dumps(fields, sort_keys=True, default=str).encode()
        return f"{self.label()}-{self.placement}-{hashlib.sha256(blob).hexdigest()[:8]}"

    def validate(self) -> None:
        """Check policy names, options and the estimator before anything runs
        (:class:`~gpu_trace.replay.experiment.UsageError`).
        """
        xp.parse_scheduler(self.scheduler)
        xp.check_policy("scheduler", self.scheduler, self.scheduler_options)
        xp.check_policy("placement", self.placement, self.placement_options)
        xp.check_policy("admission", self.admission, {})
        xp.check_estimator(self.estimator)
        choose("inflate mode", self.inflate_mode, ("paper", "gpu-clones"))
        # Finite and in range, or the engine fails deep inside with a traceback (load 0)
        # or silently runs on NaN.
        check_number(self.load, "load", gt=0)
        check_number(self.train_fraction, "train_fraction", gt=0, le=1)
        check_number(self.restore_s, "restore_s", ge=0)
        check_number(self.multinode_slowdown, "multinode_slowdown", gt=0)
        check_number(self.checkpoint_s, "checkpoint_s", ge=0)
        check_number(self.retries, "retries", ge=0)
        if self.inflate_to is not None:
            check_number(self.inflate_to, "inflate_to", gt=0)
        if self.bin_s is not None:
            check_number(self.bin_s, "bin_s", gt=0)
        if self.resample is not None:
            from gpu_trace.replay.resample import parse as parse_resample

            parse_resample(self.resample)


@dataclass
class RunResult:
    """Frames of one run (canonical column names) plus the engine for inspection."""

    config: ReplayConfig
    run_id: str
    runs: pl.DataFrame
    jobs: pl.DataFrame
    timeseries: pl.DataFrame
    accuracy: est.Accuracy | None
    engine: Engine
    extra: dict[str, Any] = field(default_factory=dict)


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
    engine = Engine(
        w,
        spec,
        EngineOptions(
            seed=config.seed,
            restore_s=config.restore_s,
            multinode_slowdown=config.multinode_slowdown,
            departures=config.departures,
            record_log=record_log,
        ),
        estimate_s=np.asarray(estimate, dtype=np.float64),
    )
    sched_cls = base.get("scheduler", config.scheduler)
    place_cls = base.get("placement", config.placement)
    adm_cls = base.get("admission", config.admission)
    engine.bind(
        sched_cls(base.build_config(sched_cls.Config, config.scheduler_options), engine),
        place_cls(base.build_config(place_cls.Config, config.placement_options), engine),
        adm_cls(adm_cls.Config(), engine),
    )
    hooks = acct.attach(engine, config)
    recorder = ev.attach(engine, hooks.faults, hooks.power_off, record_events)
    engine.run()
    acct.after_run(engine, hooks)
    wall = time.perf_counter() - started
    result = _score(config, spec, w, engine, estimate, accuracy, wall, training_cut=cut)
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


def _experiment(
    config: ReplayConfig,
    spec: ClusterSpec,
    w: Workload,
    cut: datetime | None,
    extra: dict[str, Any] | None,
) -> dict[str, Any]:
    """The resolved experiment (everything but the policies) of one run."""
    replayed = pl.DataFrame(
        {
            "job_id": w.frame["job_id"],
            "arrival_s": w.arrival_s,
            "duration_s": w.duration_s,
            "gpus": w.gpus,
        }
    )
    return {
        "source": config.source,
        "cluster": spec.describe(),
        "load": config.load,
        "seed": config.seed,
        "window": [config.window_start, config.window_end],
        "training_split": None
        if cut is None
        else {"cut": cut.isoformat(), "train_fraction": config.train_fraction},
        "estimator": config.estimator,
        "restore_s": config.restore_s,
        "multinode_slowdown": config.multinode_slowdown,
        "departures": config.departures,
        "inflate_to": config.inflate_to,
        "jobs_digest": xp.jobs_digest(replayed, w.skipped),
        **({} if config.departures else {"inflate_mode": config.inflate_mode}),
        **({"resample": config.resample} if config.resample else {}),
        **(extra or {}),
    }


def _score(
    config: ReplayConfig,
    spec: ClusterSpec,
    w: Workload,
    engine: Engine,
    estimate: Any,
    accuracy: est.Accuracy | None,
    wall: float,
    *,
    training_cut: datetime | None = None,
    experiment: dict[str, Any] | None = None,
) -> RunResult:
    """Frames of a finished run; ``experiment`` adds fields to its experiment (live)."""
    run_id = config.resolved_run_id()
    res = engine.result_arrays()
    n = w.n
    outcome = np.full(n, "unfinished", dtype=object)
    outcome[~np.isnan(res["finish"])] = "finished"
    reason = np.full(n, None, dtype=object)
    for j, r in engine.rejected.items():
        outcome[j] = "rejected"
        reason[j] = r
    jobs = w.frame.select("job_id", "user", "vc", "gpus").with_columns(
        pl.Series("outcome", outcome.tolist(), dtype=pl.String),
        pl.Series("reason", reason.tolist(), dtype=pl.String),
        pl.Series("arrival_time_s", w.arrival_s),
        pl.Series("start_time_s", res["start"]).fill_nan(None),
        pl.Series("finish_time_s", res["finish"]).fill_nan(None),
        pl.Series("duration_s", w.duration_s),
        pl.Series("estimate_s", np.asarray(estimate, dtype=np.float64)),
        pl.Series("preemptions", res["preemptions"]),
        pl.Series("nodes", res["nodes"]),
        pl.Series("speed", res["speed"]),
    )
    jobs = jobs.with_columns(
        (pl.col("start_time_s") - pl.col("arrival_time_s")).alias("queue_s"),
        (pl.col("finish_time_s") - pl.col("arrival_time_s")).alias("jct_s"),
    ).with_columns(
        pl.max_horizontal(
            pl.lit(1.0),
            pl.col("jct_s") / pl.col("duration_s").clip(lower_bound=mt.BSLD_THRESHOLD_S),
        ).alias("bsld"),
        pl.when(pl.col("start_time_s").is_null())
        .then(None)
        .otherwise(pl.col("nodes"))
        .alias("nodes"),
        pl.when(pl.col("start_time_s").is_null())
        .then(None)
        .otherwise(pl.col("speed"))
        .alias("speed"),
    )
    jobs = jobs.with_columns(
        pl.when(pl.col("jct_s").is_null()).then(None).otherwise(pl.col("bsld")).alias("bsld")
    )
    skipped = w.skipped.with_columns(pl.lit("skipped").alias("outcome"))
    all_jobs = pl.concat([jobs, skipped], how="diagonal_relaxed")
    headline = mt.job_metrics(jobs, spec.gpus)
    headline["throughput_mean"] = _effective_throughput(jobs)
    headline.update(
        mt.cluster_metrics(
            engine.timeline,
            engine.state.capacity_milli,
            float(w.arrival_s[-1]) if n else None,
        )
    )
    ts = mt.timeseries(engine.timeline, engine.state.capacity_milli, config.bin_s)
    counts = {
        "jobs_input": n + w.skipped.height,
        "jobs_skipped": w.skipped.height,
        "jobs_rejected": len(engine.rejected),
        "jobs_finished": int((outcome == "finished").sum()),
        "jobs_unfinished": int((outcome == "unfinished").sum()),
    }
    description = _experiment(config, spec, w, training_cut, experiment)
    runs = pl.DataFrame(
        {
            "run_id": [run_id],
            "experiment_id": [xp.experiment_id(description)],
            "experiment_json": [json.dumps(description, sort_keys=True, default=str)],
            "jobs_skipped_reasons": [json.dumps(xp.skipped_reasons(w.skipped), sort_keys=True)],
            "scheduler": [config.label()],
            "placement": [config.placement],
            "admission": [config.admission],
            "config_json": [json.dumps(dataclasses.asdict(config), sort_keys=True, default=str)],
            "seed": [config.seed],
            "load_factor": [config.load],
            "cluster_nodes": [spec.nodes],
            "cluster_gpus": [float(spec.gpus)],
            **{k: [v] for k, v in counts.items()},
            **{k: [v] for k, v in headline.items()},
            "preemptions": [engine.total_preemptions],
            "estimator_mae_s": [accuracy.mae_s if accuracy else None],
            "estimator_within_10_ratio": [accuracy.within_10 if accuracy else None],
            "estimator_within_50_ratio": [accuracy.within_50 if accuracy else None],
            "estimator_within_100_ratio": [accuracy.within_100 if accuracy else None],
            "wall_s": [wall],
        },
        schema_overrides={
            "jain_slowdown": pl.Float64,
            "ftf_max_ratio": pl.Float64,
            "throughput_mean": pl.Float64,
        },
    )
    extra: dict[str, Any] = {}
    if not config.departures:
        extra["packing"] = (
            packing_curve(engine, config.packing_points)
            if config.packing_points
            else packing_curve(engine)
        )
    return RunResult(config, run_id, runs, all_jobs, ts, accuracy, engine, extra)


def _effective_throughput(jobs: pl.DataFrame) -> float | None:
    """GPU-work-weighted speed of the started jobs: sum(d x g) / sum(d x g / speed), 1.0
    when every model runs at the reference speed (null: nothing started).
    """
    started = jobs.filter(pl.col("speed").is_not_null() & (pl.col("duration_s") > 0))
    work = started["duration_s"] * started["gpus"]
    denom = float((work / started["speed"]).sum())
    return float(work.sum()) / denom if denom > 0 else None


def packing_curve(
    engine: Engine, points: tuple[float, ...] = (0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3)
) -> pl.DataFrame:
    """Arrival-only packing KPI (FGD): allocated GPUs / capacity when the arrived GPU
    demand first reaches each share of capacity.
    """
    tl = engine.timeline
    arrived = np.asarray(tl.arrived_milli, dtype=np.float64)
    used = np.asarray(tl.used_milli, dtype=np.float64)
    cap = float(engine.state.capacity_milli)
    rows = []
    for p in points:
        k = int(np.searchsorted(arrived, p * cap, side="left"))
        if k < arrived.size:
            rows.append((p, used[k] / cap, (cap - used[k]) / MILLI))
    return pl.DataFrame(
        rows, schema=["arrived_ratio", "alloc_ratio", "unallocated_gpus"], orient="row"
    )


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
    events: Path | None = None,
) -> list[RunResult]:
    """Replay every config as one experiment (validated before anything runs; jobs and
    cluster resolved once) and write each run. ``on_progress(runs done, total, what
    runs now)`` is called before each run and once at the end. With ``events``, each
    run's trace goes to :func:`gpu_trace.replay.events.target` (``events`` + run id).
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
        write(result, store, None)
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
