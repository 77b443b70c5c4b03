"""Which GPU each job held, and when: the join of jobs to telemetry series that idle GPUs
(:mod:`gpu_trace.analyses.idle`), energy (:mod:`gpu_trace.analyses.energy`) and per-job
usage (:func:`gpu_trace.analyses.utilization.per_job`) share, so no hand-written jobs
file is needed for Slurm or Kubernetes.

A *held window* is one (job attempt, GPU device, [t_start, t_end)) row, found four ways
(``matched_by``):

- ``gpu index``: a placement that lists its GPU indices (Philly's machine lists, a
  ``--jobs-file``; ``sacct`` prints none) holds ``(machine_id, index)`` on the telemetry
  host of that name.
- ``pod label``: a placement without indices whose ``instance`` is a Kubernetes pod
  holds every device whose dcgm-exporter series carries that pod's ``pod`` and
  ``namespace`` labels during the pod's life. dcgm-exporter attaches ``pod``,
  ``namespace`` and ``container`` (or, with ``--use-old-namespace``, ``pod_name``,
  ``pod_namespace``, ``container_name``; the loaders read both) to the series of the
  GPUs the kubelet assigned to the pod: NVIDIA/dcgm-exporter
  ``internal/pkg/transformation/const.go`` (``podAttribute = "pod"``, ...). The pod's
  namespace is the first part of the Kubernetes loader's ``job_id``
  (``<namespace>/<Kind>/<name>``). The host is the series' own (the ``Hostname`` label
  is the exporter's, which need not be the node name), so it is not required to match.
- ``hpc_job label``: a placement without indices whose ``job_id`` equals a series'
  ``hpc_job`` label (dcgm-exporter's HPC job mapping: one file per GPU index naming the
  jobs on it; same ``const.go``, ``hpcJobAttribute = "hpc_job"``), on the placement's
  host when it names one.
- A label match holds ``gpu_count / devices matched`` of each device (at most 1): a pod
  on one MIG slice ``nvidia.com/mig-1g.10gb`` (``gpu_count`` 1/7) holds 1/7 of that
  series' GPU-hours, a pod on two whole GPUs all of each.
- ``host (whole node)``: a placement without indices and without ``hpc_job`` series
  (``sacct`` prints no GPU index) that holds at least as many GPUs as its host's
  telemetry shows holds them all (exclusive nodes). A job on part of a sampled node
  without indices or labels cannot be matched to a GPU: ``held_unknown`` (idle GPUs
  lists its GPU-hours as unmeasured, ``host (GPUs unknown)``).

The windows of one job attempt on one GPU are merged (earliest start, latest end): a
``sacct`` export without ``-X`` lists the job and each step on the same GPUs.

A window without an end (a job still running) ends at the job's ``as_of_time``, else at
the device's last sample. Relative-time samples (files without timestamps ingested
without ``--start`` / ``--time``: times since their first sample, from 1970-01-01) are
never joined to jobs: :data:`ABSOLUTE_SINCE`.
"""

from __future__ import annotations

import datetime as dt
import warnings
from typing import TYPE_CHECKING

from gpu_trace.errors import InputWarning

if TYPE_CHECKING:  # DuckDB itself is loaded by whoever opens the connection
    import duckdb

ABSOLUTE_SINCE = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
"""Samples before this instant are relative time. The loaders put a file without
timestamps at 1970-01-01 + its elapsed time (``time_basis = relative``); no NVML or
DCGM reading predates 2007, and a relative capture would have to run 30 years to cross
2000, so the instant separates the two bases exactly for every real capture."""

ABSOLUTE_SQL = "TIMESTAMPTZ '2000-01-01 00:00:00+00'"
""":data:`ABSOLUTE_SINCE` as a DuckDB literal."""

HELD_SQL = f"""
held_index AS (
    SELECT p.source, p.cluster, p.job_id, p.attempt, p.machine_id AS host,
           unnest(p.gpu_indices) AS gpu_index, '' AS mig,
           p.start_time AS t_start, p.end_time AS t_end,
           CASE WHEN p.gpu_count IS NULL OR len(p.gpu_indices) = 0 THEN 1.0
                ELSE least(1.0, p.gpu_count / len(p.gpu_indices)) END AS share,
           'gpu index' AS matched_by
    FROM placements p
    WHERE p.start_time IS NOT NULL AND p.machine_id IS NOT NULL
      AND p.gpu_indices IS NOT NULL AND len(p.gpu_indices) > 0
), labelled AS (
    SELECT host, gpu_index, coalesce(mig_instance, '') AS mig, namespace, pod,
           job_id AS hpc_job, min(time) AS first_t, max(time) AS last_t
    FROM gpu_samples
    WHERE (pod IS NOT NULL OR job_id IS NOT NULL) AND gpu_index IS NOT NULL
      AND time >= {ABSOLUTE_SQL}
    GROUP BY ALL
), unindexed AS (
    SELECT * FROM placements p
    WHERE p.start_time IS NOT NULL AND (p.gpu_indices IS NULL OR len(p.gpu_indices) = 0)
), pod_dev AS (
    SELECT DISTINCT p.source, p.cluster, p.job_id, p.attempt, p.instance, p.gpu_count,
           l.host, l.gpu_index, l.mig, p.start_time AS t_start, p.end_time AS t_end
    FROM unindexed p JOIN labelled l
      ON l.pod = p.instance AND l.namespace = split_part(p.job_id, '/', 1)
     AND l.last_t >= p.start_time AND (p.end_time IS NULL OR l.first_t < p.end_time)
), held_pod AS (
    SELECT source, cluster, job_id, attempt, host, gpu_index, mig, t_start, t_end,
           least(1.0, coalesce(nullif(gpu_count, 0), 1.0) / count(*) OVER (
               PARTITION BY source, cluster, job_id, attempt, instance, t_start)) AS share,
           'pod label' AS matched_by
    FROM pod_dev
), hpc_dev AS (
    SELECT DISTINCT p.source, p.cluster, p.job_id, p.attempt, p.machine_id, p.gpu_count,
           l.host, l.gpu_index, l.mig, p.start_time AS t_start, p.end_time AS t_end
    FROM unindexed p JOIN labelled l
      ON l.hpc_job = p.job_id AND (p.machine_id IS NULL OR l.host = p.machine_id)
     AND l.last_t >= p.start_time AND (p.end_time IS NULL OR l.first_t < p.end_time)
), held_hpc AS (
    SELECT source, cluster, job_id, attempt, host, gpu_index, mig, t_start, t_end,
           least(1.0, coalesce(nullif(gpu_count, 0), 1.0) / count(*) OVER (
               PARTITION BY source, cluster, job_id, attempt, machine_id, t_start)) AS share,
           'hpc_job label' AS matched_by
    FROM hpc_dev
), labelled_jobs AS (
    SELECT DISTINCT source, job_id, attempt FROM held_pod
    UNION SELECT DISTINCT source, job_id, attempt FROM held_hpc
), host_devices AS (
    SELECT DISTINCT host, gpu_index FROM gpu_samples
    WHERE gpu_index IS NOT NULL AND mig_instance IS NULL AND time >= {ABSOLUTE_SQL}
), host_size AS (
    SELECT host, count(*) AS n FROM host_devices GROUP BY host
), held_node AS (
    SELECT p.source, p.cluster, p.job_id, p.attempt, d.host, d.gpu_index, '' AS mig,
           p.start_time AS t_start, p.end_time AS t_end, 1.0 AS share,
           'host (whole node)' AS matched_by
    FROM unindexed p
    JOIN host_size s ON s.host = p.machine_id
    JOIN host_devices d ON d.host = p.machine_id
    WHERE p.gpu_count > 0 AND p.gpu_count >= s.n
      AND NOT EXISTS (SELECT 1 FROM labelled_jobs x WHERE x.source = p.source
                      AND x.job_id = p.job_id AND x.attempt = p.attempt)
), held_any AS (
    SELECT * FROM held_index
    UNION ALL SELECT * FROM held_pod
    UNION ALL SELECT * FROM held_hpc
    UNION ALL SELECT * FROM held_node
), held_all AS (
    SELECT source, cluster, job_id, attempt, host, gpu_index, mig, matched_by,
           min(t_start) AS t_start,
           CASE WHEN bool_or(t_end IS NULL) THEN NULL ELSE max(t_end) END AS t_end,
           max(share) AS share
    FROM held_any GROUP BY ALL
), held_unknown AS (
    SELECT p.source, p.cluster, p.job_id, p.attempt, p.machine_id AS host,
           CAST(NULL AS SMALLINT) AS gpu_index, '' AS mig,
           'host (GPUs unknown)' AS matched_by, min(p.start_time) AS t_start,
           CASE WHEN bool_or(p.end_time IS NULL) THEN NULL ELSE max(p.end_time) END AS t_end,
           max(p.gpu_count) AS share
    FROM unindexed p JOIN host_size s ON s.host = p.machine_id
    WHERE p.gpu_count > 0 AND p.gpu_count < s.n
      AND NOT EXISTS (SELECT 1 FROM labelled_jobs x WHERE x.source = p.source
                      AND x.job_id = p.job_id AND x.attempt = p.attempt)
    GROUP BY ALL
)"""
"""CTEs (after a ``WITH``) ending in ``held_all``: one row per held window, ``t_end``
null while the job runs; and ``held_unknown``: one row per job attempt and host whose
GPUs cannot be told (part of a sampled node, no index, no label), ``share`` = its GPU
count, so :mod:`gpu_trace.analyses.idle` can show those GPU-hours as unmeasured rather
than drop them. Needs views ``placements`` and ``gpu_samples``."""


def relative_hosts(con: duckdb.DuckDBPyConnection) -> list[tuple[str, int]]:
    """(host, relative-time sample rows) of every host with relative-time samples."""
    rows = con.execute(
        f"SELECT host, count(*) FROM gpu_samples WHERE time < {ABSOLUTE_SQL} "
        "GROUP BY host ORDER BY host"
    ).fetchall()
    return [(str(h), int(n)) for h, n in rows]


def warn_relative(con: duckdb.DuckDBPyConnection, what: str) -> None:
    """One ``warning:`` line when relative-time samples are kept apart from jobs and
    absolute series, naming the hosts and how to align them.
    """
    found = relative_hosts(con)
    if not found:
        return
    hosts = ", ".join(h for h, _ in found[:5]) + (" ..." if len(found) > 5 else "")
    rows = sum(n for _, n in found)
    warnings.warn(
        InputWarning(
            f"{rows:,} gpu_samples rows on {hosts} have relative times (files without "
            f"timestamps): {what}; re-ingest them with --start (or --time) to align them"
        ),
        stacklevel=2,
    )
