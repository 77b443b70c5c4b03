"""Value grammars of ``sacct`` output, as polars expressions (no Python row loops).

Each function takes the field's text (null when the column is absent or the field is
one of sacct's "no value" words) and returns the typed value plus, where the text can
be malformed, a boolean expression that is true when it is. The loader turns the
latter into quarantine reasons. Grammars follow the sacct and sbatch manuals:

- durations (``Elapsed``, ``Timelimit``, ``TotalCPU``): ``[days-]hours:minutes:seconds[.fraction]``
  and ``minutes:seconds[.fraction]``, the forms sacct prints (the sbatch-only input
  forms ``minutes``, ``days-hours`` are not output and are rejected);
  ``UNLIMITED``, ``Partition_Limit``, ``INVALID`` and ``Unknown`` mean no limit known;
- TRES lists (``ReqTRES``, ``AllocTRES``): ``key=value`` pairs joined by commas,
  ``gres/gpu=4`` (the count) beside typed ``gres/gpu:a100=4`` entries, ``mem=64G``;
- memory: a number with an optional binary unit ``K M G T P`` (Slurm's unit is MiB
  when none is given), ``ReqMem`` with a trailing ``n`` (per node) or ``c`` (per CPU);
- ``ExitCode``: ``status:signal``;
- ``State``: an upper-case word, ``CANCELLED by <uid>`` for a cancelled job.
"""

from __future__ import annotations

import re

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
    "OUT_OF_MEMORY": "oom",
    "SPECIAL_EXIT": "failed",
    "CANCELLED": "cancelled",
    "PREEMPTED": "preempted",
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

- ``OUT_OF_MEMORY`` (the job passed its memory limit) is ``oom``, ``PREEMPTED`` (stopped by
  the scheduler for other work) ``preempted``: operators act on them differently from a
  plain failure or a user's cancellation;
- ``SPECIAL_EXIT`` ended by the job's own doing: ``failed``;
- ``REVOKED`` (a federated sibling started elsewhere) was withdrawn by the scheduler:
  ``cancelled``;
- ``DEADLINE`` is a limit reached (``--deadline``): ``timeout``;
- ``BOOT_FAIL`` is a node that could not be booted for the job: ``node_fail``;
- ``SUSPENDED``, ``STOPPED`` and the transitional states still hold their nodes:
  ``running``; ``REQUEUED`` (and the requeue holds) are back in the queue: ``pending``.

Any other word is ``unknown``; ``raw_status`` keeps the text as written."""

DURATION = r"^(?:\d+-\d+:\d+:\d+|\d+:\d+:\d+|\d+:\d+)(?:\.\d+)?$"
"""What sacct prints for a duration: ``[days-]hours:minutes:seconds[.fraction]`` or
``minutes:seconds[.fraction]``."""


def _part(parts: pl.Expr, index: int) -> pl.Expr:
    return parts.list.get(index, null_on_oob=True).cast(pl.Float64, strict=False)


Staged = tuple[list[pl.Expr], dict[str, pl.Expr]]
"""(first-stage columns to add, second-stage expressions over them). Polars does not
share a sub-expression used in several places of one ``with_columns`` reliably, and a
split or a regex capture repeated four times costs four times; naming the shared parts
in a first stage makes each run once."""


def duration_s(text: pl.Expr, name: str) -> Staged:
    """Seconds of a sacct duration (``value``) and whether the text is malformed
    (``bad``); ``name`` prefixes the first-stage columns.

    ``1-02:03:04`` is 93,784 s; ``02:03:04`` 7,384 s; ``12:34`` 12 min 34 s;
    ``00:01.500`` 1.5 s. Minutes and seconds must be below 60 (sacct never prints more,
    so a larger one means a damaged field). The fields are counted from the right after
    turning the day dash into a colon: a shape check and a split, no regex captures,
    which cost microseconds a row.
    """
    shaped = text.str.contains(DURATION)
    parts = pl.when(shaped).then(text).str.replace("-", ":", literal=True).str.split(":")
    first = [
        text.alias(f"{name}_text"),
        shaped.alias(f"{name}_shaped"),
        parts.alias(f"{name}_parts"),
    ]
    p, text_col = pl.col(f"{name}_parts"), pl.col(f"{name}_text")
    seconds, minutes = _part(p, -1), _part(p, -2)
    hours, days = _part(p, -3).fill_null(0.0), _part(p, -4).fill_null(0.0)
    value = days * 86400.0 + hours * 3600.0 + minutes * 60.0 + seconds
    bad = text_col.is_not_null() & (
        ~pl.col(f"{name}_shaped") | (minutes >= 60) | (seconds >= 60)
    ).fill_null(True)
    return first, {"value": pl.when(bad).then(None).otherwise(value), "bad": bad}


def seconds(delta: pl.Expr) -> pl.Expr:
    """A polars duration as float seconds (microsecond exact)."""
    return delta.dt.total_microseconds().cast(pl.Float64) / 1e6


def limit_s(text: pl.Expr, name: str) -> Staged:
    """``Timelimit`` in seconds (null for :data:`NO_LIMIT`) and whether it is malformed."""
    finite = pl.when(text.is_in(list(NO_LIMIT))).then(None).otherwise(text)
    return duration_s(finite, name)


_UNIT_POWER = {"": 2, "K": 1, "M": 2, "G": 3, "T": 4, "P": 5}
"""Binary power of 1024 per unit letter; no letter is MiB, Slurm's memory unit."""
MEM_VALUE = r"^\d+(?:\.\d+)?[KMGTP]?$"
"""A memory amount: a number and an optional binary unit letter."""


MEM_MAX = 2.0**62
"""Largest memory amount read (4 EiB): beyond it the byte count would not fit the
canonical int64, so the value is rejected as damaged, not wrapped around."""


def mem_bytes(amount: pl.Expr, bare_power: int = 2) -> tuple[pl.Expr, pl.Expr]:
    """Bytes of a memory amount (``64G`` -> 64 GiB; ``4000`` -> 4000 MiB) as a float,
    rounded to a whole byte (sacct prints fractions such as ``187.50G``), and whether
    it is malformed or out of range. Callers cast to int64 after their own scaling.
    ``bare_power``: the power of 1024 of a number without a unit letter (2, MiB, for
    requests; 0, bytes, for :func:`rss_bytes`).
    """
    shaped = amount.str.contains(MEM_VALUE)
    ok = pl.when(shaped).then(amount)
    unit = pl.when(ok.str.contains("[KMGTP]$")).then(ok.str.slice(-1)).otherwise(pl.lit(""))
    number = ok.str.strip_chars_end("KMGTP").cast(pl.Float64, strict=False)
    powers = _UNIT_POWER | {"": bare_power}
    power = unit.replace_strict(powers, default=None, return_dtype=pl.Int64)
    value = (number * pl.lit(1024.0).pow(power)).round(0)
    bad = amount.is_not_null() & (~shaped.fill_null(False) | (value >= MEM_MAX).fill_null(False))
    return pl.when(~bad).then(value), bad


def rss_bytes(text: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """``MaxRSS`` in bytes (int64) and whether it is malformed.

    sacct keeps the value in bytes and prints it through ``convert_num_unit`` with
    ``UNIT_NONE`` (src/sacct/print.c, ``PRINT_MAXRSS``): scaled down by 1024 with a
    ``K M G T P`` letter (``10452K``, ``5.02G``), ``0`` for zero, and a bare number of
    bytes under ``--noconvert`` (no scaling, no letter). So a bare number is bytes here,
    not MiB as in ``ReqMem``.
    """
    value, bad = mem_bytes(text, bare_power=0)
    return to_int_bytes(value), bad


def to_int_bytes(value: pl.Expr) -> pl.Expr:
    """A float byte count below :data:`MEM_MAX` as int64 (null otherwise)."""
    return pl.when(value < MEM_MAX).then(value).cast(pl.Int64)


TRES = r"^[A-Za-z][A-Za-z0-9_/:.\-]*=[^,=]*(?:,[A-Za-z][A-Za-z0-9_/:.\-]*=[^,=]*)*$"
"""A TRES list: ``key=value`` pairs joined by commas."""
GPU_MAX = 1_000_000
"""Most GPUs one TRES list may name; more means a damaged count (sums must not wrap)."""
_GPU_COUNT = r"(?:^|,)gres/gpu=([^,]*)"
_GPU_TYPED = r"(?:^|,)gres/gpu:[^=,]+=[^,]*"
_MEM = r"(?:^|,)mem=([^,]*)"
_CPU = r"(?:^|,)cpu=([^,]*)"
CPU_MAX = 2**31 - 1
"""Most CPUs one TRES list may name (the canonical ``cpus`` is read as a 32-bit count)."""


def tres(text: pl.Expr, name: str) -> Staged:
    """The GPUs, GPU models and memory in one TRES list; ``name`` prefixes the
    first-stage columns.

    Second-stage expressions: ``gpus`` (the ``gres/gpu=`` count, else the sum of the
    typed ``gres/gpu:<model>=`` counts, else 0 when the list names no GPU; null when
    the list is null), ``gpu_type`` (the models, sorted, joined with ``|``),
    ``mem_bytes``, ``cpus`` (``cpu=``) and ``bad`` (why the list is unreadable, or null).
    Slurm lists a typed GPU request twice, ``gres/gpu:a100=2,gres/gpu=2`` (the typed TRES
    and the generic one; sacct man page, ``AllocTRES``), so the untyped count is the
    request when present, never the sum of both. A negative count, or one that does not
    fit int64, is a damaged field (``bad``), never stored. Capture-group work
    runs only on the rows that need it: the input is nulled elsewhere
    (``pl.when(...).then(text)``), so a CPU job pays for no GPU parsing and only
    multi-model lists are listed out.
    """
    gpu_text = pl.when(text.str.contains("gres/gpu", literal=True)).then(text)
    c = {
        k: f"{name}_{k}"
        for k in ("text", "ok", "untyped", "n", "model", "count", "many", "mem", "cpu")
    }
    first = [
        text.alias(c["text"]),
        text.str.contains(TRES).alias(c["ok"]),
        gpu_text.str.extract(_GPU_COUNT, 1).alias(c["untyped"]),
        text.str.extract(_MEM, 1).alias(c["mem"]),
        text.str.extract(_CPU, 1).alias(c["cpu"]),
    ]
    n_expr = gpu_text.str.count_matches("gres/gpu:", literal=True).fill_null(0)
    one = pl.when(n_expr == 1).then(text)
    first += [
        n_expr.alias(c["n"]),
        one.str.extract(r"gres/gpu:([^=,]+)=", 1).alias(c["model"]),
        one.str.extract(r"gres/gpu:[^=,]+=([^,]*)", 1)
        .cast(pl.Int64, strict=False)
        .alias(c["count"]),
        pl.when(n_expr > 1).then(text).str.extract_all(_GPU_TYPED).alias(c["many"]),
    ]
    n_typed = pl.col(c["n"])
    many = pl.col(c["many"])
    # each count clipped before the sum, so that huge counts cannot wrap int64 around
    many_counts = many.list.eval(
        pl.element()
        .str.extract(r"=([^,]*)$", 1)
        .cast(pl.Int64, strict=False)
        .clip(upper_bound=GPU_MAX + 1)
    )
    many_bad = many.list.eval(~pl.element().str.contains(r"=\d+$")).list.any()
    many_models = (
        many.list.eval(pl.element().str.extract(r"gres/gpu:([^=]+)=", 1))
        .list.unique()
        .list.sort()
        .list.join("|")
    )
    one_count = pl.col(c["count"])
    typed_sum = pl.when(n_typed == 1).then(one_count).otherwise(many_counts.list.sum())
    typed_bad = (
        pl.when(n_typed == 1).then(one_count.is_null() | (one_count < 0)).otherwise(many_bad)
    )
    untyped_text = pl.col(c["untyped"])
    untyped = untyped_text.cast(pl.Int64, strict=False)
    mem, mem_bad = mem_bytes(pl.col(c["mem"]))
    cpu_text = pl.col(c["cpu"])
    cpu = cpu_text.cast(pl.Int64, strict=False)
    cpu_bad = cpu_text.is_not_null() & (cpu.is_null() | (cpu < 0) | (cpu > CPU_MAX))
    t = pl.col(c["text"])
    gpus = (
        pl.when(t.is_null())
        .then(None)
        .when(untyped_text.is_not_null())
        .then(untyped)
        .when(n_typed > 0)
        .then(typed_sum)
        .otherwise(0)
    )
    bad = (
        pl.when(t.is_null())
        .then(None)
        .when(~pl.col(c["ok"]))
        .then(pl.lit("is not a TRES list (key=value,...)"))
        .when(untyped_text.is_not_null() & (untyped.is_null() | (untyped < 0)))
        .then(pl.lit("has a gres/gpu count that is not a whole number"))
        .when(typed_bad.fill_null(False) & (n_typed > 0))
        .then(pl.lit("has a gres/gpu:<model> count that is not a whole number"))
        .when(cpu_bad)
        .then(pl.lit(f"has a cpu= count that is not a whole number from 0 to {CPU_MAX}"))
        .when(mem_bad)
        .then(
            pl.lit("has a mem= value that is not a memory amount (number, K/M/G/T/P unit, < 4 EiB)")
        )
    )
    models = pl.when(n_typed == 1).then(pl.col(c["model"])).otherwise(many_models)
    why = pl.coalesce(
        bad,
        pl.when(gpus > GPU_MAX).then(pl.lit(f"names more than {GPU_MAX} GPUs")),
    )
    return first, {
        "gpus": pl.when(why.is_null()).then(gpus),
        "gpu_type": pl.when(models == "").then(None).otherwise(models),
        "mem_bytes": to_int_bytes(mem),
        "cpus": pl.when(~cpu_bad).then(cpu),
        "bad": why,
    }


_GRES_GPU = r"(?:^|,)gpu(?::[^:,()]+)?(?::[^:,()]+)?(?:\([^)]*\))?(?:,|$)"
"""One GPU entry of an old-style GRES list whose commas are doubled: ``gpu``, ``gpu:4``,
``gpu:a100:8``, ``gpu:tesla:2(IDX:0-1)`` (the index list in parentheses may hold commas),
ending at a comma or the end, so ``gpumem:16G`` or ``gpu_mem:100`` is no GPU entry (the
regex engine has no look-ahead; doubling the commas lets one entry's closing comma and
the next one's opening comma both match)."""


def gres(text: pl.Expr, name: str) -> Staged:
    """GPUs and GPU models of an old-style GRES field (``ReqGRES``, ``AllocGRES``: what
    sacct printed before TRES, and still prints on request), like :func:`tres`.

    Entries are comma-separated ``name[:type][:count][(IDX:...)]`` (Slurm gres.conf and
    sbatch ``--gres``: ``gpu:4`` is 4 GPUs of any type, ``gpu:a100:8`` 8 A100s, a bare
    ``gpu`` one GPU); entries other than ``gpu`` (``mps``, ``shard``) are not GPUs. Outputs
    ``gpus`` (0 when the list names no GPU), ``gpu_type`` and ``bad``.
    """
    entries = f"{name}_entries"
    first = [
        text.alias(f"{name}_text"),
        pl.when(text.str.contains("gpu", literal=True))
        .then(text.str.replace_all(",", ",,", literal=True))
        .str.extract_all(_GRES_GPU)
        .alias(entries),
    ]
    parts = pl.element().str.strip_chars(",").str.replace(r"\(.*$", "").str.split(":")
    a = parts.list.get(1, null_on_oob=True)
    b = parts.list.get(2, null_on_oob=True)
    a_is_count = a.str.contains(r"^-?\d+$").fill_null(False)
    count_text = pl.when(b.is_not_null()).then(b).when(a_is_count).then(a).otherwise(pl.lit("1"))
    model = pl.when(b.is_not_null() | ~a_is_count).then(a)
    e = pl.col(entries)
    counts = e.list.eval(count_text.cast(pl.Int64, strict=False).clip(upper_bound=GPU_MAX + 1))
    bad_count = e.list.eval(
        count_text.cast(pl.Int64, strict=False).is_null() | (count_text.str.starts_with("-"))
    ).list.any()
    models = e.list.eval(model).list.drop_nulls().list.unique().list.sort().list.join("|")
    t = pl.col(f"{name}_text")
    total = pl.when(t.is_null()).then(None).otherwise(counts.list.sum().fill_null(0))
    bad = (
        pl.when(t.is_null())
        .then(None)
        .when(bad_count.fill_null(False))
        .then(pl.lit("has a gpu count that is not a whole number"))
        .when(total > GPU_MAX)
        .then(pl.lit(f"names more than {GPU_MAX} GPUs"))
    )
    return first, {
        "gpus": pl.when(bad.is_null()).then(total),
        "gpu_type": pl.when(models == "").then(None).otherwise(models),
        "bad": bad,
    }


def req_mem(text: pl.Expr, nodes: pl.Expr, cpus: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """Total bytes requested by ``ReqMem`` and whether it is malformed: ``4000Mn`` is
    4000 MiB per node (times ``NNodes``), ``4000Mc`` per CPU (times ``NCPUS``), a value
    without ``n``/``c`` is the job's total. Null when a per-node/per-CPU value has no
    count to multiply.
    """
    per = pl.when(text.str.contains("[nc]$")).then(text.str.slice(-1))
    base, bad = mem_bytes(
        pl.when(per.is_not_null()).then(text.str.slice(0, text.str.len_chars() - 1)).otherwise(text)
    )
    scaled = (
        pl.when(per == "n")
        .then(base * nodes.cast(pl.Float64))
        .when(per == "c")
        .then(base * cpus.cast(pl.Float64))
        .otherwise(base)
    )
    bad = bad | (scaled >= MEM_MAX).fill_null(False)
    total = to_int_bytes(scaled)
    return total, bad


def exit_code(text: pl.Expr) -> tuple[pl.Expr, pl.Expr, pl.Expr]:
    """``ExitCode`` ``status:signal`` -> (status, signal, malformed)."""
    pair = text.str.split_exact(":", 1)
    status = pair.struct.field("field_0").cast(pl.UInt8, strict=False).cast(pl.Int64)
    signal = pair.struct.field("field_1").cast(pl.UInt8, strict=False).cast(pl.Int64)
    bad = text.is_not_null() & (
        status.is_null() | signal.is_null() | text.str.count_matches(":", literal=True).ne(1)
    )
    return status, signal, bad


STATE_WORD = r"^[A-Z_]+(?: by \d+)?$"
"""A state as sacct prints it: ``COMPLETED``, ``CANCELLED by 1234``."""


def status(state: pl.Expr) -> pl.Expr:
    """Canonical status of a ``State`` text (``unknown`` for a word Slurm may add)."""
    word = state.str.split_exact(" ", 1).struct.field("field_0")
    return word.replace_strict(STATUS, default="unknown", return_dtype=pl.String)


def cancelled_by(state: pl.Expr) -> pl.Expr:
    """The uid in ``CANCELLED by <uid>`` (sacct man page, JOB STATE CODES: "CANCELLED ...
    Job was explicitly cancelled by the user or system administrator"; the uid is who),
    as text: ``0`` is root, an administrator. Null for every other state.
    """
    # a prefix test and a slice, not a regex: this runs on every line (the State
    # grammar, STATE_WORD, has already made sure a digit run follows)
    return pl.when(state.str.starts_with("CANCELLED by ")).then(state.str.slice(13))


ALLOC_ID = r"\d+(?:_(?:\d+|\[[0-9,:%\-]+\]))?(?:\+\d+)?"
"""A job allocation's id: ``123``, ``123_7`` (array task), ``123_[1-9%2]`` or
``123_[1-21:4]`` (pending array tasks: Slurm's array-task formatter prints ranges with a
step after ``:`` and the throttle after ``%``), ``123+1`` (component of a heterogeneous
job)."""
STEP_ID = rf"^({ALLOC_ID})\.([A-Za-z]+|\d+)(?:\+\d+)?$"
"""A step's id: the allocation, a dot, ``batch`` / ``extern`` / ``interactive`` or the step
number (``123.0``), optionally a heterogeneous component (``123.0+1``)."""

MAX_ARRAY_TASKS = 100_000
"""Most tasks one pending array range (``123_[1-99999]``) is expanded into. Slurm's own
``MaxArraySize`` may be set as high as 4,000,001, but a range of more than this many
pending tasks in one export line is far more likely a damaged field than a real queue;
such a line is quarantined with this reason instead of making millions of rows."""

_RANGE_PART = re.compile(r"^(\d{1,9})(?:-(\d{1,9})(?::(\d{1,9}))?)?$")


def array_tasks(body: str, cap: int | None = None) -> tuple[list[int], str | None]:
    """The task ids of the text between the brackets of a pending array id, or a reason.

    Grammar (Slurm job_array.html and sbatch ``--array``): comma-separated items, each
    ``N``, ``N-M`` or ``N-M:S`` (every S-th from N to M), then optionally ``%T``: the most
    tasks that may run at once, a throttle, not a task. ``1,3,5-7`` is 1, 3, 5, 6, 7;
    ``1-21:4`` is 1, 5, 9, 13, 17, 21. Runs in Python, over the few lines that hold a
    range (never over the whole export).
    """
    cap = MAX_ARRAY_TASKS if cap is None else cap
    items = body.split("%", 1)[0]
    if "%" in body and not body.split("%", 1)[1].isdigit():
        return [], "has a throttle after % that is not a number"
    out: list[int] = []
    for item in items.split(","):
        m = _RANGE_PART.match(item)
        if m is None:
            return [], f"has an item {item!r} that is not N, N-M or N-M:S"
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        step = int(m.group(3)) if m.group(3) is not None else 1
        if hi < lo or step < 1:
            return [], f"has a range {item!r} that runs backwards or has step 0"
        if len(out) + (hi - lo) // step + 1 > cap:
            return [], f"names more than {cap} array tasks"
        out.extend(range(lo, hi + 1, step))
    return out, None
