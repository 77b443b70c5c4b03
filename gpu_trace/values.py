"""User-typed values, parsed one way everywhere: names from a registry, booleans,
durations and comma lists.

The command line, sweep files and policy options all take these; parsing them in one
place is what makes ``--policy sfj``, ``-o blocking=maybe`` and ``--interval 90s`` behave
the same in every command (a usage error naming the value, with a suggestion), instead
of each command inventing its own rule.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Iterable

from gpu_trace.errors import UsageError

TRUE = frozenset({"true", "yes", "1"})
FALSE = frozenset({"false", "no", "0"})

_DURATION_UNITS = {"ms": 0.001, "": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"^\s*(?P<v>\d+(?:\.\d*)?|\.\d+)\s*(?P<u>ms|[smhd]?)\s*$")


def suggestion(name: str, known: Iterable[str]) -> str | None:
    """The registered name closest to ``name`` (difflib), if any is close enough."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.5)
    return close[0] if close else None


def unknown(what: str, name: str, known: Iterable[str]) -> UsageError:
    """``unknown policy 'sfj'; did you mean 'sjf'?`` (or the list of known names when
    nothing is close), as the error to raise.
    """
    names = list(known)
    near = suggestion(name, names)
    if near is not None:
        return UsageError(f"unknown {what} {name!r}; did you mean {near!r}?")
    return UsageError(f"unknown {what} {name!r}; known: {', '.join(names) or 'none'}")


def choose(what: str, name: str, known: Iterable[str]) -> str:
    """``name`` if it is one of ``known``, else a :class:`UsageError` with a suggestion.

    The one helper every command uses to take a name from a registry (policies, trace
    families, analyses' ``--by`` keys, image formats, sources), so that a typo is always
    exit 2 with "did you mean".
    """
    names = list(known)
    if name in names:
        return name
    raise unknown(what, name, names)


def parse_bool(text: str | bool, what: str) -> bool:
    """``true/false``, ``yes/no``, ``1/0`` (any case); anything else is refused rather
    than read as false (``blocking=maybe`` must not silently mean ``blocking=false``).
    """
    if isinstance(text, bool):
        return text
    value = text.strip().lower()
    if value in TRUE:
        return True
    if value in FALSE:
        return False
    msg = f"{what}={text!r} is not a boolean: use true/false, yes/no or 1/0"
    raise UsageError(msg)


def parse_duration(text: str, what: str) -> float:
    """Seconds from ``500ms``, ``90s``, ``15m``, ``2h``, ``1d`` or a bare number of
    seconds (``120``, ``0.5``): the one duration syntax of every option.
    """
    m = _DURATION.match(text)
    if not m:
        msg = f"{what} {text!r} is not a duration like 90s, 15m, 2h, 1d or 120"
        raise UsageError(msg)
    return float(m["v"]) * _DURATION_UNITS[m["u"]]


def split_list(values: str | Iterable[str] | None) -> list[str]:
    """Names given as ``a,b`` and/or by repeating the flag (``-s a -s b``), in order,
    blanks dropped: every list option accepts both spellings.
    """
    if values is None:
        return []
    items = [values] if isinstance(values, str) else list(values)
    return [part.strip() for item in items for part in item.split(",") if part.strip()]


def check_number(
    value: float,
    what: str,
    *,
    gt: float | None = None,
    ge: float | None = None,
    le: float | None = None,
) -> float:
    """``value`` if it is finite and within the bounds, else a :class:`UsageError`
    (NaN compares false to everything, so ``--load nan`` would otherwise pass a range).
    """
    if not math.isfinite(value):
        msg = f"{what} must be a finite number, got {value}"
        raise UsageError(msg)
    if gt is not None and not value > gt:
        msg = f"{what} must be > {gt:g}, got {value:g}"
        raise UsageError(msg)
    if ge is not None and not value >= ge:
        msg = f"{what} must be >= {ge:g}, got {value:g}"
        raise UsageError(msg)
    if le is not None and not value <= le:
        msg = f"{what} must be <= {le:g}, got {value:g}"
        raise UsageError(msg)
    return value


_SIZE_UNITS = {"": 1, "k": 1000, "m": 1000**2, "g": 1000**3, "t": 1000**4}


def number_check(
    flag: str, *, gt: float | None = None, ge: float | None = None, le: float | None = None
) -> Callable[[float], float]:
    """The ``check`` of a number option (``plugins.option``): :func:`check_number` with
    these bounds, named by ``flag`` (``--load 0`` is a usage error, NaN too).
    """

    def check(value: float) -> float:
        return check_number(value, flag, gt=gt, ge=ge, le=le)

    return check


def duration_parse(flag: str) -> Callable[[str], float]:
    """The ``parse`` of a duration option (``30m``, ``2h``, bare seconds), named by ``flag``."""

    def parse(text: str) -> float:
        return parse_duration(text, flag)

    return parse


def size_bytes(text: str) -> int:
    """``500000``, ``300M``, ``2G`` (decimal units, as ``datasets`` prints sizes), at
    least 1; anything else is a :class:`UsageError`.
    """
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)b?\s*", text, re.IGNORECASE)
    if not m or (n := int(float(m[1]) * _SIZE_UNITS[m[2].lower()])) < 1:
        msg = f"{text!r} is not a size (e.g. 500M, 2G, 100000)"
        raise UsageError(msg)
    return n
