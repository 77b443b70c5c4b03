"""Line-exact reading of delimited text files, for loaders that must account for every
record.

Files are read as one string per physical line (with its 1-based line number), then
split and typed with polars expressions. Doing the CSV split ourselves, instead of
letting a CSV reader guess, is what lets every bad row be quarantined with its exact
line number, its raw text and a reason, while good rows stream on untouched.
The public traces this serves (Helios, PAI 2020, openb, Philly util CSVs) use no
quoting, so splitting on the delimiter is exact for them.

A UTF-8 byte-order mark (what Excel and PowerShell put in front of a "UTF-8" CSV) is
not data: :func:`read_header` and :func:`scan_lines` drop it from line 1, so header
names, the first key of a headerless file and line numbers are the same with or
without it (the line count of :func:`file_info` never depended on it).

Memory is bounded by design, whatever the input: no line is ever read whole before its
length is known. :data:`MAX_LINE_BYTES` is the longest line a delimited export may hold
(1 MiB: a wide AcmeTrace utilization row of a few thousand GPUs is ~20 KB); a longer
line fails the file with one error naming the file and the line (``line N is longer
than ...``), found by :func:`file_info` in its streaming pass (4 MiB chunks) before any
parser reads a line, and by :func:`read_header` / :func:`read_lines` for readers that
look at the first lines or walk lines in Python (they read at most the cap plus one
byte of a line). One long line means the file is not the export it claims to be (a
binary file, a JSON document given to a CSV loader), so failing the file, not
quarantining the line, is the one behaviour everywhere.

Quarantine keeps at most ``RAW_LIMIT`` characters of a rejected line and ``REASON_LIMIT``
of its reason, cut with the same marker as one-line errors
(:func:`gpu_trace.errors.clip`: ellipsis plus the original length).
"""

from __future__ import annotations

import codecs
import hashlib
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

import polars as pl

from gpu_trace.errors import MESSAGE_LIMIT, InputError

LINE = "_line"
RAW = "_raw"
REASON = "_reason"
RAW_LIMIT = 4096
"""Characters of a rejected line kept in ``quarantine.raw`` (longer lines are cut)."""
REASON_LIMIT = MESSAGE_LIMIT
"""Characters of a quarantine reason (reasons quote field text, which can be huge)."""
MAX_LINE_BYTES = 1 << 20
"""The longest line (bytes, line break excluded) of a delimited text export: 1 MiB."""
BOM = "\ufeff"
_BOM_BYTES = BOM.encode("utf-8")
_CHUNK = 1 << 22


@dataclass(frozen=True)
class FileInfo:
    """What we record about every input file."""

    path: Path
    sha256: str
    size_bytes: int
    records: int
    """Physical lines after the header: the independent count that ingest reconciles."""
    utf8: bool | None = True
    """Whether the whole file is valid UTF-8 (None: not checked, see :func:`file_info`)."""
    bom: bool = False
    """Whether the file starts with a UTF-8 byte-order mark (dropped when reading)."""

    @property
    def empty(self) -> bool:
        """No content: 0 bytes, or a byte-order mark alone."""
        return self.size_bytes == (len(_BOM_BYTES) if self.bom else 0)


def line_too_long(path: Path, line: int, limit: int) -> InputError:
    """The one error for a line over ``limit`` bytes."""
    return InputError(
        path,
        f"line is longer than {limit} bytes (the most one line may hold); "
        "not a line-oriented text export",
        f"line {line}",
    )


def _long_line_at(chunk: bytes, run: int, limit: int) -> tuple[int, int]:
    """Where in ``chunk`` a line longer than ``limit`` bytes is found (-1: none), and
    the bytes of the last, unfinished line after it (``run``: those carried in).

    Steps from line start to line start with ``rfind`` over windows of ``limit`` bytes
    (C speed, a few steps per chunk), never per line.
    """
    pos, n = 0, len(chunk)
    while True:
        end = pos + limit - run + 1  # the current line's break must lie before this
        if end > n:
            last = chunk.rfind(b"\n", pos)
            return -1, (run + n - pos) if last < 0 else n - last - 1
        nl = chunk.rfind(b"\n", pos, end)
        if nl < 0:
            return pos, 0
        pos, run = nl + 1, 0


def file_info(
    path: Path,
    header_lines: int,
    *,
    check_utf8: bool = True,
    max_line: int | None = MAX_LINE_BYTES,
) -> FileInfo:
    """Hash, count and UTF-8-check the file in one streaming pass over its bytes.

    ``check_utf8=False`` skips the UTF-8 check (``utf8`` is then None): for callers
    whose reader validates the text itself and who check again only if it fails.
    A line longer than ``max_line`` bytes is an :class:`InputError` naming it (None:
    no cap, for formats whose records are not lines).
    """
    digest = hashlib.sha256()
    decoder = codecs.getincrementaldecoder("utf-8")()
    utf8: bool | None = True if check_utf8 else None
    newlines = 0
    size = 0
    last = b""
    bom = False
    run = 0
    try:
        with path.open("rb") as fh:
            while chunk := fh.read(_CHUNK):
                if not size:
                    bom = chunk.startswith(_BOM_BYTES)
                if max_line is not None:
                    at, run = _long_line_at(chunk, run, max_line)
                    if at >= 0:
                        raise line_too_long(
                            path, newlines + chunk.count(b"\n", 0, at) + 1, max_line
                        )
                digest.update(chunk)
                newlines += chunk.count(b"\n")
                size += len(chunk)
                last = chunk[-1:]
                # an ASCII chunk with no sequence pending from the previous one is valid
                # UTF-8 as is: isascii() is ~10x cheaper than decoding it
                if utf8 and not (chunk.isascii() and not decoder.getstate()[0]):
                    try:
                        decoder.decode(chunk)
                    except UnicodeDecodeError:
                        utf8 = False
        if utf8:
            decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        utf8 = False
    except OSError as exc:
        raise InputError(path, exc.strerror or str(exc)) from None
    content = size - (len(_BOM_BYTES) if bom else 0)  # a lone BOM is an empty file
    lines = newlines + (1 if content and last != b"\n" else 0)
    return FileInfo(path, digest.hexdigest(), size, max(lines - header_lines, 0), utf8, bom)


def read_lines(path: Path, max_line: int = MAX_LINE_BYTES) -> Iterator[tuple[int, bytes]]:
    """``(line number, bytes with the line break)`` for each line, each read at most
    ``max_line`` + 1 bytes at a time: a longer line is an :class:`InputError` naming it,
    raised before the rest of it is read.
    """
    try:
        with path.open("rb") as fh:
            n = 0
            while line := fh.readline(max_line + 2):
                n += 1
                body = len(line) - line.endswith(b"\n")
                if body > max_line:
                    raise line_too_long(path, n, max_line)
                yield n, line
    except OSError as exc:
        raise InputError(path, exc.strerror or str(exc)) from None


def first_lines(path: Path, n: int, max_line: int = MAX_LINE_BYTES) -> list[bytes]:
    """The first ``n`` lines (fewer in a shorter file), each bounded as in :func:`read_lines`."""
    out: list[bytes] = []
    for _, line in read_lines(path, max_line):
        out.append(line)
        if len(out) == n:
            break
    return out


_SANITIZED: list[tempfile.TemporaryDirectory[str]] = []


def _utf8_copy(path: Path) -> Path:
    """A copy of ``path`` with invalid UTF-8 replaced by U+FFFD, line breaks untouched,
    so the affected lines can be quarantined one by one instead of failing the file.
    Lives until the process exits (the lazy scans that read it run before that).
    """
    tmp = tempfile.TemporaryDirectory(prefix="gpu-trace-utf8-")
    _SANITIZED.append(tmp)
    out = Path(tmp.name) / path.name
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    with path.open("rb") as src, out.open("w", encoding="utf-8", newline="") as dst:
        while chunk := src.read(_CHUNK):
            dst.write(decoder.decode(chunk))
        dst.write(decoder.decode(b"", final=True))
    return out


def utf8_valid(path: Path) -> bool:
    """Whether the whole file is valid UTF-8 (streamed, nothing else computed)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        with path.open("rb") as fh:
            while chunk := fh.read(_CHUNK):
                if not (chunk.isascii() and not decoder.getstate()[0]):  # see file_info
                    decoder.decode(chunk)
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    except OSError as exc:
        raise InputError(path, exc.strerror or str(exc)) from None
    return True


def with_utf8(info: FileInfo) -> FileInfo:
    """``info`` with its UTF-8 check done (a no-op when :func:`file_info` did it)."""
    return info if info.utf8 is not None else replace(info, utf8=utf8_valid(info.path))


def read_header(path: Path) -> str:
    """The first line of a file, decoded leniently, without a byte-order mark; an
    empty file or a first line over :data:`MAX_LINE_BYTES` is an error.
    """
    head = first_lines(path, 1)
    first = head[0] if head else b""
    if not first:
        raise InputError(path, "file is empty (expected a header line)", "line 1")
    return first.decode("utf-8", errors="replace").removeprefix(BOM).rstrip("\r\n")


def scan_lines(info: FileInfo, *, skip: int = 0) -> pl.LazyFrame:
    """One row per physical line after the first ``skip`` lines: ``_line`` (1-based line
    number in the file) and ``_raw`` (the text without its line break; invalid UTF-8
    replaced by U+FFFD; line 1 without its byte-order mark).
    """
    path = info.path if with_utf8(info).utf8 else _utf8_copy(info.path)
    lines = (
        pl.scan_lines(path, name=RAW)
        .with_row_index(LINE, offset=1)
        .with_columns(pl.col(LINE).cast(pl.Int64))
        .filter(pl.col(LINE) > skip)
    )
    if info.bom and skip == 0:
        # only files that start with one pay for this
        lines = lines.with_columns(
            pl.when(pl.col(LINE) == 1)
            .then(pl.col(RAW).str.strip_prefix(BOM))
            .otherwise(pl.col(RAW))
            .alias(RAW)
        )
    return lines


def capped(text: pl.Expr, limit: int) -> pl.Expr:
    """``text`` cut to ``limit`` characters with the marker :func:`gpu_trace.errors.clip`
    uses (ellipsis and original length), as a polars expression.
    """
    n = text.str.len_chars()
    return (
        pl.when(n > limit)
        .then(pl.format("{}… [{} characters]", text.str.slice(0, limit), n))
        .otherwise(text)
    )


Kind = Literal["str", "int", "float"]


@dataclass(frozen=True)
class FieldSpec:
    """How to type one delimited field.

    ``nulls`` are the source's missing-value markers; ``required`` fields may not be
    missing (the row is quarantined instead).
    """

    name: str
    kind: Kind = "str"
    required: bool = False
    nulls: tuple[str, ...] = ("",)


_DTYPES: dict[Kind, pl.DataType] = {"str": pl.String(), "int": pl.Int64(), "float": pl.Float64()}


def parse_fields(
    lines: pl.LazyFrame,
    fields: Sequence[FieldSpec],
    *,
    separator: str = ",",
    strip: bool = False,
    allow_trailing_empty: bool = False,
) -> pl.LazyFrame:
    """Split ``_raw`` on ``separator`` and type each field.

    Adds one column per field plus ``_reason``: null for good rows, else the first
    problem found (wrong field count, invalid UTF-8, missing required value, value that
    is not a number). ``allow_trailing_empty`` accepts one extra empty field at the end
    (Philly's util files end every row with a comma).
    """
    n = len(fields)
    # split once into _parts; every check below reads that column
    parts = pl.col("_parts")
    nparts = parts.list.len()
    count_ok = nparts == n
    if allow_trailing_empty:
        count_ok = count_ok | ((nparts == n + 1) & (parts.list.last() == ""))
    reasons: list[pl.Expr] = [
        pl.when(pl.col(RAW).is_null() | (pl.col(RAW) == ""))
        .then(pl.lit("empty line"))
        .when(~count_ok)
        .then(pl.format(f"expected {n} fields, found {{}}", nparts)),
        pl.when(pl.col(RAW).str.contains("\ufffd", literal=True)).then(pl.lit("invalid UTF-8")),
    ]
    typed: list[pl.Expr] = []
    for i, f in enumerate(fields):
        text = pl.col("_parts").list.get(i, null_on_oob=True)
        if strip:
            text = text.str.strip_chars()
        is_missing = text.is_null() | text.is_in(list(f.nulls))
        text = pl.when(is_missing).then(None).otherwise(text)
        value = (
            text if f.kind == "str" else text.str.strip_chars().cast(_DTYPES[f.kind], strict=False)
        )
        typed.append(value.alias(f.name))
        if f.required:
            reasons.append(pl.when(is_missing).then(pl.lit(f"{f.name} is missing")))
        if f.kind != "str":
            reasons.append(
                pl.when(~is_missing & value.is_null()).then(
                    pl.format(
                        f"{f.name} {{}} is not a valid {f.kind}", pl.lit("'") + text + pl.lit("'")
                    )
                )
            )
    return (
        lines.with_columns(pl.col(RAW).str.split(separator).alias("_parts"))
        .with_columns(*typed, pl.coalesce(reasons).alias(REASON))
        .drop("_parts")
    )


def quarantine_rows(
    bad: pl.LazyFrame | pl.DataFrame,
    *,
    source: str,
    dataset: str,
    cluster: str | None,
    table: str,
    file: Path,
) -> pl.LazyFrame:
    """Shape rejected rows (with ``_line``, ``_raw``, ``_reason``) as quarantine rows."""
    return bad.lazy().select(
        pl.lit(source).alias("source"),
        pl.lit(dataset).alias("dataset"),
        pl.lit(cluster, dtype=pl.String).alias("cluster"),
        pl.lit(table).alias("table"),
        pl.lit(file.name).alias("file"),
        pl.format("line {}", pl.col(LINE)).alias("locator"),
        capped(pl.col(REASON), REASON_LIMIT).alias("reason"),
        capped(pl.col(RAW), RAW_LIMIT).alias("raw"),
    )
