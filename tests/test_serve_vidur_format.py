"""The side by side with vidur reads and writes vidur's own formats.

Every expectation below is taken from vidur's source (microsoft/vidur, MIT, commit
7d47513), cited file:line; nothing is computed by our code to be compared with itself.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

import numpy as np
import pytest

from bench.serve_vidur_profile import attention_rows, write_profile
from bench.serve_vidur_side import (
    SCENARIOS,
    clip_tokens,
    read_vidur_metrics,
    vidur_kv_blocks,
    write_vidur_trace,
)

# vidur/metrics/metrics_store.py:39 REQUEST_ID_STR, then the values of
# RequestMetricsTimeDistributions (vidur/metrics/constants.py:33-53) and
# RequestMetricsHistogram (:62-68), in that order: _store_request_metrics joins
# time distributions + histograms on "Request Id" (metrics_store.py:369-382).
REQUEST_METRICS_HEADER = [
    "Request Id",
    "request_e2e_time",
    "request_e2e_time_normalized",
    "request_execution_time",
    "request_execution_time_normalized",
    "request_model_execution_time",
    "request_model_execution_time_normalized",
    "request_preemption_time",
    "request_scheduling_delay",
    "request_execution_plus_preemption_time",
    "request_execution_plus_preemption_time_normalized",
    "prefill_e2e_time",
    "prefill_time_execution_plus_preemption",
    "prefill_time_execution_plus_preemption_normalized",
    "decode_time_execution_plus_preemption_normalized",
    "request_inter_arrival_delay",
    "request_num_tokens",
    "request_num_prefill_tokens",
    "request_num_decode_tokens",
    "request_pd_ratio",
    "request_num_restarts",
]


def _metrics_csv(path: Path, rows: list[dict[str, object]]) -> Path:
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=REQUEST_METRICS_HEADER, restval="")
        w.writeheader()
        w.writerows(rows)
    return path


def test_request_metrics_read_as_ttft_tpot_e2e(tmp_path: Path) -> None:
    # Request 0: arrives at 0, prefill ends at 0.5 (prefill_e2e_time = prefill_completed_at
    # - arrived_at, metrics_store.py:557-559), done at 2.5 (request_e2e_time,
    # request.py:116-119) with D = 5 output tokens, the first made at the prefill's end
    # (request.py:233-241): 4 more in 2.0 s -> TPOT 0.5 s; vidur's own normalized decode
    # time divides by D (metrics_store.py:570-576): 2.0 / 5 = 0.4.
    # Request 1: D = 1 -> no TPOT. The inter-arrival column is empty for the first
    # request (metrics_store.py:508-512: outer join leaves it missing).
    path = _metrics_csv(
        tmp_path / "request_metrics.csv",
        [
            {
                "Request Id": 1,
                "request_e2e_time": 0.8,
                "prefill_e2e_time": 0.8,
                "decode_time_execution_plus_preemption_normalized": 0.0,
                "request_num_decode_tokens": 1,
                "request_num_restarts": 0,
                "request_inter_arrival_delay": 0.1,
            },
            {
                "Request Id": 0,
                "request_e2e_time": 2.5,
                "prefill_e2e_time": 0.5,
                "decode_time_execution_plus_preemption_normalized": 0.4,
                "request_num_decode_tokens": 5,
                "request_num_restarts": 1,
            },
        ],
    )
    got = read_vidur_metrics(path)
    assert got["request"].to_list() == [0, 1]
    assert got["ttft_s"].to_list() == [0.5, 0.8]
    assert got["e2e_s"].to_list() == [2.5, 0.8]
    assert got["tpot_s"].to_list() == [pytest.approx(0.5), None]
    assert got["vidur_tpot_s"].to_list() == [0.4, 0.0]
    assert got["restarts"].to_list() == [1, 0]


def test_trace_csv_has_vidurs_columns(tmp_path: Path) -> None:
    # TraceReplayRequestGenerator reads "arrived_at", "num_prefill_tokens",
    # "num_decode_tokens" (trace_replay_request_generator.py:26-39, 65-67, 83-88); its
    # bundled data/processed_traces/splitwise_conv.csv starts "0.0,374,44" (the Azure
    # conv trace's first row, ContextTokens 374, GeneratedTokens 44).
    class Rs:
        arrival_s = np.array([0.0, 4.314579])
        input_tokens = np.array([374, 396])
        output_tokens = np.array([44, 109])

    path = tmp_path / "trace.csv"
    write_vidur_trace(Rs, path)
    lines = path.read_text().splitlines()
    assert lines[0] == "arrived_at,num_prefill_tokens,num_decode_tokens"
    assert lines[1] == "0.0,374,44"
    assert lines[2] == "4.314579,396,109"


def test_max_tokens_clip_is_vidurs() -> None:
    # trace_replay_request_generator.py:42-58: counts clipped to >= 1, then
    # prefill -= max(prefill + decode - max_tokens, 0) with max_tokens 4096
    # (vidur/config/config.py:245-248).
    inp = np.array([4000, 100, 0, 5000, 4095])
    out = np.array([200, 50, 3, 10, 1])
    assert clip_tokens(inp, out).tolist() == [
        3896,  # 4000 - (4200 - 4096)
        100,  # under the limit
        1,  # 0 -> 1
        4086,  # 5000 - (5010 - 4096)
        4095,  # exactly 4096
    ]


def test_kv_blocks_follow_vidurs_memory_planner() -> None:
    # memory_planner.py:11-50, param_counter.py:38-75, base_replica_scheduler.py:34-43,
    # model_config.py:69-89 (Llama-2-7b: 32 layers, 32 heads, 32 KV heads, 4096, 11008;
    # Llama-2-70b: 80, 64, 8, 8192, 28672), device_sku_config.py:26-39 (80 GiB).
    # Llama-2-7b, tp 1: per layer 4096*128*(32+64) + 4096*128*32 + 3*4096*11008
    #   = 50,331,648 + 16,777,216 + 135,266,304 = 202,375,168; x 32 x 2 B = 12,952,010,752;
    #   free 80 * 2^30 * 0.9 = 77,309,411,328; a 4096-token slot 2*2*128*32*4096*32 =
    #   2,147,483,648 B; (77,309,411,328 - 12,952,010,752) / 2,147,483,648 = 29.97 -> 29
    #   slots x 256 blocks = 7,424.
    assert vidur_kv_blocks(SCENARIOS["a100-llama-2-7b"], 32, 4096, 32, 32, 11008) == 7424
    # Llama-2-70b, tp 4: per layer 8192*128*(16+4) + 8192*128*16 + 3*8192*28672/4
    #   = 20,971,520 + 16,777,216 + 176,160,768 = 213,909,504; x 80 x 2 = 34,225,520,640;
    #   slot 2*2*128*2*4096*80 = 335,544,320; (77,309,411,328 - 34,225,520,640) /
    #   335,544,320 = 128.4 -> 128 slots x 256 = 32,768.
    assert vidur_kv_blocks(SCENARIOS["h100-llama-2-70b-tp4"], 80, 8192, 64, 8, 28672) == 32768


def test_attention_table_has_the_columns_vidur_reads(tmp_path: Path) -> None:
    # The profiler's row (profiling/attention/attention_wrapper.py:143-154) and what the
    # predictor filters and trains on (sklearn_execution_time_predictor.py:147-163,
    # 207-218, 486-492, 565-577).
    profiler = {
        "n_embd",
        "n_q_head",
        "n_kv_head",
        "block_size",
        "num_tensor_parallel_workers",
        "max_model_len",
        "batch_size",
        "prefill_chunk_size",
        "kv_cache_size",
        "is_prefill",
        "attention_backend",
    }
    targets = {
        "time_stats.attn_prefill.median",
        "time_stats.attn_decode.median",
        "time_stats.attn_kv_cache_save.median",
    }
    rows = attention_rows("meta-llama/Llama-2-7b-hf", "a100", 1)
    assert set(rows[0]) == profiler | targets
    # A decode row is one with prefill_chunk_size == 0 (sklearn...:212-214); prefill rows
    # have batch 1 and a chunk > 0, decode rows a KV size > 0 (attention_input.py:14-29).
    for r in rows:
        assert (r["prefill_chunk_size"] == 0) == (not r["is_prefill"])
        if r["is_prefill"]:
            assert r["batch_size"] == 1
            assert r["time_stats.attn_prefill.median"] != ""
        else:
            assert r["kv_cache_size"] > 0  # type: ignore[operator]
            assert r["time_stats.attn_decode.median"] != ""
        # block_size 16 (config.py:261-264) and the model's shape (model_config.py:69-75).
        assert (r["n_embd"], r["n_q_head"], r["n_kv_head"], r["block_size"]) == (4096, 32, 32, 16)


def test_profile_dir_is_vidurs_layout(tmp_path: Path) -> None:
    # BaseExecutionTimePredictorConfig: compute/{DEVICE}/{MODEL}/mlp.csv and
    # .../attention.csv (vidur/config/config.py:495-502).
    src = tmp_path / "vidur"
    mlp = src / "data/profiling/compute/a100/meta-llama/Llama-2-7b-hf/mlp.csv"
    mlp.parent.mkdir(parents=True)
    mlp.write_text("num_tokens\n1\n")
    folder = write_profile(src, tmp_path / "prof", "a100", "meta-llama/Llama-2-7b-hf", 1)
    assert folder == tmp_path / "prof/compute/a100/meta-llama/Llama-2-7b-hf"
    assert (folder / "mlp.csv").read_text() == "num_tokens\n1\n"
    assert (folder / "attention.csv").read_text().startswith("n_embd,n_q_head,n_kv_head,")
    assert not (folder / "all_reduce.csv").exists()
    # With tensor parallelism vidur reads network/{NETWORK_DEVICE}/all_reduce.csv
    # (config.py:503-506); the same file goes beside mlp.csv for our profile model.
    net = src / "data/profiling/network/h100_pairwise_nvlink/all_reduce.csv"
    net.parent.mkdir(parents=True)
    net.write_text("size,num_workers\n8192,4\n")
    mlp70 = src / "data/profiling/compute/h100/meta-llama/Llama-2-70b-hf/mlp.csv"
    mlp70.parent.mkdir(parents=True)
    mlp70.write_text("num_tokens\n1\n")
    f70 = write_profile(
        src, tmp_path / "prof", "h100", "meta-llama/Llama-2-70b-hf", 4, "h100_pairwise_nvlink"
    )
    assert (f70 / "all_reduce.csv").read_text() == "size,num_workers\n8192,4\n"


@pytest.mark.skipif(
    not Path(os.environ.get("VIDUR_SRC", "/nonexistent"), "data").is_dir(),
    reason="VIDUR_SRC (a microsoft/vidur checkout) is not set",
)
def test_our_conv_window_is_vidurs_splitwise_conv(tmp_path: Path) -> None:
    # vidur ships the Azure LLM 2023 conversation trace as data/processed_traces/
    # splitwise_conv.csv (its default trace file, config.py:229-232). Ours, ingested from
    # the bundled AzureLLMInferenceTrace_conv.csv and written in vidur's format, must be the
    # same requests: same token counts row for row, arrivals equal to the microsecond.

    import polars as pl

    from bench.serve_vidur_side import SAMPLE
    from gpu_trace.serve.runs import load_requests
    from tests.serving_common import ingest_ok

    store = tmp_path / "store"
    store.mkdir()
    ingest_ok(store, "azure-llm", SAMPLE)
    write_vidur_trace(
        load_requests(store, "azure-llm", "conv", 0.0, None).requests, tmp_path / "t.csv"
    )
    ours = pl.read_csv(tmp_path / "t.csv")
    theirs = pl.read_csv(Path(os.environ["VIDUR_SRC"]) / "data/processed_traces/splitwise_conv.csv")
    assert ours.columns == theirs.columns
    assert ours.height == theirs.height == 19366
    assert (ours["num_prefill_tokens"] == theirs["num_prefill_tokens"]).all()
    assert (ours["num_decode_tokens"] == theirs["num_decode_tokens"]).all()
    assert float((ours["arrived_at"] - theirs["arrived_at"]).abs().max()) < 1e-6  # type: ignore[arg-type]
