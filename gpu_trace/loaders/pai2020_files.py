"""The seven raw files of the Alibaba PAI 2020 trace: where they are, their documented
columns, and the line-exact parsing every PAI table shares.

The CSVs have no header line; their column names ship as one-line ``<table>.header``
files, next to the CSV or in a ``headers/`` subfolder (the trace's README, github.com/alibaba/clusterdata cluster-trace-gpu-v2020).
The column lists below are the documented ones (3.3): a header file that says anything
else is refused, and a missing one is replaced by the built-in list (recorded in the
written files' metadata), so the real machine spec alone, or a folder without headers,
still loads.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from gpu_trace.errors import GpuTraceError, InputError
from gpu_trace.loaders.textfile import (
    LINE,
    RAW,
    REASON,
    FieldSpec,
    FileInfo,
    file_info,
    parse_fields,
    quarantine_rows,
    read_header,
    scan_lines,
)

SOURCE = "pai2020"
CLUSTER = "pai"
SOURCE_TZ = "Asia/Shanghai"
TIME_BASIS = "hidden_epoch"
GIB = 1 << 30
"""PAI's 'GB' is 2^30 bytes: plan_mem 29.296875 is 30,000 MiB / 1024, max_mem 2.3935546875
is 2,451 MiB / 1024; capacities 512 and 384 are the usual GiB sizes of server RAM."""

TIME_MAX_S = 1e10
"""Sanity bound on times (about 317 years past the hidden epoch; the trace spans ~6e6 s),
so converting to microseconds can never overflow."""

TRACE = "trace"
"""Dataset of the job hierarchy (jobs, tasks, placements, job_tags)."""
MACHINE_SPEC = "machine_spec"
SENSOR = "sensor"
MACHINE_METRIC = "machine_metric"

STATUS = {
    "Terminated": "completed",
    "Failed": "failed",
    "Running": "running",
    "Waiting": "pending",
}
"""PAI status -> canonical; only Terminated is success (3.4). Anything else: unknown."""

TIME_NOTE = (
    "float seconds since a hidden epoch, stored as 1970-01-01T00:00:00Z + seconds; time of "
    "day and weekday are real in Asia/Shanghai (UTC+8), dates are fake. 0 means unknown: "
    "start_time 0 nulls start and end (alibaba/clusterdata analysis/utils.py), end_time 0 "
    "the end only."
)


def _float(name: str) -> FieldSpec:
    return FieldSpec(name, "float")


@dataclass(frozen=True)
class Spec:
    """One PAI table: its short name (the ``tables`` option), file stem and columns."""

    short: str
    stem: str
    fields: tuple[FieldSpec, ...]

    @property
    def csv(self) -> str:
        """The table's CSV file name (``pai_job_table.csv``)."""
        return f"{self.stem}.csv"

    @property
    def header(self) -> str:
        """The name of the file holding the CSV's column names (the CSVs ship without)."""
        return f"{self.stem}.header"

    @property
    def names(self) -> list[str]:
        """The column names, in file order."""
        return [f.name for f in self.fields]


JOB = Spec(
    "job",
    "pai_job_table",
    (
        FieldSpec("job_name", required=True),
        FieldSpec("inst_id"),
        FieldSpec("user"),
        FieldSpec("status"),
        _float("start_time"),
        _float("end_time"),
    ),
)
TASK = Spec(
    "task",
    "pai_task_table",
    (
        FieldSpec("job_name", required=True),
        FieldSpec("task_name", required=True),
        _float("inst_num"),
        FieldSpec("status"),
        _float("start_time"),
        _float("end_time"),
        _float("plan_cpu"),
        _float("plan_mem"),
        _float("plan_gpu"),
        FieldSpec("gpu_type"),
    ),
)
INSTANCE = Spec(
    "instance",
    "pai_instance_table",
    (
        FieldSpec("job_name", required=True),
        FieldSpec("task_name"),
        FieldSpec("inst_name"),
        FieldSpec("worker_name"),
        FieldSpec("inst_id"),
        FieldSpec("status"),
        _float("start_time"),
        _float("end_time"),
        FieldSpec("machine"),
    ),
)
SENSOR_VALUES = (
    "cpu_usage",
    "gpu_wrk_util",
    "avg_mem",
    "max_mem",
    "avg_gpu_wrk_mem",
    "max_gpu_wrk_mem",
    "read",
    "write",
    "read_count",
    "write_count",
)
SENSOR_SPEC = Spec(
    "sensor",
    "pai_sensor_table",
    (
        FieldSpec("job_name"),
        FieldSpec("task_name"),
        FieldSpec("worker_name"),
        FieldSpec("inst_id"),
        FieldSpec("machine"),
        FieldSpec("gpu_name"),
        # typed per value (not per line) by the usage reader, so one bad value costs one row
        *(FieldSpec(v) for v in SENSOR_VALUES),
    ),
)
GROUP_TAG = Spec(
    "group_tag",
    "pai_group_tag_table",
    (
        FieldSpec("inst_id", required=True),
        FieldSpec("user"),
        FieldSpec("gpu_type_spec"),
        FieldSpec("group"),
        FieldSpec("workload"),
    ),
)
MACHINE_SPEC_SPEC = Spec(
    "machine_spec",
    "pai_machine_spec",
    (
        FieldSpec("machine", required=True),
        FieldSpec("gpu_type"),
        _float("cap_cpu"),
        _float("cap_mem"),
        _float("cap_gpu"),
    ),
)
METRIC_VALUES = (
    "machine_cpu_iowait",
    "machine_cpu_kernel",
    "machine_cpu_usr",
    "machine_gpu",
    "machine_load_1",
    "machine_net_receive",
    "machine_num_worker",
    "machine_cpu",
)
MACHINE_METRIC_SPEC = Spec(
    "machine_metric",
    "pai_machine_metric",
    (
        FieldSpec("worker_name"),
        FieldSpec("machine"),
        _float("start_time"),
        _float("end_time"),
        *(FieldSpec(v) for v in METRIC_VALUES),
    ),
)

SPECS: dict[str, Spec] = {
    s.short: s
    for s in (JOB, TASK, INSTANCE, SENSOR_SPEC, GROUP_TAG, MACHINE_SPEC_SPEC, MACHINE_METRIC_SPEC)
}


@dataclass(frozen=True)
class Input:
    """One PAI CSV found on disk, its checksum and record count, and where its column
    names came from.
    """

    spec: Spec
    info: FileInfo
    skip: int
    """Lines to skip: 1 when the CSV itself starts with the header line."""
    header_source: str
    """Where the column names were checked: a header file path, or the built-in list."""

    @property
    def path(self) -> Path:
        """The CSV's path on disk."""
        return self.info.path


def select_tables(tables: str | Sequence[str] | None) -> list[Spec]:
    """The specs named by the ``tables`` option (comma-separated short names, or
    ``all``/None for every table).
    """
    if tables is None:
        return list(SPECS.values())
    names = [t.strip() for t in tables.split(",")] if isinstance(tables, str) else list(tables)
    if names in (["all"], []):
        return list(SPECS.values())
    unknown = [n for n in names if n not in SPECS]
    if unknown:
        msg = f"unknown PAI 2020 table {', '.join(unknown)}; choose from {', '.join(SPECS)} or all"
        raise GpuTraceError(msg)
    return [s for s in SPECS.values() if s.short in names]


def find_inputs(path: Path, specs: Iterable[Spec]) -> list[Input]:
    """The selected tables present under ``path`` (a folder, or one ``pai_*`` CSV)."""
    wanted = list(specs)
    if path.is_file():
        match = [s for s in SPECS.values() if s.csv == path.name]
        if not match:
            raise InputError(
                path, "not a PAI 2020 file (expected pai_<table>.csv, e.g. pai_job_table.csv)"
            )
        folder, candidates = path.parent, [s for s in match if s in wanted]
    else:
        folder, candidates = path, wanted
    present = [s for s in candidates if (folder / s.csv).is_file()]
    if len(present) < 2:
        return [open_input(folder / s.csv, s) for s in present]
    # the files are hashed and counted at once (hashlib releases the GIL): the job and
    # task tables of a 1 M-job trace are ~0.25 GB; the first error, in table order, wins
    with ThreadPoolExecutor(max_workers=min(4, len(present))) as pool:
        return list(pool.map(lambda s: open_input(folder / s.csv, s), present))


def _header_file(folder: Path, spec: Spec) -> Path | None:
    for candidate in (folder / spec.header, folder / "headers" / spec.header):
        if candidate.is_file():
            return candidate
    return None


def _names(line: str) -> list[str]:
    return [n.strip() for n in line.lstrip("\ufeff").split(",")]


def open_input(csv: Path, spec: Spec) -> Input:
    """Check the header file against the documented columns, then hash and count the
    CSV. A CSV that starts with its own header line (someone added one) has it skipped.
    """
    header = _header_file(csv.parent, spec)
    if header is not None:
        got = _names(read_header(header))
        if got != spec.names:
            raise InputError(
                header,
                f"columns {','.join(got)} differ from the documented "
                f"{','.join(spec.names)} (the trace's README: github.com/alibaba/clusterdata, cluster-trace-gpu-v2020)",
                "line 1",
            )
        source = header.name if header.parent == csv.parent else f"headers/{header.name}"
    else:
        source = "built-in column list (no .header file found)"
    info = file_info(csv, header_lines=0)
    if info.empty:
        what = "only a byte-order mark" if info.bom else "0 bytes"
        raise InputError(csv, f"file is empty ({what}); remove it to skip this table")
    skip = 0
    if _names(read_header(csv)) == spec.names:
        skip = 1
        info = dataclasses.replace(info, records=info.records - 1)
    return Input(spec, info, skip, source)


def parse(
    inp: Input, *, only: pl.Series | None = None, skip_lines: pl.Series | None = None
) -> pl.LazyFrame:
    """One row per record: ``_line``, ``_raw``, the typed fields and ``_reason`` (the
    first line-level problem, or null). A trailing CR is dropped first so CRLF files
    parse like LF ones. ``only`` / ``skip_lines`` select lines by number *before* they
    are split, which makes re-reading a few lines of a big file cheap.
    """
    lines = scan_lines(inp.info, skip=inp.skip)
    if only is not None:
        lines = lines.filter(pl.col(LINE).is_in(only.implode()))
    if skip_lines is not None:
        lines = lines.filter(~pl.col(LINE).is_in(skip_lines.implode()))
    lines = lines.with_columns(pl.col(RAW).str.strip_suffix("\r"))
    return parse_fields(lines, inp.spec.fields)


def first(*checks: tuple[pl.Expr, pl.Expr | str]) -> pl.Expr:
    """``_reason`` kept if set, else the reason of the first failing check."""
    return pl.coalesce(
        [pl.col(REASON)]
        + [
            pl.when(bad.fill_null(False)).then(pl.lit(why) if isinstance(why, str) else why)
            for bad, why in checks
        ]
    ).alias(REASON)


def number_checks(
    names: Iterable[str], *, whole: Iterable[str] = ()
) -> list[tuple[pl.Expr, pl.Expr | str]]:
    """Finite, non-negative (and, for ``whole`` ones, integral) float fields."""
    out: list[tuple[pl.Expr, pl.Expr | str]] = []
    whole = set(whole)
    for n in names:
        c = pl.col(n)
        out.append((~c.is_finite(), pl.format(f"{n} {{}} is not a finite number", c)))
        out.append((c < 0, pl.format(f"{n} {{}} is negative", c)))
        if n in whole:
            out.append((c != c.floor(), pl.format(f"{n} {{}} is not a whole number", c)))
    return out


def time_checks(
    start: str = "start_time", end: str = "end_time"
) -> list[tuple[pl.Expr, pl.Expr | str]]:
    """Times are finite, non-negative and below ``TIME_MAX_S``; when both are known, end
    is not before start.
    """
    both = (pl.col(start) != 0) & (pl.col(end) != 0)
    return [
        *number_checks([start, end]),
        *(
            (pl.col(c) >= TIME_MAX_S, pl.format(f"{c} {{}} is out of range (>= 1e10 s)", pl.col(c)))
            for c in (start, end)
        ),
        (both & (pl.col(end) < pl.col(start)), f"{end} is before {start}"),
    ]


def seconds(col: str, start: str = "start_time", end: str = "end_time") -> pl.Expr:
    """``col`` as float seconds, null when unknown. The owners' rule (``utils.py``):
    ``start_time == 0`` makes start and end unknown; ``end_time == 0`` only the end (a
    record still running); an empty field is unknown by itself.
    """
    known = (pl.col(start) != 0).fill_null(True)
    if col == end:
        known = known & (pl.col(end) != 0).fill_null(True)
    return pl.when(known).then(pl.col(col))


def instant(seconds_expr: pl.Expr) -> pl.Expr:
    """Float seconds since the hidden epoch -> UTC timestamp (microseconds)."""
    micros = (seconds_expr * 1_000_000).round().cast(pl.Int64)
    return pl.from_epoch(micros, time_unit="us").dt.replace_time_zone("UTC")


def mapped(col: str, mapping: dict[str, str], default: str | None = None) -> pl.Expr:
    """``col`` translated through ``mapping`` as a when/then chain: elementwise, so it
    streams (``replace_strict`` makes the streaming engine materialize its input).
    """
    out = pl.lit(default, dtype=pl.String)
    for key, value in reversed(mapping.items()):
        out = pl.when(pl.col(col) == key).then(pl.lit(value)).otherwise(out)
    return out


def status(raw: str = "status") -> pl.Expr:
    """The canonical status of a raw PAI status column (unknown ones -> ``unknown``)."""
    return mapped(raw, STATUS, "unknown")


def owned(col: str) -> pl.Expr:
    """A copy of string column ``col`` in fresh buffers. Strings split out of a line are
    views into the buffer of the whole chunk of lines; a few of them kept after a sparse
    filter would pin every chunk (gigabytes for the instance table).
    """
    return pl.concat_str([pl.col(col), pl.lit("")]).alias(col)


def provenance(dataset: str) -> list[pl.Expr]:
    """The source / dataset / cluster columns every PAI row starts with."""
    return [
        pl.lit(SOURCE).alias("source"),
        pl.lit(dataset).alias("dataset"),
        pl.lit(CLUSTER).alias("cluster"),
    ]


def time_columns() -> list[pl.Expr]:
    """The ``source_tz`` and ``time_basis`` columns of a PAI row (times are relative)."""
    return [pl.lit(SOURCE_TZ).alias("source_tz"), pl.lit(TIME_BASIS).alias("time_basis")]


def supersede(frame: pl.DataFrame, keys: list[str], what: str) -> pl.DataFrame:
    """Keep the last line per key among good rows: every earlier one gets the reason
    ``duplicate <what>, superseded by line N``. Returns the frame with ``_reason`` set.
    """
    good = frame.filter(pl.col(REASON).is_null())
    # exact grouping only among the rows whose key hash repeats (a cheap numeric test;
    # counting distinct hashes is cheaper still and settles a file without repeats)
    hashes = good.select(pl.struct(keys).hash(0x50414932)).to_series()
    if hashes.n_unique() == good.height:
        return frame
    good = good.filter(hashes.is_duplicated())
    if good.is_empty():
        return frame
    winners = good.group_by(keys).agg(pl.col(LINE).max().alias("_winner"))
    losers = (
        good.join(winners, on=keys, how="inner")
        .filter(pl.col(LINE) != pl.col("_winner"))
        .select(
            LINE,
            pl.format(f"duplicate {what}, superseded by line {{}}", "_winner").alias("_dup"),
        )
    )
    return (
        frame.join(losers, on=LINE, how="left", maintain_order="left")
        .with_columns(pl.coalesce(REASON, "_dup").alias(REASON))
        .drop("_dup")
    )


def rejects(bad: pl.LazyFrame | pl.DataFrame, inp: Input, table: str, dataset: str) -> pl.LazyFrame:
    """Quarantine rows for the lines of ``bad`` that have a ``_reason``."""
    return quarantine_rows(
        bad.lazy().filter(pl.col(REASON).is_not_null()).with_columns(owned(RAW)),
        source=SOURCE,
        dataset=dataset,
        cluster=CLUSTER,
        table=table,
        file=inp.path,
    )


def metadata(inp: Input, **extra: str) -> dict[str, str]:
    """What every PAI batch records about its input in the Parquet footer."""
    return {
        "time_basis": TIME_BASIS,
        "source_tz": SOURCE_TZ,
        "time_convention": TIME_NOTE,
        "columns_from": inp.header_source,
        **({"header_line_skipped": "yes"} if inp.skip else {}),
        **extra,
    }


# --- the fast path for the small tables -----------------------------------------

_FFFD = "\ufffd".encode()
"""A literal U+FFFD, which the line-exact parse quarantines as invalid UTF-8."""


def _vouched(inp: Input, data: bytes) -> bool:
    """Whether the CSV reader's split of ``data`` is the line-exact parse's: the file is
    valid UTF-8 with no byte-order mark (else the line-exact parse reads a sanitized
    copy) and holds no carriage return and no literal U+FFFD (the line-exact parse
    strips one carriage return per line and quarantines U+FFFD as invalid UTF-8), and it has
    exactly ``fields - 1`` commas per record. The reader refuses a line with more
    fields than the table has; with none longer, equal totals mean none is shorter.
    """
    info = inp.info
    if not info.utf8 or info.bom or b"\r" in data or (not data.isascii() and _FFFD in data):
        return False
    commas = len(inp.spec.fields) - 1
    return data.count(b",") == commas * (info.records + inp.skip)


def fast_read(inp: Input, checks: tuple[tuple[pl.Expr, pl.Expr | str], ...]) -> pl.DataFrame | None:
    """The rows of a small table (job, task, group tag, machine spec) as
    ``parse(inp)`` + ``checks`` give them (``_line``, ``_raw``, fields, ``_reason``),
    but read by polars' multi-threaded CSV reader, ~3x cheaper; None when the file is
    not one the reader can vouch for (:func:`_vouched`), and the caller parses it
    line-exactly.

    The reader splits on every comma with quoting off, as the line-exact parse does,
    and types nothing: each float field is cast from the same text with the same cast
    (without the strip, so a value with spaces fails here). A line that would get a
    reason (a missing name, ``12x``, a negative plan, end before start) or whose text
    fails the cast is re-read line-exactly, which words the reason (or types `` 7.5 ``
    after stripping). Good rows carry no ``_raw`` text: :func:`with_raw` fetches it for
    lines quarantined later (superseded duplicates). A file with an empty line ends up
    line-exact whole (one row of nulls and a short comma count).
    """
    fields = inp.spec.fields
    if any(f.kind not in ("str", "float") or f.nulls != ("",) for f in fields):
        return None
    data = inp.path.read_bytes()
    if not _vouched(inp, data):
        return None
    try:
        text = pl.read_csv(
            data,
            has_header=False,
            schema={f.name: pl.String for f in fields},
            quote_char=None,
            skip_rows=inp.skip,
        )
    except pl.exceptions.PolarsError:
        return None
    del data
    if text.height != inp.info.records:
        return None
    numbers = [f.name for f in fields if f.kind == "float"]
    start = 1 + inp.skip
    typed = text.with_columns(
        pl.col(numbers).cast(pl.Float64, strict=False),
        pl.int_range(start, start + text.height, dtype=pl.Int64).alias(LINE),
        pl.lit(None, dtype=pl.String).alias(RAW),
        pl.lit(None, dtype=pl.String).alias(REASON),
    ).select(LINE, RAW, *(f.name for f in fields), REASON)
    # a line the line-exact parse would word a reason for, or type otherwise (spaces)
    unparsed = [text.get_column(n).is_not_null() & typed.get_column(n).is_null() for n in numbers]
    suspect = typed.select(
        pl.any_horizontal(
            pl.lit(value=False),
            *(pl.col(f.name).is_null() for f in fields if f.required),
            *(bad.fill_null(value=False) for bad, _ in checks),
        )
    ).to_series()
    del text
    for u in unparsed:
        suspect = suspect | u
    if not suspect.any():
        return typed
    lines = typed.get_column(LINE).filter(suspect)
    exact = parse(inp, only=lines).with_columns(first(*checks)).collect()
    # one chunk: polars 2.1 panics formatting the line numbers of this concat otherwise
    return pl.concat([typed.filter(~suspect), exact]).sort(LINE).rechunk()


def with_raw(frame: pl.DataFrame, inp: Input) -> pl.DataFrame:
    """``frame`` with the ``_raw`` text of every line that has a ``_reason`` (the fast
    path reads no text for good lines; a duplicate superseded later needs its own).
    """
    missing = frame.filter(pl.col(REASON).is_not_null() & pl.col(RAW).is_null())
    if missing.is_empty():
        return frame
    lines = missing.get_column(LINE)
    raw = (
        scan_lines(inp.info, skip=inp.skip)
        .filter(pl.col(LINE).is_in(lines.implode()))
        .with_columns(pl.col(RAW).str.strip_suffix("\r").alias("_text"))
        .select(LINE, "_text")
        .collect()
    )
    return (
        frame.join(raw, on=LINE, how="left", maintain_order="left")
        .with_columns(pl.coalesce(RAW, "_text").alias(RAW))
        .drop("_text")
    )
