"""What a sweep *is*: a grid over :class:`~gpu_trace.replay.config.ReplayConfig` fields,
read from a TOML file or from command-line flags, expanded into one config per run.

The grid is generic: any ``ReplayConfig`` field may be held fixed (``[fixed]``) or swept
(``[grid]``), so fields added to the dataclass later (placements, inflation, faults,
energy, multi-resource clusters) become sweepable without touching this module. Names
are checked against the dataclass (with a "did you mean"), values against its type
hints, and every config is validated before the first run starts::

    source = "openb"
    [fixed]
    window_end = "1970-01-10"
    [grid]
    scheduler = ["fifo", "sjf", "las"]      # a list ...
    placement = "best-fit,fgd"              # ... or a comma-separated string
    load = "0.8:1.4:0.1"                    # a:b:step, both ends included
    seed = "0-9"                            # an integer range, both ends included
    cluster = ["32x8", "64x8"]              # cluster shapes are a field too
"""

from __future__ import annotations

import dataclasses
import itertools
import re
import tomllib
import types
import typing
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from gpu_trace.errors import GpuTraceError
from gpu_trace.replay import experiment as xp
from gpu_trace.replay.config import ReplayConfig
from gpu_trace.replay.simulate import one_experiment
from gpu_trace.values import suggestion

TOP_KEYS = ("source", "name", "fixed", "grid")
DERIVED = {"run_id": "run ids are derived from the config", "source": "give it at the top level"}
MAX_VALUES = 10_000
"""Most values one range may expand to (a typo like ``0:1e6:1`` fails fast)."""

_BOOLS = {"true": True, "false": False, "yes": True, "no": False, "1": True, "0": False}
_INT_RANGE = re.compile(r"^\s*(-?\d+)\s*-\s*(-?\d+)\s*$")


class SweepSpecError(GpuTraceError):
    """A bad sweep file or flag: names the file (or ``command line``), key and reason."""


@dataclass(frozen=True)
class SweepSpec:
    """A resolved grid: the source, the fixed fields and the swept axes (in order)."""

    source: str
    fixed: dict[str, Any]
    axes: dict[str, tuple[Any, ...]]
    name: str = "sweep"
    origin: str = "command line"
    """Where the spec came from (a file name), for error messages."""
    config_type: type[Any] = ReplayConfig
    """The config dataclass the grid is over: ``ReplayConfig``, or another simulator's
    (``ServeConfig``: the serving replay's sweeps). Not in the manifest: the command
    that reads it back knows which."""

    def to_json(self) -> dict[str, Any]:
        """The spec as plain JSON for the sweep manifest (``--resume`` re-parses it)."""
        return {
            "source": self.source,
            "name": self.name,
            "fixed": self.fixed,
            "grid": {k: list(v) for k, v in self.axes.items()},
        }

    def points(self) -> list[dict[str, Any]]:
        """Every grid point (axis -> value), in a stable order: the product of the axes
        as written, the last axis varying fastest.
        """
        keys = list(self.axes)
        return [dict(zip(keys, combo, strict=True)) for combo in _product(self)]

    def configs(self) -> list[tuple[dict[str, Any], Any]]:
        """(grid point, validated config) per run. When any policy trains the duration
        model, the training split applies to every run (one job selection, as in
        ``compare``), unless ``training_split`` is set explicitly.
        """
        try:
            return self._configs()
        except SweepSpecError:
            raise
        except GpuTraceError as exc:  # a bad name, or a text option (--faults) that does not parse
            msg = f"{self.origin}: {exc}"
            raise SweepSpecError(msg) from None

    def _configs(self) -> list[tuple[dict[str, Any], Any]]:
        if self.config_type is not ReplayConfig:  # another simulator's: built as given
            return [
                (p, self.config_type(**{"source": self.source, **self.fixed, **p}))
                for p in self.points()
            ]
        out: list[tuple[dict[str, Any], ReplayConfig]] = []
        for point in self.points():
            fields = {"source": self.source, **self.fixed, **point}
            sched = fields.get("scheduler")
            if isinstance(sched, str):
                fields["scheduler"], oracle = xp.parse_scheduler(sched)
                fields["oracle"] = bool(fields.get("oracle")) or oracle
            out.append((point, ReplayConfig(**fields)))
        if "training_split" in self.fixed or "training_split" in self.axes:
            for _, c in out:
                c.validate()
            return out
        resolved = one_experiment([c for _, c in out])
        return [(p, c) for (p, _), c in zip(out, resolved, strict=True)]


def _product(spec: SweepSpec) -> itertools.product[tuple[Any, ...]]:
    return itertools.product(*spec.axes.values())


def _fields(config: type[Any] = ReplayConfig) -> dict[str, Any]:
    hints = typing.get_type_hints(config)
    return {f.name: hints[f.name] for f in dataclasses.fields(config)}


def _did_you_mean(name: str, known: list[str]) -> str:
    near = suggestion(name, known)
    return f"; did you mean {near!r}?" if near else f"; known: {', '.join(known)}"


def _base_types(hint: Any) -> tuple[list[type], list[Any]]:
    """(accepted Python types, Literal choices) of a field's type hint."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        kinds: list[type] = []
        choices: list[Any] = []
        for arg in typing.get_args(hint):
            k, c = _base_types(arg)
            kinds += k
            choices += c
        return kinds, choices
    if origin is typing.Literal:
        return [], list(typing.get_args(hint))
    if origin is not None:
        return [origin], []
    return ([hint] if isinstance(hint, type) and hint is not type(None) else []), []


def _type_name(hint: Any) -> str:
    if isinstance(hint, type):
        return hint.__name__
    return str(hint).replace("typing.", "")


def _coerce(value: Any, hint: Any, where: str) -> Any:
    """``value`` as the field's type (int -> float, list -> tuple), else an error."""
    kinds, choices = _base_types(hint)
    if choices and value in choices:
        return value
    if isinstance(value, bool):
        if bool in kinds:
            return value
    elif float in kinds and isinstance(value, int | float):
        return float(value)
    elif int in kinds and isinstance(value, int):
        return value
    elif tuple in kinds and isinstance(value, list):
        return tuple(value)
    else:
        for k in kinds:
            if k not in (bool, float, int) and isinstance(value, k):
                return value
    if not kinds and not choices:
        return value  # a hint we cannot check: ReplayConfig.validate() decides
    msg = f"{where}: {value!r} is not a {_type_name(hint)}"
    raise SweepSpecError(msg)


def _decimal(text: str, where: str) -> Decimal:
    try:
        return Decimal(text.strip())
    except InvalidOperation:
        msg = f"{where}: {text!r} is not a number"
        raise SweepSpecError(msg) from None


def expand_range(text: str, hint: Any, where: str) -> list[Any]:
    """``a:b:step`` (both ends included, decimal arithmetic so 0.8:1.4:0.1 gives 0.8,
    0.9, ..., 1.4 exactly), ``a-b`` (integers), or ``x,y,z``.
    """
    kinds, _ = _base_types(hint)
    numeric = float in kinds or int in kinds
    if numeric and text.count(":") == 2:
        return _step_range(text, kinds, where)
    m = _INT_RANGE.match(text)
    if numeric and m:
        return _int_range(text, int(m.group(1)), int(m.group(2)), kinds, where)
    return _listed(text, kinds, numeric, where)


def _step_range(text: str, kinds: list[type], where: str) -> list[Any]:
    """``a:b:step`` in decimal arithmetic, ends included, as floats or (all whole)
    ints by the field's type.
    """
    a, b, step = (_decimal(x, where) for x in text.split(":"))
    if step <= 0:
        msg = f"{where}: range {text!r} needs a step > 0"
        raise SweepSpecError(msg)
    if b < a:
        msg = f"{where}: range {text!r} ends before it starts"
        raise SweepSpecError(msg)
    count = int((b - a) / step) + 1
    if count > MAX_VALUES:
        msg = f"{where}: range {text!r} has {count:,} values (max {MAX_VALUES:,})"
        raise SweepSpecError(msg)
    values = [a + i * step for i in range(count)]
    if float not in kinds:
        if any(v != v.to_integral_value() for v in values):
            msg = f"{where}: range {text!r} is not all integers"
            raise SweepSpecError(msg)
        return [int(v) for v in values]
    return [float(v) for v in values]


def _int_range(text: str, lo: int, hi: int, kinds: list[type], where: str) -> list[Any]:
    """``lo-hi`` inclusive, as floats when the field is a float."""
    if hi < lo:
        msg = f"{where}: range {text!r} ends before it starts"
        raise SweepSpecError(msg)
    if hi - lo + 1 > MAX_VALUES:
        msg = f"{where}: range {text!r} has {hi - lo + 1:,} values"
        raise SweepSpecError(msg)
    return [float(v) if float in kinds else v for v in range(lo, hi + 1)]


def _listed(text: str, kinds: list[type], numeric: bool, where: str) -> list[Any]:
    """``x,y,z``: numbers for a numeric field, booleans for a bool-only one (an
    unrecognised word is kept for :func:`_coerce` to refuse), else the strings.
    """
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        msg = f"{where}: no values"
        raise SweepSpecError(msg)
    if bool in kinds and not numeric:
        return [_BOOLS.get(p.lower(), p) for p in parts]
    if not numeric:
        return parts
    return [_number(p, kinds, where) for p in parts]


def _number(text: str, kinds: list[type], where: str) -> float | int:
    d = _decimal(text, where)
    if float in kinds:
        return float(d)
    if d != d.to_integral_value():
        msg = f"{where}: {text!r} is not an integer"
        raise SweepSpecError(msg)
    return int(d)


def _check_name(key: str, where: str, known: dict[str, Any], kind: str = "ReplayConfig") -> None:
    if key in DERIVED:
        msg = f"{where}: {key} cannot be set here ({DERIVED[key]})"
        raise SweepSpecError(msg)
    if key not in known:
        raise SweepSpecError(
            f"{where}: unknown {kind} field {key!r}"
            + _did_you_mean(key, sorted(k for k in known if k not in DERIVED))
        )


def parse(data: dict[str, Any], origin: str, config: type[Any] = ReplayConfig) -> SweepSpec:
    """A :class:`SweepSpec` over ``config``'s fields from a TOML document's (or the
    flags') dict; ``origin`` (the file name, or ``command line``) starts every error
    message.
    """
    source, name = _top_level(data, origin)
    known = _fields(config)
    fixed: dict[str, Any] = {}
    axes: dict[str, tuple[Any, ...]] = {}
    for section in ("fixed", "grid"):
        table = data.get(section, {})
        if not isinstance(table, dict):
            msg = f"{origin}: [{section}] must be a table of field = value"
            raise SweepSpecError(msg)
        for key, value in table.items():
            where = f"{origin}: {section}.{key}"
            _check_name(key, where, known, config.__name__)
            hint = known[key]
            if section == "fixed":
                fixed[key] = _fixed_value(value, hint, where)
                continue
            if key in fixed:
                msg = f"{where}: {key} is both fixed and swept"
                raise SweepSpecError(msg)
            axes[key] = _axis_values(value, hint, where)
    return SweepSpec(
        source=source, fixed=fixed, axes=axes, name=name, origin=origin, config_type=config
    )


def _top_level(data: dict[str, Any], origin: str) -> tuple[str, str]:
    """(source, name) of the document, after refusing any unknown top-level key."""
    for key in data:
        if key not in TOP_KEYS:
            raise SweepSpecError(
                f"{origin}: unknown key {key!r}" + _did_you_mean(key, list(TOP_KEYS))
            )
    source = data.get("source")
    if not isinstance(source, str) or not source:
        msg = f"{origin}: `source` (the replayed source, e.g. openb) is required"
        raise SweepSpecError(msg)
    name = data.get("name", "sweep")
    if not isinstance(name, str):
        msg = f"{origin}: name: {name!r} is not a string"
        raise SweepSpecError(msg)
    return source, name


def _fixed_value(value: Any, hint: Any, where: str) -> Any:
    """A ``[fixed]`` value as the field's type; text for a non-text field goes through
    :func:`expand_range` and must give exactly one value.
    """
    if isinstance(value, str) and str not in _base_types(hint)[0]:
        parsed = expand_range(value, hint, where)
        if len(parsed) != 1:
            msg = f"{where}: a fixed field takes one value"
            raise SweepSpecError(msg)
        value = parsed[0]
    return _coerce(value, hint, where)


def _axis_values(value: Any, hint: Any, where: str) -> tuple[Any, ...]:
    """A ``[grid]`` axis: a range/list string, a list or one value, as the field's
    type; empty or repeated values are refused (they would duplicate runs).
    """
    raw = expand_range(value, hint, where) if isinstance(value, str) else value
    if not isinstance(raw, list):
        raw = [raw]
    if not raw:
        msg = f"{where}: no values"
        raise SweepSpecError(msg)
    values = tuple(_coerce(v, hint, where) for v in raw)
    seen = [v for i, v in enumerate(values) if v in values[:i]]
    if seen:
        msg = f"{where}: {seen[0]!r} is listed twice"
        raise SweepSpecError(msg)
    return values


def load(path: Path, config: type[Any] = ReplayConfig) -> SweepSpec:
    """Read a sweep file (over ``config``'s fields); a TOML syntax error names the
    file, line and column.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        msg = f"{path}: no such sweep file"
        raise SweepSpecError(msg) from None
    except UnicodeDecodeError as exc:
        msg = f"{path}: not UTF-8 text ({exc.reason})"
        raise SweepSpecError(msg) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = f"{path}: {exc}"
        raise SweepSpecError(msg) from None
    return parse(data, str(path), config)
