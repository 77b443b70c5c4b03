"""Put rows in a table's store order without the writer's sort of long strings.

The store writes every table sorted by its ``sort_by`` columns (a stable sort, nulls
last). For string keys such as PAI's 24-character job names that sort is the costliest
step of an ingest (1.2 M task rows: ~2 s of CPU). :func:`in_store_order` gets the same
order from an integer sort: each string key is cut into 8-byte prefixes read as
big-endian integers, the rows are sorted stably by those integers, and the result is
then checked pair by pair against the real keys. Where the check holds, the order is
the writer's: sorted by the full keys, and rows with equal keys (equal prefixes too)
keep their input order, which is what a stable sort gives. Where it fails (strings that
differ only past the prefixes, non-ASCII text), the caller lets the writer sort.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

PREFIX_BYTES = 8
MAX_PREFIXES = 6
"""At most this many prefixes of a string key (48 bytes: a PAI job name has 24, a YARN
application id such as Philly's ~30); longer keys are still checked."""


def _prefix(col: str, at: int) -> pl.Expr:
    """Characters ``at`` .. ``at`` + 8 of ``col`` as a big-endian integer (zero-padded).
    Only ASCII text maps one character to one byte; anything else may give null or a
    wrong rank, which the final check catches.
    """
    chunk = pl.col(col).str.slice(at, PREFIX_BYTES).str.pad_end(PREFIX_BYTES, "\x00")
    return chunk.cast(pl.Binary).bin.reinterpret(dtype=pl.UInt64, endianness="big")


def _prefixes(column: pl.Series) -> int:
    longest = column.str.len_bytes().max()
    longest = longest if isinstance(longest, int) else 0
    return max(1, min(MAX_PREFIXES, -(-longest // PREFIX_BYTES)))


def _int_keys(frame: pl.DataFrame, keys: Sequence[str]) -> list[pl.Expr]:
    """Integer sort keys, none null: a key column with nulls gets a null flag first (so
    nulls sort last without ``nulls_last``, which makes polars' multi-column sort ~8x
    slower).
    """
    out: list[pl.Expr] = []
    for i, k in enumerate(keys):
        if frame.get_column(k).null_count():
            out.append(pl.col(k).is_null().alias(f"_n{i}"))
        if frame.schema[k] == pl.String:
            n = _prefixes(frame.get_column(k))
            parts = [_prefix(k, PREFIX_BYTES * j) for j in range(n)]
        else:
            parts = [pl.col(k).to_physical()]
        out += [p.fill_null(0).alias(f"_k{i}_{j}") for j, p in enumerate(parts)]
    return out


def _not_after(keys: Sequence[str]) -> pl.Expr:
    """Per row: it does not sort before the previous row (nulls last), true on row 0."""
    result: pl.Expr = pl.lit(True)
    for k in reversed(keys):
        cur, prev = pl.col(k), pl.col(k).shift()
        after = (prev.is_not_null() & cur.is_null()) | (cur > prev).fill_null(False)
        same = (prev.is_null() & cur.is_null()) | (cur == prev).fill_null(False)
        result = after | (same & result)
    return result.fill_null(True) | (pl.int_range(pl.len()) == 0)


def is_ordered(frame: pl.DataFrame, keys: Sequence[str]) -> bool:
    """Whether ``frame`` is already sorted by ``keys`` (nulls last)."""
    return bool(frame.select(_not_after(keys).all()).item())


def _by_first_prefix(frame: pl.DataFrame, keys: Sequence[str]) -> pl.Series | None:
    """Row positions in integer-prefix order, for a first key of strings without nulls:
    a stable sort by its first prefix alone (one integer column sorts ~3x faster than
    several), then the rows that share a first prefix with a neighbour (a job's tasks,
    names equal in their first 8 bytes) sorted again by every prefix of every key.
    Those rows stay in their block of equal first prefixes, so the result is the full
    integer-prefix order. None where the first key does not qualify.
    """
    first = keys[0]
    if frame.schema[first] != pl.String or frame.get_column(first).null_count():
        return None
    try:
        head = frame.select(_prefix(first, 0).fill_null(0)).to_series()
    except pl.exceptions.PolarsError:
        return None
    order = head.to_frame("h").select(pl.arg_sort_by("h", maintain_order=True)).to_series()
    ranked = head.gather(order)
    tied = ((ranked == ranked.shift(1)) | (ranked == ranked.shift(-1))).fill_null(value=False)
    if not tied.any():
        return order
    at = tied.arg_true()
    rows = order.gather(at)
    within = _positions(frame.select(keys)[rows], keys, split=False)
    if within is None:
        return None
    return order.scatter(at, rows.gather(within))


def _positions(frame: pl.DataFrame, keys: Sequence[str], *, split: bool = True) -> pl.Series | None:
    """Row positions of ``frame`` in integer-prefix order (None: a key cannot be cut)."""
    if split and (order := _by_first_prefix(frame, keys)) is not None:
        return order
    try:
        ints = frame.select(_int_keys(frame, keys))
    except pl.exceptions.PolarsError:
        return None
    return ints.select(pl.arg_sort_by(ints.columns, maintain_order=True)).to_series()


def _tie_groups(frame: pl.DataFrame, keys: Sequence[str]) -> pl.Series | None:
    """Where the first key is already in order (PAI's submit times), the positions of
    the rows whose first-key value has rows out of order: only those need sorting.
    None when the first key itself is out of order or such a value is null.
    """
    if len(keys) < 2 or not is_ordered(frame, keys[:1]):
        return None
    first = keys[0]
    broken = frame.filter(~_not_after(keys)).get_column(first).unique()
    if broken.null_count():
        return None
    at = frame.select(pl.arg_where(pl.col(first).is_in(broken.implode()))).to_series()
    return at.cast(pl.UInt32)


def in_store_order(frame: pl.DataFrame, keys: Sequence[str]) -> pl.DataFrame | None:
    """``frame`` in the order of a stable sort by ``keys`` with nulls last, or None when
    the integer prefixes cannot vouch for it (the writer then sorts).
    """
    if frame.height < 2 or is_ordered(frame, keys):
        return frame
    # gathering from one chunk per column is ~3-5x cheaper than from many (the CSV
    # reader and the line parse give one chunk per thread or batch)
    frame = frame.rechunk()
    ties = _tie_groups(frame, keys)
    order: pl.Series | None
    if ties is not None:
        # re-sort the tie groups alone; the other rows keep their places
        within = _positions(frame.select(keys)[ties], keys)
        if within is None:
            return None
        everything = pl.int_range(frame.height, dtype=pl.UInt32, eager=True)
        order = everything.scatter(ties, ties.gather(within))
    else:
        order = _positions(frame, keys)
    if order is None:
        return None
    out = frame[order]
    return out if is_ordered(out, keys) else None
