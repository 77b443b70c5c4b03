"""The serving replay's speed cases (``bench/cases.py`` ``serve_*``) on tiny inputs: each
runs end to end and reports what it measured; the synthetic requests copy the shape of
the bundled Azure conversation file.

Format of that file from Azure/AzurePublicDataset ``AzureLLMInferenceDataset2023.md``
(data/samples/azure-llm/README-upstream-2023.md): one row per request, ``TIMESTAMP``,
``ContextTokens`` (prompt tokens), ``GeneratedTokens`` (output tokens).
"""

from __future__ import annotations

import csv
import math
import statistics
from pathlib import Path

import numpy as np
import pytest

from bench import cases
from bench.serve_speed import synthetic

CONV = Path("data/samples/azure-llm/AzureLLMInferenceTrace_conv.csv")


def _conv_rows() -> list[dict[str, str]]:
    with CONV.open(newline="") as fh:
        return list(csv.DictReader(fh))


def test_conv_case_runs_the_cli_and_simulate_on_a_small_file(tmp_path: Path) -> None:
    rows = _conv_rows()[:200]
    small = tmp_path / CONV.name  # the loader names the dataset (conv) from the file name
    with small.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    out = cases.serve_conv(small, replicas=2, pairs=(("round-robin", "vllm"),))
    assert out["requests"] == 200
    assert out["vllm_round_robin_finished"] == 200  # the CLI's summary
    assert out["vllm_round_robin_iterations"] > 0  # the in-process simulate() run
    for key in ("run_s", "run_cpu_s", "run_rss_mib", "simulate_s", "simulate_cpu_s"):
        assert out[f"vllm_round_robin_{key}"] > 0, key
    assert 0 < out["vllm_round_robin_utilization"] <= 1


def test_synthetic_case_reports_the_child_and_the_call() -> None:
    out = cases.serve_synthetic(1_000, replicas=2, rate=1.0)
    assert out["requests"] == out["finished"] == 1_000
    assert out["rss_peak_mib"] >= out["rss_before_mib"] > 0  # the child's own VmHWM
    assert out["process_cpu_s"] >= out["simulate_cpu_s"] > 0
    assert out["score_write_cpu_s"] > 0 and out["ttft_p50_s"] > 0


def test_synthetic_requests_copy_the_conv_files_shape() -> None:
    rows = _conv_rows()
    prompt = [int(r["ContextTokens"]) for r in rows]
    output = [int(r["GeneratedTokens"]) for r in rows]
    reqs = synthetic(20_000, rate=10.0, seed=3)
    assert len(reqs) == 20_000
    for drawn, real in ((reqs.input_tokens, prompt), (reqs.output_tokens, output)):
        assert min(real) <= drawn.min() and drawn.max() <= max(real)
        assert abs(float(np.median(drawn)) / statistics.median(real) - 1) < 0.05
        spread = statistics.pstdev(math.log(x) for x in real)
        assert float(np.std(np.log(drawn))) == pytest.approx(spread, rel=0.1)
    gaps = np.diff(reqs.arrival_s)
    assert reqs.arrival_s[0] == 0 and (gaps >= 0).all()
    assert float(gaps.mean()) == pytest.approx(0.1, rel=0.05)  # Poisson at 10/s
    again = synthetic(20_000, rate=10.0, seed=3)
    assert np.array_equal(again.arrival_s, reqs.arrival_s)
    assert np.array_equal(again.input_tokens, reqs.input_tokens)


def test_store_case_ingests_the_azure_format_and_reads_every_request_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SERVE_REQUESTS", "500")
    out = cases.serve_1m_store()
    assert out["requests"] == out["read_back"] == 500
    assert out["ingest_cpu_s"] > 0 and out["ingest_rss_mib"] > 0
