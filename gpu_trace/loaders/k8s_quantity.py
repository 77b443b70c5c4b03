"""Kubernetes resource quantities (``500m``, ``4Gi``, ``1e9``) parsed exactly.

The grammar is the one ``k8s.io/apimachinery/pkg/api/resource.Quantity`` documents::

    <quantity>        ::= <signedNumber><suffix>
    <signedNumber>    ::= <number> | +<number> | -<number>
    <number>          ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
    <suffix>          ::= <binarySI> | <decimalExponent> | <decimalSI>
    <binarySI>        ::= Ki | Mi | Gi | Ti | Pi | Ei
    <decimalSI>       ::= m | "" | k | M | G | T | P | E
    <decimalExponent> ::= "e" <signedNumber> | "E" <signedNumber>

(the exponent is an integer: ``1e3``; ``1E`` alone is exa). Values are rounded the way
Kubernetes rounds them for scheduling: CPU to milli-cores and everything else to whole
units, **up** (``Quantity.MilliValue`` / ``Value``), so ``0.1Gi`` of memory is
107,374,183 bytes. Arithmetic is exact (integers and :class:`fractions.Fraction`), never
float.

Quantities repeat massively in a pod list (``500m``, ``4Gi``), so :func:`parse_column`
parses each *distinct* text once in Python and joins the results back: the data path
stays vectorized.
"""

from __future__ import annotations

import re
from fractions import Fraction

import polars as pl

_QUANTITY = re.compile(
    r"(?P<sign>[+-]?)(?P<int>[0-9]*)(?:\.(?P<frac>[0-9]*))?"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?[0-9]+|[mkMGTPE]?)\Z"
)
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
INT64_MAX = 2**63 - 1
_MAX_DIGITS = 20
"""A value of 10**20 or more is past int64 whatever the suffix (every scale is >= 1)."""
_KEEP = 70
"""Fraction digits kept below the unit: past ``2**60 * 10**9`` (the largest binary
suffix, then Kubernetes' rounding up to nano units), so that dropping the rest (rounding
up) changes no result: a value is rounded up to nano units anyway."""
_EXP_DIGITS = 12
"""An exponent longer than this is huge: the value is 0, rounds up to its smallest unit,
or is out of range, decided without computing ``10**exponent`` (``0e999999999``)."""


def parse(text: str) -> Fraction | str:
    """The exact value of a quantity (bounded: see :data:`_KEEP`), or the reason it is
    not one. Digits and exponent are bounded before any arithmetic, so neither a
    5,000-digit number nor ``0e999999999`` costs more than a few microseconds.
    """
    m = _QUANTITY.match(text)
    if m is None or not (m["int"] or m["frac"]):
        return "is not a Kubernetes quantity"
    frac = m["frac"] or ""
    digits = ((m["int"] or "") + frac).lstrip("0")
    exp = -len(frac)
    suffix = m["suffix"]
    power2 = _BINARY.get(suffix, 0)
    if suffix in _DECIMAL:
        exp += _DECIMAL[suffix]
    elif suffix not in _BINARY:
        shown = suffix[1:].lstrip("+-").lstrip("0")
        # a huge exponent: only its sign matters below
        exp_value = 10**_EXP_DIGITS if len(shown) > _EXP_DIGITS else int(shown or "0")
        exp += -exp_value if suffix[1:2] == "-" else exp_value
    stripped = digits.rstrip("0")
    exp += len(digits) - len(stripped)
    digits = stripped
    if not digits:
        return Fraction(0)
    if len(digits) + exp > _MAX_DIGITS:
        return "is out of range"
    if exp < -_KEEP:
        # round up at 10**-_KEEP: the dropped digits are not all zero (stripped above)
        keep = len(digits) + exp + _KEEP
        digits = str(int(digits[:keep]) + 1) if keep > 0 else "1"
        exp = -_KEEP
    value = Fraction(int(digits) * 2**power2) * Fraction(10) ** exp
    return -value if m["sign"] == "-" else value


def scaled(text: str, milli: bool, whole: bool) -> tuple[int | None, str | None]:
    """``text`` in units (milli-units when ``milli``), rounded up; or a reason.
    ``whole``: the resource is an extended resource, which must be a whole number.
    """
    value = parse(text)
    if isinstance(value, str):
        return None, value
    if value < 0:
        return None, "is negative"
    if whole and value.denominator != 1:
        return None, "is not a whole number (extended resources are counted in units)"
    if milli:
        value *= 1000
    n = -(-value.numerator // value.denominator)  # ceiling
    if n > INT64_MAX:
        return None, "is out of range"
    return n, None


def parse_column(
    values: pl.Series, milli: pl.Series, whole: pl.Series
) -> tuple[pl.Series, pl.Series]:
    """Vector form of :func:`scaled` for aligned series: (Int64 values, reasons)."""
    keys = pl.DataFrame({"q": values, "milli": milli, "whole": whole})
    distinct = keys.unique()
    parsed = [
        scaled(q, bool(mi), bool(wh)) if q is not None else (None, None)
        for q, mi, wh in distinct.iter_rows()
    ]
    table = distinct.with_columns(
        pl.Series("_v", [p[0] for p in parsed], dtype=pl.Int64),
        pl.Series("_why", [p[1] for p in parsed], dtype=pl.String),
    )
    out = keys.join(
        table, on=["q", "milli", "whole"], how="left", maintain_order="left", nulls_equal=True
    )
    return out["_v"], out["_why"]
