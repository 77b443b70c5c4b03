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

Quarantine keeps at most ``RAW_LIMIT`` characters of a rejected line and ``REASON_LIMIT``
of its reason, cut with the same marker as one-line errors
(:func:`gpu_trace.errors.clip`: ellipsis plus the original length).
"""

from __future__ import annotations

import codecs
import hashlib
import tempfile
from collections.abc import Sequence
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


def file_info(path: Path, header_lines: int, *, check_utf8: bool = True) -> FileInfo:
    """Hash, count and UTF-8-check the file in one streaming pass over its bytes.

    ``check_utf8=False`` skips the UTF-8 check (``utf8`` is then None): for callers
    whose reader validates the text itself and who check again only if it fails.
    """
    digest = hashlib.sha256()
    decoder = codecs.getincrementaldecoder("utf-8")()
    utf8: bool | None = True if check_utf8 else None
    newlines = 0
    size = 0
    last = b""
    bom = False
    try:
        with path.open("rb") as fh:
            while chunk := fh.read(_CHUNK):
                if not size:
                    bom = chunk.startswith(_BOM_BYTES)
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


def sha256_of(path: Path) -> str:
    """The SHA-256 of a file's bytes (recorded with every ingest)."""
    return file_info(path, 0).sha256


def read_header(path: Path) -> str:
    """The first line of a file, decoded leniently, without a byte-order mark; an
    empty file is an error.
    """
    try:
        with path.open("rb") as fh:
            first = fh.readline()
    except OSError as exc:
        raise InputError(path, exc.strerror or str(exc)) from None
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
