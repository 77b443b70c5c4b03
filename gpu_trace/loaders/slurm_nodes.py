"""Slurm host lists (``NodeList``) checked and expanded with polars, no row loops.

A host list is comma-separated groups; a group is a host name, or a prefix, a bracket
of numbers and ranges, and an optional suffix: ``gpu[01-04,07]`` is gpu01, gpu02,
gpu03, gpu04 and gpu07; ``node[1-3],gpu5`` is node1..node3 and gpu5. A range keeps the
zero padding of its first number (``[08-10]`` -> 08, 09, 10; ``[8-10]`` -> 8, 9, 10), as
Slurm's hostlist code does. Lists with more than one bracket per group (Slurm's
multi-dimensional names) are not read: the line is quarantined with that reason.
"""

from __future__ import annotations

import polars as pl

from gpu_trace.loaders.textfile import LINE

HOST = r"[A-Za-z0-9_.\-]+"
RANGE = r"\d{1,18}(?:-\d{1,18})?"
GROUP = rf"{HOST}(?:\[{RANGE}(?:,{RANGE})*\][A-Za-z0-9_.\-]*)?"
LIST = rf"^{GROUP}(?:,{GROUP})*$"
PLAIN = rf"^{HOST}$"
"""A list of one host name, no brackets or commas: nearly every line of an export. It
names itself, so the range machinery (a regex capture per group, two explodes) is kept
for the other lines."""
MAX_NODES = 100_000
"""Most nodes one host list may name: a bound that keeps a damaged ``n[0-999999999]``
from exploding into a billion rows (the largest Slurm systems have tens of thousands)."""

FILE_HOSTS_FLOOR = 1_000_000
"""Hosts every export may name in all, over its host lists together (job and step lines)."""
FILE_HOSTS_PER_LINE = 16
"""Hosts each line of an export adds to that budget. Real exports average one to a few
hosts a line; a small file of ``node[1-100000]`` lines would otherwise make millions of
placements (5 M from 5 KB). Lines past the budget, in file order, are quarantined with
the reason, so memory stays bounded by the file's own size."""


def file_budget(lines: int) -> int:
    """Hosts an export of ``lines`` lines may name over all its host lists."""
    return FILE_HOSTS_FLOOR + FILE_HOSTS_PER_LINE * lines


NODES = "_nodes"
"""Column of the node list text."""


def ranges(lines: pl.LazyFrame) -> pl.LazyFrame:
    """One row per number range of each well-formed list in ``_nodes``: ``_line``,
    ``_prefix``, ``_suffix``, ``_lo``, ``_hi``, ``_width`` (a plain host name has null
    bounds).
    """
    groups = (
        lines.select(LINE, NODES)
        .filter(pl.col(NODES).str.contains(LIST).fill_null(False))
        .with_columns(pl.col(NODES).str.extract_all(GROUP).alias("_group"))
        .explode("_group")
        .select(
            LINE,
            pl.col("_group").str.extract(r"^([^\[]+)", 1).alias("_prefix"),
            pl.col("_group").str.extract(r"\]([^\]]*)$", 1).fill_null("").alias("_suffix"),
            pl.col("_group").str.extract(r"\[([^\]]*)\]", 1).str.split(",").alias("_range"),
        )
        .explode("_range")
    )
    lo = pl.col("_range").str.extract(r"^(\d+)", 1)
    hi = pl.coalesce(pl.col("_range").str.extract(r"-(\d+)$", 1), lo)
    return groups.select(
        LINE,
        "_prefix",
        "_suffix",
        lo.cast(pl.Int64).alias("_lo"),
        hi.cast(pl.Int64).alias("_hi"),
        lo.str.len_chars().cast(pl.Int64).alias("_width"),
    )


def check(lines: pl.LazyFrame, budget: int | None = None) -> pl.LazyFrame:
    """Per line with a node list: ``_line``, ``_node_count`` (hosts it names) and
    ``_node_reason`` (null when it can be expanded). With ``budget``, a line whose hosts
    would take the running total (in line order, over the lines that can be expanded)
    past it gets a reason too (:data:`FILE_HOSTS_FLOOR`).
    """
    count = pl.when(pl.col("_lo").is_null()).then(1).otherwise(pl.col("_hi") - pl.col("_lo") + 1)
    text = pl.col(NODES)
    plain = text.str.contains(PLAIN)
    listed = (
        lines.select(LINE, NODES).filter(text.is_not_null()).with_columns(plain.alias("_plain"))
    )
    stats = (
        ranges(listed.filter(~pl.col("_plain")))
        .group_by(LINE)
        .agg(
            # clipped per range first, so that a sum of huge ranges cannot wrap around
            count.clip(upper_bound=MAX_NODES + 1).sum().alias("_node_count"),
            (pl.col("_hi") < pl.col("_lo")).any().alias("_backwards"),
        )
    )
    one = listed.filter(pl.col("_plain")).with_columns(
        pl.lit(1, dtype=pl.Int64).alias("_node_count"), pl.lit(False).alias("_backwards")
    )
    listed = pl.concat(
        [one, listed.filter(~pl.col("_plain")).join(stats, on=LINE, how="left")]
    ).sort(LINE)
    quoted = pl.lit("'") + text + pl.lit("'")
    reason: pl.Expr = (
        pl.when(pl.col("_node_count").is_null())
        .then(pl.format("NodeList {} is not a Slurm host list (e.g. gpu[01-04,07])", quoted))
        .when(pl.col("_backwards"))
        .then(pl.format("NodeList {} has a range that runs backwards", quoted))
        .when(pl.col("_node_count") > MAX_NODES)
        .then(pl.format(f"NodeList {{}} names more than {MAX_NODES} nodes", quoted))
    )
    if budget is not None:
        fine = pl.when(reason.is_null()).then(pl.col("_node_count")).otherwise(0)
        over = fine.cum_sum() > budget
        reason = pl.coalesce(
            reason,
            pl.when(over).then(
                pl.format(
                    f"NodeList {{}} ({{}} hosts) takes the file past its budget of {budget} "
                    "hosts over all host lists (a hostile or damaged export)",
                    quoted,
                    pl.col("_node_count"),
                )
            ),
        )
    return listed.select(LINE, "_node_count", reason.alias("_node_reason"))


def hosts(lines: pl.LazyFrame) -> pl.LazyFrame:
    """``_line``, ``machine_id``: every host each list in ``lines`` names, in list order
    (only call on lines :func:`check` passed).
    """
    plain = pl.col(NODES).str.contains(PLAIN)
    one = lines.filter(plain).select(LINE, pl.col(NODES).alias("machine_id"))
    r = ranges(lines.filter(~plain))
    number = pl.int_ranges(pl.col("_lo"), pl.col("_hi") + 1).alias("_n")
    many = (
        r.with_columns(number)
        .explode("_n")
        .select(
            LINE,
            pl.when(pl.col("_n").is_null())
            .then(pl.col("_prefix"))
            .otherwise(
                pl.col("_prefix")
                + pl.col("_n").cast(pl.String).str.zfill(pl.col("_width"))
                + pl.col("_suffix")
            )
            .alias("machine_id"),
        )
    )
    # in line order, each list's hosts in list order (a stable sort)
    return pl.concat([one, many]).sort(LINE, maintain_order=True)
