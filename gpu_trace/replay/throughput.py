"""Heterogeneous GPUs: a Gavel-style throughput table, job class x GPU model -> speed.

A job of class c placed on GPU model t runs ``speed(c, t)`` times as fast as on the
reference (1.0): its remaining work drains at that rate. A job spread over several
models runs at the slowest one's speed (synchronous data parallel). The job class is the
job's ``name`` (Gavel: the model, e.g. ``ResNet-50``); patterns use shell wildcards.

File formats (rows are tried in file order; the first whose class pattern and model
match wins; nothing matches -> ``default``, 1.0 unless given):

CSV, header ``job_class,gpu_type,throughput``::

    job_class,gpu_type,throughput
    resnet*,V100,2.2
    resnet*,K80,0.6
    *,V100,1.5

TOML::

    default = 1.0
    [throughput."resnet*"]
    V100 = 2.2
    K80 = 0.6
    [throughput."*"]
    V100 = 1.5
"""

from __future__ import annotations

import csv
import fnmatch
import tomllib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import polars as pl

from gpu_trace.errors import InputError


@dataclass(frozen=True)
class ThroughputTable:
    """Rules (class pattern, GPU model, speed) in priority order, and the default."""

    rules: tuple[tuple[str, str, float], ...]
    default: float = 1.0

    def speed(self, job_class: str, gpu_type: str) -> float:
        """The speed of the first rule matching class and model (``*`` matches any
        model), else the default: file order is the priority order.
        """
        for pat, model, value in self.rules:
            if (model == gpu_type or model == "*") and fnmatch.fnmatchcase(job_class, pat):
                return value
        return self.default

    def codes(
        self, names: pl.Series, type_names: tuple[str, ...]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """Per job a class code, and the (classes x GPU types) speed table: rules are
        evaluated once per distinct job name, not per job.
        """
        filled = names.cast(pl.String).fill_null("")
        uniq = filled.unique().sort()
        table = np.asarray(
            [[self.speed(n, t) for t in type_names] for n in uniq.to_list()], dtype=np.float64
        ).reshape(len(uniq), len(type_names))
        code = filled.replace_strict(
            uniq, pl.int_range(len(uniq), eager=True), return_dtype=pl.Int64
        )
        return code.to_numpy().astype(np.int64), table


def load(path: Path) -> ThroughputTable:
    """Read a throughput table (.csv or .toml, see the module docstring)."""
    if not path.exists():
        raise InputError(path, "throughput table does not exist")
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return _load_csv(path)
    if suffix == ".toml":
        return _load_toml(path)
    raise InputError(path, "throughput tables are .csv or .toml")


def _load_csv(path: Path) -> ThroughputTable:
    """The CSV form: one rule per non-blank row; a bad speed names its line."""
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    if not rows or [h.strip() for h in rows[0]] != ["job_class", "gpu_type", "throughput"]:
        raise InputError(path, "header must be job_class,gpu_type,throughput", "line 1")
    rules: list[tuple[str, str, float]] = []
    for i, r in enumerate(rows[1:], 2):
        if not r:
            continue
        try:
            value = float(r[2])
            if not value > 0:
                raise ValueError
            rules.append((r[0].strip(), r[1].strip(), value))
        except (ValueError, IndexError):
            raise InputError(path, "throughput must be a positive number", f"line {i}") from None
    return ThroughputTable(tuple(rules))


def _load_toml(path: Path) -> ThroughputTable:
    """The TOML form: ``default`` and a ``[throughput."<class>"]`` table per pattern."""
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise InputError(path, f"not valid TOML: {exc}") from None
    rules: list[tuple[str, str, float]] = []
    try:
        default = float(doc.get("default", 1.0))
        for cls, models in dict(doc.get("throughput", {})).items():
            for model, value in dict(models).items():
                v = float(value)
                if not v > 0:
                    raise ValueError
                rules.append((str(cls), str(model), v))
    except (TypeError, ValueError):
        raise InputError(
            path, "throughput values must be positive numbers", "[throughput]"
        ) from None
    if not default > 0:
        raise InputError(path, "default must be positive", "default")
    return ThroughputTable(tuple(rules), default)
