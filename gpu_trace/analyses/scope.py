"""What part of a store an analysis looks at: the as-of instant, a time window, clusters
and partitions, and the period of ``sreport``-style tables.

An operator's export is a snapshot of a live cluster: some jobs are still running (a
start, no end) and some still wait (no start). Analyses that ignore them answer a
different question ("what had finished") than the operator asked ("what is the cluster
doing"). The rules, in one place (docs/metrics.md, "As of, windows and periods"):

- **As of.** Each dataset has an as-of instant: the latest of its jobs' ``as_of_time``
  (the export's own time where the loader records one: Slurm Start + Elapsed of a
  running job), ``submit_time``, ``start_time`` and ``end_time``. When the export
  records its time that latest instant *is* the export time (every instant in it is
  earlier); otherwise it is the dataset's latest timestamp. ``--as-of`` overrides it
  for every dataset, and the store is then read as it stood at that instant: jobs
  submitted later are left out, a job that started later was pending, one that ended
  later was running.
- **Running jobs** (a start, no end by as-of) run until as-of: their ``end_time`` and
  ``run_s`` in :meth:`Scope.clip` stop there, so allocation, GPU-hours and per-user
  figures include them.
- **Pending jobs** (no start by as-of) have waited ``as-of - submit_time`` so far:
  ``wait_s``, with ``wait_censored`` true (the wait is a lower bound).
- **Window** ``[since, until)``: a job is in it when its life (submit, or start, to end
  or as-of) overlaps the window; its run counts only its overlap (``start_time`` /
  ``end_time`` / ``run_s`` clipped), and ``wait_in_window_s`` is the part of its wait
  inside the window. ``wait_s`` stays the whole wait (a per-job statistic, not an
  amount accumulated in the window).
- **Cluster / partition**: rows whose ``cluster`` / partition (jobs: ``vc``, which is
  the Slurm ``Partition``; machines: ``partition``) is one of those given.

Everything here is a lazy polars expression; nothing reads the clock of the machine it
runs on (the as-of instant comes from the data or the user).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from gpu_trace.errors import UsageError

PERIODS = ("day", "week", "month")
"""``--period`` values (tables: :mod:`gpu_trace.analyses.periods`)."""

PERIOD_EVERY = {"day": "1d", "week": "1w", "month": "1mo"}
"""Polars ``dt.truncate`` width per period (a week starts on Monday, as ISO 8601)."""

TIME_COLUMNS = ("as_of_time", "submit_time", "start_time", "end_time")
"""The job instants whose latest is a dataset's as-of instant (``eligible_time`` is left
out: a job held with ``--begin`` may be eligible in the future)."""

_US = pl.Datetime("us", "UTC")


def parse_instant(text: str, what: str) -> dt.datetime:
    """An instant typed on the command line: ISO 8601 date or date-time, with ``Z`` or
    an offset; without one it is UTC (the store's zone). Returned aware, in UTC.
    """
    raw = text.strip()
    try:
        value = dt.datetime.fromisoformat(raw.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        msg = (
            f"{what} {text!r} is not a date or time like 2026-03-01, 2026-03-01T14:30 "
            "or 2026-03-01T14:30:00+01:00"
        )
        raise UsageError(msg) from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return value.astimezone(dt.UTC)


def _seconds(expr: pl.Expr) -> pl.Expr:
    return expr.dt.total_microseconds().truediv(1e6)


def _lit(value: dt.datetime | None) -> pl.Expr:
    return pl.lit(value, dtype=_US)


def _sql_text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _sql_instant(value: dt.datetime) -> str:
    return f"TIMESTAMPTZ {_sql_text(value.isoformat())}"


@dataclass(frozen=True)
class Scope:
    """The part of the store an analysis covers (every field optional; the default
    ``Scope()`` covers everything, as of each dataset's own instant).

    ``as_of``, ``since``, ``until`` are aware datetimes (UTC); ``cluster`` and
    ``partition`` names (empty: all); ``period`` one of :data:`PERIODS` or None.
    """

    as_of: dt.datetime | None = None
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    cluster: tuple[str, ...] = ()
    partition: tuple[str, ...] = ()
    period: str | None = None

    def __post_init__(self) -> None:
        """Refuse an empty window and an unknown period (usage errors, exit 2)."""
        if self.since is not None and self.until is not None and self.since >= self.until:
            iso = "%Y-%m-%dT%H:%M:%SZ"
            msg = f"--since {self.since:{iso}} is not before --until {self.until:{iso}}"
            raise UsageError(msg)
        if self.period is not None and self.period not in PERIODS:
            msg = f"--period {self.period!r} is not one of {', '.join(PERIODS)}"
            raise UsageError(msg)

    @property
    def everything(self) -> bool:
        """Whether this scope leaves every row in (no as-of override, window or filter)."""
        return (
            self.as_of is None
            and self.since is None
            and self.until is None
            and not self.cluster
            and not self.partition
        )

    @property
    def windowed(self) -> bool:
        """Whether ``since`` or ``until`` is set."""
        return self.since is not None or self.until is not None

    # -- as of ------------------------------------------------------------------------

    def as_of_by_dataset(self, jobs: pl.LazyFrame) -> pl.LazyFrame:
        """``source, dataset, as_of``: each dataset's as-of instant (module docstring);
        ``self.as_of`` for every dataset when given.
        """
        names = jobs.collect_schema().names()
        if self.as_of is not None:
            return (
                jobs.select("source", "dataset")
                .unique()
                .with_columns(_lit(self.as_of).alias("as_of"))
            )
        cols = [pl.col(c).cast(_US) for c in TIME_COLUMNS if c in names]
        latest = pl.max_horizontal(cols).max() if cols else _lit(None)  # no time column: none
        return jobs.group_by("source", "dataset").agg(latest.alias("as_of"))

    def with_as_of(
        self,
        jobs: pl.LazyFrame,
        dataset: pl.LazyFrame | None = None,
        as_of_table: pl.DataFrame | None = None,
    ) -> pl.LazyFrame:
        """``jobs`` with an ``_as_of`` column: its dataset's as-of instant, found over
        ``dataset`` (default ``jobs``): all of the dataset's jobs, so that choosing a
        partition does not move the export's time. ``as_of_table`` (the result of
        :meth:`as_of_by_dataset`, computed once) saves scanning the jobs again.
        """
        if as_of_table is not None:
            basis = as_of_table.lazy()
        else:
            basis = self.as_of_by_dataset(jobs if dataset is None else dataset)
        return jobs.join(basis, on=["source", "dataset"], how="left").rename({"as_of": "_as_of"})

    # -- filters ----------------------------------------------------------------------

    def where(self, frame: pl.LazyFrame, partition_column: str | None = None) -> pl.LazyFrame:
        """``frame`` restricted to the clusters and partitions asked for (a table with no
        such column is left as it is; ``partition_column`` defaults to ``partition``, or
        ``vc`` for a jobs-like table).
        """
        names = frame.collect_schema().names()
        if self.cluster and "cluster" in names:
            frame = frame.filter(pl.col("cluster").is_in(list(self.cluster)))
        if self.partition:
            col = partition_column or ("partition" if "partition" in names else "vc")
            if col in names:
                frame = frame.filter(self._in_partition(col))
        return frame

    def _in_partition(self, col: str) -> pl.Expr:
        """Whether ``col`` (one name, or several comma-separated: a node in two
        partitions, a job submitted to ``gpu,gpu-long``) names a chosen partition.
        """
        wanted = list(self.partition)
        return (
            pl.col(col)
            .str.split(",")
            .list.eval(pl.element().str.strip_chars().is_in(wanted))
            .list.any()
            .fill_null(False)
        )

    def capacity(self, capacity: pl.LazyFrame) -> pl.LazyFrame:
        """The ``capacity`` table in scope. With partitions chosen, the cluster total
        (``vc`` null) no longer applies: the chosen partitions' rows are added up into
        the total (a node in two chosen partitions counts twice, as the per-partition
        rows count it).
        """
        if self.cluster:
            capacity = capacity.filter(pl.col("cluster").is_in(list(self.cluster)))
        if not self.partition:
            return capacity
        names = capacity.collect_schema().names()
        keys = [c for c in names if c not in ("vc", "gpus")]
        return (
            capacity.filter(self._in_partition("vc"))
            .group_by(keys)
            .agg(pl.col("gpus").sum())
            .with_columns(pl.lit(None, dtype=pl.String).alias("vc"))
            .select(names)
        )

    def during(self, frame: pl.LazyFrame, time: str = "time") -> pl.LazyFrame:
        """Rows of a time series (samples, events) whose ``time`` is in ``[since, until)``."""
        if self.since is not None:
            frame = frame.filter(pl.col(time) >= _lit(self.since))
        if self.until is not None:
            frame = frame.filter(pl.col(time) < _lit(self.until))
        return frame

    def overlapping(
        self, frame: pl.LazyFrame, start: str = "start_time", end: str = "end_time"
    ) -> pl.LazyFrame:
        """Rows of an interval table (placements) that overlap ``[since, until)``; an
        open end (null) runs on.
        """
        if self.until is not None:
            frame = frame.filter(pl.col(start).is_null() | (pl.col(start) < _lit(self.until)))
        if self.since is not None:
            frame = frame.filter(pl.col(end).is_null() | (pl.col(end) > _lit(self.since)))
        return frame

    def sql_where(
        self,
        names: Sequence[str],
        *,
        time: str | None = None,
        interval: tuple[str, str] | None = None,
    ) -> str:
        """The same restriction as :meth:`where` plus :meth:`during` (``time``) or
        :meth:`overlapping` (``interval``: start, end columns), as a SQL condition over
        a table with columns ``names`` (``TRUE`` when nothing restricts). Names and
        instants are quoted here, so the text is safe to put in a view definition.
        """
        terms = [*self._sql_names(names), *self._sql_times(time, interval)]
        return " AND ".join(terms) or "TRUE"

    def _sql_names(self, names: Sequence[str]) -> list[str]:
        terms = []
        if self.cluster and "cluster" in names:
            terms.append(f'"cluster" IN ({", ".join(_sql_text(c) for c in self.cluster)})')
        col = "partition" if "partition" in names else "vc" if "vc" in names else None
        if self.partition and col is not None:
            wanted = ", ".join(_sql_text(p) for p in self.partition)
            split = f"string_split(replace(\"{col}\", ' ', ''), ',')"
            terms.append(f"list_has_any({split}, [{wanted}])")
        return terms

    def _sql_times(self, time: str | None, interval: tuple[str, str] | None) -> list[str]:
        terms = []
        since = _sql_instant(self.since) if self.since is not None else None
        until = _sql_instant(self.until) if self.until is not None else None
        if time is not None:
            terms += [f'"{time}" >= {since}'] if since else []
            terms += [f'"{time}" < {until}'] if until else []
        if interval is not None:
            start, end = (f'"{c}"' for c in interval)
            terms += [f"({start} IS NULL OR {start} < {until})"] if until else []
            terms += [f"({end} IS NULL OR {end} > {since})"] if since else []
        return terms

    # -- jobs -------------------------------------------------------------------------

    def _life_in_window(self) -> pl.Expr:
        """Whether a job's life ``[submit or start, end or as-of)`` overlaps the window
        (an instantaneous job counts when its instant is inside it). Needs ``_as_of``.
        """
        a = pl.col("_as_of")
        lo = pl.coalesce("submit_time", "start_time")
        hi = pl.min_horizontal(pl.coalesce("end_time", a), a)
        keep = pl.lit(True)
        if self.until is not None:
            keep = keep & (lo < _lit(self.until))
        if self.since is not None:
            s = _lit(self.since)
            keep = keep & ((hi > s) | (lo >= s))
        return keep.fill_null(not self.windowed)

    def select(self, jobs: pl.LazyFrame) -> pl.LazyFrame:
        """The jobs in scope, columns unchanged: cluster / partition (``vc``) filters;
        with ``--as-of``, jobs submitted after it left out; with a window, jobs whose
        life overlaps it. The default scope returns ``jobs`` itself.
        """
        chosen = self.where(jobs, "vc")
        if self.as_of is None and not self.windowed:
            return chosen
        out = self.with_as_of(chosen, jobs)
        if self.as_of is not None:
            first = pl.coalesce("submit_time", "start_time")
            out = out.filter(first.is_null() | (first <= pl.col("_as_of")))
        if self.windowed:
            out = out.filter(self._life_in_window())
        return out.drop("_as_of")

    def clip(self, jobs: pl.LazyFrame, as_of_table: pl.DataFrame | None = None) -> pl.LazyFrame:
        """The jobs in scope (:meth:`select`) as of their as-of instant, in the window.

        Same columns, changed as the module docstring says, plus three:

        - ``as_of_time``: the as-of instant the row now describes;
        - ``status``: ``running`` for a job that had started but not ended by as-of,
          ``pending`` for one not started by then (only differs with ``--as-of``);
        - ``start_time``, ``end_time``, ``run_s``: the run's overlap with the window, a
          running job's run ending at as-of (zero-length when the run is outside it);
          ``queue_s``: as stored for a job started by as-of, else null; a row with no
          instants at all keeps its ``run_s`` and ``queue_s`` as given;
        - ``wait_s``: the whole wait (``queue_s``, or as-of - submit for a pending
          job), ``wait_censored``: true for a pending job (its wait goes on),
          ``wait_in_window_s``: the part of the wait inside the window.

        ``as_of_table``: :meth:`as_of_by_dataset` of ``jobs``, when already computed.
        """
        a = pl.col("_as_of")
        start, end, submit = pl.col("start_time"), pl.col("end_time"), pl.col("submit_time")
        out = self.with_as_of(self.where(jobs, "vc"), jobs, as_of_table)
        if self.as_of is not None:
            first = pl.coalesce("submit_time", "start_time")
            out = out.filter(first.is_null() | (first <= a))
        if self.windowed:
            out = out.filter(self._life_in_window())
        started = start.is_not_null() & (start <= a)
        ended = end.is_not_null() & (end <= a)
        pending = ~started & (end.is_null() | (end > a)) & submit.is_not_null()
        out = out.with_columns(
            pl.when(start.is_not_null() & (start > a))
            .then(pl.lit("pending"))
            .when(started & end.is_not_null() & (end > a))
            .then(pl.lit("running"))
            .otherwise(pl.col("status"))
            .alias("status"),
            pl.when(started).then(start).alias("_start"),
            pl.when(ended).then(end).when(started).then(a).alias("_end"),
            pending.fill_null(False).alias("wait_censored"),
            # A row with durations but no instants (a synthetic frame, a trace that
            # gives run_s only) cannot be placed in time: its durations stay as given.
            (start.is_null() & end.is_null()).alias("_timeless"),
            # queue_s of a job that had not started by as-of is not known yet.
            pl.when(start.is_null() | (start <= a)).then(pl.col("queue_s")).alias("queue_s"),
        )
        wait_end = pl.when(pl.col("wait_censored")).then(a).otherwise(pl.col("_start"))
        lo = _lit(self.since) if self.since is not None else None
        hi = _lit(self.until) if self.until is not None else None

        def clamp(expr: pl.Expr) -> pl.Expr:
            if lo is not None:
                expr = pl.max_horizontal(expr, lo)
            if hi is not None:
                expr = pl.min_horizontal(expr, hi)
            return expr

        run_start = pl.when(pl.col("_start").is_not_null()).then(clamp(pl.col("_start")))
        run_end = pl.when(pl.col("_end").is_not_null()).then(
            pl.max_horizontal(clamp(pl.col("_end")), run_start)
        )
        w_start = pl.when(submit.is_not_null() & wait_end.is_not_null()).then(clamp(submit))
        w_end = pl.max_horizontal(clamp(wait_end), w_start)
        out = out.with_columns(
            run_start.alias("start_time"),
            run_end.alias("end_time"),
            pl.when(pl.col("wait_censored"))
            .then(_seconds(a - submit))
            .otherwise(pl.col("queue_s"))
            .alias("wait_s"),
            _seconds(w_end - w_start).alias("wait_in_window_s"),
            a.alias("as_of_time"),
        ).with_columns(
            pl.when(pl.col("_timeless"))
            .then(pl.col("run_s"))
            .otherwise(_seconds(pl.col("end_time") - pl.col("start_time")))
            .alias("run_s")
        )
        return out.drop("_as_of", "_start", "_end", "_timeless")

    def submitted(self, jobs: pl.LazyFrame) -> pl.LazyFrame:
        """The jobs in scope *submitted* in the window and by as-of (for analyses of
        arrivals, where a job belongs to the instant it was submitted).
        """
        jobs = self.where(jobs, "vc")
        if self.since is not None:
            jobs = jobs.filter(pl.col("submit_time") >= _lit(self.since))
        if self.until is not None:
            jobs = jobs.filter(pl.col("submit_time") < _lit(self.until))
        if self.as_of is not None:
            jobs = jobs.filter(pl.col("submit_time") <= _lit(self.as_of))
        return jobs


def scope_of(
    *,
    as_of: str | None = None,
    since: str | None = None,
    until: str | None = None,
    cluster: Sequence[str] = (),
    partition: Sequence[str] = (),
    period: str | None = None,
) -> Scope:
    """A :class:`Scope` from the texts typed on the command line (a bad one is a
    :class:`UsageError` naming the flag).
    """
    return Scope(
        as_of=parse_instant(as_of, "--as-of") if as_of else None,
        since=parse_instant(since, "--since") if since else None,
        until=parse_instant(until, "--until") if until else None,
        cluster=tuple(cluster),
        partition=tuple(partition),
        period=period,
    )
