"""The serving analyses on hand-worked fixtures and on the bundled real files.

Fixtures are raw files in the upstream formats, ingested by the real loaders:

- Mooncake (``data/samples/mooncake/README-upstream.md``, "Trace Format"): JSON lines with
  ``timestamp`` (ms since the trace's start), ``input_length``, ``output_length`` and
  ``hash_ids`` (prefix blocks of 512 tokens; equal ids are the same block). Its table:
  conversation 12,031 requests, average input 12,035 and output 343 tokens; synthetic
  3,993 / 15,325 / 149.
- BurstGPT (HPMLL/BurstGPT README, "Schema"): ``Timestamp`` s from the first day's
  0:00, ``Session ID``, ``Elapsed time`` (s, submission to complete response), ``Model``,
  ``Request tokens``, ``Response tokens``, ``Total tokens``, ``Log Type``.
- GenTD26 (alibaba/clusterdata ``cluster-trace-v2026-GenAI/README.md``): the eleven
  columns of ``lora_request_trace.csv``, ``checkpoint_model_version_id`` the model.

Every expected value is worked out in the comments, by hand or by an independent
reference (a plain ``OrderedDict`` LRU cache, the stdlib ``statistics`` module).
"""

from __future__ import annotations

import itertools
import json
import math
import statistics
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest

import gpu_trace as gt
from gpu_trace.analyses.serving_prefix import hit_counts, stack_distances
from tests.serving_common import SAMPLES, cli
from tests.serving_common import ingest_ok as ingest


def mooncake(path: Path, rows: list[tuple[int, int, int, list[int]]]) -> Path:
    """A Mooncake JSONL file: (timestamp ms, input_length, output_length, hash_ids)."""
    path.write_text(
        "".join(
            json.dumps({"timestamp": t, "input_length": i, "output_length": o, "hash_ids": h})
            + "\n"
            for t, i, o, h in rows
        )
    )
    return path


# Ten arrivals (ms): gaps (s) 1, 1, 2, 1, 3, 1, 1, 4, 1 -> 9 gaps, sum 15, mean 15/9.
# Sum of squares 35 -> population variance 35/9 - (15/9)^2 = 10/9, so
# CV = sqrt(10/9) / (15/9) = sqrt(10) / 5 = 0.632456.
# 5 s windows from the first arrival: [0,5) 4 arrivals (0, 1, 2, 4 s), [5,10) 3 (5, 8, 9),
# [10,15) 2 (10, 14), [15,20) 1 (15): mean 2.5, population variance
# (1.5^2 + 0.5^2 + 0.5^2 + 1.5^2) / 4 = 1.25 -> index of dispersion 0.5.
TEN_MS = [0, 1000, 2000, 4000, 5000, 8000, 9000, 10000, 14000, 15000]
# input 100..1000 step 100, output = 2 x input: Pearson and Spearman 1; p50 (linear) 550;
# p90 at position 0.9 x 9 = 8.1: 900 + 0.1 x 100 = 910.
TEN = [(t, 100 * (k + 1), 200 * (k + 1), [k]) for k, t in enumerate(TEN_MS)]


@pytest.fixture(scope="module")
def ten(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ten")
    store = root / "store"
    ingest(store, "mooncake", mooncake(root / "ten_trace.jsonl", TEN))
    return store


def test_burstiness_cv_and_dispersion_by_hand(ten: Path) -> None:
    row = gt.open(ten).analyze("request-burstiness", windows=("5s",)).row(0, named=True)
    assert row["requests"] == 10 and row["span_s"] == 15.0
    assert row["rate_per_s"] == pytest.approx(10 / 15)
    assert row["interarrival_mean_s"] == pytest.approx(15 / 9)
    assert row["interarrival_cv"] == pytest.approx(math.sqrt(10) / 5)
    gaps = [(b - a) / 1000 for a, b in itertools.pairwise(TEN_MS)]
    assert row["interarrival_cv"] == pytest.approx(statistics.pstdev(gaps) / statistics.mean(gaps))
    assert row["windows"] == 4 and row["mean_per_window"] == 2.5
    assert row["dispersion_index"] == pytest.approx(0.5)
    assert row["caveat"] == "too few requests (10) for burstiness statistics"


def test_request_rate_counts_every_window(ten: Path) -> None:
    frame = gt.open(ten).analyze("request-rate", resolutions=("5s",))
    assert frame["requests"].to_list() == [4, 3, 2, 1]
    assert frame["requests_per_s"].to_list() == pytest.approx([0.8, 0.6, 0.4, 0.2])


def test_rate_cli_takes_a_width_list(ten: Path) -> None:
    code, out, err = cli(
        "analyze", "request-rate", "--resolutions", "5s,10s", "--store", ten, "-f", "csv"
    )
    assert code == 0, err
    # 10 s windows: [0,10) 7 arrivals, [10,20) 3
    lines = [ln.split(",") for ln in out.strip().splitlines()[1:]]
    assert [(ln[2], ln[5]) for ln in lines] == [
        ("5s", "4"), ("5s", "3"), ("5s", "2"), ("5s", "1"), ("10s", "7"), ("10s", "3"),
    ]  # fmt: skip
    code, _, err = cli("analyze", "request-rate", "--resolutions", "5 parsecs", "--store", ten)
    assert code == 2 and err.count("\n") <= 2 and "Traceback" not in err


def test_token_percentiles_and_correlation_by_hand(ten: Path) -> None:
    row = gt.open(ten).analyze("request-tokens").row(0, named=True)
    assert row["input_tokens_mean"] == 550 and row["input_tokens_p50"] == 550
    assert row["input_tokens_p90"] == pytest.approx(910)
    assert row["output_tokens_p90"] == pytest.approx(1820)
    assert row["pearson"] == pytest.approx(1) and row["spearman"] == pytest.approx(1)
    assert row["caveat"] == "only 10 requests with token counts: correlation and p99 unreliable"


def test_token_demand_prefill_and_decode(ten: Path) -> None:
    frame = gt.open(ten).analyze("token-demand", freq="5s")
    # [0,5): requests 1..4 -> input 100+200+300+400 = 1000 tokens / 5 s = 200 tokens/s
    first = frame.row(0, named=True)
    assert first["prefill_tokens"] == 1000 and first["prefill_tokens_per_s"] == 200
    assert first["decode_tokens"] == 2000 and first["decode_tokens_per_s"] == 400
    assert frame["prefill_tokens"].sum() == 5500


def test_relative_trace_says_its_profile_is_not_diurnal(ten: Path) -> None:
    frame = gt.open(ten).analyze("request-profile")
    assert frame["caveat"].to_list() == ["no absolute time, diurnal profile not meaningful"]
    assert frame["clock"].to_list() == ["since trace start"]


def test_too_few_gaps_for_a_fit_say_so(ten: Path) -> None:
    frame = gt.open(ten).analyze("interarrival-fit")
    assert frame.height == 3 and frame["shape"].null_count() == 3
    assert set(frame["caveat"]) == {"too few inter-arrival times (9) for a fit"}


def test_exponential_fit_is_the_sample_mean_and_ks_by_hand(tmp_path: Path) -> None:
    """The exponential MLE scale is the sample mean (closed form); the KS statistic is
    max over the sorted sample of max(i/n - F(x_i), F(x_i) - (i-1)/n)."""
    gaps_ms = [(k * 37) % 23 * 100 + 50 for k in range(80)]  # deterministic, all > 0
    times = np.cumsum([0, *gaps_ms]).tolist()
    rows = [(int(t), 10, 10, [k]) for k, t in enumerate(times)]
    store = tmp_path / "store"
    ingest(store, "mooncake", mooncake(tmp_path / "fit_trace.jsonl", rows))
    frame = gt.open(store).analyze("interarrival-fit")
    expo = frame.filter(frame["distribution"] == "exponential").row(0, named=True)
    x = sorted(g / 1000 for g in gaps_ms)
    mean = sum(x) / len(x)
    assert expo["scale_s"] == pytest.approx(mean) and expo["gaps"] == 80
    n = len(x)
    cdf = [1 - math.exp(-v / mean) for v in x]
    d = max(max((i + 1) / n - f, f - i / n) for i, f in enumerate(cdf))
    assert expo["ks_stat"] == pytest.approx(d)
    assert expo["loglik"] == pytest.approx(-n * math.log(mean) - n)
    assert frame["best"].sum() == 1 and frame["caveat"].null_count() == 3


# The 12-reference block sequence A B A C B A D A B C D A, as four requests in arrival
# order (blocks in prompt order): [A B] [A C B] [A D A] [B C D A] (A=1, B=2, C=3, D=4).
# LRU stack distances (1 + distinct blocks since the previous reference):
#   ref 3 A (prev 1, between {B}) 2; ref 5 B (prev 2, {A C}) 3; ref 6 A (prev 3, {C B}) 3;
#   ref 8 A (prev 6, {D}) 2; ref 9 B (prev 5, {A D}) 3; ref 10 C (prev 4, {B A D}) 4;
#   ref 11 D (prev 7, {A B C}) 4; ref 12 A (prev 8, {B C D}) 4; refs 1, 2, 4, 7 are cold.
# Hits at capacity 1: 0; 2: refs 3 and 8 = 2; 3: + 5, 6, 9 = 5; 4: + 10, 11, 12 = 8.
SEQ = [[1, 2], [1, 3, 2], [1, 4, 1], [2, 3, 4, 1]]
# R4 has 2036 input tokens: its last block holds 2036 - 3 x 512 = 500 tokens.
BLOCK_ROWS = [(1000 * k, 512 * len(h) - (12 if k == 3 else 0), 5, h) for k, h in enumerate(SEQ)]


@pytest.fixture(scope="module")
def blocks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("blocks")
    store = root / "store"
    ingest(store, "mooncake", mooncake(root / "seq_trace.jsonl", BLOCK_ROWS))
    return store


def test_lru_hit_rates_by_hand(blocks: Path) -> None:
    frame = gt.open(blocks).analyze("prefix-cache", capacities=(1, 2, 3, 4))
    assert frame["hits"].to_list() == [0, 2, 5, 8]
    assert frame["hit_rate"].to_list() == [0, 2 / 12, 5 / 12, 8 / 12]
    assert set(frame["unlimited_hit_rate"]) == {8 / 12}
    assert set(frame["block_refs"]) == {12} and set(frame["unique_blocks"]) == {4}
    # capacity 4 holds all four distinct blocks
    assert frame["caveat"].to_list()[-1].startswith("capacity holds every distinct block")


def test_capacity_bytes_from_kv_size(blocks: Path) -> None:
    frame = gt.open(blocks).analyze("prefix-cache", capacities=(2,), kv_bytes_per_token=1024.0)
    assert frame["capacity_bytes"].to_list() == [2 * 512 * 1024]  # blocks x 512 tokens x bytes
    code, _, err = cli("analyze", "prefix-cache", "--capacities", "0", "--store", blocks)
    assert code == 2 and "positive" in err


def test_prefix_reuse_by_hand(blocks: Path) -> None:
    row = gt.open(blocks).analyze("prefix-reuse").row(0, named=True)
    assert row["block_refs"] == 12 and row["unique_blocks"] == 4
    assert row["reusable_share"] == pytest.approx(8 / 12)
    # reusable refs: 7 full blocks + R4's last (500 tokens) of 1024 + 1536 + 1536 + 2036
    assert row["reusable_token_share"] == pytest.approx((7 * 512 + 500) / 6132)
    # first blocks A, A, A, B: the last three were seen before
    assert row["shared_first_block_share"] == pytest.approx(3 / 4)


def _lru_hits(seq: list[int], capacity: int) -> int:
    """A plain LRU cache, the independent reference."""
    cache: OrderedDict[int, None] = OrderedDict()
    hits = 0
    for b in seq:
        if b in cache:
            hits += 1
            cache.move_to_end(b)
        else:
            cache[b] = None
            if len(cache) > capacity:
                cache.popitem(last=False)
    return hits


def test_stack_distances_match_an_lru_cache_on_random_sequences() -> None:
    rng = np.random.default_rng(7)
    for _ in range(300):
        seq = rng.integers(0, rng.integers(1, 20), rng.integers(1, 80)).astype(np.int64)
        caps = [1, 2, 3, 5, 8, 13, 40]
        got = hit_counts(stack_distances(seq), caps)
        assert got == [_lru_hits(seq.tolist(), c) for c in caps], seq.tolist()


# --------------------------------------------------------------------------- BurstGPT

# s1: arrivals 0 (Elapsed 2 s), 10 (3 s), 30; s2: 12. Think time before turn 2 of s1:
# 10 - (0 + 2) = 8 s; before turn 3: 30 - (10 + 3) = 17 s. Input tokens by turn (context
# growth): turn 1 (100 + 50) / 2 = 75, turn 2 200, turn 3 300.
BURST = [
    "Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type",
    "0,s1,2,ChatGPT,100,50,150,Conversation log",
    "1,,1,GPT-4,10,5,15,API log",
    "10,s1,3,ChatGPT,200,60,260,Conversation log",
    "12,s2,1,ChatGPT,50,10,60,Conversation log",
    "30,s1,1,ChatGPT,300,70,370,Conversation log",
]


def burstgpt_file(folder: Path) -> Path:
    path = folder / "BurstGPT_1.csv"
    path.write_text("\n".join(BURST) + "\n")
    return path


@pytest.fixture(scope="module")
def burst(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("burst")
    store = root / "store"
    ingest(store, "burstgpt", burstgpt_file(root))
    return store


def test_sessions_turns_think_time_and_context_by_hand(burst: Path) -> None:
    frame = gt.open(burst).analyze("sessions")
    assert frame["turn"].to_list() == [1, 2, 3]
    assert frame["sessions"].to_list() == [2, 1, 1]
    assert frame["session_share"].to_list() == [1.0, 0.5, 0.5]
    assert frame["input_tokens_mean"].to_list() == [75, 200, 300]
    assert frame["think_s_p50"].to_list() == [None, 8.0, 17.0]
    assert frame["think_basis"].to_list()[1:] == ["after the previous response"] * 2
    assert frame["overlap_share"].to_list() == [None, 0.0, 0.0]


def test_latency_by_load_by_hand(burst: Path) -> None:
    """Arrivals in the 10 s before each request, itself included, (t - 10, t]:
    t=0: 1; t=1: 2; t=10: {1, 10} 2; t=12: {10, 12} 2; t=30: 1. Load 1: Elapsed 2 and 1;
    load 2-3: Elapsed 1, 3, 1."""
    frame = gt.open(burst).analyze("request-latency", by="load", window="10s")
    assert frame["bucket"].to_list() == ["1", "2-3"]
    assert frame["requests"].to_list() == [2, 3]
    assert frame["latency_mean_s"].to_list() == pytest.approx([1.5, 5 / 3])
    assert frame["latency_p50_s"].to_list() == [1.5, 1.0]
    assert set(frame["latency_kind"]) == {"end_to_end"}


def test_latency_by_tokens(burst: Path) -> None:
    # totals 150 (128-255), 15 (8-15), 260 and 370 (256-511), 60 (32-63)
    frame = gt.open(burst).analyze("request-latency", by="tokens")
    assert frame["bucket"].to_list() == ["8-15", "32-63", "128-255", "256-511"]
    assert frame["requests"].to_list() == [1, 1, 1, 2]


def test_burstgpt_profile_hour_is_local_time_of_day(burst: Path) -> None:
    frame = gt.open(burst).analyze("request-profile")
    assert frame["clock"].to_list() == ["local time of day (day 1 = first day)"]
    weekly = gt.open(burst).analyze("request-profile", weekly=True)
    assert weekly["caveat"].to_list() == ["no calendar date, weekly profile not meaningful"]


def test_no_sessions_says_why(ten: Path) -> None:
    code, _out, err = cli("analyze", "sessions", "--store", ten)
    assert code == 0 and "no sessions in this trace" in err


# --------------------------------------------------------------------------- GenTD26

GENTD26_HEAD = (
    "gmt_create,predict_type,predict_status,exec_time_seconds,groupId,prompt_length,"
    "negative_prompt_length,num_images_per_prompt,num_inference_steps,"
    "checkpoint_model_version_id,num_lora"
)


def gentd26_file(folder: Path) -> Path:
    """Models requested 12, 6, 4, 3 times, one request a second, num_lora 0 / 1
    alternating, exec_time_seconds 3."""
    lines = [GENTD26_HEAD]
    k = 0
    for model, count in (("M0000", 12), ("M0001", 6), ("M0002", 4), ("M0003", 3)):
        for _ in range(count):
            lines.append(
                f"2024-11-15 16:{k // 60:02d}:{k % 60:02d},TXT_2_IMG,SUCCEED,3.0,G0000,"
                f"63.0,,1.0,30.0,{model},{k % 2}"
            )
            k += 1
    path = folder / "lora_request_trace.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_zipf_exponent_of_an_exact_power_law(tmp_path: Path) -> None:
    """Models requested 12, 6, 4, 3 times = 12 / rank: ln(requests) = ln 12 - ln(rank),
    a Zipf exponent of exactly 1 with R^2 = 1."""
    store = tmp_path / "store"
    ingest(store, "gentd26", gentd26_file(tmp_path))
    frame = gt.open(store).analyze("popularity")
    assert frame["item"].to_list() == ["M0000", "M0001", "M0002", "M0003"]
    assert frame["share"].to_list() == [12 / 25, 6 / 25, 4 / 25, 3 / 25]
    assert frame["zipf_exponent"][0] == pytest.approx(1.0)
    assert frame["zipf_r2"][0] == pytest.approx(1.0)
    assert frame["zipf_share"].to_list() == pytest.approx([12 / 25, 6 / 25, 4 / 25, 3 / 25])
    # adapters: num_lora 0 and 1 alternate (13 and 12): two items, no Zipf line
    by_adapters = gt.open(store).analyze("popularity", by="adapters")
    assert by_adapters["requests"].to_list() == [13, 12]
    assert by_adapters["zipf_exponent"].null_count() == 2
    assert by_adapters["caveat"][0] == "only 2 distinct adapters: no Zipf fit"
    # no token counts in a diffusion trace: said, not a table of nulls read as zeros
    code, _, err = cli("analyze", "token-demand", "--store", store)
    assert code == 0 and "no token counts in this trace" in err


# --------------------------------------------------------------------------- real files


@pytest.fixture(scope="module")
def samples(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("samples") / "store"
    ingest(store, "mooncake", SAMPLES / "mooncake")
    ingest(store, "azure-llm", SAMPLES / "azure-llm")
    return store


def test_mooncake_upstream_table_from_the_real_files(samples: Path) -> None:
    """Mooncake README table: conversation 12,031 requests, average input 12,035 and
    output 343 tokens; synthetic 3,993 / 15,325 / 149."""
    frame = gt.open(samples, ["mooncake"]).analyze("summary", by_dataset=True)
    got = {
        r["dataset"]: (r["requests"], round(r["mean_input_tokens"]), round(r["mean_output_tokens"]))
        for r in frame.iter_rows(named=True)
    }
    assert got == {"conversation": (12031, 12035, 343), "synthetic": (3993, 15325, 149)}
    code, out, err = cli(
        "analyze", "summary", "--by-dataset", "-s", "mooncake", "--store", samples, "-f", "csv"
    )
    assert code == 0, err
    assert out.splitlines()[1].startswith("mooncake,conversation,12031,")


def test_prefix_cache_on_the_real_conversation_trace_matches_an_lru_cache(
    samples: Path,
) -> None:
    """The 12 default capacities on the real Mooncake conversation trace; two of them
    checked against a plain LRU cache over the same reference sequence (requests in
    timestamp order, ties in file order, blocks in hash_ids order)."""
    frame = gt.open(samples).analyze("prefix-cache")
    conv = frame.filter(frame["dataset"] == "conversation")
    assert conv.height == 12
    rows = [json.loads(line) for line in (SAMPLES / "mooncake" / "conversation_trace.jsonl").open()]
    order = sorted(range(len(rows)), key=lambda k: (rows[k]["timestamp"], k))
    seq = [h for k in order for h in rows[k]["hash_ids"]]
    assert set(conv["block_refs"]) == {len(seq)}
    assert set(conv["unique_blocks"]) == {len(set(seq))}
    for cap in conv["capacity_blocks"].to_list()[5:7]:
        hits = conv.filter(conv["capacity_blocks"] == cap)["hits"].item()
        assert hits == _lru_hits(seq, cap), cap
    rates = conv["hit_rate"].to_list()
    assert rates == sorted(rates)  # LRU is a stack algorithm: never worse with more room


def test_every_serving_command_runs_on_the_samples(samples: Path) -> None:
    for name in (
        "request-rate",
        "request-burstiness",
        "request-profile",
        "interarrival-fit",
        "request-tokens",
        "token-demand",
        "prefix-reuse",
        "prefix-cache",
    ):
        code, out, err = cli("analyze", name, "--store", samples, "-f", "csv")
        assert code == 0 and out.count("\n") > 1, (name, err)
    for name in ("sessions", "popularity", "request-latency"):  # Azure, Mooncake: none
        code, out, err = cli("analyze", name, "--store", samples)
        assert code == 0 and f"analyze {name}: no rows:" in err, (name, err)
    code, out, err = cli("analyze", "request-tokens", "-s", "azure-llm", "--store", samples)
    assert code == 0 and "mooncake" not in out


def test_summary_puts_serving_traces_beside_job_traces(store_copy: Path) -> None:
    """A store with openb pods and the Mooncake synthetic trace: one summary, the job
    rows with their job columns, the serving row with requests and tokens (README
    table: 3,993 requests, average input 15,325 and output 149 tokens)."""
    ingest(store_copy, "mooncake", SAMPLES / "mooncake" / "synthetic_trace.jsonl")
    frame = gt.open(store_copy).analyze("summary")
    jobs = frame.filter(frame["source"] == "openb")
    serving = frame.filter(frame["source"] == "mooncake").row(0, named=True)
    assert (
        jobs.height >= 1 and jobs["jobs"].min() > 0 and jobs["requests"].null_count() == jobs.height
    )
    assert serving["jobs"] is None and serving["requests"] == 3993
    assert round(serving["mean_input_tokens"]) == 15325
    assert round(serving["mean_output_tokens"]) == 149
    assert serving["time_basis"] == "relative"


def test_azure_profile_is_in_the_zone_it_was_read_in(tmp_path: Path) -> None:
    """Azure's TIMESTAMP is a naive local time (README: no zone); read in
    America/Los_Angeles, 18:15 and 19:02 are local hours 18 and 19 (UTC 02 and 03)."""
    path = tmp_path / "AzureLLMInferenceTrace_conv.csv"
    path.write_bytes(
        b"TIMESTAMP,ContextTokens,GeneratedTokens\r\n"
        b"2023-11-16 18:15:46.6805900,374,44\r\n"
        b"2023-11-16 19:02:00.0000000,396,109\r\n"
    )
    store = tmp_path / "store"
    code, _, err = cli(
        "-q", "ingest", "azure-llm", path, "--tz", "America/Los_Angeles", "--store", store
    )
    assert code == 0, err
    frame = gt.open(store).analyze("request-profile")
    assert frame["hour"].to_list() == [18, 19] and set(frame["clock"]) == {"local time"}
    assert frame["requests"].to_list() == [1, 1]
    assert frame["caveat"][0].startswith("the trace spans 0.8 h, under a day")
