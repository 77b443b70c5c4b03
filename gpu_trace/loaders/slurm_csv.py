r"""The fast path of a sacct export: polars' native CSV reader for the lines it can vouch
for, the line-exact split (:func:`gpu_trace.loaders.slurm._split`) for the others.

``sacct -P`` prints ``|``-separated fields with no quoting (sacct man page,
``--parsable2``: "Output will be '|' delimited without a '|' at the end"), so a
multi-threaded CSV reader with ``quote_char=None`` and every field as text reads a line
into exactly the fields ``str.split`` gives it, **provided** the line has the header's
number of fields, holds no carriage return but the one of a CRLF line break (the
reader drops a ``\r`` before a separator and keeps one of ``\r\r\n``; the line-exact
split keeps the first and drops both of the second) and no U+FFFD (the
line-exact parse quarantines it as invalid UTF-8). Which lines those are is known
without a pass over lines: :func:`marks` counts separators and carriage returns and looks
for U+FFFD in one pass over the bytes (run beside the reader, like the hash). When every
line has the header's separator count (their total says so, and the reader, which fails
on a line with more fields than the schema, says no line has more) and there are no
carriage returns or U+FFFD, every row is vouched for; otherwise one ``scan_lines`` pass
picks out the lines that are not (normally a handful), and only those are split line by
line. A file the reader refuses (or whose rows do not map one to one to lines) is split
line by line whole, as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from gpu_trace.errors import InputError
from gpu_trace.loaders.textfile import LINE, RAW, FileInfo, scan_lines

SEPARATOR = "|"
_REPLACEMENT = "\ufffd".encode()
_CHUNK = 1 << 22
TRAIL = "_trail"
"""The empty field after the last ``|`` of a ``--parsable`` line."""
_READER_FAILED = (pl.exceptions.PolarsError, pl.exceptions.PanicException, OSError)


@dataclass(frozen=True)
class Marks:
    """What one pass over a file's bytes says about its lines (header included)."""

    separators: int
    carriage_return: bool
    """Whether a carriage return occurs anywhere."""
    replacement: bool
    """Whether the bytes of U+FFFD occur anywhere."""


_BAR = ord(SEPARATOR)


def marks(path: Path) -> Marks:
    r"""Count ``|``, look for ``\r`` and U+FFFD, 4 MiB at a time, at C speed: numpy
    counts the separators (3x cheaper than ``bytes.count``), U+FFFD is looked for only
    in chunks that are not pure ASCII (a U+FFFD cut by a chunk boundary is found
    through the 2 bytes carried over).
    """
    seps = 0
    cr = found = False
    buf = bytearray(_CHUNK)  # one buffer read into again and again: no fresh pages per chunk
    tail = b""
    try:
        with path.open("rb") as fh:
            while n := fh.readinto(buf):
                chunk = memoryview(buf)[:n]
                seps += int(np.count_nonzero(np.frombuffer(chunk, dtype=np.uint8) == _BAR))
                cr = cr or buf.find(b"\r", 0, n) >= 0
                if not found and not (n == _CHUNK and buf.isascii()):
                    text = bytes(chunk)
                    found = _REPLACEMENT in tail + text[:2] or _REPLACEMENT in text
                tail = bytes(chunk[-2:])
                chunk.release()
    except OSError as exc:
        raise InputError(path, exc.strerror or str(exc)) from None
    return Marks(seps, cr, found)


@dataclass(frozen=True)
class Fields:
    """The reader's rows of an export."""

    frame: pl.DataFrame | None
    """None: the reader refused the file."""
    truncated: bool
    """Some line has more fields than the header (a ``|`` in a job name): the reader
    cut it, so the separator total cannot vouch for the lines; each is checked."""


def read_fields(path: Path, names: tuple[str, ...], trailing: bool) -> Fields:
    """Every data line's fields as text (``""`` for an empty one, as ``str.split``
    gives), one column per header name (``_trail`` for ``--parsable``'s last, empty
    field), read by polars' multi-threaded reader with no quoting; invalid UTF-8 is
    read as U+FFFD (those lines are then left to the line-exact parse). The reader
    refuses a line with more fields than the schema; then the file is read again with
    such lines cut (:attr:`Fields.truncated`), which only a file with a ``|`` in some
    job name pays for.
    """
    columns = [f"_c{i}" for i in range(len(names))] + ([TRAIL] if trailing else [])
    for cut in (False, True):
        try:
            frame = pl.read_csv(
                path,
                has_header=False,
                skip_rows=1,
                separator=SEPARATOR,
                schema=dict.fromkeys(columns, pl.String()),
                quote_char=None,
                empty_string_is_null=False,
                encoding="utf8-lossy",
                truncate_ragged_lines=cut,
                raise_if_empty=False,
            )
        except _READER_FAILED:
            continue
        return Fields(frame, cut)
    return Fields(None, True)


def per_line(names: tuple[str, ...], trailing: bool) -> int:
    """``|`` on a line with the header's number of fields."""
    return len(names) - 1 + int(trailing)


def _doubtful(info: FileInfo, expected: int, found: Marks, truncated: bool) -> pl.Expr | None:
    """Which lines the reader's row may differ from the line-exact split for (an
    expression over ``_raw``), or None when the byte counts clear every line.
    """
    if (
        not truncated
        and found.separators == expected * (info.records + 1)
        and not found.carriage_return
        and not found.replacement
        and info.utf8
    ):
        return None
    raw = pl.col(RAW)
    return (
        (raw.str.count_matches(SEPARATOR, literal=True) != expected)
        | raw.str.contains("\r", literal=True)
        | raw.str.contains("\ufffd", literal=True)
    )


def split_fast(
    info: FileInfo,
    header_names: tuple[str, ...],
    trailing: bool,
    wanted: dict[int, str],
    read: Fields,
    found: Marks,
) -> tuple[pl.DataFrame, pl.DataFrame] | None:
    """(rows the reader vouches for, lines left to the line-exact split).

    The rows carry ``_line``, ``_n`` (the header's field count) and the ``_t_<key>``
    text column of each field ``wanted`` (index -> key); the lines ``_line`` and
    ``_raw``. None when the reader's rows cannot be mapped to lines (it refused the
    file, or their number differs from the line count).
    """
    fields = read.frame
    if fields is None or fields.height != info.records or not info.records:
        return None
    expected = per_line(header_names, trailing)
    doubtful = _doubtful(info, expected, found, read.truncated)
    trail_bad = (
        fields.select(pl.int_range(2, pl.len() + 2, dtype=pl.Int64).alias(LINE), TRAIL)
        .filter(pl.col(TRAIL) != "")
        .get_column(LINE)
        if trailing
        else pl.Series(LINE, [], dtype=pl.Int64)
    )
    n = len(header_names)
    rows = fields.select(
        pl.int_range(2, pl.len() + 2, dtype=pl.Int64).alias(LINE),
        pl.lit(n, dtype=pl.Int64).alias("_n"),
        *(pl.col(f"_c{i}").alias(f"_t_{key}") for i, key in wanted.items()),
    )
    if doubtful is None and trail_bad.is_empty():
        return rows, pl.DataFrame(schema={LINE: pl.Int64, RAW: pl.String})
    pick = pl.col(LINE).is_in(trail_bad.implode())
    if doubtful is not None:
        pick = pick | doubtful
    redo = scan_lines(info, skip=1).filter(pick).collect()
    return rows.filter(~pl.col(LINE).is_in(redo.get_column(LINE).implode())), redo
