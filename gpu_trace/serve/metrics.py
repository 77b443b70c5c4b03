"""The summary of one serving run (a ``serve_runs`` row) from its :class:`ServeResult`.

What serving teams are judged on, as the papers define it:

- per-request latency: TTFT, TPOT, end-to-end and queueing, as mean and p50 / p90 / p99
  (linear interpolation between order statistics, the numpy / polars ``linear`` rule),
  over the finished requests (TPOT over those with more than one output token: it is
  null for one token);
- **SLO attainment**: the share of ALL requests of the window meeting every target (a
  dropped request misses; a null TPOT meets the TPOT target), and **goodput** as
  DistServe defines it: requests per second meeting every target (those requests /
  the run's horizon);
- throughput (tokens of the finished requests per second), preemptions, drops with
  their reasons, prefix-cache hit share;
- GPU time, energy and cost: GPU-seconds count a replica from when it was started
  (cold start included) to when it stopped; energy (the two-level power model) and
  cost (GPU-hours x a price per GPU-hour) come from :mod:`gpu_trace.serve.energy`.

All of it is expressions over the result's frames (no loop over requests).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol

import polars as pl

from gpu_trace.serve.config import parse_slo
from gpu_trace.serve.result import ServeResult

PERCENTILES = (50, 90, 99)
"""The percentiles of every latency in the summary."""

LATENCIES = {"ttft": "ttft_s", "tpot": "tpot_s", "e2e": "e2e_s", "queue": "queue_s"}
"""Summary prefix -> request column."""


@dataclass(frozen=True)
class Slo:
    """Latency targets, seconds (``e2e_s`` optional)."""

    ttft_s: float
    tpot_s: float
    e2e_s: float | None = None

    @classmethod
    def parse(cls, text: str) -> Slo:
        """``ttft=2s,tpot=100ms[,e2e=30s]`` (``ServeConfig.slo``); a target left out
        does not constrain (infinite).
        """
        got = parse_slo(text)
        return cls(
            ttft_s=got.get("ttft", float("inf")),
            tpot_s=got.get("tpot", float("inf")),
            e2e_s=got.get("e2e"),
        )


def meets(slo: Slo) -> pl.Expr:
    """True for a request of the ``serve_requests`` / ``REQUEST_COLUMNS`` frame that
    meets every target: finished, TTFT and (when set) end-to-end within, TPOT within or
    null (one output token). A null comparison (a dropped request) is a miss.
    """
    ok = (
        (pl.col("status") == "finished")
        & (pl.col("ttft_s") <= slo.ttft_s)
        & (pl.col("tpot_s").is_null() | (pl.col("tpot_s") <= slo.tpot_s))
    )
    if slo.e2e_s is not None:
        ok = ok & (pl.col("e2e_s") <= slo.e2e_s)
    return ok.fill_null(value=False)


def latency_stats(requests: pl.DataFrame) -> dict[str, float | None]:
    """``<ttft|tpot|e2e|queue>_<mean|p50|p90|p99>_s`` over the finished requests
    (null when none has a value).
    """
    done = requests.lazy().filter(pl.col("status") == "finished")
    exprs: list[pl.Expr] = []
    for name, col in LATENCIES.items():
        exprs.append(pl.col(col).mean().alias(f"{name}_mean_s"))
        exprs.extend(
            pl.col(col).quantile(p / 100, "linear").alias(f"{name}_p{p}_s") for p in PERCENTILES
        )
    row: dict[str, float | None] = done.select(exprs).collect().row(0, named=True)
    return row


def _ratio(num: float, den: float) -> float | None:
    return num / den if den > 0 else None


def replica_gpu_s() -> pl.Expr:
    """GPU-seconds of each replica: GPUs x (down - start), ``start_s`` being when it was
    asked for, so an autoscaler start pays its model load (cold start, which may differ
    per replica when drawn from a latency file) in GPU time too. An expression over
    ``REPLICA_COLUMNS`` rows.
    """
    alive = (pl.col("down_s") - pl.col("start_s")).clip(lower_bound=0.0)
    return pl.col("gpus").cast(pl.Float64) * alive


class EnergyCost(Protocol):
    """GPU time, energy and cost of a run, as :func:`gpu_trace.serve.energy.energy_cost`
    returns them (the two-level power model and the price table live there).
    """

    @property
    def gpu_seconds(self) -> float:
        """GPUs x (stop - start), summed over replicas."""
        ...

    @property
    def energy_kwh(self) -> float:
        """Energy of the GPUs."""
        ...

    @property
    def j_per_token(self) -> float | None:
        """Joules per served token."""
        ...

    @property
    def price_usd_per_gpu_hour(self) -> float:
        """The price used."""
        ...

    @property
    def cost_usd(self) -> float:
        """GPU-hours x price."""
        ...

    @property
    def usd_per_million_tokens(self) -> float | None:
        """Cost per million served tokens."""
        ...


def summary(
    result: ServeResult,
    slo: Slo,
    *,
    energy: EnergyCost | None = None,
) -> dict[str, Any]:
    """The run's summary metrics (the ``serve_runs`` metric columns). ``energy`` is the
    run's GPU time, energy and cost (:func:`gpu_trace.serve.energy.energy_cost`); without
    it GPU-seconds are computed here and energy and cost are null.
    """
    req, reps = result.requests, result.replicas
    horizon = float(result.horizon_s)
    counts = req.select(
        pl.len().alias("requests"),
        (pl.col("status") == "finished").sum().alias("requests_finished"),
        (pl.col("status") == "dropped").sum().alias("requests_dropped"),
        meets(slo).sum().alias("met"),
        pl.col("input_tokens").filter(pl.col("status") == "finished").sum().alias("prompt"),
        pl.col("output_tokens").filter(pl.col("status") == "finished").sum().alias("output"),
        pl.col("prefix_hit_tokens").filter(pl.col("status") == "finished").sum().alias("hit"),
        pl.col("preemptions").cast(pl.Int64).sum().alias("preemptions"),
    ).row(0, named=True)
    reasons = (
        req.filter(pl.col("status") == "dropped")
        .group_by("drop_reason")
        .len()
        .sort("len", "drop_reason", descending=[True, False])
    )
    n = int(counts["requests"])
    tokens = float(counts["prompt"] + counts["output"])
    if energy is not None:
        gpu_s = float(energy.gpu_seconds)
    elif reps.height:
        gpu_s = float(reps.select(replica_gpu_s().sum()).item())
    else:
        gpu_s = 0.0
    alive = reps.select((pl.col("down_s") - pl.col("up_s")).clip(lower_bound=0.0).sum()).item()
    busy = reps.select(pl.col("busy_s").sum()).item() if reps.height else 0.0
    return {
        "slo_ttft_s": slo.ttft_s if slo.ttft_s != float("inf") else None,
        "slo_tpot_s": slo.tpot_s if slo.tpot_s != float("inf") else None,
        "slo_e2e_s": slo.e2e_s,
        "requests": n,
        "requests_finished": int(counts["requests_finished"]),
        "requests_dropped": int(counts["requests_dropped"]),
        "drop_reasons": json.dumps(
            {str(r): int(c) for r, c in reasons.iter_rows()}, sort_keys=False
        ),
        **latency_stats(req),
        "slo_attainment_ratio": _ratio(float(counts["met"]), n),
        "goodput_rps": _ratio(float(counts["met"]), horizon),
        "tokens_per_second": _ratio(tokens, horizon),
        "output_tokens_per_second": _ratio(float(counts["output"]), horizon),
        "prefix_hit_ratio": _ratio(float(counts["hit"]), float(counts["prompt"])),
        "preemptions": int(counts["preemptions"] or 0),
        "horizon_s": horizon,
        "gpu_seconds": gpu_s,
        "utilization_ratio": _ratio(float(busy or 0.0), float(alive or 0.0)),
        "energy_kwh": energy.energy_kwh if energy is not None else None,
        "energy_per_token_j": energy.j_per_token if energy is not None else None,
        "usd_per_gpu_h": energy.price_usd_per_gpu_hour if energy is not None else None,
        "cost_usd": energy.cost_usd if energy is not None else None,
        "cost_per_mtok_usd": energy.usd_per_million_tokens if energy is not None else None,
    }
