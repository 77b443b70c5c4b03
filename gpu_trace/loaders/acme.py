"""Shanghai AI Laboratory AcmeTrace (InternLM/AcmeTrace, Hu et al., NSDI'24): the Seren
and Kalos LLM-development clusters.

``gpu-trace ingest acme PATH`` where PATH is

- a job trace (``trace_seren.csv``, ``trace_kalos.csv``) -> ``jobs``
  (:mod:`gpu_trace.loaders.acme_jobs`);
- a utilization CSV (``GPU_UTIL.csv``, ``NODE_CPU_UTILIZATION.csv``, ...) ->
  ``gpu_samples`` / ``host_samples`` / ``events`` (:mod:`gpu_trace.loaders.acme_util`);
- a folder holding either, at any depth up to four (the release's ``data/`` with
  ``job_trace/`` and ``utilization/<cluster>/``, or one ``utilization/seren``).

A file is told apart by its header: ``job_id,...`` is a job trace, ``Time,...`` a
utilization file whose metric is its file name. In a folder, job traces are the
``trace_<cluster>.csv`` files; any other CSV there (the release's
``trace_previous_work/`` copies of older traces, the IPMI power tables, the InfiniBand
files whose unit is undocumented) is skipped with a warning naming it, never silently.

``cluster`` and ``dataset``: a job trace's cluster is the ``<cluster>`` of its name
(``seren``), else ``--cluster``, else the file stem; its dataset is the cluster. A
utilization file's cluster is ``--cluster`` or its folder's name (``seren``), and its
dataset is ``<cluster>-<file stem>`` (``seren-gpu_util``).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpu_trace.errors import InputError, InputWarning
from gpu_trace.loaders.acme_common import DEFAULT_TZ, SOURCE
from gpu_trace.loaders.acme_jobs import JobFile, job_batch
from gpu_trace.loaders.acme_util import METRICS, NOT_READ, UtilFile, metric_of, util_batches
from gpu_trace.loaders.base import Batch
from gpu_trace.loaders.textfile import read_header
from gpu_trace.loaders.zones import parse_tz
from gpu_trace.plugins import LoaderPlugin, option
from gpu_trace.store.parquet import slug

_TRACE = re.compile(r"^trace_(?P<cluster>[A-Za-z0-9_.-]+)\.csv$")
MAX_DEPTH = 4


def _first_column(path: Path) -> str:
    return read_header(path).split(",")[0].strip()


def _job(path: Path, cluster: str | None) -> JobFile:
    m = _TRACE.match(path.name)
    name = cluster or (m["cluster"] if m else path.stem)
    return JobFile(path, slug(name))


def _util(path: Path, cluster: str | None) -> UtilFile | str:
    """The utilization file at ``path``, or why it is not one gpu-trace reads."""
    found = metric_of(path)
    if found is None:
        return "its name is not an AcmeTrace metric name (GPU_UTIL.csv, ...)"
    name, _part = found
    if name in NOT_READ:
        return NOT_READ[name]
    if name not in METRICS:
        return f"{name} is not a utilization metric gpu-trace maps ({', '.join(METRICS)})"
    where = slug(cluster or path.resolve().parent.name)
    return UtilFile(path, where, name, slug(f"{where}-{path.stem}"))


def classify(path: Path, cluster: str | None) -> JobFile | UtilFile | str:
    """What one CSV is, or why it is not an AcmeTrace input."""
    first = _first_column(path)
    if first == "job_id":
        return _job(path, cluster)
    if first == "Time":
        return _util(path, cluster)
    return f"header starts with {first[:40]!r}, not job_id (job trace) or Time (utilization)"


def _walk(folder: Path, depth: int = 0) -> Iterator[Path]:
    for p in sorted(folder.iterdir()):
        if p.name.startswith("."):
            continue
        if p.is_dir() and depth < MAX_DEPTH:
            yield from _walk(p, depth + 1)
        elif p.is_file() and p.suffix.lower() == ".csv":
            yield p


def discover(path: Path, cluster: str | None) -> list[JobFile | UtilFile]:
    """Every AcmeTrace input at ``path`` (a file must be one; a folder's other CSVs are
    skipped with a warning each).
    """
    if path.is_file():
        what = classify(path, cluster)
        if isinstance(what, str):
            raise InputError(path, f"not an AcmeTrace input: {what}", "line 1")
        return [what]
    found: list[JobFile | UtilFile] = []
    for f in _walk(path):
        what = classify(f, cluster) if f.stat().st_size else "file is empty"
        if isinstance(what, JobFile) and not _TRACE.match(f.name):
            what = "a job table not named trace_<cluster>.csv (older traces in the release)"
        if isinstance(what, str):
            warnings.warn(InputWarning(f"{f}: skipped: {what}"), stacklevel=2)
            continue
        found.append(what)
    if not found:
        raise InputError(
            path,
            "no AcmeTrace input here (expected trace_<cluster>.csv or <METRIC>.csv "
            "utilization files such as GPU_UTIL.csv)",
        )
    return found


class AcmeLoader:
    """Loader for AcmeTrace job traces and utilization CSVs."""

    name = SOURCE
    version = "1"

    def batches(
        self, path: Path, *, cluster: str | None = None, tz: str = DEFAULT_TZ, **_: Any
    ) -> Iterator[Batch]:
        """Yield a ``jobs`` batch per job trace and the sample / event batches of each
        utilization file; times without an offset are read in ``tz``.
        """
        tz = parse_tz(tz)
        for f in discover(path, cluster):
            if isinstance(f, JobFile):
                yield job_batch(f, tz)
            else:
                yield from util_batches(f, tz)


@dataclass(frozen=True)
class AcmeOptions:
    """`gpu-trace ingest acme` options (passed to the loader as keyword arguments)."""

    cluster: str | None = option(
        None,
        "Cluster name (default: seren/kalos from trace_<cluster>.csv, or the utilization file's folder name).",
    )
    tz: str = option(
        "Asia/Shanghai",
        "IANA zone for times written without a UTC offset (the release writes offsets: +08:00 Seren, +00:00 Kalos). Recorded in source_tz.",
        parse=parse_tz,
    )


PLUGIN = LoaderPlugin(
    name="acme",
    loader=AcmeLoader,
    help="Shanghai AI Lab AcmeTrace (Seren, Kalos): trace_<cluster>.csv -> jobs; utilization CSVs (Time + one column per node or GPU) -> gpu_samples, host_samples, events (XID).\n\nPATH: a job trace, a utilization CSV, or a folder holding them (the release's data/, utilization/seren, ...).",
    options=AcmeOptions,
)
