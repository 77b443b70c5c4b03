"""Kubernetes pods and nodes (``kubectl get pods -A -o json``, ``kubectl get nodes -o
json``) into ``jobs``, ``placements`` and ``machines``.

What each field becomes is documented for users in ``docs/your-cluster.md``
("Kubernetes"); the rules, in short:

- **Job key.** A pod's controlling owner (the ``ownerReferences`` entry with
  ``controller: true``, else the first) is its job: ``job_id`` =
  ``<namespace>/<Kind>/<name>`` (Job, PyTorchJob, RayJob, MPIJob, ReplicaSet,
  StatefulSet, ...); a pod without owner is its own job (kind ``Pod``). A pod never
  names a CronJob (its Job does), so each CronJob run is one Job. A static pod (its
  mirror pod: owner kind ``Node`` or annotation ``kubernetes.io/config.mirror``) is its
  own job (kind ``Pod``), never grouped under its node. ``workload_type`` =
  the owner kind, ``vc`` = namespace, ``name`` = owner name, ``user`` = the first of
  ``user_keys`` found in the pod's labels, then annotations (default ``user``).
- **Pods are placements**, one row per pod (``machine_id`` = ``spec.nodeName``, null
  while unbound; ``task`` = the Kubeflow / Ray replica type label, ``instance`` =
  pod name). ``attempt`` = how many of the job's pods had ended unsuccessfully when
  this pod was created (a Job's retries count up, parallel workers share attempt 0).
- **Requests.** Per container, ``requests`` else ``limits`` (Kubernetes defaults a
  missing request to its limit); per pod, Kubernetes' effective request: the larger of
  the app containers' sum (plus restartable "sidecar" init containers) and each init
  container's own request (plus the sidecars started before it), plus
  ``spec.overhead``. CPU in milli-cores and memory in bytes, rounded up as the
  scheduler does (:mod:`gpu_trace.loaders.k8s_quantity`).
- **GPUs.** Whole devices: ``nvidia.com/gpu``, ``amd.com/gpu``, ``gpu.intel.com/i915``,
  ``gpu.intel.com/xe``, ``habana.ai/gaudi``. MIG slices ``nvidia.com/mig-<g>g.<m>gb``
  count ``g/7`` of a GPU (``gpus_raw_unit`` ``mig_slices``: compute slices, 7 per
  GPU). ``aliyun.com/gpu-mem`` (Alibaba GPU sharing, GiB) counts as the share of one
  GPU's memory on its node (node ``aliyun.com/gpu-mem`` / ``aliyun.com/gpu-count``
  capacity; null when the pod is not bound to a known node). A job's ``gpus``,
  ``cpus``, ``mem_bytes`` are the peak over time of the sum of its pods that were
  alive together (a pod lives from binding, else creation, to its end), so parallel
  workers add up and sequential retries do not.
- **Times** (UTC RFC 3339): ``submit_time`` = first pod creation; ``start_time`` =
  first binding (``PodScheduled`` condition, when the GPUs are held, as openb's
  ``scheduled_time``), else first container start; ``end_time`` = last pod end (the
  latest container ``finishedAt``; a terminal pod without one, e.g. Evicted, ends at
  its latest condition transition), null while a pod is live. Placement
  ``start_time`` = the pod's first container ``startedAt`` (running or terminated),
  else its binding.
- **Status** per pod from ``status.phase`` and the reason (``status.reason``, a
  ``DisruptionTarget`` condition, else the failing container's terminated or waiting
  reason): Succeeded -> completed; Failed -> timeout for ``DeadlineExceeded``,
  preempted for ``Preempting`` and scheduler preemption, cancelled for API eviction,
  node_fail for ``Evicted``, ``NodeLost``, ``Shutdown``, ``NodeShutdown``,
  ``Terminated`` and taint manager / pod GC / kubelet disruption, oom when the failing
  container terminated ``OOMKilled``, else failed (``Error``, ...); Running, Pending,
  Unknown as named. ``raw_status`` = ``<phase>`` or ``<phase>/<reason>``. A job takes
  the status of its most significant pod of its last attempt (:data:`RANK`), with that
  pod's
  ``raw_status``, ``exit_code`` (first container, init containers first, that
  terminated non-zero, else 0 once one terminated) and ``exit_signal``.
- ``qos`` = ``spec.priorityClassName``, else ``status.qosClass``; ``time_limit_s`` =
  ``spec.activeDeadlineSeconds``; ``gpu_type`` = the node's ``nvidia.com/gpu.product``
  label, else the pod's ``nodeSelector`` or required node affinity on that label
  (alternatives joined with ``|``).
- **Nodes** -> ``machines`` twice: dataset ``<cluster>`` from ``status.capacity``
  (what is installed: the canonical inventory), and ``<cluster>-allocatable`` from
  ``status.allocatable`` (what the kubelet offers pods). ``gpu_type`` =
  ``nvidia.com/gpu.product``, ``gpu_mem_bytes`` = ``nvidia.com/gpu.memory`` (MiB);
  ``gpus`` installed vs ``gpus_schedulable``, ``state``, ``available``: see
  :func:`nodes_to_rows`.
- **Contradictions** are quarantined: a pod created after it was scheduled or started,
  a container that finished before it started, a GPU-memory share on a node reporting
  0 GPU memory or GPUs, requests summed past int64 (per pod, or a job's pods alive
  together), MIG profiles outside 1g..7g, nodes listing more than 2^31-1 GPUs.

Reconciliation: a pod file's records are counted on the ``placements`` line (pods read
= placements written + records quarantined; records that are no Pod or Node, or not
JSON, are quarantined there too); ``jobs`` are derived from the good pods. A node
file's records are counted on each ``machines`` line.

Datasets are named after ``--cluster`` (default ``kubernetes``). Pods are merged
(:mod:`gpu_trace.loaders.merge`): one ``jobs`` row per job however many snapshots list
it, whether the snapshots come one per ingest or several in one ingest
(``ingest kubernetes pods-0600.json pods-1200.json``). All of them live in the one
dataset ``<cluster>`` (``jobs.file_sha256`` names the snapshot a row comes from), so
several files of one ingest give the store exactly what ingesting them one after
another in the same order gives; each file keeps its own ``ingests`` lines (read =
written + quarantined + merged). The same bytes twice in one ingest are refused. Nodes
are not merged: one nodes file per ingest, and a later one replaces the cluster's
``machines``. Records of other kinds, and pods or nodes that break a rule, are
quarantined with the reason (``record N`` / ``line N``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from gpu_trace.errors import InputError
from gpu_trace.loaders.base import Batch, require_path
from gpu_trace.loaders.k8s_json import DUPLICATE, NUM, Objects, read_objects
from gpu_trace.loaders.k8s_quantity import INT64_MAX, parse_column
from gpu_trace.loaders.textfile import RAW, RAW_LIMIT, REASON, REASON_LIMIT, capped
from gpu_trace.loaders.units import MIB, TIME_MAX, TIME_MIN, per
from gpu_trace.plugins import LoaderPlugin, option
from gpu_trace.schemas.jobs import JOBS, PLACEMENTS
from gpu_trace.store.parquet import slug

SOURCE = "kubernetes"
WHOLE_GPU = (
    "nvidia.com/gpu",
    "amd.com/gpu",
    "gpu.intel.com/i915",
    "gpu.intel.com/xe",
    "habana.ai/gaudi",
)
MIRROR = "kubernetes.io/config.mirror"
MIG = r"^nvidia\.com/mig-([0-9]+)g\.[0-9]+gb$"
GPU_MEM = "aliyun.com/gpu-mem"
GPU_COUNT = "aliyun.com/gpu-count"
PRODUCT = "nvidia.com/gpu.product"
GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"
GPU_COUNT_LABEL = "nvidia.com/gpu.count"
SLICES_LABEL = "nvidia.com/gpu.slices.gi"
STRATEGY_LABEL = "nvidia.com/mig.strategy"
TASK_LABELS = ("training.kubeflow.org/replica-type", "ray.io/node-type")
USER_KEYS = ("user",)

NODE_FAIL_REASONS = ("Evicted", "NodeLost", "Shutdown", "NodeShutdown", "Terminated")
"""``status.reason`` of a pod ended by its node: node-pressure eviction (``Evicted``),
an unreachable node (``NodeLost``), graceful node shutdown (``Terminated``, older
``Shutdown`` / ``NodeShutdown``)."""
PREEMPTING = "Preempting"
"""``status.reason`` the kubelet sets on a pod it preempts to admit a critical pod."""
DISRUPTION = {
    "PreemptionByScheduler": "preempted",
    "PreemptionByKubeScheduler": "preempted",
    "EvictionByEvictionAPI": "cancelled",
    "DeletionByTaintManager": "node_fail",
    "DeletionByPodGC": "node_fail",
    "TerminationByKubelet": "node_fail",
}
"""Reasons of the ``DisruptionTarget`` pod condition (Kubernetes "Pod disruption
conditions"; ``PreemptionByKubeScheduler`` is its 1.26 spelling)."""
OOM = "OOMKilled"
"""A container's terminated reason when the kernel killed it for exceeding its memory."""
RANK = {
    "running": 0,
    "pending": 1,
    "unknown": 2,
    "timeout": 3,
    "node_fail": 4,
    "oom": 5,
    "failed": 6,
    "preempted": 7,
    "cancelled": 8,
    "completed": 9,
}
"""Which pod decides a job's status: the lowest rank among its last attempt's pods."""

_US = pl.Duration("us")


def _field(expr: pl.Expr, path: str) -> pl.Expr:
    for part in path.split("."):
        expr = expr.struct.field(part)
    return expr


def _rec(path: str) -> pl.Expr:
    return _field(pl.col("rec"), path)


def _lookup(map_col: pl.Expr, key: str) -> pl.Expr:
    """The value of ``key`` in a JSON object decoded as a MAP (list of key/value)."""
    return map_col.list.eval(
        pl.element().filter(pl.element().struct.field("key") == key).struct.field("value")
    ).list.first()


def _time(text: pl.Expr) -> pl.Expr:
    """RFC 3339 text -> UTC instant (null when missing or not a valid time)."""
    t = (
        text.str.replace(r"[Zz]$", "+00:00")
        .str.to_datetime("%Y-%m-%dT%H:%M:%S%.f%:z", strict=False, time_unit="us")
        .dt.convert_time_zone("UTC")
    )
    lo = pl.lit(TIME_MIN).dt.replace_time_zone("UTC")
    hi = pl.lit(TIME_MAX).dt.replace_time_zone("UTC")
    return pl.when((t >= lo) & (t < hi)).then(t)


def _bad_time(text: pl.Expr, label: str | pl.Expr, parsed: pl.Expr | None = None) -> pl.Expr:
    """Reason for a present time that does not parse (or lies outside 1970-2100);
    ``parsed``: the column already holding ``_time(text)``, to parse only once.
    """
    name = pl.lit(label) if isinstance(label, str) else label
    value = _time(text) if parsed is None else parsed
    return pl.when(text.is_not_null() & value.is_null()).then(
        pl.format("{} '{}' is not an RFC 3339 time in 1970-2100", name, text)
    )


def _shown(text: pl.Expr, limit: int = 40) -> pl.Expr:
    """A value quoted in a reason, cut to ``limit`` characters (a 5,000-digit quantity
    must not push the reason itself out of the capped quarantine text).
    """
    return (
        pl.when(text.str.len_chars() > limit)
        .then(pl.format("{}... ({} characters)", text.str.slice(0, limit), text.str.len_chars()))
        .otherwise(text)
    )


def _seconds(a: pl.Expr, b: pl.Expr) -> pl.Expr:
    return (b - a).cast(_US).dt.total_microseconds() / 1e6


def _first_reason(frame: pl.DataFrame, key: str = "_p") -> pl.DataFrame:
    """The first non-null ``_why`` per ``key`` (frames are in document order)."""
    return (
        frame.filter(pl.col("_why").is_not_null())
        .group_by(key, maintain_order=True)
        .agg(pl.col("_why").first())
    )


# --------------------------------------------------------------------------- pods


def _resources(pods: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Per pod: effective requests by class, and the first bad quantity."""
    sections = []
    for section, path in (
        ("containers", "spec.containers"),
        ("initContainers", "spec.initContainers"),
    ):
        c = (
            pods.select("_p", _rec(path).alias("c"))
            .with_columns(pl.int_ranges(pl.col("c").list.len()).alias("pos"))
            .explode(["c", "pos"])
            .filter(pl.col("c").is_not_null())
            .select(
                "_p",
                pl.col("pos").cast(pl.Int64),
                pl.lit(section).alias("section"),
                (pl.col("c").struct.field("restartPolicy") == "Always")
                .fill_null(False)
                .alias("sidecar")
                if section == "initContainers"
                else pl.lit(False).alias("sidecar"),
                _field(pl.col("c"), "resources.requests").alias("requests"),
                _field(pl.col("c"), "resources.limits").alias("limits"),
            )
        )
        sections.append(c)
    containers = pl.concat(sections)
    entries = []
    for which in ("requests", "limits"):
        entries.append(
            containers.select("_p", "pos", "section", "sidecar", pl.col(which).alias("kv"))
            .explode("kv")
            .filter(pl.col("kv").is_not_null())
            .select(
                "_p",
                "pos",
                "section",
                "sidecar",
                pl.lit(which).alias("which"),
                pl.col("kv").struct.field("key").alias("key"),
                pl.col("kv").struct.field("value").alias("q"),
            )
        )
    overhead = (
        pods.select("_p", _rec("spec.overhead").alias("kv"))
        .explode("kv")
        .filter(pl.col("kv").is_not_null())
        .select(
            "_p",
            pl.lit(-1, dtype=pl.Int64).alias("pos"),
            pl.lit("overhead").alias("section"),
            pl.lit(False).alias("sidecar"),
            pl.lit("overhead").alias("which"),
            pl.col("kv").struct.field("key").alias("key"),
            pl.col("kv").struct.field("value").alias("q"),
        )
    )
    e = pl.concat([*entries, overhead])
    milli = e["key"] == "cpu"
    whole = ~e["key"].is_in(["cpu", "memory", "ephemeral-storage"]) & ~e["key"].str.starts_with(
        "hugepages-"
    )
    value, why = parse_column(e["q"], milli, whole)
    e = e.with_columns(value.alias("v"), why.alias("_why"))
    where = (
        pl.when(pl.col("section") == "overhead")
        .then(pl.lit("spec.overhead"))
        .otherwise(pl.format("spec.{}[{}].resources.{}", "section", "pos", "which"))
    )
    bad = _first_reason(
        e.sort("_p", "section", "pos").with_columns(
            pl.when(pl.col("_why").is_not_null())
            .then(pl.format("{}.{} '{}' {}", where, "key", _shown(pl.col("q")), "_why"))
            .alias("_why")
        )
    )
    # request, else limit (Kubernetes defaults a missing request to its limit)
    eff = (
        e.filter(pl.col("_why").is_null())
        .sort("_p", "section", "pos", "key", "which", descending=[False, False, False, False, True])
        .unique(["_p", "section", "pos", "key"], keep="first", maintain_order=True)
        # sums in Int128: a total past int64 is reported below, never wrapped to 0
        .with_columns(pl.col("v").cast(pl.Int128))
    )
    init = (
        eff.filter(pl.col("section") == "initContainers")
        .sort("_p", "key", "pos")
        .with_columns(
            (pl.col("v") * pl.col("sidecar").cast(pl.Int64))
            .cum_sum()
            .over("_p", "key")
            .alias("_side")
        )
        .with_columns(
            (pl.col("_side") + pl.col("v") * (~pl.col("sidecar")).cast(pl.Int64)).alias("_term")
        )
        .group_by("_p", "key")
        .agg(pl.col("_term").max().alias("init_peak"), pl.col("_side").max().alias("sidecars"))
    )
    main = (
        eff.filter(pl.col("section") == "containers")
        .group_by("_p", "key")
        .agg(pl.col("v").sum().alias("main"))
    )
    over = (
        eff.filter(pl.col("section") == "overhead")
        .group_by("_p", "key")
        .agg(pl.col("v").sum().alias("over"))
    )
    per_key = (
        main.join(init, on=["_p", "key"], how="full", coalesce=True)
        .join(over, on=["_p", "key"], how="full", coalesce=True)
        .with_columns(
            (
                pl.max_horizontal(
                    pl.col("main").fill_null(0) + pl.col("sidecars").fill_null(0),
                    pl.col("init_peak").fill_null(0),
                )
                + pl.col("over").fill_null(0)
            ).alias("v"),
            pl.col("key").str.extract(MIG, 1).alias("_g_text"),
        )
        .with_columns(
            pl.when(pl.col("_g_text").str.len_chars() <= 2)
            .then(pl.col("_g_text").cast(pl.Int64, strict=False))
            .alias("_g")
        )
    )
    limit = pl.lit(INT64_MAX, dtype=pl.Int128)
    late = per_key.sort("_p", "key").select(
        "_p",
        pl.coalesce(
            # NVIDIA MIG profiles name 1 to 7 compute slices of a GPU (mig-1g ... mig-7g)
            pl.when(
                pl.col("_g_text").is_not_null() & ~pl.col("_g").is_between(1, 7).fill_null(False)
            ).then(
                pl.format(
                    "resource {} names {} compute slices: a MIG profile has 1 to 7",
                    "key",
                    pl.col("_g_text").str.slice(0, 40),
                )
            ),
            pl.when(pl.col("v") > limit).then(
                pl.format(
                    "the pod's effective request of {} ({}) is past int64 (requests, init "
                    "containers and spec.overhead added up)",
                    "key",
                    pl.col("v").cast(pl.String),
                )
            ),
        ).alias("_why"),
    )
    bad = _first_reason(pl.concat([bad, late.filter(pl.col("_why").is_not_null())]))
    per_key = per_key.with_columns(
        pl.when(pl.col("v") <= limit).then(pl.col("v")).cast(pl.Int64).alias("v"),
        pl.col("v").cast(pl.Float64).alias("_f"),
    )
    totals = per_key.group_by("_p").agg(
        pl.col("v").filter(pl.col("key") == "cpu").sum().alias("cpu_milli"),
        pl.col("v").filter(pl.col("key") == "memory").sum().alias("mem_bytes"),
        # GPU counts feed fractional GPUs: float sums (no int64 product or sum to wrap)
        pl.col("_f").filter(pl.col("key").is_in(WHOLE_GPU)).sum().alias("whole"),
        (pl.col("_f") * pl.col("_g")).filter(pl.col("_g").is_not_null()).sum().alias("mig"),
        pl.col("_f").filter(pl.col("key") == GPU_MEM).sum().alias("gpu_mem"),
        pl.col("key").filter(pl.col("key") == "cpu").len().alias("_has_cpu"),
        pl.col("key").filter(pl.col("key") == "memory").len().alias("_has_mem"),
    )
    return totals, bad


def _statuses(pods: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Per pod from its container statuses: first start, last finish, exit code and
    signal and reason of the deciding container; and the first bad value.
    """
    parts = []
    for order, path in ((0, "status.initContainerStatuses"), (1, "status.containerStatuses")):
        parts.append(
            pods.select("_p", _rec(path).alias("s"))
            .with_columns(pl.int_ranges(pl.col("s").list.len()).alias("pos"))
            .explode(["s", "pos"])
            .filter(pl.col("s").is_not_null())
            .select(
                "_p",
                pl.lit(order).alias("order"),
                pl.col("pos").cast(pl.Int64),
                pl.lit(path).alias("path"),
                _field(pl.col("s"), "state.running.startedAt").alias("run_at"),
                _field(pl.col("s"), "state.terminated.startedAt").alias("t_start"),
                _field(pl.col("s"), "state.terminated.finishedAt").alias("t_end"),
                _field(pl.col("s"), "state.terminated.exitCode").alias("code"),
                _field(pl.col("s"), "state.terminated.signal").alias("signal"),
                _field(pl.col("s"), "state.terminated.reason").alias("t_reason"),
                _field(pl.col("s"), "state.waiting.reason").alias("w_reason"),
                pl.col("s")
                .struct.field("state")
                .struct.field("terminated")
                .is_not_null()
                .alias("_term"),
            )
        )
    s = pl.concat(parts).sort("_p", "order", "pos")
    integer = r"^[+-]?[0-9]{1,9}$"
    label = pl.format("{}[{}].state", "path", "pos")
    s = s.with_columns(
        _time(pl.col("run_at")).alias("_run_at"),
        _time(pl.col("t_start")).alias("_t_start"),
        _time(pl.col("t_end")).alias("_finished"),
    ).with_columns(
        pl.coalesce(
            _bad_time(
                pl.col("run_at"), pl.format("{}.running.startedAt", label), pl.col("_run_at")
            ),
            _bad_time(
                pl.col("t_start"), pl.format("{}.terminated.startedAt", label), pl.col("_t_start")
            ),
            _bad_time(
                pl.col("t_end"), pl.format("{}.terminated.finishedAt", label), pl.col("_finished")
            ),
            # ContainerStateTerminated: startedAt is when the container started, finishedAt
            # when it last terminated; an end before its start is a damaged record
            pl.when(pl.col("_finished") < pl.col("_t_start")).then(
                pl.format(
                    "{}.terminated.finishedAt '{}' is before its startedAt '{}'",
                    label,
                    "t_end",
                    "t_start",
                )
            ),
            pl.when(pl.col("code").is_not_null() & ~pl.col("code").str.contains(integer)).then(
                pl.format("{}.terminated.exitCode '{}' is not an integer", label, "code")
            ),
            pl.when(pl.col("signal").is_not_null() & ~pl.col("signal").str.contains(integer)).then(
                pl.format("{}.terminated.signal '{}' is not an integer", label, "signal")
            ),
        ).alias("_why"),
        pl.coalesce("_run_at", "_t_start").alias("_started"),
        pl.col("code").cast(pl.Int32, strict=False).alias("_code"),
        pl.col("signal").cast(pl.Int32, strict=False).alias("_signal"),
    )
    bad = _first_reason(s)
    failing = (pl.col("_code").fill_null(0) != 0) | pl.col("_signal").is_not_null()
    agg = s.group_by("_p").agg(
        pl.col("_started").min().alias("started"),
        pl.col("_finished").max().alias("finished"),
        pl.col("_code").filter(failing).first().alias("_bad_code"),
        pl.col("_signal").filter(failing).first().alias("exit_signal"),
        pl.col("t_reason").filter(failing).first().alias("_fail_reason"),
        pl.col("_term").any().alias("_any_term"),
        pl.col("t_reason").drop_nulls().first().alias("_term_reason"),
        pl.col("w_reason").drop_nulls().first().alias("_wait_reason"),
    )
    agg = agg.with_columns(
        pl.coalesce(
            pl.col("_bad_code"), pl.when(pl.col("_any_term")).then(pl.lit(0, pl.Int32))
        ).alias("exit_code"),
        pl.coalesce("_fail_reason", "_term_reason", "_wait_reason").alias("_container_reason"),
    )
    return agg, bad


def _conditions(pods: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    c = (
        pods.select("_p", _rec("status.conditions").alias("c"))
        .with_columns(pl.int_ranges(pl.col("c").list.len()).alias("pos"))
        .explode(["c", "pos"])
        .filter(pl.col("c").is_not_null())
        .select(
            "_p",
            "pos",
            pl.col("c").struct.field("type").alias("type"),
            pl.col("c").struct.field("status").alias("status"),
            pl.col("c").struct.field("reason").alias("reason"),
            pl.col("c").struct.field("lastTransitionTime").alias("at"),
        )
        .with_columns(
            _bad_time(
                pl.col("at"), pl.format("status.conditions[{}].lastTransitionTime", "pos")
            ).alias("_why"),
            _time(pl.col("at")).alias("_at"),
        )
    )
    bad = _first_reason(c)
    agg = c.group_by("_p").agg(
        pl.col("_at")
        .filter((pl.col("type") == "PodScheduled") & (pl.col("status") == "True"))
        .min()
        .alias("scheduled"),
        pl.col("_at").max().alias("_last_transition"),
        pl.col("reason")
        .filter((pl.col("type") == "DisruptionTarget") & (pl.col("status") == "True"))
        .first()
        .alias("_disruption"),
    )
    return agg, bad


def _gpu_type_wanted(pods: pl.DataFrame) -> pl.DataFrame:
    """The GPU model a pod asks for: nodeSelector, else required node affinity (In)."""
    selector = _lookup(_rec("spec.nodeSelector"), PRODUCT)
    aff = (
        pods.select(
            "_p",
            _rec(
                "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
            ).alias("t"),
        )
        .explode("t")
        .select("_p", pl.col("t").struct.field("matchExpressions").alias("m"))
        .explode("m")
        .filter(
            (pl.col("m").struct.field("key") == PRODUCT)
            & (pl.col("m").struct.field("operator") == "In")
        )
        .select("_p", pl.col("m").struct.field("values").alias("v"))
        .explode("v")
        .filter(pl.col("v").is_not_null())
        .group_by("_p")
        .agg(pl.col("v").unique().sort().str.join("|").alias("_affinity"))
    )
    return (
        pods.select("_p", selector.alias("_selector"))
        .join(aff, on="_p", how="left")
        .select("_p", pl.coalesce("_selector", "_affinity").alias("_wanted"))
    )


def _pod_status(
    phase: pl.Expr, reason: pl.Expr, disruption: pl.Expr, container: pl.Expr
) -> pl.Expr:
    """Canonical status of one pod: its phase, and for a Failed pod why it failed (the
    pod's own reason first, then a disruption condition, then the failing container's
    terminated reason).
    """
    failed = (
        pl.when(reason == "DeadlineExceeded")
        .then(pl.lit("timeout"))
        .when(reason == PREEMPTING)
        .then(pl.lit("preempted"))
        .when(disruption.is_in(list(DISRUPTION)))
        .then(disruption.replace_strict(DISRUPTION, default="failed"))
        .when(reason.is_in(NODE_FAIL_REASONS))
        .then(pl.lit("node_fail"))
        .when(container == OOM)
        .then(pl.lit("oom"))
        .otherwise(pl.lit("failed"))
    )
    return (
        pl.when(phase == "Succeeded")
        .then(pl.lit("completed"))
        .when(phase == "Failed")
        .then(failed)
        .when(phase == "Running")
        .then(pl.lit("running"))
        .when(phase == "Pending")
        .then(pl.lit("pending"))
        .otherwise(pl.lit("unknown"))
    )


def _peaks(pods: pl.DataFrame, weights: Sequence[str]) -> pl.DataFrame:
    """Per job, the peak over time of each weight summed over the pods alive together
    (a sweep: +w at a pod's start, -w at its end; ends before starts at one instant).
    """
    # integer weights (milli-cores, bytes) exactly, in Int128: no float rounding near
    # int64 max and no wrap-around; GPUs (fractional) in float
    w = [pl.col(c).cast(pl.Int128 if pods.schema[c].is_integer() else pl.Float64) for c in weights]
    ups = pods.select("job_id", pl.col("_alive").alias("t"), pl.lit(1).alias("_o"), *w)
    downs = pods.filter(pl.col("end_time").is_not_null()).select(
        "job_id", pl.col("end_time").alias("t"), pl.lit(0).alias("_o"), *[x * -1 for x in w]
    )
    ev = pl.concat([ups, downs]).sort("job_id", "t", "_o")
    return (
        ev.with_columns(pl.col(c).cum_sum().over("job_id") for c in weights)
        .group_by("job_id")
        .agg(pl.col(c).max() for c in weights)
    )


def _stamp(t: pl.Expr) -> pl.Expr:
    return t.dt.to_string("%Y-%m-%dT%H:%M:%S%.fZ")


def _out_of_order(
    pods: pl.DataFrame, statuses: pl.DataFrame, conditions: pl.DataFrame
) -> pl.DataFrame:
    """Per pod, why its times contradict the Pod lifecycle (``_w4``): a pod is created
    (``metadata.creationTimestamp``) before the scheduler binds it (``PodScheduled``),
    before the kubelet acknowledges it (``status.startTime``) and before any container
    starts. A later creation would give a negative queue time.
    """
    created_text = _rec("metadata.creationTimestamp")
    start_text = _rec("status.startTime")
    created = pl.col("_c")
    return (
        pods.select(
            "_p",
            _time(created_text).alias("_c"),
            start_text.alias("_st_text"),
            _time(start_text).alias("_st"),
        )
        .join(conditions.select("_p", "scheduled"), on="_p", how="left")
        .join(statuses.select("_p", "started"), on="_p", how="left")
        .select(
            "_p",
            pl.coalesce(
                _bad_time(pl.col("_st_text"), "status.startTime", pl.col("_st")),
                *[
                    pl.when(created > pl.col(col)).then(
                        pl.format(
                            "metadata.creationTimestamp {} is after {} {}: a pod is created "
                            "before it is scheduled or started",
                            _stamp(created),
                            pl.lit(what),
                            _stamp(pl.col(col)),
                        )
                    )
                    for col, what in (
                        ("scheduled", "its PodScheduled condition"),
                        ("_st", "status.startTime"),
                        ("started", "its first container start"),
                    )
                ],
            ).alias("_w4"),
        )
    )


def _late_rejects(p: pl.DataFrame) -> pl.DataFrame:
    """Pods that are valid alone but cannot be counted where they are (``_p``,
    ``_why``): a GPU-memory share on a node whose GPU memory or GPU count is 0 (the
    share would be infinite or undefined), and jobs whose pods together request more
    than int64 of CPU or memory.
    """
    mem, count = pl.col("_share_mem"), pl.col("_share_count")
    share = p.filter(
        (pl.col("gpu_mem").fill_null(0) > 0)
        & pl.col("_known").fill_null(False)
        & (mem.is_not_null() | count.is_not_null())
        & ((mem.fill_null(0) == 0) | (count.fill_null(0) == 0))
    ).select(
        "_p",
        pl.format(
            "requests {} {} on node {}, which reports {} '{}' and {} '{}': no share of a "
            "GPU can be computed",
            pl.lit(GPU_MEM),
            pl.coalesce(
                pl.col("gpu_mem").cast(pl.Int64, strict=False).cast(pl.String),
                pl.col("gpu_mem").cast(pl.String),
            ),
            "_node",
            pl.lit(GPU_MEM),
            mem.cast(pl.String).fill_null("(none)"),
            pl.lit(GPU_COUNT),
            count.cast(pl.String).fill_null("(none)"),
        ).alias("_why"),
    )
    limit = pl.lit(INT64_MAX, dtype=pl.Int128)
    totals = _peaks(p, ["cpu_milli", "mem_bytes"])
    big = totals.filter((pl.col("cpu_milli") > limit) | (pl.col("mem_bytes") > limit)).select(
        "job_id",
        pl.format(
            "job {}: its pods alive together request {} past int64",
            "job_id",
            pl.when(pl.col("cpu_milli") > limit)
            .then(pl.lit("milli-CPUs"))
            .otherwise(pl.lit("bytes of memory")),
        ).alias("_why2"),
    )
    overflow = p.join(big, on="job_id").select("_p", pl.col("_why2").alias("_why"))
    return _first_reason(pl.concat([share, overflow]).sort("_p"))


def pods_to_rows(
    objs: Objects, nodes: pl.DataFrame, *, cluster: str, dataset: str, user_keys: Sequence[str]
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(jobs rows, placements rows, rejected pods with ``_n``, ``_raw``, ``_reason``)."""
    pods = objs.frame.filter(pl.col(REASON).is_null() & (pl.col("kind") == "Pod")).with_row_index(
        "_p"
    )
    pods = pods.with_columns(pl.col("_p").cast(pl.Int64))
    name = _rec("metadata.name")
    created_text = _rec("metadata.creationTimestamp")
    deadline = _rec("spec.activeDeadlineSeconds")
    base_why = pl.coalesce(
        pl.col(DUPLICATE),
        pl.when(name.is_null() | (name == "")).then(pl.lit("metadata.name is missing")),
        pl.when(created_text.is_null()).then(pl.lit("metadata.creationTimestamp is missing")),
        _bad_time(created_text, "metadata.creationTimestamp"),
        pl.when(_rec("spec.containers").list.len().fill_null(0) == 0).then(
            pl.lit("spec.containers is missing or empty")
        ),
        pl.when(deadline.is_not_null() & ~deadline.str.contains(r"^[0-9]{1,12}$")).then(
            pl.format("spec.activeDeadlineSeconds '{}' is not a whole number", deadline)
        ),
    )
    slim = pods.select("_p", "rec")
    res, bad_res = _resources(slim)
    st, bad_st = _statuses(slim)
    cond, bad_cond = _conditions(slim)
    wanted = _gpu_type_wanted(slim)
    why = (
        pods.select("_p", base_why.alias("_w0"))
        .join(bad_res.rename({"_why": "_w1"}), on="_p", how="left")
        .join(bad_cond.rename({"_why": "_w2"}), on="_p", how="left")
        .join(bad_st.rename({"_why": "_w3"}), on="_p", how="left")
        .join(_out_of_order(pods, st, cond), on="_p", how="left")
        .select("_p", pl.coalesce("_w0", "_w1", "_w2", "_w3", "_w4").alias("_why"))
    )
    pods = pods.join(why, on="_p", how="left", maintain_order="left")
    rejected = pods.filter(pl.col("_why").is_not_null()).select(
        NUM, RAW, pl.col("_why").alias(REASON)
    )
    good = pods.filter(pl.col("_why").is_null()).select("_p", "rec")

    owners = (
        good.select("_p", _rec("metadata.ownerReferences").alias("o"))
        .with_columns(pl.int_ranges(pl.col("o").list.len()).alias("pos"))
        .explode(["o", "pos"])
        .filter(pl.col("o").is_not_null())
        .select(
            "_p",
            "pos",
            (pl.col("o").struct.field("controller") != "true").fill_null(True).alias("_nc"),
            pl.col("o").struct.field("kind").alias("_okind"),
            pl.col("o").struct.field("name").alias("_oname"),
        )
        .filter(pl.col("_okind").is_not_null() & pl.col("_oname").is_not_null())
        .sort("_p", "_nc", "pos")
        .unique("_p", keep="first", maintain_order=True)
        .select("_p", "_okind", "_oname")
    )
    labels, notes = _rec("metadata.labels"), _rec("metadata.annotations")
    user = pl.coalesce(
        *[_lookup(labels, k) for k in user_keys], *[_lookup(notes, k) for k in user_keys]
    )
    node_info = nodes.select(
        pl.col("machine_id").alias("_node"),
        pl.col("gpu_type").alias("_node_type"),
        pl.col("_share_mem"),
        pl.col("_share_count"),
        pl.lit(True).alias("_known"),
    )
    # the scalar fields once, so that the joins below do not carry the nested record
    scalars = good.select(
        "_p",
        _rec("metadata.namespace").fill_null("default").alias("vc"),
        name.alias("_pod"),
        _rec("spec.nodeName").alias("_node"),
        _time(created_text).alias("submit_time"),
        _rec("status.phase").alias("_phase"),
        _rec("status.reason").alias("_pod_reason"),
        user.alias("user"),
        pl.coalesce(_rec("spec.priorityClassName"), _rec("status.qosClass")).alias("qos"),
        deadline.cast(pl.Float64).alias("time_limit_s"),
        pl.coalesce(*[_lookup(labels, k) for k in TASK_LABELS]).alias("task"),
        _lookup(notes, MIRROR).is_not_null().alias("_mirror_note"),
    )
    p = (
        scalars.join(owners, on="_p", how="left")
        .join(res, on="_p", how="left")
        .join(st, on="_p", how="left")
        .join(cond, on="_p", how="left")
        .join(wanted, on="_p", how="left")
        .join(node_info, on="_node", how="left")
        .sort("_p")
    )
    # A static pod's API object (its mirror pod) is owned by its Node and carries the
    # kubernetes.io/config.mirror annotation: it is its own job, not the node's.
    mirror = pl.col("_mirror_note") | (pl.col("_okind") == "Node").fill_null(False)
    kind = pl.when(mirror).then(pl.lit("Pod")).otherwise(pl.col("_okind").fill_null("Pod"))
    oname = pl.when(mirror).then(pl.col("_pod")).otherwise(pl.coalesce("_oname", "_pod"))
    reason = pl.coalesce(pl.col("_pod_reason"), pl.col("_disruption"), pl.col("_container_reason"))
    terminal = pl.col("_phase").is_in(["Succeeded", "Failed"])
    whole = pl.col("whole").fill_null(0)
    mig = pl.col("mig").fill_null(0)
    mem_share = pl.col("gpu_mem").fill_null(0)
    per_gpu = pl.col("_share_mem").cast(pl.Float64) / pl.col("_share_count")
    share = pl.when(mem_share > 0).then(mem_share / per_gpu).otherwise(0.0)
    units = (whole > 0).cast(pl.Int8) + (mig > 0).cast(pl.Int8) + (mem_share > 0).cast(pl.Int8)
    p = p.with_columns(
        pl.format("{}/{}/{}", "vc", kind, oname).alias("job_id"),
        oname.alias("name"),
        kind.alias("workload_type"),
        _pod_status(pl.col("_phase"), reason, pl.col("_disruption"), pl.col("_fail_reason")).alias(
            "_status"
        ),
        pl.when(reason.is_not_null())
        .then(pl.format("{}/{}", pl.col("_phase").fill_null("(no phase)"), reason))
        .otherwise(pl.col("_phase"))
        .alias("_raw_status"),
        pl.coalesce("scheduled", "started").alias("start_time"),
        pl.when(terminal).then(pl.coalesce("finished", "_last_transition")).alias("end_time"),
        pl.coalesce("started", "scheduled").alias("_run_start"),
        (whole.cast(pl.Float64) + mig.cast(pl.Float64) / 7 + share).alias("gpus"),
        pl.when(units > 1)
        .then(pl.lit("mixed"))
        .when(mig > 0)
        .then(pl.lit("mig_slices"))
        .when(mem_share > 0)
        .then(pl.lit("gpu_mem_gib"))
        .otherwise(pl.lit("gpu"))
        .alias("gpus_raw_unit"),
        pl.when(units > 1)
        .then(None)
        .otherwise(whole + mig + mem_share)
        .cast(pl.Float64)
        .alias("gpus_raw"),
        pl.coalesce("_node_type", "_wanted").alias("gpu_type"),
        pl.lit(1).alias("_one"),
    ).with_columns(pl.coalesce("start_time", "submit_time").alias("_alive"))
    late = _late_rejects(p)
    rejected = pl.concat(
        [
            rejected,
            pods.select("_p", NUM, RAW)
            .join(late, on="_p")
            .sort("_p")
            .select(NUM, RAW, pl.col("_why").alias(REASON)),
        ]
    )
    p = p.join(late, on="_p", how="anti")
    # attempts: the job's unsuccessful pod ends before this pod's creation
    fails = (
        p.filter(pl.col("end_time").is_not_null() & (pl.col("_status") != "completed"))
        .select("job_id", pl.col("end_time").alias("_t"))
        .sort("job_id", "_t")
        .with_columns(pl.int_range(1, pl.len() + 1).over("job_id").alias("_fails"))
        .sort("_t")
    )
    p = (
        p.sort("submit_time")
        .join_asof(
            fails,
            left_on="submit_time",
            right_on="_t",
            by="job_id",
            strategy="backward",
            check_sortedness=False,
        )
        .with_columns(pl.col("_fails").fill_null(0).cast(pl.Int32).alias("attempt"))
        .sort("_p")
    )
    placements = p.select(
        pl.lit(SOURCE).alias("source"),
        pl.lit(dataset).alias("dataset"),
        pl.lit(cluster).alias("cluster"),
        "job_id",
        "attempt",
        "task",
        pl.col("_pod").alias("instance"),
        pl.col("_run_start").alias("start_time"),
        "end_time",
        pl.col("_node").alias("machine_id"),
        pl.col("gpus").alias("gpu_count"),
        pl.lit(None, dtype=pl.List(pl.Int16)).alias("gpu_indices"),
        pl.col("_status").alias("status"),
    )
    peaks = _peaks(p, ["gpus", "gpus_raw", "cpu_milli", "mem_bytes", "_one"])
    last = pl.col("attempt") == pl.col("attempt").max()
    deciding = (
        p.with_columns(pl.col("_status").replace_strict(RANK, return_dtype=pl.Int32).alias("_rank"))
        .filter(last.over("job_id"))
        .sort("job_id", "_rank", "end_time", "submit_time", "_p", nulls_last=True)
        .group_by("job_id", maintain_order=True)
        .agg(
            pl.col("_status").first().alias("status"),
            pl.col("_raw_status").first().alias("raw_status"),
            pl.col("exit_code").first(),
            pl.col("exit_signal").first(),
        )
    )
    jobs = (
        p.sort("submit_time", "_p")
        .group_by("job_id", maintain_order=True)
        .agg(
            pl.col("name").first(),
            pl.col("vc").first(),
            pl.col("user").drop_nulls().first(),
            pl.col("workload_type").first(),
            pl.col("submit_time").min(),
            pl.col("start_time").min(),
            pl.when(pl.col("end_time").null_count() == 0)
            .then(pl.col("end_time").max())
            .alias("end_time"),
            pl.col("gpu_type").drop_nulls().unique().sort().str.join("|").alias("gpu_type"),
            pl.col("_node").drop_nulls().n_unique().alias("_nodes"),
            (pl.col("attempt").max() + 1).alias("attempts"),
            pl.col("qos").drop_nulls().first(),
            pl.col("time_limit_s").drop_nulls().first(),
            pl.col("gpus_raw_unit").unique().alias("_units"),
            pl.col("_has_cpu").fill_null(0).sum().alias("_has_cpu"),
            pl.col("_has_mem").fill_null(0).sum().alias("_has_mem"),
        )
        .join(peaks, on="job_id", how="left")
        .join(deciding, on="job_id", how="left")
    )
    jobs = jobs.select(
        pl.lit(SOURCE).alias("source"),
        pl.lit(dataset).alias("dataset"),
        pl.lit(cluster).alias("cluster"),
        "job_id",
        "user",
        "vc",
        "name",
        "submit_time",
        "start_time",
        "end_time",
        _seconds(pl.col("submit_time"), pl.col("start_time")).alias("queue_s"),
        _seconds(pl.col("start_time"), pl.col("end_time")).alias("run_s"),
        "gpus",
        pl.when(pl.col("_units").list.len() == 1).then(pl.col("gpus_raw")).alias("gpus_raw"),
        pl.when(pl.col("_units").list.len() == 1)
        .then(pl.col("_units").list.first())
        .otherwise(pl.lit("mixed"))
        .alias("gpus_raw_unit"),
        pl.when(pl.col("_has_cpu") > 0)
        .then(per(pl.col("cpu_milli").cast(pl.Int64), 1000))
        .alias("cpus"),
        pl.when(pl.col("_has_mem") > 0).then(pl.col("mem_bytes").cast(pl.Int64)).alias("mem_bytes"),
        pl.when(pl.col("gpu_type") != "").then(pl.col("gpu_type")).alias("gpu_type"),
        pl.when(pl.col("_nodes") > 0)
        .then(pl.min_horizontal(pl.col("_nodes"), pl.col("_one").cast(pl.Int64)))
        .cast(pl.Int32)
        .alias("nodes"),
        pl.col("attempts").cast(pl.Int32),
        "status",
        "raw_status",
        "qos",
        pl.lit(None, dtype=pl.String).alias("account"),
        pl.lit(None, dtype=pl.Datetime("us", "UTC")).alias("eligible_time"),
        "time_limit_s",
        "exit_code",
        "exit_signal",
        "workload_type",
        pl.lit("UTC").alias("source_tz"),
        pl.lit("absolute").alias("time_basis"),
    )
    return jobs, placements, rejected


# -------------------------------------------------------------------------- nodes


INT32_MAX = 2**31 - 1


def _inventory(n: pl.DataFrame, which: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Per node, the totals of ``status.<which>`` and the first bad quantity."""
    e = (
        n.select("_p", _rec(f"status.{which}").alias("kv"))
        .explode("kv")
        .filter(pl.col("kv").is_not_null())
        .select(
            "_p",
            pl.col("kv").struct.field("key").alias("key"),
            pl.col("kv").struct.field("value").alias("q"),
        )
    )
    whole = ~e["key"].is_in(["cpu", "memory", "ephemeral-storage"]) & ~e["key"].str.starts_with(
        "hugepages-"
    )
    v, bad_q = parse_column(e["q"], e["key"] == "cpu", whole)
    e = e.with_columns(
        v.alias("v"),
        pl.when(bad_q.is_not_null())
        .then(pl.format("status.{}.{} '{}' {}", pl.lit(which), "key", _shown(pl.col("q")), bad_q))
        .alias("_why"),
    )
    totals = e.group_by("_p").agg(
        pl.col("v").filter(pl.col("key") == "cpu").first().alias("cpu_milli"),
        pl.col("v").filter(pl.col("key") == "memory").first().alias("mem_bytes"),
        pl.col("v").cast(pl.Int128).filter(pl.col("key").is_in(WHOLE_GPU)).sum().alias("whole"),
        pl.col("v")
        .cast(pl.Int128)
        .filter(pl.col("key").str.contains(MIG))
        .sum()
        .alias("mig_devices"),
        pl.col("v").filter(pl.col("key") == GPU_MEM).first().alias("_share_mem"),
        pl.col("v").filter(pl.col("key") == GPU_COUNT).first().alias("_share_count"),
    )
    big = totals.filter((pl.col("whole") > INT32_MAX) | (pl.col("mig_devices") > INT32_MAX)).select(
        "_p",
        pl.format(
            "status.{} lists {} GPU devices, more than 2^31-1",
            pl.lit(which),
            pl.max_horizontal("whole", "mig_devices").cast(pl.String),
        ).alias("_why"),
    )
    return totals, _first_reason(pl.concat([e.select("_p", "_why"), big]).sort("_p"))


def _node_state(n: pl.DataFrame) -> pl.DataFrame:
    """``state`` as ``kubectl get nodes`` prints STATUS (the Ready condition: Ready,
    NotReady, or Unknown without one; ``,SchedulingDisabled`` when cordoned:
    ``spec.unschedulable``) and ``available`` (Ready and not cordoned; null when
    readiness is unknown and the node is not cordoned).
    """
    ready = (
        n.select("_p", _rec("status.conditions").alias("c"))
        .explode("c")
        .filter(pl.col("c").struct.field("type") == "Ready")
        .group_by("_p", maintain_order=True)
        .agg((pl.col("c").struct.field("status") == "True").last().alias("_ready"))
    )
    cordoned = (_rec("spec.unschedulable") == "true").fill_null(False)
    return (
        n.select("_p", cordoned.alias("_cordoned"))
        .join(ready, on="_p", how="left")
        .select(
            "_p",
            pl.concat_str(
                pl.when(pl.col("_ready").is_null())
                .then(pl.lit("Unknown"))
                .when(pl.col("_ready"))
                .then(pl.lit("Ready"))
                .otherwise(pl.lit("NotReady")),
                pl.when(pl.col("_cordoned"))
                .then(pl.lit(",SchedulingDisabled"))
                .otherwise(pl.lit("")),
            ).alias("state"),
            pl.when(pl.col("_cordoned"))
            .then(pl.lit(False))
            .otherwise(pl.col("_ready"))
            .alias("available"),
        )
    )


def nodes_to_rows(objs: Objects) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(capacity inventory, allocatable inventory, rejected nodes). Both inventories
    carry ``machine_id``, ``gpus``, ``gpus_schedulable``, ``gpu_type``,
    ``gpu_mem_bytes``, ``cpus``, ``mem_bytes``, ``state``, ``available`` and the
    GPU-sharing capacity ``_share_mem`` (GiB) and ``_share_count`` (GPUs).

    ``gpus`` (capacity inventory) is the physical GPUs installed: GPU feature
    discovery's ``nvidia.com/gpu.count`` label when present, else the whole-GPU
    capacity. Under the MIG ``single`` strategy that label and ``nvidia.com/gpu`` count
    MIG devices, not GPUs (GPU feature discovery README, "MIG 'single' strategy"), so
    the GPUs are the devices over the devices one GPU holds (``7 //
    nvidia.com/gpu.slices.gi``), null when that does not divide. ``gpus_schedulable``
    is what the scheduler can hand out: allocatable whole GPUs (MIG devices under
    ``single``) plus, on a ``mixed`` node, the allocatable ``nvidia.com/mig-*`` devices.
    """
    n = objs.frame.filter(pl.col(REASON).is_null() & (pl.col("kind") == "Node")).with_row_index(
        "_p"
    )
    n = n.with_columns(pl.col("_p").cast(pl.Int64))
    labels = _rec("metadata.labels")
    name = _rec("metadata.name")
    inv = [_inventory(n, "capacity"), _inventory(n, "allocatable")]
    memory = _lookup(labels, GPU_MEMORY_LABEL)
    count = _lookup(labels, GPU_COUNT_LABEL)
    slices = _lookup(labels, SLICES_LABEL)
    base_why = pl.coalesce(
        pl.col(DUPLICATE),
        pl.when(name.is_null() | (name == "")).then(pl.lit("metadata.name is missing")),
        pl.when(memory.is_not_null() & ~memory.str.contains(r"^[0-9]{1,9}$")).then(
            pl.format(
                "label {} '{}' is not a whole number of MiB", pl.lit(GPU_MEMORY_LABEL), memory
            )
        ),
        pl.when(count.is_not_null() & ~count.str.contains(r"^[0-9]{1,6}$")).then(
            pl.format("label {} '{}' is not a whole number", pl.lit(GPU_COUNT_LABEL), count)
        ),
        pl.when(slices.is_not_null() & ~slices.str.contains(r"^[1-7]$")).then(
            pl.format("label {} '{}' is not 1 to 7", pl.lit(SLICES_LABEL), slices)
        ),
    )
    why = (
        n.select("_p", base_why.alias("_w0"))
        .join(inv[0][1].rename({"_why": "_w1"}), on="_p", how="left")
        .join(inv[1][1].rename({"_why": "_w2"}), on="_p", how="left")
        .select("_p", pl.coalesce("_w0", "_w1", "_w2").alias("_why"))
    )
    n = n.join(why, on="_p", how="left", maintain_order="left")
    rejected = n.filter(pl.col("_why").is_not_null()).select(NUM, RAW, pl.col("_why").alias(REASON))
    strategy = _lookup(labels, STRATEGY_LABEL)
    good = (
        n.filter(pl.col("_why").is_null())
        .select(
            "_p",
            name.alias("machine_id"),
            _lookup(labels, PRODUCT).alias("gpu_type"),
            (memory.cast(pl.Int64) * MIB).alias("gpu_mem_bytes"),
            count.cast(pl.Int64).alias("_label_count"),
            (7 // slices.cast(pl.Int64)).alias("_per_gpu"),
            strategy.alias("_strategy"),
        )
        .join(_node_state(n), on="_p", how="left")
    )
    cap, alloc = inv[0][0], inv[1][0]
    sched = alloc.select(
        "_p",
        (pl.col("whole").fill_null(0) + pl.col("mig_devices").fill_null(0)).alias("_sched_all"),
        pl.col("whole").fill_null(0).alias("_sched_whole"),
    )
    # the GPU-sharing capacity is a node's capacity whichever inventory is read
    shares = cap.select("_p", "_share_mem", "_share_count")
    good = good.join(sched, on="_p", how="left").join(shares, on="_p", how="left")
    good = good.with_columns(
        pl.when(pl.col("_strategy") == "mixed")
        .then(pl.col("_sched_all"))
        .otherwise(pl.col("_sched_whole"))
        .cast(pl.Int32)
        .alias("gpus_schedulable")
    )
    installed = pl.coalesce(pl.col("_label_count"), pl.col("whole").fill_null(0))
    single = pl.col("_strategy") == "single"
    installed = (
        pl.when(single & pl.col("gpu_type").str.contains("-MIG-").fill_null(False))
        .then(pl.when((installed % pl.col("_per_gpu")) == 0).then(installed // pl.col("_per_gpu")))
        .otherwise(installed)
    )
    out = []
    for k, totals in enumerate((cap, alloc)):
        frame = good.join(
            totals.drop("_share_mem", "_share_count"), on="_p", how="left", maintain_order="left"
        )
        gpus = installed if k == 0 else pl.col("whole").fill_null(0)
        out.append(
            frame.select(
                "machine_id",
                gpus.cast(pl.Int32).alias("gpus"),
                "gpus_schedulable",
                "gpu_type",
                "gpu_mem_bytes",
                per(pl.col("cpu_milli"), 1000).alias("cpus"),
                "mem_bytes",
                "state",
                "available",
                pl.col("_share_mem"),
                pl.col("_share_count"),
            )
        )
    return out[0], out[1], rejected


# ------------------------------------------------------------------------- loader


def _quarantine(
    bad: pl.DataFrame, *, table: str, dataset: str, cluster: str, objs: Objects
) -> pl.DataFrame:
    return bad.sort(NUM).select(
        pl.lit(SOURCE).alias("source"),
        pl.lit(dataset).alias("dataset"),
        pl.lit(cluster).alias("cluster"),
        pl.lit(table).alias("table"),
        pl.lit(objs.info.path.name).alias("file"),
        pl.format(f"{objs.locator} {{}}", pl.col(NUM)).alias("locator"),
        capped(pl.col(REASON), REASON_LIMIT).alias("reason"),
        capped(pl.col(RAW).str.replace_all(r"[\r\n]+", " "), RAW_LIMIT).alias("raw"),
    )


def _machine_rows(frame: pl.DataFrame, dataset: str, cluster: str) -> pl.DataFrame:
    return frame.select(
        pl.lit(SOURCE).alias("source"),
        pl.lit(dataset).alias("dataset"),
        pl.lit(cluster).alias("cluster"),
        pl.exclude("_share_mem", "_share_count"),
    )


def _unusable(objs: Objects) -> pl.DataFrame:
    """Records that are not decodable objects, or neither Pod nor Node."""
    kind = pl.col("kind")
    return objs.frame.filter(
        pl.col(REASON).is_not_null() | ~kind.is_in(["Pod", "Node"]).fill_null(False)
    ).select(
        NUM,
        RAW,
        pl.coalesce(
            REASON,
            pl.when(kind.is_null())
            .then(pl.lit("record has no kind (expected Pod or Node)"))
            .otherwise(pl.format("kind {} is not Pod or Node", kind)),
        ).alias(REASON),
    )


class KubernetesLoader:
    """Loader for ``kubectl get pods|nodes -o json`` output (one or more files)."""

    name = SOURCE
    version = "1"
    merge_key = ("cluster", "job_id")
    shared_datasets = True
    """Several pod snapshots of one ingest share the dataset ``<cluster>`` (merged)."""

    def batches(
        self,
        path: Path,
        *,
        more: Sequence[Path] = (),
        cluster: str = "kubernetes",
        user_keys: Sequence[str] = USER_KEYS,
        **_: Any,
    ) -> Iterator[Batch]:
        """Yield ``jobs`` + ``placements`` for each file holding pods (snapshots, in the
        order given: all of dataset ``<cluster>``, merged) and two ``machines`` batches
        for the one file holding the nodes (one file may hold both kinds).
        """
        read = _read_inputs([path, *more])
        pod_files = [o for o in read if _count(o, "Pod")]
        node_files = [o for o in read if _count(o, "Node")]
        _check_kinds(read, pod_files, node_files)
        dataset = slug(cluster)
        meta = {
            "source_tz": "UTC",
            "time_basis": "absolute",
            "record_numbers": "1-based",
            "cluster": cluster,
        }
        nodes_cap = pl.DataFrame(
            schema={
                "machine_id": pl.String,
                "gpu_type": pl.String,
                "_share_mem": pl.Int64,
                "_share_count": pl.Int64,
            }
        )
        pod_ids = {id(o) for o in pod_files}
        for objs in node_files:
            cap, alloc, bad = nodes_to_rows(objs)
            nodes_cap = cap
            # A file holding pods too reports its unusable records with the pods.
            junk = _unusable(objs) if id(objs) not in pod_ids else _unusable(objs).clear()
            yield from _machine_batches(objs, cap, alloc, bad, junk, dataset, cluster, meta)
        for objs in pod_files:
            yield from _pod_batches(objs, nodes_cap, dataset, cluster, user_keys, meta)


def _read_inputs(files: list[Path]) -> list[Objects]:
    """Every input file read, once each has been found to exist and not be a folder."""
    for f in files:
        require_path(f)
        if f.is_dir():
            raise InputError(f, "is a folder; give the kubectl JSON files")
    return [read_objects(f) for f in files]


def _check_kinds(read: list[Objects], pod_files: list[Objects], node_files: list[Objects]) -> None:
    """Pods in any number of files (snapshots, merged), each export once; nodes in at
    most one file (two would replace each other's ``machines`` datasets); every file
    holds one of the two kinds.
    """
    if len(node_files) > 1:
        raise InputError(
            node_files[1].info.path,
            f"holds nodes, and so does {node_files[0].info.path.name}: give one nodes file "
            "per ingest (each later nodes ingest replaces the cluster's machines)",
        )
    exports: dict[str, Path] = {}
    for objs in pod_files:
        same = exports.get(objs.info.sha256)
        if same is not None:
            raise InputError(
                objs.info.path, f"is the same export as {same.name} (same bytes); give it once"
            )
        exports[objs.info.sha256] = objs.info.path
    used = {id(o) for o in pod_files} | {id(o) for o in node_files}
    for objs in read:
        if id(objs) not in used:
            junk = _unusable(objs)
            if junk.height:
                first = junk.row(0, named=True)
                raise InputError(
                    objs.info.path,
                    f"holds no pods or nodes ({first[REASON]})",
                    f"{objs.locator} {first[NUM]}",
                )
            raise InputError(objs.info.path, "holds no pods or nodes (an empty list)")


def _machine_batches(
    objs: Objects,
    cap: pl.DataFrame,
    alloc: pl.DataFrame,
    bad: pl.DataFrame,
    junk: pl.DataFrame,
    dataset: str,
    cluster: str,
    meta: dict[str, str],
) -> Iterator[Batch]:
    """The two ``machines`` batches of the nodes file: capacity (``dataset``, which also
    carries the file's unusable records) and allocatable (``<dataset>-allocatable``).
    """
    n_nodes = _count(objs, "Node")
    for frame, ds in ((cap, dataset), (alloc, f"{dataset}-allocatable")):
        rejected = pl.concat([junk, bad]) if ds == dataset else bad
        yield Batch(
            "machines",
            ds,
            objs.info,
            _machine_rows(frame, ds, cluster),
            _quarantine(rejected, table="machines", dataset=ds, cluster=cluster, objs=objs),
            rows_read=n_nodes + (junk.height if ds == dataset else 0),
            cluster=cluster,
            metadata={
                **meta,
                "inventory": "capacity" if ds == dataset else "allocatable",
                "rows_read": "Node records" + (" and unusable records" if ds == dataset else ""),
            },
        )


def _pod_batches(
    objs: Objects,
    nodes_cap: pl.DataFrame,
    dataset: str,
    cluster: str,
    user_keys: Sequence[str],
    meta: dict[str, str],
) -> Iterator[Batch]:
    """The ``placements`` batch (one row per pod; the file's rejects) and the ``jobs``
    batch (the owners of the good pods) of the pods file.
    """
    jobs, placements, bad = pods_to_rows(
        objs, nodes_cap, cluster=cluster, dataset=dataset, user_keys=user_keys
    )
    rejected = pl.concat([_unusable(objs), bad])
    yield Batch(
        "placements",
        dataset,
        objs.info,
        placements.sort(list(PLACEMENTS.sort_by), nulls_last=True, maintain_order=True),
        _quarantine(rejected, table="placements", dataset=dataset, cluster=cluster, objs=objs),
        rows_read=_count(objs, "Pod") + _unusable(objs).height,
        cluster=cluster,
        metadata={
            **meta,
            "rows_read": "Pod records (one placement per pod) and unusable records",
        },
        sort=False,
    )
    yield Batch(
        "jobs",
        dataset,
        objs.info,
        jobs.sort(list(JOBS.sort_by), nulls_last=True, maintain_order=True),
        None,
        rows_read=jobs.height,
        cluster=cluster,
        metadata={**meta, "rows_read": "jobs: the owners of the good pods (derived)"},
        sort=False,
    )


def _count(objs: Objects, kind: str) -> int:
    """Decodable records of ``kind`` (good and bad ones alike)."""
    return objs.frame.filter(pl.col(REASON).is_null() & (pl.col("kind") == kind)).height


@dataclass(frozen=True)
class KubernetesOptions:
    """`gpu-trace ingest kubernetes` options (the loader's keyword arguments: see
    :func:`_loader_kwargs`).
    """

    cluster: str = option(
        "kubernetes",
        "Cluster name: the datasets' name (later snapshots of it merge, one row per job).",
    )
    # A list, so the flag repeats (typer's own); option() returns a dataclasses.field.
    user_keys: list[str] | None = option(
        None,
        "Pod label or annotation naming the user (repeatable, first found wins; default: user).",
        flag="--user-key",
    )


def _loader_kwargs(options: KubernetesOptions) -> dict[str, Any]:
    return {"cluster": options.cluster, "user_keys": tuple(options.user_keys or USER_KEYS)}


PLUGIN = LoaderPlugin(
    name="kubernetes",
    loader=KubernetesLoader,
    help="Kubernetes: pods -> placements and jobs (one per owner), nodes -> machines "
    "(capacity, and allocatable as <cluster>-allocatable).",
    options=KubernetesOptions,
    path_help="kubectl get pods -A -o json / kubectl get nodes -o json output (a List or "
    "JSON lines; one file may hold both kinds).",
    kwargs=_loader_kwargs,
    many_paths=True,
)
