"""Synthetic Mooncake FAST'25 request traces in the upstream JSON-lines format.

Writes ``OUT/conversation_trace.jsonl`` and ``OUT/synthetic_trace.jsonl`` as
kvcache-ai/Mooncake publishes them (``FAST25-release/README.md``, "Trace Format"): one
``{"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46,
47, ...]}`` per line (that key order and spacing, LF line ends), ``timestamp`` ms from
the trace's start, ``hash_ids`` one remapped id per 512-token block, ``len(hash_ids) =
ceil(input_length / 512)``, ids numbered 0, 1, 2, ... in order of first appearance.

**Prefix blocks.** Requests come in conversations (1 + geometric turns). A session's
turns carry a growing context: their input lengths are the session's draws sorted
ascending (so the marginal stays the calibrated one) and turn k's full blocks are the
session's first blocks, the ones turn k-1 listed, so a later turn reuses its
predecessor's whole blocks; a trailing partial block (input not a multiple of 512) is
the request's own, as the hash of a half-filled block changes when the context grows.
In ``conversation`` every request starts with the one shared block (id 0: all 12,031
real requests list id 0 first, a common system prompt); ``synthetic`` has none.

Calibration (computed from the real files, bundled in ``data/samples/mooncake``; the
quantiles at :data:`~gpu_trace.synth.serving_common.PERCENTILES`):

- requests split as in the release, 12,031 : 3,993;
- ``input_length`` and ``output_length`` from each file's quantile table (medians
  6,909 / 350 conversation, 11,587 / 69 synthetic; the README's means 12,035 / 343 and
  15,325 / 149 are followed within the tests' tolerance, not forced);
- follow-up turns: the share of real requests whose blocks past the shared one start
  with an already-seen block, 4,658 / 12,031 = 38.7 % (conversation) and 1,782 / 3,993
  = 44.6 % (synthetic), gives the mean turns per session 1 / (1 - share) =
  :data:`CONVERSATION` ``.mean_turns``; think time between turns exponential with the
  mean gap between a request and the last one listing its reused prefix block in the
  real files, 214.7 s and 115.7 s;
- how alike a session's contexts are (``spread`` 0.03 in quantile units) and how much
  longer the contexts of long conversations are (``tilt``: 0 conversation, 0.22
  synthetic) were tuned so the share of listed blocks already listed by an earlier
  request (reusable with an unlimited cache) is the real file's: 36.6 % conversation,
  64.0 % synthetic (the synthetic trace's follow-up turns carry the long contexts);
- arrivals: ``conversation`` at the real mean rate (12,031 over 3,537 s, one request
  per 294 ms) written, as the real file is, in 3-second buckets (its 1,180 distinct
  timestamps are multiples of 3,000 ms, +-1); ``synthetic`` a Poisson process (the
  README) at the real mean gap of 256 ms, whole milliseconds.

Vectorized: the ids of all requests are one flat numpy array, the lines one polars
format, so a million requests take seconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import polars as pl
import pyarrow as pa

from gpu_trace.synth.serving_common import (
    order_in_time,
    session_layout,
    whole_from_quantiles,
    write_lines,
)

BLOCK_TOKENS = 512


@dataclass(frozen=True)
class Workload:
    """One Mooncake file's calibration."""

    name: str
    requests: int
    input_tokens: tuple[int, ...]
    output_tokens: tuple[int, ...]
    mean_turns: float
    think_s: float
    gap_ms: float
    bucket_ms: int
    shared_block: bool
    spread: float
    tilt: float


CONVERSATION = Workload(
    "conversation",
    12_031,
    (891, 894, 901, 964, 1662, 3263, 4993, 6909, 9570, 13196, 17869, 27367, 39550, 85400,
     121301, 126195),
    (1, 3, 10, 24, 100, 213, 291, 350, 399, 447, 504, 597, 698, 1119, 2000, 2000),
    1 / (1 - 4658 / 12031),
    214.7,
    3_536_999 / 12_030,
    3000,
    True,
    0.03,
    0.0,
)  # fmt: skip
SYNTHETIC = Workload(
    "synthetic",
    3_993,
    (13, 16, 22, 30, 88, 913, 4365, 11587, 16290, 19409, 28425, 38611, 48905, 66456,
     191373, 191378),
    (1, 2, 2, 4, 8, 16, 32, 69, 126, 210, 289, 389, 519, 768, 813, 893),
    1 / (1 - 1782 / 3993),
    115.7,
    1_022_025 / 3_992,
    1,
    False,
    0.03,
    0.22,
)  # fmt: skip


def _dense(ids: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """``ids`` renumbered 0, 1, ... in order of first appearance (the release's
    remapping).
    """
    uniq, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
    rank = np.empty(len(uniq), dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(uniq), dtype=np.int64)
    return rank[inverse]


def _contexts(
    rng: np.random.Generator,
    drawn: npt.NDArray[np.int64],
    session: npt.NDArray[np.int64],
    w: Workload,
) -> npt.NDArray[np.int64]:
    """The draws handed out to the requests so that a session's turns get neighbouring
    lengths, growing: each session a level ``u ~ U(0, 1) + tilt * (turns - 1)``
    (longer conversations, longer contexts), each request the key ``level + spread *
    N(0, 1)``; the k-th smallest key gets the k-th smallest draw, then each session's
    lengths are sorted over its turns. A permutation of the draws, so the calibrated
    marginal is kept exactly.
    """
    turns = np.bincount(session)
    level = rng.random(len(turns)) + w.tilt * (turns - 1)
    key = level[session] + w.spread * rng.standard_normal(len(drawn))
    out = np.empty_like(drawn)
    out[np.argsort(key, kind="stable")] = np.sort(drawn)
    return out[np.lexsort((out, session))]


def requests(rng: np.random.Generator, n: int, w: Workload) -> pl.DataFrame:
    """``n`` requests of workload ``w`` in arrival order: ``timestamp``,
    ``input_length``, ``output_length`` and ``hash_ids`` (list of int64).
    """
    session, turn = session_layout(rng, n, w.mean_turns)
    inputs = _contexts(rng, whole_from_quantiles(rng, n, w.input_tokens, low=1), session, w)
    outputs = whole_from_quantiles(rng, n, w.output_tokens, low=1)
    blocks = -(-inputs // BLOCK_TOKENS)
    # the session's block ids: a range as long as its longest (last) turn
    last = np.flatnonzero(np.append(session[1:] != session[:-1], True))
    base = np.repeat(np.cumsum(blocks[last]) - blocks[last], np.diff(np.append(-1, last)))
    offsets = np.cumsum(blocks) - blocks
    total = int(blocks.sum())
    req = np.repeat(np.arange(n, dtype=np.int64), blocks)
    pos = np.arange(total, dtype=np.int64) - offsets[req]
    ids = base[req] + pos
    partial = (inputs % BLOCK_TOKENS) != 0
    own = partial[req] & (pos == blocks[req] - 1)
    ids = np.where(own, int(blocks[last].sum()) + req, ids)
    if w.shared_block:
        ids = np.where(pos == 0, -1, ids)
    # arrivals: sessions ordered in time, then given the sorted arrival instants
    order = order_in_time(rng, session, turn, span=n * w.gap_ms / 1000, think_mean=w.think_s)
    gaps = rng.exponential(w.gap_ms, size=n)
    gaps[0] = 0.0
    ms = np.floor(np.cumsum(gaps) / w.bucket_ms).astype(np.int64) * w.bucket_ms
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n, dtype=np.int64)
    # the file in arrival order (each request's ids gathered from its offset, no sort),
    # ids renumbered by first appearance in it
    sizes = blocks[order]
    starts = np.cumsum(sizes) - sizes
    gather = np.repeat(offsets[order] - starts, sizes) + np.arange(total, dtype=np.int64)
    dense = _dense(ids[gather])
    bounds = np.append(starts, total).astype(np.int32 if total < 2**31 else np.int64)
    lists = pa.ListArray.from_arrays(pa.array(bounds), pa.array(dense))
    return pl.DataFrame(
        {
            "timestamp": ms,
            "input_length": inputs[order],
            "output_length": outputs[order],
        }
    ).with_columns(pl.Series("hash_ids", pl.from_arrow(lists)))


def lines(frame: pl.DataFrame) -> pl.Series:
    """The JSON text of each request, spaced as the release writes it."""
    ids = pl.col("hash_ids").list.eval(pl.element().cast(pl.String)).list.join(", ")
    return frame.select(
        pl.concat_str(
            pl.lit('{"timestamp": '),
            "timestamp",
            pl.lit(', "input_length": '),
            "input_length",
            pl.lit(', "output_length": '),
            "output_length",
            pl.lit(', "hash_ids": ['),
            ids,
            pl.lit("]}"),
        )
    ).to_series()


def write(out: Path, *, jobs: int, seed: int) -> list[Path]:
    """Write the conversation and synthetic traces with ``jobs`` requests in all."""
    rng = np.random.default_rng(seed)
    share = CONVERSATION.requests / (CONVERSATION.requests + SYNTHETIC.requests)
    first = min(max(1, round(jobs * share)), max(1, jobs - 1))
    files = []
    for w, n in ((CONVERSATION, first), (SYNTHETIC, max(1, jobs - first))):
        files.append(write_lines(out / f"{w.name}_trace.jsonl", lines(requests(rng, n, w))))
    return files
