"""Scope (gpu_trace.analyses.scope): the as-of instant, the window clip, filters.

Each frame below is a handful of jobs with round times; every expected figure is worked
out by hand in the comment next to it (times are hours after 2026-03-01 00:00 UTC).
"""

from __future__ import annotations

import datetime as dt

import polars as pl
import pytest

from gpu_trace.analyses.scope import Scope, parse_instant, scope_of
from gpu_trace.errors import UsageError

T0 = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
TS = pl.Datetime("us", "UTC")


def t(hours: float) -> dt.datetime:
    return T0 + dt.timedelta(hours=hours)


def job(
    job_id: str,
    status: str,
    submit: float | None,
    start: float | None,
    end: float | None,
    *,
    as_of: float | None = None,
    gpus: float = 1.0,
    vc: str | None = "gpu",
    cluster: str = "c1",
) -> dict[str, object]:
    return {
        "source": "slurm",
        "dataset": cluster,
        "cluster": cluster,
        "vc": vc,
        "job_id": job_id,
        "status": status,
        "submit_time": None if submit is None else t(submit),
        "start_time": None if start is None else t(start),
        "end_time": None if end is None else t(end),
        "queue_s": None if start is None or submit is None else (start - submit) * 3600.0,
        "run_s": None if end is None or start is None else (end - start) * 3600.0,
        "as_of_time": None if as_of is None else t(as_of),
        "gpus": gpus,
    }


def frame(*rows: dict[str, object]) -> pl.LazyFrame:
    times = dict.fromkeys(("submit_time", "start_time", "end_time", "as_of_time"), TS)
    over = {
        **times,
        "queue_s": pl.Float64,
        "run_s": pl.Float64,
        "vc": pl.String,
        "gpus": pl.Float64,
    }
    return pl.LazyFrame(list(rows), schema_overrides=over)


# A Slurm-like export printed at 10:00: job 1 ran 01:00-05:00 (ended), job 2 has run
# since 03:00 (sacct: Start + Elapsed = 03:00 + 7 h = 10:00, the export time), job 3 has
# waited since 04:00 and not started.
EXPORT = frame(
    job("1", "completed", 0, 1, 5, as_of=5, gpus=2),
    job("2", "running", 2, 3, None, as_of=10, gpus=4),
    job("3", "pending", 4, None, None, gpus=8),
)


def by_id(lf: pl.LazyFrame) -> dict[str, dict[str, object]]:
    return {r["job_id"]: r for r in lf.collect().to_dicts()}


def test_as_of_is_the_exports_own_time() -> None:
    # latest of as_of_time (5 h, 10 h), submit (0, 2, 4), start (1, 3), end (5) = 10 h
    got = Scope().as_of_by_dataset(EXPORT).collect()
    assert got.to_dicts() == [{"source": "slurm", "dataset": "c1", "as_of": t(10)}]


def test_as_of_without_an_export_time_is_the_latest_timestamp() -> None:
    # Kubernetes writes no as_of_time: latest of submit 0, 2, start 1, end 6 = 6 h.
    lf = frame(job("a", "completed", 0, 1, 6), job("b", "pending", 2, None, None))
    assert Scope().as_of_by_dataset(lf).collect()["as_of"].to_list() == [t(6)]


def test_as_of_is_per_dataset() -> None:
    # c1's latest instant is 10 h (job 2's export time), c2's 7 h (job x's end).
    lf = pl.concat([EXPORT, frame(job("x", "completed", 6, 6, 7, as_of=7, cluster="c2"))])
    got = Scope().as_of_by_dataset(lf).collect().sort("dataset")
    assert got["as_of"].to_list() == [t(10), t(7)]


def test_running_job_runs_until_as_of_and_pending_waits_until_it() -> None:
    rows = by_id(Scope().clip(EXPORT))
    # job 1: unchanged, 4 h run, 1 h wait, not censored
    assert (rows["1"]["run_s"], rows["1"]["wait_s"], rows["1"]["wait_censored"]) == (
        4 * 3600,
        3600,
        False,
    )
    # job 2: 03:00 -> as-of 10:00 = 7 h; its wait 02:00 -> 03:00 = 1 h
    assert rows["2"]["end_time"] == t(10)
    assert rows["2"]["run_s"] == 7 * 3600
    assert rows["2"]["wait_s"] == 3600
    # job 3: pending since 04:00, as-of 10:00: waited 6 h so far, censored, no run
    assert rows["3"]["wait_s"] == 6 * 3600
    assert rows["3"]["wait_censored"] is True
    assert rows["3"]["run_s"] is None
    assert rows["3"]["queue_s"] is None
    assert {r["as_of_time"] for r in rows.values()} == {t(10)}


def test_window_counts_only_the_overlap() -> None:
    rows = by_id(Scope(since=t(4), until=t(6)).clip(EXPORT))
    # job 1 ran 1-5: overlap with [4, 6) is 4-5 = 1 h
    assert (rows["1"]["start_time"], rows["1"]["end_time"], rows["1"]["run_s"]) == (
        t(4),
        t(5),
        3600,
    )
    # job 2 ran 3-10 (as-of): overlap 4-6 = 2 h
    assert rows["2"]["run_s"] == 2 * 3600
    # job 1's wait 0-1 lies before the window: 0 s in it; its whole wait stays 1 h
    assert (rows["1"]["wait_in_window_s"], rows["1"]["wait_s"]) == (0, 3600)
    # job 3 waits 4-10: 2 h of it inside [4, 6); the whole wait so far 6 h
    assert (rows["3"]["wait_in_window_s"], rows["3"]["wait_s"]) == (2 * 3600, 6 * 3600)


def test_window_leaves_out_jobs_outside_it() -> None:
    # [6, 8): job 1 (ended 5) is out; job 2 (running to 10) and job 3 (waiting) are in.
    assert sorted(by_id(Scope(since=t(6), until=t(8)).clip(EXPORT))) == ["2", "3"]
    # [0, 1): only job 1 (submitted at 0); job 2 is submitted at 2, job 3 at 4.
    assert sorted(by_id(Scope(until=t(1)).select(EXPORT))) == ["1"]


def test_as_of_override_reads_the_store_as_it_stood() -> None:
    rows = by_id(Scope(as_of=t(2.5)).clip(EXPORT))
    # job 3 was submitted at 4 h, after 2.5 h: not there yet
    assert sorted(rows) == ["1", "2"]
    # job 1 ran 1 -> 5: at 2.5 h it was running, 1.5 h so far
    assert (rows["1"]["status"], rows["1"]["run_s"]) == ("running", 1.5 * 3600)
    # job 2 submitted 2 h, started 3 h: at 2.5 h pending, 0.5 h so far, censored
    assert (rows["2"]["status"], rows["2"]["wait_s"], rows["2"]["wait_censored"]) == (
        "pending",
        0.5 * 3600,
        True,
    )
    assert rows["2"]["start_time"] is None


def test_cluster_and_partition_filters() -> None:
    lf = frame(
        job("a", "completed", 0, 1, 2, vc="gpu"),
        job("b", "completed", 0, 1, 2, vc="debug"),
        # a pending job submitted to two partitions (sacct prints Partition "gpu,long")
        job("c", "pending", 0, None, None, vc="gpu,long"),
        job("d", "completed", 0, 1, 2, vc="gpu", cluster="c2"),
    )
    assert sorted(by_id(Scope(partition=("long",)).select(lf))) == ["c"]
    assert sorted(by_id(Scope(partition=("gpu",)).select(lf))) == ["a", "c", "d"]
    assert sorted(by_id(Scope(cluster=("c2",)).select(lf))) == ["d"]


def test_partition_capacity_replaces_the_cluster_total() -> None:
    cap = pl.LazyFrame(
        {
            "source": ["slurm"] * 3,
            "cluster": ["c1"] * 3,
            "time": [t(0)] * 3,
            "vc": [None, "gpu", "debug"],
            "gpus": [24, 16, 8],
            "basis": ["inventory"] * 3,
        },
        schema_overrides={"time": TS, "gpus": pl.Int32},
    )
    got = Scope(partition=("gpu",)).capacity(cap).collect()
    # the gpu partition's 16 GPUs become the total; the cluster's 24 no longer apply
    assert got.select("vc", "gpus").to_dicts() == [{"vc": None, "gpus": 16}]


def test_default_scope_leaves_jobs_untouched() -> None:
    assert Scope().select(EXPORT) is EXPORT


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("2026-03-01", T0),
        ("2026-03-01T10:00", t(10)),
        ("2026-03-01T10:00:00Z", t(10)),
        ("2026-03-01T11:00:00+01:00", t(10)),
    ],
)
def test_parse_instant(text: str, want: dt.datetime) -> None:
    assert parse_instant(text, "--as-of") == want


def test_bad_values_are_usage_errors() -> None:
    with pytest.raises(UsageError, match="--since 'yesterday' is not a date"):
        scope_of(since="yesterday")
    with pytest.raises(UsageError, match="is not before --until"):
        scope_of(since="2026-03-02", until="2026-03-01")
    with pytest.raises(UsageError, match="--period 'year'"):
        scope_of(period="year")


def test_a_partition_keeps_its_exports_as_of() -> None:
    # The export's time (10 h) comes from job 2 in partition gpu; job 3 alone, in debug,
    # would give a latest timestamp of 4 h (its submit) and a wait of 0. Its wait so far
    # is 10 - 4 = 6 h whichever partition is chosen.
    lf = frame(
        job("2", "running", 2, 3, None, as_of=10, vc="gpu"),
        job("3", "pending", 4, None, None, vc="debug"),
    )
    rows = by_id(Scope(partition=("debug",)).clip(lf))
    assert list(rows) == ["3"]
    assert rows["3"]["wait_s"] == 6 * 3600


def test_sql_where_matches_the_frame_filters() -> None:
    """The DuckDB condition (energy, per-job) keeps the rows the polars filters keep:
    samples at 3 h (before since = 4 h), 5 h (in) and 6 h (at until: out); a node in
    partitions "gpu,long"; a cluster name with a quote stays a literal."""
    import duckdb

    con = duckdb.connect()
    con.execute(
        "CREATE TABLE s AS SELECT * FROM (VALUES "
        "('c1', 'gpu,long', TIMESTAMPTZ '2026-03-01 03:00:00+00'), "
        "('c1', 'gpu,long', TIMESTAMPTZ '2026-03-01 05:00:00+00'), "
        "('c1', 'debug', TIMESTAMPTZ '2026-03-01 05:00:00+00'), "
        "('c''2', 'long', TIMESTAMPTZ '2026-03-01 05:00:00+00'), "
        "('c1', 'long', TIMESTAMPTZ '2026-03-01 06:00:00+00')"
        ") AS t(cluster, partition, time)"
    )
    scope = Scope(since=t(4), until=t(6), cluster=("c1", "c'2"), partition=("long",))
    where = scope.sql_where(["cluster", "partition", "time"], time="time")
    rows = con.execute(f"SELECT cluster, partition FROM s WHERE {where} ORDER BY 1").fetchall()
    assert rows == [("c'2", "long"), ("c1", "gpu,long")]
    assert Scope().sql_where(["cluster"], time="time") == "TRUE"
