"""Unit conversions that must round exactly.

Polars divides a column by a literal by multiplying with the reciprocal, so
``18708 / 1000`` comes out as ``18.708000000000002``. Canonical values must equal what a
user computes by hand from the raw file, so decimal rescaling goes through exact decimal
arithmetic instead.
"""

from __future__ import annotations

from datetime import datetime

import polars as pl

MIB = 1024 * 1024
GIB = 1024 * MIB
GB = 1000**3

TIME_MIN = datetime(1970, 1, 1)
TIME_MAX = datetime(2100, 1, 1)
"""Absolute trace times (as written, before any zone conversion) must lie in
[TIME_MIN, TIME_MAX): placeholders such as ``9999-12-31 23:59:59`` are quarantined as
"time out of range" instead of overflowing date arithmetic or poisoning analyses."""
TIME_MAX_S = (TIME_MAX - TIME_MIN).total_seconds()
"""The same bound for relative times (seconds from a trace start stored from 1970)."""


def per(expr: pl.Expr, power_of_ten: int) -> pl.Expr:
    """``expr / power_of_ten`` as the correctly rounded float (milli -> unit, percent ->
    fraction). Only powers of ten are exact in decimal, hence the restriction.
    """
    if power_of_ten <= 0 or 10 ** (len(str(power_of_ten)) - 1) != power_of_ten:
        msg = f"{power_of_ten} is not a power of ten"
        raise ValueError(msg)
    return expr.cast(pl.Decimal(38, 12)).truediv(power_of_ten).cast(pl.Float64)
