"""Byte- and line/field-level mutators for the ingest fuzz campaign (``bench/fuzz.py``).

Every mutator is a pure function ``(data, rng) -> data``: the same input and the same
``random.Random`` state give the same output, so a campaign is reproducible from its
seed. Sizes are capped (``MAX_BYTES``) so one case stays small and fast.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable

MAX_BYTES = 64 * 1024
"""No mutated input grows past this (huge-line inserts are clipped to it)."""

Mutator = Callable[[bytes, random.Random], bytes]

EXTREMES = (
    b"9223372036854775808",
    b"-9223372036854775809",
    b"1e300",
    b"-1e300",
    b"-1",
    b"0",
    b"nan",
    b"NaN",
    b"inf",
    b"-inf",
    b"1e-320",
    b"9999-12-31 23:59:59",
    b"0000-00-00 00:00:00",
    b"2017-03-12 02:30:00",
    b"",
    b"None",
    b"null",
    b"N/A",
    b"[N/A]",
    b"-",
    b"0x",
    b"0xFFFFFFFFFFFFFFFFFFFF",
    b"1" * 40,
    b"79.5",  # a fractional XID (issue 25)
    b"1.5",  # a fractional GPU index
    b"1e10",  # 1e10 GB of memory: past int64 bytes
)
GARBAGE = (
    b"\x00\x01\x02",
    b"\xff\xfe\xfd",
    b"\xc3\x28",
    b"\xed\xa0\x80",
    b'"unterminated, quote',
    b"{[(<",
    b"}])>",
    b",,,,,,,,",
    b"\t\t\t",
    b"#",
    b"# gpu pwr",
    b"#Entity",
    b"\r",
    b"\\",
    "\u2028\u00e9\U0001f600".encode(),
)
DELIMS = (b",", b"\t", b" ", b'"', b"'", b"[", b"]", b"{", b"}", b":", b";", b"|", b"=", b"#")
_NUMBER = re.compile(rb"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_FIELD_SEP = re.compile(rb"[,\t]| +")


def _lines(data: bytes) -> list[bytes]:
    r"""Physical lines with their ``\n`` kept, so joining gives the input back."""
    return data.splitlines(keepends=True) if data else []


def _cap(data: bytes) -> bytes:
    return data[:MAX_BYTES]


def bit_flip(data: bytes, rng: random.Random) -> bytes:
    """Flip 1-4 random bits: storage or transfer corruption (a byte is made up for an empty file)."""
    if not data:
        return bytes([rng.randrange(256)])
    buf = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(buf))
        buf[i] ^= 1 << rng.randrange(8)
    return bytes(buf)


def byte_replace(data: bytes, rng: random.Random) -> bytes:
    """Overwrite one byte with a random one."""
    if not data:
        return data
    buf = bytearray(data)
    buf[rng.randrange(len(buf))] = rng.randrange(256)
    return bytes(buf)


def truncate(data: bytes, rng: random.Random) -> bytes:
    """Cut the file at a random point: an incomplete copy."""
    return data[: rng.randint(0, len(data))] if data else data


def truncate_tail(data: bytes, rng: random.Random) -> bytes:
    """Cut within the last few bytes: a file whose writer died mid-line."""
    return data[: max(0, len(data) - rng.randint(1, 40))]


def duplicate_line(data: bytes, rng: random.Random) -> bytes:
    """Repeat one line somewhere else: a writer that retried an append."""
    lines = _lines(data)
    if not lines:
        return data
    i = rng.randrange(len(lines))
    line = lines[i] if lines[i].endswith(b"\n") else lines[i] + b"\n"
    lines.insert(rng.randrange(len(lines) + 1), line)
    if not lines[-2].endswith(b"\n"):
        lines[-2] += b"\n"
    return _cap(b"".join(lines))


def delete_line(data: bytes, rng: random.Random) -> bytes:
    """Drop one line (the header too, sometimes)."""
    lines = _lines(data)
    if not lines:
        return data
    del lines[rng.randrange(len(lines))]
    return b"".join(lines)


def swap_lines(data: bytes, rng: random.Random) -> bytes:
    """Swap two lines: out-of-order records, or the header moved into the data."""
    lines = [ln.rstrip(b"\n") for ln in _lines(data)]
    if len(lines) < 2:
        return data
    i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
    lines[i], lines[j] = lines[j], lines[i]
    return b"\n".join(lines) + (b"\n" if data.endswith(b"\n") else b"")


def insert_garbage_line(data: bytes, rng: random.Random) -> bytes:
    """Insert a line of random junk fragments."""
    lines = _lines(data)
    junk = b"".join(rng.choice(GARBAGE) for _ in range(rng.randint(1, 4))) + b"\n"
    lines.insert(rng.randint(0, len(lines)), junk)
    out = b"".join(
        ln if ln.endswith(b"\n") or k == len(lines) - 1 else ln + b"\n"
        for k, ln in enumerate(lines)
    )
    return _cap(out)


def insert_huge_line(data: bytes, rng: random.Random) -> bytes:
    """Insert one line of 4-40 kB: parsers with line-length or field-size limits."""
    lines = _lines(data)
    size = rng.choice((4097, 10_000, 40_000))
    unit = rng.choice((b"x", b"9", b",", b"\t", b" ", b"a,1,"))
    huge = (unit * (size // len(unit) + 1))[:size] + b"\n"
    at = rng.randint(0, len(lines))
    if at and not lines[at - 1].endswith(b"\n"):
        lines[at - 1] += b"\n"
    lines.insert(at, huge)
    return _cap(b"".join(lines))


def deep_nesting(data: bytes, rng: random.Random) -> bytes:
    """Insert 500-3,000 nested ``[`` / ``{"a":`` levels (closed or not) at a random point:
    JSON readers that recurse (Python's json: ~1,000 levels) and everything that prints
    the parsed value back.
    """
    depth = rng.choice((500, 970, 1100, 3000))
    opener, closer = rng.choice(((b"[", b"]"), (b'{"a":', b"}")))
    closed = rng.random() < 0.7
    blob = opener * depth + ((b"1" + closer * depth) if closed else b"")
    at = rng.randint(0, len(data))
    return _cap(data[:at] + blob + data[at:])


_OFFSET = re.compile(rb"(?<=\d\d:\d\d:\d\d)(?:\.\d+)?(?:[+-]\d\d:?\d\d|Z)")
ODD_OFFSETS = (b"+99:99", b"+24:00", b"-00:60", b"+14:01", b"+0800", b"-23:59", b"Z")


def odd_offset(data: bytes, rng: random.Random) -> bytes:
    """Replace one UTC offset after a time (``+08:00``, ``Z``) with an odd or impossible
    one (``+99:99``), or give an offset-less time one.
    """
    hits = list(_OFFSET.finditer(data))
    if not hits:
        times = list(re.finditer(rb"\d\d:\d\d:\d\d", data))
        if not times:
            return data
        t = rng.choice(times)
        return data[: t.end()] + rng.choice(ODD_OFFSETS) + data[t.end() :]
    m = rng.choice(hits)
    return data[: m.start()] + rng.choice(ODD_OFFSETS) + data[m.end() :]


def insert_delimiter(data: bytes, rng: random.Random) -> bytes:
    """Insert 1-3 delimiter or quote characters: shifted or split fields."""
    if not data:
        return rng.choice(DELIMS)
    i = rng.randint(0, len(data))
    return data[:i] + rng.choice(DELIMS) * rng.randint(1, 3) + data[i:]


def delete_delimiter(data: bytes, rng: random.Random) -> bytes:
    """Delete 1-3 delimiter or quote characters: merged fields, unbalanced quotes."""
    positions = [i for i, b in enumerate(data) if bytes([b]) in DELIMS]
    if not positions:
        return data
    for i in sorted(rng.sample(positions, min(len(positions), rng.randint(1, 3))), reverse=True):
        data = data[:i] + data[i + 1 :]
    return data


def extreme_number(data: bytes, rng: random.Random) -> bytes:
    """Replace 1-3 numbers with extreme or non-numbers: int64 overflow, +-1e300,
    NaN, inf, an impossible date, null spellings (``None``, ``N/A``, ``-``), hex.
    """
    spans = [m.span() for m in _NUMBER.finditer(data)]
    if not spans:
        return data
    for a, b in sorted(rng.sample(spans, min(len(spans), rng.randint(1, 3))), reverse=True):
        data = data[:a] + rng.choice(EXTREMES) + data[b:]
    return data


_DATE = re.compile(
    rb"\d{4}-\d{2}-\d{2}(?:[ T]\d{2}:\d{2}(?::\d{2})?(?:\.\d+)?)?|\d{4}/\d{2}/\d{2}|\d{8}"
)
DATES = (
    b"9999-12-31 23:59:59",
    b"9999-12-31",
    b"0001-01-01 00:00:00",
    b"1677-09-21 00:12:43",
    b"2262-04-11 23:47:17",
    b"2017-02-30 00:00:00",
    b"2017-11-05 01:30:00",
    b"2017-03-12 02:30:00",
    b"99991231",
    b"2020-13-01",
    b"",
)


def extreme_date(data: bytes, rng: random.Random) -> bytes:
    """Replace a date or date-time with an out-of-range, invalid or DST-edge one."""
    spans = [m.span() for m in _DATE.finditer(data)]
    if not spans:
        return extreme_number(data, rng)
    for a, b in sorted(rng.sample(spans, min(len(spans), rng.randint(1, 2))), reverse=True):
        data = data[:a] + rng.choice(DATES) + data[b:]
    return data


def empty_field(data: bytes, rng: random.Random) -> bytes:
    """Blank one field of one line (between two separators)."""
    lines = _lines(data)
    if not lines:
        return data
    i = rng.randrange(len(lines))
    body, nl = (lines[i][:-1], b"\n") if lines[i].endswith(b"\n") else (lines[i], b"")
    seps = [m.span() for m in _FIELD_SEP.finditer(body)]
    if not seps:
        lines[i] = nl
        return b"".join(lines)
    edges = [0, *[s[1] for s in seps]]
    ends = [*[s[0] for s in seps], len(body)]
    k = rng.randrange(len(edges))
    lines[i] = body[: edges[k]] + body[ends[k] :] + nl
    return b"".join(lines)


def add_bom(data: bytes, rng: random.Random) -> bytes:
    """Prefix a UTF-8 byte-order mark, as spreadsheet exports do."""
    return b"\xef\xbb\xbf" + data


def to_crlf(data: bytes, rng: random.Random) -> bytes:
    """Windows line ends on every line."""
    return data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")


def mixed_crlf(data: bytes, rng: random.Random) -> bytes:
    """Windows line ends on about half the lines."""
    lines = _lines(data)
    return b"".join(
        ln[:-1] + b"\r\n" if ln.endswith(b"\n") and rng.random() < 0.5 else ln for ln in lines
    )


def invalid_utf8(data: bytes, rng: random.Random) -> bytes:
    """Insert an invalid UTF-8 sequence (stray, truncated or surrogate bytes)."""
    i = rng.randint(0, len(data))
    return (
        data[:i] + rng.choice((b"\xff", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80", b"\x80")) + data[i:]
    )


def damage_header(data: bytes, rng: random.Random) -> bytes:
    """Rename, drop or duplicate one name of the first line."""
    lines = _lines(data)
    if not lines:
        return data
    head, nl = (lines[0][:-1], b"\n") if lines[0].endswith(b"\n") else (lines[0], b"")
    sep = b"," if b"," in head else (b"\t" if b"\t" in head else b" ")
    names = head.split(sep)
    k = rng.randrange(len(names))
    choice = rng.randrange(4)
    if choice == 0:
        names[k] = names[k] + b"_x"
    elif choice == 1 and len(names) > 1:
        del names[k]
    elif choice == 2:
        names.insert(k, names[k])
    else:
        names[k] = names[k].upper()
    lines[0] = sep.join(names) + nl
    return b"".join(lines)


def reorder_columns(data: bytes, rng: random.Random) -> bytes:
    """Swap two columns in every line (header included): a valid file with another order."""
    lines = _lines(data)
    if not lines:
        return data
    head = lines[0]
    sep = b"," if b"," in head else (b"\t" if b"\t" in head else None)
    if sep is None:
        return data
    n = len(head.rstrip(b"\r\n").split(sep))
    if n < 2:
        return data
    i, j = rng.sample(range(n), 2)
    out = []
    for ln in lines:
        body = ln.rstrip(b"\r\n")
        tail = ln[len(body) :]
        parts = body.split(sep)
        if len(parts) > max(i, j):
            parts[i], parts[j] = parts[j], parts[i]
        out.append(sep.join(parts) + tail)
    return b"".join(out)


def blank_lines(data: bytes, rng: random.Random) -> bytes:
    """Insert one blank or whitespace-only line."""
    lines = _lines(data)
    lines.insert(rng.randint(0, len(lines)), rng.choice((b"\n", b"   \n", b"\r\n", b"\t\n")))
    if len(lines) > 1 and not lines[-2].endswith(b"\n"):
        lines[-2] += b"\n"
    return b"".join(lines)


def empty_file(data: bytes, rng: random.Random) -> bytes:
    """An empty file, or one holding only a line end or a byte-order mark."""
    return rng.choice((b"", b"\n", b"\xef\xbb\xbf", b"\r\n"))


def header_only(data: bytes, rng: random.Random) -> bytes:
    """Keep the first line only: a header with no records."""
    lines = _lines(data)
    return lines[0] if lines else data


MUTATORS: dict[str, Mutator] = {
    "bit_flip": bit_flip,
    "byte_replace": byte_replace,
    "truncate": truncate,
    "truncate_tail": truncate_tail,
    "duplicate_line": duplicate_line,
    "delete_line": delete_line,
    "swap_lines": swap_lines,
    "insert_garbage_line": insert_garbage_line,
    "insert_huge_line": insert_huge_line,
    "deep_nesting": deep_nesting,
    "odd_offset": odd_offset,
    "insert_delimiter": insert_delimiter,
    "delete_delimiter": delete_delimiter,
    "extreme_number": extreme_number,
    "extreme_date": extreme_date,
    "empty_field": empty_field,
    "add_bom": add_bom,
    "to_crlf": to_crlf,
    "mixed_crlf": mixed_crlf,
    "invalid_utf8": invalid_utf8,
    "damage_header": damage_header,
    "reorder_columns": reorder_columns,
    "blank_lines": blank_lines,
    "empty_file": empty_file,
    "header_only": header_only,
}
"""Every mutator by name (the name is recorded with each case)."""

_RARE = {"empty_file", "header_only", "insert_huge_line", "deep_nesting"}


def mutate(data: bytes, rng: random.Random) -> tuple[bytes, list[str]]:
    """Apply 1-3 mutators (the rare, destructive ones less often); returns the new bytes
    and the names applied, in order.
    """
    names = [n for n in MUTATORS if n not in _RARE]
    applied: list[str] = []
    for _ in range(rng.choice((1, 1, 1, 2, 2, 3))):
        name = rng.choice(sorted(_RARE)) if rng.random() < 0.08 else rng.choice(names)
        data = _cap(MUTATORS[name](data, rng))
        applied.append(name)
    return data, applied
