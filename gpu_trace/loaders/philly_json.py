"""Philly's ``cluster_job_log``: one JSON array of job records, read without ``json.load``.

The real file is a single JSON array of hundreds of MB. Loading it with ``json.load``
builds millions of Python objects, and one broken byte loses the whole file. Instead
every record keeps its own number and raw text, so a bad record can be quarantined
alone:

1. :func:`read_records` turns the array into one row per record (``_record``,
   ``_raw``). A streaming pass first hashes the file, checks that it is UTF-8 and
   checks that it starts with ``[``. A well-formed file (the normal case) is then
   split by DuckDB's ``read_json_objects(format='array')`` (C++, about 100 MB/s).
   Otherwise :func:`split_array` does it. It streams the bytes in chunks and uses
   numpy to find the top-level commas (outside strings, at bracket depth 1) and
   resynchronizes at every job-object start (below), so the records around a broken
   one survive.
2. :func:`decode_records` validates and types every record in one DuckDB query.
   Well-formed records take the fast path: ``TRY(json_transform_strict(...))`` checks
   the JSON types in one parse (but it writes a number or boolean given for a string
   field as text, ``42`` -> ``'42'``, where the field-by-field query says "jobid is a
   number": a known difference between the two paths). Only the records it rejects are examined field by
   field with ``json_type``, which finds the reason. This per-row work is needed
   because polars' ``str.json_decode`` fails the whole column on one bad record and
   quietly turns a number into a string. The good records come back as polars nested
   types. On the fast path the text of a record leaves DuckDB only where the strict
   decode refused it; a record that a later check rejects (a bad time or GPU id) has
   its text read again by record number (:func:`raw_text`), so that a clean log's
   bytes are not copied a second time.

Record numbers are **1-based** (``record 1`` is the first element of the array), in
line with the 1-based ``line N`` of the CSV loaders. A quarantined record's raw text
is the element as written, without the whitespace around it. The numpy split also
turns line breaks inside a record into spaces, so that each record fits on one line.

**Resynchronization.** A record normally starts with a *job-object start*: ``{``, at
most 64 blanks, then the key ``"status"`` (the documented first key) or ``"jobid"``.
In valid JSON those bytes can only be the start of an object with that first key
(inside a string the ``"`` would end the string), and Philly objects with those keys
exist only at the top level. So the fallback split also ends a record at every job-object
start: the string and bracket state is reset there, and one broken record (a missing
``]``, ``}`` or quote) is quarantined alone, with a reason naming what was left open,
instead of swallowing every record after it. Text between a record separator and a job
start (garbage, a missing comma) becomes its own record; a blank one is dropped.
The closing ``]`` is looked for only after the last job start.

**Independent count.** :func:`count_job_starts` counts job-object starts with a byte
regex, without parsing. The records read are that count plus the parser's records that
do not start with a job start (``42``, a stray comma, garbage). If the parser's records
that start with a job start are fewer than the count (records merged), the ingest
fails naming the record that holds the extra start.

Whole-file problems raise :class:`InputError` with a byte offset (0-based) or record
number. These are: no ``[`` at the start, an empty file, a bracket that closes the array
with the wrong kind, data after the closing ``]``, and a file that ends before the array
is closed (a truncated download: its tail cannot be recovered, so nothing is written).
A UTF-8 byte-order mark before the ``[`` is skipped.
"""

from __future__ import annotations

import codecs
import hashlib
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, TextIO

import numpy as np
import numpy.typing as npt
import polars as pl

from gpu_trace.errors import InputError
from gpu_trace.loaders.textfile import RAW, RAW_LIMIT, REASON, FileInfo

RECORD = "_record"
"""Column with the 1-based position of a record in the array."""
HINT = "_hint"
"""Column with why the scanner cut a record short (null for most records)."""

_CHUNK = 1 << 24
_QUOTE, _BACKSLASH = ord('"'), ord("\\")
_LBRACE, _RBRACE, _LBRACKET, _RBRACKET = ord("{"), ord("}"), ord("["), ord("]")
_COMMA, _LF, _CR, _SPACE = ord(","), ord("\n"), ord("\r"), ord(" ")
_BOM = b"\xef\xbb\xbf"

_SPECIAL = np.zeros(256, dtype=bool)
_SPECIAL[[_QUOTE, _LBRACE, _RBRACE, _LBRACKET, _RBRACKET, _COMMA, _LF, _CR]] = True
_BLANK = np.zeros(256, dtype=bool)
_BLANK[[_SPACE, ord("\t"), _LF, _CR]] = True
_DELTA = np.zeros(256, dtype=np.int64)
_DELTA[[_LBRACE, _LBRACKET]] = 1
_DELTA[[_RBRACE, _RBRACKET]] = -1


def _escaped(
    buf: npt.NDArray[np.uint8], quotes: npt.NDArray[np.int64], carry: int
) -> npt.NDArray[np.bool_]:
    """Which quotes are escaped: preceded by an odd run of backslashes. The run is
    counted with one vectorized step per backslash of run length, so a clean chunk
    costs a single comparison.
    """
    run = np.zeros(len(quotes), dtype=np.int64)
    active = np.ones(len(quotes), dtype=bool)
    k = 1
    while active.any():
        idx = quotes - k
        inside = idx >= 0
        at_start = active & ~inside
        run[at_start] += carry
        hit = np.zeros(len(quotes), dtype=bool)
        hit[inside] = buf[idx[inside]] == _BACKSLASH
        active &= inside & hit
        run[active] += 1
        k += 1
    return (run & 1).astype(bool)


def _last(mask: npt.NDArray[np.bool_]) -> int:
    """Index of the last True in ``mask``, -1 if none (argmax on the reversed view:
    no index array as long as the chunk).
    """
    if len(mask) == 0:
        return -1
    back = int(np.argmax(mask[::-1]))
    return -1 if not mask[len(mask) - 1 - back] else len(mask) - 1 - back


def _trailing_backslashes(buf: npt.NDArray[np.uint8], carry: int) -> int:
    other = _last(buf != _BACKSLASH)
    if other < 0:
        return carry + len(buf)
    return len(buf) - 1 - other


_GAP = 64
"""Most blanks allowed between ``{`` and the key of a job-object start."""
_KEYS = (b'"status"', b'"jobid"')
_START_MAX = 1 + _GAP + max(len(k) for k in _KEYS)
"""Longest job-object start in bytes (the overlap carried between chunks)."""
_JOB_START = re.compile(rb'\{[ \t\r\n]{0,%d}"(?:status|jobid)"' % _GAP)
"""Byte regex of a job-object start, for the independent count."""
_ANY_JOB_START = r"\{[ \t\r\n]{0," + str(_GAP) + r'}"(?:status|jobid)"'
"""The same, as a polars regex."""
JOB_START_PREFIX = r"^[ \t\r\n]*" + _ANY_JOB_START
"""A record text that starts with a job-object start."""


def count_job_starts(chunks: list[bytes], tail: bytes) -> tuple[int, bytes]:
    """Count job-object starts in ``chunks`` (consecutive pieces of one file; ``tail``
    is the end of the piece before them, from the previous call). Returns the count
    and the new tail. A start that straddles two pieces is counted once: each window
    counts its matches minus those lying wholly in the carried tail.
    """
    count = 0
    for chunk in chunks:
        window = tail + chunk
        count += len(_JOB_START.findall(window)) - len(_JOB_START.findall(tail))
        tail = window[-_START_MAX:]
    return count, tail


def _starts_in(buf: npt.NDArray[np.uint8]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Start and end offsets of the job-object starts wholly inside ``buf``: numpy, one
    vectorized step per blank skipped (a second implementation of :data:`_JOB_START`,
    so the scanner and the count check each other).
    """
    opens = np.flatnonzero(buf == _LBRACE).astype(np.int64)
    key = opens + 1
    for _ in range(_GAP):
        inside = key < len(buf)
        blank = np.zeros(len(opens), dtype=bool)
        blank[inside] = _BLANK[buf[key[inside]]]
        step = blank
        if not step.any():
            break
        key[step] += 1
    found = np.zeros(len(opens), dtype=bool)
    ends = key.copy()
    for word in _KEYS:
        ok = key + len(word) <= len(buf)
        for i, byte in enumerate(word):
            hit = np.zeros(len(opens), dtype=bool)
            hit[ok] = buf[key[ok] + i] == byte
            ok &= hit
        found |= ok
        ends[ok] = key[ok] + len(word)
    return opens[found], ends[found]


def job_start_offsets(path: Path) -> npt.NDArray[np.int64]:
    """Byte offsets of every job-object start in ``path`` (streamed in chunks)."""
    found: list[npt.NDArray[np.int64]] = []
    tail = np.zeros(0, dtype=np.uint8)
    size = 0
    try:
        with path.open("rb") as src:
            while chunk := src.read(_CHUNK):
                window = np.concatenate([tail, np.frombuffer(chunk, dtype=np.uint8)])
                starts, ends = _starts_in(window)
                found.append(starts[ends > len(tail)] + (size - len(tail)))
                size += len(chunk)
                tail = window[-_START_MAX:]
    except OSError as exc:
        raise InputError(path, exc.strerror or str(exc)) from None
    return np.concatenate(found) if found else np.zeros(0, dtype=np.int64)


@dataclass(frozen=True)
class SplitArray:
    """The result of :func:`split_array`."""

    info: FileInfo
    """The job log itself; ``records`` is the number of elements in the array."""
    lines: Path
    """Temporary file with one line per piece of the array (newlines inside a record
    replaced by spaces, invalid UTF-8 by U+FFFD); blank pieces before a job start are
    dropped from ``frame``."""
    frame: pl.DataFrame
    """``_record`` (1-based), ``_raw`` and ``_hint`` (why the record was cut short at
    the next job start, else null)."""
    job_starts: int
    """Job-object starts the scanner found (numpy), for the count check."""
    closed: bool = True
    """Always true: a file whose array is not closed is an InputError."""


@dataclass
class _State:
    """What the scan carries from one chunk to the next."""

    depth: int = 1
    in_string: bool = False
    backslashes: int = 0
    """Backslashes that end the previous chunk (they may escape a quote in this one)."""
    separators: int = 0
    """Record boundaries so far: top-level commas and job starts."""
    last_separator: int = -1
    last_nonblank: int = -1
    closed_at: int = -1
    last_start: int = -1
    """Offset of the file's last job start: the array can only close after it."""
    start_lines: list[npt.NDArray[np.int64]] = field(default_factory=list)
    """Per chunk: the line each job start ends (0-based), dropped when blank."""
    hint_lines: list[npt.NDArray[np.int64]] = field(default_factory=list)
    hints: list[str] = field(default_factory=list)


def _hint(in_string: bool, depth: int, at: int) -> str:
    """Why a record was cut short at the job start at byte ``at``."""
    what = (
        "an unclosed string (a missing quote?)"
        if in_string
        else "an unclosed bracket (a missing ] or }?)"
        if depth > 1
        else "an extra ] or }"
    )
    return f"broken record: {what}; the next job object starts at byte {at}"


def _scan_chunk(
    buf: npt.NDArray[np.uint8],
    base: int,
    state: _State,
    path: Path,
    starts: npt.NDArray[np.int64],
) -> npt.NDArray[np.uint8]:
    """Scan one chunk (``base`` = its byte offset in the file; ``starts`` = the job
    starts in it, absolute) and return it rewritten as record lines: top-level commas
    become newlines, a newline is inserted before every job start, other line breaks
    become spaces, and the closing bracket and everything after it are cut off.

    The string and depth state restart at each job start, so every piece between two
    starts is scanned on its own (segment 0 continues the previous chunk's state).
    """
    out = buf.copy()
    local = starts - base
    pos = np.flatnonzero(_SPECIAL[buf])
    ch = buf[pos]
    is_quote = ch == _QUOTE
    real_quote = is_quote.copy()
    if is_quote.any():
        quotes = pos[is_quote]
        real_quote[is_quote] = ~_escaped(buf, quotes, state.backslashes)
    seg = np.searchsorted(local, pos, side="right")
    at = np.searchsorted(pos, local)  # each start's "{" in pos
    q_excl = np.cumsum(real_quote, dtype=np.int64) - real_quote
    q_base = np.concatenate([[0], q_excl[at]]).astype(np.int64)
    q_init = np.zeros(len(local) + 1, dtype=np.int64)
    q_init[0] = int(state.in_string)
    in_string = ((q_excl - q_base[seg] + q_init[seg]) & 1).astype(bool)
    structural = ~in_string & ~is_quote
    delta = np.where(structural, _DELTA[ch], 0)
    d_excl = np.cumsum(delta) - delta
    d_base = np.concatenate([[0], d_excl[at]]).astype(np.int64)
    d_init = np.ones(len(local) + 1, dtype=np.int64)
    d_init[0] = state.depth
    depth = d_init[seg] + d_excl - d_base[seg] + delta
    # The state just before each job start: not (depth 1, outside strings) = broken.
    before_depth = d_init[:-1] + d_excl[at] - d_base[:-1]
    before_string = ((q_init[:-1] + q_excl[at] - q_base[:-1]) & 1).astype(bool)
    breaks = (ch == _LF) | (ch == _CR)
    out[pos[breaks]] = _SPACE
    closing = np.flatnonzero(
        structural & (delta < 0) & (depth == 0) & (pos + base > state.last_start)
    )
    end = len(buf)
    if len(closing):
        first = int(closing[0])
        if ch[first] != _RBRACKET:
            raise InputError(
                path,
                f"mismatched {chr(ch[first])!r} closes the JSON array",
                f"byte {base + int(pos[first])}",
            )
        end = int(pos[first])
        state.closed_at = base + end
        rest = buf[end + 1 :]
        extra = np.flatnonzero(~_BLANK[rest])
        if len(extra):
            raise InputError(
                path,
                "unexpected data after the end of the JSON array",
                f"byte {base + end + 1 + int(extra[0])}",
            )
        keep = pos < end
        pos, ch, structural, depth = pos[keep], ch[keep], structural[keep], depth[keep]
    seps = pos[structural & (ch == _COMMA) & (depth == 1)]
    out[seps] = _LF
    lines = state.separators + np.searchsorted(seps, local) + np.arange(len(local))
    state.start_lines.append(lines)
    broken = (before_depth != 1) | before_string
    if broken.any():
        state.hint_lines.append(lines[broken])
        state.hints += [
            _hint(bool(s), int(d), base + int(m))
            for s, d, m in zip(
                before_string[broken], before_depth[broken], local[broken], strict=True
            )
        ]
    state.separators += len(seps) + len(local)
    last = max(int(seps[-1]) if len(seps) else -1, int(local[-1]) - 1 if len(local) else -1)
    if last >= 0:
        state.last_separator = base + last
    nonblank = _last(~_BLANK[out[:end]])
    if nonblank >= 0:
        state.last_nonblank = base + nonblank
    if len(depth):
        state.depth = int(depth[-1])
    if len(pos):
        state.in_string = bool(in_string[-1] ^ real_quote[-1])
    state.backslashes = _trailing_backslashes(buf, state.backslashes)
    return np.insert(out[:end], local, _LF) if len(local) else out[:end]


def _start(head: bytes, path: Path) -> int | None:
    """Offset just after the opening ``[`` in ``head``, None if ``head`` is all blank
    (read more), InputError if the first non-blank byte is not ``[``.
    """
    body = head[len(_BOM) :] if head.startswith(_BOM) else head
    skip = len(head) - len(body)
    stripped = body.lstrip(b" \t\r\n")
    if not stripped:
        return None
    at = skip + len(body) - len(stripped)
    if stripped[:1] != b"[":
        found = stripped[:20].decode("utf-8", errors="replace")
        raise InputError(path, f"not a JSON array: expected '[', found {found!r}", f"byte {at}")
    return at + 1


def _pieces(lines: Path, total: int, state: _State, path: Path) -> pl.DataFrame:
    """The split lines as records: blank pieces that end at a job start (the space
    between a comma and the job) are dropped, then records are numbered.
    """
    starts = np.concatenate(state.start_lines) if state.start_lines else np.zeros(0, np.int64)
    hint_lines = np.concatenate(state.hint_lines) if state.hint_lines else np.zeros(0, np.int64)
    frame = (
        pl.scan_lines(lines, name=RAW)
        .with_row_index("_line")
        .with_columns(pl.col("_line").cast(pl.Int64))
        .collect()
        .head(total)
    )
    if frame.height != total:
        raise InputError(path, f"found {frame.height} records after splitting, expected {total}")
    hints = pl.DataFrame(
        {"_line": hint_lines, HINT: state.hints}, schema={"_line": pl.Int64, HINT: pl.String}
    )
    blank = pl.col(RAW).str.strip_chars(" \t") == ""
    at_start = np.zeros(frame.height, dtype=bool)
    at_start[starts[starts < frame.height]] = True
    return (
        frame.filter(~(pl.Series(at_start) & blank))
        .join(hints, on="_line", how="left", maintain_order="left")
        .select(pl.int_range(1, pl.len() + 1, dtype=pl.Int64).alias(RECORD), RAW, HINT)
    )


def split_array(path: Path, workdir: Path) -> SplitArray:
    """Split the JSON array in ``path`` into one record per line (see the module doc).

    Streams the file in 16 MiB chunks, so memory stays flat however big the log is.
    """
    starts = job_start_offsets(path)
    state = _State(last_start=int(starts[-1]) if len(starts) else -1)
    lines = workdir / "records.ndjson"
    try:
        with path.open("rb") as src, lines.open("w", encoding="utf-8", newline="") as dst:
            streamed = _split_stream(src, dst, path, starts, state)
    except OSError as exc:
        raise InputError(path, exc.strerror or str(exc)) from None
    frame = _pieces(lines, streamed.total, state, path)
    if state.closed_at < 0:
        raise _unclosed(path, frame, streamed)
    info = FileInfo(path, streamed.sha256, streamed.size, frame.height, streamed.utf8)
    return SplitArray(info, lines, frame, len(starts))


@dataclass(frozen=True)
class _Streamed:
    """What one pass over the job log found besides the record lines it wrote."""

    sha256: str
    size: int
    utf8: bool
    total: int
    """Pieces of the array (0 for ``[]``)."""
    tail_blank: bool
    """Nothing but blanks after the last separator (the file ends between records)."""


class _Utf8:
    """Whether the bytes fed so far (chunk by chunk) are valid UTF-8."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self.valid = True

    def feed(self, chunk: bytes, final: bool = False) -> None:
        """Check the next chunk (``final``: the end of the file, no bytes pending)."""
        if self.valid:
            try:
                self._decoder.decode(chunk, final)
            except UnicodeDecodeError:
                self.valid = False


def _split_stream(
    src: BinaryIO, dst: TextIO, path: Path, starts: npt.NDArray[np.int64], state: _State
) -> _Streamed:
    """Read ``src`` chunk by chunk, writing the record lines to ``dst``: bytes before
    the array's ``[`` are gathered until it is found, bytes after its ``]`` must be
    blank.
    """
    digest = hashlib.sha256()
    utf8 = _Utf8()
    lenient = codecs.getincrementaldecoder("utf-8")(errors="replace")
    size = 0
    started = False
    head = b""
    while chunk := src.read(_CHUNK):
        digest.update(chunk)
        utf8.feed(chunk)
        base = size
        size += len(chunk)
        if state.closed_at >= 0:
            _refuse_trailing(chunk, base, path)
            continue
        if not started:
            head += chunk
            at = _start(head, path)
            if at is None:
                continue
            started = True
            base = size - len(head) + at
            chunk = head[at:]
            state.last_nonblank = base - 1
            state.last_separator = base - 1
        buf = np.frombuffer(chunk, dtype=np.uint8)
        mine = starts[(starts >= base) & (starts < base + len(buf))]
        dst.write(lenient.decode(_scan_chunk(buf, base, state, path, mine).tobytes()))
    dst.write(lenient.decode(b"", final=True))
    utf8.feed(b"", final=True)
    if not started:
        raise InputError(path, "file is empty (expected a JSON array)", "byte 0")
    tail_blank = state.last_nonblank <= state.last_separator
    total = 0 if state.separators == 0 and tail_blank else state.separators + 1
    if total:
        dst.write("\n")
    return _Streamed(digest.hexdigest(), size, utf8.valid, total, tail_blank)


def _refuse_trailing(chunk: bytes, base: int, path: Path) -> None:
    """Only blanks may follow the array's closing ``]``."""
    extra = np.flatnonzero(~_BLANK[np.frombuffer(chunk, dtype=np.uint8)])
    if len(extra):
        raise InputError(
            path, "unexpected data after the end of the JSON array", f"byte {base + int(extra[0])}"
        )


def _unclosed(path: Path, frame: pl.DataFrame, streamed: _Streamed) -> InputError:
    """The error for a file whose array never closes: cut between records, or inside
    one (whose tail is lost).
    """
    size = streamed.size
    if streamed.tail_blank:
        where = f"after record {frame.height - 1 if streamed.total else 0}"
        return InputError(
            path, f"the JSON array is not closed (truncated file?) {where}", f"byte {size}"
        )
    return InputError(
        path,
        "the file ends inside this record before the JSON array is closed "
        "(truncated file?): the tail cannot be recovered",
        f"record {frame.height}, byte {size}",
    )


ATTEMPT_TYPE = pl.Struct(
    {
        "start_time": pl.String,
        "end_time": pl.String,
        "detail": pl.List(pl.Struct({"ip": pl.String, "gpus": pl.List(pl.String)})),
    }
)
RECORD_TYPE = pl.Struct(
    {
        "jobid": pl.String,
        "status": pl.String,
        "vc": pl.String,
        "user": pl.String,
        "submitted_time": pl.String,
        "attempts": pl.List(ATTEMPT_TYPE),
    }
)
"""The decoded shape of one job record (keys not listed here are ignored)."""

_STRUCTURE = (
    '{"jobid": "VARCHAR", "status": "VARCHAR", "vc": "VARCHAR", "user": "VARCHAR", '
    '"submitted_time": "VARCHAR", "attempts": [{"start_time": "VARCHAR", '
    '"end_time": "VARCHAR", "detail": [{"ip": "VARCHAR", "gpus": ["VARCHAR"]}]}]}'
)


def _kind(t: str) -> str:
    """SQL turning a DuckDB JSON type name into the word a user knows."""
    return (
        f"CASE WHEN {t} IN ('UBIGINT', 'BIGINT', 'DOUBLE', 'HUGEINT') THEN 'a number' "
        f"WHEN {t} = 'VARCHAR' THEN 'a string' WHEN {t} = 'ARRAY' THEN 'a list' "
        f"WHEN {t} = 'OBJECT' THEN 'an object' WHEN {t} = 'BOOLEAN' THEN 'a boolean' "
        f"ELSE 'null' END"
    )


def _all(types: str, allowed: tuple[str, ...]) -> str:
    """SQL: every type in the list ``types`` is one of ``allowed``."""
    ok = " OR ".join(f"t = '{a}'" for a in allowed)
    return f"list_bool_and(list_transform({types}, lambda t: {ok}))"


def _checks() -> list[tuple[str, str]]:
    """(SQL condition that is true for a bad record, SQL reason), first match wins."""
    checks: list[tuple[str, str]] = [
        ("trim(txt, ' \t\n\r') = ''", "'empty record (stray comma in the array)'"),
        ("NOT ok", "'not valid JSON'"),
        ("ty <> 'OBJECT'", f"'record is ' || {_kind('ty')} || ', not an object'"),
        ("t_jobid IS NULL", "'jobid is missing'"),
        ("t_jobid <> 'VARCHAR'", f"'jobid is ' || {_kind('t_jobid')} || ', not a string'"),
        ("json_extract_string(j, '$.jobid') = ''", "'jobid is empty'"),
        ("t_attempts IS NULL", "'attempts is missing'"),
        (
            "t_attempts <> 'ARRAY'",
            f"'attempts is ' || {_kind('t_attempts')} || ', not a list'",
        ),
    ]
    for key in ("status", "vc", "user", "submitted_time"):
        checks.append(
            (
                f"t_{key} NOT IN ('VARCHAR', 'NULL')",
                f"'{key} is ' || {_kind(f't_{key}')} || ', not a string'",
            )
        )
    checks += [
        (
            f"NOT {_all('t_att', ('OBJECT',))}",
            "'attempts[' || (list_position(list_transform(t_att, lambda t: t = 'OBJECT'), false)"
            " - 1) || '] is not an object'",
        ),
        (
            f"NOT {_all('t_start', ('VARCHAR', 'NULL'))}",
            "'an attempt start_time is not a string'",
        ),
        (f"NOT {_all('t_end', ('VARCHAR', 'NULL'))}", "'an attempt end_time is not a string'"),
        (
            f"NOT {_all('t_detail', ('ARRAY', 'NULL'))}",
            "'an attempt detail is not a list'",
        ),
        (f"NOT {_all('t_entry', ('OBJECT',))}", "'an attempt detail entry is not an object'"),
        (
            f"NOT {_all('t_ip', ('VARCHAR',))} OR len(t_ip) <> len(t_entry)",
            "'an attempt detail entry has no ip string'",
        ),
        (
            f"NOT {_all('t_gpus', ('ARRAY',))} OR len(t_gpus) <> len(t_entry)",
            "'an attempt detail entry has no gpus list'",
        ),
        (f"NOT {_all('t_gpu', ('VARCHAR',))}", "'a gpu id is not a string'"),
    ]
    return checks


_TYPES = {
    "t_jobid": "$.jobid",
    "t_attempts": "$.attempts",
    "t_status": "$.status",
    "t_vc": "$.vc",
    "t_user": "$.user",
    "t_submitted_time": "$.submitted_time",
    "t_att": "$.attempts[*]",
    "t_start": "$.attempts[*].start_time",
    "t_end": "$.attempts[*].end_time",
    "t_detail": "$.attempts[*].detail",
    "t_entry": "$.attempts[*].detail[*]",
    "t_ip": "$.attempts[*].detail[*].ip",
    "t_gpus": "$.attempts[*].detail[*].gpus",
    "t_gpu": "$.attempts[*].detail[*].gpus[*]",
}


def _query(check_utf8: bool) -> str:
    types = ", ".join(f"json_type(j, '{p}') AS {name}" for name, p in _TYPES.items())
    slow = " ".join(f"WHEN {cond} THEN {why}" for cond, why in _checks())
    hint = f"WHEN {HINT} IS NOT NULL THEN {HINT} "
    bad_utf8 = "WHEN contains(txt, '\ufffd') THEN 'invalid UTF-8' " if check_utf8 else ""
    return f"""
        WITH src AS (
            SELECT {RECORD}, {RAW} AS txt, {HINT} FROM lines
        ), fast AS MATERIALIZED (
            SELECT *, TRY(json_transform_strict(txt, '{_STRUCTURE}')) AS strict FROM src
        ), good AS (
            SELECT {RECORD}, txt, strict, NULL::JSON AS j,
                CASE {hint} {bad_utf8} WHEN strict.jobid = '' THEN 'jobid is empty' END
                    AS {REASON}
            FROM fast WHERE strict IS NOT NULL
        ), parsed AS (
            SELECT {RECORD}, txt, strict, {HINT}, json_valid(txt) AS ok,
                CASE WHEN json_valid(txt) THEN json(txt) END AS j
            FROM fast WHERE strict IS NULL
        ), typed AS (
            SELECT *, json_type(j) AS ty, {types} FROM parsed
        ), bad AS (
            SELECT {RECORD}, txt, strict, j, CASE {hint} {bad_utf8} {slow} END AS {REASON}
            FROM typed
        ), judged AS (
            SELECT * FROM good UNION ALL SELECT * FROM bad
        )
        SELECT {RECORD},
            CASE WHEN {REASON} IS NOT NULL THEN left(trim(txt, ' \t\n\r'), {RAW_LIMIT}) END
                AS {RAW},
            {REASON},
            CASE WHEN {REASON} IS NOT NULL THEN NULL
                WHEN strict IS NOT NULL THEN strict
                ELSE from_json(j, '{_STRUCTURE}') END AS rec
        FROM judged
    """


@dataclass(frozen=True)
class Records:
    """The job log as one row per array element."""

    info: FileInfo
    """The job log itself; ``records`` is the independent count of records read: job
    starts counted in the bytes plus the records that do not start with one."""
    lines: pl.DataFrame
    """``_record`` (1-based), ``_raw`` (the element's text; on the fast path only for
    the records the strict decode refused, null for the others: see
    :func:`raw_text`) and ``_hint`` (the reason a record was cut short at the next
    job start, else null)."""
    closed: bool = True
    """Always true (a file whose array is not closed is an InputError); kept for the
    ``json_array_closed`` metadata."""
    strict: pl.Series | None = None
    """On the fast path: each record decoded with ``json_transform_strict`` (null where
    any JSON type is off), aligned with ``lines``."""


def _precheck(path: Path) -> tuple[str, int, bool, int]:
    """Stream the file once for its sha256 and size, and check that the first
    non-blank byte is ``[`` (InputError otherwise). Also returns whether the last
    non-blank byte is ``]`` and the number of job-object starts (the independent
    count, a byte regex: no parsing). DuckDB accepts an array cut just after a comma,
    so such a file must take the numpy split, which reports the cut. UTF-8 validity is
    left to the split: DuckDB rejects invalid UTF-8, which sends the file to the numpy
    split, and that checks it.
    """
    digest = hashlib.sha256()
    size = starts = 0
    head = tail = carry = b""
    try:
        with path.open("rb") as fh:
            while chunk := fh.read(_CHUNK):
                digest.update(chunk)
                size += len(chunk)
                found, carry = count_job_starts([chunk], carry)
                starts += found
                if len(head) < 4096:
                    head += chunk[:4096]
                tail = (tail + chunk[-4096:])[-4096:]
    except OSError as exc:
        raise InputError(path, exc.strerror or str(exc)) from None
    if _start(head, path) is None and len(head) == size:
        raise InputError(path, "file is empty (expected a JSON array)", "byte 0")
    return digest.hexdigest(), size, tail.rstrip(b" \t\r\n").endswith(b"]"), starts


def _tail_closed(path: Path) -> bool:
    """Whether the last non-blank byte of the file's last 4 KiB is ``]`` (the test
    :func:`_precheck` makes, read from the end alone; False when unreadable: the
    pass then reports why).
    """
    try:
        with path.open("rb") as fh:
            fh.seek(max(path.stat().st_size - 4096, 0))
            return fh.read().rstrip(b" \t\r\n").endswith(b"]")
    except OSError:
        return False


def records_read(path: Path, raw: pl.Series, counted: int, starts: pl.Series | None = None) -> int:
    """Records read = ``counted`` job starts (from the bytes) + the parsed records
    that do not start with one. Raises InputError when the parsed records that do
    start with one are fewer or more than ``counted``: then records were merged (or
    split) and the count of records read would hide it. ``starts`` (whether each
    record starts with a job start) is computed from ``raw`` unless given (the fast
    path's DuckDB pass computes it); ``raw`` is read only when the counts disagree.
    """
    # A record that begins with '{"status"' or '{"jobid"' (every record of a json.dumps
    # log) matches the prefix regex; only the others are run through it.
    if starts is None:
        plain = raw.str.starts_with('{"status"') | raw.str.starts_with('{"jobid"')
        starts = plain.fill_null(False)
        if not starts.all():
            starts = starts | raw.str.contains(JOB_START_PREFIX).fill_null(False)
    found = int(starts.sum())
    if found != counted:
        inside = raw.str.count_matches(_ANY_JOB_START).fill_null(0) - starts.cast(pl.UInt32)
        extra = inside > 0
        merged = extra.arg_max() if extra.any() else None
        raise InputError(
            path,
            f"the file holds {counted} job-object starts but the parser found {found} job "
            "records: record boundaries were lost (a job object inside another?)",
            None if merged is None else f"record {merged + 1}",
        )
    return counted + len(raw) - found


_FAST_QUERY = f"""
    SELECT ordinality AS {RECORD},
        CASE WHEN strict IS NULL OR strict.jobid IS NULL OR strict.jobid = ''
            THEN txt END AS {RAW},
        starts_with(txt, '{{"status"') OR starts_with(txt, '{{"jobid"')
            OR regexp_matches(txt, $2) AS _starts,
        strict AS rec
    FROM (
        SELECT ordinality, json::VARCHAR AS txt,
            TRY(json_transform_strict(json, '{_STRUCTURE}')) AS strict
        FROM read_json_objects($1, format = 'array') WITH ORDINALITY
    )
"""
"""The fast path's one pass: record number, text only where the strict decode failed,
whether the text starts with a job-object start (:data:`JOB_START_PREFIX`, for the
count check) and the decoded record."""


def _fetch_raw(path: Path, wanted: pl.Series | None) -> pl.DataFrame:
    """``_record`` and ``_raw`` (the element's text) of the records numbered ``wanted``
    (all when None), read again with DuckDB. Only the fast path needs it: for records a
    later check rejects, and for the count check's error message.
    """
    import duckdb  # loaded when a file is read, not with the plugin list

    con = duckdb.connect()
    try:
        where = ""
        if wanted is not None:
            con.register("wanted", pl.DataFrame({"n": wanted.cast(pl.Int64)}).to_arrow())
            where = "WHERE ordinality IN (SELECT n FROM wanted)"
        table = con.sql(
            f"SELECT ordinality AS {RECORD}, json::VARCHAR AS {RAW} "
            f"FROM read_json_objects(?, format = 'array') WITH ORDINALITY {where}",
            params=[str(path)],
        ).to_arrow_table()
    except duckdb.Error as exc:  # the file changed since the first pass
        raise InputError(path, f"cannot read the job records again: {exc}") from None
    finally:
        con.close()
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    return frame.with_columns(pl.col(RECORD).cast(pl.Int64)).sort(RECORD)


def raw_text(records: Records, wanted: pl.Series) -> pl.DataFrame:
    """``_record`` and ``_raw`` of the records numbered ``wanted``: from ``lines``
    where it holds the text, else read again (:func:`_fetch_raw`).
    """
    have = records.lines.select(RECORD, RAW).join(
        pl.DataFrame({RECORD: wanted.cast(pl.Int64)}), on=RECORD, how="semi"
    )
    missing = have.filter(pl.col(RAW).is_null())
    if missing.height == 0:
        return have
    fetched = _fetch_raw(records.info.path, missing[RECORD])
    if fetched.height != missing.height:
        raise InputError(records.info.path, "the file changed while it was read")
    return pl.concat([have.filter(pl.col(RAW).is_not_null()), fetched])


def read_records(path: Path, workdir: Path) -> Records:
    """One row per element of the JSON array in ``path`` (see the module doc)."""
    import duckdb  # loaded when a file is read, not with the plugin list

    # The hash and count pass runs in a second thread while DuckDB parses (hashlib and
    # DuckDB release the GIL): two passes over the bytes, not one after the other. The
    # parse starts only when the file looks closed (its last 4 KiB); the pass's own
    # checks still decide, and its errors win over whatever the parse found.
    table = None
    with ThreadPoolExecutor(max_workers=1) as pool:
        pending = pool.submit(_precheck, path)
        if _tail_closed(path):
            con = duckdb.connect()
            try:
                # The text of a record comes back only where the strict decode
                # refused it (the field-by-field query needs it); the others' text is
                # fetched again only if a later check rejects them (raw_text), so
                # a clean log never copies its bytes out of DuckDB.
                table = con.sql(_FAST_QUERY, params=[str(path), JOB_START_PREFIX]).to_arrow_table()
            except duckdb.Error:
                table = None  # malformed somewhere: the numpy split localizes the damage
            finally:
                con.close()
        sha, size, ends_closed, starts = pending.result()
    if not ends_closed:
        table = None
    if table is not None:
        frame = pl.from_arrow(table)
        assert isinstance(frame, pl.DataFrame)
        if not frame[RECORD].is_sorted():
            frame = frame.sort(RECORD)
        lines = frame.select(RECORD, RAW, pl.lit(None, dtype=pl.String).alias(HINT))
        strict = frame["rec"].cast(RECORD_TYPE)
        found = frame["_starts"].fill_null(False)
        if int(found.sum()) != starts:  # the error path: it names the record from the texts
            lines = lines.with_columns(_fetch_raw(path, None)[RAW])
        read = records_read(path, lines[RAW], starts, found)
        return Records(FileInfo(path, sha, size, read, True), lines, True, strict)
    split = split_array(path, workdir)
    read = records_read(path, split.frame[RAW], starts)
    info = FileInfo(path, split.info.sha256, split.info.size_bytes, read, split.info.utf8)
    return Records(info, split.frame, True)


def decode_records(records: Records) -> pl.DataFrame:
    """Validate and decode every record.

    Returns one row per record, in no particular order: ``_record``, ``_raw`` (the
    text, only for rejected records), ``_reason`` (null when the record is structurally
    sound) and ``rec`` (the decoded record of type :data:`RECORD_TYPE`, null when
    rejected). On the fast path only the records the strict decode refused go through
    the field-by-field query.
    """
    import duckdb  # loaded when a file is read, not with the plugin list

    info = records.info
    schema: dict[str, pl.DataType] = {
        RECORD: pl.Int64(),
        RAW: pl.String(),
        REASON: pl.String(),
        "rec": RECORD_TYPE,
    }
    lines = records.lines
    if lines.height == 0:
        return pl.DataFrame(schema=schema)
    good = None
    if records.strict is not None:
        rec = records.strict
        ok = rec.is_not_null() & (rec.struct.field("jobid") != "")
        good = (
            lines.filter(ok)
            .select(
                RECORD,
                pl.lit(None, dtype=pl.String).alias(RAW),
                pl.lit(None, dtype=pl.String).alias(REASON),
            )
            .with_columns(rec.filter(ok).alias("rec"))
        )
        lines = lines.filter(~ok)
        if lines.height == 0:
            return good
    query = _query(check_utf8=not info.utf8)
    con = duckdb.connect()
    try:
        con.register("lines", lines.to_arrow())
        table = con.sql(query).to_arrow_table()
    except duckdb.Error as exc:  # a JSON value DuckDB cannot represent
        raise InputError(info.path, f"cannot decode the job records: {exc}") from None
    finally:
        con.close()
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    frame = frame.with_columns(pl.col("rec").cast(RECORD_TYPE))
    return frame if good is None else pl.concat([good, frame.select(list(schema))])
