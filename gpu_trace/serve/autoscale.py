"""The autoscaler's settings and rule (``--autoscale``), apart from the event loop.

Every ``interval`` seconds it reads one signal over the replicas that are up: ``queue``,
the mean number of waiting requests per replica at the tick; ``utilization``, the share
of the last interval the replicas spent in iterations. Above ``up`` (and below ``max``
replicas, counting those still starting) it starts one replica, which serves after the
cold start (model load); below ``down`` (and above ``min``) it drains the highest-index
replica: no new requests, down when its last one is done. One step per tick, so a
burst is followed, not chased.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpu_trace.errors import UsageError
from gpu_trace.values import unknown

METRICS = ("queue", "utilization")
DEFAULTS = {"queue": (4.0, 0.5), "utilization": (0.8, 0.3)}
"""(up, down) thresholds when not given: 4 / 0.5 waiting requests per replica; 80 / 30 %
busy."""


@dataclass(frozen=True)
class Autoscale:
    """Parsed ``--autoscale`` settings."""

    metric: str
    min: int
    max: int
    up: float
    down: float
    interval_s: float


def parse_autoscale(text: str, replicas: int) -> Autoscale | None:
    """``queue,min=2,max=8,up=4,down=0.5,interval=30`` (the metric may also be given as
    ``metric=queue``) -> :class:`Autoscale`; empty -> None. ``min`` defaults to
    ``--replicas``, ``max`` to twice ``min``.
    """
    metric = ""
    pairs: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        key, sep, value = part.partition("=")
        if not sep:
            metric = key.strip()
        else:
            pairs[key.strip().replace("-", "_")] = value.strip()
    metric = pairs.pop("metric", pairs.pop("on", metric))
    if not metric and not pairs:
        return None
    if metric not in METRICS:
        what = "--autoscale metric"
        raise unknown(what, metric, METRICS)
    known = {"min", "max", "up", "down", "interval"}
    extra = sorted(set(pairs) - known)
    if extra:
        what = "--autoscale option"
        raise unknown(what, extra[0], sorted(known))
    try:
        low = int(pairs.get("min", replicas))
        high = int(pairs.get("max", 2 * low))
        up = float(pairs.get("up", DEFAULTS[metric][0]))
        down = float(pairs.get("down", DEFAULTS[metric][1]))
        interval = float(pairs.get("interval", "30").removesuffix("s"))
    except ValueError:
        msg = f"--autoscale: {text!r} has a value that is not a number"
        raise UsageError(msg) from None
    if low < 1 or high < low or interval <= 0 or down > up:
        msg = f"--autoscale: {text!r} needs 1 <= min <= max, interval > 0 and down <= up"
        raise UsageError(msg)
    return Autoscale(metric, low, high, up, down, interval)


def decide(rule: Autoscale, signal: float, up: int, starting: int) -> int:
    """+1 (start one), -1 (drain one) or 0, for ``signal`` with ``up`` replicas serving
    and ``starting`` in their cold start.
    """
    if signal > rule.up and up + starting < rule.max:
        return 1
    if signal < rule.down and up > rule.min:
        return -1
    return 0
