"""The one reading of a ``--tz`` value (every loader that reads local times takes one).

Two libraries must agree on a zone name: Python's :mod:`zoneinfo` (the system's tzdata,
used for ``--start`` and the Python-side checks) and polars (chrono-tz, compiled in, used
for every column conversion). ``zoneinfo`` also opens whatever file lies under the tzdata
folder, so it accepts names that are not zones of a place and that polars refuses with a
traceback deep in a query: ``posix/Europe/Berlin`` (a copy of ``Europe/Berlin``, read as
that), ``right/UTC`` (tzdata's leap-second variants: they count leap seconds, which no
Unix or sacct time does), ``localtime`` (this machine's zone, not the cluster's) and
``Factory`` (tzdata's placeholder, abbreviation ``-00``). Those are normalised or
refused here, once, with one usage line naming the option and the value; any other name
is accepted only if both libraries accept it.
"""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import polars as pl

from gpu_trace.errors import UsageError

EXAMPLE = "Europe/Berlin"
_NOT_PLACES = {
    "localtime": "names this machine's zone file, not the zone of the data",
    "posixrules": "is tzdata's template for POSIX TZ strings, not a zone",
    "Factory": "is tzdata's placeholder zone ('-00'), not a place",
}


def parse_tz(text: str, flag: str = "--tz") -> str:
    """``text`` as a zone name both :mod:`zoneinfo` and polars use: ``posix/X`` -> ``X``;
    ``right/X``, ``localtime``, ``posixrules``, ``Factory`` and any name either library
    refuses -> a :class:`UsageError` (one line naming ``flag`` and the value; exit 2).
    """
    name = text.removeprefix("posix/")
    if name.startswith("right/"):
        msg = (
            f"{flag} {text!r}: the right/ zones count leap seconds, which the data's times "
            f"do not; use {name.removeprefix('right/')!r}"
        )
        raise UsageError(msg)
    why = _NOT_PLACES.get(name)
    if why is not None:
        msg = f"{flag} {text!r} {why}; use an IANA name such as {EXAMPLE}"
        raise UsageError(msg)
    try:
        ZoneInfo(name)
        pl.select(pl.lit(dt.datetime(2000, 1, 1)).dt.replace_time_zone(name))
    except (ZoneInfoNotFoundError, ValueError, OSError, pl.exceptions.PolarsError):
        msg = f"unknown time zone {text!r} for {flag}; use an IANA name such as {EXAMPLE}"
        raise UsageError(msg) from None
    return name
