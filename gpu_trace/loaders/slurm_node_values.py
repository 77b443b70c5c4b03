"""Value grammars of Slurm's node inventories (``sinfo``, ``scontrol show node``), as
polars expressions over a field's text (no Python row loops).

Both tools print the same node record, so they share these readings (sources: Slurm's
``src/interfaces/gres.c`` ``_build_node_gres_str`` for GRES, ``src/common/
slurm_protocol_defs.c`` ``node_state_string`` / ``node_state_string_compact`` /
``node_state_string_complete`` for states):

- **GRES** (``sinfo %G``, ``scontrol Gres=``): comma-separated entries
  ``name[:type][:no_consume]:count[K|M|G|T|P][(S:sockets)]``: ``gpu:a100:8(S:0-1)``,
  ``gpu:8``, ``gpu:a100:4,gpu:v100:2``, ``gpu:h100:4(S:0,1),shard:h100:16``. The socket
  part may itself hold commas, so it is removed before splitting. A count that is a
  multiple of 1024 is printed with a binary suffix (``1K``). ``(null)`` is a node with
  no GRES: 0 GPUs. The GPUs are the sum of the ``gpu`` entries; their types, sorted and
  joined with ``|``, are ``gpu_type``.
- **States**: a base state and flags, printed three ways: ``scontrol`` joins the base
  and every flag with ``+`` (``IDLE+DRAIN``, ``DOWN+NOT_RESPONDING``; older releases
  ``DOWN*+DRAIN``); ``sinfo %T`` prints one word in lower case with a one-character
  flag (``drained``, ``draining``, ``down*``, ``idle~``, ``mixed-``, ``allocated+``);
  ``sinfo %t`` a compact word (``drain``, ``drng``, ``alloc``, ``mix``). A node is
  **unavailable** (``available`` false) when any word is one of :data:`UNAVAILABLE` or
  it carries one of the flags ``*`` (not responding), ``~`` (powered off), ``%``
  (powering down), ``$`` (maintenance reservation), ``^`` (reboot issued); **available**
  when its first word is one of :data:`UP` and nothing says otherwise; unknown (null)
  for ``UNKNOWN`` and for words Slurm may add later (the raw state is kept).
"""

from __future__ import annotations

import polars as pl

GPU_MAX_PER_NODE = 4096
"""Most GPUs one node may report; more is a damaged count (it also keeps capacity sums
of a capped number of nodes inside int32)."""
CPU_MAX = 1_000_000
MEM_MAX_MIB = 2**42
"""Most memory a node may report, in MiB (4 EiB): the byte count must fit int64."""

NULL_GRES = "(null)"
"""What Slurm prints for a node without GRES (a NULL string through printf)."""
GRES_ENTRY = (
    r"^(?P<name>[A-Za-z][A-Za-z0-9_\-]*)(?::(?P<type>[^:,()\s]+?))?(?::no_consume)?"
    r":(?P<count>\d+)(?P<unit>[KMGTP]?)$"
)
_UNIT = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4, "P": 1024**5}

UNAVAILABLE = (
    "DOWN",
    "DRAIN",
    "DRAINED",
    "DRAINING",
    "DRNG",
    "FAIL",
    "FAILING",
    "FAILG",
    "FUTURE",
    "FUTR",
    "POWERED_DOWN",
    "POWERED_DN",
    "POWERING_DOWN",
    "POWRING_DN",
    "POWER_DOWN",
    "POW_DN",
    "NOT_RESPONDING",
    "MAINT",
    "MAINTENANCE",
    "REBOOT",
    "BOOT",
    "REBOOT_ISSUED",
    "INVAL",
    "INVALID_REG",
    "ERROR",
)
"""Node state words (any position) that mean the node cannot run work now: down,
drained or draining (no new work: its GPUs are not offered), failed, not yet in
service (FUTURE), powered off or powering off, in maintenance, rebooting, or
registered with a configuration Slurm rejected."""
UP = (
    "IDLE",
    "ALLOCATED",
    "ALLOC",
    "MIXED",
    "MIX",
    "COMPLETING",
    "COMP",
    "RESERVED",
    "RESV",
    "PLANNED",
    "PLND",
    "BLOCKED",
    "POWERING_UP",
    "POWER_UP",
    "POW_UP",
    "RESUME",
    "CLOUD",
)
"""First words of a node that runs (or may be given) work."""
DOWN_FLAGS = "*~%$^"
"""sinfo's one-character flags that make a node unavailable (``*`` not responding,
``~`` powered off, ``%`` powering down, ``$`` maintenance, ``^`` reboot issued); ``#``
(powering up), ``!`` (will power down when idle), ``@`` (reboot requested), ``-``
(planned) and ``+`` (completing) leave it available."""
STATE = r"^[A-Za-z_]+[*~#!%$@^\-]*(?:\+[A-Za-z_]+[*~#!%$@^\-]*)*\+?$"
"""A node state as sinfo or scontrol prints it."""


def available(state: pl.Expr) -> pl.Expr:
    """Whether a node in ``state`` can run work: false, true or null (unknown)."""
    upper = state.str.to_uppercase()
    words = (
        upper.str.replace(r"\+$", "")
        .str.split("+")
        .list.eval(pl.element().str.strip_chars_end("*~#!%$@^-"))
    )
    down = words.list.eval(pl.element().is_in(UNAVAILABLE)).list.any() | upper.str.contains(
        f"[{DOWN_FLAGS}]"
    )
    return (
        pl.when(state.is_null())
        .then(None)
        .when(down)
        .then(False)
        .when(words.list.first().is_in(UP))
        .then(True)
        .otherwise(None)
        .cast(pl.Boolean)
    )


def state_ok(state: pl.Expr) -> pl.Expr:
    """Whether ``state`` has the shape of a Slurm node state."""
    return state.str.contains(STATE)


def gres_table(texts: pl.Series) -> pl.DataFrame:
    """One row per distinct GRES text: ``_gres`` (the text), ``_gpus`` (GPUs; null when
    unreadable), ``_gpu_type`` and ``_gres_bad`` (why it is unreadable, else null).

    Parsed per distinct text: an inventory repeats a handful of GRES strings.
    """
    u = pl.DataFrame({"_gres": texts.unique()}).with_row_index("_k")
    text = pl.col("_gres")
    entries = (
        u.select(
            "_k",
            pl.when(text != NULL_GRES)
            .then(text.str.replace_all(r"\([^)]*\)", "").str.split(","))
            .alias("_e"),
        )
        .explode("_e")
        .with_columns(pl.col("_e").str.extract_groups(GRES_ENTRY).alias("_m"))
        .with_columns(
            pl.col("_m").struct.field("name").alias("_name"),
            pl.col("_m").struct.field("type").alias("_type"),
            (
                pl.col("_m").struct.field("count").cast(pl.Int64, strict=False).cast(pl.Float64)
                * pl.col("_m")
                .struct.field("unit")
                .replace_strict(_UNIT, default=None, return_dtype=pl.Float64)
            ).alias("_count"),
        )
    )
    gpu = (pl.col("_name") == "gpu").fill_null(False)
    per = entries.group_by("_k").agg(
        (pl.col("_e").is_not_null() & pl.col("_name").is_null()).any().alias("_shape_bad"),
        (gpu & pl.col("_count").is_null()).any().alias("_count_bad"),
        pl.col("_count").filter(gpu).sum().alias("_gpus"),
        pl.col("_type")
        .filter(gpu & pl.col("_type").is_not_null() & (pl.col("_type") != "no_consume"))
        .unique()
        .sort()
        .str.join("|")
        .alias("_gpu_type"),
    )
    quoted = pl.lit("'") + text + pl.lit("'")
    bad = (
        pl.when(text == "")
        .then(pl.lit("GRES is empty"))
        .when(pl.col("_shape_bad"))
        .then(
            pl.format(
                "GRES {} is not a Slurm GRES list (name[:type]:count[(S:sockets)],... "
                "e.g. gpu:a100:8(S:0-1))",
                quoted,
            )
        )
        .when(pl.col("_count_bad") | (pl.col("_gpus") > GPU_MAX_PER_NODE))
        .then(pl.format(f"GRES {{}} names more than {GPU_MAX_PER_NODE} GPUs", quoted))
    )
    return (
        u.join(per, on="_k", how="left")
        .with_columns(bad.alias("_gres_bad"))
        .select(
            "_gres",
            pl.when(pl.col("_gres_bad").is_null())
            .then(pl.col("_gpus").cast(pl.Int64))
            .alias("_gpus"),
            pl.when(pl.col("_gpu_type") != "").then(pl.col("_gpu_type")).alias("_gpu_type"),
            "_gres_bad",
        )
    )


def count(text: pl.Expr, limit: int) -> tuple[pl.Expr, pl.Expr]:
    """A whole count (``64``; sinfo writes 1024 CPUs as ``1K`` and 1536 as ``1.50K``
    unless given ``--noconvert``) and whether it is malformed or above ``limit``.
    """
    shaped = text.str.contains(r"^\d+(?:\.\d+)?[KMGTP]?$")
    number = pl.when(shaped).then(text.str.strip_chars_end("KMGTP")).cast(pl.Float64, strict=False)
    unit = pl.when(shaped).then(text.str.extract(r"([KMGTP]?)$", 1))
    value = number * unit.replace_strict(_UNIT, default=None, return_dtype=pl.Float64)
    whole = value.round(0)
    bad = text.is_not_null() & (
        ~shaped.fill_null(False)
        | (whole != value).fill_null(True)
        | (value > limit).fill_null(True)
    )
    return pl.when(~bad).then(whole.cast(pl.Int64)), bad
