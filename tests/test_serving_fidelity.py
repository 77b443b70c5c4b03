"""``analyze fidelity``: the serving traces' published figures beside ours.

Expected values come from the sources and from the raw files, never from our output:

- Mooncake: the table of ``data/samples/mooncake/README-upstream.md`` (FAST'25 release
  README, "Workloads": requests, average input and output length), parsed here; ours is
  recomputed from the JSONL files with the stdlib.
- Azure LLM 2023: Splitwise (Patel et al., ISCA 2024), Sec. III "Number of tokens":
  median prompt 1500 (coding) / 1020 (conversation), median generated 13 / 129 (values
  not checked against the paper's text here: the row says ``source_checked`` false);
  ours is ``statistics.median`` of the CSV columns.
- BurstGPT (HPMLL/BurstGPT README "Schema"): a fixture with the v1.2 columns.
"""

from __future__ import annotations

import csv
import json
import re
import statistics
from pathlib import Path

import numpy as np
import polars as pl
from scipy import stats

from gpu_trace.store.parquet import ensure_layout
from tests.serving_common import SAMPLES, cli
from tests.serving_common import ingest_ok as ingest


def fidelity(store: Path) -> pl.DataFrame:
    code, out, err = cli("analyze", "fidelity", "--store", store, "-f", "json")
    assert code == 0, err
    return pl.DataFrame(json.loads(out))


def row(table: pl.DataFrame, dataset: str, figure: str) -> dict[str, object]:
    (found,) = table.filter(
        (pl.col("dataset") == dataset) & (pl.col("figure") == figure)
    ).to_dicts()
    return found


def readme_table() -> dict[str, tuple[int, int, int]]:
    """The Mooncake README's workload table: file stem -> (requests, input, output)."""
    text = (SAMPLES / "mooncake" / "README-upstream.md").read_text()
    out = {}
    for m in re.finditer(r"`traces/(\w+)_trace\.jsonl` \| ([\d,]+) \| ([\d,]+) \| ([\d,]+)", text):
        a, b, c = (int(x.replace(",", "")) for x in m.groups()[1:])
        out[m.group(1)] = (a, b, c)
    return out


def test_bundled_mooncake_and_azure_figures_are_in(tmp_path: Path) -> None:
    store = tmp_path / "s"
    ingest(store, "azure-llm", SAMPLES / "azure-llm")
    ingest(store, "mooncake", SAMPLES / "mooncake")
    table = fidelity(store)

    published = readme_table()
    assert set(published) >= {"conversation", "synthetic"}
    for dataset in ("conversation", "synthetic"):
        lines = (SAMPLES / "mooncake" / f"{dataset}_trace.jsonl").read_text().splitlines()
        recs = [json.loads(x) for x in lines if x.strip()]
        n, mean_in, mean_out = published[dataset]
        want = {
            "requests": (len(recs), n, 0.0),
            "mean input tokens": (statistics.fmean(r["input_length"] for r in recs), mean_in, 0.5),
            "mean output tokens": (
                statistics.fmean(r["output_length"] for r in recs),
                mean_out,
                0.5,
            ),
        }
        for figure, (ours, pub, half) in want.items():
            got = row(table, dataset, figure)
            assert got["ours"] == ours
            assert got["published"] == pub
            assert abs(ours - pub) <= half  # the README's figure holds on its files
            assert got["status"] == "IN"
            assert got["source_checked"] is True
            assert "Mooncake" in str(got["citation"])

    # Splitwise Sec. III: (service, prompt median, generated median, prompt tolerance)
    splitwise = {"code": (1500, 13, 50), "conv": (1020, 129, 0.5)}
    for dataset, (prompt, generated, half) in splitwise.items():
        with (SAMPLES / "azure-llm" / f"AzureLLMInferenceTrace_{dataset}.csv").open() as f:
            recs = list(csv.DictReader(f))
        med_in = statistics.median(int(r["ContextTokens"]) for r in recs)
        med_out = statistics.median(int(r["GeneratedTokens"]) for r in recs)
        for figure, ours, pub, tol in (
            ("median prompt tokens", med_in, prompt, half),
            ("median generated tokens", med_out, generated, 0.5),
        ):
            got = row(table, dataset, figure)
            assert got["ours"] == ours
            assert got["published"] == pub
            assert got["difference"] == ours - pub
            assert abs(ours - pub) <= tol
            assert got["status"] == "IN"
            assert got["source_checked"] is False  # said, not hidden
            assert "2311.18677" in str(got["citation"])

    # the toolagent trace is in the README's table but not bundled
    tool = row(table, "toolagent", "requests")
    assert tool["ours"] is None
    assert str(tool["status"]).startswith("not in this store: gpu-trace datasets fetch mooncake")


def test_missing_trace_is_a_not_in_this_store_row(tmp_path: Path) -> None:
    store = tmp_path / "s"
    ingest(store, "azure-llm", SAMPLES / "azure-llm")
    table = fidelity(store)
    for dataset in ("conversation", "synthetic"):
        got = row(table, dataset, "requests")
        assert got["ours"] is None
        assert str(got["status"]).startswith("not in this store: gpu-trace ingest mooncake")
    (burst,) = table.filter(pl.col("source") == "burstgpt").to_dicts()
    assert burst["status"] == (
        "not in this store: gpu-trace datasets fetch burstgpt, then gpu-trace ingest burstgpt DIR"
    )
    assert burst["ours"] is None


def test_synthetic_burstgpt_is_never_compared(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    code, _, err = cli("synth", "burstgpt", "--jobs", "500", "--seed", "1", "--out", raw)
    assert code == 0, err
    store = tmp_path / "s"
    ingest(store, "burstgpt", raw)
    table = fidelity(store)
    burst = table.filter(pl.col("source") == "burstgpt").to_dicts()
    assert len(burst) == 1
    assert str(burst[0]["status"]).startswith("synthetic only")
    assert burst[0]["ours"] is None
    # and the Mooncake / Azure rows are not judged on anything
    assert set(table["status"].to_list()) - {burst[0]["status"]} == {
        s for s in table["status"].to_list() if s.startswith("not in this store")
    }


def test_real_burstgpt_fits_are_ours_and_unverified(tmp_path: Path) -> None:
    # v1.2 columns (README "Schema"); 200 requests, gaps drawn from a gamma law
    rng = np.random.default_rng(7)
    gaps = np.round(rng.gamma(0.5, 4.0, 200), 3) + 0.001
    times = np.cumsum(gaps)
    tokens = [int(t) for t in rng.zipf(1.8, 200) + 10]
    path = tmp_path / "BurstGPT_1.csv"
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(
            ["Timestamp", "Session ID", "Elapsed time", "Model", "Request tokens",
             "Response tokens", "Total tokens", "Log Type"]
        )  # fmt: skip
        for i, (t, n) in enumerate(zip(times, tokens, strict=True)):
            w.writerow([f"{t:.3f}", i, "1.5", "ChatGPT", n, 20, n + 20, "Conversation log"])
    store = tmp_path / "s"
    ingest(store, "burstgpt", path)
    table = fidelity(store)
    burst = table.filter(pl.col("source") == "burstgpt")
    assert set(burst["status"]) == {"unverified"}
    assert burst["published"].null_count() == burst.height
    shape = row(table, "burstgpt_1", "inter-arrival gamma shape")["ours"]
    # an independent MLE on the file's own gaps (seconds, as written, location 0)
    x = np.diff(np.array([float(f"{t:.3f}") for t in times]))
    ref_shape, _, _ = stats.gamma.fit(x[x > 0], floc=0)
    assert abs(float(shape) - ref_shape) < 1e-3 * ref_shape
    zipf = row(table, "burstgpt_1", "request-token Zipf exponent (rank-frequency of token counts)")
    counts = sorted(
        (tokens.count(v) for v in set(tokens)), reverse=True
    )  # requests per distinct token count, by rank
    slope = np.polyfit(np.log(np.arange(1, len(counts) + 1)), np.log(counts), 1)[0]
    assert abs(float(zipf["ours"]) + slope) < 1e-9


def test_empty_store_is_one_error_line(tmp_path: Path) -> None:
    ensure_layout(tmp_path / "s")
    code, out, err = cli("analyze", "fidelity", "--store", tmp_path / "s")
    assert code != 0
    lines = (out + err).strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("error: no serving requests in the store")


def test_source_option_leaves_the_others_unselected_not_missing(tmp_path: Path) -> None:
    store = tmp_path / "s"
    ingest(store, "azure-llm", SAMPLES / "azure-llm")
    ingest(store, "mooncake", SAMPLES / "mooncake")
    code, out, err = cli(
        "analyze", "fidelity", "--store", store, "--source", "azure-llm", "-f", "json"
    )
    assert code == 0, err
    table = pl.DataFrame(json.loads(out))
    assert set(table.filter(pl.col("source") == "azure-llm")["status"]) == {"IN"}
    others = table.filter(pl.col("source") != "azure-llm")
    assert set(others["status"]) == {"not selected (--source azure-llm)"}
