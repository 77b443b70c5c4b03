"""Prometheus text exposition (dcgm-exporter ``/metrics``) -> ``gpu_samples`` / ``events``.

A tolerant parser written as polars expressions rather than ``prometheus-client``'s
``text_string_to_metric_families``: that parser stops at the first malformed line and
reports no line number, while an ingester must keep every good line and quarantine each
bad one with ``line N``. Tolerated: ``# HELP``/``# TYPE`` with empty text, any other
``#`` comment (``# NOTE``), blank lines, spaces after label commas, a trailing comma,
optional millisecond timestamps, ``NaN`` (null).

Records: every sample line. It becomes a ``gpu_samples`` row (families mapped through
the DCGM field table; old and DCGM 4.6 names share a field id), an ``events`` row
(``DCGM_FI_DEV_XID_ERRORS`` > 0 = last XID, ``DCGM_EXP_XID_ERRORS_COUNT{xid=..}`` > 0,
ECC volatile totals > 0), or a quarantine row (unparsable line, value not a number, or a
family with no canonical metric, so nothing is dropped silently). Event lines with
value 0 say "no error" and produce no row (``no_event_cells`` in the metadata).

Labels kept: ``gpu`` -> gpu_index, ``UUID`` (or ``gpu_uuid``) -> gpu_uuid, ``GPU_I_ID``
-> mig_instance, ``hostname`` or the pre-2026 ``Hostname`` -> host, ``pod`` /
``namespace`` / ``container`` (or the ``--use-old-namespace`` names ``pod_name`` /
``pod_namespace`` / ``container_name``; empty strings are nulls), ``hpc_job`` -> job_id.
Exposition has no times: lines are stamped with the scrape time (``time_basis =
scrape``), or for a saved file ``--time`` or, without it, relative time (1970-01-01, with a warning).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from gpu_trace.errors import InputError
from gpu_trace.loaders.base import Batch
from gpu_trace.loaders.telemetry_common import (
    CELL,
    FIELD,
    TimeBasis,
    batches,
    cells_to_rows,
    check_lines,
    first_lines,
    parse_start,
    relative_fallback,
    split_rows,
)
from gpu_trace.loaders.telemetry_fields import DCGM_BY_NAME, XID_COUNT_FAMILY, Field
from gpu_trace.loaders.textfile import RAW, REASON, file_info, scan_lines
from gpu_trace.plugins import LoaderPlugin, option
from gpu_trace.store.parquet import slug

SOURCE = "prometheus"
_SAMPLE = r"^\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(?:\{(.*)\})?\s+(\S+)(?:\s+(-?\d+))?\s*$"
_PAIR = r'\s*[a-zA-Z_][a-zA-Z0-9_]*\s*=\s*"(?:[^"\\]|\\.)*"\s*,?'

FIELDS: dict[str, Field] = {
    **{name: f.field for name, f in DCGM_BY_NAME.items()},
    XID_COUNT_FAMILY: Field("event:xid"),
}


def label(name: str) -> pl.Expr:
    """The value of one label (null when absent or empty)."""
    value = pl.col("_labels").str.extract(r"(?:^|,)\s*" + name + r'\s*=\s*"((?:[^"\\]|\\.)*)"', 1)
    return pl.when(value == "").then(None).otherwise(value)


def parse(
    lines: pl.LazyFrame,
    *,
    when: dt.datetime,
    host: str | None,
    default_host: str,
    source: str,
    dataset: str,
    file: Path,
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, int, int, int]:
    """Parse exposition lines (``_line``, ``_raw``). Returns samples, events, quarantine,
    the number of "no event" lines, of comment/blank lines and of sample lines.
    """
    raw = pl.col(RAW).str.strip_chars_end("\r")
    stripped = raw.str.strip_chars()
    skip = (stripped == "") | stripped.str.starts_with("#")
    frame = lines.with_columns(raw.alias(RAW)).with_columns(skip.alias("_skip")).collect()
    n_skip = frame.filter(pl.col("_skip")).height
    data = frame.filter(~pl.col("_skip")).lazy()
    family = pl.col(RAW).str.extract(_SAMPLE, 1)
    labels = pl.col(RAW).str.extract(_SAMPLE, 2).fill_null("")
    value = pl.col(RAW).str.extract(_SAMPLE, 3)
    stamp = pl.col(RAW).str.extract(_SAMPLE, 4).cast(pl.Int64, strict=False)
    leftover = labels.str.replace_all(_PAIR, "").str.strip_chars()
    when_us = pl.lit(when).dt.convert_time_zone("UTC").dt.cast_time_unit("us")
    parsed = data.with_columns(
        family.alias(FIELD),
        labels.alias("_labels"),
        pl.when(value.str.to_lowercase() == "nan").then(pl.lit("N/A")).otherwise(value).alias(CELL),
        pl.when(stamp.is_not_null())
        .then(pl.from_epoch(stamp, time_unit="ms").dt.replace_time_zone("UTC"))
        .otherwise(when_us)
        .dt.cast_time_unit("us")
        .alias("time"),
        pl.when(family.is_null())
        .then(pl.lit("not a Prometheus sample line"))
        .when(leftover != "")
        .then(pl.format("malformed labels near '{}'", leftover.str.slice(0, 40)))
        .when(~family.is_in(list(FIELDS)))
        .then(pl.format("no canonical metric for {}", family))
        .alias(REASON),
    ).with_columns(
        pl.coalesce(
            pl.lit(host, dtype=pl.String),
            label("hostname"),
            label("Hostname"),
            pl.lit(default_host),
        ).alias("host"),
        label("gpu").cast(pl.Int16, strict=False).alias("gpu_index"),
        pl.coalesce(label("UUID"), label("gpu_uuid")).alias("gpu_uuid"),
        label("GPU_I_ID").alias("mig_instance"),
        pl.coalesce(label("pod"), label("pod_name")).alias("pod"),
        pl.coalesce(label("namespace"), label("pod_namespace")).alias("namespace"),
        pl.coalesce(label("container"), label("container_name")).alias("container"),
        label("hpc_job").alias("job_id"),
        label("xid").alias("_xid"),
    )
    n_data = frame.height - n_skip
    typed = cells_to_rows(parsed, FIELDS)
    samples, events, quarantine, no_event = split_rows(
        typed, source=source, dataset=dataset, file=file
    )
    return samples, events, quarantine, no_event, n_skip, n_data


def is_exposition(path: Path) -> bool:
    """A saved exposition: ``.prom``/``.metrics`` files, or text whose first lines are
    ``# HELP``/``# TYPE`` or a ``DCGM_`` sample.
    """
    if path.suffix in (".prom", ".metrics"):
        return True
    head = " ".join(first_lines(path, 2))
    return head.startswith(("# HELP", "# TYPE", "DCGM_"))


def exposition_file(
    path: Path, dataset: str, *, host: str | None = None, time: str | None = None
) -> list[Batch]:
    """One saved ``/metrics`` exposition -> its gpu_samples (and events) batches at one
    scrape time.
    """
    info = file_info(path, 0)
    if info.empty:
        raise InputError(path, "file is empty")
    when = parse_start(time, "UTC")
    basis = TimeBasis("start" if when else "relative", "UTC")
    samples, events, quarantine, no_event, n_skip, n_data = parse(
        scan_lines(info),
        when=when or relative_fallback(path, "--time"),
        host=host,
        default_host=slug(path.stem),
        source=SOURCE,
        dataset=dataset,
        file=path,
    )
    if n_data == 0:
        raise InputError(path, "no sample lines (is this a Prometheus exposition?)")
    check_lines(info, n_data, n_skip)
    return batches(
        info=info,
        dataset=dataset,
        samples=samples,
        events=events,
        quarantine=quarantine,
        no_event=no_event,
        basis=basis,
        extra={"format": "prometheus text exposition"},
    )


class PrometheusLoader:
    """Loader for saved ``/metrics`` expositions (a file or a folder of them)."""

    name = SOURCE
    version = "1"

    def batches(
        self, path: Path, *, host: str | None = None, time: str | None = None, **_: Any
    ) -> Iterator[Batch]:
        """Yield the batches of every exposition at ``path`` (a file, or the expositions in
        a folder).
        """
        files = [path] if path.is_file() else sorted(p for p in path.iterdir() if p.is_file())
        for f in files:
            if path.is_dir() and not is_exposition(f):
                continue
            yield from exposition_file(f, slug(f.stem), host=host, time=time)


@dataclass(frozen=True)
class PrometheusOptions:
    """`gpu-trace ingest prometheus` options (passed to the loader as keyword arguments)."""

    host: str | None = option(
        None, "Host name (default: the hostname field/label, else the file name)."
    )
    time: str | None = option(None, "ISO-8601 scrape time (default: the file's mtime).")


PLUGIN = LoaderPlugin(
    name="prometheus",
    loader=PrometheusLoader,
    help="A saved dcgm-exporter /metrics exposition -> gpu_samples (XID/ECC -> events).",
    options=PrometheusOptions,
)
