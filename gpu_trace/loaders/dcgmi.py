"""``dcgmi dmon`` text -> ``gpu_samples`` / ``events``.

Header line 1 is ``#Entity`` (DCGM 3+) or ``# Entity`` (2.x) followed by the field tags
(``GRACT``, ``NVLTX``...); line 2 is ``ID``/``Id`` and the units; data rows are
``GPU 0   v1  v2 ...``, ``GPU-I 29 ...``, ``GPU-CI 3 ...``. Values are ``N/A`` until the
first sample lands (null, never 0) and DCGM blank sentinels are nulls too. Tags map to
canonical metrics through the DCGM field table (keyed on field id, both old and 4.6
names). Records: data row x kept tag; a row that is not a GPU entity (``SW n LINK m``,
``CPU n``, ``GPU n LINK m``) or has the wrong number of values is one quarantined record.
``dcgmi dmon`` prints no times: see :func:`gpu_trace.loaders.telemetry_common.tick_times`
(``--interval`` = dmon's ``-d``, default 1 s).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from gpu_trace.errors import InputError
from gpu_trace.loaders.base import Batch
from gpu_trace.loaders.telemetry_common import (
    finish_wide,
    first_lines,
    parse_start,
    tick_times,
)
from gpu_trace.loaders.telemetry_fields import DCGM_BY_TAG, Field
from gpu_trace.loaders.telemetry_options import host_option, interval_option, start_option
from gpu_trace.loaders.textfile import RAW, REASON, file_info, scan_lines
from gpu_trace.plugins import LoaderPlugin
from gpu_trace.store.parquet import slug

SOURCE = "dcgmi"
_ENTITY = r"^\s*(GPU-CI|GPU-I|GPU|SW|CPU|NvSwitch)\s+(\d+)((?:\s+LINK\s+\d+)?)\s*(.*?)\s*$"


def header_tags(path: Path) -> list[str] | None:
    """The field tags of a ``dcgmi dmon`` header line (``#Entity ...``), or None when the
    file is not one.
    """
    first = first_lines(path, 1)[0].strip()
    if first.startswith("#Entity") or first.startswith("# Entity"):
        return first.lstrip("#").split()[1:]
    return None


def dmon(
    path: Path,
    dataset: str,
    *,
    host: str | None = None,
    start: str | None = None,
    interval_s: float = 1.0,
) -> list[Batch]:
    """One ``dcgmi dmon`` output -> its gpu_samples (and events) batches, on the tick grid
    when it prints no times.
    """
    tags = header_tags(path)
    if tags is None:
        raise InputError(path, "not dcgmi dmon output (expected '#Entity' header)", "line 1")
    fields: dict[str, Field] = {t: DCGM_BY_TAG[t].field for t in tags if t in DCGM_BY_TAG}
    info = file_info(path, 0)
    lines = scan_lines(info).with_columns(pl.col(RAW).str.strip_chars_end("\r"))
    first_token = pl.col(RAW).str.strip_chars().str.split(" ").list.first().str.to_lowercase()
    is_header = pl.col(RAW).str.strip_chars_start().str.starts_with("#") | (first_token == "id")
    n_header = lines.filter(is_header).select(pl.len()).collect().item()
    kind = pl.col(RAW).str.extract(_ENTITY, 1)
    number = pl.col(RAW).str.extract(_ENTITY, 2)
    link = pl.col(RAW).str.extract(_ENTITY, 3).str.strip_chars()
    values = pl.col(RAW).str.extract(_ENTITY, 4).str.extract_all(r"N/A|\S+")
    split = (
        lines.filter(~is_header)
        .with_columns(
            kind.alias("_kind"),
            number.cast(pl.Int64, strict=False).alias("_num"),
            values.alias("_parts"),
        )
        .with_columns(
            pl.when(pl.col(RAW).str.strip_chars() == "")
            .then(pl.lit("empty line"))
            .when(pl.col("_kind").is_null())
            .then(pl.lit("not a dcgmi dmon entity row"))
            .when((link != "") | ~pl.col("_kind").is_in(["GPU", "GPU-I", "GPU-CI"]))
            .then(
                pl.format(
                    "entity '{} {}{}' is not a GPU or GPU instance (links, switches and CPUs "
                    "are not in the model)",
                    pl.col("_kind"),
                    pl.col("_num"),
                    pl.when(link != "").then(pl.lit(" ") + link).otherwise(pl.lit("")),
                )
            )
            .when(pl.col("_parts").list.len() != len(tags))
            .then(
                pl.format(f"expected {len(tags)} values, found {{}}", pl.col("_parts").list.len())
            )
            .alias(REASON)
        )
        .collect()
    )
    entity = pl.concat_str(pl.col("_kind"), pl.lit(" "), pl.col("_num").cast(pl.String))
    ok = pl.col(REASON).is_null()
    good_n = split.filter(ok)
    ticks = good_n.select(pl.len().over(entity).max()).item() if good_n.height else 0
    time, basis = tick_times(
        pl.when(ok).then(entity.cum_count().over(entity, ok) - 1),
        int(ticks or 0),
        start=parse_start(start, "UTC"),
        interval_s=interval_s,
        path=path,
    )
    keyed = split.with_columns(
        time.alias("time"),
        pl.lit(host or slug(path.stem)).alias("host"),
        pl.when(pl.col("_kind") == "GPU").then(pl.col("_num")).cast(pl.Int16).alias("gpu_index"),
        pl.when(pl.col("_kind") == "GPU-I")
        .then(pl.col("_num").cast(pl.String))
        .when(pl.col("_kind") == "GPU-CI")
        .then(pl.format("ci{}", pl.col("_num")))
        .alias("mig_instance"),
    )
    if not fields:
        raise InputError(path, f"none of the fields {tags} is a metric gpu-trace keeps", "line 1")
    return finish_wide(
        keyed,
        keys=["time", "host", "gpu_index", "mig_instance"],
        kept=[(i, t) for i, t in enumerate(tags) if t in fields],
        fields=fields,
        source=SOURCE,
        info=info,
        dataset=dataset,
        used=split.height,
        header_lines=n_header,
        basis=basis,
        extra={"format": "dcgmi dmon", "interval_s": str(interval_s)},
    )


class DcgmiLoader:
    """Loader for ``dcgmi dmon`` captures (a file or a folder of them)."""

    name = SOURCE
    version = "1"

    def batches(
        self,
        path: Path,
        *,
        host: str | None = None,
        start: str | None = None,
        interval_s: float = 1.0,
        **_: Any,
    ) -> Iterator[Batch]:
        """Yield the batches of the dcgmi output at ``path`` (a file, or every dmon file in
        a folder).
        """
        files = [path] if path.is_file() else sorted(p for p in path.iterdir() if p.is_file())
        for f in files:
            if path.is_dir() and header_tags(f) is None:
                continue
            yield from dmon(f, slug(f.stem), host=host, start=start, interval_s=interval_s)


@dataclass(frozen=True)
class DcgmiOptions:
    """`gpu-trace ingest dcgmi` options (passed to the loader as keyword arguments)."""

    host: str | None = host_option()
    start: str | None = start_option()
    interval_s: float = interval_option()


PLUGIN = LoaderPlugin(
    name="dcgmi",
    loader=DcgmiLoader,
    help="`dcgmi dmon` text -> gpu_samples (XID/ECC -> events).",
    options=DcgmiOptions,
)
