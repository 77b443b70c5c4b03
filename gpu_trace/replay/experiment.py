"""What a replay *experiment* is: the job set, cluster, load, seed and estimator that
every policy of a comparison shares, resolved once and identified by a stable hash.

A scorecard may only rank runs of one experiment: two runs with different job sets
(a training split, another window, another source) are not comparable, whatever their
metrics say. Policy names are checked here too, before anything runs, so a typo in the
fourth policy of a comparison does not leave three runs stored and a traceback.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import polars as pl

from gpu_trace.errors import GpuTraceError, UsageError
from gpu_trace.replay import policy
from gpu_trace.values import unknown

ORACLE_SUFFIX = "-oracle"
"""``qssf-oracle``: a policy that reads estimates, given the true durations instead."""

ESTIMATORS = ("online", "model", "oracle")


__all__ = ["ORACLE_SUFFIX", "UsageError"]


def scheduler_names() -> list[str]:
    """Registered schedulers plus the ``-oracle`` variant of each that reads estimates."""
    names = policy.names("scheduler")
    return [*names, *(n + ORACLE_SUFFIX for n in names if policy.needs_estimates(n))]


def parse_scheduler(name: str) -> tuple[str, bool]:
    """``qssf`` -> (qssf, False); ``qssf-oracle`` -> (qssf, True); unknown -> UsageError."""
    known = policy.names("scheduler")
    if name in known:
        return name, False
    stem = name.removesuffix(ORACLE_SUFFIX)
    if name.endswith(ORACLE_SUFFIX) and stem in known and policy.needs_estimates(stem):
        return stem, True
    msg = "scheduling policy"
    raise unknown(msg, name, scheduler_names())


def check_policy(kind: policy.Kind, name: str, options: dict[str, Any]) -> None:
    """Raise :class:`UsageError` unless ``name`` is registered and ``options`` build its
    config (unknown keys, bad values).
    """
    cls = policy.get(kind, name)  # an unknown name: the registry's usage error
    try:
        policy.build_config(cls.Config, options)
    except UsageError:
        raise
    except GpuTraceError as exc:
        msg = f"{kind} {name}: {exc}"
        raise UsageError(msg) from None


def check_estimator(estimator: str) -> None:
    if estimator not in ESTIMATORS:
        msg = "--estimator value"
        raise unknown(msg, estimator, ESTIMATORS)


def label(scheduler: str, oracle: bool) -> str:
    """The name a run is shown under: an estimating policy fed true durations is named
    ``<scheduler>-oracle`` so it is never mistaken for the estimator.
    """
    if oracle and policy.needs_estimates(scheduler):
        return scheduler + ORACLE_SUFFIX
    return scheduler


def jobs_digest(replayed: pl.DataFrame, skipped: pl.DataFrame) -> str:
    """sha256 of the resolved job set: replayed (id, arrival, duration, GPUs) and skipped
    (id, reason), so two experiments with equal options but other jobs differ.
    """
    h = hashlib.sha256()
    h.update(replayed.write_csv().encode())
    h.update(skipped.select("job_id", "reason").write_csv().encode())
    return h.hexdigest()


def skipped_reasons(skipped: pl.DataFrame) -> dict[str, int]:
    """{reason: count} of the jobs not replayed, sorted by reason."""
    if not skipped.height:
        return {}
    counts = skipped.group_by("reason").len().sort("reason")
    return {str(r): int(n) for r, n in counts.iter_rows()}


def experiment_id(description: dict[str, Any]) -> str:
    """``exp-<hash>``: a stable hash of the resolved experiment description."""
    blob = json.dumps(description, sort_keys=True, default=str).encode()
    return f"exp-{hashlib.sha256(blob).hexdigest()[:10]}"


def describe(row: dict[str, Any]) -> str:
    """One line for a ``replay_runs`` row's experiment: id, source, cluster, load, seed,
    window, training split, jobs in / skipped with reasons.
    """
    exp: dict[str, Any] = json.loads(row.get("experiment_json") or "{}")
    reasons: dict[str, int] = json.loads(row.get("jobs_skipped_reasons") or "{}")
    cluster = exp.get("cluster") or {}
    window = exp.get("window") or [None, None]
    split = exp.get("training_split")
    parts = [
        f"experiment {row.get('experiment_id') or 'unknown'}: "
        f"source {exp.get('source', row.get('source'))}",
        f"cluster {cluster.get('gpus', '?')} GPUs / {cluster.get('nodes', '?')} nodes",
        f"load {exp.get('load', row.get('load_factor'))}",
        f"seed {exp.get('seed', row.get('seed'))}",
        "window " + ("all" if window == [None, None] else f"{window[0] or ''}..{window[1] or ''}"),
    ]
    if split:
        parts.append(
            f"training split: first {split['train_fraction']:.0%} of jobs (before {split['cut']}) "
            "train the estimator and are not replayed"
        )
    why = ", ".join(f"{k} {v:,}" for k, v in reasons.items())
    parts.append(
        f"jobs in {row.get('jobs_input') or 0:,}, skipped {row.get('jobs_skipped') or 0:,}"
        + (f" ({why})" if why else "")
    )
    return "; ".join(parts)
