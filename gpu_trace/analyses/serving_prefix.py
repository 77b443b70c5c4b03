"""Prefix reuse of serving traces with block hashes (Mooncake ``hash_ids``: 512 tokens a
block): how much of the prompts' KV cache an unlimited cache could reuse, and the hit
rate of an LRU cache by capacity.

The reference sequence of a trace is every block of every request, requests in arrival
order (ties by request id), blocks in prompt order. A reference **is reusable** with an
unlimited cache when its hash was referenced before. An LRU cache of ``C`` blocks hits
a reference iff its **stack distance** (1 + the distinct blocks referenced since the
previous reference to the same block) is at most ``C`` (Mattson et al. 1970): one pass
gives every capacity's hit rate as a cumulative count.

The stack distances come from the reuse pairs (p, t): consecutive references to one
block. The distinct blocks strictly between p and t are (t - p - 1) minus the
references in between whose next reference also falls in between, i.e. minus the reuse
pairs nested inside (p, t). Counting nested pairs is a dominance count (pairs with a
later start and an earlier end), done here by a bottom-up merge sort in numpy: log2(n)
vectorized passes, no Python loop over references.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from gpu_trace.analyses.serving_common import COMMON_GLOSSARY, TRACE
from gpu_trace.plugins import AnalysisPlugin, option

IntArray = np.ndarray[Any, np.dtype[np.int64]]


def previous_reference(blocks: IntArray) -> IntArray:
    """For each reference, the index of the previous reference to the same block
    (-1: first reference).
    """
    n = blocks.size
    order = np.lexsort((np.arange(n), blocks))  # by block, then position
    same = np.zeros(n, dtype=bool)
    same[1:] = blocks[order[1:]] == blocks[order[:-1]]
    prev = np.full(n, -1, dtype=np.int64)
    prev[order[1:][same[1:]]] = order[:-1][same[1:]]
    return prev


def _nested_counts(starts: IntArray, ends: IntArray) -> IntArray:
    """For each pair k, #{m : starts[m] > starts[k] and ends[m] < ends[k]}.

    Pairs sorted by start descending; then the count is, for each pair, the earlier
    pairs with a smaller end: per-element inversions, counted by a bottom-up merge sort
    whose every level is two ``searchsorted`` and a scatter (ends are distinct), so
    log2(n) numpy passes in all.
    """
    n = starts.size
    counts = np.zeros(n, dtype=np.int64)
    if n < 2:
        return counts
    order = np.argsort(-starts, kind="stable")
    values = ends[order]  # the sequence whose per-element smaller predecessors we count
    ident = order.copy()  # original pair of each slot
    width = 1
    span = int(values.max()) + 1
    pos = np.arange(n, dtype=np.int64)
    while width < n:
        block = pos // width
        pair = block // 2
        right = (block % 2) == 1
        key = pair * span + values  # sorted within each half; pairs ascend
        left_keys, right_keys = key[~right], key[right]
        # every half before the last is full: a pair's half starts at pair x width
        p_left, p_right = pair[~right], pair[right]
        below = np.searchsorted(left_keys, right_keys) - p_right * width
        counts[ident[right]] += below  # each pair appears once per level
        # merge the two halves: a slot moves to its pair's start + its rank in its own
        # half + the elements of the other half below it
        above = np.searchsorted(right_keys, left_keys) - p_left * width
        offset = pos - block * width
        new = np.empty(n, dtype=np.int64)
        new[right] = p_right * 2 * width + offset[right] + below
        new[~right] = p_left * 2 * width + offset[~right] + above
        merged_values = np.empty_like(values)
        merged_ident = np.empty_like(ident)
        merged_values[new] = values
        merged_ident[new] = ident
        values, ident = merged_values, merged_ident
        width *= 2
    return counts


def stack_distances(blocks: IntArray) -> IntArray:
    """LRU stack distance of every reference (0 for a first reference: a miss at any
    capacity).
    """
    prev = previous_reference(blocks)
    reuse = np.flatnonzero(prev >= 0)
    dist = np.zeros(blocks.size, dtype=np.int64)
    if reuse.size:
        p = prev[reuse]
        nested = _nested_counts(p, reuse.astype(np.int64))
        dist[reuse] = (reuse - p - 1) - nested + 1
    return dist


def hit_counts(distances: IntArray, capacities: list[int]) -> list[int]:
    """Hits of an LRU cache of each capacity (blocks): references with a stack distance
    in 1..capacity.
    """
    reused = np.sort(distances[distances > 0])
    return [int(np.searchsorted(reused, c, side="right")) for c in capacities]


def _references(requests: pl.LazyFrame, blocks: pl.LazyFrame) -> pl.DataFrame:
    """The reference sequence of every trace: the blocks of the requests in scope, in
    arrival order, with each block's tokens.
    """
    key = [*TRACE, "request_id"]
    order = requests.select(*key, "arrival_time")
    return (
        blocks.select(*key, "position", "block_hash", "block_tokens")
        .join(order, on=key)
        .sort([*TRACE, "arrival_time", "request_id", "position"])
        .select(*TRACE, "block_hash", "block_tokens")
        .collect()
    )


def auto_capacities(unique: int, count: int = 12) -> list[int]:
    """``count`` capacities from 1 block to the trace's distinct blocks, evenly spaced on
    a log scale (distinct, rounded).
    """
    if unique <= 0:
        return []
    out = sorted({max(1, round(unique ** (i / (count - 1)))) for i in range(count)})
    return out


def prefix_cache(
    requests: pl.LazyFrame,
    blocks: pl.LazyFrame,
    capacities: tuple[int, ...] = (),
    kv_bytes_per_token: float | None = None,
) -> pl.DataFrame:
    """Per trace and LRU capacity (blocks; bytes for a KV size per token): hits and the
    hit rate over all block references, beside the unlimited-cache reusable share.
    """
    refs = _references(requests, blocks)
    rows: list[dict[str, Any]] = []
    for (source, dataset), part in refs.group_by(list(TRACE), maintain_order=True):
        hashes = part["block_hash"].to_numpy().astype(np.int64)
        dist = stack_distances(hashes)
        unique = int(np.unique(hashes).size)
        caps = list(capacities) or auto_capacities(unique)
        block_tokens = int(part["block_tokens"].cast(pl.Int64).max() or 0)  # type: ignore[arg-type]
        reusable = int((dist > 0).sum())
        for cap, hits in zip(caps, hit_counts(dist, caps), strict=True):
            rows.append(
                {
                    "source": source,
                    "dataset": dataset,
                    "capacity_blocks": cap,
                    "capacity_bytes": (
                        cap * block_tokens * kv_bytes_per_token
                        if kv_bytes_per_token is not None
                        else None
                    ),
                    "block_refs": int(hashes.size),
                    "unique_blocks": unique,
                    "hits": hits,
                    "hit_rate": hits / hashes.size,
                    "unlimited_hit_rate": reusable / hashes.size,
                    "caveat": (
                        "capacity holds every distinct block: the unlimited-cache rate"
                        if cap >= unique
                        else None
                    ),
                }
            )
    schema = {
        "source": pl.String,
        "dataset": pl.String,
        "capacity_blocks": pl.Int64,
        "capacity_bytes": pl.Float64,
        "block_refs": pl.Int64,
        "unique_blocks": pl.Int64,
        "hits": pl.Int64,
        "hit_rate": pl.Float64,
        "unlimited_hit_rate": pl.Float64,
        "caveat": pl.String,
    }
    return pl.DataFrame(rows, schema=schema).sort([*TRACE, "capacity_blocks"])


def prefix_reuse(requests: pl.LazyFrame, blocks: pl.LazyFrame) -> pl.LazyFrame:
    """Per trace: requests, those with blocks, block references, distinct blocks, the
    share of references (and of their tokens) an unlimited cache could reuse, and the
    share of requests whose first block was seen before (a shared prefix).
    """
    key = [*TRACE, "request_id"]
    refs = (
        blocks.select(*key, "position", "block_hash", "block_tokens")
        .join(requests.select(*key, "arrival_time", "input_tokens"), on=key)
        .sort([*TRACE, "arrival_time", "request_id", "position"])
        .with_columns(
            (pl.int_range(pl.len()).over([*TRACE, "block_hash"]) > 0).alias("seen"),
            # the last block of a prompt holds what is left of it
            pl.min_horizontal(
                pl.col("block_tokens"),
                pl.col("input_tokens") - pl.col("position") * pl.col("block_tokens"),
            )
            .clip(lower_bound=0)
            .fill_null(pl.col("block_tokens"))
            .alias("block_tokens"),
        )
    )
    per_trace = refs.group_by(list(TRACE)).agg(
        pl.len().alias("block_refs"),
        pl.col("block_hash").n_unique().alias("unique_blocks"),
        pl.col("seen").mean().alias("reusable_share"),
        (pl.col("block_tokens").filter(pl.col("seen")).sum() / pl.col("block_tokens").sum()).alias(
            "reusable_token_share"
        ),
        pl.col("seen").filter(pl.col("position") == 0).mean().alias("shared_first_block_share"),
    )
    counts = requests.group_by(list(TRACE)).agg(
        pl.len().alias("requests"),
        pl.col("prefix_blocks").is_not_null().sum().alias("requests_with_blocks"),
    )
    return (
        counts.join(per_trace, on=list(TRACE))
        .select(
            *TRACE,
            "requests",
            "requests_with_blocks",
            "block_refs",
            "unique_blocks",
            "reusable_share",
            "reusable_token_share",
            "shared_first_block_share",
        )
        .sort(list(TRACE))
    )


def _capacities(text: str) -> tuple[int, ...]:
    if text.strip() == "auto":
        return ()
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        value = int(part)
        if value <= 0:
            msg = f"capacity {value}: give a positive number of blocks"
            raise ValueError(msg)
        out.append(value)
    return tuple(sorted(set(out)))


def _kv(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or value <= 0:
        msg = f"{text}: give the KV cache bytes per token, a positive number"
        raise ValueError(msg)
    return value


@dataclass(frozen=True)
class PrefixCacheOptions:
    """`gpu-trace analyze prefix-cache` options."""

    capacities: tuple[int, ...] = option(
        "auto",
        "LRU capacities in blocks, a comma list; auto: 12 from 1 to the trace's distinct "
        "blocks, log-spaced.",
        parse=_capacities,
        metavar="BLOCKS",
        repeat=True,
    )
    kv_bytes_per_token: float | None = option(
        None,
        "KV cache bytes per token of the model (2 x layers x KV heads x head dim x dtype "
        "bytes; e.g. 131072 for Llama-2-7B in fp16): adds capacity_bytes.",
        parse=_kv,
        metavar="BYTES",
    )


def _cache(inputs: Any, options: PrefixCacheOptions) -> pl.DataFrame:
    return prefix_cache(
        inputs.requests, inputs.request_blocks, options.capacities, options.kv_bytes_per_token
    )


def _reuse(inputs: Any, options: Any) -> pl.LazyFrame:
    return prefix_reuse(inputs.requests, inputs.request_blocks)


_GLOSSARY = {
    **COMMON_GLOSSARY,
    "block_refs": ("block references", "Prefix blocks of all requests (one per request x block)."),
    "unique_blocks": ("distinct blocks", "Distinct block hashes of the trace."),
}

PLUGINS = (
    AnalysisPlugin(
        name="prefix-reuse",
        title="Prefix reuse",
        help="Share of prefix-cache blocks a serving trace could reuse with an unlimited "
        "cache (a block seen before), per trace with block hashes (Mooncake).",
        run=_reuse,
        needs=("requests", "request_blocks"),
        needs_jobs=False,
        rank=250,
        units={
            "requests_with_blocks": "count",
            "block_refs": "count",
            "unique_blocks": "count",
            "reusable_share": "fraction",
            "reusable_token_share": "fraction",
            "shared_first_block_share": "fraction",
        },
        glossary={
            **_GLOSSARY,
            "requests_with_blocks": ("with blocks", "Requests that list prefix blocks."),
            "reusable_share": (
                "reusable (unlimited cache)",
                "Share of block references whose block was referenced before.",
            ),
            "reusable_token_share": (
                "reusable tokens",
                "Share of block tokens in reusable blocks.",
            ),
            "shared_first_block_share": (
                "shared first block",
                "Share of requests whose first block was seen before.",
            ),
        },
    ),
    AnalysisPlugin(
        name="prefix-cache",
        title="Prefix cache hit rate (LRU)",
        help="Hit rate of an LRU prefix cache by capacity (blocks, and bytes for a KV size "
        "per token), from LRU stack distances, per trace with block hashes (Mooncake).",
        run=_cache,
        options=PrefixCacheOptions,
        needs=("requests", "request_blocks"),
        needs_jobs=False,
        rank=251,
        units={
            "capacity_blocks": "count",
            "capacity_bytes": "bytes",
            "block_refs": "count",
            "unique_blocks": "count",
            "hits": "count",
            "hit_rate": "fraction",
            "unlimited_hit_rate": "fraction",
        },
        glossary={
            **_GLOSSARY,
            "capacity_blocks": ("capacity (blocks)", "LRU cache size in blocks."),
            "capacity_bytes": (
                "capacity (bytes)",
                "Blocks x tokens per block x --kv-bytes-per-token.",
            ),
            "hits": ("hits", "Block references the LRU cache of this size hits."),
            "hit_rate": ("hit rate", "Hits / block references."),
            "unlimited_hit_rate": (
                "unlimited hit rate",
                "The hit rate of an infinite cache (references to blocks seen before).",
            ),
        },
    ),
)
