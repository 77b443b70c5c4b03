"""Duration estimates for QSSF and backfilling.

A scikit-learn ``HistGradientBoostingRegressor`` on ``log1p(run_s)`` (the LightGBM
analogue of Helios' QSSF estimator), trained **only on jobs submitted before the
replayed window** so no future information leaks into a policy. Features: user, VC,
GPUs, job-name tokens, hour of day, weekday, and user-history aggregates computed
strictly from the past (expanding mean / count of the user's earlier log durations,
shifted by one job). Too little history (fewer than ``min_train`` jobs) falls back to
the user-history mean, then the global median.

Accuracy is scored on the replayed jobs as Helios reports it: MAE and the shares of
jobs whose relative error is within 10 / 50 / 100 %.
"""

from __future__ import annotations

import zlib
from dataclasses import asdict, dataclass

import numpy as np
import numpy.typing as npt
import polars as pl

F64 = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Accuracy:
    """How good the estimates were on the replayed jobs."""

    method: str
    train_jobs: int
    scored_jobs: int
    mae_s: float
    within_10: float
    within_50: float
    within_100: float

    def as_dict(self) -> dict[str, object]:
        """The figures as plain JSON, for the run's ``config.resolved.json``."""
        return asdict(self)


def score(estimate: F64, actual: F64, method: str, train_jobs: int) -> Accuracy:
    """MAE and Helios error buckets (relative error against max(actual, 1 s))."""
    if not actual.size:
        return Accuracy(method, train_jobs, 0, float("nan"), *(float("nan"),) * 3)
    err = np.abs(estimate - actual)
    rel = err / np.maximum(actual, 1.0)
    return Accuracy(
        method,
        train_jobs,
        int(actual.size),
        float(err.mean()),
        float((rel <= 0.10).mean()),
        float((rel <= 0.50).mean()),
        float((rel <= 1.00).mean()),
    )


def _token(name: str | None) -> int:
    """A stable small integer for a job name's first word (names like ``train_bert_7``
    recur; the number does not matter).
    """
    if not name:
        return -1
    head = "".join(ch if ch.isalpha() else " " for ch in name).split()
    return zlib.crc32(head[0].encode()) % 100_003 if head else -1


def _features(df: pl.DataFrame, users: dict[str, int], vcs: dict[str, int]) -> F64:
    ts = df["submit_time"]
    cols = [
        np.asarray([users.get(u or "", -1) for u in df["user"].to_list()], dtype=np.float64),
        np.asarray([vcs.get(v or "", -1) for v in df["vc"].to_list()], dtype=np.float64),
        df["gpus"].fill_null(0).to_numpy().astype(np.float64),
        np.asarray([_token(n) for n in df["name"].to_list()], dtype=np.float64),
        ts.dt.hour().to_numpy().astype(np.float64),
        ts.dt.weekday().to_numpy().astype(np.float64),
        df["hist_mean"].fill_null(np.nan).to_numpy().astype(np.float64),
        df["hist_count"].fill_null(0).to_numpy().astype(np.float64),
    ]
    return np.column_stack(cols)


def estimate(
    history: pl.DataFrame, target: pl.DataFrame, *, seed: int = 0, min_train: int = 200
) -> tuple[F64, Accuracy]:
    """Estimated run_s for each ``target`` row (columns: user, vc, name, gpus,
    submit_time, run_s) from ``history`` (same columns, all submitted earlier).
    """
    hist = history.filter(pl.col("run_s").is_not_null() & (pl.col("run_s") >= 0)).sort(
        "submit_time", maintain_order=True
    )
    y_hist = np.log1p(hist["run_s"].to_numpy().astype(np.float64))
    hist = hist.with_columns(pl.Series("_y", y_hist)).with_columns(
        pl.col("_y").cum_sum().shift(1).over("user").alias("_cs"),
        pl.col("_y").cum_count().shift(1).over("user").fill_null(0).alias("hist_count"),
    )
    hist = hist.with_columns(
        (pl.col("_cs") / pl.col("hist_count").replace(0, None)).alias("hist_mean")
    )
    per_user = hist.group_by("user").agg(
        pl.col("_y").mean().alias("hist_mean"), pl.len().cast(pl.UInt32).alias("hist_count")
    )
    tgt = target.join(per_user, on="user", how="left", maintain_order="left")
    actual = tgt["run_s"].to_numpy().astype(np.float64)
    global_median = float(np.median(y_hist)) if y_hist.size else 0.0
    fallback = np.expm1(tgt["hist_mean"].fill_null(global_median).to_numpy().astype(np.float64))
    if hist.height < min_train:
        return fallback, score(fallback, actual, "user-history mean", hist.height)
    from sklearn.ensemble import HistGradientBoostingRegressor
    from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

    users = {u: i for i, u in enumerate(sorted(set(hist["user"].fill_null("").to_list())))}
    vcs = {v: i for i, v in enumerate(sorted(set(hist["vc"].fill_null("").to_list())))}
    model = HistGradientBoostingRegressor(max_iter=150, learning_rate=0.1, random_state=seed)
    # one OpenMP thread: on a busy 2-core machine the default spin-waiting threads make a
    # 1-second fit take half a minute, and one thread keeps the result bit-stable
    with threadpool_limits(limits=1):
        model.fit(_features(hist, users, vcs), y_hist)
        pred = np.expm1(np.clip(model.predict(_features(tgt, users, vcs)), 0.0, 20.0))
    return pred, score(pred, actual, "HistGradientBoosting(log1p run_s)", hist.height)


def online(known: pl.DataFrame, target: pl.DataFrame) -> tuple[F64, Accuracy]:
    """Online estimates: each ``target`` job's estimate is the mean ``run_s`` of its
    user's jobs that *finished before it was submitted* (recorded end strictly before
    its submit time), else the mean of every job that had finished by then, else 0 s
    (nothing has finished yet: no information, so the policy sees every job alike).

    ``known`` (columns user, submit_time, end_time, run_s) is every job of the source
    with its recorded end (``end_time``, else submit + run_s): no job is held out for
    training, so every policy of a comparison replays the same full job set, and no
    estimate reads the future. ``target`` has user, submit_time, run_s.
    """
    done = (
        known.lazy()
        .with_columns(
            pl.coalesce(
                pl.col("end_time"), pl.col("submit_time") + pl.duration(seconds=pl.col("run_s"))
            ).alias("_end")
        )
        .filter(pl.col("_end").is_not_null() & pl.col("run_s").is_not_null())
        .select(pl.col("user").fill_null(""), "_end", pl.col("run_s").cast(pl.Float64))
        .sort("_end", maintain_order=True)
        .with_columns(
            pl.col("run_s").cum_sum().over("user").alias("_user_sum"),
            pl.col("run_s").cum_count().over("user").alias("_user_n"),
            pl.col("run_s").cum_sum().alias("_all_sum"),
            pl.int_range(1, pl.len() + 1).alias("_all_n"),
        )
        .collect()
    )
    tgt = (
        target.select(pl.col("user").fill_null(""), "submit_time")
        .with_row_index("_i")
        .sort("submit_time", maintain_order=True)
    )
    per_user = tgt.join_asof(
        done.select("user", "_end", "_user_sum", "_user_n"),
        left_on="submit_time",
        right_on="_end",
        by="user",
        strategy="backward",
        allow_exact_matches=False,
        check_sortedness=False,
    )
    both = per_user.join_asof(
        done.select("_end", "_all_sum", "_all_n"),
        left_on="submit_time",
        right_on="_end",
        strategy="backward",
        allow_exact_matches=False,
        check_sortedness=False,
    ).sort("_i")
    guess = both.select(
        pl.coalesce(
            pl.col("_user_sum") / pl.col("_user_n"),
            pl.col("_all_sum") / pl.col("_all_n"),
            pl.lit(0.0),
        )
    ).to_series()
    pred = guess.to_numpy().astype(np.float64)
    actual = target["run_s"].to_numpy().astype(np.float64)
    return pred, score(
        pred, actual, "online (mean of jobs finished before submission)", done.height
    )
