"""Sanity notes on a serving run: signs that its summary cannot show what a reader will
take it to show. Printed with the summary and stored in ``serve_runs.notes``, never
hidden (as :mod:`gpu_trace.replay.sanity` does for the job replay).

- **Every request dropped**: no latency was measured at all; the percentiles are empty
  and attainment 0 says nothing about the scheduler.
- **Attainment 0 or 1 on an idle cluster** (utilisation under 5 %): at 1, the layout is
  so large for the traffic that every choice meets the targets; at 0, the targets are
  out of reach even without contention (a single prefill is slower than the TTFT
  target): a comparison will show no difference either way.
- **Fewer than 100 requests**: a p99 of fewer than 100 values is the maximum or an
  interpolation next to it.
- **Roofline latency**: iteration times come from datasheet peaks and efficiency
  factors, not from a measurement on the hardware.
- **Requests beyond the model's context**: a prompt + output longer than the model's
  ``max_context`` could not be served by that model; the replay times them anyway (the
  trace's own model had a longer context: Mooncake's prompts average 12 k tokens, Llama-2
  holds 4 k), so a reader must know how many.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpu_trace.serve.latency.base import ModelSpec
    from gpu_trace.serve.workload import RequestSet

IDLE_UTILIZATION = 0.05
"""Below this busy share of the replicas, the cluster is idle for the sanity notes."""

FEW_REQUESTS = 100
"""Below this many requests, percentiles are noted as weak."""


def notes(summary: dict[str, Any], latency_model: str, engine_notes: list[str]) -> list[str]:
    """The notes for one run: the engine's own caveats first, then these checks on the
    summary (:func:`gpu_trace.serve.metrics.summary`).
    """
    out = list(engine_notes)
    n = int(summary.get("requests") or 0)
    if n == 0:
        out.append("the window holds no request: nothing was replayed")
        return out
    if not summary.get("requests_finished"):
        out.append(
            f"every request ({n}) was dropped ({summary.get('drop_reasons')}): no latency "
            "was measured; a larger GPU, more tensor parallelism or a smaller model"
        )
    util = summary.get("utilization_ratio")
    att = summary.get("slo_attainment_ratio")
    if util is not None and util < IDLE_UTILIZATION and att in (0.0, 1.0):
        why = (
            "every choice meets the targets on so large a layout; fewer replicas or "
            "more load tell choices apart"
            if att == 1.0
            else "the targets are out of reach even without contention"
        )
        out.append(f"SLO attainment {att:.0%} on an idle cluster (utilisation {util:.1%}): {why}")
    if n < FEW_REQUESTS:
        out.append(
            f"only {n} requests in the window: p90 / p99 are weak (a p99 of fewer than "
            f"{FEW_REQUESTS} values is near the maximum)"
        )
    if latency_model == "roofline":
        out.append(
            "latency model roofline: iteration times from datasheet peaks and efficiency "
            "factors, not measured on the hardware"
        )
    return out


def beyond_context(requests: RequestSet, model: ModelSpec) -> list[str]:
    """A note when requests need more tokens (prompt + output) than the model's context
    holds: replayed anyway, counted here.
    """
    n = len(requests)
    if not n:
        return []
    over = int(((requests.input_tokens + requests.output_tokens) > model.max_context).sum())
    if not over:
        return []
    return [
        f"{over} of {n} requests ({over / n:.1%}) need more than {model.name}'s "
        f"{model.max_context:,}-token context (prompt + output): replayed as if the model "
        "held them; choose a model with a longer context (gpu-trace serve models) to "
        "replay them faithfully"
    ]
