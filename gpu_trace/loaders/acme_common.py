"""What the AcmeTrace job and utilization readers share: the source name and how a
timestamp with a UTC offset becomes a UTC instant.

AcmeTrace (InternLM/AcmeTrace, Hu et al., NSDI'24) writes every time as pandas writes a
zone-aware timestamp: ``2023-03-01 00:18:22+08:00`` (Seren job trace and the utilization
CSVs), ``2023-05-17 11:00:58+00:00`` (Kalos job trace), optionally with fractional
seconds. The offset fixes the instant exactly, so no zone database is consulted for
those. A time written without an offset (an operator's own export) is read in the
zone the caller names (``--tz``, default ``Asia/Shanghai``: both clusters are Shanghai
AI Laboratory's); a local time that does not exist there is rejected.

``source_tz`` records the zone the source wrote its times in: ``Asia/Shanghai`` for
``+08:00`` (China Standard Time, no DST since 1991), ``UTC`` for ``+00:00``,
``Etc/GMT-N`` for another whole-hour offset, ``UTC+HH:MM`` otherwise, and the ``--tz``
zone for times written without an offset.
"""

from __future__ import annotations

from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import polars as pl

from gpu_trace.errors import GpuTraceError

SOURCE = "acme"
DEFAULT_TZ = "Asia/Shanghai"
TIME_TEXT = "YYYY-MM-DD HH:MM:SS[.ffffff][+HH:MM]"

_TIME = (
    r"^\s*(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{1,9})?)(?:([+-])(\d{2}):?(\d{2})|(Z))?\s*$"
)

OFFSET_ZONES = {480: "Asia/Shanghai", 0: "UTC"}
"""Offsets (minutes east of UTC) whose zone is known for AcmeTrace: Seren's ``+08:00``
is Shanghai, Kalos's ``+00:00`` is UTC."""


def check_tz(tz: str) -> str:
    """``tz`` if it names an IANA zone, else a one-line error."""
    try:
        ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise GpuTraceError(
            f"unknown time zone {tz!r}; use an IANA name such as {DEFAULT_TZ}"
        ) from None
    return tz


def parse_time(text: pl.Expr, tz: str) -> tuple[pl.Expr, pl.Expr, pl.Expr]:
    """(UTC instant, offset in minutes or null when none was written, ok-to-parse flag).

    The instant is null when the text is not a time or (naive text) the local time does
    not exist in ``tz``; the flag tells the two apart for the reason text."""
    groups = text.str.extract_groups(_TIME)
    naive = groups.struct[0].str.strptime(
        pl.Datetime("us"), "%Y-%m-%d %H:%M:%S%.f", strict=False, cache=False
    )
    sign = pl.when(groups.struct[1] == "-").then(-1).otherwise(1)
    minutes = groups.struct[2].cast(pl.Int64, strict=False) * 60 + groups.struct[3].cast(
        pl.Int64, strict=False
    )
    offset = (
        pl.when(groups.struct[4] == "Z")
        .then(pl.lit(0, dtype=pl.Int64))
        .when(minutes.is_not_null())
        .then(sign * minutes)
    )
    with_offset = (naive - pl.duration(minutes=offset)).dt.replace_time_zone("UTC")
    local = naive.dt.replace_time_zone(
        tz, ambiguous="earliest", non_existent="null"
    ).dt.convert_time_zone("UTC")
    utc = pl.when(offset.is_not_null()).then(with_offset).otherwise(local)
    parsed = naive.is_not_null() & (offset.is_not_null() | groups.struct[1].is_null())
    return utc, offset, parsed


def offset_zone(offset: pl.Expr, tz: str) -> pl.Expr:
    """The ``source_tz`` for a time written with ``offset`` minutes (null: ``tz``)."""
    hours = offset // 60
    known = pl.lit(None, dtype=pl.String)
    for minutes, name in OFFSET_ZONES.items():
        known = pl.when(offset == minutes).then(pl.lit(name)).otherwise(known)
    etc = pl.format(
        "Etc/GMT{}{}", pl.when(hours > 0).then(pl.lit("-")).otherwise(pl.lit("+")), hours.abs()
    )
    literal = pl.format(
        "UTC{}{}:{}",
        pl.when(offset < 0).then(pl.lit("-")).otherwise(pl.lit("+")),
        (offset.abs() // 60).cast(pl.String).str.zfill(2),
        (offset.abs() % 60).cast(pl.String).str.zfill(2),
    )
    return (
        pl.when(offset.is_null())
        .then(pl.lit(tz))
        .when(offset.is_in(list(OFFSET_ZONES)))
        .then(known)
        .when(offset % 60 == 0)
        .then(etc)
        .otherwise(literal)
    )
