"""Shared, vectorized sampling helpers for the synthetic trace generators.

Everything takes a ``numpy.random.Generator`` so a seed fixes the output byte for byte.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

FLAT_DAY = (1.0,) * 24


def diurnal_arrivals(
    rng: np.random.Generator,
    n: int,
    *,
    start_s: int,
    days: float,
    hourly_weight: Sequence[float] = FLAT_DAY,
    weekday_weight: Sequence[float] = (1.0,) * 7,
    utc_offset_s: int = 0,
) -> npt.NDArray[np.int64]:
    """``n`` sorted arrival instants (integer seconds) in ``[start_s, start_s + days)``,
    with a time-of-day and day-of-week profile in the trace's local time
    (``utc_offset_s`` east of UTC; ``start_s`` is a Unix time).

    Sampled by thinning-free inversion: pick an hour slot by weight, then a uniform
    second within it, so the profile is exact in expectation and fully vectorized.
    """
    hours = int(np.ceil(days * 24))
    slot_start = start_s + 3600 * np.arange(hours, dtype=np.int64)
    local = slot_start + utc_offset_s
    hod = (local // 3600) % 24
    dow = ((local // 86400) + 3) % 7  # 1970-01-01 was a Thursday; 0 = Monday
    w = np.asarray(hourly_weight, dtype=float)[hod] * np.asarray(weekday_weight, dtype=float)[dow]
    slots = rng.choice(hours, size=n, p=w / w.sum())
    t = slot_start[slots] + rng.integers(0, 3600, size=n)
    end = start_s + int(days * 86400)
    return np.sort(np.minimum(t, end - 1))


def choice(
    rng: np.random.Generator, n: int, weights: Mapping[object, float]
) -> npt.NDArray[np.object_]:
    """``n`` draws from a categorical distribution given as value -> weight."""
    values = list(weights)
    p = np.asarray([weights[v] for v in values], dtype=float)
    idx = rng.choice(len(values), size=n, p=p / p.sum())
    return np.asarray(values, dtype=object)[idx]


def lognormal_seconds(
    rng: np.random.Generator, n: int, *, median_s: float, sigma: float, max_s: float
) -> npt.NDArray[np.int64]:
    """Heavy-tailed durations (integer seconds >= 1) with the given median, capped."""
    d = rng.lognormal(mean=np.log(median_s), sigma=sigma, size=n)
    return np.clip(np.rint(d), 1, max_s).astype(np.int64)


def hex_ids(rng: np.random.Generator, n: int, digits: int) -> list[str]:
    """``n`` random lower-case hex identifiers of ``digits`` digits (trace-style hashes)."""
    raw = rng.integers(0, 16, size=(n, digits))
    alphabet = np.array(list("0123456789abcdef"))
    return ["".join(row) for row in alphabet[raw]]
