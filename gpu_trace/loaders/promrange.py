"""Prometheus HTTP API ``query_range`` JSON (what ``gpu-trace telemetry pull`` saves) ->
``gpu_samples`` / ``events``.

Input: one response (``{"status": "success", "data": {"resultType": "matrix",
"result": [{"metric": {...}, "values": [[<unix s>, "<value>"], ...]}, ...]}}``), pretty
printed or not, or a JSON-lines file of responses (one per line, as ``--save`` writes
them, one per chunk). A file is JSON lines when it has at least two non-blank lines and
its first non-blank line is a whole JSON value; otherwise it is one document. Instant
``query`` answers (``resultType: vector``, ``value`` instead of ``values``) read too.

Records: every ``[time, value]`` element of every series. A record becomes one
``gpu_samples`` row (families mapped through the same DCGM field table as the ``/metrics``
parser, :data:`gpu_trace.loaders.prometheus.FIELDS`), one ``events`` row, one
quarantine row, or a "no event" count (below). Damage above the sample level is one
record too, quarantined whole: a JSON-lines line that is not JSON, not a successful
``matrix``/``vector`` answer (a saved ``"status": "error"`` body is kept with its error
text), a series that is not an object or has no ``values`` list, an element that is not a
``[time, value]`` pair. In a single-document file such damage at the response level is
the file's error (one line, exit 1) instead. Locators: ``series S, sample M`` (1-based,
in file order), prefixed ``line L,`` in JSON-lines files.

Values, deliberately:

- numbers (Prometheus prints them as strings; bare JSON numbers are read too) in the
  field's unit, scaled like the ``/metrics`` parser (FB MiB -> bytes);
- ``NaN`` -> a row with a null value (the exporter had no value; Prometheus' own
  staleness markers never reach the API, so a NaN in a saved answer is a real NaN);
- ``+Inf`` / ``-Inf`` -> quarantined (no gauge of ours is infinite);
- DCGM's blank sentinels -> null (as everywhere);
- a time that is not a number or outside 1970-9999 -> quarantined; a second sample of
  the same series (same label set) at the same time, e.g. from overlapping queries in
  one JSON-lines file -> quarantined as a duplicate.

Events: ``DCGM_FI_DEV_XID_ERRORS`` is "the last XID seen" and the ECC totals are
counters, so a range repeats one error at every step. An event row is written where an
event series *changes to* a positive value (its first positive point, or a point that
differs from the series' previous one, in time order over the whole file, so chunking
does not matter); zeros and repeats are "no event" records, counted in the metadata
(``no_event_cells``) like the ``/metrics`` parser's zeros.

Labels: ``hostname`` / ``Hostname`` -> host, else the ``instance`` label without its port,
else the file name; ``gpu`` -> gpu_index, ``UUID`` / ``gpu_uuid`` -> gpu_uuid,
``GPU_I_ID`` -> mig_instance, ``pod`` / ``namespace`` / ``container`` (or the
``*_name`` / ``pod_namespace`` forms) and ``hpc_job`` as for ``/metrics``. ``modelName``
has no gpu_samples column: the models seen are recorded in the file metadata
(``gpu_models``). Times are unix seconds (UTC by definition): ``time_basis = file``,
``source_tz = UTC``.

Memory is bounded by design (issue 25: a 100 MB answer cost 5.8 GB through
``json.loads``): an answer is walked in place by :mod:`.promrange_stream` (runs of
well-formed samples kept as text and split into columns by polars; only the structure,
the labels and damaged elements become Python objects, the cost a damaged file pays),
and the samples are checked in batches (:data:`BATCH_SAMPLES`) whose rows go to
temporary Parquet files in the store's order. Every check, conversion and the
accounting run as polars expressions; a Python loop runs per series, per run of
samples or per batch, never per sample of a well-formed series.
"""

from __future__ import annotations

import json
import operator
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import repeat
from pathlib import Path
from typing import Any

import polars as pl

from gpu_trace.errors import InputError
from gpu_trace.loaders import promrange_stream as stream
from gpu_trace.loaders.base import Batch, ReconciliationError
from gpu_trace.loaders.prometheus import FIELDS
from gpu_trace.loaders.telemetry_common import (
    CELL,
    FIELD,
    TimeBasis,
    batches,
    cells_to_rows,
    split_rows,
)
from gpu_trace.loaders.textfile import (
    LINE,
    RAW,
    RAW_LIMIT,
    REASON,
    REASON_LIMIT,
    FileInfo,
    capped,
    file_info,
    read_lines,
)
from gpu_trace.plugins import LoaderPlugin, option
from gpu_trace.schemas.telemetry import GPU_SAMPLES
from gpu_trace.store.parquet import slug
from gpu_trace.values import size_bytes

SOURCE = "prometheus-range"
SORTED_BY = GPU_SAMPLES.sort_by
"""The store's order of gpu_samples rows, which the batches' rows are written in."""
MAX_ANSWER_BYTES = 256 * 1024 * 1024
"""The largest answer read (a whole single-answer file, or one line of a JSON-lines
file): ``telemetry pull``'s ``--max-body-bytes`` default, so anything pull saved reads.
Checked from the file's size and line lengths before any answer is read."""
MAX_GPU_INDEX = 32767
"""``gpu_samples.gpu_index`` is an int16: a ``gpu`` label outside 0..32767, or not a
whole number (``1.5``), names no GPU and its samples are quarantined, not filed under
a null GPU."""
MAX_UNIX_S = 253402300800.0
"""10000-01-01T00:00:00Z: later (or negative) times are not unix seconds of a sample."""
_FIRST = operator.itemgetter(0)
_SECOND = operator.itemgetter(1)
_LABEL_KEYS = {
    "host": ("hostname", "Hostname"),
    "gpu_index": ("gpu",),
    "gpu_uuid": ("UUID", "gpu_uuid"),
    "mig_instance": ("GPU_I_ID",),
    "pod": ("pod", "pod_name"),
    "namespace": ("namespace", "pod_namespace"),
    "container": ("container", "container_name"),
    "job_id": ("hpc_job",),
    "_xid": ("xid",),
}
"""Canonical key column -> the labels that fill it, first non-empty wins."""


def _clean(text: str) -> str:
    r"""``text`` as valid UTF-8: JSON may escape lone surrogates (``"\ud800"``), which
    Python keeps in a str but no UTF-8 column can hold; they become U+FFFD.
    """
    return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


TOO_DEEP = "<JSON nested too deeply to print>"
"""What stands for a value whose nesting exhausts Python's recursion limit when printed
(``json.loads`` takes ~1,000 levels; printing it from deeper in the stack may not)."""


def _dumps(value: object) -> str:
    try:
        return json.dumps(value, allow_nan=True)
    except RecursionError:
        return TOO_DEEP
    except (TypeError, ValueError):
        return repr(value)


def _text(value: object) -> str:
    return _clean(value) if isinstance(value, str) else _dumps(value)[: RAW_LIMIT + 1]


def _raw(value: object) -> str:
    """A damaged record's JSON text for the quarantine (capped there)."""
    return _dumps(value)[: RAW_LIMIT + 1]


@dataclass
class Walk:
    """Columns gathered while walking the responses: one entry per good-shaped sample
    (``[time, value]``), per series and per record rejected whole.
    """

    jsonl: bool
    chunk: stream.Samples = field(default_factory=stream.Samples)
    """Samples of the chunk being gathered (runs as text, other elements parsed)."""
    frames: list[pl.DataFrame] = field(default_factory=list)
    """Samples of the chunks done, as columns (:func:`_chunk_frame`)."""
    samples: int = 0
    mixed_times: bool = False
    """A time that is not a JSON number was seen (times are then printed as text)."""
    series: dict[str, list[Any]] = field(default_factory=dict)
    bad_locator: list[str] = field(default_factory=list)
    bad_reason: list[str] = field(default_factory=list)
    bad_raw: list[str] = field(default_factory=list)
    models: dict[str, str] = field(default_factory=dict)
    keys: dict[str, int] = field(default_factory=dict)
    """Label set (sorted JSON) -> series identity, shared by the answers of all chunks."""
    responses: int = 0
    blank: int = 0

    @property
    def records(self) -> int:
        """Records walked: good-shaped samples plus records rejected whole."""
        return self.samples + len(self.bad_reason)

    def where(self, line: int, *parts: str) -> str:
        """A locator: the line (in JSON lines) and the parts inside the response."""
        return ", ".join([f"line {line}", *parts] if self.jsonl else list(parts))

    def reject(self, locator: str, reason: str, raw: object, text: str | None = None) -> None:
        """Record one record rejected whole (it becomes a quarantine row); ``text``, when
        given, is its raw text instead of ``raw`` printed as JSON.
        """
        self.bad_locator.append(locator)
        self.bad_reason.append(reason)
        self.bad_raw.append(_raw(raw) if text is None else text)

    def one_series(self, line: int, i: int, s: object, vector: bool) -> None:
        """Walk one series of a response, rejecting it when its shape is wrong."""
        here = self.where(line, f"series {i}")
        if not isinstance(s, dict):
            self.reject(here, "series is not an object", s)
            return
        metric = s.get("metric", {})
        if not isinstance(metric, dict):
            self.reject(here, "metric is not an object of labels", s)
            return
        if vector:
            values: object = [s["value"]] if "value" in s else None
        else:
            values = s.get("values", [] if "histograms" in s else None)
        if not isinstance(values, list):
            self.reject(here, f"{'value' if vector else 'values'} is missing or not a list", s)
            return
        labels = {_clean(str(k)): _text(v) for k, v in metric.items()}
        sid = len(self.series.get("_sid", []))
        self.add_series(sid, labels, line, i)
        if not vector and isinstance(hist := s.get("histograms"), list):
            for m, h in enumerate(hist, start=len(values) + 1):
                self.reject(
                    self.where(line, f"series {i}", f"sample {m}"),
                    "native histogram sample (no DCGM field is a histogram)",
                    h,
                )
        n = len(values)
        c = self.chunk
        if set(map(type, values)) <= {list} and set(map(len, values)) <= {2}:
            c.one_sid.extend(repeat(sid, n))
            c.one_no.extend(range(1, n + 1))
            c.one_time.extend(map(_FIRST, values))
            c.one_value.extend(map(_SECOND, values))
            self.samples += n
            self.flush(final=False)
            return
        for m, p in enumerate(values, start=1):  # damaged series: element by element
            if isinstance(p, list) and len(p) == 2:
                c.one_sid.append(sid)
                c.one_no.append(m)
                c.one_time.append(p[0])
                c.one_value.append(p[1])
                self.samples += 1
            else:
                self.reject(
                    self.where(line, f"series {i}", f"sample {m}"),
                    "sample is not a [time, value] pair",
                    p,
                )
        self.flush(final=False)

    def stream_response(self, line: int, s: str) -> str | None:
        """Walk one response's text (the streaming walk of :mod:`.promrange_stream`);
        returns why it is unusable as a whole (None: walked). Raises json.loads' own
        error (or RecursionError) when the text is not JSON.
        """
        try:
            top, data = stream.document(s)
        except stream.Unmodelled:
            self.responses += 1
            return "response is not a JSON object"
        self.responses += 1

        def get(where: stream.Where, key: str, default: object = None) -> object:
            return stream.value(s, where[key][0])[0] if key in where else default

        status = get(top, "status")
        if status == "error":
            error_type, error = get(top, "errorType"), get(top, "error")
            return f"Prometheus error {_text(error_type)}: {_text(error)}"
        if status != "success":
            return f"status is {_text(status)}, not success"
        if data is None:
            return "data is not an object"
        kind = get(data, "resultType")
        if kind not in ("matrix", "vector"):
            return f"resultType {_text(kind)} is not matrix (a query_range answer) or vector"
        if "result" not in data or not s.startswith("[", data["result"][0]):
            return "data.result is not a list"
        number = 0

        def series(s: str, j: int) -> int:
            nonlocal number
            number += 1
            return self.stream_series(line, number, s, j, kind == "vector")

        stream.array(s, data["result"][0], series)
        return None

    def stream_series(self, line: int, i: int, s: str, j: int, vector: bool) -> int:
        """Walk series ``i`` at ``s[j]``; returns its end. A series the fast path does
        not model (not a plain ``metric`` + ``values`` object) is parsed and walked as
        an object by :meth:`one_series`.
        """
        if not s.startswith("{", j):
            whole, end = stream.value(s, j)
            self.one_series(line, i, whole, vector)
            return end
        keys, end = stream.obj(s, j, lambda _k, x: stream.skip(s, x))
        at = {k: v[0] for k, v in keys.items()}
        if (
            vector
            or "histograms" in at
            or "values" not in at
            or not s.startswith("[", at["values"])
            or ("metric" in at and not s.startswith("{", at["metric"]))
        ):
            self.one_series(line, i, stream.value(s, j)[0], vector)
            return end
        metric = stream.value(s, at["metric"])[0] if "metric" in at else {}
        labels = {_clean(str(k)): _text(v) for k, v in metric.items()}
        sid = len(self.series.get("_sid", []))
        self.add_series(sid, labels, line, i)

        def reject(m: int, p: object) -> None:
            self.reject(
                self.where(line, f"series {i}", f"sample {m}"),
                "sample is not a [time, value] pair",
                p,
            )

        before = self.chunk.count
        stream.values(s, at["values"], sid, self.chunk, reject, lambda: self.flush(final=False))
        self.samples += self.chunk.count - before
        self.flush(final=False)
        return end

    def flush(self, *, final: bool) -> None:
        """Turn the chunk gathered so far into columns once it is large (or at the end)."""
        c = self.chunk
        if not final and c.chars < CHUNK_CHARS and len(c.one_sid) < CHUNK_ELEMENTS:
            return
        if len(c):
            frame = _chunk_frame(c)
            self.mixed_times |= frame.get_column("_tkind").eq(stream.T_TEXT).any()
            self.frames.append(frame)
        c.clear()

    def add_series(self, sid: int, labels: dict[str, str], line: int, i: int) -> None:
        """Keep one series' labels, with the host and GPU they name."""

        def first(*names: str) -> str | None:
            return next((labels[n] for n in names if labels.get(n)), None)

        instance = first("instance")
        row: dict[str, Any] = {
            "_sid": sid,
            "_resp_line": line,
            "_series_no": i,
            "_kid": self.keys.setdefault(json.dumps(labels, sort_keys=True), len(self.keys)),
            "_labels": "{"
            + ",".join(f"{k}={json.dumps(v)}" for k, v in labels.items() if k != "__name__")
            + "}",
            FIELD: first("__name__"),
            "_instance_host": instance.rsplit(":", 1)[0] if instance else None,
            **{col: first(*names) for col, names in _LABEL_KEYS.items()},
        }
        for k, v in row.items():
            self.series.setdefault(k, []).append(v)
        model = first("modelName")
        if model:
            self.models[f"{row['host'] or row['_instance_host'] or ''}/{row['gpu_index']}"] = model


def _documents(info: FileInfo, max_answer: int) -> Walk:
    """Read ``path`` as one response or JSON lines; walk every response. No answer
    larger than ``max_answer`` bytes is read (the caller checked line lengths).
    """
    path = info.path
    walk = Walk(_is_json_lines(path, max_answer))
    if walk.jsonl:
        for n, line in read_lines(path, max_answer):
            _json_line(walk, n, line)
        return walk
    if info.size_bytes > max_answer:
        raise InputError(
            path,
            f"one answer of {info.size_bytes} bytes, more than --max-answer-bytes "
            f"({max_answer}); not read",
        )
    try:
        why = walk.stream_response(1, _decode(path.read_bytes()))
    except (ValueError, RecursionError) as exc:
        raise InputError(
            path, f"not a Prometheus query_range JSON document: {_json_error(exc)}"
        ) from None
    if why is not None:
        raise InputError(path, why)
    return walk


def _is_json_lines(path: Path, max_answer: int) -> bool:
    """JSON lines when there are two non-blank lines and the first is JSON by itself
    (a pretty-printed single response's first line, ``{``, is not).
    """
    head: list[bytes] = []
    for _, ln in read_lines(path, max_answer):
        if ln.strip():
            head.append(ln)
            if len(head) == 2:
                break
    if len(head) < 2:
        return False
    try:
        json.loads(head[0])
    except (ValueError, RecursionError):
        return False
    return True


def _json_line(walk: Walk, n: int, line: bytes) -> None:
    """Walk line ``n`` of a JSON-lines file: blank (counted), not JSON, or a response
    (rejected with the reason when it is not a usable one).
    """
    if not line.strip():
        walk.blank += 1
        return
    try:
        why = walk.stream_response(n, _decode(line))
    except (ValueError, RecursionError) as exc:
        raw = line[: RAW_LIMIT + 1].decode("utf-8", "replace").rstrip("\r\n")
        walk.reject(f"line {n}", f"not JSON: {_json_error(exc)}", None, raw)
        return
    if why is not None:  # rejected whole: parsed again, to print it (the rare path)
        raw = _raw(json.loads(line))
        if raw == TOO_DEEP:  # parsed, but too deep to print again: keep the line as written
            raw = line[: RAW_LIMIT + 1].decode("utf-8", "replace").rstrip()
        walk.reject(f"line {n}", why, None, raw)


def _decode(data: bytes) -> str:
    """The text of an answer, decoded exactly as ``json.loads`` decodes bytes."""
    return data.decode(json.detect_encoding(data), "surrogatepass")


def _json_error(exc: Exception) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    if isinstance(exc, UnicodeDecodeError):
        return "invalid UTF-8"
    if isinstance(exc, RecursionError):
        return "nested too deeply (RecursionError)"
    return str(exc)


_SERIES_SCHEMA = {
    "_sid": pl.Int64,
    "_resp_line": pl.Int64,
    "_series_no": pl.Int64,
    "_kid": pl.Int64,
    "_labels": pl.String,
    FIELD: pl.String,
    "_instance_host": pl.String,
    **dict.fromkeys(_LABEL_KEYS, pl.String),
}


def _strings(values: list[Any]) -> pl.Series:
    """Any JSON values as text (strings as they are, numbers and the rest as polars
    prints them); lone surrogates, only in damaged files, are replaced first.
    """
    try:
        return pl.Series(values, dtype=pl.String, strict=False)
    except UnicodeEncodeError:
        return pl.Series(
            [_clean(v) if isinstance(v, str) else v for v in values], dtype=pl.String, strict=False
        )


def _times(values: list[Any]) -> pl.Series:
    """The times as text. JSON numbers (all Prometheus writes) go through Float64 in one
    typed conversion; anything else (strings, booleans, nulls, lists) through the
    slower any-object conversion, so that ``true`` is not read as 1.0.
    """
    if set(map(type, values)) <= {int, float}:
        return pl.Series(values, dtype=pl.Float64).cast(pl.String)
    return _strings(values)


CHUNK_CHARS = 1 << 20
"""Characters of sample runs gathered before they are split into columns."""
CHUNK_ELEMENTS = 100_000
"""Elements parsed one by one (damaged or unusual samples) gathered before the same."""
_CHUNK_SCHEMA = {
    "_sid": pl.Int64,
    "_sample_no": pl.Int64,
    "_t": pl.String,
    "_tkind": pl.Int8,
    "_v": pl.String,
}


def _time_texts(values: list[Any]) -> tuple[list[str | None], list[int]]:
    """Times parsed one by one, as text and kind: an int's digits, a float's repr (read
    back as Float64), anything else as :func:`_strings` prints it.
    """
    texts: list[str | None] = []
    kinds: list[int] = []
    others = [v for v in values if type(v) not in (int, float)]
    printed = iter(_strings(others).to_list()) if others else iter(())
    for v in values:  # only elements parsed one by one (damaged or unusual) come here
        if type(v) is int:
            texts.append(str(v))
            kinds.append(stream.T_INT)
        elif type(v) is float:
            texts.append(repr(v))
            kinds.append(stream.T_FLOAT)
        else:
            texts.append(next(printed))
            kinds.append(stream.T_TEXT)
    return texts, kinds


def _chunk_frame(c: stream.Samples) -> pl.DataFrame:
    """One chunk's samples as columns, in file order (series, then sample number)."""
    parts: list[pl.DataFrame] = []
    if c.run_sid:
        try:
            runs = pl.DataFrame({"_sid": c.run_sid, "_first": c.run_first, "_run": c.run_text})
        except UnicodeEncodeError:  # raw surrogates (only in damaged files)
            runs = pl.DataFrame(
                {"_sid": c.run_sid, "_first": c.run_first, "_run": list(map(_clean, c.run_text))}
            )
        parts.append(stream.run_columns(runs))
    if c.one_sid:
        texts, kinds = _time_texts(c.one_time)
        parts.append(
            pl.DataFrame(
                {
                    "_sid": pl.Series(c.one_sid, dtype=pl.Int64),
                    "_sample_no": pl.Series(c.one_no, dtype=pl.Int64),
                    "_t": pl.Series(texts, dtype=pl.String),
                    "_tkind": pl.Series(kinds, dtype=pl.Int8),
                    "_v": _strings(c.one_value),
                }
            )
        )
    frame = pl.concat(parts) if len(parts) > 1 else parts[0]
    return frame.sort("_sid", "_sample_no") if len(parts) > 1 else frame


def _frames(walk: Walk) -> tuple[pl.DataFrame, pl.DataFrame]:
    walk.flush(final=True)
    chunks = pl.concat(walk.frames) if walk.frames else pl.DataFrame(schema=_CHUNK_SCHEMA)
    walk.frames = []
    text, kind = pl.col("_t"), pl.col("_tkind")
    whole = text.str.replace(r"^-0$", "0")  # the int 0, as json.loads reads "-0"
    number = pl.col("_t").cast(pl.Float64, strict=False).cast(pl.String)
    samples = chunks.select(
        "_sid",
        "_sample_no",
        # as before: numbers read as Float64 and printed, unless the file has a time that
        # is no number, where integers print as integers (polars' any-value printing)
        pl.when(kind == stream.T_INT)
        .then(whole if walk.mixed_times else whole.cast(pl.Float64, strict=False).cast(pl.String))
        .when(kind == stream.T_FLOAT)
        .then(number)
        .otherwise(text)
        .alias("_t"),
        "_v",
    )
    series = pl.DataFrame(
        {k: walk.series.get(k, []) for k in _SERIES_SCHEMA}, schema=_SERIES_SCHEMA
    )
    return samples, series


BATCH_SAMPLES = 100_000
"""Samples checked and typed together (one polars query). A batch holds whole devices
(host and GPU index), or, for a device with more samples, every sample of that device
in a span of times, so the checks that compare samples (a series' duplicates, memory
used vs total on the same line) see all they need; only the repeat of an event spans
batches, and is decided over all event samples at the end (:func:`_repeats`). Batches
follow the store's sort order (host, GPU, time), so their rows need no sort at the end."""


def _unix_us(t: pl.Expr) -> pl.Expr:
    """Unix seconds text -> microseconds (null outside 1970-9999 or not a number)."""
    t_num = t.str.strip_chars().cast(pl.Float64, strict=False)
    return (
        (pl.when(t_num.is_between(0, MAX_UNIX_S, closed="left")).then(t_num) * 1e6)
        .round()
        .cast(pl.Int64)
    )


def _device(host: str | None, default_host: str) -> list[pl.Expr]:
    """A series' host and GPU index as its rows will carry them (the store's sort keys)."""
    return [
        pl.coalesce(
            pl.lit(host, dtype=pl.String),
            pl.col("host"),
            pl.col("_instance_host"),
            pl.lit(default_host),
        ).alias("_host"),
        pl.col("gpu_index").cast(pl.Int16, strict=False).alias("_gpu"),
    ]


def _batch_ids(
    samples: pl.DataFrame, series: pl.DataFrame, host: str | None, default_host: str
) -> pl.Series:
    """A batch number per sample (see :data:`BATCH_SAMPLES`), in the store's order."""
    devices = (
        series.select("_sid", *_device(host, default_host))
        .sort("_host", "_gpu", nulls_last=True, maintain_order=True)
        .with_columns(
            (pl.struct("_host", "_gpu").is_first_distinct().cum_sum() - 1)
            .cast(pl.Int32)
            .alias("_dev")
        )
    )
    n, rank = pl.len().over("_dev"), pl.col("_us").rank("min").over("_dev")
    groups = samples.select(
        pl.col("_sid")
        .replace_strict(devices["_sid"], devices["_dev"], return_dtype=pl.Int32)
        .alias("_dev"),
        _unix_us(pl.col("_t")).alias("_us"),
    ).select(
        "_dev",
        # a device's k spans of time, equal times in one span (rank "min"); k = 1 for
        # a device of at most BATCH_SAMPLES samples
        ((rank - 1) * ((n + BATCH_SAMPLES - 1) // BATCH_SAMPLES) // n)
        .fill_null(0)
        .cast(pl.Int32)
        .alias("_w"),
    )
    sizes = groups.group_by("_dev", "_w").len().sort("_dev", "_w")
    batch, filled, ids = 0, 0, []
    for count in sizes.get_column("len").to_list():  # one loop per span, not per sample
        if filled and filled + count > BATCH_SAMPLES:
            batch, filled = batch + 1, 0
        ids.append(batch)
        filled += count
    keyed = sizes.select("_dev", "_w", pl.Series("_batch", ids, dtype=pl.Int32))
    return groups.join(keyed, on=["_dev", "_w"], how="left", maintain_order="left").get_column(
        "_batch"
    )


_SPILLED: list[tempfile.TemporaryDirectory[str]] = []
"""Folders of the checked sample rows, one Parquet file per batch; they live until the
process exits (the store writer scans them after the loader returns)."""


def _spill_dir() -> Path:
    tmp = tempfile.TemporaryDirectory(prefix="gpu-trace-promrange-")
    _SPILLED.append(tmp)
    return Path(tmp.name)


def parse(
    walk: Walk, *, host: str | None, default_host: str, dataset: str, file: Path
) -> tuple[pl.LazyFrame, int, pl.DataFrame, pl.DataFrame, int]:
    """Samples (and how many), events, quarantine and the "no event" count of a walked
    file, checked in batches of about :data:`BATCH_SAMPLES` samples; each batch's
    sample rows go to a Parquet file at once, so memory is bounded by the batch, not
    by the answer.
    """
    samples, series = _frames(walk)
    ids = _batch_ids(samples, series, host, default_host)
    spill = _spill_dir()
    out_samples: list[Path] = []
    rows = 0
    out_events: list[pl.DataFrame] = []
    out_bad: list[pl.DataFrame] = []
    event_keys: list[pl.DataFrame] = []
    numbers = ids.unique().sort().to_list() or [0]  # no sample: one empty batch
    for b in numbers:
        part = samples if len(numbers) == 1 else samples.filter(ids == b)
        typed = _typed(part, series, host=host, default_host=default_host)
        good = typed.filter(pl.col(REASON).is_null())
        is_event = pl.col("metric").str.starts_with("event:")
        event_keys.append(good.filter(is_event).select("_kid", "time", "value"))
        good_samples, events, bad, _ = split_rows(
            good.with_columns(pl.lit(None, pl.String).alias(RAW), pl.lit(False).alias("_repeat")),
            source=SOURCE,
            dataset=dataset,
            file=file,
            keep=("_kid",),
        )
        assert bad.height == 0  # every rejected row was taken out before split_rows
        out_samples.append(spill / f"{len(out_samples)}.parquet")
        good_samples.sort(*SORTED_BY, nulls_last=True, maintain_order=True).write_parquet(
            out_samples[-1], compression="lz4", statistics=False
        )
        rows += good_samples.height
        out_events.append(events)
        out_bad.append(_rejected(typed, walk.jsonl, dataset, file))
        del typed, good
    repeats = _repeats(pl.concat(event_keys) if event_keys else None)
    fired = (
        pl.concat(out_events)
        .join(repeats, on=["_kid", "time"], how="anti", maintain_order="left")
        .drop("_kid")
    )
    no_event = sum(k.height for k in event_keys) - fired.height
    quarantine = pl.concat(
        [
            *out_bad,
            _quarantine(
                pl.DataFrame(
                    {"_locator": walk.bad_locator, REASON: walk.bad_reason, RAW: walk.bad_raw},
                    schema={"_locator": pl.String, REASON: pl.String, RAW: pl.String},
                ),
                dataset,
                file,
            ),
        ]
    )
    return pl.scan_parquet(out_samples), rows, fired, quarantine, no_event


def _typed(
    samples: pl.DataFrame, series: pl.DataFrame, *, host: str | None, default_host: str
) -> pl.DataFrame:
    """One batch of samples checked and typed (``cells_to_rows``), with ``_reason``."""
    t = pl.col("_t").str.strip_chars()
    t_num = t.cast(pl.Float64, strict=False)
    v = pl.col("_v").str.strip_chars()
    infinite = v.str.to_lowercase().is_in(
        ["inf", "+inf", "-inf", "infinity", "+infinity", "-infinity"]
    )
    family = pl.col(FIELD)
    event_fields = [f for f, spec in FIELDS.items() if spec.metric.startswith("event:")]
    is_event = family.is_in(event_fields)
    gpu = pl.col("gpu_index")  # the label text (cast to a number below)
    reason = (
        pl.when(family.is_null())
        .then(pl.lit("series has no __name__ label"))
        .when(~family.is_in(list(FIELDS)))
        .then(pl.format("no canonical metric for {}", family))
        .when(t.is_null())
        .then(pl.lit("time is missing"))
        .when(t_num.is_null() | t_num.is_nan())
        .then(pl.format("time '{}' is not a number (unix seconds)", t))
        .when((t_num < 0) | (t_num >= MAX_UNIX_S))
        .then(pl.format("time '{}' is outside 1970-9999 (unix seconds)", t))
        .when(v.is_null())
        .then(pl.lit("value is missing"))
        .when(infinite)
        .then(pl.format("{} value '{}' is not finite", family, v))
        .when(is_event & (v.str.to_lowercase() == "nan"))
        .then(pl.format("{} value '{}' is not an XID or error count", family, v))
        .when(
            gpu.is_not_null()
            & ~gpu.cast(pl.Int16, strict=False).is_between(0, MAX_GPU_INDEX).fill_null(False)
        )
        .then(pl.format("gpu label '{}' is not a GPU index (a whole number 0-32767)", gpu))
    )
    keys = ("host", "gpu_index", "gpu_uuid", "mig_instance", "time")
    frame = (
        samples.lazy()
        .join(series.lazy(), on="_sid", how="left", maintain_order="left")
        .with_columns(
            reason.alias(REASON),
            pl.from_epoch(
                (pl.when(t_num.is_between(0, MAX_UNIX_S, closed="left")).then(t_num) * 1e6)
                .round()
                .cast(pl.Int64),
                time_unit="us",
            )
            .dt.replace_time_zone("UTC")
            .alias("time"),
            pl.coalesce(
                pl.lit(host, dtype=pl.String),
                pl.col("host"),
                pl.col("_instance_host"),
                pl.lit(default_host),
            ).alias("host"),
            pl.col("gpu_index").cast(pl.Int16, strict=False),
        )
        .with_columns((pl.col(REASON).is_null() & pl.col("time").is_not_null()).alias("_good"))
        .with_columns(
            pl.coalesce(
                pl.col(REASON),
                # the second good sample of one series at one time (overlapping answers)
                pl.when(
                    pl.col("_good")
                    & ~pl.when(pl.col("_good")).then(pl.struct("_kid", "time")).is_first_distinct()
                ).then(pl.lit("duplicate: the same series has an earlier sample at this time")),
            ).alias(REASON)
        )
        .with_columns(
            # rows rejected above carry no cell, so only their own reason applies
            pl.when(pl.col(REASON).is_not_null())
            .then(None)
            .when(v.str.to_lowercase() == "nan")
            .then(pl.lit("N/A"))
            .otherwise(v)
            .alias(CELL),
            # "the same line" of the range checks = the same device at the same time
            pl.struct(*keys).hash().alias(LINE),
        )
    )
    return cells_to_rows(frame, FIELDS)


def _rejected(typed: pl.DataFrame, jsonl: bool, dataset: str, file: Path) -> pl.DataFrame:
    """The quarantine rows of one batch's rejected samples."""
    prefix = pl.format("line {}, ", pl.col("_resp_line")) if jsonl else pl.lit("")
    return _quarantine(
        typed.filter(pl.col(REASON).is_not_null()).select(
            pl.format(
                "{}series {}, sample {}", prefix, pl.col("_series_no"), pl.col("_sample_no")
            ).alias("_locator"),
            pl.col(REASON),
            pl.format(
                '{}{} [{}, "{}"]',
                pl.col(FIELD).fill_null(""),
                pl.col("_labels"),
                pl.col("_t").fill_null("null"),
                pl.col("_v").fill_null("null"),
            ).alias(RAW),
        ),
        dataset,
        file,
    )


def _repeats(keys: pl.DataFrame | None) -> pl.DataFrame:
    """``_kid, time`` of every good event sample whose value equals the previous good
    event sample of the same series in time order (the same error reported again at the
    next step): no event. Over the whole file, so batching and chunking do not matter.
    """
    if keys is None or keys.height == 0:
        return pl.DataFrame(schema={"_kid": pl.Int64, "time": pl.Datetime("us", "UTC")})
    return (
        keys.sort("_kid", "time")
        .filter((pl.col("value") == pl.col("value").shift(1).over("_kid")).fill_null(False))
        .select("_kid", "time")
    )


def _quarantine(bad: pl.DataFrame, dataset: str, file: Path) -> pl.DataFrame:
    return bad.select(
        pl.lit(SOURCE).alias("source"),
        pl.lit(dataset).alias("dataset"),
        pl.lit(None, dtype=pl.String).alias("cluster"),
        pl.lit("gpu_samples").alias("table"),
        pl.lit(file.name).alias("file"),
        pl.col("_locator").alias("locator"),
        capped(pl.col(REASON), REASON_LIMIT).alias("reason"),
        capped(pl.col(RAW), RAW_LIMIT).alias("raw"),
    )


def range_file(
    path: Path,
    dataset: str,
    *,
    host: str | None = None,
    extra: dict[str, str] | None = None,
    max_answer_bytes: int = MAX_ANSWER_BYTES,
) -> list[Batch]:
    """One saved query_range answer (or JSON lines of them) -> gpu_samples (and events)
    batches; an answer over ``max_answer_bytes`` is one error, found before it is read.
    """
    info: FileInfo = file_info(path, 0, check_utf8=False, max_line=max_answer_bytes)
    if info.empty:
        raise InputError(path, "file is empty")
    walk = _documents(info, max_answer_bytes)
    if walk.records == 0:
        raise InputError(path, "no samples in the response(s) (empty result)")
    samples, n_samples, events, quarantine, no_event = parse(
        walk, host=host, default_host=slug(path.stem), dataset=dataset, file=path
    )
    accounted = n_samples + events.height + quarantine.height + no_event
    if accounted != walk.records:
        msg = (
            f"{path}: {walk.records} records but {accounted} were accounted for "
            f"(samples {n_samples}, events {events.height}, quarantined "
            f"{quarantine.height}, no event {no_event})"
        )
        raise ReconciliationError(msg)
    meta = {
        "format": "prometheus query_range JSON" + (" lines" if walk.jsonl else ""),
        "responses": str(walk.responses),
        **({"gpu_models": json.dumps(walk.models, sort_keys=True)} if walk.models else {}),
        **(extra or {}),
    }
    return batches(
        info=info,
        dataset=dataset,
        samples=samples,
        samples_rows=n_samples,
        samples_sorted=True,
        events=events,
        quarantine=quarantine,
        no_event=no_event,
        basis=TimeBasis("file", "UTC"),
        extra=meta,
    )


class PromRangeLoader:
    """Loader for saved ``query_range`` answers (a file, or a folder of ``.json`` /
    ``.jsonl`` files).
    """

    name = SOURCE
    version = "1"

    def batches(
        self,
        path: Path,
        *,
        host: str | None = None,
        dataset: str | None = None,
        extra: dict[str, str] | None = None,
        max_answer_bytes: int = MAX_ANSWER_BYTES,
        **_: Any,
    ) -> Iterator[Batch]:
        """Yield the batches of ``path``: one file, or every ``.json`` / ``.jsonl`` in a folder."""
        cap = {"max_answer_bytes": max_answer_bytes}
        if path.is_file():
            yield from range_file(path, dataset or slug(path.stem), host=host, extra=extra, **cap)
            return
        for f in sorted(p for p in path.iterdir() if p.is_file()):
            if f.suffix in (".json", ".jsonl"):
                yield from range_file(f, slug(f.stem), host=host, extra=extra, **cap)


@dataclass(frozen=True)
class PromRangeOptions:
    """`gpu-trace ingest prometheus-range` options (passed to the loader as keyword arguments)."""

    host: str | None = option(
        None, "Host name (default: the hostname/Hostname label, else instance)."
    )
    max_answer_bytes: int = option(
        MAX_ANSWER_BYTES,
        "Refuse an answer (a whole .json file, or one line of a .jsonl file) larger than "
        "this many bytes (e.g. 500M), checked before it is read; the default is telemetry "
        "pull's --max-body-bytes.",
        parse=size_bytes,
        metavar="SIZE",
    )


PLUGIN = LoaderPlugin(
    name="prometheus-range",
    loader=PromRangeLoader,
    help="Saved Prometheus /api/v1/query_range JSON (one answer, or JSON lines of answers as `telemetry pull --save` writes) -> gpu_samples (XID/ECC -> events).",
    options=PromRangeOptions,
)
