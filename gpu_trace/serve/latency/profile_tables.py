"""The measured tables of the ``profile`` latency model, read from vidur's CSV format and
turned into interpolators (the composition lives in :mod:`.profile`).

Columns are vidur's (its profilers write them: vidur/profiling/mlp, attention,
collectives at commit 7d47513): ``time_stats.<op>.median`` in milliseconds and the key
columns that say which model, tensor-parallel width and input size a row measured. A
file that lacks a needed column, or holds a non-number where a number belongs, is an
:class:`~gpu_trace.errors.InputError` naming the file, the line and the column.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import polars as pl

from gpu_trace.errors import InputError
from gpu_trace.serve.latency.base import ModelSpec


def _median(op: str) -> str:
    return f"time_stats.{op}.median"


def _read(file: Path, required: list[str]) -> pl.DataFrame:
    """The CSV with ``required`` columns as Float64 (True/False as 1/0)."""
    try:
        frame = pl.read_csv(file, infer_schema_length=0)  # every column as text
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise InputError(file, f"cannot read as CSV: {exc}") from None
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise InputError(file, f"no column {missing[0]!r} (vidur's profile format)")
    return frame


def _numbers(file: Path, frame: pl.DataFrame, columns: list[str]) -> pl.DataFrame:
    """``columns`` cast to Float64; a text that is not a number fails naming its line
    (header = line 1). Empty cells stay null.
    """
    out = {}
    for column in columns:
        text = frame[column].str.strip_chars()
        text = text.replace({"True": "1", "False": "0"})
        values = text.cast(pl.Float64, strict=False)
        bad = (values.is_null() & text.is_not_null() & (text != "")).arg_true()
        if len(bad):
            row = int(bad[0])
            raise InputError(
                file, f"{column} is {frame[column][row]!r}, not a number", f"line {row + 2}"
            )
        out[column] = values
    return pl.DataFrame(out)


def _mean_by(frame: pl.DataFrame, keys: list[str], value: str) -> pl.DataFrame:
    """Mean of ``value`` per distinct ``keys`` (several ranks or repeats of one point)."""
    return frame.drop_nulls([*keys, value]).group_by(keys).agg(pl.col(value).mean()).sort(keys)


@dataclass(frozen=True)
class TokenTable:
    """Milliseconds as a function of a token count, from measured points."""

    tokens: npt.NDArray[np.float64]
    ms_at: npt.NDArray[np.float64]

    def ms(self, tokens: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """Linear between measured points, the first point's value below them, the last
        segment's slope (not below 0) beyond them.
        """
        x, y = self.tokens, self.ms_at
        out = np.interp(tokens, x, y)
        if len(x) > 1:
            slope = max((y[-1] - y[-2]) / (x[-1] - x[-2]), 0.0)
            beyond = tokens > x[-1]
            out = np.where(beyond, y[-1] + slope * (tokens - x[-1]), out)
        result: npt.NDArray[np.float64] = out.astype(np.float64)
        return result

    @classmethod
    def from_mlp_csv(
        cls,
        file: Path,
        model: ModelSpec,
        tp: int,
        ops: tuple[str, ...],
        optional: frozenset[str],
    ) -> TokenTable:
        """The per-layer sum of ``ops`` (optional ones 0 when absent) by ``num_tokens``,
        for the rows of this model's shape and tensor-parallel width (vidur's filter).
        """
        keys = ["n_head", "n_kv_head", "n_embd", "n_expanded_embd"]
        tp_col = "num_tensor_parallel_workers"
        required = [*keys, tp_col, "num_tokens"] + [_median(o) for o in ops if o not in optional]
        frame = _read(file, required)
        present = [_median(o) for o in ops if _median(o) in frame.columns]
        values = _numbers(file, frame, [*keys, tp_col, "num_tokens", *present])
        want = (model.heads, model.kv_heads, model.hidden, model.ffn)
        mine = values.filter(
            pl.all_horizontal(pl.col(k) == v for k, v in zip(keys, want, strict=True))
        )
        rows = mine.filter(pl.col(tp_col) == tp)
        if rows.is_empty():
            widths = sorted({int(v) for v in mine[tp_col].drop_nulls()})
            shape = ", ".join(f"{k}={v}" for k, v in zip(keys, want, strict=True))
            raise InputError(
                file,
                f"no rows for {model.name} ({shape}) at num_tensor_parallel_workers={tp}"
                f" (widths with rows: {widths or 'none'})",
            )
        summed = rows.select(
            "num_tokens", pl.sum_horizontal([pl.col(c).fill_null(0.0) for c in present]).alias("ms")
        )
        table = _mean_by(summed, ["num_tokens"], "ms")
        return cls(table["num_tokens"].to_numpy(), table["ms"].to_numpy())

    @classmethod
    def from_allreduce_csv(cls, file: Path, model: ModelSpec, tp: int) -> TokenTable | None:
        """All-reduce milliseconds by tokens (``size`` bytes / hidden / dtype bytes, as
        vidur derives it), for ``tp`` GPUs all on one node; None when the file has no
        such rows (another network profile may).
        """
        median = _median("all_reduce")
        numeric = ["num_workers", "devices_per_node", "size", median]
        frame = _read(file, numeric)
        values = _numbers(file, frame, numeric)
        if "collective" in frame.columns:
            values = values.with_columns(frame["collective"].alias("collective")).filter(
                pl.col("collective") == "all_reduce"
            )
        rows = values.filter((pl.col("num_workers") == tp) & (pl.col("devices_per_node") == tp))
        if rows.is_empty():
            return None
        rows = rows.with_columns(
            (pl.col("size") / model.hidden / model.dtype_bytes).alias("tokens")
        )
        table = _mean_by(rows, ["tokens"], median)
        return cls(table["tokens"].to_numpy(), table[median].to_numpy())


class _Surface:
    """Milliseconds over two keys: linear over a triangulation of the measured points;
    outside them, the nearest point scaled by the work ratio ``work(a, b)``.
    """

    def __init__(
        self,
        points: npt.NDArray[np.float64],
        ms: npt.NDArray[np.float64],
        work: str,
    ) -> None:
        from scipy.interpolate import LinearNDInterpolator
        from scipy.spatial import QhullError, cKDTree

        self.points = points
        self.values = ms
        self.work = work
        self.scale = np.maximum(points.max(axis=0) - points.min(axis=0), 1.0)
        self.tree = cKDTree(points / self.scale)
        self.linear: LinearNDInterpolator | None
        try:
            self.linear = LinearNDInterpolator(points, ms, rescale=True)
        except (QhullError, ValueError):  # fewer than 3 points, or all on one line
            self.linear = None

    def _work(
        self, a: npt.NDArray[np.float64], b: npt.NDArray[np.float64]
    ) -> npt.NDArray[np.float64]:
        if self.work == "decode":  # batch x KV length: the KV read
            out: npt.NDArray[np.float64] = np.maximum(a, 1.0) * np.maximum(b, 1.0)
        else:  # prefill: chunk x (cached KV + chunk / 2): the causal (query, key) pairs
            out = np.maximum(b, 1.0) * (np.maximum(a, 0.0) + np.maximum(b, 1.0) / 2.0)
        return out

    def __call__(
        self, a: npt.NDArray[np.float64], b: npt.NDArray[np.float64]
    ) -> npt.NDArray[np.float64]:
        query = np.column_stack([a, b])
        if self.linear is not None:
            out = np.asarray(self.linear(query), dtype=np.float64).reshape(-1)
        else:
            out = np.full(len(a), np.nan)
        outside = np.isnan(out)
        if outside.any():
            _, idx = self.tree.query(query[outside] / self.scale)
            near = self.points[idx]
            ratio = self._work(a[outside], b[outside]) / self._work(near[:, 0], near[:, 1])
            out[outside] = self.values[idx] * ratio
        return out


class AttentionTable:
    """vidur's ``attention.csv``: decode and prefill attention and the KV-cache write."""

    def __init__(self, decode: _Surface, prefill: _Surface, kv_save: TokenTable | None) -> None:
        self.decode = decode
        self.prefill = prefill
        self.kv_save = kv_save

    def decode_ms(self, count: float, mean_kv: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """Per-layer decode attention of ``count`` requests of mean KV length ``mean_kv``."""
        return self.decode(np.full(len(mean_kv), count), mean_kv)

    def prefill_ms(self, kv: float, chunk: float) -> float:
        """Per-layer prefill attention of a chunk after ``kv`` cached tokens."""
        return float(self.prefill(np.array([kv]), np.array([chunk]))[0])

    def kv_save_ms(self, tokens: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """Per-layer KV-cache write of ``tokens`` tokens (0 when the file has none)."""
        if self.kv_save is None:
            return np.zeros_like(tokens)
        return self.kv_save.ms(tokens)

    @classmethod
    def from_csv(cls, file: Path, model: ModelSpec, tp: int, block_size: int) -> AttentionTable:
        """The rows of this model's heads and width and of ``block_size`` (when the file
        has the column), as vidur filters them.
        """
        keys = ["n_embd", "n_q_head", "n_kv_head", "num_tensor_parallel_workers"]
        shape = ["batch_size", "prefill_chunk_size", "kv_cache_size"]
        times = [_median("attn_decode"), _median("attn_prefill")]
        frame = _read(file, keys + shape + times)
        extra = [c for c in ("block_size", _median("attn_kv_cache_save")) if c in frame.columns]
        values = _numbers(file, frame, keys + shape + times + extra)
        want = (model.hidden, model.heads, model.kv_heads, tp)
        rows = values.filter(
            pl.all_horizontal(pl.col(k) == v for k, v in zip(keys, want, strict=True))
        )
        if "block_size" in rows.columns:
            rows = rows.filter(pl.col("block_size") == block_size)
        decode = _mean_by(
            rows.filter(pl.col("prefill_chunk_size") == 0),
            ["batch_size", "kv_cache_size"],
            times[0],
        )
        prefill = _mean_by(
            rows.filter(pl.col("prefill_chunk_size") > 0),
            ["kv_cache_size", "prefill_chunk_size"],
            times[1],
        )
        for name, part in (("decode", decode), ("prefill", prefill)):
            if part.is_empty():
                raise InputError(
                    file,
                    f"no {name} rows for {model.name} (n_embd={model.hidden}, "
                    f"n_q_head={model.heads}, n_kv_head={model.kv_heads}) at "
                    f"num_tensor_parallel_workers={tp}, block_size={block_size}",
                )
        kv_save = None
        save = _median("attn_kv_cache_save")
        if save in rows.columns and rows[save].drop_nulls().len():
            tokens = rows.with_columns(
                pl.max_horizontal("prefill_chunk_size", "batch_size").alias("num_tokens")
            )
            table = _mean_by(tokens, ["num_tokens"], save)
            kv_save = TokenTable(table["num_tokens"].to_numpy(), table[save].to_numpy())
        return cls(
            _Surface(
                decode.select(shape[0], shape[2]).to_numpy(), decode[times[0]].to_numpy(), "decode"
            ),
            _Surface(
                prefill.select(shape[2], shape[1]).to_numpy(),
                prefill[times[1]].to_numpy(),
                "prefill",
            ),
            kv_save,
        )
