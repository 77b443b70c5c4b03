"""The figures of a serving-replay page, computed from a run's stored rows
(:mod:`gpu_trace.reports.serve_replay_frames`): the summary figures a run did not store,
the sanity notes, and the small frames the charts draw (CDF points, attainment per
arrival bin, replica x bin cells, queue per bin).

Definitions are the serving replay's (/work/notes/serve_spec.md "Metrics",
gpu_trace.serve.metrics): SLO attainment is over all requests of the window, a dropped
request misses, a one-token answer (no TPOT) meets the TPOT target, a target not set
does not constrain; goodput is DistServe's (requests meeting every target / the run's
horizon); percentiles interpolate linearly between order statistics, over the
finished requests. Long runs are drawn in coarser bins (said in each chart's title) so
that no chart carries more than a few thousand rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

from gpu_trace.reports import serve_replay_frames as frames

MAX_BINS = 300
"""Most time bins a chart draws: longer runs are shown in coarser bins."""
MAX_CELLS = 6000
"""Most replica x time cells of a heatmap."""
CDF_POINTS = 300
"""Most points of one latency CDF line (every k-th request of the sorted values, and
the last)."""
ATTAINMENT_TOLERANCE = 1e-6
"""Largest difference between the stored and the recomputed SLO attainment that is
not reported (float rounding)."""

Run = dict[str, Any]
"""One ``serve_runs`` row under the report's names (:mod:`~gpu_trace.reports.serve_replay_frames`)."""

PERCENTILES: dict[str, tuple[str, float]] = {
    "ttft_p50_s": ("ttft_s", 0.5),
    "ttft_p90_s": ("ttft_s", 0.9),
    "ttft_p99_s": ("ttft_s", 0.99),
    "tpot_p50_s": ("tpot_s", 0.5),
    "tpot_p90_s": ("tpot_s", 0.9),
    "e2e_p50_s": ("e2e_s", 0.5),
    "e2e_p90_s": ("e2e_s", 0.9),
}
"""Summary percentile -> (request column, quantile), recomputed when not stored."""

TARGETS = {"slo_ttft_s": "ttft_s", "slo_tpot_s": "tpot_s", "slo_e2e_s": "e2e_s"}
"""SLO target column of serve_runs -> the request latency it bounds."""


def met(run: Run) -> pl.Expr:
    """A request met every target of ``run``: finished, each set target's latency
    within it; a null TPOT (one output token) meets the TPOT target.
    """
    ok = pl.col("status") == "finished"
    for target, col in TARGETS.items():
        bound = run.get(target)
        if bound is None:
            continue  # a target not set does not constrain
        within = pl.col(col) <= bound
        if col == "tpot_s":
            within = pl.col(col).is_null() | within
        ok = ok & within
    return ok.fill_null(value=False)


def request_summary(reqs: pl.LazyFrame, run: Run) -> dict[str, float | None]:
    """What the requests define: counts, those meeting every target, attainment,
    goodput (over the stored horizon, else the last finish) and the percentiles.
    """
    done = pl.col("status") == "finished"
    row = (
        reqs.select(
            pl.len().alias("requests"),
            done.sum().alias("requests_finished"),
            met(run).sum().alias("met"),
            pl.col("finish_s").max().alias("last_finish_s"),
            *(
                pl.col(col).filter(done).quantile(q, "linear").alias(name)
                for name, (col, q) in PERCENTILES.items()
            ),
        )
        .collect()
        .row(0, named=True)
    )
    out: dict[str, float | None] = {k: None if v is None else float(v) for k, v in row.items()}
    good = float(row["met"])
    total = float(row["requests"])
    horizon = run.get("horizon_s") or out["last_finish_s"]
    out["slo_attainment_ratio"] = good / total if total else None
    out["goodput_rps"] = good / horizon if horizon else None
    return out


def summary_figures(
    run: Run, computed: dict[str, float | None], columns: Sequence[str]
) -> tuple[dict[str, float | None], list[str]]:
    """Each of ``columns``: the stored figure, else the one computed from the requests;
    and the columns computed here.
    """
    shown: dict[str, float | None] = {}
    derived: list[str] = []
    for column in columns:
        stored = run.get(column)
        if stored is not None:
            shown[column] = float(stored)
        elif computed.get(column) is not None:
            shown[column] = computed[column]
            derived.append(column)
        else:
            shown[column] = None
    return shown, derived


def sanity_notes(
    run: Run, computed: dict[str, float | None], derived: Sequence[str], ts_rows: int
) -> list[str]:
    """The run's own notes, then what the report finds in its rows: drops and their
    reasons, counts or attainment that disagree with the stored requests, figures
    computed here, a missing timeseries.
    """
    notes = frames.notes_of(run.get("notes"))
    total = int(computed["requests"] or 0)
    finished = int(computed["requests_finished"] or 0)
    if total == 0:
        notes.append("no requests are stored for this run: no latency or attainment chart")
    elif finished == 0:
        notes.append(f"every request was dropped ({total:,}): nothing finished")
    elif finished < total:
        notes.append(
            f"{total - finished:,} of {total:,} requests were dropped: they count as missing "
            "the SLO targets"
        )
    for reason, n in frames.drop_reasons_of(run.get("drop_reasons")).items():
        notes.append(f"dropped: {n:,} x {reason}")
    stored_n = run.get("requests")
    if stored_n is not None and int(stored_n) != total:
        notes.append(
            f"the run counted {int(stored_n):,} requests but serve_requests holds {total:,}"
        )
    if all(run.get(t) is None for t in TARGETS):
        notes.append("no SLO target was set: every finished request meets them")
    stored = run.get("slo_attainment_ratio")
    mine = computed.get("slo_attainment_ratio")
    if stored is not None and mine is not None and abs(stored - mine) > ATTAINMENT_TOLERANCE:
        notes.append(
            f"the stored SLO attainment ({stored * 100:.1f} %) differs from its requests' "
            f"({mine * 100:.1f} %)"
        )
    if derived:
        notes.append(
            "not stored by the run, computed here from its requests: " + ", ".join(derived)
        )
    if ts_rows == 0:
        notes.append("no timeseries is stored for this run: no utilisation, KV or queue chart")
    return notes


def timeseries_notes(ts: pl.LazyFrame, bin_s: float, last_finish_s: float | None) -> list[str]:
    """What the timeseries contradicts in the contract (gpu_trace.serve.result
    TIMESERIES_COLUMNS): busy seconds longer than the bin, KV use above capacity, bins
    stopping before the run's last finish. The charts cap shares at 100 %; the note
    says so.
    """
    row = (
        ts.select(
            (pl.col("busy_s") > bin_s * (1 + 1e-9)).sum().alias("over"),
            pl.col("busy_s").max().alias("busiest"),
            (pl.col("kv_used_blocks") > pl.col("kv_capacity_blocks")).sum().alias("kv_over"),
            pl.col("time_s").max().alias("last_bin"),
        )
        .collect()
        .row(0, named=True)
    )
    if row["last_bin"] is None:  # no timeseries: said by sanity_notes
        return []
    notes = []
    if row["over"]:
        notes.append(
            f"busy_s exceeds the {bin_s:g} s bin in {row['over']:,} (bin, replica) rows (up to "
            f"{row['busiest']:,.1f} s): utilisation is drawn capped at 100 %"
        )
    if row["kv_over"]:
        notes.append(
            f"KV blocks used exceed the capacity in {row['kv_over']:,} (bin, replica) rows: "
            "occupancy is drawn capped at 100 %"
        )
    end = float(row["last_bin"]) + bin_s
    if last_finish_s is not None and last_finish_s > end:
        notes.append(
            f"the timeseries ends at {end:,.0f} s but the last request finished at "
            f"{last_finish_s:,.0f} s: the charts of replicas cover only that part"
        )
    return notes


def bin_width(run: Run, ts: pl.LazyFrame) -> float:
    """The run's bin: its configuration's ``bin_s``, else the timeseries' step, else
    10 s (serve run's default).
    """
    value = frames.config_of(run.get("config_json")).get("bin_s")
    if isinstance(value, int | float) and value > 0:
        return float(value)
    diff = pl.col("time_s").unique().sort().diff()
    step = ts.select(diff.filter(diff > 0).min()).collect().item()
    return float(step) if step is not None else 10.0


def _coarse(n_bins: int, limit: int) -> int:
    """How many of the run's bins make one drawn bin (1 = as stored)."""
    return max(1, -(-n_bins // max(limit, 1)))


def _merged_note(k: int, bin_s: float) -> str:
    return f" ({k} bins of {bin_s:g} s merged per point)" if k > 1 else ""


def cdf_points(reqs: pl.LazyFrame) -> tuple[pl.DataFrame, str]:
    """(metric, seconds, share) of the finished requests' TTFT, TPOT and e2e: the
    empirical CDF from 0 %, at most :data:`CDF_POINTS` points per metric; and a note
    when non-positive values were left out (a log axis).
    """
    parts = []
    left_out = 0
    cols = {"TTFT": "ttft_s", "TPOT": "tpot_s", "e2e": "e2e_s"}
    values = reqs.filter(pl.col("status") == "finished").select(cols.values()).collect()
    for metric, col in cols.items():
        vals = values[col].drop_nulls().drop_nans()
        left_out += int((vals <= 0).sum())
        vals = vals.filter(vals > 0).sort()
        n = vals.len()
        if not n:
            continue
        step = max(1, n // CDF_POINTS)
        part = (
            pl.DataFrame({"seconds": vals})
            .with_row_index("i")
            .filter(((pl.col("i") + 1) % step == 0) | (pl.col("i") == n - 1))
            .select(
                pl.lit(metric).alias("metric"), "seconds", ((pl.col("i") + 1) / n).alias("share")
            )
        )
        start = pl.DataFrame({"metric": [metric], "seconds": [vals[0]], "share": [0.0]})
        parts.append(pl.concat([start, part]))  # the step starts at 0 %
    empty = pl.DataFrame(schema={"metric": pl.String, "seconds": pl.Float64, "share": pl.Float64})
    note = f" ({left_out:,} zero latencies not drawn on the log axis)" if left_out else ""
    return (pl.concat(parts) if parts else empty), note


def attainment_bins(reqs: pl.LazyFrame, run: Run, bin_s: float) -> tuple[pl.DataFrame, str]:
    """Per arrival bin: requests arriving in it, those meeting every target, the share."""
    last = reqs.select(pl.col("arrival_s").max()).collect().item()
    k = _coarse(int((last or 0.0) // bin_s) + 1, MAX_BINS)
    width = bin_s * k
    out = (
        reqs.group_by(((pl.col("arrival_s") // width) * width).alias("time_s"))
        .agg(pl.len().alias("requests"), met(run).sum().alias("met"))
        .with_columns(
            (pl.col("met") / pl.col("requests")).alias("attainment"),
            (pl.col("time_s") + width).alias("time_end_s"),
        )
        .sort("time_s")
        .collect()
    )
    return out, _merged_note(k, bin_s)


def replica_cells(ts: pl.LazyFrame, bin_s: float) -> tuple[pl.DataFrame, str]:
    """Per (drawn bin, replica) while serving: utilisation (busy seconds / seconds of
    the bins) and KV occupancy (mean of used / capacity at the bins' ends).
    """
    up = ts.filter(pl.col("up").fill_null(value=True))
    span = up.select(pl.col("replica").n_unique(), pl.col("time_s").max()).collect()
    if span["time_s"][0] is None:
        return up.head(0).collect(), ""
    replicas = max(int(span["replica"][0]), 1)
    n_bins = int(float(span["time_s"][0]) // bin_s) + 1
    k = _coarse(n_bins, min(MAX_BINS, MAX_CELLS // replicas))
    width = bin_s * k
    kv = pl.when(pl.col("kv_capacity_blocks") > 0).then(
        pl.col("kv_used_blocks") / pl.col("kv_capacity_blocks")
    )
    cells = (
        up.group_by(((pl.col("time_s") // width) * width).alias("time_s"), "replica")
        .agg(
            pl.col("role").first(),
            (pl.col("busy_s").sum() / (pl.len() * bin_s)).alias("utilisation"),
            kv.mean().alias("kv_occupancy"),
        )
        .with_columns((pl.col("time_s") + width).alias("time_end_s"))
        .sort("replica", "time_s")
        .collect()
    )
    return cells, _merged_note(k, bin_s)


def queue_bins(ts: pl.LazyFrame, bin_s: float) -> tuple[pl.DataFrame, str]:
    """Per drawn bin: waiting and running requests summed over replicas (the mean over
    the merged bins when a long run is coarsened).
    """
    per_bin = (
        ts.group_by("time_s")
        .agg(pl.col("waiting").sum().cast(pl.Float64), pl.col("running").sum().cast(pl.Float64))
        .collect()
    )
    n_bins = int(float(per_bin.select(pl.col("time_s").max()).item()) // bin_s) + 1
    k = _coarse(n_bins, MAX_BINS)
    width = bin_s * k
    out = (
        per_bin.group_by(((pl.col("time_s") // width) * width).alias("time_s"))
        .agg(pl.col("waiting").mean(), pl.col("running").mean())
        .with_columns((pl.col("time_s") + width).alias("time_end_s"))
        .sort("time_s")
    )
    return out, _merged_note(k, bin_s)
