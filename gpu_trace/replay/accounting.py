"""Wiring of the optional replay accounting (node failures, energy) into a run: what
:func:`gpu_trace.replay.simulate.replay` calls before and after the engine loop, so the driver
module only gains two calls.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from gpu_trace.errors import GpuTraceError
from gpu_trace.replay import energy as en
from gpu_trace.replay import faults as fl
from gpu_trace.replay import poweroff as po
from gpu_trace.replay.kernel.engine import Engine
from gpu_trace.replay.metrics import _integral
from gpu_trace.store.scan import scan

if TYPE_CHECKING:
    from gpu_trace.analyses.power import PowerModel
    from gpu_trace.replay.config import ReplayConfig
    from gpu_trace.replay.score import RunResult

GPU_H = 3600.0


@dataclass
class Hooks:
    """What :func:`attach` bound to one engine."""

    faults: fl.Faults | None
    power: PowerModel | None
    power_off: po.PowerOff | None = None


def resolve_faults(store: Path | None, config: ReplayConfig) -> ReplayConfig:
    """Fix the failure model before the run: ``trace`` rates are derived from the
    store (and printed to stderr), given ones parsed; saved in ``fault_model``.
    """
    if not config.faults or config.fault_model is not None:
        return config
    mode, values, script = fl.parse_faults(config.faults)
    if mode == "trace":
        if store is None:
            msg = "--faults trace needs a store"
            raise GpuTraceError(msg)
        # Imported here: the analyses package is only needed for trace-derived rates,
        # and importing it cost every `replay run` ~0.1 s of start-up.
        from gpu_trace.analyses import failures as fa

        src = [config.source]
        summary = fa.mtbf(
            scan(store, "jobs", src), scan(store, "events", src), scan(store, "gpu_samples", src)
        ).collect()
        model = fl.from_trace(summary, values.get("mttr"))
        d = model.as_dict()
        sys.stderr.write(
            f"faults from trace: {int(d['node_failures'])} node failures "
            f"({int(d['node_fail_jobs'])} node_fail jobs + {int(d['device_events'])} "
            f"XID/ECC/lost-GPU events) over {d['node_hours']:.1f} node-hours: "
            f"MTBF {model.mtbf_s / 3600:.1f} h per node, MTTR {model.mttr_s / 3600:.2f} h\n"
        )
    else:
        mtbf = values.get("mtbf", float("inf"))
        model = fl.FaultModel(mtbf, values.get("mttr", fl.DEFAULT_MTTR_S), mode, (), tuple(script))
    return dataclasses.replace(config, fault_model=model.as_dict())


def attach(engine: Engine, config: ReplayConfig) -> Hooks:
    """Bind the failure process and the segment log to ``engine`` (before it runs)."""
    faults = None
    if config.faults:
        fm = (resolve_faults(None, config) if config.fault_model is None else config).fault_model
        assert fm is not None
        faults = fl.Faults(
            engine,
            fl.FaultModel(
                float(fm["mtbf_s"]),
                float(fm["mttr_s"]),
                str(fm.get("origin", "given")),
                script=tuple((float(t), int(n)) for t, n in fm.get("script", [])),
            ),
            config.checkpoint_s,
            config.retries,
            config.restore_s,
            config.seed,
        )
    off = po.PowerOff(engine, po.parse_power_off(config.power_off)) if config.power_off else None
    if config.power:
        model: PowerModel | None = en.load_model(config.power)
    else:  # the power-off policy reports its saving: from the built-in table
        model = en.load_model("gpu-model") if off is not None else None
    if model is not None:
        engine.segments = []
    return Hooks(faults, model, off)


def after_run(engine: Engine, hooks: Hooks) -> None:
    """Before scoring: cut the timeline where the work ended (:func:`faults.trim_timeline`)."""
    if hooks.faults is not None or hooks.power_off is not None:
        fl.trim_timeline(engine.timeline)
    if hooks.power_off is not None:
        t = engine.timeline.time
        hooks.power_off.finish(t[-1] if t else engine.now)


def finish(result: RunResult, hooks: Hooks) -> RunResult:
    """Add the fault and energy columns to a scored run (``replay_runs`` / ``_jobs`` /
    ``_timeseries``); the fault event log goes to ``result.extra``.
    """
    e = result.engine
    f, model = hooks.faults, hooks.power
    off = hooks.power_off
    if f is None and model is None:
        return result
    n = e.w.n
    jobs, runs, ts = result.jobs, result.runs, result.timeseries
    replayed = jobs.head(n)
    rest = jobs.slice(n)
    finished = (replayed["outcome"] == "finished").to_numpy()
    run_cols: dict[str, object] = {}
    job_cols: list[pl.Series] = []
    if f is not None:
        outcome = replayed["outcome"].to_numpy().copy()
        for j in f.failed_at:
            outcome[j] = "failed"
        preempt = np.asarray(e.preemptions, dtype=np.int32)
        started = ~replayed["start_time_s"].is_null().to_numpy()
        attempts = np.where(started, 1 + preempt + f.restarts, 0).astype(np.int32)
        job_cols += [
            pl.Series("outcome", outcome.tolist(), dtype=pl.String),
            pl.Series("failures", f.failures),
            pl.Series("attempts", attempts),
        ]
        acc = f.accounting(finished)
        run_cols.update(
            {
                "node_failures": sum(1 for ev in f.events if ev[2] == "failure"),
                "jobs_failed": len(f.failed_at),
                "lost_gpu_h_failure": acc["failure"] / GPU_H,
                "lost_gpu_h_preemption": acc["preemption"] / GPU_H,
                "lost_gpu_h_restore": acc["restore"] / GPU_H,
                "consumed_gpu_h": acc["consumed"] / GPU_H,
                "useful_gpu_h": acc["useful"] / GPU_H,
                "goodput_ratio": acc["useful"] / acc["consumed"] if acc["consumed"] > 0 else None,
                "fault_model_json": f.describe(),
            }
        )
        result.extra["fault_events"] = f.event_frame()
        result.extra["faults"] = f
    if model is not None:
        energy = en.account(e, model)
        job_cols.append(pl.Series("energy_kwh", energy.job_j / en.J_PER_KWH))
        run_j, mean_w = energy.run_j, energy.mean_w
        if off is not None:
            # a boot draws the node's idle power for boot_s; always-on would have drawn
            # it for every GPU-second a node was off or booting
            per_gpu_w = energy.baseline_w / e.spec.gpus
            boot_j = off.boots * off.c.boot_s * per_gpu_w * e.spec.max_node_gpus
            run_j += boot_j
            tt = e.timeline.time
            span = tt[-1] - tt[0] if len(tt) > 1 else 0.0
            mean_w = run_j / span if span > 0 else mean_w
            run_cols["energy_saved_kwh"] = (off.off_gpu_s * per_gpu_w - boot_j) / en.J_PER_KWH
            run_cols["node_boots"] = off.boots
        run_cols.update(
            {
                "energy_kwh": run_j / en.J_PER_KWH,
                "power_mean_w": mean_w,
                "power_model_json": json.dumps(
                    en.describe(model, e.spec.type_names), sort_keys=True
                ),
            }
        )
        if ts.height:
            ts = ts.with_columns(
                pl.Series(
                    "power_w",
                    energy.power_bins(e, ts["time_s"].to_numpy(), ts["bin_s"].to_numpy()),
                )
            )
        result.extra["energy"] = energy
    if (f is not None or off is not None) and ts.height:
        tl = e.timeline
        t = np.asarray(tl.time, dtype=np.float64)
        edges = np.concatenate([ts["time_s"].to_numpy(), [ts["time_s"][-1] + ts["bin_s"][-1]]])
        down = np.asarray(tl.down_milli, dtype=np.float64) / 1000.0
        ts = ts.with_columns(
            pl.Series("down_gpus", np.diff(_integral(t, down, edges)) / ts["bin_s"].to_numpy())
        )
    replayed = replayed.with_columns(job_cols)
    result.jobs = pl.concat([replayed, rest], how="diagonal_relaxed") if rest.height else replayed
    result.runs = runs.with_columns(*(pl.lit(v).alias(k) for k, v in run_cols.items()))
    result.timeseries = ts
    return result
