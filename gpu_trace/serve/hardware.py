"""The GPU, model and price tables of the serving replay, read from the TOML files beside
this module (``gpus.toml``, ``models.toml``, ``prices.toml``; every number's source is
cited there).

Names are matched case-insensitively against a kind's own name and its ``aliases``
(``h100`` selects ``h100-sxm``); an unknown name is a :class:`UsageError` listing the
known names, so ``--gpu h10`` tells the user what to type. The tables are read once per
process (small files; the replay asks for a spec once per run).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from gpu_trace.errors import InputError, UsageError
from gpu_trace.serve.latency.base import GpuSpec, ModelSpec
from gpu_trace.values import suggestion

GIB = 1024**3


@dataclass(frozen=True)
class _Table:
    """One TOML table: entries by canonical name, and every accepted spelling -> name."""

    entries: dict[str, dict[str, Any]]
    names: dict[str, str]


def _read_builtin(file: str) -> dict[str, Any]:
    text = resources.files("gpu_trace.serve").joinpath(file).read_text(encoding="utf-8")
    return tomllib.loads(text)


def _index(section: dict[str, Any]) -> _Table:
    names: dict[str, str] = {}
    for name, entry in section.items():
        for alias in entry.get("aliases", ()):
            names[str(alias).strip().lower()] = name
    for name in section:  # a kind's own name always means that kind
        names[name.lower()] = name
    return _Table(entries=dict(section), names=names)


@cache
def _gpus() -> _Table:
    return _index(_read_builtin("gpus.toml")["gpu"])


@cache
def _models() -> _Table:
    return _index(_read_builtin("models.toml")["model"])


def _resolve(what: str, name: str, table: _Table) -> str:
    key = name.strip().lower()
    if key in table.names:
        return table.names[key]
    known = ", ".join(sorted(table.entries))
    near = suggestion(key, table.names)
    hint = f"; did you mean {table.names[near]!r}?" if near else ""
    msg = f"unknown {what} {name!r}{hint} (known: {known})"
    raise UsageError(msg)


def gpu_names() -> list[str]:
    """The GPU kinds of the table (canonical names, sorted)."""
    return sorted(_gpus().entries)


def model_names() -> list[str]:
    """The models of the table (canonical names, sorted)."""
    return sorted(_models().entries)


def gpu_name(name: str) -> str:
    """The canonical name of a GPU kind or alias (``h100`` -> ``h100-sxm``)."""
    return _resolve("GPU", name, _gpus())


def model_name(name: str) -> str:
    """The canonical name of a model or alias."""
    return _resolve("model", name, _models())


def gpu(name: str) -> GpuSpec:
    """The spec of GPU kind ``name`` (or an alias)."""
    canonical = gpu_name(name)
    e = _gpus().entries[canonical]
    return GpuSpec(
        name=canonical,
        memory_bytes=float(e["memory_gib"]) * GIB,
        peak_flops=float(e["peak_tflops"]) * 1e12,
        hbm_bytes_per_s=float(e["hbm_gb_s"]) * 1e9,
        tdp_w=float(e["tdp_w"]),
        idle_w=float(e["idle_w"]),
        link_bytes_per_s=float(e["link_gb_s"]) * 1e9,
    )


def model(name: str) -> ModelSpec:
    """The spec of model ``name`` (or an alias, e.g. its Hugging Face id)."""
    canonical = model_name(name)
    e = _models().entries[canonical]
    return ModelSpec(
        name=canonical,
        layers=int(e["layers"]),
        hidden=int(e["hidden"]),
        heads=int(e["heads"]),
        kv_heads=int(e["kv_heads"]),
        ffn=int(e["ffn"]),
        vocab=int(e["vocab"]),
        params=float(e["params"]),
        dtype_bytes=int(e["dtype_bytes"]),
        max_context=int(e["max_context"]),
    )


def vidur_device(gpu_kind: str) -> tuple[str | None, tuple[str, ...]]:
    """The profile folder names (vidur's) for a GPU kind: the compute device (``a100``) and the
    network devices in preference order (``a100_pairwise_nvlink``, ``a100_dgx``); None and
    () where vidur published no profile for the kind.
    """
    e = _gpus().entries[gpu_name(gpu_kind)]
    device = e.get("vidur_device")
    return (str(device) if device else None, tuple(str(n) for n in e.get("vidur_network", ())))


def vidur_model(model_kind: str) -> str | None:
    """The profile folder (vidur's) of a model (``meta-llama/Llama-2-7b-hf``), None if none."""
    name = _models().entries[model_name(model_kind)].get("vidur_name")
    return str(name) if name else None


def prices(path: str | Path | None = None) -> dict[str, float]:
    """USD per GPU-hour by canonical GPU kind: the shipped default table, with the entries
    of the user's file ``path`` (same shape: a ``[price]`` table) replacing them kind by
    kind. A kind of the user's file that the GPU table does not know is a usage error
    (a typo would otherwise silently keep the default price).
    """
    table = {gpu_name(k): float(v) for k, v in _read_builtin("prices.toml")["price"].items()}
    if path is None:
        return table
    file = Path(path)
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(file, f"cannot read the price table: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(file, f"not TOML: {exc}") from None
    section = data.get("price")
    if not isinstance(section, dict):
        raise InputError(file, "no [price] table (USD per GPU-hour by GPU kind)")
    for kind, value in section.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise InputError(file, f"price of {kind!r} is {value!r}, not a number >= 0")
        table[gpu_name(kind)] = float(value)
    return table


def price(gpu_kind: str, path: str | Path | None = None) -> float:
    """USD per GPU-hour of one GPU kind (see :func:`prices`); a usage error naming the
    price file's option when the table has no price for it.
    """
    canonical = gpu_name(gpu_kind)
    table = prices(path)
    if canonical not in table:
        msg = f"no price for GPU {canonical!r} in the price table: give one with --price FILE"
        raise UsageError(msg)
    return table[canonical]


def gpu_rows() -> list[dict[str, Any]]:
    """The GPU table as rows (for ``gpu-trace serve models``): name, aliases, the
    figures with their units in the keys, and the sources.
    """
    keys = ("peak_tflops", "hbm_gb_s", "memory_gib", "tdp_w", "idle_w", "link_gb_s")
    return [
        {
            "gpu": name,
            "aliases": ", ".join(e.get("aliases", ())),
            **{k: float(e[k]) for k in keys},
            "source": e.get("source", ""),
            "idle_source": e.get("idle_source", ""),
        }
        for name, e in sorted(_gpus().entries.items())
    ]


def model_rows() -> list[dict[str, Any]]:
    """The model table as rows (for ``gpu-trace serve models``), with the KV-cache bytes
    per token and the weight bytes each model implies.
    """
    rows = []
    for name in model_names():
        spec = model(name)
        e = _models().entries[name]
        rows.append(
            {
                "model": name,
                "layers": spec.layers,
                "hidden": spec.hidden,
                "heads": spec.heads,
                "kv_heads": spec.kv_heads,
                "ffn": spec.ffn,
                "vocab": spec.vocab,
                "params": int(spec.params),
                "max_context_tokens": spec.max_context,
                "kv_bytes_per_token": spec.kv_bytes_per_token,
                "weight_bytes": int(spec.weight_bytes),
                "source": e.get("source", ""),
            }
        )
    return rows
