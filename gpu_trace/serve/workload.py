"""The requests one serving replay replays: :class:`RequestSet`, plain numpy columns.

Why numpy columns and not a frame: the engine indexes requests by position millions of
times; a frame is read once (lazily, from the store) and turned into arrays here. Prefix
block hashes are kept in CSR form (``block_offsets`` into ``block_hashes``) so a request's
blocks are one slice, with no Python object per block.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import polars as pl

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]


@dataclass(frozen=True)
class RequestSet:
    """Requests sorted by arrival (ties in input order), as arrays of equal length.

    ``arrival_s`` is seconds since the first request's arrival (the trace's own zero is
    kept in ``origin``); tokens are counts; ``session`` is a dense integer code (-1 none);
    ``block_hashes[block_offsets[i]:block_offsets[i + 1]]`` are request i's prefix blocks
    in prompt order, each covering ``block_tokens`` tokens (the last maybe fewer); empty
    where the trace publishes no hashes. ``request_id`` is the store's id (the join key
    back to ``requests``).
    """

    request_id: I64
    arrival_s: F64
    input_tokens: I64
    output_tokens: I64
    session: I64
    block_offsets: I64
    block_hashes: I64
    block_tokens: int
    source: str
    dataset: str
    origin: str

    def __len__(self) -> int:
        """The number of requests."""
        return int(self.arrival_s.size)

    @property
    def n(self) -> int:
        """The number of requests (the name the replay kernel's ``job_table.fill`` reads)."""
        return int(self.arrival_s.size)

    def blocks(self, i: int) -> I64:
        """Request i's prefix block hashes, in prompt order."""
        return self.block_hashes[self.block_offsets[i] : self.block_offsets[i + 1]]

    @property
    def has_blocks(self) -> bool:
        """Whether the trace publishes prefix hashes (Mooncake does; Azure does not)."""
        return bool(self.block_hashes.size)


def from_frames(
    requests: pl.DataFrame,
    blocks: pl.DataFrame | None = None,
    *,
    source: str = "",
    dataset: str = "",
) -> RequestSet:
    """A :class:`RequestSet` from rows of the canonical ``requests`` table (at least
    ``request_id``, ``arrival_time``, ``input_tokens``, ``output_tokens``; ``session_id``
    used when present) and, optionally, its ``request_blocks`` rows.

    Rows with a null token count cannot be replayed: they are the caller's to quarantine
    or drop with a reason before this (a null here is a ``ValueError``).
    """
    order = requests.with_row_index("_input_order").sort(["arrival_time", "_input_order"])
    if (
        order.height
        and order.select(
            pl.any_horizontal(pl.col("input_tokens", "output_tokens").is_null().any())
        ).item()
    ):
        msg = "requests with a null input_tokens or output_tokens cannot be replayed"
        raise ValueError(msg)
    times = order.get_column("arrival_time")
    origin = "" if order.is_empty() else str(times[0])
    arrival = (
        (times - times[0]).dt.total_microseconds().to_numpy().astype(np.float64) / 1e6
        if order.height
        else np.zeros(0)
    )
    if "session_id" in order.columns:
        session = (
            order.select(
                pl.when(pl.col("session_id").is_null())
                .then(-1)
                .otherwise(pl.col("session_id").rank("dense").cast(pl.Int64) - 1)
            )
            .to_series()
            .to_numpy()
            .astype(np.int64)
        )
    else:
        session = np.full(order.height, -1, dtype=np.int64)
    ids = order.get_column("request_id").to_numpy().astype(np.int64)
    offsets = np.zeros(order.height + 1, dtype=np.int64)
    hashes = np.zeros(0, dtype=np.int64)
    block_tokens = 0
    if blocks is not None and blocks.height:
        rank = pl.DataFrame({"request_id": ids, "_rank": np.arange(ids.size)})
        joined = blocks.join(rank, on="request_id", how="inner").sort(["_rank", "position"])
        counts = np.bincount(joined.get_column("_rank").to_numpy(), minlength=ids.size)
        offsets[1:] = np.cumsum(counts)
        hashes = joined.get_column("block_hash").to_numpy().astype(np.int64)
        block_tokens = int(
            joined.get_column("block_tokens").cast(pl.Int64).to_numpy().max(initial=0)
        )
    return RequestSet(
        request_id=ids,
        arrival_s=arrival,
        input_tokens=order.get_column("input_tokens").to_numpy().astype(np.int64),
        output_tokens=order.get_column("output_tokens").to_numpy().astype(np.int64),
        session=session,
        block_offsets=offsets,
        block_hashes=hashes,
        block_tokens=block_tokens,
        source=source,
        dataset=dataset,
        origin=origin,
    )
