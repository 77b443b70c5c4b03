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

import polars as pl

SOURCE = "acme"
DEFAULT_TZ = "Asia/Shanghai"
TIME_TEXT = "YYYY-MM-DD HH:MM:SS[.ffffff][+HH:MM]"

_TIME = (
    r"^\s*(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{1,9})?)(?:([+-])(\d{2}):?(\d{2})|(Z))?\s*$"
)

OFFSET_ZONES = {480: "Asia/Shanghai", 0: "UTC"}
"""Offsets (minutes east of UTC) whose zone is known for AcmeTrace: Seren's ``+08:00``
is Shanghai, Kalos's ``+00:00`` is UTC."""


def time_stages(text: str, out: str, tz: str) -> list[list[pl.Expr]]:
    """Polars ``with_columns`` stages that read the text column ``text`` as a time:
    ``out`` (UTC instant; null when the text is not a time or, written without an
    offset, does not exist in ``tz``), ``out_offset`` (minutes east of UTC as written,
    null when none was) and ``out_parsed`` (the text is a time).

    Each stage only reads columns of the stages before, so every intermediate value is
    computed once (an expression tree that repeats a regex per reference costs ten
    times more on a million rows).
    """
    t = pl.col(text)
    g = pl.col(f"{out}_g")
    base = g.struct[0]
    whole = base.str.slice(0, 19).str.strptime(
        pl.Datetime("us"), "%Y-%m-%d %H:%M:%S", strict=False, cache=False
    )
    frac = base.str.slice(20).str.pad_end(6, "0").str.slice(0, 6).cast(pl.Int64, strict=False)
    hh = g.struct[2].cast(pl.Int64, strict=False)
    mm = g.struct[3].cast(pl.Int64, strict=False)
    # RFC 3339 time-numoffset: hour 00-23, minute 00-59; "+99:99" is no offset at all
    minutes = pl.when((hh <= 23) & (mm <= 59)).then(hh * 60 + mm)
    sign = pl.when(g.struct[1] == "-").then(-1).otherwise(1)
    naive = pl.col(f"{out}_naive")
    offset = pl.col(f"{out}_offset")
    return [
        [t.str.extract_groups(_TIME).alias(f"{out}_g")],
        [
            (whole + pl.duration(microseconds=frac.fill_null(0))).alias(f"{out}_naive"),
            pl.when(g.struct[4] == "Z")
            .then(pl.lit(0, dtype=pl.Int64))
            .when(minutes.is_not_null())
            .then(sign * minutes)
            .alias(f"{out}_offset"),
            g.struct[1].is_null().alias(f"{out}_no_offset"),
        ],
        [
            pl.when(offset.is_not_null())
            .then((naive - pl.duration(minutes=offset)).dt.replace_time_zone("UTC"))
            .otherwise(
                naive.dt.replace_time_zone(
                    tz, ambiguous="earliest", non_existent="null"
                ).dt.convert_time_zone("UTC")
            )
            .alias(out),
            (naive.is_not_null() & (offset.is_not_null() | pl.col(f"{out}_no_offset"))).alias(
                f"{out}_parsed"
            ),
        ],
    ]


def staged(lf: pl.LazyFrame, *stage_lists: list[list[pl.Expr]]) -> pl.LazyFrame:
    """``lf`` with the stages of several :func:`time_stages` applied side by side."""
    for i in range(max((len(s) for s in stage_lists), default=0)):
        lf = lf.with_columns(e for s in stage_lists if i < len(s) for e in s[i])
    return lf


def zone_name(offset: int | None, tz: str) -> str:
    """The ``source_tz`` of a time written with ``offset`` minutes east of UTC (None:
    written without one, so read in ``tz``).
    """
    if offset is None:
        return tz
    if offset in OFFSET_ZONES:
        return OFFSET_ZONES[offset]
    if offset % 60 == 0:
        # POSIX-style Etc zones count west of UTC: +05:00 is Etc/GMT-5
        return f"Etc/GMT{-offset // 60:+d}"
    sign = "-" if offset < 0 else "+"
    return f"UTC{sign}{abs(offset) // 60:02d}:{abs(offset) % 60:02d}"


def offset_zone(offset: pl.Expr, offsets: list[int | None], tz: str) -> pl.Expr:
    """``source_tz`` per row: :func:`zone_name` of ``offset``, looked up among the few
    distinct ``offsets`` a file holds instead of formatted per row.
    """
    known = [o for o in offsets if o is not None]
    return offset.replace_strict(
        known, [zone_name(o, tz) for o in known], default=pl.lit(tz), return_dtype=pl.String
    ).fill_null(tz)
