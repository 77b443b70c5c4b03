"""Other simulators' trace formats as ingestible sources, so a trace prepared for
Tiresias/Chronus or Gavel can be analysed and replayed here and results cross-checked.

- ``chronus``: Tiresias ``job_id,num_gpu,submit_time,iterations,model_name,duration,
  interval`` CSVs and the Chronus superset (``user`` is the Philly VC there);
  ``submit_time`` and ``duration`` are seconds from the trace start.
- ``gavel``: Gavel ``.trace`` files, tab-separated without header, 7 fields (old layout)
  or 10 (adds working_directory, priority_weight, SLO). Gavel counts work in steps, so
  ``run_s = total_steps x --step-s``; without ``--step-s`` run times are unknown (null)
  and the jobs can be analysed but not replayed.

Rows with a numeric field that is not finite or is negative (counts, times, durations,
iterations, steps), or an arrival at or after ``units.TIME_MAX_S``, are quarantined.
Both have relative times (``time_basis = relative``, stored from 1970-01-01 UTC) and no
final status (``unknown``). Export is in :mod:`gpu_trace.replay.interchange`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from gpu_trace.errors import GpuTraceError, InputError, UsageError
from gpu_trace.formats import CHRONUS, GAVEL7, GAVEL10, TIRESIAS
from gpu_trace.loaders.base import Batch
from gpu_trace.loaders.textfile import (
    REASON,
    FieldSpec,
    file_info,
    parse_fields,
    quarantine_rows,
    read_header,
    scan_lines,
)
from gpu_trace.loaders.units import TIME_MAX_S
from gpu_trace.plugins import LoaderPlugin, option
from gpu_trace.store.parquet import slug
from gpu_trace.values import check_number

NUMERIC = {
    "num_gpu",
    "submit_time",
    "iterations",
    "duration",
    "interval",
    "arrival_time",
    "scale_factor",
    "total_steps",
}
REQUIRED = {"job_id", "num_gpu", "submit_time", "arrival_time", "scale_factor"}


def _specs(names: tuple[str, ...]) -> tuple[FieldSpec, ...]:
    return tuple(
        FieldSpec(n, "float" if n in NUMERIC else "str", required=n in REQUIRED) for n in names
    )


def offset_time(col: str) -> pl.Expr:
    """Seconds since the trace's start (column ``col``) as a UTC timestamp from 1970-01-01
    (the interchange formats carry relative times only: ``time_basis`` relative).
    """
    return pl.from_epoch(
        (pl.col(col) * 1_000_000).round().cast(pl.Int64, strict=False), time_unit="us"
    ).dt.replace_time_zone("UTC")


def canonical_jobs(
    good: pl.LazyFrame, source: str, dataset: str, exprs: list[pl.Expr]
) -> pl.LazyFrame:
    """The canonical ``jobs`` columns of one interchange file's good rows: the source and
    dataset labels, then the format's own expressions ``exprs``.
    """
    return good.select(
        pl.lit(source).alias("source"),
        pl.lit(dataset).alias("dataset"),
        pl.lit(source).alias("cluster"),
        *exprs,
        pl.lit(1).alias("attempts"),
        pl.lit("unknown").alias("status"),
        pl.lit("relative").alias("time_basis"),
        pl.lit("gpu").alias("gpus_raw_unit"),
    )


def jobs_batch(
    source: str,
    dataset: str,
    file: Any,
    info: Any,
    parsed: pl.LazyFrame,
    rows: pl.LazyFrame,
    metadata: dict[str, str],
) -> Batch:
    """The ``jobs`` batch of one job file of another simulator's format: its canonical
    rows, and the lines that failed a check (a ``REASON``) as quarantine rows; the
    cluster is named after the format (these files name none).
    """
    bad = quarantine_rows(
        parsed.filter(pl.col(REASON).is_not_null()),
        source=source,
        dataset=dataset,
        cluster=source,
        table="jobs",
        file=file,
    )
    return Batch("jobs", dataset, info, rows, bad, cluster=source, metadata=metadata)


def _checked(parsed: pl.LazyFrame, names: tuple[str, ...], time_col: str) -> pl.LazyFrame:
    """Quarantine rows whose numbers no trace can hold: every numeric field (counts,
    times, durations, iterations / steps) must be finite and not negative, and the
    arrival time below ``TIME_MAX_S`` (so it converts to a timestamp; ``1e300`` or
    ``9223372036854775808`` would overflow).
    """
    checks: list[pl.Expr] = [pl.col(REASON)]
    for n in (n for n in names if n in NUMERIC):
        c = pl.col(n)
        checks.append(pl.when(~c.is_finite()).then(pl.format(f"{n} {{}} is not finite", c)))
        checks.append(pl.when(c < 0).then(pl.format(f"{n} {{}} is negative", c)))
    checks.append(
        pl.when(pl.col(time_col) >= TIME_MAX_S).then(
            pl.format(
                f"{time_col} {{}} is a time out of range (>= {TIME_MAX_S:.0f} s)", pl.col(time_col)
            )
        )
    )
    return parsed.with_columns(pl.coalesce(checks).alias(REASON))


class ChronusLoader:
    """Tiresias / Chronus job CSVs (one file, or every ``*.csv`` in a folder)."""

    name = "chronus"
    version = "1"

    def batches(self, path: Path, **_: Any) -> Iterator[Batch]:
        """Yield one ``jobs`` batch per Tiresias / Chronus CSV (a file, or every ``*.csv``
        in a folder).
        """
        for f in [path] if path.is_file() else sorted(path.glob("*.csv")):
            header = tuple(h.strip() for h in read_header(f).split(","))
            if header not in (TIRESIAS, CHRONUS):
                raise InputError(
                    f, f"header {','.join(header)!r} is neither Tiresias nor Chronus", "line 1"
                )
            info = file_info(f, header_lines=1)
            parsed = _checked(
                parse_fields(scan_lines(info, skip=1), _specs(header)), header, "submit_time"
            )
            good = parsed.filter(pl.col(REASON).is_null())
            dataset = slug(f.stem)
            rows = canonical_jobs(
                good,
                self.name,
                dataset,
                [
                    pl.col("job_id"),
                    (pl.col("user") if "user" in header else pl.lit(None, pl.String)).alias("vc"),
                    pl.col("model_name").alias("name"),
                    offset_time("submit_time").alias("submit_time"),
                    pl.col("duration").alias("run_s"),
                    pl.col("num_gpu").alias("gpus"),
                    pl.col("num_gpu").alias("gpus_raw"),
                ],
            )
            meta = {"time_basis": "relative"}
            yield jobs_batch(self.name, dataset, f, info, parsed, rows, meta)


class GavelLoader:
    """Gavel ``.trace`` files (7 or 10 tab-separated fields, no header)."""

    name = "gavel"
    version = "1"

    def batches(self, path: Path, *, step_s: float | None = None, **_: Any) -> Iterator[Batch]:
        """Yield one ``jobs`` batch per Gavel ``.trace`` file (``step_s`` turns steps into
        seconds).
        """
        if step_s is not None and not (math.isfinite(step_s) and step_s > 0):
            msg = f"--step-s {step_s} must be a finite number above 0"
            raise GpuTraceError(msg)
        for f in [path] if path.is_file() else sorted(path.glob("*.trace")):
            first = read_header(f)
            width = len(first.split("\t"))
            if width not in (7, 10):
                raise InputError(
                    f, f"{width} tab-separated fields; Gavel traces have 7 or 10", "line 1"
                )
            names = GAVEL7 if width == 7 else GAVEL10
            info = file_info(f, header_lines=0)
            parsed = _checked(
                parse_fields(scan_lines(info), _specs(names), separator="\t"),
                names,
                "arrival_time",
            )
            good = parsed.filter(pl.col(REASON).is_null())
            dataset = slug(f.stem)
            run = pl.col("total_steps") * step_s if step_s is not None else pl.lit(None, pl.Float64)
            rows = canonical_jobs(
                good,
                self.name,
                dataset,
                [
                    (pl.col("_line") - 1).cast(pl.String).alias("job_id"),
                    pl.col("job_type").alias("name"),
                    offset_time("arrival_time").alias("submit_time"),
                    run.alias("run_s"),
                    pl.col("scale_factor").alias("gpus"),
                    pl.col("scale_factor").alias("gpus_raw"),
                ],
            )
            meta = {
                "time_basis": "relative",
                "step_s": "unknown" if step_s is None else str(step_s),
            }
            yield jobs_batch(self.name, dataset, f, info, parsed, rows, meta)


def _step_s(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        msg = f"--step-s {text!r} is not a number of seconds"
        raise UsageError(msg) from None
    return check_number(value, "--step-s", gt=0)


@dataclass(frozen=True)
class GavelOptions:
    """`gpu-trace ingest gavel` options (passed to the loader as keyword arguments)."""

    step_s: float | None = option(
        None,
        "Seconds per training step (Gavel counts work in steps).",
        parse=_step_s,
        metavar="<float>",
    )


PLUGINS = (
    LoaderPlugin(
        name="chronus",
        loader=ChronusLoader,
        help="Tiresias / Chronus job CSVs (other simulators' input) -> jobs.",
    ),
    LoaderPlugin(
        name="gavel",
        loader=GavelLoader,
        help="Gavel .trace files (7 or 10 tab-separated fields) -> jobs.",
        options=GavelOptions,
    ),
)
