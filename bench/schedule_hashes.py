"""Schedule fingerprints: one sha256 per replay configuration, to prove that a change
(a speed-up, a refactor) leaves every schedule exactly as it was.

``python -m bench.schedule_hashes OUT.json`` replays a fixed grid of configurations
through the public :func:`gpu_trace.replay.replay` API and writes
``{configuration name: sha256}``; ``python -m bench.schedule_hashes --compare A.json
B.json`` exits 1, listing the configurations, when any hash differs or is missing on
one side. ``--only SUBSTRING`` limits a run to the configurations whose name contains
it (quick checks while working; compare full runs before committing).

What a hash covers, per job in input order: its job id, outcome, first start, finish,
preemption count and node count, and every run segment from the engine's start/stop
log (the instant of each start and stop and the exact (node, GPU, milli-GPU) parts
each start got). So a different victim, a different GPU or one more same-instant
reassignment changes the hash even where the job's start and end are the same.

What the grid covers (seeded synthetic workloads of a few hundred jobs:
:func:`gpu_trace.replay.synthetic.pai_like_jobs`, over-loaded so that jobs queue and
preempt):

- clusters: one pooled node (``64x64``), 8-GPU nodes (``64x8``), mixed node sizes
  with a remainder node (``40x8+12x4+3x3``);
- every preemptive scheduler registered (``srtf``, ``las``, ``tiresias``,
  ``las-lucid``, and any added later), plus SRTF with a scheduling quantum and LAS
  with the starvation rule, with every registered placement, each with and without
  ``restore_s``;
- every non-preemptive scheduler with a few placements (the FIFO family, SJF, QSSF and
  backfill on oracle and online estimates, fair share, recorded);
- node failures with checkpoints and retries, multi-node slowdown, and workload
  replicates (bootstrap and arrival jitter) for the preemptive schedulers.

Issue 27 (preemptive replay speed) introduced it; later performance work reuses it.
It runs in about two minutes on a busy 2-core machine.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import signal
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from gpu_trace.replay import ReplayConfig, policy, replay
from gpu_trace.replay.cluster import parse_spec
from gpu_trace.replay.synthetic import pai_like_jobs

CLUSTERS = ("64x64", "64x8", "40x8+12x4+3x3")
"""One pooled node, 8-GPU nodes, mixed node sizes (a 3-GPU remainder node)."""

TIMEOUT_S = 60
"""A configuration that takes longer (in CPU-bound wall seconds) is recorded as an error."""

JOBS = 400
LOAD = 2.0


@dataclass(frozen=True)
class Case:
    """One configuration: a name (its key in the output) and what to replay."""

    name: str
    cluster: str
    config: ReplayConfig
    workload_seed: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def _cfg(scheduler: str, placement: str, **kw: Any) -> ReplayConfig:
    kw.setdefault("estimator", "oracle")
    return ReplayConfig(source="synthetic", scheduler=scheduler, placement=placement, **kw)


def _preemptive() -> list[str]:
    return [n for n in policy.names("scheduler") if policy.get("scheduler", n).preemptive]


def cases() -> Iterator[Case]:
    """The grid (see the module docstring); names are stable across runs."""
    yield from _preemptive_cases()
    yield from _other_cases()
    yield from _mechanism_cases()


def _preemptive_cases() -> Iterator[Case]:
    """Every preemptive scheduler (and option variants) x every placement x cluster x
    restore time.
    """
    variants: list[tuple[str, str, dict[str, Any]]] = [(s, s, {}) for s in _preemptive()]
    variants += [
        ("srtf-q30", "srtf", {"scheduler_options": {"quantum_s": 30.0}}),
        ("las-starve2", "las", {"scheduler_options": {"starve_factor": 2.0}}),
        ("tiresias-starve1", "tiresias", {"scheduler_options": {"starve_factor": 1.0}}),
    ]
    for cluster in CLUSTERS:
        for label, sched, kw in variants:
            for placement in policy.names("placement"):
                for restore in (0.0, 20.0):
                    yield Case(
                        f"{cluster}/{label}/{placement}/restore={restore:g}",
                        cluster,
                        _cfg(sched, placement, restore_s=restore, **kw),
                    )


def _other_cases() -> Iterator[Case]:
    """The non-preemptive schedulers with a few placements; estimate readers online too."""
    preemptive = _preemptive()
    others = [n for n in policy.names("scheduler") if n not in preemptive and n != "packing"]
    for cluster in CLUSTERS:
        for sched in others:
            for placement in ("consolidate", "best-fit", "yarn", "spread"):
                yield Case(f"{cluster}/{sched}/{placement}", cluster, _cfg(sched, placement))
        for sched in ("qssf", "backfill"):
            yield Case(
                f"{cluster}/{sched}-online/consolidate",
                cluster,
                _cfg(sched, "consolidate", estimator="online"),
            )


def _mechanism_cases() -> Iterator[Case]:
    """Failures with checkpoints, multi-node slowdown, replicates, another workload."""
    for cluster in ("64x8", "40x8+12x4+3x3"):
        for sched in ("fifo", *_preemptive()):
            yield Case(
                f"{cluster}/{sched}/consolidate/faults",
                cluster,
                _cfg(
                    sched,
                    "consolidate",
                    faults="mtbf=20h,mttr=1h",
                    checkpoint_s=600.0,
                    retries=2,
                    restore_s=30.0,
                ),
            )
        for sched in ("fifo", "sjf", "srtf", "las", "tiresias"):
            # SRTF here: it ranked a running job by its slowed time left and a waiting
            # one by its work left, and its pass never ended (tests/test_replay_srtf_slowdown.py)
            yield Case(
                f"{cluster}/{sched}/spread/slowdown",
                cluster,
                _cfg(sched, "spread", multinode_slowdown=1.3, placement_options={"split": True}),
            )
        for sched in ("srtf", "tiresias"):
            for seed in (1, 2):
                for resample in ("bootstrap", "jitter=120"):
                    yield Case(
                        f"{cluster}/{sched}/yarn/{resample}/seed={seed}",
                        cluster,
                        _cfg(sched, "yarn", resample=resample, seed=seed),
                    )
            yield Case(
                f"{cluster}/{sched}/consolidate/workload-seed=7",
                cluster,
                _cfg(sched, "consolidate"),
                workload_seed=7,
            )


def fingerprint(result: Any) -> str:
    """sha256 of the per-job outcome and run segments of one replay (module docstring)."""
    engine = result.engine
    segments: dict[int, list[str]] = defaultdict(list)
    for t, what, j, parts in engine.log:
        segments[j].append(f"{what}@{t!r}:{sorted(parts)}")
    jobs = result.jobs.select(
        "job_id", "outcome", "start_time_s", "finish_time_s", "preemptions", "nodes"
    )
    h = hashlib.sha256()
    replayed = engine.w.frame["job_id"].to_list()
    index = {jid: i for i, jid in enumerate(replayed)}
    for row in jobs.iter_rows():
        j = index.get(row[0])
        segs = segments.get(j, []) if j is not None else []
        h.update(repr((row, segs)).encode())
        h.update(b"\n")
    return h.hexdigest()


def run_case(case: Case, workloads: dict[tuple[str, int], pl.DataFrame]) -> str:
    """Replay one configuration (with the start/stop log) and fingerprint it."""
    spec = parse_spec(case.cluster)
    key = (case.cluster, case.workload_seed)
    if key not in workloads:
        workloads[key] = pai_like_jobs(
            JOBS, cluster_gpus=spec.gpus, utilization=LOAD, seed=case.workload_seed, users=20
        )
    signal.alarm(TIMEOUT_S)
    try:
        result = replay(workloads[key], spec, case.config, record_log=True)
    finally:
        signal.alarm(0)
    return fingerprint(result)


def _timeout(signum: int, frame: Any) -> None:
    msg = f"no result after {TIMEOUT_S} s"
    raise TimeoutError(msg)


def compute(only: str | None = None) -> dict[str, str]:
    """Every configuration's hash (those whose name contains ``only``, if given)."""
    signal.signal(signal.SIGALRM, _timeout)
    workloads: dict[tuple[str, int], pl.DataFrame] = {}
    out: dict[str, str] = {}
    for case in cases():
        if only and only not in case.name:
            continue
        try:
            out[case.name] = run_case(case, workloads)
        except Exception as exc:  # a failing configuration is a result too
            out[case.name] = f"error: {type(exc).__name__}: {exc}"
    return out


RENAMED_PLACEMENTS = {"packing": "gpu-packing"}
"""Placements renamed since a hash file may have been written (issue 28: the placement
``packing`` is ``gpu-packing``): a configuration named with the old name is compared
under the new one, so files from before and after the rename still compare."""


def current_name(name: str) -> str:
    """A configuration's name with a renamed placement (the third part) renamed."""
    parts = name.split("/")
    if len(parts) > 2:
        parts[2] = RENAMED_PLACEMENTS.get(parts[2], parts[2])
    return "/".join(parts)


def compare(a: dict[str, str], b: dict[str, str]) -> list[str]:
    """Names of configurations whose hashes differ or that only one side has (names
    as :func:`current_name` gives them).
    """
    a = {current_name(k): v for k, v in a.items()}
    b = {current_name(k): v for k, v in b.items()}
    return sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))


def main(argv: list[str]) -> int:
    """Command line: see the module docstring."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", nargs="?", type=Path, help="where to write the hashes (JSON)")
    p.add_argument("--compare", nargs=2, type=Path, metavar=("A", "B"))
    p.add_argument("--only", help="only configurations whose name contains this")
    a = p.parse_args(argv)
    if a.compare:
        left, right = (json.loads(x.read_text()) for x in a.compare)
        diff = compare(left, right)
        for name in diff:
            sys.stdout.write(f"differs: {name}\n")
        names = {current_name(k) for k in left.keys() | right.keys()}
        sys.stdout.write(f"{len(names) - len(diff)} equal, {len(diff)} differ\n")
        return 1 if diff else 0
    if a.out is None:
        p.error("give OUT.json or --compare A B")
    start = time.process_time()
    hashes = compute(a.only)
    a.out.write_text(json.dumps(hashes, indent=1, sort_keys=True) + "\n")
    errors = sum(v.startswith("error") for v in hashes.values())
    sys.stdout.write(
        f"{len(hashes)} configurations ({errors} errors) in "
        f"{time.process_time() - start:.1f} s CPU -> {a.out}\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
