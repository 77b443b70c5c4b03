"""A ``query_range`` answer walked in place, without building its samples as Python objects.

``json.loads`` of an answer builds a list, a float and a str per sample (~150 bytes per
~20-byte sample: a 100 MB answer costs several GB). This walker reads the answer's
text (a ``str``, decoded as ``json.loads`` decodes bytes) and builds Python objects only
for the structure and the labels. A ``values`` array is consumed in *runs*: a regular
expression matches up to :data:`RUN_PAIRS` consecutive well-formed samples
(``[<JSON number>, "<string without escapes>"]``, the shape Prometheus writes) in C,
and only the run's text is kept; polars later splits it into columns
(:func:`run_columns`). Any other element (an escaped string, a bare number value, a
damaged element) is parsed alone with the C JSON scanner: the cost a damaged file pays,
bounded to its damaged elements.

Exactness: the document is first walked without keeping anything (``emit=False``), which
checks its syntax with the same error messages and positions as ``json.loads`` (the
container loops mirror :mod:`json.decoder`'s, leaves go through its C scanner) and finds,
for every object walked, the *last* occurrence of each key (``json.loads`` keeps the last
of duplicate keys). The second walk reads only those. Whatever the fast path does not
model (a series with ``histograms``, a vector answer, a series or response that is
rejected whole and must be printed) is handed to the caller as a parsed value, which the
original object walk handles.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import polars as pl

_WS = r"[ \t\n\r]*"
_WS_RE = re.compile(_WS)
_NUM = r"-?(?:0|[1-9][0-9]{0,17})(?:\.[0-9]{1,20})?(?:[eE][-+]?[0-9]{1,3})?"
_STR = r'"[^"\\\x00-\x1f]*"'
_PAIR = rf"\[{_WS}{_NUM}{_WS},{_WS}{_STR}{_WS}\]"
RUN_PAIRS = 100_000
"""The most samples one regular-expression match takes (bounds the text held per run)."""
_RUN = re.compile(rf"{_PAIR}(?:{_WS},{_WS}{_PAIR}){{0,{RUN_PAIRS - 1}}}+")
_TOKEN = r'"[^"]*"|[^ \t\n\r\[\],"]+'
_SCAN = json.scanner.make_scanner(json.decoder.JSONDecoder())  # type: ignore[attr-defined]

_VALUE = "Expecting value"
_COMMA = "Expecting ',' delimiter"
_NAME = "Expecting property name enclosed in double quotes"
_COLON = "Expecting ':' delimiter"
_EXTRA = "Extra data"
"""json.decoder's messages, word for word (errors must read as json.loads' do)."""

T_TEXT, T_INT, T_FLOAT = 0, 1, 2
"""How a time's text reads: final text, a JSON integer literal, a JSON float literal."""


class Unmodelled(Exception):
    """The answer has a shape the streaming walk leaves to the object walk."""


def _error(msg: str, s: str, pos: int) -> json.JSONDecodeError:
    """json.loads' own error type, message and position (line / column from ``pos``)."""
    return json.JSONDecodeError(msg, s, pos)


def _ws(s: str, i: int) -> int:
    m = _WS_RE.match(s, i)
    assert m is not None  # matches the empty string
    return m.end()


def value(s: str, i: int) -> tuple[Any, int]:
    """One JSON value at ``i`` (C scanner), with json.loads' error when there is none."""
    try:
        out: tuple[Any, int] = _SCAN(s, i)
    except StopIteration as err:
        raise _error(_VALUE, s, err.value) from None
    return out


def skip(s: str, i: int) -> int:
    """The end of the JSON value at ``i``, checked; arrays are walked element by element
    (runs of samples by the regular expression), so a big array is never built.
    """
    if s.startswith("[", i):
        return array(s, i, skip_element)
    if s.startswith("{", i):
        return obj(s, i, lambda _k, j: value(s, j)[1])[1]
    return value(s, i)[1]


def skip_element(s: str, i: int) -> int:
    """An array element: a run of samples, or one value parsed and dropped."""
    m = _RUN.match(s, i)
    return m.end() if m else value(s, i)[1]


def array(s: str, i: int, element: Callable[[str, int], int]) -> int:
    """Walk the array at ``i`` (``s[i] == '['``), ``element(s, j)`` returning each
    element's end (it may take several: a run); returns the array's end.
    Mirrors :func:`json.decoder.JSONArray` (same errors, same positions).
    """
    end = _ws(s, i + 1)
    if s.startswith("]", end):
        return end + 1
    while True:
        end = _ws(s, element(s, end))
        nxt = s[end : end + 1]
        end += 1
        if nxt == "]":
            return end
        if nxt != ",":
            raise _error(_COMMA, s, end - 1)
        end = _ws(s, end)


def obj(
    s: str, i: int, member: Callable[[str, int], int]
) -> tuple[dict[str, tuple[int, int]], int]:
    """Walk the object at ``i`` (``s[i] == '{'``): ``member(key, j)`` returns the end of
    each value. Returns where the last occurrence of each key's value starts, and the
    object's end (each as ``(start, end)``). Mirrors :func:`json.decoder.JSONObject`.
    """
    where: dict[str, tuple[int, int]] = {}
    end = _ws(s, i + 1)
    nxt = s[end : end + 1]
    if nxt != '"':
        if nxt == "}":
            return where, end + 1
        raise _error(_NAME, s, end)
    end += 1
    while True:
        key, end = json.decoder.scanstring(s, end, True)  # type: ignore[attr-defined]
        if s[end : end + 1] != ":":
            end = _ws(s, end)
            if s[end : end + 1] != ":":
                raise _error(_COLON, s, end)
        end = _ws(s, end + 1)
        start, end = end, member(key, end)
        where[key] = (start, end)
        end = _ws(s, end)
        nxt = s[end : end + 1]
        end += 1
        if nxt == "}":
            return where, end
        if nxt != ",":
            raise _error(_COMMA, s, end - 1)
        end = _ws(s, end)
        nxt = s[end : end + 1]
        end += 1
        if nxt != '"':
            raise _error(_NAME, s, end - 1)


Where = dict[str, tuple[int, int]]


def document(s: str) -> tuple[Where, Where | None]:
    """Check the whole answer's syntax (as json.loads would) without keeping its values.
    Returns where each top-level key's value lies (its last occurrence) and, when the
    last ``data`` is an object, where each of its keys' values lies; Unmodelled when the
    answer is not an object.
    """
    i = _ws(s, 0)
    if not s.startswith("{", i):
        end = skip(s, i)
        _trailing(s, end)
        raise Unmodelled
    data: list[Where | None] = [None]

    def member(key: str, j: int) -> int:
        if key != "data":
            return skip(s, j)
        if not s.startswith("{", j):
            data[0] = None
            return skip(s, j)
        keys, end = obj(s, j, lambda _k, x: skip(s, x))
        data[0] = keys
        return end

    where, end = obj(s, i, member)
    _trailing(s, end)
    return where, data[0]


def _trailing(s: str, end: int) -> None:
    end = _ws(s, end)
    if end != len(s):
        raise _error(_EXTRA, s, end)


@dataclass
class Samples:
    """Samples gathered for one chunk: runs of well-formed samples as text, and the
    elements parsed one by one (their time and value as parsed JSON values).
    """

    run_sid: list[int] = field(default_factory=list)
    run_first: list[int] = field(default_factory=list)
    run_text: list[str] = field(default_factory=list)
    one_sid: list[int] = field(default_factory=list)
    one_no: list[int] = field(default_factory=list)
    one_time: list[Any] = field(default_factory=list)
    one_value: list[Any] = field(default_factory=list)
    chars: int = 0
    count: int = 0
    """Samples (well-formed pairs) gathered."""

    def clear(self) -> None:
        """Empty the chunk (its samples were turned into columns); ``count`` stays."""
        for part in (
            self.run_sid,
            self.run_first,
            self.run_text,
            self.one_sid,
            self.one_no,
            self.one_time,
            self.one_value,
        ):
            part.clear()
        self.chars = 0

    def __len__(self) -> int:
        return len(self.run_sid) + len(self.one_sid)


def values(
    s: str,
    i: int,
    sid: int,
    into: Samples,
    reject: Callable[[int, object], None],
    flush: Callable[[], None],
) -> int:
    """Walk one series' ``values`` array at ``i`` into ``into``; an element that is not
    a ``[time, value]`` pair goes to ``reject(sample_no, element)``; ``flush()`` after
    each run or element lets the caller empty a full chunk (one series may be the whole
    answer). Returns the number of elements.
    """
    n = 0

    def element(s: str, j: int) -> int:
        nonlocal n
        m = _RUN.match(s, j)
        if m:
            text = m.group()
            into.run_sid.append(sid)
            into.run_first.append(n + 1)
            into.run_text.append(text)
            into.chars += len(text)
            pairs = text.count('"') // 2  # no quote inside a run's strings: two per sample
            n += pairs
            into.count += pairs
            flush()
            return m.end()
        p, end = value(s, j)
        n += 1
        if isinstance(p, list) and len(p) == 2:
            into.one_sid.append(sid)
            into.one_no.append(n)
            into.one_time.append(p[0])
            into.one_value.append(p[1])
            into.count += 1
        else:
            reject(n, p)
        flush()
        return end

    array(s, i, element)
    return n


def run_columns(runs: pl.DataFrame) -> pl.DataFrame:
    """``_sid, _first, _run`` (one row per run) -> one row per sample: ``_sid``,
    ``_sample_no``, ``_t`` (the time literal), ``_tkind`` and ``_v`` (the string's
    content), split by polars (no Python object per sample).
    """
    tokens = pl.col("_run").str.extract_all(_TOKEN)
    return (
        runs.lazy()
        .with_row_index("_r")
        .select(
            "_r",
            "_sid",
            "_first",
            tokens.list.gather_every(2).alias("_t"),
            tokens.list.gather_every(2, offset=1).alias("_v"),
        )
        .explode("_t", "_v")
        .select(
            pl.col("_sid").cast(pl.Int64),
            (pl.col("_first") + pl.int_range(pl.len()).over("_r"))
            .cast(pl.Int64)
            .alias("_sample_no"),
            pl.col("_t"),
            pl.when(pl.col("_t").str.contains(r"[.eE]"))
            .then(pl.lit(T_FLOAT, pl.Int8))
            .otherwise(pl.lit(T_INT, pl.Int8))
            .alias("_tkind"),
            pl.col("_v").str.slice(1, pl.col("_v").str.len_chars() - 2),
        )
        .collect()
    )
