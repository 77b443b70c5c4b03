"""GPU time, energy and cost of a serving replay (issue 30, "Metrics";
/work/notes/serve_spec.md, Metrics), from the run's replica frame
(:data:`gpu_trace.serve.result.REPLICA_COLUMNS`), the GPU's spec and a price table.

- GPU-seconds = sum over replicas of ``gpus x (down_s - start_s)``, where a replica's
  ``start_s`` is when it was asked for: the autoscaler's tick for one it started (its
  model load, ``up_s - start_s``, costs GPU time), 0 for one serving from the start.
- Energy (J) = sum over replicas of ``gpus x (busy_s x tdp_w + (alive_s - busy_s) x
  idle_w)``: a two-level power model, full board power while an iteration runs and the
  idle draw otherwise (cold start included). Stated as such: real draw under decode is
  below the TDP (memory-bound kernels), so this is an upper estimate while busy.
- Energy per token = energy / tokens; cost per million tokens = GPU-hours x price /
  tokens x 1e6, tokens being the prompt + output tokens of the finished requests.

The price is USD per GPU-hour from :func:`gpu_trace.serve.hardware.price` (the shipped
``prices.toml``, a dated default, or the user's ``--price`` file).
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from gpu_trace.errors import GpuTraceError
from gpu_trace.serve.latency.base import GpuSpec


@dataclass(frozen=True)
class EnergyCost:
    """A run's GPU time, energy and cost; per-token figures are None without tokens."""

    gpu_seconds: float
    busy_gpu_seconds: float
    energy_j: float
    tokens: int
    price_usd_per_gpu_hour: float

    @property
    def gpu_hours(self) -> float:
        """GPU-seconds / 3600."""
        return self.gpu_seconds / 3600.0

    @property
    def energy_kwh(self) -> float:
        """Energy in kWh (J / 3.6e6)."""
        return self.energy_j / 3.6e6

    @property
    def j_per_token(self) -> float | None:
        """Joules per served (prompt + output) token."""
        return self.energy_j / self.tokens if self.tokens else None

    @property
    def cost_usd(self) -> float:
        """GPU-hours x price."""
        return self.gpu_hours * self.price_usd_per_gpu_hour

    @property
    def usd_per_million_tokens(self) -> float | None:
        """Cost per million served tokens."""
        return self.cost_usd / self.tokens * 1e6 if self.tokens else None

    def as_dict(self) -> dict[str, float | int | None]:
        """Every figure by name with its unit (for ``serve_runs`` and the report)."""
        return {
            "gpu_seconds": self.gpu_seconds,
            "gpu_hours": self.gpu_hours,
            "busy_gpu_seconds": self.busy_gpu_seconds,
            "energy_j": self.energy_j,
            "energy_kwh": self.energy_kwh,
            "tokens": self.tokens,
            "j_per_token": self.j_per_token,
            "price_usd_per_gpu_hour": self.price_usd_per_gpu_hour,
            "cost_usd": self.cost_usd,
            "usd_per_million_tokens": self.usd_per_million_tokens,
        }


def served_tokens(requests: pl.DataFrame) -> int:
    """Prompt + output tokens of the finished requests (dropped ones produced nothing)."""
    if requests.is_empty():
        return 0
    total = requests.filter(pl.col("status") == "finished").select(
        (pl.col("input_tokens") + pl.col("output_tokens")).sum()
    )
    return int(total.item() or 0)


def energy_cost(
    replicas: pl.DataFrame,
    gpu: GpuSpec,
    *,
    tokens: int,
    price_usd_per_gpu_hour: float,
) -> EnergyCost:
    """GPU time, energy and cost of the replicas of one run (module docstring)."""
    if price_usd_per_gpu_hour < 0 or tokens < 0:
        msg = "energy_cost: price and tokens must be >= 0"
        raise GpuTraceError(msg)
    if replicas.is_empty():
        return EnergyCost(0.0, 0.0, 0.0, tokens, price_usd_per_gpu_hour)
    start = pl.max_horizontal(pl.col("start_s"), pl.lit(0.0))
    alive = pl.max_horizontal(pl.col("down_s") - start, pl.lit(0.0))
    busy = pl.min_horizontal(pl.col("busy_s"), alive)
    gpus = pl.col("gpus").cast(pl.Float64)
    sums = replicas.select(
        (gpus * alive).sum().alias("gpu_s"),
        (gpus * busy).sum().alias("busy_s"),
        (gpus * (busy * gpu.tdp_w + (alive - busy) * gpu.idle_w)).sum().alias("energy_j"),
    ).row(0)
    return EnergyCost(
        gpu_seconds=float(sums[0]),
        busy_gpu_seconds=float(sums[1]),
        energy_j=float(sums[2]),
        tokens=tokens,
        price_usd_per_gpu_hour=price_usd_per_gpu_hour,
    )
