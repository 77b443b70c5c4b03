"""Value grammars of ``sacct`` output, as polars expressions (no Python row loops).

Each function takes the field's text (null when the column is absent or the field is
one of sacct's "no value" words) and returns the typed value plus, where the text can
be malformed, a boolean expression that is true when it is. The loader turns the
latter into quarantine reasons. Grammars follow the sacct and sbatch manuals:

- durations (``Elapsed``, ``Timelimit``): ``[days-]hours:minutes:seconds[.fraction]``
  as sacct prints them, plus the shorter forms Slurm itself reads and prints
  (``MM:SS``, ``MM:SS.mmm``, ``minutes``, ``days-hours``, ``days-hours:minutes``);
  ``UNLIMITED``, ``Partition_Limit``, ``INVALID`` and ``Unknown`` mean no limit known;
- TRES lists (``ReqTRES``, ``AllocTRES``): ``key=value`` pairs joined by commas,
  ``gres/gpu=4`` (the count) beside typed ``gres/gpu:a100=4`` entries, ``mem=64G``;
- memory: a number with an optional binary unit ``K M G T P`` (Slurm's unit is MiB
  when none is given), ``ReqMem`` with a trailing ``n`` (per node) or ``c`` (per CPU);
- ``ExitCode``: ``status:signal``;
- ``State``: an upper-case word, ``CANCELLED by <uid>`` for a cancelled job.
"""

from __future__ import annotations

import polars as pl

NO_VALUE = ("", "Unknown", "None", "None assigned", "(null)", "N/A")
"""Words sacct prints where a field has no value (``Unknown`` start of a pending job,
``None`` eligible time, ``None assigned`` node list)."""
NO_LIMIT = ("UNLIMITED", "Partition_Limit", "INVALID")
"""``Timelimit`` values that name no number of seconds (the partition's limit applies,
or none does); stored as a null ``time_limit_s``."""

STATUS = {
    "COMPLETED": "completed",
    "FAILED": "failed",
    "OUT_OF_MEMORY": "failed",
    "SPECIAL_EXIT": "failed",
    "CANCELLED": "cancelled",
    "PREEMPTED": "cancelled",
    "REVOKED": "cancelled",
    "TIMEOUT": "timeout",
    "DEADLINE": "timeout",
    "NODE_FAIL": "node_fail",
    "BOOT_FAIL": "node_fail",
    "RUNNING": "running",
    "COMPLETING": "running",
    "CONFIGURING": "running",
    "SUSPENDED": "running",
    "STOPPED": "running",
    "RESIZING": "running",
    "SIGNALING": "running",
    "STAGE_OUT": "running",
    "PENDING": "pending",
    "REQUEUED": "pending",
    "REQUEUE_HOLD": "pending",
    "REQUEUE_FED": "pending",
}
"""Slurm job states (sacct manual, "JOB STATE CODES") -> canonical status. Why each
non-obvious one goes where it does:

- ``OUT_OF_MEMORY`` and ``SPECIAL_EXIT`` ended by the job's own doing: ``failed``;
- ``PREEMPTED`` and ``REVOKED`` were stopped by the scheduler before they finished, like a
  cancellation by someone else: ``cancelled``;
- ``DEADLINE`` is a limit reached (``--deadline``): ``timeout``;
- ``BOOT_FAIL`` is a node that could not be booted for the job: ``node_fail``;
- ``SUSPENDED``, ``STOPPED`` and the transitional states still hold their nodes:
  ``running``; ``REQUEUED`` (and the requeue holds) are back in the queue: ``pending``.

Any other word is ``unknown``; ``raw_status`` keeps the text as written."""

_DURATION = (
    r"^(?:\d+-\d+(?::\d+(?::\d+(?:\.\d+)?)?)?"  # days-hours[:minutes[:seconds[.frac]]]
    r"|\d+:\d+:\d+(?:\.\d+)?"  # hours:minutes:seconds[.frac]
    r"|\d+:\d+(?:\.\d+)?"  # minutes:seconds[.frac]
    r"|\d+)$"  # minutes
)


def duration_s(text: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """Seconds of a Slurm duration and whether the text is malformed.

    ``1-02:03:04`` is 93,784 s; ``12:34`` is 12 min 34 s; ``00:01.500`` 1.5 s; a bare
    ``90`` is 90 minutes (Slurm's reading of a number alone); ``2-12`` is 2 days 12 h.
    Components after the first must be below 60 (sacct never prints more, so a larger
    one means a damaged field)."""
    day_part = text.str.extract(r"^(\d+)-", 1)
    rest = text.str.replace(r"^\d+-", "")
    has_days = day_part.is_not_null()
    parts = rest.str.split(":")
    n = parts.list.len()
    p0 = parts.list.get(0, null_on_oob=True).cast(pl.Float64, strict=False)
    p1 = parts.list.get(1, null_on_oob=True).cast(pl.Float64, strict=False)
    p2 = parts.list.get(2, null_on_oob=True).cast(pl.Float64, strict=False)
    days = day_part.cast(pl.Float64, strict=False).fill_null(0.0)
    hours = pl.when(has_days).then(p0).when(n == 3).then(p0).otherwise(0.0)
    minutes = pl.when(has_days).then(p1.fill_null(0.0)).when(n == 3).then(p1).otherwise(p0)
    seconds = (
        pl.when(has_days)
        .then(p2.fill_null(0.0))
        .when(n == 3)
        .then(p2)
        .when(n == 2)
        .then(p1)
        .otherwise(0.0)
    )
    value = days * 86400.0 + hours * 3600.0 + minutes * 60.0 + seconds
    # components after the leading one are clock fields: below 60 each
    over = parts.list.slice(1).list.eval(pl.element().cast(pl.Float64, strict=False) >= 60).list.any()
    bad = text.is_not_null() & (~text.str.contains(_DURATION) | over.fill_null(False))
    return pl.when(bad).then(None).otherwise(value), bad


def limit_s(text: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """``Timelimit`` in seconds (null for :data:`NO_LIMIT`) and whether it is malformed."""
    finite = pl.when(text.is_in(list(NO_LIMIT))).then(None).otherwise(text)
    return duration_s(finite)


_UNIT_POWER = {"": 2, "K": 1, "M": 2, "G": 3, "T": 4, "P": 5}
"""Binary power of 1024 per unit letter; no letter is MiB, Slurm's memory unit."""


def mem_bytes(number: pl.Expr, unit: pl.Expr) -> pl.Expr:
    """Bytes of ``number`` ``unit`` (``64`` ``G`` -> 64 GiB), rounded to a whole byte
    (sacct prints fractions such as ``187.50G``)."""
    power = unit.fill_null("").replace_strict(_UNIT_POWER, default=None, return_dtype=pl.Int64)
    scale = pl.lit(1024.0).pow(power)
    return (number.cast(pl.Float64, strict=False) * scale).round(0).cast(pl.Int64)


_TRES = r"^[A-Za-z][A-Za-z0-9_/:.\-]*=[^,=]*(?:,[A-Za-z][A-Za-z0-9_/:.\-]*=[^,=]*)*$"
_GPU_COUNT = r"(?:^|,)gres/gpu=([^,]*)"
_GPU_TYPED = r"(?:^|,)gres/gpu:[^=,]+=[^,]*"
_MEM = r"(?:^|,)mem=([^,]*)"
MEM_VALUE = r"^(\d+(?:\.\d+)?)([KMGTP]?)$"
"""A memory amount: a number and an optional binary unit letter."""


def tres(text: pl.Expr) -> dict[str, pl.Expr]:
    """The GPUs, GPU models and memory in one TRES list.

    Returns expressions ``gpus`` (the ``gres/gpu=`` count, else the sum of the typed
    ``gres/gpu:<model>=`` counts, else 0 when the list names no GPU; null when the list
    is null), ``gpu_type`` (the models, sorted, joined with ``|``), ``mem_bytes`` and
    ``bad`` (why the list is unreadable, or null)."""
    untyped_text = text.str.extract(_GPU_COUNT, 1)
    untyped = untyped_text.cast(pl.Int64, strict=False)
    typed = text.str.extract_all(_GPU_TYPED)
    typed_counts = typed.list.eval(
        pl.element().str.extract(r"=([^,]*)$", 1).cast(pl.Int64, strict=False)
    )
    typed_bad = typed.list.eval(
        ~pl.element().str.contains(r"=\d+$")
        | ~pl.element().str.contains(r"^,?gres/gpu:[A-Za-z0-9_.\-:]+=")
    ).list.any()
    models = (
        typed.list.eval(pl.element().str.extract(r"gres/gpu:([^=:]+)", 1))
        .list.unique()
        .list.sort()
        .list.join("|")
    )
    mem_text = text.str.extract(_MEM, 1)
    mem_number = mem_text.str.extract(MEM_VALUE, 1)
    mem_unit = mem_text.str.extract(MEM_VALUE, 2)
    gpus = (
        pl.when(text.is_null())
        .then(None)
        .when(untyped.is_not_null())
        .then(untyped)
        .when(typed.list.len() > 0)
        .then(typed_counts.list.sum())
        .otherwise(0)
    )
    bad = (
        pl.when(text.is_null())
        .then(None)
        .when(~text.str.contains(_TRES))
        .then(pl.lit("is not a TRES list (key=value,...)"))
        .when(untyped_text.is_not_null() & (untyped.is_null() | (untyped < 0)))
        .then(pl.format("has a gres/gpu count '{}' that is not a whole number", untyped_text))
        .when(typed_bad.fill_null(False))
        .then(pl.lit("has a gres/gpu:<model> count that is not a whole number"))
        .when(mem_text.is_not_null() & mem_number.is_null())
        .then(pl.format("has mem='{}', not a number with a K/M/G/T/P unit", mem_text))
    )
    return {
        "gpus": gpus,
        "gpu_type": pl.when(models == "").then(None).otherwise(models),
        "mem_bytes": mem_bytes(mem_number, mem_unit),
        "bad": bad,
    }


_REQMEM = r"^(\d+(?:\.\d+)?)([KMGTP]?)([nc]?)$"


def req_mem(text: pl.Expr, nodes: pl.Expr, cpus: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """Total bytes requested by ``ReqMem`` and whether it is malformed: ``4000Mn`` is
    4000 MiB per node (times ``NNodes``), ``4000Mc`` per CPU (times ``NCPUS``), a value
    without ``n``/``c`` is the job's total. Null when a per-node/per-CPU value has no
    count to multiply."""
    number = text.str.extract(_REQMEM, 1)
    unit = text.str.extract(_REQMEM, 2)
    per = text.str.extract(_REQMEM, 3)
    base = mem_bytes(number, unit)
    total = pl.when(per == "n").then(base * nodes).when(per == "c").then(base * cpus).otherwise(base)
    bad = text.is_not_null() & number.is_null()
    return total, bad


_EXIT = r"^(\d+):(\d+)$"


def exit_code(text: pl.Expr) -> tuple[pl.Expr, pl.Expr, pl.Expr]:
    """``ExitCode`` ``status:signal`` -> (status, signal, malformed)."""
    status = text.str.extract(_EXIT, 1).cast(pl.Int64, strict=False)
    signal = text.str.extract(_EXIT, 2).cast(pl.Int64, strict=False)
    bad = text.is_not_null() & (
        status.is_null() | signal.is_null() | (status > 255) | (signal > 255)
    )
    return status, signal, bad


STATE_WORD = r"^([A-Z_]+)(?: by \d+)?\+?$"
"""A state as sacct prints it: ``COMPLETED``, ``CANCELLED by 1234``."""


def status(state: pl.Expr) -> pl.Expr:
    """Canonical status of a ``State`` text (``unknown`` for a word Slurm may add)."""
    word = state.str.extract(STATE_WORD, 1)
    return word.replace_strict(STATUS, default="unknown", return_dtype=pl.String)


ALLOC_ID = r"\d+(?:_(?:\d+|\[[0-9,%\-]+\]))?(?:\+\d+)?"
"""A job allocation's id: ``123``, ``123_7`` (array task), ``123_[1-9%2]`` (pending array
tasks), ``123+1`` (component of a heterogeneous job)."""
STEP_ID = rf"^({ALLOC_ID})\.([A-Za-z]+|\d+)(?:\+\d+)?$"
"""A step's id: the allocation, a dot, ``batch`` / ``extern`` / ``interactive`` or the step
number (``123.0``), optionally a heterogeneous component (``123.0+1``)."""
