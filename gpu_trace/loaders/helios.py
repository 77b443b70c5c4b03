"""SenseTime Helios (S-Lab-System-Group/HeliosData): Slurm job logs and daily GPU counts.

Inputs (``docs/trace-formats.md`` section 2), per cluster (Venus, Earth, Saturn, Uranus):

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
  canonical int32. ``job_id`` is kept as written (a Slurm id; not forced to be numeric,
  so array-job ids would survive), and duplicates are not checked.

Parsing is line-exact (``textfile.scan_lines``): one polars pass splits and types every
line, so each rejected row keeps its physical line number, raw text and reason. The
pass does not carry the raw text along; the rejected lines (normally none) are fetched
again by number, so good rows never pay for copying it.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import polars as pl

from gpu_trace.errors import GpuTraceError, InputError
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
)
from gpu_trace.store.parquet import slug

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
}
"""Slurm states as Helios writes them; anything else (the one ``SUSPENDED``) is
``unknown``, with the original kept in ``raw_status``."""

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


def check_tz(tz: str) -> str:
    """``tz`` if it names an IANA zone, else a one-line error."""
    try:
        ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise GpuTraceError(
            f"unknown time zone {tz!r}; use an IANA name such as {DEFAULT_TZ}"
        ) from None
    return tz


# --------------------------------------------------------------------------- discovery

_EXTRACTED: list[tempfile.TemporaryDirectory[str]] = []


def _extract_zip(path: Path) -> list[HeliosFile]:
    """Stream the Helios members of ``data.zip`` into a temporary folder that lives
    until the process exits (the lazy scans read the files after this returns). Only
    ``<Cluster>/cluster_*.csv`` members are extracted, under names we build ourselves,
    so member paths cannot escape the folder."""
    try:
        with zipfile.ZipFile(path) as zf:
            members = [(m, _MEMBER.search(m.filename)) for m in zf.infolist() if not m.is_dir()]
            wanted = [(m, hit) for m, hit in members if hit and "__MACOSX" not in m.filename]
            if not wanted:
                raise InputError(
                    path, "zip archive holds no <Cluster>/cluster_log.csv or cluster_gpu_number.csv"
                )
            tmp = tempfile.TemporaryDirectory(prefix="gpu-trace-helios-")
            _EXTRACTED.append(tmp)
            found: list[HeliosFile] = []
            for member, hit in wanted:
                folder = Path(tmp.name) / slug(hit["cluster"])
                folder.mkdir(exist_ok=True)
                dest = folder / f"{hit['kind']}.csv"
                if dest.exists():
                    raise InputError(
                        path, f"two {hit['kind']}.csv members for cluster {slug(hit['cluster'])}"
                    )
                with zf.open(member) as src, dest.open("wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 22)
                found.append(HeliosFile(slug(hit["cluster"]), hit["kind"], dest))
            return found
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, NotImplementedError) as exc:
        raise InputError(path, f"not a readable zip archive ({exc})") from None


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


def discover(path: Path) -> list[HeliosFile]:
    """Every Helios file under ``path`` (see the module docstring for the layouts)."""
    if path.is_file():
        if path.suffix.lower() == ".zip":
            return _extract_zip(path)
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
        found = _extract_zip(path / "data.zip")
    return found


def select(path: Path, cluster: str) -> list[HeliosFile]:
    """The files for the chosen cluster(s) (``all``, one slug, or a comma-separated
    list), in the owners' cluster order, each cluster's log before its capacity."""
    found = discover(path)
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
    duplicate names make the file unreadable by name."""
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
    exist in ``tz``; the earlier instant where it is ambiguous)."""
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


def parse_log(info: FileInfo, names: list[str], tz: str) -> pl.LazyFrame:
    """Type every line of a ``cluster_log.csv``: the fields it needs, ``_reason`` (null
    for good rows, else the first problem), UTC instants and the mismatch flags."""
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
            typed.append(
                raw.str.strip_chars()
                .str.strptime(pl.Datetime("us"), TIME_FORMAT, strict=False)
                .alias(name)
            )
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
            pl.col(c).is_not_null() & pl.col(f"_{c}_utc").is_null(),
            pl.format(f"{c} {{}} does not exist in {tz}", pl.col(c).dt.strftime(TIME_FORMAT)),
        )
        for c in TIMES
    ]
    epoch = {c: pl.col(c).dt.epoch("s") for c in TIMES}
    return (
        split_fields(scan_lines(info, skip=1), names, NAME if has_name else None)
        .with_columns(typed)
        .with_columns(_to_utc(pl.col(c), tz).alias(f"_{c}_utc") for c in TIMES)
        .with_columns(
            _first(checks).alias(REASON),
            (pl.col("duration") != epoch["end_time"] - epoch["start_time"]).alias("_run_mismatch"),
            (pl.col("queue") != epoch["start_time"] - epoch["submit_time"]).alias(
                "_queue_mismatch"
            ),
        )
        .select(
            LINE,
            REASON,
            *LOG_REQUIRED,
            NAME,
            "_run_mismatch",
            "_queue_mismatch",
            *(f"_{c}_utc" for c in TIMES),
        )
    )


def with_raw(info: FileInfo, bad: pl.DataFrame) -> pl.DataFrame:
    """``bad`` (``_line``, ``_reason``) with each line's raw text. The parse leaves the
    raw text out of its result, so good rows (nearly all of them) never copy it; the
    few rejected lines are fetched again by line number."""
    if bad.is_empty():
        return bad.with_columns(pl.lit(None, dtype=pl.String).alias(RAW))
    lines = scan_lines(info, skip=1).filter(pl.col(LINE).is_in(bad[LINE].implode()))
    return bad.join(lines.collect(), on=LINE, how="left")


def in_store_order(rows: pl.DataFrame) -> bool:
    """Whether ``rows`` already follow the store's ``(submit_time, job_id)`` order.

    A Helios log is written in job-id (submission) order, so it usually is, and one
    linear check lets the writer skip a full sort of millions of rows. Ties keep their
    order either way (the writer's sort is stable)."""
    step = pl.col("submit_time").diff()
    later = (step > 0) | ((step == 0) & (pl.col("job_id") >= pl.col("job_id").shift()))
    return bool(rows.select(later.fill_null(True).all()).item())


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
    info = file_info(file.path, header_lines=1)
    parsed = parse_log(info, names, tz).collect()
    ok = pl.col(REASON).is_null()
    good = parsed.filter(ok)
    mismatches = good.select(
        pl.col("_run_mismatch").sum().alias("run"), pl.col("_queue_mismatch").sum().alias("queue")
    ).row(0)
    rows = good.select(
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
        sort=not in_store_order(rows),
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
    and value column (``vc`` null for ``total``)."""
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
        checks += [
            (_missing(name), f"{name} is missing"),
            (value.is_null(), pl.format(f"{name} {{}} is not a valid int", _quoted(raw))),
            (value < 0, f"{name} is negative"),
            (value > INT32_MAX, f"{name} is out of range"),
        ]
    midnight = pl.col("_date").cast(pl.Datetime("us"))
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
        self, path: Path, *, cluster: str = "all", tz: str = DEFAULT_TZ, **_: Any
    ) -> Iterator[Batch]:
        """Yield a ``jobs`` batch per ``cluster_log.csv`` and a ``capacity`` batch per
        ``cluster_gpu_number.csv`` of the selected clusters, times read in ``tz``."""
        check_tz(tz)
        for file in select(path, cluster):
            if file.kind == "cluster_log":
                yield cluster_log(file, tz)
            else:
                yield capacity(file, tz)
