"""Trace interchange with other simulators, so a replay can be cross-checked.

- **Tiresias / Chronus CSV** (``job_id,num_gpu,submit_time,iterations,model_name,
  duration,interval`` and Chronus' extra ``user,expect_time_list,expect_value_list,
  best_effort,job_type``): seconds from 0. Chronus' ``user`` is a Philly VC.
- **Gavel ``.trace``**: tab-separated, no header; old 7-field layout ``job_type, command,
  num_steps_arg, needs_data_dir, total_steps, arrival_time, scale_factor`` or the new 10
  fields (adds ``working_directory, priority_weight, SLO``). Gavel measures work in
  *steps*; a step's duration depends on Gavel's throughput tables, so importing needs
  ``step_s`` (seconds per step) to give ``run_s`` (without it ``run_s`` is null and the
  replay skips and counts the jobs). Exports write 1 step per second.
- **openb pod list** (Kubernetes scheduler simulator input): the 11-column CSV; imported
  with the openb loader itself.
- **PAI 2020 simulator CSV** (``job_id,user,num_gpu,num_cpu,num_inst,submit_time,
  duration,gpu_type``; read by name, as the simulator's ``csv.DictReader`` does): imported
  with the ``paisim`` loader (:mod:`gpu_trace.loaders.paisim`). Export writes one
  instance per job (``num_inst`` 1: the simulator's resource request is the job's
  total) and the job's GPUs and cores.

Imported frames are canonical ``jobs`` rows with relative time (``time_basis =
relative``: 1970-01-01T00:00:00Z + offset).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from gpu_trace.errors import GpuTraceError, InputError
from gpu_trace.formats import CHRONUS, GAVEL7, GAVEL10, TIRESIAS
from gpu_trace.loaders.openb import POD_COLUMNS
from gpu_trace.replay.workload import arrival_order


def _rel(seconds: pl.Expr) -> pl.Expr:
    return pl.from_epoch(
        (seconds * 1_000_000).round().cast(pl.Int64), time_unit="us"
    ).dt.replace_time_zone("UTC")


def _canonical(frame: pl.DataFrame, source: str, dataset: str) -> pl.DataFrame:
    return frame.with_columns(
        pl.lit(source).alias("source"),
        pl.lit(dataset).alias("dataset"),
        pl.lit(source).alias("cluster"),
        pl.lit("unknown").alias("status"),
        pl.lit("relative").alias("time_basis"),
        pl.lit("gpu").alias("gpus_raw_unit"),
        pl.col("gpus").alias("gpus_raw"),
    )


def read_chronus(path: Path, dataset: str = "chronus") -> pl.DataFrame:
    """A Tiresias or Chronus job CSV as canonical jobs rows (source ``chronus``)."""
    df = pl.read_csv(path, infer_schema_length=0)
    cols = tuple(df.columns)
    if cols[: len(TIRESIAS)] != TIRESIAS and cols != CHRONUS:
        raise InputError(
            path, f"header {','.join(cols)!r} is neither Tiresias nor Chronus", "line 1"
        )
    try:
        out = df.select(
            pl.col("job_id").alias("job_id"),
            (pl.col("user") if "user" in cols else pl.lit(None, pl.String)).alias("vc"),
            pl.col("model_name").alias("name"),
            _rel(pl.col("submit_time").cast(pl.Float64)).alias("submit_time"),
            pl.col("duration").cast(pl.Float64).alias("run_s"),
            pl.col("num_gpu").cast(pl.Float64).alias("gpus"),
        )
    except pl.exceptions.InvalidOperationError as exc:
        raise InputError(path, f"non-numeric value: {exc}".splitlines()[0]) from None
    return _canonical(out, "chronus", dataset)


def read_gavel(path: Path, dataset: str = "gavel", step_s: float | None = None) -> pl.DataFrame:
    """A Gavel ``.trace`` (7 or 10 fields) as canonical jobs rows (source ``gavel``)."""
    df = pl.read_csv(path, separator="\t", has_header=False, quote_char=None, infer_schema_length=0)
    if df.width == 7:
        df.columns = list(GAVEL7)
    elif df.width == 10:
        df.columns = list(GAVEL10)
    else:
        raise InputError(path, f"{df.width} tab-separated fields; Gavel traces have 7 or 10")
    steps = pl.col("total_steps").cast(pl.Float64)
    out = df.select(
        pl.int_range(pl.len()).cast(pl.String).alias("job_id"),
        pl.col("job_type").alias("name"),
        _rel(pl.col("arrival_time").cast(pl.Float64)).alias("submit_time"),
        (steps * step_s if step_s is not None else pl.lit(None, pl.Float64)).alias("run_s"),
        pl.col("scale_factor").cast(pl.Float64).alias("gpus"),
    )
    return _canonical(out, "gavel", dataset)


def export_skipped(jobs: pl.DataFrame) -> dict[str, int]:
    """{reason: jobs} that :func:`export` leaves out (every format needs a submit time
    and a run time; openb pods still Pending have no run time).
    """
    reason = (
        pl.when(pl.col("submit_time").is_null())
        .then(pl.lit("no submit_time"))
        .when(pl.col("run_s").is_null())
        .then(pl.lit("no run_s (never started or end unknown)"))
    )
    counts = (
        jobs.select(reason.alias("reason")).drop_nulls().group_by("reason").len().sort("reason")
    )
    return {str(r): int(n) for r, n in counts.iter_rows()}


STATUS_PHASE = {
    "completed": "Succeeded",
    "failed": "Failed",
    "oom": "Failed",
    "running": "Running",
}
"""Canonical status -> Kubernetes pod phase, for sources whose raw status is not one."""
PHASES = ("Succeeded", "Failed", "Running", "Pending")


def _openb_values(df: pl.DataFrame) -> pl.DataFrame:
    """cpu_milli, memory_mib, pod_phase, qos from the jobs row: openb rows keep their
    raw pod phase; others map the canonical status (unknown -> Succeeded, the job ran).
    """
    have = df.columns

    def col(name: str, dtype: pl.DataType) -> pl.Expr:
        return pl.col(name) if name in have else pl.lit(None, dtype)

    raw = col("raw_status", pl.String())
    phase = (
        pl.when(raw.is_in(PHASES))
        .then(raw)
        .otherwise(col("status", pl.String()).replace_strict(STATUS_PHASE, default="Succeeded"))
    )
    return df.with_columns(
        (col("cpus", pl.Float64()) * 1000).round(0).cast(pl.Int64).fill_null(0).alias("cpu_milli"),
        (col("mem_bytes", pl.Float64()) / 2**20)
        .round(0)
        .cast(pl.Int64)
        .fill_null(0)
        .alias("memory_mib"),
        phase.alias("pod_phase"),
        col("qos", pl.String()).fill_null("LS").alias("qos"),
    )


def _offsets(jobs: pl.DataFrame) -> pl.DataFrame:
    first = jobs["submit_time"].min()
    return (
        jobs.filter(pl.col("submit_time").is_not_null() & pl.col("run_s").is_not_null())
        .with_columns(
            ((pl.col("submit_time") - pl.lit(first)).dt.total_microseconds() / 1e6).alias("_t")
        )
        .pipe(arrival_order)
    )


def export(jobs: pl.DataFrame, fmt: str, output: Path) -> int:
    """Write ``jobs`` in ``fmt`` (tiresias, chronus, gavel, gavel10, openb, paisim); returns rows.
    Jobs without submit time or run time cannot be expressed and are left out
    (:func:`export_skipped` counts them by reason).
    """
    df = _offsets(jobs)
    output.parent.mkdir(parents=True, exist_ok=True)
    if fmt in {"tiresias", "chronus"}:
        out = df.select(
            pl.col("job_id"),
            pl.col("vc").fill_null("").alias("user"),
            pl.col("gpus").ceil().cast(pl.Int64).alias("num_gpu"),
            pl.col("_t").round(0).cast(pl.Int64).alias("submit_time"),
            pl.col("run_s").round(0).cast(pl.Int64).alias("iterations"),
            pl.col("name").fill_null("job").alias("model_name"),
            pl.col("run_s").round(0).cast(pl.Int64).alias("duration"),
            (pl.col("_t").shift(-1) - pl.col("_t"))
            .fill_null(0)
            .round(0)
            .cast(pl.Int64)
            .alias("interval"),
            pl.col("run_s").round(0).cast(pl.Int64).alias("expect_time_list"),
            pl.lit(10).alias("expect_value_list"),
            pl.lit(0).alias("best_effort"),
            pl.lit("strict").alias("job_type"),
        )
        out = out.select(TIRESIAS if fmt == "tiresias" else CHRONUS)
        out.write_csv(output)
        return out.height
    if fmt in {"gavel", "gavel10"}:
        out = df.select(
            pl.col("name").fill_null("job").str.replace_all("\t", " ").alias("job_type"),
            pl.lit("").alias("command"),
            pl.lit("-n").alias("num_steps_arg"),
            pl.lit(1).alias("needs_data_dir"),
            pl.col("run_s").round(0).cast(pl.Int64).alias("total_steps"),
            pl.col("_t").round(6).alias("arrival_time"),
            pl.col("gpus").ceil().cast(pl.Int64).alias("scale_factor"),
            pl.lit("").alias("working_directory"),
            pl.lit(1).alias("priority_weight"),
            pl.lit(-1).alias("SLO"),
        )
        out = out.select(GAVEL7 if fmt == "gavel" else GAVEL10)
        out.write_csv(output, separator="\t", include_header=False, quote_style="never")
        return out.height
    if fmt == "paisim":
        out = df.select(
            pl.col("job_id"),
            pl.col("user").fill_null(""),
            pl.col("gpus").fill_null(0).alias("num_gpu"),
            (pl.col("cpus") if "cpus" in df.columns else pl.lit(None, pl.Float64))
            .fill_null(0)
            .alias("num_cpu"),
            pl.lit(1).alias("num_inst"),
            pl.col("_t").round(0).cast(pl.Int64).alias("submit_time"),
            pl.col("run_s").alias("duration"),
            (pl.col("gpu_type") if "gpu_type" in df.columns else pl.lit(None, pl.String))
            .fill_null("")
            .alias("gpu_type"),
        )
        out.write_csv(output)
        return out.height
    if fmt == "openb":
        milli = (pl.col("gpus") * 1000).round(0).cast(pl.Int64)
        out = (
            _openb_values(df)
            .select(
                pl.col("job_id").alias("name"),
                pl.col("cpu_milli"),
                pl.col("memory_mib"),
                pl.col("gpus").ceil().cast(pl.Int64).alias("num_gpu"),
                pl.when(pl.col("gpus") < 1).then(milli).otherwise(1000).alias("gpu_milli"),
                pl.col("gpu_type").fill_null("").alias("gpu_spec"),
                pl.col("qos"),
                pl.col("pod_phase"),
                pl.col("_t").round(0).cast(pl.Int64).alias("creation_time"),
                (pl.col("_t") + pl.col("run_s")).round(0).cast(pl.Int64).alias("deletion_time"),
                pl.col("_t").round(0).cast(pl.Int64).alias("scheduled_time"),
            )
            .select(POD_COLUMNS)
        )
        out.write_csv(output)
        return out.height
    msg = f"unknown export format {fmt!r}: tiresias, chronus, gavel, gavel10, openb, paisim"
    raise GpuTraceError(msg)


def read_openb(path: Path, dataset: str = "default") -> pl.DataFrame:
    """An openb pod list via the openb loader (the same parsing as ingest)."""
    from gpu_trace.loaders.openb import pods

    return pods(path, dataset).rows.lazy().collect()
