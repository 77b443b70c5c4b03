"""SenseTime Helios (S-Lab-System-Group/HeliosData): Slurm job logs and daily GPU counts.

Inputs (the trace's README, github.com/S-Lab-System-Group/HeliosData), per cluster (Venus, Earth, Saturn, Uranus):

- ``cluster_log.csv`` -> ``jobs``, one row per Slurm job. Header present; columns are
  picked **by name** (the released files carry a ``jobname`` column the README omits,
  older copies do not; extra columns are ignored). ``gpu_num`` 0 is a CPU job.
- ``cluster_gpu_number.csv`` (``date,vc<hash>...,total``) -> ``capacity``: one row per
  (day, VC) plus one per day with ``vc`` null for ``total``; ``period_s`` is the local
  day, ``basis`` is ``published``.

``dataset`` and ``cluster`` are the cluster's slug (``venus``, ``earth``, ...).

Decisions on points the format leaves open:

- **Time zone.** The timestamps are naive and the zone is undocumented; the datacenter
  is in China, so they are read as ``Asia/Shanghai`` (UTC+8, no DST since 1991) unless
  the caller names another IANA zone, which is recorded in ``source_tz``. In a zone with
  DST, an ambiguous local time takes the earlier instant and a local time that does not
  exist is quarantined.
- **queue and duration.** ``queue_s`` and ``run_s`` are the file's ``queue`` and
  ``duration`` columns, because those are the values every published Helios statistic
  was computed from. Negative values are quarantined. When a value disagrees with its
  timestamps (``duration != end - start``, ``queue != start - submit``, on the naive
  local clock the file was written with) the file's value is kept and the number of
  such rows is recorded in the Parquet metadata (``duration_mismatch_rows``,
  ``queue_mismatch_rows``): dropping them would silently change the published numbers.
- **Commas in job names.** The files are not quoted, but ``jobname`` is the only free
  text column, so a row with more fields than the header is split from both ends: the
  columns before ``jobname`` from the left, those after it from the right, and what
  is left in between (commas included) is the name. A name wrapped in double quotes
  (RFC 4180, as pandas writes names containing commas) is unquoted. A row with fewer
  fields than the header, or more when there is no ``jobname`` column, is quarantined;
  so are the pieces of a quoted name that spans lines, each with its own line number.
- **Capacity records.** A line of ``cluster_gpu_number.csv`` is accepted or rejected
  whole (a malformed day says nothing reliable about any of its VCs). A good line
  counts as one record per value column, a rejected line as one record, so
  ``rows_read = rows_written + rows_quarantined`` holds per file.
- **Inputs.** ``PATH`` may be the folder holding ``data/``, ``data/`` itself, one cluster
  folder, a folder of ``<Cluster>_cluster_gpu_number.csv``-style files, one CSV, or
  ``data.zip`` (members are streamed out to a temporary folder; ``file_sha256`` is
  then the member's hash).

- **Field rules.** ``user``, ``vc`` and ``jobname`` may be empty (null); every other
  field is required. Counts, ``duration`` and ``queue`` must be plain integers
  (``1.0`` is rejected, not guessed) and not negative; ``node_num`` must fit the
  canonical int32. Times (and capacity dates) must lie in 1970-01-01 .. 2099-12-31
  (``units.TIME_MIN`` / ``TIME_MAX``): a placeholder such as ``9999-12-31 23:59:59`` is
  quarantined as a time out of range. ``job_id`` is kept as written (a Slurm id; not forced to be numeric,
  so array-job ids would survive), and duplicates are not checked.

Two parse paths, one result (:func:`parse`). A released log is nearly always clean, so
each file first goes through polars' native multi-threaded CSV reader (:func:`read_text`,
:func:`read_clean`) while its bytes are hashed and counted in a second thread. That
path keeps only the rows it can vouch for: the reader must accept the file, its row
count must equal the physical line count (so row *i* is line *i* + 1), and the row must
pass every check. Every other line (normally none) is parsed line-exactly
(:func:`parse_log` over ``textfile.scan_lines``), which splits and types each line
itself, so each rejected row keeps its physical line number, raw text and reason; if
the reader refuses the file (a line with more fields than the header, invalid UTF-8),
the whole file takes that path. The raw text is not carried along; rejected lines are
fetched again by number. Tests check that both paths give identical rows.
"""

from __future__ import annotations

import re
import tempfile
import zipfile
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from gpu_trace.errors import DatasetError, InputError
from gpu_trace.loaders.base import Batch
from gpu_trace.loaders.textfile import (
    LINE,
    RAW,
    REASON,
    FileInfo,
    file_info,
    quarantine_rows,
    read_header,
    scan_lines,
    with_utf8,
)
from gpu_trace.loaders.units import TIME_MAX, TIME_MIN
from gpu_trace.loaders.zones import parse_tz
from gpu_trace.plugins import LoaderPlugin, option
from gpu_trace.store.parquet import slug
from gpu_trace.values import choose, size_bytes

SOURCE = "helios"
CLUSTERS = ("venus", "earth", "saturn", "uranus")
"""The four released clusters, in the order the owners list them."""
DEFAULT_TZ = "Asia/Shanghai"
LOG_FILE = "cluster_log.csv"
CAPACITY_FILE = "cluster_gpu_number.csv"
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
DATE_FORMAT = "%Y-%m-%d"
INT32_MAX = 2**31 - 1

STATUS = {
    "COMPLETED": "completed",
    "CANCELLED": "cancelled",
    "FAILED": "failed",
    "TIMEOUT": "timeout",
    "NODE_FAIL": "node_fail",
    "OUT_OF_MEMORY": "oom",
    "PREEMPTED": "preempted",
}
"""Slurm states as Helios writes them (the README: "all jobs submitted to Slurm"). The
release holds the first five; ``OUT_OF_MEMORY`` and ``PREEMPTED`` are the Slurm states
(sacct manual, "JOB STATE CODES") for a job killed for its memory and one stopped for
other work, kept apart from ``failed`` / ``cancelled`` should a Slurm log of this layout
hold them. Anything else (the one ``SUSPENDED``) is ``unknown``, with the original kept
in ``raw_status``."""

NAME = "jobname"
LOG_REQUIRED = (
    "job_id",
    "user",
    "vc",
    "gpu_num",
    "cpu_num",
    "node_num",
    "state",
    "submit_time",
    "start_time",
    "end_time",
    "duration",
    "queue",
)
"""Columns every ``cluster_log.csv`` must have (``jobname`` is optional)."""
OPTIONAL_TEXT = ("user", "vc", NAME)
"""Text columns that may be empty (null); every other column is required."""
INTS = ("gpu_num", "cpu_num", "node_num", "duration", "queue")
TIMES = ("submit_time", "start_time", "end_time")
NON_NEGATIVE = INTS

_PREFIXED = re.compile(r"^(?P<cluster>.+?)_(?P<kind>cluster_log|cluster_gpu_number)\.csv$")
_MEMBER = re.compile(r"(?:^|/)(?P<cluster>[^/]+)/(?P<kind>cluster_log|cluster_gpu_number)\.csv$")


@dataclass(frozen=True)
class HeliosFile:
    """One input file and what it holds."""

    cluster: str
    kind: str
    """``cluster_log`` or ``cluster_gpu_number``."""
    path: Path


# --------------------------------------------------------------------------- discovery

_EXTRACTED: list[tempfile.TemporaryDirectory[str]] = []


def _extract_zip(path: Path, max_extract_bytes: int | None = None) -> list[HeliosFile]:
    """Extract ``data.zip`` into a temporary folder that lives until the process exits
    (the lazy scans read the files after this returns), through the datasets extractor
    (:func:`gpu_trace.datasets.extract.extract_zip`): links and special members refused,
    names checked, bytes counted while they are decompressed against the cap
    ``datasets fetch`` uses (40x the archive, at least 64 MiB; ``max_extract_bytes``
    overrides), so a zip bomb stops at the cap with one error line. Then the
    ``<Cluster>/cluster_*.csv`` members are picked out.
    """
    # imported here: the datasets package (downloads, registry) costs ~50 ms of start-up
    # that a plain-CSV ingest does not need
    from gpu_trace.datasets.extract import (
        ArchiveTooLarge,
        ExtractLimits,
        UnsafeArchive,
        extract_zip,
    )

    tmp = tempfile.TemporaryDirectory(prefix="gpu-trace-helios-")
    _EXTRACTED.append(tmp)
    root = Path(tmp.name)
    try:
        limits = ExtractLimits.for_archive(path.stat().st_size, None, max_extract_bytes)
        names = extract_zip(path, root, limits=limits)
    except (UnsafeArchive, ArchiveTooLarge) as exc:
        raise InputError(path, str(exc).removeprefix(f"{path}: ")) from None
    except DatasetError as exc:  # damaged: unreadable directory or member data
        why = str(exc).removeprefix(f"{path}: ").removeprefix("not a readable zip archive ")
        raise InputError(path, f"not a readable zip archive ({why.strip('()')})") from None
    except (NotImplementedError, RuntimeError, zipfile.LargeZipFile) as exc:
        # an unsupported compression method, an encrypted member: zipfile's own errors
        raise InputError(path, f"not a readable zip archive ({exc})") from None
    except OSError as exc:
        raise InputError(path, exc.strerror or str(exc)) from None
    found: dict[tuple[str, str], HeliosFile] = {}
    for name in names:
        hit = _MEMBER.search(name)
        if hit is None or "__MACOSX" in name:
            continue
        key = (slug(hit["cluster"]), hit["kind"])
        if key in found:
            raise InputError(path, f"two {key[1]}.csv members for cluster {key[0]}")
        found[key] = HeliosFile(key[0], key[1], root / name)
    if not found:
        raise InputError(
            path, "zip archive holds no <Cluster>/cluster_log.csv or cluster_gpu_number.csv"
        )
    return list(found.values())


def _classify(file: Path) -> HeliosFile | None:
    if file.name in (LOG_FILE, CAPACITY_FILE):
        return HeliosFile(slug(file.resolve().parent.name), file.name[:-4], file)
    if m := _PREFIXED.match(file.name):
        return HeliosFile(slug(m["cluster"]), m["kind"], file)
    return None


def _in_folder(folder: Path) -> list[HeliosFile]:
    """Helios files directly in ``folder`` and in its immediate subfolders."""
    found: list[HeliosFile] = []
    for place in (folder, *sorted(p for p in folder.iterdir() if p.is_dir())):
        for f in sorted(place.glob("*.csv")):
            if f.is_file() and (hit := _classify(f)) is not None:
                found.append(hit)
    return found


def discover(path: Path, max_extract_bytes: int | None = None) -> list[HeliosFile]:
    """Every Helios file under ``path`` (see the module docstring for the layouts);
    ``max_extract_bytes`` caps what ``data.zip`` may expand to.
    """
    if path.is_file():
        if path.suffix.lower() == ".zip":
            return _extract_zip(path, max_extract_bytes)
        hit = _classify(path)
        if hit is None:
            raise InputError(
                path,
                "not a Helios file (expected cluster_log.csv, cluster_gpu_number.csv, "
                "<Cluster>_cluster_log.csv, <Cluster>_cluster_gpu_number.csv or data.zip)",
            )
        return [hit]
    found = _in_folder(path)
    if not found and (path / "data").is_dir():
        found = _in_folder(path / "data")
    if not found and (path / "data.zip").is_file():
        found = _extract_zip(path / "data.zip", max_extract_bytes)
    return found


def select(path: Path, cluster: str, max_extract_bytes: int | None = None) -> list[HeliosFile]:
    """The files for the chosen cluster(s) (``all``, one slug, or a comma-separated
    list), in the owners' cluster order, each cluster's log before its capacity.
    """
    found = discover(path, max_extract_bytes)
    if not found:
        raise InputError(
            path,
            "no Helios input here (expected data/<Cluster>/cluster_log.csv or "
            "cluster_gpu_number.csv, a cluster folder, one of those files or data.zip)",
        )
    wanted = {slug(c) for c in cluster.split(",") if c.strip()}
    chosen = [f for f in found if "all" in wanted or f.cluster in wanted]
    if not chosen:
        have = ", ".join(sorted({f.cluster for f in found}))
        raise InputError(path, f"no Helios files for cluster {cluster!r} (found: {have})")
    seen: dict[tuple[str, str], Path] = {}
    for f in chosen:
        if (other := seen.setdefault((f.cluster, f.kind), f.path)) != f.path:
            raise InputError(
                path, f"two {f.kind}.csv files for cluster {f.cluster}: {other} and {f.path}"
            )
    order = {c: i for i, c in enumerate(CLUSTERS)}
    return sorted(
        chosen, key=lambda f: (order.get(f.cluster, len(order)), f.cluster, f.kind != "cluster_log")
    )


# --------------------------------------------------------------------------- parsing


def header_names(path: Path) -> list[str]:
    """Column names from the header line (BOM and surrounding blanks removed);
    duplicate names make the file unreadable by name.
    """
    names = [n.strip() for n in read_header(path).lstrip("\ufeff").split(",")]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise InputError(path, f"duplicate column(s) {', '.join(dupes)} in the header", "line 1")
    return names


def _first(checks: Iterable[tuple[pl.Expr, pl.Expr | str]]) -> pl.Expr:
    """The first reason whose condition holds (null when none does)."""
    return pl.coalesce(
        [
            pl.when(bad).then(reason if isinstance(reason, pl.Expr) else pl.lit(reason))
            for bad, reason in checks
        ]
    )


def _quoted(text: pl.Expr) -> pl.Expr:
    return pl.lit("'") + text + pl.lit("'")


def _to_utc(local: pl.Expr, tz: str) -> pl.Expr:
    """Naive local times in ``tz`` as UTC instants (null where the local time does not
    exist in ``tz``; the earlier instant where it is ambiguous).
    """
    return local.dt.replace_time_zone(
        tz, ambiguous="earliest", non_existent="null"
    ).dt.convert_time_zone("UTC")


COUNT = "_n"
"""Number of comma-separated fields on the line."""


def _split(lines: pl.LazyFrame) -> pl.LazyFrame:
    """``_parts`` (the fields of ``_raw``) and ``_n`` (how many there are)."""
    return lines.with_columns(pl.col(RAW).str.split(",").alias("_parts")).with_columns(
        pl.col("_parts").list.len().cast(pl.Int64).alias(COUNT)
    )


def _text(name: str) -> pl.Expr:
    """A field's text as split (``""`` when empty, null when the line is too short)."""
    return pl.col(f"_t_{name}")


def _missing(name: str) -> pl.Expr:
    """Helios has no missing-value marker: a missing value is an empty field."""
    return _text(name).is_null() | (_text(name) == "")


def _null_if_empty(expr: pl.Expr) -> pl.Expr:
    return pl.when(expr == "").then(None).otherwise(expr)


def split_fields(lines: pl.LazyFrame, names: list[str], free_text: str | None) -> pl.LazyFrame:
    """Add ``_n`` and a ``_t_<name>`` text column per header name.

    Without a free-text column, field ``i`` is the ``i``-th part. With one, fields
    before it are counted from the left and fields after it from the right, and the
    free text is whatever lies in between, commas included, unquoted if it is wrapped
    in double quotes. That slower path runs only on the rare lines that need it (too
    many fields, or a name starting with a quote), so clean files pay nothing for it.
    The CR that a CRLF line end leaves is removed from the last field only, instead of
    copying every line to strip it.
    """
    n = len(names)
    parts = pl.col("_parts")
    at = names.index(free_text) if free_text is not None else n

    def field(i: int) -> pl.Expr:
        expr = parts.list.get(i if i <= at else i - n, null_on_oob=True)
        return expr.str.strip_suffix("\r") if i == n - 1 else expr

    split = _split(lines).with_columns(field(i).alias(f"_t_{name}") for i, name in enumerate(names))
    if free_text is None:
        return split.drop("_parts")
    special = ((pl.col(COUNT) > n) | _text(free_text).str.starts_with('"')).fill_null(False)
    middle = parts.list.slice(at, (pl.col(COUNT) - n + 1).clip(lower_bound=0)).list.join(",")
    if at == n - 1:
        middle = middle.str.strip_suffix("\r")
    quoted = middle.str.starts_with('"') & middle.str.ends_with('"') & (middle.str.len_chars() > 1)
    unquoted = middle.str.slice(1, middle.str.len_chars() - 2).str.replace_all(
        '""', '"', literal=True
    )
    rebuilt = split.filter(special).with_columns(
        pl.when(quoted).then(unquoted).otherwise(middle).alias(f"_t_{free_text}")
    )
    return pl.concat([split.filter(~special), rebuilt]).drop("_parts")


def _count_problem(n: int, free_text: bool) -> pl.Expr:
    bad = (pl.col(COUNT) < n) if free_text else (pl.col(COUNT) != n)
    return pl.when(bad).then(pl.format(f"expected {n} fields, found {{}}", pl.col(COUNT)))


def _line_checks(count_problem: pl.Expr) -> list[tuple[pl.Expr, pl.Expr | str]]:
    return [
        (pl.col(RAW).is_in(["", "\r"]).fill_null(True), "empty line"),
        (count_problem.is_not_null(), count_problem),
        (pl.col(RAW).str.contains("\ufffd", literal=True), "invalid UTF-8"),
    ]


def parse_log(
    info: FileInfo, names: list[str], tz: str, only: pl.Series | None = None
) -> pl.LazyFrame:
    """Type every line of a ``cluster_log.csv`` (or the ``only`` line numbers): the
    fields it needs, ``_reason`` (null for good rows, else the first problem), UTC
    instants and the mismatch flags; with ``only``, also each line's raw text (the
    lines are few, and most of them are going to quarantine).
    """
    has_name = NAME in names
    typed: list[pl.Expr] = []
    checks = _line_checks(_count_problem(len(names), has_name))
    for name in (n for n in names if n in (*LOG_REQUIRED, NAME)):
        raw = _text(name)
        if name not in OPTIONAL_TEXT:
            checks.append((_missing(name), f"{name} is missing"))
        if name in INTS:
            typed.append(raw.str.strip_chars().cast(pl.Int64, strict=False).alias(name))
            kind = "int"
        elif name in TIMES:
            typed.append(_parse_time(raw).alias(name))
            kind = "time (YYYY-MM-DD HH:MM:SS)"
        else:
            typed.append((_null_if_empty(raw) if name in OPTIONAL_TEXT else raw).alias(name))
            continue
        checks.append(
            (
                ~_missing(name) & pl.col(name).is_null(),
                pl.format(f"{name} {{}} is not a valid {kind}", _quoted(raw)),
            )
        )
    if not has_name:
        typed.append(pl.lit(None, dtype=pl.String).alias(NAME))
    checks += [(pl.col(c) < 0, f"{c} is negative") for c in NON_NEGATIVE]
    checks.append((pl.col("node_num") > INT32_MAX, "node_num is out of range"))
    checks += [
        (
            ~_in_range(pl.col(c)),
            pl.format(
                f"{c} {{}} is a time out of range ({RANGE_TEXT})",
                _quoted(pl.col(c).dt.strftime(TIME_FORMAT)),
            ),
        )
        for c in TIMES
    ]
    checks += [
        (
            pl.col(c).is_not_null() & pl.col(f"_{c}_utc").is_null(),
            pl.format(f"{c} {{}} does not exist in {tz}", pl.col(c).dt.strftime(TIME_FORMAT)),
        )
        for c in TIMES
    ]
    lines = scan_lines(info, skip=1)
    if only is not None:
        lines = lines.filter(pl.col(LINE).is_in(only.implode()))
    return _parsed_columns(
        split_fields(lines, names, NAME if has_name else None)
        .with_columns(typed)
        .with_columns(_to_utc(pl.col(c), tz).alias(f"_{c}_utc") for c in TIMES)
        .with_columns(_first(checks).alias(REASON)),
        *([RAW] if only is not None else []),
    )


RANGE_TEXT = f"{TIME_MIN:%Y-%m-%d} to {TIME_MAX - timedelta(seconds=1):%Y-%m-%d %H:%M:%S}"


def _in_range(local: pl.Expr) -> pl.Expr:
    """Whether a naive time lies in [TIME_MIN, TIME_MAX) (null stays null)."""
    return (local >= pl.lit(TIME_MIN)) & (local < pl.lit(TIME_MAX))


def _parsed_columns(lf: pl.LazyFrame, *keep: str) -> pl.LazyFrame:
    """The columns both parse paths return: line, reason, typed fields, mismatch flags
    and UTC instants (plus the ``keep`` columns).
    """
    epoch = {c: pl.col(c).dt.epoch("s") for c in TIMES}
    return lf.select(
        LINE,
        REASON,
        *LOG_REQUIRED,
        NAME,
        (pl.col("duration") != epoch["end_time"] - epoch["start_time"]).alias("_run_mismatch"),
        (pl.col("queue") != epoch["start_time"] - epoch["submit_time"]).alias("_queue_mismatch"),
        *(f"_{c}_utc" for c in TIMES),
        *keep,
    )


def _parse_time(text: pl.Expr, *, strip: bool = True) -> pl.Expr:
    """``YYYY-MM-DD HH:MM:SS`` text as a naive datetime (null if it does not parse),
    blanks around it removed first unless ``strip`` is false. No cache: the times of a
    log are nearly all distinct.
    """
    if strip:
        text = text.str.strip_chars()
    return text.str.strptime(pl.Datetime("us"), TIME_FORMAT, strict=False, cache=False)


OFFSET_STEP = timedelta(minutes=15)
"""Grid step of :func:`fixed_offset`: far shorter than the time between two offset
changes of any tzdata zone."""
OFFSET_MAX_SPAN = timedelta(days=3660)
"""Longest span :func:`fixed_offset` checks (about ten years, 351 k grid points);
longer spans take the general conversion."""


def fixed_offset(tz: str, lo: datetime, hi: datetime) -> timedelta | None:
    """The UTC offset of ``tz`` if it is the same everywhere from local time ``lo`` to
    ``hi`` (then no local time in the span is ambiguous or missing), else None.

    The offset is looked up on a 15-minute grid from before ``lo`` to after ``hi``. A
    change between two grid points would show as two different offsets unless the
    zone changed and changed back within 15 minutes, which no tzdata zone does.
    Converting a whole column by subtracting one offset is much cheaper than a
    per-value zone lookup.
    """
    start = lo.replace(minute=0, second=0, microsecond=0)
    try:
        end = hi + OFFSET_STEP
    except OverflowError:  # hi within 15 minutes of year 9999's end
        return None
    if end - start > OFFSET_MAX_SPAN:
        return None
    grid = pl.DataFrame(
        {"t": pl.datetime_range(start, end, OFFSET_STEP, time_unit="us", eager=True)}
    )
    offsets = grid.select(
        (pl.col("t") - _to_utc(pl.col("t"), tz).dt.replace_time_zone(None)).alias("o")
    )["o"]
    if offsets.null_count() or offsets.n_unique() != 1:
        return None
    first = offsets[0]
    assert isinstance(first, timedelta)
    return first


_READER_FAILED = (pl.exceptions.PolarsError, pl.exceptions.PanicException, OSError)


def read_text(path: Path, names: list[str]) -> pl.DataFrame | None:
    """The log's rows through polars' native multi-threaded CSV reader, every field as
    text, no quoting. None when the reader refuses the file (more fields than the
    header on some line, invalid UTF-8) or the file is not one :func:`read_clean` can
    take.
    """
    if names[-1] not in LOG_REQUIRED or names[-1] in OPTIONAL_TEXT:
        return None
    dtypes = dict.fromkeys(names, pl.String())
    try:
        return pl.read_csv(
            path,
            has_header=False,
            skip_rows=1,
            schema=dtypes,
            quote_char=None,
            raise_if_empty=False,
        )
    except _READER_FAILED:
        return None


def read_clean(
    frame: pl.DataFrame | None, info: FileInfo, names: list[str], tz: str
) -> pl.DataFrame | None:
    """Type and check the rows :func:`read_text` read: the columns :func:`parse_log`
    returns plus ``_ok``, whether the row is one this path can vouch for. None when
    rows cannot be mapped to lines: the reader refused the file, or the row count
    differs from the physical line count.

    An ``_ok`` row has exactly the values :func:`parse_log` gives its line. Rows that
    are not ``_ok`` (a required value empty, which also catches short rows and empty
    lines because the last column must be a required one here; a value that does not
    parse or fails a check; a job name that starts with a double quote) are left to
    the line-exact parse, which may still accept them: this path is stricter, never
    looser. Counts and times must be written without blanks around them (the
    line-exact path strips blanks). ``tests/test_helios_unit.py`` checks the two paths
    agree on random files.
    """
    if frame is None or frame.height != info.records:
        return None
    local = frame.with_columns(
        *(_parse_time(pl.col(c), strip=False) for c in TIMES),
        *(pl.col(c).cast(pl.Int64, strict=False) for c in INTS),
    )
    # bounds over in-range times only: out-of-range rows are not _ok anyway
    kept = [pl.col(c).filter(_in_range(pl.col(c))) for c in TIMES]
    lo, hi = local.select(
        pl.min_horizontal(*(k.min() for k in kept)).alias("lo"),
        pl.max_horizontal(*(k.max() for k in kept)).alias("hi"),
    ).row(0)
    offset = fixed_offset(tz, lo, hi) if lo is not None and hi is not None else None

    def to_utc(c: str) -> pl.Expr:
        if offset is None:
            return _to_utc(pl.col(c), tz)
        return (pl.col(c) - pl.lit(offset)).dt.replace_time_zone("UTC")

    has_name = NAME in names
    ok = pl.all_horizontal(
        *(pl.col(n).is_not_null() for n in LOG_REQUIRED if n not in OPTIONAL_TEXT),
        *(pl.col(n) >= 0 for n in NON_NEGATIVE),
        pl.col("node_num") <= INT32_MAX,
        *(_in_range(pl.col(c)) for c in TIMES),
        *(pl.col(f"_{c}_utc").is_not_null() for c in TIMES),
        *([~pl.col(NAME).str.starts_with('"')] if has_name else []),
    ).fill_null(False)
    parsed = (
        local.lazy()
        .with_columns(
            *([] if has_name else [pl.lit(None, dtype=pl.String).alias(NAME)]),
            *(to_utc(c).alias(f"_{c}_utc") for c in TIMES),
        )
        .with_columns(
            ok.alias("_ok"),
            pl.lit(None, dtype=pl.String).alias(REASON),
            pl.int_range(2, pl.len() + 2, dtype=pl.Int64).alias(LINE),
        )
    )
    return _parsed_columns(parsed, "_ok").collect()


def parse(
    info: FileInfo, names: list[str], tz: str, frame: pl.DataFrame | None
) -> tuple[pl.DataFrame, FileInfo]:
    """Every line of the log typed and checked, as :func:`parse_log` gives it: rows the
    fast path vouches for come from it, the other lines (normally none) go through the
    line-exact parse. Good rows stay in line order. Also returns ``info``, UTF-8
    checked if the line-exact parse ran.
    """
    fast = read_clean(frame, info, names, tz)
    if fast is None:
        info = with_utf8(info)
        return parse_log(info, names, tz).collect(), info
    ok = pl.col("_ok")
    if fast["_ok"].all():
        return fast.drop("_ok"), info
    info = with_utf8(info)
    redo = parse_log(info, names, tz, only=fast.filter(~ok)[LINE]).collect()
    both = pl.concat([fast.filter(ok).drop("_ok"), redo], how="diagonal")
    return (both if redo[REASON].null_count() == 0 else both.sort(LINE)), info


def with_raw(info: FileInfo, bad: pl.DataFrame) -> pl.DataFrame:
    """``bad`` (``_line``, ``_reason``) with each line's raw text. The parse leaves the
    raw text out of its result, so good rows (nearly all of them) never copy it; the
    few rejected lines are fetched again by line number.
    """
    if RAW in bad.columns:
        return bad
    if bad.is_empty():
        return bad.with_columns(pl.lit(None, dtype=pl.String).alias(RAW))
    lines = scan_lines(info, skip=1).filter(pl.col(LINE).is_in(bad[LINE].implode()))
    return bad.join(lines.collect(), on=LINE, how="left")


SUBMIT = "_submit_time_utc"


def in_store_order(rows: pl.DataFrame) -> pl.DataFrame | None:
    """Parsed ``rows`` in the store's ``(submit_time, job_id)`` order (UTC submit
    time), or None when only a full sort will do (the writer then sorts).

    A Helios log is written in job-id (submission) order, so it nearly always is in
    order already, except where ids of different lengths share a second (``999999``
    sorts after ``1000000`` as text). Those tie groups are re-sorted alone and the rest
    keeps its place, which costs one gather instead of a sort of millions of rows. The
    result equals the writer's stable sort.
    """
    step = pl.col(SUBMIT).diff()
    later = (step > 0) | ((step == 0) & (pl.col("job_id") >= pl.col("job_id").shift()))
    flags = rows.select(
        later.fill_null(True).all().alias("ordered"),
        (step >= 0).fill_null(True).all().alias("times_ordered"),
    ).row(0, named=True)
    if flags["ordered"]:
        return rows
    if not flags["times_ordered"] or rows[SUBMIT].null_count():
        return None
    keys = rows.select(SUBMIT, "job_id").with_row_index("_at")
    broken = keys.filter(~later.fill_null(True))[SUBMIT].unique()
    groups = keys.filter(pl.col(SUBMIT).is_in(broken.implode()))
    resorted = groups.sort(SUBMIT, "job_id", nulls_last=True, maintain_order=True)
    order = keys["_at"].scatter(groups["_at"], resorted["_at"])
    return rows[order]


def cluster_log(file: HeliosFile, tz: str) -> Batch:
    """Read one ``cluster_log.csv`` into a ``jobs`` batch and its rejects."""
    names = header_names(file.path)
    missing = [c for c in LOG_REQUIRED if c not in names]
    if missing:
        raise InputError(
            file.path,
            f"header lacks column(s) {', '.join(missing)}; expected "
            f"{','.join(LOG_REQUIRED[:3])},[{NAME},]{','.join(LOG_REQUIRED[3:])}",
            "line 1",
        )
    # hash and count the file while polars reads it (both release the GIL)
    with ThreadPoolExecutor(max_workers=1) as pool:
        pending = pool.submit(file_info, file.path, 1, check_utf8=False)
        frame = read_text(file.path, names)
        info = pending.result()
    parsed, info = parse(info, names, tz, frame)
    del frame
    ok = pl.col(REASON).is_null()
    good = parsed.filter(ok)
    ordered = in_store_order(good)
    mismatches = good.select(
        pl.col("_run_mismatch").sum().alias("run"), pl.col("_queue_mismatch").sum().alias("queue")
    ).row(0)
    rows = (
        (good if ordered is None else ordered)
        .lazy()
        .select(
            pl.lit(SOURCE).alias("source"),
            pl.lit(file.cluster).alias("dataset"),
            pl.lit(file.cluster).alias("cluster"),
            pl.col("job_id"),
            pl.col("user"),
            pl.col("vc"),
            pl.col(NAME).alias("name"),
            pl.col("_submit_time_utc").alias("submit_time"),
            pl.col("_start_time_utc").alias("start_time"),
            pl.col("_end_time_utc").alias("end_time"),
            pl.col("queue").cast(pl.Float64).alias("queue_s"),
            pl.col("duration").cast(pl.Float64).alias("run_s"),
            pl.col("gpu_num").cast(pl.Float64).alias("gpus"),
            pl.col("gpu_num").cast(pl.Float64).alias("gpus_raw"),
            pl.lit("gpu").alias("gpus_raw_unit"),
            pl.col("cpu_num").cast(pl.Float64).alias("cpus"),
            pl.col("node_num").alias("nodes"),
            pl.lit(1).alias("attempts"),
            pl.col("state")
            .replace_strict(STATUS, default="unknown", return_dtype=pl.String)
            .alias("status"),
            pl.col("state").alias("raw_status"),
            pl.lit(tz).alias("source_tz"),
            pl.lit("absolute").alias("time_basis"),
        )
    )
    rejected = quarantine_rows(
        with_raw(info, parsed.filter(~ok)),
        source=SOURCE,
        dataset=file.cluster,
        cluster=file.cluster,
        table="jobs",
        file=file.path,
    )
    return Batch(
        "jobs",
        file.cluster,
        info,
        rows,
        rejected,
        cluster=file.cluster,
        sort=ordered is None,
        metadata={
            "time_basis": "absolute",
            "source_tz": tz,
            "cluster": file.cluster,
            "jobname_column": "yes" if NAME in names else "no",
            "duration_mismatch_rows": str(mismatches[0] or 0),
            "queue_mismatch_rows": str(mismatches[1] or 0),
        },
    )


def capacity(file: HeliosFile, tz: str) -> Batch:
    """Read one ``cluster_gpu_number.csv`` into a ``capacity`` batch: one row per day
    and value column (``vc`` null for ``total``).
    """
    names = header_names(file.path)
    if names[0] != "date" or len(names) < 2:
        raise InputError(
            file.path,
            f"unexpected header {','.join(names)!r}; expected date,vc<hash>...,total",
            "line 1",
        )
    values = names[1:]
    info = file_info(file.path, header_lines=1)
    checks = _line_checks(_count_problem(len(names), False))
    checks.append((_missing("date"), "date is missing"))
    checks.append(
        (
            ~_missing("date") & pl.col("_date").is_null(),
            pl.format("date {} is not a valid date (YYYY-MM-DD)", _quoted(pl.col("_t_date"))),
        )
    )
    for i, name in enumerate(values):
        raw, value = _text(name), pl.col(f"_v{i}")
        template = name.replace("{", "{{").replace("}", "}}")  # a header is data, not format
        checks += [
            (_missing(name), f"{name} is missing"),
            (value.is_null(), pl.format(f"{template} {{}} is not a valid int", _quoted(raw))),
            (value < 0, f"{name} is negative"),
            (value > INT32_MAX, f"{name} is out of range"),
        ]
    midnight = pl.col("_date").cast(pl.Datetime("us"))
    checks.append(
        (
            ~_in_range(midnight),
            pl.format(
                f"date {{}} is a time out of range ({RANGE_TEXT})", _quoted(pl.col("_t_date"))
            ),
        )
    )
    checks.append(
        (
            pl.col("_time").is_null() | pl.col("_next").is_null(),
            pl.format(f"midnight of {{}} does not exist in {tz}", pl.col("_t_date")),
        )
    )
    parsed = (
        split_fields(scan_lines(info, skip=1), names, None)
        .with_columns(
            pl.col("_t_date")
            .str.strip_chars()
            .str.strptime(pl.Date, DATE_FORMAT, strict=False)
            .alias("_date"),
            *(
                pl.col(f"_t_{name}").str.strip_chars().cast(pl.Int64, strict=False).alias(f"_v{i}")
                for i, name in enumerate(values)
            ),
        )
        .with_columns(
            _to_utc(midnight, tz).alias("_time"),
            _to_utc(midnight.dt.offset_by("1d"), tz).alias("_next"),
        )
        .with_columns(_first(checks).alias(REASON))
        .collect()
    )
    ok = pl.col(REASON).is_null()
    good = parsed.filter(ok)
    long = good.unpivot(
        index=["_time", "_next"],
        on=[f"_v{i}" for i in range(len(values))],
        variable_name="_col",
        value_name="gpus",
    )
    column_name = {f"_v{i}": name for i, name in enumerate(values)}
    rows = long.select(
        pl.lit(SOURCE).alias("source"),
        pl.lit(file.cluster).alias("dataset"),
        pl.lit(file.cluster).alias("cluster"),
        pl.col("_time").alias("time"),
        (pl.col("_next") - pl.col("_time")).dt.total_seconds().cast(pl.Float64).alias("period_s"),
        pl.col("_col")
        .replace_strict(column_name, return_dtype=pl.String)
        .replace("total", None)
        .alias("vc"),
        pl.col("gpus"),
        pl.lit("published").alias("basis"),
    )
    bad = parsed.filter(~ok)
    return Batch(
        "capacity",
        file.cluster,
        info,
        rows,
        quarantine_rows(
            bad,
            source=SOURCE,
            dataset=file.cluster,
            cluster=file.cluster,
            table="capacity",
            file=file.path,
        ),
        rows_read=(info.records - bad.height) * len(values) + bad.height,
        cluster=file.cluster,
        metadata={"source_tz": tz, "cluster": file.cluster, "basis": "published"},
    )


class HeliosLoader:
    """Loader for the HeliosData job logs and daily GPU counts."""

    name = SOURCE
    version = "1"

    def batches(
        self,
        path: Path,
        *,
        cluster: str = "all",
        tz: str = DEFAULT_TZ,
        max_extract_bytes: int | None = None,
        **_: Any,
    ) -> Iterator[Batch]:
        """Yield a ``jobs`` batch per ``cluster_log.csv`` and a ``capacity`` batch per
        ``cluster_gpu_number.csv`` of the selected clusters, times read in ``tz``.
        """
        tz = parse_tz(tz)
        for file in select(path, cluster, max_extract_bytes):
            if file.kind == "cluster_log":
                yield cluster_log(file, tz)
            else:
                yield capacity(file, tz)


CLUSTER_CHOICES = (*CLUSTERS, "all")
"""The ``--cluster`` values: the four clusters of the release, or every one present."""


def _cluster(name: str) -> str:
    return choose("Helios cluster", name, CLUSTER_CHOICES)


@dataclass(frozen=True)
class HeliosOptions:
    """`gpu-trace ingest helios` options (passed to the loader as keyword arguments)."""

    cluster: str = option(
        "all",
        "Cluster to read: venus, earth, saturn, uranus or all (every one present).",
        parse=_cluster,
    )
    tz: str = option(
        DEFAULT_TZ,
        "IANA zone of the naive timestamps (undocumented upstream; the datacenter is in "
        "China). Recorded in jobs.source_tz.",
        parse=parse_tz,
    )
    max_extract_bytes: int | None = option(
        None,
        "Abort a data.zip that expands past this many bytes (e.g. 2G), as datasets fetch "
        "does. Default: 40x its size, at least 64 MiB.",
        parse=size_bytes,
        metavar="SIZE",
    )


PLUGIN = LoaderPlugin(
    name="helios",
    loader=HeliosLoader,
    help="SenseTime Helios: cluster_log.csv -> jobs, cluster_gpu_number.csv -> capacity.\n\nPATH: HeliosData folder (holding data/), data/, a cluster folder, one CSV or data.zip.",
    options=HeliosOptions,
)
