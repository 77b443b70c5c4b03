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
from pathlib import Path
from typing import Any

from gpu_trace.plugins import option
from gpu_trace.replay import experiment as xp
from gpu_trace.replay import policy as base
from gpu_trace.values import check_number, choose, duration_parse, number_check


def _text(text: str) -> str:
    """Taken as typed (a ``parse`` so that the option is None when not given: the
    command can tell ``--cluster`` given from its default).
    """
    return text


def _faults(text: str) -> str:
    """``--faults`` checked where it is given (the text is what the run keeps)."""
    from gpu_trace.replay.faults import parse_faults

    parse_faults(text)
    return text


def _power_off(text: str) -> str:
    """``--power-off`` checked where it is given (the text is what the run keeps)."""
    from gpu_trace.replay.poweroff import parse_power_off

    parse_power_off(text)
    return text


def _resample(text: str) -> str:
    """``--resample`` checked where it is given (the text is what the run keeps)."""
    from gpu_trace.replay.resample import parse

    parse(text)
    return text


def _path(text: str) -> str:
    """A file path, kept as text (as the run's config stores it)."""
    return str(Path(text))


# The declared policies (built-in and installed plugins), named in --help.
_SCHEDULERS = f"Scheduling policy: {', '.join(base.names('scheduler'))}."
_PLACEMENTS = f"Placement policy: {', '.join(base.names('placement'))}."


@dataclass(frozen=True, kw_only=True)
class InflationOptions:
    """Arrival-only packing (FGD) of a run: ``--packing`` (no departures),
    ``--inflate-to`` (the target and the curve's points) and ``--inflate-mode``.
    """

    departures: bool = True
    inflate_to: float | None = None
    inflate_mode: str = option(
        "paper",
        "paper (seeded shuffle + pods drawn with replacement, CPU pods too) or "
        "gpu-clones (trace order + clones of GPU pods).",
    )
    """How ``--inflate-to`` grows an arrival-only workload: ``paper`` (the FGD
    simulator's: shuffle the pods, seeded, then append pods drawn with replacement from
    all of them, CPU-only pods included on a multi-resource cluster) or ``gpu-clones``
    (the trace order, then clones of GPU pods only: the pre-multi-resource protocol)."""
    packing_points: tuple[float, ...] | None = None
    """Arrived-demand shares the packing curve is read at (default 0.7, 0.8, ..., 1.3)."""

    def check_inflation(self) -> None:
        """Refuse a mode or target a run cannot use (a usage error)."""
        choose("inflate mode", self.inflate_mode, ("paper", "gpu-clones"))
        if self.inflate_to is not None:
            check_number(self.inflate_to, "inflate_to", gt=0)


@dataclass(frozen=True, kw_only=True)
class FaultOptions:
    """Node failures of a run: ``--faults``, ``--checkpoint``, ``--retries`` (and the
    model resolved from them before the run, :mod:`gpu_trace.replay.accounting`).
    """

    faults: str | None = option(
        None,
        "Node failures: mtbf=50000h,mttr=2h (seeded), trace[,mttr=2h] (rates from "
        "the store), or fail=TIME@NODE,...,mttr=D (scripted).",
        parse=_faults,
    )
    """Node failures: ``mtbf=D,mttr=D`` or ``trace[,mttr=D]`` (:mod:`gpu_trace.replay.faults`)."""
    checkpoint_s: float = option(
        "0",
        "Checkpoint interval of every job (30m; 0 = none).",
        flag="--checkpoint",
        parse=duration_parse("--checkpoint"),
    )
    """Checkpoint interval of every job (0 = none: a failure restarts the job's work)."""
    retries: int = option(3, "Restarts after node failures before a job ends failed.")
    """Restarts after node failures before a job ends ``failed``."""
    fault_model: dict[str, Any] | None = None
    """The resolved failure model (mtbf_s, mttr_s; set from ``faults`` by :func:`run`)."""

    def check_faults(self) -> None:
        """Refuse what a run cannot use: the ``--faults`` text is parsed as where it is
        given, so a sweep or an API caller is refused before a run starts.
        """
        check_number(self.checkpoint_s, "checkpoint_s", ge=0)
        check_number(self.retries, "retries", ge=0)
        if self.faults is not None:
            _faults(self.faults)


@dataclass(frozen=True, kw_only=True)
class PowerOptions:
    """Energy of a run: ``--power`` (the power model) and ``--power-off`` (the policy)."""

    power: str | None = option(
        None, "Energy accounting: gpu-model (built-in table) or a power TOML file."
    )
    """Energy accounting: ``gpu-model`` (built-in table) or a power-model TOML file."""
    power_off: str | None = option(
        None,
        "Power-off policy, e.g. idle=30m,boot=5m (optional: ,reserve=N): switch off "
        "nodes idle longer than idle, wake them (boot time) when jobs wait.",
        parse=_power_off,
    )
    """Power-off policy ``idle=D,boot=D[,reserve=N]`` (:mod:`gpu_trace.replay.poweroff`)."""

    def check_power(self) -> None:
        """Refuse a ``--power-off`` text that does not parse, before a run starts."""
        if self.power_off is not None:
            _power_off(self.power_off)


@dataclass(frozen=True)
class ReplayConfig(InflationOptions, FaultOptions, PowerOptions):
    """Everything that defines a run; saved as ``config.resolved.json``.

    The options of node failures, energy and arrival-only packing are groups of their
    own (:class:`FaultOptions`, :class:`PowerOptions`, :class:`InflationOptions`, each
    checking its fields), inherited so that the fields stay flat (below).

    The fields a user sets on the command line are declared here once, with
    :func:`gpu_trace.plugins.option` (flag, help, parse): ``replay run``, ``compare``,
    ``live`` and ``sweep`` generate their options from these declarations
    (``config_command`` in :mod:`gpu_trace.cli.replay`). The others are set from
    composite flags (``--window``, ``--packing``, ``--inflate-to``, ``--option``,
    ``--gpus``: ``Flags`` there) or by the driver. Field names are what sweep files and ``--grid`` / ``--set`` name, and the
    run id hashes them: they stay flat.
    """

    source: str
    scheduler: str = option("fifo", _SCHEDULERS, flag="--policy")
    placement: str = option("consolidate", _PLACEMENTS, flag="--placement")
    admission: str = "fits"
    scheduler_options: dict[str, Any] = field(default_factory=dict)
    placement_options: dict[str, Any] = field(default_factory=dict)
    cluster: str = option(
        "from-trace",
        "Cluster file (.toml/.json/.csv), `from-trace` or `machines` (the store's "
        "inventory with each node's CPU and memory; the one with the most GPUs, ties: "
        "fewest machines) or `machines:DATASET` (that inventory, e.g. machines:all_node).",
        parse=_text,
    )
    load: float = option(1.0, "Arrival-rate multiplier (> 0).", check=number_check("--load", gt=0))
    window_start: str | None = None
    window_end: str | None = None
    estimator: str = option(
        "online",
        "For policies that read estimates (qssf, backfill): online (each job's from "
        "the jobs finished before its submission; every job replayed), model (trained on "
        "the first 25 % of jobs, which no policy then replays) or oracle (true durations).",
    )
    """``online`` (each job's estimate from the jobs finished before its submission),
    ``model`` (trained on a held-out first share: the training split) or ``oracle``."""
    train_fraction: float = 0.25
    seed: int = option(0, "Random seed.")
    restore_s: float = option(
        0.0, "Restore cost after preemption (s).", check=number_check("--restore-s", ge=0)
    )
    multinode_slowdown: float = option(1.0, "Runtime factor for jobs placed on several nodes.")
    throughput: str | None = option(
        None,
        "Throughput table (.csv with columns job_class, gpu_type, throughput; or "
        ".toml): a job's speed on each GPU model (default 1.0); see the `hetero` placement.",
        parse=_path,
        metavar="<path>",
    )
    """Path of a throughput table (job class x GPU model -> speed; see
    :mod:`gpu_trace.replay.throughput`); None = 1.0 everywhere."""
    bin_s: float | None = None
    run_id: str | None = option(None, "Run id (default: derived).")
    oracle: bool = False
    """This policy gets the true durations as estimates (shown as ``<scheduler>-oracle``)."""
    training_split: bool | None = None
    """Hold out the first ``train_fraction`` of jobs for the estimator (not replayed).
    None: only when this policy needs model estimates; a comparison sets it for all."""
    resample: str | None = option(
        None,
        "How each replicate redraws the workload: bootstrap (jobs drawn with "
        "replacement, default with --replicates) or jitter=D (arrivals moved by up to +-D).",
        parse=_resample,
    )
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
        self.check_inflation()
        # Finite and in range, or the engine fails deep inside with a traceback (load 0)
        # or silently runs on NaN.
        check_number(self.load, "load", gt=0)
        check_number(self.train_fraction, "train_fraction", gt=0, le=1)
        check_number(self.restore_s, "restore_s", ge=0)
        check_number(self.multinode_slowdown, "multinode_slowdown", gt=0)
        self.check_faults()
        if self.bin_s is not None:
            check_number(self.bin_s, "bin_s", gt=0)
        # Text options parsed as where they are given (the command line checks them
        # there too), so a sweep or an API caller is refused before a run starts.
        if self.resample is not None:
            _resample(self.resample)
        self.check_power()
