"""What defines one replay run: :class:`ReplayConfig`, saved as ``config.resolved.json``
and stored as ``replay_runs.config_json``; its hash is the run id.

Kept apart from the driver (:mod:`gpu_trace.replay.simulate`) so that the command line,
sweeps and the live executor read the config without loading the engine.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from gpu_trace.replay import experiment as xp
from gpu_trace.replay.policies import base
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
