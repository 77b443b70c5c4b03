"""The autoscaler's cold start (``--cold-start``): how long a replica it starts takes to
serve, either one fixed duration or draws from measured model-load latencies.

Alibaba's GenTD26 dataset (github alibaba/clusterdata, ``cluster-trace-v2026-GenAI``)
publishes the loading latencies of a production diffusion-serving fleet; its README
(section 3, "Model Component Loading Latency") calls the base-model one "main component
of cold start". Every file of that section has the fields ``timestamp_anon`` (float),
``value`` (float, the loading latency in milliseconds) and ``container_ip`` (an MD5
hash, or ``"NULL"`` for an empty original value). The repository carries no licence, so
the files are never bundled: the user points at their own copy.

``--cold-start 60`` (a duration) is one fixed delay, as before. ``--cold-start
gentd26:PATH`` draws one latency per scale-up from the file's ``value`` column (seconds =
ms / 1000): draw ``k`` is row ``rng.integers(n)`` of the ``n`` rows in file order, ``rng``
being numpy's ``default_rng(ServeConfig.seed)`` (PCG64), so a run is reproducible and two
runs with one seed see the same delays in the same order. ``,stat=p50`` or ``,stat=p90``
is the file's median or 90th percentile (numpy's default linear interpolation) as a fixed
delay. The draws happen only at scale-ups, never in the engine's per-iteration path.

The file is read and checked when the option is parsed (one ``error:`` line naming the
file, row and reason: a value that is not a non-negative finite number, no rows, no
``value`` column), and read again, from a cache keyed by path, size and modification
time, when the engine is built. The option's value is kept as text (``ServeConfig``
stores it; ``serve_runs.config_json`` records which model a run used).
"""

from __future__ import annotations

import csv
import functools
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import polars as pl

from gpu_trace.errors import InputError, UsageError
from gpu_trace.values import parse_duration, unknown

MODELS = ("gentd26",)
"""Latency-file formats ``--cold-start MODEL:PATH`` reads."""
STATS = {"p50": 50.0, "p90": 90.0}
"""``stat=`` values: percentiles of the file's latencies used as a fixed delay."""
MAX_BYTES = 64 << 20
"""Largest latency file read (the real GenTD26 base-model file is 0.4 MB): a bound on
memory for a wrong path, not a limit real files reach."""
FIELD = "value"
"""The README's loading-latency field (milliseconds)."""


@dataclass(frozen=True)
class ColdStartSpec:
    """A parsed ``--cold-start``: a fixed delay (``seconds``) or a latency file."""

    seconds: float | None
    model: str = ""
    path: str = ""
    stat: str = ""

    @property
    def text(self) -> str:
        """The option as a run records it (absolute path)."""
        if self.seconds is not None:
            return f"{self.seconds:g}"
        extra = f",stat={self.stat}" if self.stat else ""
        return f"{self.model}:{self.path}{extra}"


def parse_spec(text: str) -> ColdStartSpec:
    """``90s`` / ``60`` -> a fixed delay; ``gentd26:PATH[,stat=p50|p90]`` -> a latency
    file (not read here). A path may hold commas: only trailing ``,name=value`` parts
    are options.
    """
    model, sep, rest = text.strip().partition(":")
    if not sep:
        return ColdStartSpec(seconds=parse_duration(text.strip(), "--cold-start"))
    if model.strip().lower() not in MODELS:
        what = "--cold-start model"
        raise unknown(what, model.strip(), MODELS)
    options: dict[str, str] = {}
    while "," in rest:
        head, _, tail = rest.rpartition(",")
        key, eq, value = tail.partition("=")
        if not eq:
            break
        options[key.strip()] = value.strip()
        rest = head
    stat = options.pop("stat", "")
    if options:
        what = "--cold-start option"
        raise unknown(what, sorted(options)[0], ["stat"])
    if stat and stat not in STATS:
        what = "--cold-start stat"
        raise unknown(what, stat, sorted(STATS))
    if not rest.strip():
        msg = f"--cold-start {text!r}: no file after '{model}:'"
        raise UsageError(msg)
    path = str(Path(rest.strip()).expanduser().absolute())
    return ColdStartSpec(seconds=None, model=model.strip().lower(), path=path, stat=stat)


def parse_cold_start(text: str) -> float | str:
    """The ``--cold-start`` option's parser: a duration -> seconds; a latency file ->
    the text with its path made absolute, after the file has been read and checked
    (:class:`~gpu_trace.errors.InputError` naming the file, row and reason).
    """
    spec = parse_spec(text)
    if spec.seconds is not None:
        return spec.seconds
    latencies_s(spec.path)
    return spec.text


class ColdStarts:
    """The delays of one run's scale-ups, in order (:meth:`next`, called per scale-up)."""

    def __init__(self, value: float | str, seed: int) -> None:
        spec = parse_spec(value) if isinstance(value, str) else ColdStartSpec(seconds=float(value))
        self.spec = spec
        self.fixed: float | None = spec.seconds
        self.values: npt.NDArray[np.float64] | None = None
        self.rng: np.random.Generator | None = None
        if self.fixed is None:
            values = latencies_s(spec.path)
            if spec.stat:
                self.fixed = float(np.percentile(values, STATS[spec.stat]))
            else:
                self.values = values
                self.rng = np.random.default_rng(seed)
        if self.fixed is not None and not (math.isfinite(self.fixed) and self.fixed >= 0):
            msg = f"--cold-start: {self.fixed!r} is not a duration >= 0"
            raise UsageError(msg)

    def next(self) -> float:
        """The cold start of the next scale-up, in seconds."""
        if self.fixed is not None:
            return self.fixed
        assert self.values is not None and self.rng is not None
        return float(self.values[int(self.rng.integers(len(self.values)))])


def latencies_s(path: str | Path) -> npt.NDArray[np.float64]:
    """The ``value`` column of a GenTD26 loading-latency file, in seconds, file order
    (read-only array; cached while the file is unchanged).
    """
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise InputError(p, "no such file") from None
    except OSError as exc:
        raise InputError(p, exc.strerror or str(exc)) from None
    if not p.is_file():
        raise InputError(p, "not a file")
    return _read(str(p), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=8)
def _read(path: str, size: int, mtime_ns: int) -> npt.NDArray[np.float64]:
    """Read and check one file (``size`` and ``mtime_ns`` key the cache)."""
    del mtime_ns
    if size == 0:
        raise InputError(path, "empty file (no header, no rows)")
    if size > MAX_BYTES:
        reason = f"{size} bytes: larger than a latency file ({MAX_BYTES} bytes at most)"
        raise InputError(path, reason)
    try:
        frame = pl.read_csv(path, infer_schema=False, raise_if_empty=False)
    except pl.exceptions.PolarsError as exc:
        _raise_shape(path, exc)
    if FIELD not in frame.columns:
        got = ",".join(frame.columns)
        reason = f"no {FIELD!r} column (header {got!r}; expected timestamp_anon,value,container_ip)"
        raise InputError(path, reason, "line 1")
    if frame.height == 0:
        raise InputError(path, "no rows after the header")
    checked = frame.lazy().select(
        pl.col(FIELD).alias("text"), pl.col(FIELD).cast(pl.Float64, strict=False).alias("ms")
    )
    bad = (
        checked.with_row_index("row", offset=1)
        .filter(pl.col("ms").is_null() | ~pl.col("ms").is_finite() | (pl.col("ms") < 0))
        .head(1)
        .collect()
    )
    if bad.height:
        row, text, ms = bad.row(0)
        if ms is None:
            reason = "value is missing" if text is None else f"value {text!r} is not a number"
        elif not math.isfinite(ms):
            reason = f"value {text!r} is not a finite number"
        else:
            reason = f"value {text!r} is a negative latency"
        raise InputError(path, reason, f"row {row} (line {row + 1})")
    # numpy's division is IEEE's (ms / 1000 as written); polars' may multiply by 0.001
    values = checked.select("ms").collect().to_series().to_numpy() / 1000.0
    values.flags.writeable = False
    return values


def _raise_shape(path: str, exc: Exception) -> None:
    """A file polars cannot split into the header's columns: find the first line whose
    field count differs from the header's (a scan of the rare bad file only).
    """
    try:
        with Path(path).open(encoding="utf-8", newline="") as fh:
            reader = csv.reader(fh)
            header = next(reader, [])
            for line, fields in enumerate(reader, start=2):
                if fields and len(fields) != len(header):
                    reason = f"{len(fields)} fields, the header has {len(header)}"
                    raise InputError(path, reason, f"row {line - 1} (line {line})")
    except UnicodeDecodeError as ude:
        raise InputError(path, f"not UTF-8 text ({ude.reason})") from None
    except csv.Error as ce:
        raise InputError(path, f"not CSV ({ce})") from None
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    raise InputError(path, f"not a CSV file ({first})") from None
