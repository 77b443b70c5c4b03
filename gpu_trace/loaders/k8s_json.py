"""Kubernetes objects from ``kubectl get ... -o json`` output or a JSON-lines stream.

Two layouts are accepted, for pods and nodes alike:

- **a document**: one JSON value, a ``List`` / ``PodList`` / ``NodeList`` with
  ``items`` (what ``kubectl get pods -A -o json`` writes, pretty-printed or compact),
  or a single ``Pod`` / ``Node`` object (``kubectl get pod NAME -o json``). Records are
  the elements of ``items``, numbered from 1 (``record N``). Items without ``kind``
  (API-server lists omit it) take it from the list kind (``PodList`` -> ``Pod``).
  The document must be valid JSON: kubectl never writes anything else, and a damaged
  one (a truncated download) cannot be split into records safely, so it fails whole
  with the line, column and record where parsing stopped; nothing is written.
- **JSON lines**: one object per line (``kubectl get pods -A -o json | jq -c
  '.items[]'``, a watch stream). Records are the non-blank lines (``line N``; blank
  lines are not records); a line that is not valid JSON is quarantined alone.

A file is JSON lines when its first non-blank line is a complete JSON object by itself,
or when that line is damaged (it neither parses nor ends open, with ``{``, ``[``, ``,``
or ``:``, as the first line of a document does) and the second is a complete object;
a single-line file that holds a list (``items``) is a compact document. A file taken
for a document that does not parse is read as JSON lines after all when most of its
first 8 non-blank lines are complete objects by themselves.

Every record is decoded in one DuckDB query (``json_transform`` into :data:`STRUCTURE`,
every leaf as text, so that numbers are never silently rounded and a value of the
wrong JSON type fails where it is used, e.g. as a quantity or a time).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl
from polars._typing import PolarsDataType

from gpu_trace.errors import InputError
from gpu_trace.loaders.textfile import RAW, REASON, FileInfo, file_info, scan_lines

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

NUM = "_n"
"""1-based record (document) or line (JSON lines) number."""
DUPLICATE = "_duplicate"
"""Why a decodable Pod or Node record is still unusable: a key named twice."""

_V = '"VARCHAR"'
_MAP = '"MAP(VARCHAR, VARCHAR)"'
_RES = f'{{"requests": {_MAP}, "limits": {_MAP}}}'
_CONTAINER = f'{{"name": {_V}, "restartPolicy": {_V}, "resources": {_RES}}}'
_STATE = (
    f'{{"running": {{"startedAt": {_V}}}, "terminated": {{"startedAt": {_V}, '
    f'"finishedAt": {_V}, "exitCode": {_V}, "signal": {_V}, "reason": {_V}}}, '
    f'"waiting": {{"reason": {_V}}}}}'
)
_CSTATUS = f'{{"name": {_V}, "state": {_STATE}}}'
_AFFINITY = (
    f'{{"nodeAffinity": {{"requiredDuringSchedulingIgnoredDuringExecution": '
    f'{{"nodeSelectorTerms": [{{"matchExpressions": [{{"key": {_V}, "operator": {_V}, '
    f'"values": [{_V}]}}]}}]}}}}}}'
)
STRUCTURE = (
    f'{{"kind": {_V}, '
    f'"metadata": {{"name": {_V}, "namespace": {_V}, "uid": {_V}, '
    f'"creationTimestamp": {_V}, "labels": {_MAP}, "annotations": {_MAP}, '
    f'"ownerReferences": [{{"kind": {_V}, "name": {_V}, "uid": {_V}, "controller": {_V}}}]}}, '
    f'"spec": {{"nodeName": {_V}, "priorityClassName": {_V}, '
    f'"activeDeadlineSeconds": {_V}, "nodeSelector": {_MAP}, "overhead": {_MAP}, '
    f'"unschedulable": {_V}, '
    f'"containers": [{_CONTAINER}], "initContainers": [{_CONTAINER}], '
    f'"affinity": {_AFFINITY}}}, '
    f'"status": {{"phase": {_V}, "reason": {_V}, "qosClass": {_V}, '
    f'"conditions": [{{"type": {_V}, "status": {_V}, "lastTransitionTime": {_V}, '
    f'"reason": {_V}}}], "containerStatuses": [{_CSTATUS}], '
    f'"initContainerStatuses": [{_CSTATUS}], "capacity": {_MAP}, "allocatable": {_MAP}, '
    f'"startTime": {_V}}}}}'
)
"""The fields gpu-trace reads from a Pod or a Node (every other key is ignored)."""

LIST_KINDS = {"List": None, "PodList": "Pod", "NodeList": "Node"}
"""List kinds accepted and the kind their items default to."""


@dataclass(frozen=True)
class Objects:
    """One file's records: ``_n``, ``_raw`` (text, for quarantine), ``_reason`` (null
    when decodable), ``_duplicate`` (a repeated key: the record decodes but means two
    things), ``kind`` and ``rec`` (the decoded :data:`STRUCTURE`).
    """

    info: FileInfo
    """``records`` is the number of records: the items counted by DuckDB's
    ``json_array_length`` for a document, the non-blank lines for JSON lines."""
    frame: pl.DataFrame
    locator: str
    """``record`` or ``line``: how quarantine rows and errors name a record."""


def _first_lines(path: Path, count: int = 2, limit: int = 1 << 26) -> list[str]:
    """The first ``count`` non-blank lines (each read up to ``limit`` bytes)."""
    found: list[str] = []
    try:
        with path.open("rb") as fh:
            while len(found) < count:
                line = fh.readline(limit)
                if not line:
                    break
                text = line.decode("utf-8", errors="replace").lstrip("\ufeff").strip()
                if text:
                    found.append(text)
    except OSError as exc:
        raise InputError(path, exc.strerror or str(exc)) from None
    return found


def _is_object(text: str) -> dict[str, object] | None:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def read_objects(path: Path) -> Objects:
    """The records of one file, decoded (see the module doc)."""
    # no line cap: a compact `kubectl get -o json | jq -c .` List is one long line, read
    # by DuckDB's streaming JSON reader, never as one Python string
    info = file_info(path, 0, max_line=None)
    head = _first_lines(path)
    if not head:
        raise InputError(
            path, "file is empty (expected kubectl -o json output or JSON lines)", "line 1"
        )
    if not head[0].startswith("{"):
        raise InputError(
            path,
            "not kubectl -o json output or JSON lines (expected a JSON object)",
            "line 1",
        )
    first = _is_object(head[0])
    if len(head) == 1:
        lines_mode = first is not None and not isinstance(first.get("items"), list)
    else:
        opens = head[0].endswith(("{", "[", ",", ":"))
        lines_mode = first is not None or (not opens and _is_object(head[1]) is not None)
    if lines_mode:
        return _json_lines(info)
    try:
        return _document(info)
    except InputError:
        # a JSON-lines stream whose first lines are damaged: most lines still parse
        # alone, which never happens in a pretty-printed document
        sample = _first_lines(info.path, 8)
        if len(sample) > 2 and 2 * sum(_is_object(t) is not None for t in sample) > len(sample):
            return _json_lines(info)
        raise


def _json_lines(info: FileInfo) -> Objects:
    lines = (
        scan_lines(info)
        .filter(pl.col(RAW).str.strip_chars(" \t\r") != "")
        .select(pl.col("_line").alias(NUM), pl.col(RAW).str.strip_chars_end("\r"))
        .collect()
    )
    frame = _decode(lines, None, info.path)
    return Objects(
        FileInfo(info.path, info.sha256, info.size_bytes, lines.height, info.utf8, info.bom),
        frame,
        "line",
    )


_MAX_OBJECT = (1 << 32) - 1
"""DuckDB's largest JSON value (4 GiB); bigger documents must come as JSON lines."""


def _document(info: FileInfo) -> Objects:
    """One JSON document (a List, PodList or NodeList, or a single Pod or Node) as its
    records, read and split by DuckDB.
    """
    import duckdb  # loaded when a file is read, not with the plugin list

    path = info.path
    if info.size_bytes >= _MAX_OBJECT:
        raise InputError(
            path,
            "a JSON document over 4 GiB: write it as JSON lines instead "
            "(kubectl get pods -A -o json | jq -c '.items[]')",
        )
    con = duckdb.connect()
    try:
        doc = _read_document(con, info)
        if doc is None:
            split = _split_in_python(info)
            if split is None:
                raise _locate_error(path)
            return Objects(
                FileInfo(path, info.sha256, info.size_bytes, split[2], info.utf8, info.bom),
                _decode(split[0], split[1], path),
                "record",
            )
        if doc.num_rows != 1:
            raise InputError(
                path,
                f"holds {doc.num_rows} JSON documents; expected one kubectl List or one "
                "object per line",
            )
        con.register("doc", doc)
        records, default, counted = _document_records(con, path)
        lines = pl.from_arrow(records.to_arrow_table())
    finally:
        con.close()
    assert isinstance(lines, pl.DataFrame)
    if lines.height != counted:
        raise InputError(path, f"items holds {counted} elements but {lines.height} were read")
    frame = _decode(lines.sort(NUM), default, path)
    return Objects(
        FileInfo(path, info.sha256, info.size_bytes, counted, info.utf8, info.bom), frame, "record"
    )


def _read_document(con: duckdb.DuckDBPyConnection, info: FileInfo) -> pa.Table | None:
    """The file's JSON documents (one row each), or None when it is not valid JSON."""
    import duckdb

    try:
        return con.sql(
            "SELECT json AS j FROM read_json_objects(?, format = 'unstructured', "
            "maximum_object_size = ?)",
            params=[str(info.path), max(info.size_bytes + 1, 1 << 24)],
        ).to_arrow_table()
    except (duckdb.Error, UnicodeDecodeError):
        return None


def _document_records(
    con: duckdb.DuckDBPyConnection, path: Path
) -> tuple[duckdb.DuckDBPyRelation, str | None, int]:
    """The records of the registered document ``doc``: (record number, text) rows, the
    kind a record without one has (a PodList's items are pods), and how many there are.
    """
    top = con.execute(
        "SELECT json_extract_string(j, '$.kind'), json_type(j, '$.items'), "
        "json_type(j), json_array_length(j, '$.items') FROM doc"
    ).fetchall()[0]
    kind, items_type, top_type, counted = top
    if top_type != "OBJECT":
        raise InputError(path, "the document is not a JSON object", "line 1")
    if items_type is None:
        if kind not in ("Pod", "Node"):
            raise InputError(
                path,
                f"the document is a {kind or 'JSON object without kind'}, not a List, "
                "PodList, NodeList, Pod or Node",
            )
        return con.sql(f"SELECT 1::BIGINT AS {NUM}, j::VARCHAR AS {RAW} FROM doc"), None, 1
    if items_type != "ARRAY":
        raise InputError(path, "items is not a list")
    if kind not in LIST_KINDS:
        raise InputError(
            path,
            f"the document is a {kind or 'list without kind'}, not a List, PodList or NodeList",
        )
    records = con.sql(
        f"SELECT generate_subscripts(a, 1)::BIGINT AS {NUM}, unnest(a)::VARCHAR AS {RAW} "
        "FROM (SELECT json_extract(j, '$.items[*]') AS a FROM doc)"
    )
    return records, LIST_KINDS[kind], counted


_SPLIT_LIMIT = 1 << 26
"""Largest document split by Python when DuckDB refuses it (64 MiB: the text, its
records and their decoding stay under 1 GB; a 117 MB List peaked at 0.8 GB). A bigger
one fails whole with one line naming the escape; JSON lines have no such limit."""
_WS = " \t\r\n"


def _skip(text: str, pos: int, chars: str = _WS) -> int:
    while pos < len(text) and text[pos] in chars:
        pos += 1
    return pos


def _split_in_python(info: FileInfo) -> tuple[pl.DataFrame, str | None, int] | None:
    r"""The records of a document DuckDB cannot read although it is JSON by Python's
    reading: one record holding a lone surrogate escape (``"\ud800"``) makes the
    whole document invalid for DuckDB, yet only that record is unusable. The items are
    cut out of the text one by one (each decoded alone, so memory stays bounded) and
    judged by :func:`_decode` like any other records. None when the document is too
    big, not a List after all or not JSON (then the caller reports where it breaks).
    """
    if info.size_bytes > _SPLIT_LIMIT:
        return None
    try:
        text = info.path.read_bytes().decode("utf-8").removeprefix("\ufeff")
        found = _list_items(text)
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return None
    if found is None or found[0] not in LIST_KINDS:
        return None  # a lone Pod / Node that DuckDB refuses is one bad record: fail whole
    kind, spans = found
    lines = pl.DataFrame(
        {NUM: range(1, len(spans) + 1), RAW: [text[a:b] for a, b in spans]},
        schema={NUM: pl.Int64, RAW: pl.String},
    )
    return lines, LIST_KINDS[kind], len(spans)


_CLOSE_OBJECT, _CLOSE_ARRAY, _END = "}", "]", "the end after the object"


class _NotAList(ValueError):
    """The text is not one JSON object with an ``items`` array."""

    def __init__(self, expected: str) -> None:
        super().__init__(f"expected {expected}")


def _expect(text: str, pos: int, char: str) -> int:
    """The position after ``char`` (and the blanks after it) at ``pos``."""
    if text[pos : pos + 1] != char:
        raise _NotAList(char)
    return _skip(text, pos + 1)


def _list_items(text: str) -> tuple[str, list[tuple[int, int]]] | None:
    """(top-level ``kind``, the text spans of the ``items`` elements), or None when the
    object has no ``items`` array. Raises ValueError when the text is not JSON.
    """
    decoder = json.JSONDecoder()
    spans: list[tuple[int, int]] | None = None
    kind = ""
    pos = _expect(text, _skip(text, 0), "{")
    while text[pos : pos + 1] != "}":
        key, pos = decoder.raw_decode(text, pos)
        pos = _expect(text, _skip(text, pos), ":")
        if key == "items" and text[pos : pos + 1] == "[":
            spans, pos = _array_spans(decoder, text, pos)
        else:
            value, pos = decoder.raw_decode(text, pos)
            kind = value if key == "kind" and isinstance(value, str) else kind
        pos = _skip(text, pos)
        if text[pos : pos + 1] == ",":
            pos = _skip(text, pos + 1)
        elif text[pos : pos + 1] != "}":
            raise _NotAList(_CLOSE_OBJECT)
    if _skip(text, pos + 1) != len(text):
        raise _NotAList(_END)
    return None if spans is None else (kind, spans)


def _array_spans(
    decoder: json.JSONDecoder, text: str, pos: int
) -> tuple[list[tuple[int, int]], int]:
    """The spans of the elements of the array opening at ``pos``, and the end."""
    spans: list[tuple[int, int]] = []
    pos = _expect(text, pos, "[")
    while text[pos : pos + 1] != "]":
        _, end = decoder.raw_decode(text, pos)
        spans.append((pos, end))
        pos = _skip(text, end)
        if text[pos : pos + 1] == ",":
            pos = _skip(text, pos + 1)
        elif text[pos : pos + 1] != "]":
            raise _NotAList(_CLOSE_ARRAY)
    return spans, pos + 1


_ITEMS = re.compile(r'"items"\s*:\s*\[')


def _locate_error(path: Path) -> InputError:
    """Where a document stops being valid JSON: line, column and the record (element of
    ``items``) it falls in. The error path only, so plain Python is fine here.
    """
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return InputError(path, "invalid UTF-8 in a JSON document", f"byte {exc.start}")
    text = text.removeprefix("\ufeff")
    lone = _SURROGATE.search(text)
    if lone:  # before json.loads: no need to build the whole document to say so
        line = text.count("\n", 0, lone.start()) + 1
        hint = (
            f"; a List over {_SPLIT_LIMIT >> 20} MiB is not split record by record: "
            "write it as JSON lines"
            if len(data) > _SPLIT_LIMIT
            else ""
        )
        return InputError(
            path,
            f"a lone UTF-16 surrogate escape {lone.group()[-6:]} (no Unicode character){hint}",
            f"line {line}",
        )
    try:
        json.loads(text)
    except RecursionError:
        return InputError(path, "JSON nested too deeply")
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno}, column {exc.colno}"
        found = _ITEMS.search(text)
        if found and exc.pos > found.end():
            decoder = json.JSONDecoder()
            pos, record = found.end(), 0
            while True:
                while pos < len(text) and text[pos] in " \t\r\n,":
                    pos += 1
                record += 1
                try:
                    _, pos = decoder.raw_decode(text, pos)
                except (json.JSONDecodeError, RecursionError):
                    break
                if pos > exc.pos:
                    break
            where = f"record {record}, {where}"
        return InputError(path, f"not valid JSON ({exc.msg})", where)
    return InputError(path, "DuckDB could not read this JSON document")


KEY_VALUES = pl.List(pl.Struct({"key": pl.String, "value": pl.String}))
"""How a decoded JSON object of strings (labels, requests) is handed on: key/value
rows, which polars can explode and filter (its Map type cannot)."""


def _without_maps(dtype: PolarsDataType) -> PolarsDataType:
    if isinstance(dtype, pl.Struct):
        return pl.Struct({f.name: _without_maps(f.dtype) for f in dtype.fields})
    if isinstance(dtype, pl.List):
        return pl.List(_without_maps(dtype.inner))
    if dtype.base_type().__name__ == "Map":
        return KEY_VALUES
    return dtype


_SURROGATE = re.compile(
    r"(?<!\\)(?:\\\\)*\\u(?:[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F])"
    r"|(?<![0-9a-fA-F]{4})[dD][c-fC-F][0-9a-fA-F]{2})"
)
"""An escaped UTF-16 surrogate without its pair (``"\\ud800"``): Python's json accepts
it, DuckDB (rightly: it is no Unicode character) does not."""


def _json_error(text: str) -> str:
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        return f"not valid JSON ({exc.msg} at column {exc.colno})"
    except (ValueError, RecursionError):
        pass
    lone = _SURROGATE.search(text)
    if lone:
        return (
            f"not valid JSON (a lone UTF-16 surrogate escape {lone.group()[-6:]}"
            f" at column {lone.start() + 1}: no Unicode character)"
        )
    return "not valid JSON"


class _DuplicateKeyError(ValueError):
    """A JSON object names one key twice."""


def _no_duplicates(pairs: list[tuple[str, object]]) -> None:
    """``object_pairs_hook`` that only checks: building no dict keeps the check cheap."""
    if len(pairs) > 1 and len(dict(pairs)) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKeyError(key)
            seen.add(key)


_CHECK_KEYS = json.JSONDecoder(object_pairs_hook=_no_duplicates)


def _duplicate_key(text: str) -> str | None:
    """Why a record that DuckDB accepted is still ambiguous: a key named twice in one
    object. JSON (RFC 8259 section 4) leaves the meaning of that open; DuckDB keeps the
    first value of a field and drops a whole map (requests, labels) that repeats a key,
    Go's encoding/json keeps the last, and the API server refuses duplicate fields under
    strict field validation. So the record is quarantined, never guessed at.
    """
    try:
        _CHECK_KEYS.decode(text)
    except _DuplicateKeyError as exc:
        return f"duplicate JSON key {exc.args[0]!r} in one object (ambiguous: which value?)"
    except (ValueError, RecursionError):
        return None  # DuckDB accepted it; anything else is judged where it is used
    return None


_CHUNK = 256
"""Records checked for duplicate keys in one decode (see :func:`duplicate_keys`)."""


def duplicate_keys(texts: list[str]) -> dict[int, str]:
    """Position -> :func:`_duplicate_key`'s reason, for the records that have one.

    The records are decoded :data:`_CHUNK` at a time as one JSON array (each record is
    one JSON value DuckDB accepted, so the array parses exactly when every record
    does), which saves the per-call cost of 100,000 separate decodes; only a chunk that
    raises, a duplicate key or anything else, is checked again record by record, so
    the result is the per-record one exactly. Python's C scanner is the floor here:
    orjson and msgspec keep the last value silently (ijl/orjson#456,
    msgspec/msgspec#648), DuckDB only reports a repeated key inside a STRUCT it is
    strictly transforming into (and then also refuses any missing field), so no
    faster reader tells us.
    """
    found: dict[int, str] = {}
    for start in range(0, len(texts), _CHUNK):
        chunk = texts[start : start + _CHUNK]
        try:
            _CHECK_KEYS.decode(f"[{','.join(chunk)}]")
        except (ValueError, RecursionError):
            for k, text in enumerate(chunk):
                why = _duplicate_key(text)
                if why is not None:
                    found[start + k] = why
    return found


def _decode(lines: pl.DataFrame, default_kind: str | None, path: Path) -> pl.DataFrame:
    """Validate and decode every record in one DuckDB query."""
    import duckdb  # loaded when a file is read, not with the plugin list

    con = duckdb.connect()
    try:
        con.register("lines", lines.select(NUM, RAW).to_arrow())
        table = con.sql(
            f"""
            WITH v AS (SELECT {NUM}, {RAW}, json_valid({RAW}) AS ok FROM lines),
            t AS (SELECT *, CASE WHEN ok THEN json_type({RAW}::JSON) END AS ty FROM v)
            SELECT {NUM}, {RAW},
                CASE WHEN contains({RAW}, '\ufffd') THEN 'invalid UTF-8'
                    WHEN NOT ok THEN 'not valid JSON'
                    WHEN ty <> 'OBJECT' THEN 'record is not a JSON object' END AS {REASON},
                CASE WHEN ok AND ty = 'OBJECT'
                    THEN json_transform({RAW}::JSON, '{STRUCTURE}') END AS rec
            FROM t ORDER BY {NUM}
            """
        ).to_arrow_table()
    except duckdb.Error as exc:
        raise InputError(path, f"cannot decode the records: {exc}") from None
    finally:
        con.close()
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    frame = frame.with_columns(pl.col("rec").cast(_without_maps(frame.schema["rec"])))
    # duplicate keys: a C-speed scan per record (the hook builds nothing), over the
    # records DuckDB decoded. The reason goes to DUPLICATE, not REASON: the record
    # keeps its kind, so a Pod or Node is quarantined (and counted) as one.
    # Only the text column is filtered and the (rare) reasons scattered back: filtering
    # and joining the whole frame copied every decoded record twice.
    ok = frame.get_column(REASON).is_null().arg_true()
    found = duplicate_keys(frame.get_column(RAW).gather(ok).to_list())
    dup = pl.repeat(None, frame.height, dtype=pl.String, eager=True).alias(DUPLICATE)
    if found:
        dup = dup.scatter(ok.gather(list(found)), list(found.values()))
    frame = frame.with_columns(dup)
    bad = frame.filter(pl.col(REASON) == "not valid JSON")
    if bad.height:
        # what is wrong and where, for the rejected records only (few: plain Python)
        why = pl.Series([_json_error(t) for t in bad[RAW].to_list()], dtype=pl.String)
        frame = frame.update(bad.select(NUM, why.alias(REASON)), on=NUM)
    kind = pl.col("rec").struct.field("kind")
    if default_kind is not None:
        kind = kind.fill_null(pl.lit(default_kind))
    return frame.with_columns(kind.alias("kind"))
