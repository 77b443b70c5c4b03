"""The PAI 2020 simulator's own job CSV (alibaba/clusterdata,
``cluster-trace-gpu-v2020/simulator``, ``traces/pai/pai_job_*_100K.csv``) as an
ingestible source, so its input replays here without a conversion script.

What the simulator reads (``utils._add_job`` and ``simulator.Simulator``, commit
7a6c496e4f4b6ce6150be8f881cb051bf2abff42): a header-named CSV (``csv.DictReader``, so
column order does not matter) with ``job_id``, ``num_gpu`` and ``num_cpu`` (units per
job: GPUs, possibly fractional, and cores), ``submit_time`` (seconds, rounded),
``duration`` (seconds), optional ``num_inst`` (default 1) and ``user``; other columns
(``gpu_type``, duration estimates) are not read. ``gpu_type`` is deliberately not stored
as the job's GPU-type requirement: the simulator ignores it unless
``gpu_type_matching`` is set (its default is 0), so a replay must too. A job with ``num_gpu`` 0 is CPU-only: the
simulator schedules it on CPUs alone.

``--arrival-rate N`` re-times arrivals as the simulator's ``set_job_list_arrival_time``
does: jobs ordered by (submit time, job id, ids compared as numbers), the i-th (from 0)
arrives at ``(i // N) x --arrival-interval`` (60 s by default); without it the file's
submit times are kept (the simulator's ``arrival_rate = -1``). Re-timing is recorded in
the dataset's metadata (``arrival_rate``, ``arrival_interval_s``).

Rows with a count, time or duration that is not a finite non-negative number are
quarantined. Times are relative (``time_basis = relative``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from gpu_trace.errors import InputError, UsageError
from gpu_trace.loaders.base import Batch
from gpu_trace.loaders.interchange import canonical_jobs, jobs_batch, offset_time
from gpu_trace.loaders.textfile import (
    REASON,
    FieldSpec,
    file_info,
    parse_fields,
    read_header,
    scan_lines,
)
from gpu_trace.loaders.units import TIME_MAX_S
from gpu_trace.plugins import LoaderPlugin, option
from gpu_trace.store.parquet import slug
from gpu_trace.values import check_number

REQUIRED = ("job_id", "num_gpu", "num_cpu", "submit_time", "duration")
NUMERIC = ("num_gpu", "num_cpu", "submit_time", "duration", "num_inst")


def _checked(parsed: pl.LazyFrame, header: tuple[str, ...]) -> pl.LazyFrame:
    """Quarantine rows whose numbers the simulator could not use."""
    checks: list[pl.Expr] = [pl.col(REASON)]
    for n in (n for n in NUMERIC if n in header):
        c = pl.col(n)
        checks.append(pl.when(~c.is_finite()).then(pl.format(f"{n} {{}} is not finite", c)))
        checks.append(pl.when(c < 0).then(pl.format(f"{n} {{}} is negative", c)))
    checks.append(
        pl.when(pl.col("submit_time") >= TIME_MAX_S).then(
            pl.format(
                f"submit_time {{}} is a time out of range (>= {TIME_MAX_S:.0f} s)",
                pl.col("submit_time"),
            )
        )
    )
    return parsed.with_columns(pl.coalesce(checks).alias(REASON))


def _col(header: tuple[str, ...], name: str, dtype: pl.DataType) -> pl.Expr:
    """Column ``name`` when the file has it, else nulls of ``dtype``."""
    return pl.col(name) if name in header else pl.lit(None, dtype)


def retimed(good: pl.LazyFrame, rate: int | None, interval_s: float) -> pl.LazyFrame:
    """The simulator's arrival re-timing: order by (submit time, job id as a number when
    it is one), then the i-th job arrives at ``(i // rate) * interval_s``; ``rate``
    None keeps the file's times.
    """
    if rate is None:
        return good
    jid = pl.col("job_id")
    return (
        good.sort(
            [pl.col("submit_time"), jid.str.strip_chars().cast(pl.Int64, strict=False), jid],
            nulls_last=True,
            maintain_order=True,
        )
        .with_row_index("_i")
        .with_columns(((pl.col("_i") // rate) * interval_s).cast(pl.Float64).alias("submit_time"))
        .drop("_i")
    )


class PaiSimLoader:
    """PAI 2020 simulator job CSVs (one file, or every ``*.csv`` in a folder)."""

    name = "paisim"
    version = "1"

    def batches(
        self,
        path: Path,
        *,
        arrival_rate: int | None = None,
        arrival_interval_s: float = 60.0,
        **_: Any,
    ) -> Iterator[Batch]:
        """Yield one ``jobs`` batch per simulator CSV, arrivals re-timed if asked."""
        for f in [path] if path.is_file() else sorted(path.glob("*.csv")):
            header = tuple(h.strip() for h in read_header(f).split(","))
            missing = [c for c in REQUIRED if c not in header]
            if missing:
                raise InputError(
                    f, f"no column {', '.join(missing)}: not a PAI simulator job CSV", "line 1"
                )
            specs = tuple(
                FieldSpec(h, "float" if h in NUMERIC else "str", required=h in REQUIRED)
                for h in header
            )
            info = file_info(f, header_lines=1)
            parsed = _checked(parse_fields(scan_lines(info, skip=1), specs), header)
            good = retimed(
                parsed.filter(pl.col(REASON).is_null()), arrival_rate, arrival_interval_s
            )
            dataset = slug(f.stem)

            rows = canonical_jobs(
                good,
                self.name,
                dataset,
                [
                    pl.col("job_id"),
                    _col(header, "user", pl.String()).alias("user"),
                    offset_time("submit_time").alias("submit_time"),
                    pl.col("duration").alias("run_s"),
                    pl.col("num_gpu").alias("gpus"),
                    pl.col("num_gpu").alias("gpus_raw"),
                    pl.col("num_cpu").alias("cpus"),
                ],
            )
            meta = {
                "time_basis": "relative",
                "arrival_rate": "file" if arrival_rate is None else str(arrival_rate),
                "arrival_interval_s": str(arrival_interval_s),
            }
            yield jobs_batch(self.name, dataset, f, info, parsed, rows, meta)


def _rate(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        msg = f"--arrival-rate {text!r} is not a whole number of jobs"
        raise UsageError(msg) from None
    if value <= 0:
        msg = f"--arrival-rate {value} must be at least 1 (leave it out to keep submit times)"
        raise UsageError(msg)
    return value


def _interval(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        msg = f"--arrival-interval-s {text!r} is not a number of seconds"
        raise UsageError(msg) from None
    return check_number(value, "--arrival-interval-s", gt=0)


@dataclass(frozen=True)
class PaiSimOptions:
    """`gpu-trace ingest paisim` options (the simulator's arrival re-timing)."""

    arrival_rate: int | None = option(
        None,
        "Re-time arrivals as the simulator's --arrival_rate: N jobs per interval, in "
        "(submit time, job id) order. Left out: the file's submit times.",
        parse=_rate,
        metavar="<jobs>",
    )
    arrival_interval_s: float = option(
        60.0,
        "The interval of --arrival-rate, in seconds (the simulator's arrival_interval).",
        parse=_interval,
        metavar="<seconds>",
    )


PLUGINS = (
    LoaderPlugin(
        name="paisim",
        loader=PaiSimLoader,
        help="The PAI 2020 simulator's job CSV (job_id, num_gpu, num_cpu, ...) -> jobs.",
        options=PaiSimOptions,
    ),
)
