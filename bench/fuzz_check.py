r"""Independent record counts and the classifier of the ingest fuzz campaign.

The harness must not trust the loaders it tests, so the expected record count of a
mutated input is computed here from its bytes with the *documented* per-format rules
(README "Data model", each format's own documentation: the trace READMEs, NVIDIA's nvidia-smi / DCGM docs, Prometheus' exposition format), never
with our parsers. A line is a ``\n``-terminated byte run (a last line without ``\n``
counts; ``\r`` is not a break), as every loader documents.

Per-format rules (``expect``):

- header CSVs (openb pod/node lists, Helios ``cluster_log.csv``, Philly
  ``cluster_machine_list``, Tiresias/Chronus, nvidia-smi compute-apps): every physical
  line after the first is one record (empty lines too: they are quarantined).
- headerless files (PAI 2020 ``pai_*.csv``, Gavel ``.trace``): every physical line.
- Helios ``data.zip``: not counted (``mode="none"``); fuzzed for crashes only.
- Philly ``cluster_job_log``: the number of elements of the JSON array when the text
  is valid JSON; for damaged JSON no count is defined (``mode="none"``: only the
  store's internal consistency is checked).
- cell formats (Helios ``cluster_gpu_number.csv``, PAI sensor / machine_metric,
  nvidia-smi query CSV and dmon, dcgmi dmon): a line is one record when rejected whole
  and *k* records (one per kept column) when read, so with *L* data lines the total
  *T* must be ``L + (k-1) g`` for some ``0 <= g <= L`` (``mode="cells"``).
- nvidia-smi pmon: one record per non-comment line, except lines whose pid is ``-``.
- Prometheus exposition: one record per line that is neither blank nor ``#``.
- AcmeTrace: ``trace_<cluster>.csv`` one record per line after the header; the wide
  utilization CSVs like Philly's util files (``mode="bound"``), a non-empty cell being
  one record and a "no error" XID cell counted through ``no_event_cells``.
- Slurm sacct exports: every line after the header is one ``jobs`` record, except the
  lines whose ``JobID`` field (found by header name, counted from the right after a
  ``JobName``, one trailing ``|`` dropped under a ``--parsable`` header) holds a dot:
  job steps, folded into ``placements`` (derived rows, not counted here); the extra
  lines of one job (requeued runs, components) are counted as merged by the loader, and
  the count is adjusted by its recorded ``array_tasks_added`` (a pending range is one
  line but a job per task).
- Prometheus ``query_range`` JSON (``prometheus-range``): JSON lines when the file has
  two or more non-blank lines and the first parses alone, else one document. A response
  (a line, or the document) that is not a JSON object with ``status`` ``success`` and a
  ``data.result`` list of ``resultType`` ``matrix``/``vector`` is one record (for a
  single document: no count, the ingest must fail); else each series is one record when
  it is not an object, its ``metric`` is not an object or its ``values`` (``value`` for
  a vector) is not a list, and otherwise one record per element of ``values``, plus one
  per element of a matrix series' ``histograms`` list.
- Philly util CSVs: a data line is one quarantined record, or one sample per value
  that is not ``NA`` (a line of only ``NA`` is none), so the total lies between the
  sums of ``min(1, v)`` and ``max(1, v)`` over lines with *v* such values
  (``mode="bound"``).

For telemetry the total is written + quarantined over ``gpu_samples`` and ``events``
plus the "no error" event cells the loader counts in the Parquet metadata
(``no_event_cells``), which by the docs are records that produce no row.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SAMPLE_TABLES = ("gpu_samples", "events")


@dataclass(frozen=True)
class Expect:
    """What the harness expects of one mutated file."""

    tables: tuple[str, ...]
    """The tables whose rows (written + quarantined) are this file's records."""
    mode: str
    """``exact``, ``cells``, ``bound`` or ``none`` (see the module docstring)."""
    lines: int
    k: int = 1
    no_event: bool = False
    """Add the gpu_samples metadata's ``no_event_cells`` to the total."""
    folds: bool = False
    """Slurm: subtract the jobs metadata's ``array_tasks_added`` (a pending array range
    is one line but a job per task; the requeued runs and heterogeneous components of
    one job are several lines, one job, counted by the loader as merged)."""
    lo: int = 0
    hi: int = 0
    """``bound``: the total lies in [lo, hi]."""


BOM = b"\xef\xbb\xbf"


def physical_lines(data: bytes) -> list[bytes]:
    r"""The file's lines without their ``\n`` (a leading UTF-8 byte-order mark is not
    part of the first line: the loaders ignore it, as the formats' writers expect).
    """
    data = data.removeprefix(BOM)
    if not data:
        return []
    parts = data.split(b"\n")
    return parts[:-1] if data.endswith(b"\n") else parts


def _text(line: bytes) -> str:
    return line.decode("utf-8", errors="replace").rstrip("\r")


def _smi_query_kept(header: str) -> int:
    from gpu_trace.loaders.telemetry_fields import SMI_QUERY

    names = [t.strip().partition(" [")[0].strip() for t in header.split(",")]
    return sum(1 for n in names if n in SMI_QUERY)


def expect(kind: str, name: str, data: bytes) -> Expect:
    """The independent expectation for input file ``name`` of ingest ``kind``.

    Field vocabularies (which columns are kept) come from ``gpu_trace.loaders.telemetry_fields``,
    the documented mapping tables, not from the parsers.
    """
    if name.endswith(".zip"):
        # members' records are not counted here: only the store's own consistency
        return Expect((), "none", 0)
    lines = physical_lines(data)
    n = len(lines)
    after_header = max(n - 1, 0)
    if kind in ("openb", "chronus") or name in ("cluster_log.csv", "cluster_machine_list"):
        return _header_csv(kind, name, after_header)
    if name == "cluster_gpu_number.csv":
        k = len(_text(lines[0]).split(",")) - 1 if lines else 0
        return Expect(("capacity",), "cells", after_header, k)
    if kind == "gavel":
        return Expect(("jobs",), "exact", n)
    if kind == "pai2020":
        return _pai(name, n)
    if name == "cluster_job_log":
        return _philly_job_log(data)
    if name.startswith("cluster_") and name.endswith("_util"):
        return _philly_util(name, lines, after_header)
    rule = _TELEMETRY_AND_OTHERS.get(kind)
    if rule is not None:
        return rule(name, lines, data)
    msg = f"no counting rule for {kind} {name}"
    raise ValueError(msg)


def _header_csv(kind: str, name: str, after_header: int) -> Expect:
    """A header CSV: every line after the header is one record of its table."""
    table = {"openb": "machines" if "node_list" in name else "jobs"}.get(kind, "jobs")
    if name == "cluster_machine_list":
        table = "machines"
    return Expect((table,), "exact", after_header)


def _pai(name: str, n: int) -> Expect:
    """PAI 2020 (headerless): every line a record; the usage tables count by cell."""
    table = PAI_TABLES[name]
    if table == "usage":
        return Expect((table,), "cells", n, _pai_measures(name))
    return Expect((table,), "exact", n)


def _philly_job_log(data: bytes) -> Expect:
    """Philly ``cluster_job_log``: the elements of a valid JSON array, else no count."""
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
        return Expect(("jobs",), "none", 0)
    return (
        Expect(("jobs",), "exact", len(doc))
        if isinstance(doc, list)
        else Expect(("jobs",), "none", 0)
    )


def _philly_util(name: str, lines: Sequence[bytes], after_header: int) -> Expect:
    """Philly util CSVs: a data line is one quarantined record, or one sample per value
    that is not NA (the ``bound`` rule of the module docstring).
    """
    table = "gpu_samples" if "gpu" in name else "host_samples"
    lo = hi = 0
    for ln in lines[1:]:
        values = _text(ln).split(",")[2:]
        present = sum(1 for v in values if v.strip() != "NA" and v != "")
        present += sum(1 for v in values[:-1] if v == "")  # empty: not NA (bad row)
        lo, hi = lo + min(1, present), hi + max(1, present)
    return Expect((table,), "bound", after_header, lo=lo, hi=hi)


def _prometheus(name: str, lines: Sequence[bytes], data: bytes) -> Expect:
    """Prometheus exposition: one record per line that is neither blank nor ``#``."""
    records = sum(1 for ln in lines if _text(ln).strip() and not _text(ln).strip().startswith("#"))
    return Expect(SAMPLE_TABLES, "exact", records, no_event=True)


def _dcgmi(name: str, lines: Sequence[bytes], data: bytes) -> Expect:
    """The dcgmi dmon rule: ``cells`` over the data lines (not comments, not the
    ``ID`` unit line), *k* = the header's field tags gpu-trace maps.
    """
    from gpu_trace.loaders.telemetry_fields import DCGM_BY_TAG

    tags = _text(lines[0]).lstrip("#").split()[1:] if lines else []
    data_lines = [
        ln
        for ln in lines
        if not _text(ln).lstrip().startswith("#")
        and (_text(ln).split()[:1] or [""])[0].lower() != "id"
    ]
    k = sum(1 for t in tags if t in DCGM_BY_TAG)
    return Expect(SAMPLE_TABLES, "cells", len(data_lines), k, no_event=True)


def _kubernetes(data: bytes, lines: Sequence[bytes]) -> Expect:
    """Kubernetes (``docs/your-cluster.md``): a Node record counts once on each of the
    two ``machines`` lines (capacity and allocatable); every other record (a Pod, a
    record of another kind, a JSON-lines line that is not JSON) once, on ``placements``
    when the file holds a pod, else on the capacity ``machines`` line. Records: the
    ``items`` of a valid JSON document, else the non-blank lines of JSON lines; a
    damaged document has no defined count (``none``).
    """
    try:
        doc = json.loads(data.removeprefix(BOM))
    except (ValueError, RecursionError):
        doc = None
    if isinstance(doc, dict) and isinstance(doc.get("items"), list):
        records: list[object] = list(doc["items"])
    elif isinstance(doc, dict) and len([ln for ln in lines if _text(ln).strip()]) > 1:
        records = [doc]  # pretty-printed single object
    else:
        if doc is None and lines and _text(lines[0]).strip().endswith(("{", "[", ",", ":")):
            return Expect(("placements", "machines"), "none", 0)
        records = []
        for ln in lines:
            text = _text(ln).strip(" \t\r")
            if not text:
                continue
            try:
                ln.decode("utf-8")  # an invalid UTF-8 line is quarantined whatever it holds
                records.append(json.loads(text))
            except (ValueError, RecursionError):
                records.append(None)
    kinds = [r.get("kind") if isinstance(r, dict) else None for r in records]
    nodes = kinds.count("Node")
    total = len(records) + nodes  # nodes count twice
    return Expect(("placements", "machines"), "exact", total)


def _acme(name: str, lines: Sequence[bytes]) -> Expect:
    """AcmeTrace: a job trace is one record per line after the header; a utilization
    file's data line is one quarantined record or one record per non-empty cell (a
    sample, an event, a "no error" XID cell or a quarantined cell).
    """
    after_header = max(len(lines) - 1, 0)
    if name.startswith("trace_"):
        return Expect(("jobs",), "exact", after_header)
    table = "host_samples" if name.startswith("NODE_") else "gpu_samples"
    lo = hi = 0
    for ln in lines[1:]:
        present = sum(1 for v in _text(ln).split(",")[1:] if v.strip())
        lo, hi = lo + min(1, present), hi + max(1, present)
    return Expect((table, "events"), "bound", after_header, no_event=True, lo=lo, hi=hi)


def _slurm(lines: Sequence[bytes]) -> Expect:
    """Slurm sacct exports: every line after the header is one record; those whose ``JobID``
    field holds a dot are steps (folded into ``placements``), the rest ``jobs`` records.
    The field is found by header name; fields after ``JobName`` (free text that may hold
    ``|``) are counted from the right; a ``--parsable`` header (ending in ``|``) means
    one trailing ``|`` per line.
    """
    if not lines:
        return Expect(("jobs",), "none", 0)
    header = _text(lines[0])
    trailing = header.endswith("|")
    names = [n.strip().lower() for n in header.removesuffix("|").split("|")]
    if "jobid" not in names:
        return Expect(("jobs",), "none", 0)
    at, n = names.index("jobid"), len(names)
    name_at = names.index("jobname") if "jobname" in names else None
    steps = 0
    for raw in lines[1:]:
        text = raw.decode("utf-8", errors="replace").removesuffix("\r")
        if trailing:
            text = text.removesuffix("|")
        parts = text.split("|")
        if name_at is None or at < name_at:
            field = parts[at] if at < len(parts) else ""
        else:
            field = parts[at - n] if len(parts) >= n else ""
        steps += "." in field
    return Expect(("jobs",), "exact", len(lines) - 1 - steps, folds=True)


def _json(blob: bytes) -> tuple[bool, Any]:
    try:
        return True, json.loads(blob)
    except (ValueError, RecursionError):
        return False, None


def _range_records(doc: Any) -> int | None:
    """Records of one parsed response; None when the response is unusable as a whole."""
    data = doc.get("data") if isinstance(doc, dict) else None
    if not (
        isinstance(doc, dict)
        and doc.get("status") == "success"
        and isinstance(data, dict)
        and data.get("resultType") in ("matrix", "vector")
        and isinstance(data.get("result"), list)
    ):
        return None
    vector = data["resultType"] == "vector"
    n = 0
    for s in data["result"]:
        if not isinstance(s, dict) or not isinstance(s.get("metric", {}), dict):
            n += 1
            continue
        if vector:
            values = [s["value"]] if "value" in s else None
        else:
            values = s.get("values", [] if "histograms" in s else None)
        if not isinstance(values, list):
            n += 1
            continue
        hist = s.get("histograms")
        n += len(values) + (len(hist) if not vector and isinstance(hist, list) else 0)
    return n


def _promrange(lines: Sequence[bytes], data: bytes) -> Expect:
    filled = [ln for ln in lines if ln.strip()]
    if len(filled) >= 2 and _json(filled[0])[0]:
        total = 0
        for ln in filled:
            ok, doc = _json(ln)
            n = _range_records(doc) if ok else None
            total += 1 if n is None else n
        return Expect(SAMPLE_TABLES, "exact", total, no_event=True)
    ok, doc = _json(data)
    n = _range_records(doc) if ok else None
    # an unusable single document has no count (the ingest must refuse it: exit 1)
    return (
        Expect(SAMPLE_TABLES, "exact", 0, no_event=True)
        if n is None
        else Expect(SAMPLE_TABLES, "exact", n, no_event=True)
    )


PAI_TABLES = {
    "pai_job_table.csv": "jobs",
    "pai_task_table.csv": "tasks",
    "pai_instance_table.csv": "placements",
    "pai_group_tag_table.csv": "job_tags",
    "pai_machine_spec.csv": "machines",
    "pai_sensor_table.csv": "usage",
    "pai_machine_metric.csv": "usage",
}
"""The table each PAI file's records go to (README data model)."""

_PAI_MEASURES = {"pai_sensor_table.csv": 10, "pai_machine_metric.csv": 8}


def _pai_measures(name: str) -> int:
    return _PAI_MEASURES[name]


def _smi(name: str, lines: Sequence[bytes]) -> Expect:
    from gpu_trace.loaders.telemetry_fields import SMI_DMON

    first = _text(lines[0]) if lines else ""
    # told apart by the first line, as documented (a mutated file may change format)
    tokens = first.lstrip("# ").lower().split() if first.lstrip().startswith("#") else []
    header = [t.strip().partition(" [")[0].strip() for t in first.split(",")]
    if "pid" in tokens and "gpu" in tokens:
        names = tokens
        data = [_text(ln) for ln in lines if not _text(ln).lstrip().startswith("#")]
        pid = names.index("pid") if "pid" in names else -1
        idle = sum(
            1
            for t in data
            if pid >= 0
            and "\ufffd" not in t
            and len(t.split()) >= len(names)
            and t.split()[pid] == "-"
        )
        return Expect(("gpu_processes",), "exact", len(data) - idle)
    if "gpu" in tokens:
        names = first.lstrip("#").strip().lower().split()
        data = [ln for ln in lines if not _text(ln).lstrip().startswith("#")]
        k = sum(1 for n in names if n in SMI_DMON)
        return Expect(SAMPLE_TABLES, "cells", len(data), k, no_event=True)
    if "pid" in header and ("used_gpu_memory" in header or "used_memory" in header):
        return Expect(("gpu_processes",), "exact", max(len(lines) - 1, 0))
    return Expect(SAMPLE_TABLES, "cells", max(len(lines) - 1, 0), _smi_query_kept(first), True)


_Rule = Callable[[str, Sequence[bytes], bytes], Expect]
_TELEMETRY_AND_OTHERS: dict[str, _Rule] = {
    "prometheus": _prometheus,
    "prometheus-range": lambda _name, lines, data: _promrange(lines, data),
    "dcgmi": _dcgmi,
    "nvidia-smi": lambda name, lines, _data: _smi(name, lines),
    "kubernetes": lambda _name, lines, data: _kubernetes(data, lines),
    "acme": lambda name, lines, _data: _acme(name, lines),
    "slurm": lambda _name, lines, _data: _slurm(lines),
}
"""The counting rule per ingest kind, for the kinds that are told apart by kind alone
(after the file-name rules of :func:`expect`)."""


@dataclass
class StoreCounts:
    """What the store says about one ingest, read back with DuckDB on its Parquet files."""

    ingests: list[dict[str, Any]] = field(default_factory=list)
    """Rows of the ``ingests`` table: table, dataset, file, rows_read/written/quarantined."""
    table_rows: dict[tuple[str, str], int] = field(default_factory=dict)
    """(table, dataset) -> rows actually in the table."""
    quarantine_rows: dict[tuple[str, str, str], int] = field(default_factory=dict)
    """(table, dataset, file) -> rows actually in ``quarantine``."""
    no_event: dict[str, int] = field(default_factory=dict)
    """dataset -> ``no_event_cells`` from the gpu_samples file's metadata."""
    folds: dict[str, int] = field(default_factory=dict)
    """dataset -> ``-array_tasks_added`` from a Slurm jobs file's metadata."""


def read_store(store: Path, source: str) -> StoreCounts:
    """Count the store's rows for ``source`` via the catalog views (layout-proof)."""
    from gpu_trace.store.catalog import connect

    out = StoreCounts()
    con = connect(store)
    try:
        cols = ["table", "dataset", "file", "rows_read", "rows_written", "rows_quarantined"]
        cols.append("rows_merged")
        rows = con.execute(
            'select "table", dataset, file, rows_read, rows_written, rows_quarantined, '
            "coalesce(rows_merged, 0) from ingests where source = ?",
            [source],
        ).fetchall()
        out.ingests = [dict(zip(cols, r, strict=True)) for r in rows]
        for table in sorted({r["table"] for r in out.ingests}):
            for dataset, n in con.execute(
                f'select dataset, count(*) from "{table}" where source = ? group by 1', [source]
            ).fetchall():
                out.table_rows[(table, dataset)] = n
        for table, dataset, file, n in con.execute(
            'select "table", dataset, file, count(*) from quarantine where source = ? group by all',
            [source],
        ).fetchall():
            out.quarantine_rows[(table, dataset, file)] = n
    finally:
        con.close()
    out.no_event = _no_event_cells(store, source)
    out.folds = _folds(store, source)
    return out


def _folds(store: Path, source: str) -> dict[str, int]:
    import pyarrow.parquet as pq

    root = store / "current" if (store / "current").is_dir() else store
    found: dict[str, int] = {}
    for f in root.glob(f"**/jobs/source={source}/*.parquet"):
        if any(part.startswith(".") for part in f.relative_to(root).parts):
            continue
        meta = pq.read_metadata(f).metadata or {}
        added = meta.get(b"gpu_trace.array_tasks_added")
        if added is not None:
            found[f.stem] = found.get(f.stem, 0) - int(added)
    return found


def _no_event_cells(store: Path, source: str) -> dict[str, int]:
    import pyarrow.parquet as pq

    root = store / "current" if (store / "current").is_dir() else store
    found: dict[str, int] = {}
    for f in root.glob(f"**/gpu_samples/source={source}/*.parquet"):
        if any(part.startswith(".") for part in f.relative_to(root).parts):
            continue
        meta = pq.read_metadata(f).metadata or {}
        value = meta.get(b"gpu_trace.no_event_cells")
        if value is not None:
            found[f.stem] = found.get(f.stem, 0) + int(value)
    return found


def _adjustment(exp: Expect, counts: StoreCounts, datasets: set[str]) -> int:
    """Records the loader counts in its metadata rather than as rows (see :class:`Expect`)."""
    extra = 0
    if exp.no_event:
        extra += sum(counts.no_event.get(d, 0) for d in datasets)
    if exp.folds:
        extra += sum(counts.folds.get(d, 0) for d in datasets)
    return extra


def reconcile(exp: Expect, counts: StoreCounts, file: str) -> str | None:
    """None when the store accounts for every record of ``file``, else the reason."""
    why = _inconsistent(counts)
    if why:
        return why
    mine = [r for r in counts.ingests if r["file"] == file and r["table"] in exp.tables]
    total = sum(r["rows_written"] + r["rows_quarantined"] + r.get("rows_merged", 0) for r in mine)
    read = sum(r["rows_read"] for r in mine)
    extra = _adjustment(exp, counts, {r["dataset"] for r in mine})
    total += extra
    read += extra
    if exp.mode == "none":
        return None
    if not mine and exp.lines:
        return f"{file}: {exp.lines} records in the input but no {'/'.join(exp.tables)} ingest row"
    if exp.mode == "exact":
        if total != exp.lines or read != exp.lines:
            return f"{file}: {exp.lines} records in the input, store has read {read}, written+quarantined {total}"
        return None
    if exp.mode == "bound":
        if not exp.lo <= total <= exp.hi or read != total:
            return f"{file}: {exp.lines} data lines ({exp.lo}..{exp.hi} records) but store has {total} (read {read})"
        return None
    if not _cells_ok(exp, total) or read != total:
        return (
            f"{file}: {exp.lines} data lines x {exp.k} kept fields cannot give "
            f"{total} records (read {read})"
        )
    return None


def _inconsistent(counts: StoreCounts) -> str | None:
    """The store's own bookkeeping, whatever the input: every ingest row has read =
    written + quarantined, the quarantine holds what it says, every table what it says.
    """
    by_table: dict[tuple[str, str], int] = {}
    for r in counts.ingests:
        key = (r["table"], r["dataset"])
        by_table[key] = by_table.get(key, 0) + r["rows_written"]
        merged = r.get("rows_merged") or 0
        if r["rows_read"] != r["rows_written"] + r["rows_quarantined"] + merged:
            return (
                f"ingests {r['file']}/{r['table']}: rows_read {r['rows_read']} != written "
                f"{r['rows_written']} + quarantined {r['rows_quarantined']} + merged {merged}"
            )
        q = counts.quarantine_rows.get((r["table"], r["dataset"], r["file"]), 0)
        if q != r["rows_quarantined"]:
            return f"{r['file']}/{r['table']}: ingests says {r['rows_quarantined']} quarantined, quarantine holds {q}"
    for (table, dataset), written in by_table.items():
        actual = counts.table_rows.get((table, dataset), 0)
        if actual != written and table != "quarantine":
            return f"{table}/{dataset}: ingests says {written} written, table holds {actual}"
    return None


def _cells_ok(exp: Expect, total: int) -> bool:
    """The ``cells`` rule: total = L + (k-1) g for some 0 <= g <= L (k = 0: at most L)."""
    extra_cells = total - exp.lines
    if exp.k == 1:
        return extra_cells == 0
    if exp.k > 1:
        return extra_cells % (exp.k - 1) == 0 and 0 <= extra_cells // (exp.k - 1) <= exp.lines
    return 0 <= total <= exp.lines


@dataclass(frozen=True)
class Outcome:
    """One case's class and a one-line reason."""

    cls: str
    """``ok``, ``rejected``, ``traceback``, ``silent_drop`` or ``hang``."""
    reason: str
    traceback: str = ""


def classify_exit(
    exit_code: int, exception: BaseException | None, stderr: str, tb: str = ""
) -> Outcome | None:
    """The verdict from the CLI result alone: a traceback or a rejection (None: the
    command succeeded and the store must be reconciled).
    """
    if exception is not None and not isinstance(exception, SystemExit):
        first = f"{type(exception).__name__}: {str(exception).splitlines()[0] if str(exception) else ''}"
        return Outcome("traceback", first[:300], tb)
    if exit_code not in (0, 1, 2):
        return Outcome("traceback", f"exit code {exit_code}", tb)
    if exit_code == 0:
        return None
    # ``warning:`` lines (e.g. a file without timestamps) may precede the one error line
    lines = [ln for ln in stderr.splitlines() if ln.strip() and not ln.startswith("warning:")]
    if exit_code == 1 and (len(lines) != 1 or not lines[0].startswith("error:")):
        return Outcome("traceback", f"exit 1 without one 'error:' line: {stderr[:200]!r}", tb)
    if exit_code == 2:
        return Outcome("rejected", "usage error: " + (lines[-1] if lines else ""))
    if _RECONCILIATION.search(lines[0]):
        # the loader's own read = written + quarantined check fired: records were lost
        # by the parser (a bug reported as if the input were bad)
        return Outcome("silent_drop", "loader reconciliation failed: " + lines[0][:280])
    return Outcome("rejected", lines[0][:300])


_RECONCILIATION = re.compile(
    r"records but wrote \d+ and quarantined|physical lines but \d+ data|"
    r"rows but \d+ good \+ \d+ quarantined"
)
"""The messages of ``ReconciliationError`` (gpu_trace/loaders/base.py, loaders/telemetry_common.py,
loaders/philly_util.py)."""


_LINE_NO = re.compile(r"line \d+")


def signature(kind: str, outcome: Outcome) -> str:
    """A failure's dedup key: kind, class and the reason with numbers and paths blurred."""
    reason = re.sub(r"/\S+/", "/…/", outcome.reason)
    reason = re.sub(r"\d+", "N", reason)
    if outcome.traceback:
        frames = re.findall(r'File "([^"]+)", line \d+, in (\w+)', outcome.traceback)
        ours = [f"{Path(f).name}:{fn}" for f, fn in frames if "gpu_trace" in f]
        if ours:
            reason = f"{reason.split(':')[0]} at {ours[-1]}"
    return f"{kind}|{outcome.cls}|{reason[:160]}"
