"""Sampling helpers the serving-trace generators share (azure_llm, mooncake, burstgpt,
gentd26): inverse-CDF draws from a real file's quantile table, session layouts and
writing one text column as a file.

A quantile table is the empirical quantiles of one real column at :data:`PERCENTILES`;
drawing ``u ~ U(0, 1)`` and interpolating the table at ``u`` (in ``log1p`` space, so a
heavy tail is followed between knots and zeros are allowed) reproduces every tabled
quantile of the real column, the median included, up to sampling noise. That is the
calibration: no parametric family fits all four traces (Azure's code output tokens
have a point mass at 6-13 tokens and a tail to 1,899), a table fits each.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import polars as pl

PERCENTILES = (0, 1, 5, 10, 20, 30, 40, 50, 60, 70, 80, 90, 95, 99, 99.9, 100)
"""The percentiles every quantile table in the serving generators is taken at."""
_P = np.asarray(PERCENTILES, dtype=float) / 100


def from_quantiles(
    rng: np.random.Generator, n: int, table: Sequence[float]
) -> npt.NDArray[np.float64]:
    """``n`` draws whose quantiles at :data:`PERCENTILES` are ``table``, interpolated
    linearly in ``log1p`` between the knots.
    """
    knots = np.log1p(np.asarray(table, dtype=float))
    out: npt.NDArray[np.float64] = np.expm1(np.interp(rng.random(n), _P, knots))
    return out


def whole_from_quantiles(
    rng: np.random.Generator, n: int, table: Sequence[float], *, low: int = 0
) -> npt.NDArray[np.int64]:
    """:func:`from_quantiles` rounded to whole numbers, at least ``low``."""
    return np.maximum(np.rint(from_quantiles(rng, n, table)), low).astype(np.int64)


def categorical(rng: np.random.Generator, n: int, counts: Mapping[str, float]) -> pl.Series:
    """``n`` draws of the keys of ``counts`` with probability proportional to the value
    (the real file's counts, so the shares are the file's), as a polars string column
    (a numpy string array of 10 M rows costs seconds and gigabytes to convert).
    """
    p = np.asarray(list(counts.values()), dtype=float)
    idx = rng.choice(len(p), size=n, p=p / p.sum())
    return pl.Series(list(counts), dtype=pl.String).gather(idx)


def zipf_ranks(
    rng: np.random.Generator, n: int, items: int, exponent: float
) -> npt.NDArray[np.int64]:
    """``n`` draws of a rank in ``0 .. items - 1`` with P(rank r) proportional to
    ``(r + 1) ** -exponent`` (popularity of users, models, adapters).
    """
    w = np.arange(1, items + 1, dtype=float) ** -exponent
    cdf = np.cumsum(w / w.sum())
    cdf[-1] = 1.0
    return np.searchsorted(cdf, rng.random(n), side="right").astype(np.int64)


def session_layout(
    rng: np.random.Generator, n: int, mean_turns: float
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``n`` requests grouped into conversations: each request's session number (0, 1,
    ..., contiguous) and its turn (0 for the first), turns per session 1 + geometric
    with mean ``mean_turns``. Requests are laid out session by session.
    """
    sessions = max(1, int(np.ceil(n / mean_turns)) + 8)
    while True:
        turns = rng.geometric(1 / mean_turns, size=sessions)
        if turns.sum() >= n:
            break
        sessions *= 2
    ends = np.cumsum(turns)
    keep = int(np.searchsorted(ends, n)) + 1
    turns = turns[:keep]
    turns[-1] -= int(ends[keep - 1] - n)
    session = np.repeat(np.arange(keep, dtype=np.int64), turns)
    starts = np.repeat(np.cumsum(turns) - turns, turns)
    return session, np.arange(n, dtype=np.int64) - starts


def order_in_time(
    rng: np.random.Generator,
    session: npt.NDArray[np.int64],
    turn: npt.NDArray[np.int64],
    *,
    span: float,
    think_mean: float,
) -> npt.NDArray[np.int64]:
    """The order in which the requests arrive: each session starts uniformly within
    ``span``, each later turn an exponential think time (mean ``think_mean``, same unit)
    after the previous one. Returns the indices of the requests sorted by that time, so
    a turn never arrives before an earlier turn of its session; the generator then gives
    the k-th request of this order the k-th of its sorted arrival instants, which keeps
    the arrival process it calibrated.
    """
    start = rng.uniform(0, span, size=int(session.max()) + 1)[session]
    think = np.where(turn > 0, rng.exponential(think_mean, size=len(turn)), 0.0)
    firsts = np.flatnonzero(turn == 0)
    cum = np.cumsum(think)
    base = np.repeat(cum[firsts], np.diff(np.append(firsts, len(turn))))
    return np.argsort(start + cum - base, kind="stable")


def write_lines(path: Path, lines: pl.Series, *, newline: str = "\n", final: bool = True) -> Path:
    """Write ``lines`` (one text per line) to ``path`` with ``newline`` between them,
    and after the last one when ``final`` (the Azure files end without one).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    frame = lines.alias("line").to_frame()
    frame.write_csv(path, include_header=False, quote_style="never", line_terminator=newline)
    if not final and len(lines):
        with path.open("r+b") as f:
            f.truncate(path.stat().st_size - len(newline.encode()))
    return path
