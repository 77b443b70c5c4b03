"""Human column headers for the report's tables.

A header is a short label (``median run time, GPU jobs``); the cell's ``title`` (a
tooltip) carries the raw column name and its documented meaning, so a reader can go from
the page to ``gpu-trace schema`` / ``docs/metrics.md`` and to SQL. Labels come from, in
order: the analysis outputs named here (one place, next to the glossary in
``gpu_trace.analyses.definitions``), then the glossaries of declared analysis plugins
(``AnalysisPlugin.glossary``); the canonical schema's column descriptions; a
token rule (``med`` -> median, ``gpu`` -> GPU, unit suffixes dropped since the values
are shown with their unit).
"""

from __future__ import annotations

from functools import cache

from gpu_trace.schemas import TABLES

ANALYSIS_COLUMNS: dict[str, tuple[str, str]] = {
    "jobs": ("jobs", "jobs (openb: pods) in the group"),
    "cpu_jobs": ("CPU jobs", "jobs with gpus = 0"),
    "gpu_jobs": ("GPU jobs", "jobs with gpus > 0 (fractional shares count)"),
    "gpu_job_share": ("GPU jobs (share)", "GPU jobs / all jobs"),
    "med_run_s_gpu": ("median run time, GPU jobs", "median of run_s over GPU jobs"),
    "avg_run_s_gpu": ("mean run time, GPU jobs", "mean of run_s over GPU jobs"),
    "med_queue_s_gpu": ("median queueing, GPU jobs", "median of queue_s over GPU jobs"),
    "avg_queue_s_gpu": ("mean queueing, GPU jobs", "mean of queue_s over GPU jobs"),
    "avg_gpus": ("mean GPUs per GPU job", "mean of gpus over GPU jobs"),
    "max_gpus": ("largest GPU job (GPUs)", "max of gpus over GPU jobs"),
    "unfinished_jobs": ("unfinished jobs", "running, pending or unknown at the trace's end"),
    "gpu_hours": ("GPU hours", "sum of gpus x run_s / 3600 over GPU jobs"),
    "completed_gpu_job_share": ("completed", "completed GPU jobs / all GPU jobs"),
    "cancelled_gpu_job_share": ("cancelled", "cancelled GPU jobs / all GPU jobs"),
    "failed_gpu_job_share": (
        "failed",
        "failed, out-of-memory, timed-out or node-failed GPU jobs / all GPU jobs",
    ),
    "preempted_gpu_job_share": (
        "preempted",
        "GPU jobs stopped by the scheduler for other work / all GPU jobs: not user failures",
    ),
    "unfinished_gpu_job_share": (
        "unfinished (running, pending, unknown)",
        "GPU jobs without a final status / all GPU jobs: not failures",
    ),
    "completed_gpu_hours_share": ("GPU time completed", "share of all GPU time"),
    "cancelled_gpu_hours_share": ("GPU time cancelled", "share of all GPU time"),
    "failed_gpu_hours_share": ("GPU time failed", "share of all GPU time"),
    "preempted_gpu_hours_share": ("GPU time preempted", "share of all GPU time"),
    "unfinished_gpu_hours_share": ("GPU time unfinished", "share of all GPU time"),
    "size_bucket": ("GPUs requested", "job-size bucket (Helios buckets; <1 = shared GPU)"),
    "mean_s": ("mean", "mean queueing delay"),
    "median_s": ("median", "median queueing delay"),
    "p90_s": ("90th percentile", "90th percentile queueing delay"),
    "p99_s": ("99th percentile", "99th percentile queueing delay"),
    "max_s": ("longest", "longest queueing delay"),
    "zero_wait_share": ("started at once", "share of jobs with queue_s = 0"),
    "mean_allocation_pct": ("mean allocation (%)", "time-weighted GPUs held / installed"),
    "median_allocation_pct": ("median allocation (%)", "median over bins of allocation_pct"),
    "peak_allocated_gpus": ("peak GPUs held", "most GPUs held by running jobs in one bin"),
    "capacity_gpus": ("GPUs installed", "largest installed GPU count in the window"),
    "min_capacity_gpus": ("fewest GPUs installed", "smallest cluster GPU total of any period"),
    "max_capacity_gpus": ("most GPUs installed", "largest cluster GPU total of any period"),
    "failed_gpu_hours": ("GPU hours failed", "GPU time of jobs that ended failed"),
    "cancelled_gpu_hours": ("GPU hours cancelled", "GPU time of jobs that ended cancelled"),
    "preempted_gpu_hours": ("GPU hours preempted", "GPU time of jobs that ended preempted"),
    "lost_share": ("lost (share)", "(failed + cancelled + preempted GPU hours) / GPU hours"),
    "lost_gpu_hours": ("GPU hours lost", "GPU time of failed, cancelled and preempted jobs"),
    "share_of_gpu_hours": ("share of all GPU hours", "lost GPU hours / all GPU hours"),
    "job_share": ("share of jobs", "jobs / jobs in the group"),
    "gpu_share": ("share of GPUs", "GPUs requested / GPUs requested in the group"),
    "gpu_time_share": ("share of GPU time", "GPU time / GPU time in the group"),
    "rows_read": ("rows read", "independent count of the input's records"),
    "rows_written": ("rows written", "rows in the written Parquet file (footer)"),
    "rows_quarantined": ("rows quarantined", "rows that could not be normalized"),
    "file_bytes": ("file size", "size of the input file"),
    "file_sha256": ("sha256", "checksum of the input file"),
    "gpu_trace_version": ("gpu-trace version", "version that ingested the file"),
    "fragmented_gpus": ("fragmented GPUs", "expected free GPUs no task of the mix can use"),
    "fragmented_pct": ("fragmented (%)", "fragmented GPUs / free GPUs"),
    "free_gpus": ("free GPUs", "GPUs free on the empty cluster"),
}

_TOKENS = {
    "med": "median",
    "avg": "mean",
    "gpu": "GPU",
    "gpus": "GPUs",
    "cpu": "CPU",
    "cpus": "CPUs",
    "vc": "VC",
    "kwh": "kWh",
    "mtbf": "MTBF",
    "jct": "JCT",
    "id": "ID",
    "xid": "XID",
    "ecc": "ECC",
    "qos": "QoS",
    "h": "hours",
    "pct": "(%)",
    "w": "(W)",
    "mib": "",
    "bytes": "",
    "s": "",
    "1k": "1,000",
}


@cache
def _plugin_columns() -> dict[str, tuple[str, str]]:
    """Columns named by the declared analyses' glossaries (:mod:`gpu_trace.plugins`)."""
    from gpu_trace import plugins

    out: dict[str, tuple[str, str]] = {}
    for plugin in plugins.analyses():
        out.update(plugin.glossary)
    return out


@cache
def _schema_columns() -> dict[str, str]:
    out: dict[str, str] = {}
    for table in TABLES.values():
        for col in table.columns:
            out.setdefault(col.name, col.description)
    return out


def _from_tokens(name: str) -> str:
    words = [_TOKENS.get(t, t) for t in name.split("_")]
    return " ".join(w for w in words if w).strip() or name


def header(name: str) -> tuple[str, str]:
    """(label, tooltip) for a result column."""
    if name in ANALYSIS_COLUMNS:
        label, meaning = ANALYSIS_COLUMNS[name]
    elif name in _plugin_columns():
        label, meaning = _plugin_columns()[name]
    else:
        label, meaning = _from_tokens(name), _schema_columns().get(name, "")
    tip = f"{name}: {meaning}" if meaning else name
    return label, tip
