"""Published findings of serving systems, reproduced in direction on the real bundled
traces (issue 30, "Correctness"), through the command a user runs.

- DistServe (Zhong et al., OSDI'24, §2.2-2.3 and §6) and Splitwise (Patel et al.,
  ISCA'24, §III-IV): colocating prefill and decode makes long prompts stall the
  decoding requests (prefill-decode interference), so under a tight time-per-output-
  token target a disaggregated layout of the same GPUs serves more requests within both
  targets (goodput). The Azure 2023 *code* trace is the long-prompt, short-output one
  (Splitwise §III: coding prompts are long, generations short).
- Mooncake (Qin et al., FAST'25, §4-5) and SGLang's cache-aware routing: sending a
  request where its prefix is cached raises the prefix-cache hit rate over a
  load-only router, on Mooncake's conversation trace whose turns share prefixes.

The sizes are ours (a roofline latency model); the tests assert the direction with a
margin, and docs/serving-replay.md records the figures.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.serving_common import SAMPLES, cli, ingest_ok


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("findings") / "store"
    ingest_ok(path, "azure-llm", SAMPLES / "azure-llm")
    ingest_ok(path, "mooncake", SAMPLES / "mooncake" / "conversation_trace.jsonl")
    return path


def compare(store: Path, *args: str) -> dict[str, dict[str, object]]:
    code, out, err = cli("serve", "compare", "--store", store, "--json", *args)
    assert code == 0, err
    return {str(r["disaggregate"]) + "/" + str(r["router"]): r for r in json.loads(out)}


def test_disaggregation_helps_long_prompts_under_a_tight_tpot(store: Path) -> None:
    runs = compare(
        store,
        "--source", "azure-llm", "--dataset", "code", "--replicas", "4",
        "--disaggregate", "0,2:2", "--slo", "ttft=2s,tpot=20ms",
    )  # fmt: skip
    together, split = runs["0/round-robin"], runs["2:2/round-robin"]
    assert together["gpus"] == split["gpus"] == 4
    # interference: the colocated layout's slow tokens (prefills stall decodes)
    assert float(split["tpot_p90_s"]) < 0.5 * float(together["tpot_p90_s"])
    # goodput (DistServe: requests/s within both targets) rises with the split
    assert float(split["goodput_rps"]) > 1.1 * float(together["goodput_rps"])


def test_prefix_affinity_raises_the_hit_rate_on_mooncake_conversation(store: Path) -> None:
    runs = compare(
        store,
        "--source", "mooncake", "--dataset", "conversation", "--model", "mistral-7b",
        "--gpu", "h200", "--replicas", "8", "--routers", "round-robin,prefix-affinity",
    )  # fmt: skip
    rr, aff = runs["0/round-robin"], runs["0/prefix-affinity"]
    assert float(aff["prefix_hit_ratio"]) > 2 * float(rr["prefix_hit_ratio"]) > 0
    assert float(aff["ttft_p50_s"]) < float(rr["ttft_p50_s"])


def test_plan_on_the_bundled_mooncake_sample_finds_the_fewest_gpus(store: Path) -> None:
    """``serve plan`` with the real engine: the answer meets the target, the layout with
    one replica fewer (tried by the bisection) does not, and every point tried is listed.
    """
    code, out, err = cli(
        "serve", "plan", "--source", "mooncake", "--dataset", "conversation",
        "--model", "mistral-7b", "--gpu", "h200", "--duration", "10m",
        "--attainment", "0.9", "--tp", "1", "--store", store, "--json",
    )  # fmt: skip
    assert code == 0, err
    tried = {int(r["replicas"]): r for r in json.loads(out)}
    meets = sorted(n for n, r in tried.items() if r["meets"])
    best = meets[0]
    assert float(tried[best]["slo_attainment_ratio"]) >= 0.9
    assert best - 1 in tried and not tried[best - 1]["meets"]
    assert f"fewest GPUs: {best} " in err or f"fewest GPUs: {best} " in out
