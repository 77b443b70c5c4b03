"""``analyze fidelity``: the serving traces' published figures beside ours, computed from
the store with the serving analyses' own functions, each with its source, the stated
tolerance and IN / OUT.

The table has the shape of ``replay fidelity`` (check, figure, ours, published, unit,
tolerance, status, note) plus ``difference`` and ``source``; it lives here, not in
replay, because nothing is simulated (and the analyses layer never imports replay).

**Tolerance** is the precision the source states its figure with: a count is exact; a
figure printed as an integer (Mooncake's mean of 12,035 tokens) is judged within half a
unit; a figure rounded to two significant digits (Splitwise's "1500") within half of its
last digit (1450-1550).

**Only real data is compared.** A trace whose ``ingests`` rows carry a ``generator``
(``gpu-trace synth``) is never judged against a published figure: its row says so.
A trace not in the store gives one row naming the command that brings it.

**Sources** (``source_checked`` says whether the figure was read in the source itself
when this table was written):

- Mooncake FAST'25 release README (kvcache-ai/Mooncake, ``FAST25-release/traces``),
  bundled here as ``data/samples/mooncake/README-upstream.md``: its table of requests,
  average input and output length per trace. Checked.
- Splitwise (Patel et al., ISCA 2024), Section III "Number of tokens" (text beside
  Fig. 3, "Distribution for prompt and generated tokens"): median prompt 1500 tokens
  for coding and 1020 for conversation, median generated 13 and 129. The paper's text
  could not be retrieved while this was written (only the abstract and the Fig. 3
  caption were); the values are as recalled from that section: **not checked**.
- BurstGPT (Wang et al., KDD 2025; HPMLL/BurstGPT README): the README shows the token
  and arrival distributions as figures only, with no fitted parameter; the paper says
  request tokens follow a Zipf law and arrivals a gamma process, but no parameter value
  was found in a text available here. Ours are shown, ``published`` is null and the
  status is ``unverified``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import polars as pl

from gpu_trace.analyses.serving_arrivals import interarrival_fits
from gpu_trace.analyses.serving_popularity import popularity
from gpu_trace.analyses.serving_tokens import token_lengths
from gpu_trace.errors import GpuTraceError
from gpu_trace.plugins import AnalysisPlugin
from gpu_trace.store.scan import scan

MOONCAKE_URL = "https://github.com/kvcache-ai/Mooncake/tree/main/FAST25-release/traces"
SPLITWISE_URL = "https://arxiv.org/abs/2311.18677"
BURSTGPT_URL = "https://github.com/HPMLL/BurstGPT"


@dataclass(frozen=True)
class Published:
    """One published figure: where it is, what it is, and how precisely it is stated."""

    check: str
    source: str
    dataset: str
    figure: str
    column: str
    """The column of :func:`token_lengths` (or ``requests``) that is ours."""
    value: float
    unit: str
    half_width: float
    """Allowed |ours - published| (0: exact)."""
    tolerance: str
    citation: str
    checked: bool


_MOONCAKE = "Mooncake FAST'25 release README, trace table; " + MOONCAKE_URL
_SPLITWISE = (
    "Patel et al., Splitwise, ISCA 2024, Sec. III 'Number of tokens' (Fig. 3); " + SPLITWISE_URL
)
_INT = "+-0.5 (printed as an integer)"

PUBLISHED: tuple[Published, ...] = (
    Published("mooncake-table", "mooncake", "conversation", "requests", "requests",
              12031, "count", 0, "exact", _MOONCAKE, True),
    Published("mooncake-table", "mooncake", "conversation", "mean input tokens",
              "input_tokens_mean", 12035, "tokens", 0.5, _INT, _MOONCAKE, True),
    Published("mooncake-table", "mooncake", "conversation", "mean output tokens",
              "output_tokens_mean", 343, "tokens", 0.5, _INT, _MOONCAKE, True),
    Published("mooncake-table", "mooncake", "toolagent", "requests", "requests",
              23608, "count", 0, "exact", _MOONCAKE, True),
    Published("mooncake-table", "mooncake", "toolagent", "mean input tokens",
              "input_tokens_mean", 8596, "tokens", 0.5, _INT, _MOONCAKE, True),
    Published("mooncake-table", "mooncake", "toolagent", "mean output tokens",
              "output_tokens_mean", 182, "tokens", 0.5, _INT, _MOONCAKE, True),
    Published("mooncake-table", "mooncake", "synthetic", "requests", "requests",
              3993, "count", 0, "exact", _MOONCAKE, True),
    Published("mooncake-table", "mooncake", "synthetic", "mean input tokens",
              "input_tokens_mean", 15325, "tokens", 0.5, _INT, _MOONCAKE, True),
    Published("mooncake-table", "mooncake", "synthetic", "mean output tokens",
              "output_tokens_mean", 149, "tokens", 0.5, _INT, _MOONCAKE, True),
    Published("splitwise-medians", "azure-llm", "code", "median prompt tokens",
              "input_tokens_p50", 1500, "tokens", 50, "+-50 (two significant digits)",
              _SPLITWISE, False),
    Published("splitwise-medians", "azure-llm", "code", "median generated tokens",
              "output_tokens_p50", 13, "tokens", 0.5, _INT, _SPLITWISE, False),
    Published("splitwise-medians", "azure-llm", "conv", "median prompt tokens",
              "input_tokens_p50", 1020, "tokens", 0.5, _INT, _SPLITWISE, False),
    Published("splitwise-medians", "azure-llm", "conv", "median generated tokens",
              "output_tokens_p50", 129, "tokens", 0.5, _INT, _SPLITWISE, False),
)  # fmt: skip
"""The figures judged IN / OUT (Mooncake's table; Splitwise's medians of the 2023 trace)."""

FETCH = {
    "azure-llm": "gpu-trace ingest azure-llm data/samples/azure-llm (bundled)",
    "mooncake": "gpu-trace ingest mooncake data/samples/mooncake (bundled)",
    "mooncake/toolagent": "gpu-trace datasets fetch mooncake, then gpu-trace ingest mooncake DIR",
    "burstgpt": "gpu-trace datasets fetch burstgpt, then gpu-trace ingest burstgpt DIR",
}
"""How a trace that is not in the store gets there."""

BURSTGPT_NOTE = (
    "BurstGPT publishes these fits as figures without parameters (README; KDD'25 paper: "
    "Zipf request tokens, gamma arrivals): no published value to compare, ours shown"
)


@dataclass(frozen=True)
class Row:
    """One line of the table (the shape of ``replay fidelity``'s, plus the source)."""

    check: str
    source: str
    dataset: str
    figure: str
    ours: float | None
    published: float | None
    difference: float | None
    unit: str
    tolerance: str
    status: str
    """IN / OUT / unverified / not in this store: ... / synthetic only: ..."""
    source_checked: bool
    citation: str
    note: str = ""


SCHEMA = {
    "check": pl.String,
    "source": pl.String,
    "dataset": pl.String,
    "figure": pl.String,
    "ours": pl.Float64,
    "published": pl.Float64,
    "difference": pl.Float64,
    "unit": pl.String,
    "tolerance": pl.String,
    "status": pl.String,
    "source_checked": pl.Boolean,
    "citation": pl.String,
    "note": pl.String,
}


def synthetic_traces(store: Path | None) -> set[tuple[str, str]]:
    """(source, dataset) of requests that a generator wrote (``ingests.generator`` set)."""
    if store is None:
        return set()
    rows = (
        scan(store, "ingests")
        .filter((pl.col("table") == "requests") & pl.col("generator").is_not_null())
        .select("source", "dataset")
        .unique()
        .collect()
    )
    return {(s, d) for s, d in rows.iter_rows()}


def _absent(source: str, dataset: str | None, synthetic: bool) -> str:
    where = source if dataset is None else f"{source}/{dataset}"
    if synthetic:
        return f"synthetic only: {where} here was written by gpu-trace synth, not compared"
    return f"not in this store: {FETCH.get(where, FETCH[source])}"


def _judged(requests: pl.LazyFrame, synthetic: set[tuple[str, str]]) -> list[Row]:
    """Mooncake's table and Splitwise's medians: ours from :func:`token_lengths`."""
    sources = [p.source for p in PUBLISHED]
    real = requests.filter(pl.col("source").is_in(sources))
    ours = {(r["source"], r["dataset"]): r for r in token_lengths(real).collect().to_dicts()}
    rows: list[Row] = []
    for p in PUBLISHED:
        got = ours.get((p.source, p.dataset))
        base = Row(
            check=p.check,
            source=p.source,
            dataset=p.dataset,
            figure=p.figure,
            ours=None,
            published=p.value,
            difference=None,
            unit=p.unit,
            tolerance=p.tolerance,
            status="",
            source_checked=p.checked,
            citation=p.citation,
        )
        if (p.source, p.dataset) in synthetic or got is None:
            status = _absent(p.source, p.dataset, (p.source, p.dataset) in synthetic)
            rows.append(replace(base, status=status))
            continue
        value = float(got[p.column])
        diff = value - p.value
        status = "IN" if abs(diff) <= p.half_width else "OUT"
        note = "" if p.checked else "published value not checked against the paper's text"
        rows.append(replace(base, ours=value, difference=diff, status=status, note=note))
    return rows


def _burstgpt(requests: pl.LazyFrame, synthetic: set[tuple[str, str]]) -> list[Row]:
    """BurstGPT's fitted laws, ours on the real files only (never on synthetic ones)."""
    burst = requests.filter(pl.col("source") == "burstgpt")
    datasets = burst.select("dataset").unique().collect()["dataset"].sort().to_list()
    base = Row(
        check="burstgpt-fits",
        source="burstgpt",
        dataset="-",
        figure="request-token Zipf exponent",
        ours=None,
        published=None,
        difference=None,
        unit="",
        tolerance="",
        status="unverified",
        source_checked=False,
        citation="Wang et al., BurstGPT, KDD 2025; README figures; " + BURSTGPT_URL,
        note=BURSTGPT_NOTE,
    )
    real = [d for d in datasets if ("burstgpt", d) not in synthetic]
    if not real:
        status = _absent("burstgpt", None, bool(datasets))
        return [replace(base, status=status, note="")]
    kept = burst.filter(pl.col("dataset").is_in(real))
    rows: list[Row] = []
    zipf = (
        popularity(kept.filter(pl.col("input_tokens") > 0), "input_tokens")
        .filter(pl.col("rank") == 1)
        .collect()
    )
    for r in zipf.iter_rows(named=True):
        rows.append(
            replace(base, dataset=r["dataset"], figure="request-token Zipf exponent (rank-"
                    "frequency of token counts)", ours=r["zipf_exponent"])
        )  # fmt: skip
    fits = interarrival_fits(kept).filter(pl.col("distribution").is_in(["gamma", "weibull"]))
    for r in fits.iter_rows(named=True):
        for what, unit in (("shape", ""), ("scale_s", "s")):
            rows.append(
                replace(base, dataset=r["dataset"],
                        figure=f"inter-arrival {r['distribution']} {what.removesuffix('_s')}",
                        ours=r[what], unit=unit, note=r["caveat"] or BURSTGPT_NOTE)
            )  # fmt: skip
    return rows


def fidelity(
    requests: pl.LazyFrame, store: Path | None = None, sources: tuple[str, ...] = ()
) -> pl.DataFrame:
    """One row per published figure (see the module docstring for the sources): ours
    from ``requests`` with the serving analyses' functions, the difference and IN / OUT
    of the stated tolerance; a trace the store lacks, or holds only synthetic, says so.
    """
    synthetic = synthetic_traces(store)
    rows = _judged(requests, synthetic) + _burstgpt(requests, synthetic)
    if sources:  # a trace left out by --source is not missing from the store
        unselected = f"not selected (--source {','.join(sources)})"
        rows = [r if r.source in sources else replace(r, status=unselected) for r in rows]
    return pl.DataFrame([asdict(r) for r in rows], schema=SCHEMA)


def _run(inputs: Any, options: Any) -> pl.DataFrame:
    if inputs.requests.select(pl.len()).collect().item() == 0:
        msg = (
            "no serving requests in the store: nothing to compare with the published "
            f"figures (e.g. {FETCH['mooncake']})"
        )
        raise GpuTraceError(msg)
    return fidelity(inputs.requests, inputs.store, tuple(inputs.sources))


PLUGIN = AnalysisPlugin(
    name="fidelity",
    title="Published serving figures",
    help="The serving traces' published figures (Mooncake's trace table, Splitwise's "
    "Azure 2023 medians, BurstGPT's fits) beside ours from the store, with the source, "
    "the stated tolerance and IN / OUT.",
    run=_run,
    # reads ``requests`` but declares no ``needs``: a check of published figures, not a
    # section of the serving report pages (which take every analysis that needs
    # requests); its result is never empty (an empty store is an error, in ``_run``)
    needs_jobs=False,
    rank=240,
    glossary={
        "check": ("check", "Which published table or statement the figure comes from."),
        "figure": ("figure", "What the figure measures."),
        "ours": ("ours", "Our value, computed from the store by the serving analyses."),
        "published": ("published", "The value as published (null: none stated)."),
        "difference": ("difference", "ours - published."),
        "unit": ("unit", "Unit of ours and published (count, tokens, s; empty: none)."),
        "note": ("note", "Why a figure is unverified, or what the fit left out."),
        "tolerance": ("tolerance", "The precision the source states its figure with."),
        "status": (
            "status",
            "IN / OUT of the tolerance; unverified (no published value to judge); not in "
            "this store; not selected (--source); synthetic only (never judged).",
        ),
        "source_checked": (
            "source checked",
            "Whether the published value was read in the source itself (false: recalled, "
            "to be checked).",
        ),
        "citation": ("citation", "Paper, section / table and URL."),
    },
)
