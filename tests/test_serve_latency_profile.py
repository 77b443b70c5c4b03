"""The ``profile`` latency model (vidur's profile CSVs) and ``gpu-trace serve profile``'s
measurement module.

The composition checked here is vidur's own, read from its source at commit 7d47513
(vidur/entities/execution_time.py: per layer, the attention layer's pre/post projection,
rotary, KV save, decode and prefill attention, tensor-parallel communication and input
norm, plus the MLP layer's up/down projection, activation, tensor-parallel communication
and post-attention norm, plus the residual add, times the layers;
vidur/execution_time_predictor/sklearn_execution_time_predictor.py: token-wise operators
keyed by the token count rounded up to 8, decode attention by (batch size, KV length)
times 1 + 0.1 for a GQA model batching more than one, all-reduce keyed by size / hidden
/ 2 plus nccl_cpu_launch_overhead_ms 0.02). The attention rows below are vidur's
published measurements (data/profiling/a100/attention.csv at commit e2d00e9, Llama-2-70b
shapes at tensor parallelism 2), copied verbatim; the MLP rows are the shipped copy of
vidur's data/profiling/compute/a100/meta-llama/Llama-2-70b-hf/mlp.csv.
"""

from __future__ import annotations

import csv
import itertools
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_trace.errors import GpuTraceError, InputError, UsageError
from gpu_trace.serve import hardware, measure
from gpu_trace.serve.latency.base import IterationShape
from gpu_trace.serve.latency.profile import Profile, ProfileConfig, shipped_root
from gpu_trace.serve.latency.profile_tables import TokenTable
from gpu_trace.serve.latency.select import build_latency

ATTENTION_HEADER = (
    "time_stats.attn_input_reshape.min,time_stats.attn_input_reshape.max,"
    "time_stats.attn_input_reshape.mean,time_stats.attn_input_reshape.median,"
    "time_stats.attn_input_reshape.std,time_stats.attn_decode.min,time_stats.attn_decode.max,"
    "time_stats.attn_decode.mean,time_stats.attn_decode.median,time_stats.attn_decode.std,"
    "time_stats.attn_output_reshape.min,time_stats.attn_output_reshape.max,"
    "time_stats.attn_output_reshape.mean,time_stats.attn_output_reshape.median,"
    "time_stats.attn_output_reshape.std,time_stats.attn_prefill.min,time_stats.attn_prefill.max,"
    "time_stats.attn_prefill.mean,time_stats.attn_prefill.median,time_stats.attn_prefill.std,"
    "n_embd,n_q_head,n_kv_head,block_size,num_tensor_parallel_workers,max_model_len,batch_size,"
    "prefill_chunk_size,kv_cache_size,is_prefill,attention_backend,profile_method"
)
_TAIL = "AttentionBackend.FLASH_ATTENTION,ProfileMethod.KINETO"
ATTENTION_ROWS = [
    # decode: batch 24 / 32 / 40 / 48 at KV 32 and at KV 2688
    f"0.0,0.0,0.0,0.0,0.0,0.009000000000000001,0.009000000000000001,0.009000000000000001,0.009000000000000001,0.0,0.002,0.002,0.002,0.002,0.0,,,,,,8192,64,8,16,2,4096,24,0,32,False,{_TAIL}",
    f"0.0,0.0,0.0,0.0,0.0,0.012,0.012,0.012,0.012,0.0,0.002,0.002,0.002,0.002,0.0,,,,,,8192,64,8,16,2,4096,32,0,32,False,{_TAIL}",
    f"0.0,0.0,0.0,0.0,0.0,0.012,0.012,0.012,0.012,0.0,0.002,0.002,0.002,0.002,0.0,,,,,,8192,64,8,16,2,4096,40,0,32,False,{_TAIL}",
    f"0.0,0.0,0.0,0.0,0.0,0.012,0.012,0.012,0.012,0.0,0.002,0.002,0.002,0.002,0.0,,,,,,8192,64,8,16,2,4096,48,0,32,False,{_TAIL}",
    f"0.0,0.0,0.0,0.0,0.0,0.092,0.093,0.0928,0.093,0.00040000000000000034,0.002,0.002,0.002,0.002,0.0,,,,,,8192,64,8,16,2,4096,24,0,2688,False,{_TAIL}",
    f"0.0,0.0,0.0,0.0,0.0,0.137,0.138,0.1376,0.138,0.000489897948556636,0.002,0.002,0.002,0.002,0.0,,,,,,8192,64,8,16,2,4096,32,0,2688,False,{_TAIL}",
    f"0.0,0.0,0.0,0.0,0.0,0.14200000000000002,0.14400000000000002,0.14300000000000002,0.14300000000000002,0.0008944271909999167,0.002,0.002,0.002,0.002,0.0,,,,,,8192,64,8,16,2,4096,40,0,2688,False,{_TAIL}",
    f"0.0,0.0,0.0,0.0,0.0,0.161,0.162,0.16140000000000002,0.161,0.000489897948556636,0.002,0.002,0.002,0.002,0.0,,,,,,8192,64,8,16,2,4096,48,0,2688,False,{_TAIL}",
    # prefill: chunks 3712 / 3776 / 3840 after 0 / 32 / 64 cached tokens
    f"0.0,0.0,0.0,0.0,0.0,,,,,,0.039,0.04,0.0396,0.04,0.000489897948556636,1.93,1.965,1.9444,1.939,0.01344023809312919,8192,64,8,16,2,4096,1,3712,0,True,{_TAIL}",
    f"0.0,0.0,0.0,0.0,0.0,,,,,,0.039,0.04,0.0396,0.04,0.000489897948556636,1.984,2.003,1.9934,1.996,0.007255342858886857,8192,64,8,16,2,4096,1,3712,32,True,{_TAIL}",
    f"0.0,0.0,0.0,0.0,0.0,,,,,,0.039,0.041,0.04,0.04,0.0006324555320336764,1.979,2.0,1.9922,1.995,0.008133879763065066,8192,64,8,16,2,4096,1,3712,64,True,{_TAIL}",
    f"0.0,0.0,0.0,0.0,0.0,,,,,,0.04,0.041,0.0402,0.04,0.00040000000000000034,1.978,2.012,1.9906,1.98,0.014799999999999992,8192,64,8,16,2,4096,1,3776,0,True,{_TAIL}",
    f"0.0,0.0,0.0,0.0,0.0,,,,,,0.04,0.041,0.040400000000000005,0.04,0.000489897948556636,2.048,2.083,2.059,2.053,0.012976902558006737,8192,64,8,16,2,4096,1,3776,32,True,{_TAIL}",
    f"0.0,0.0,0.0,0.0,0.0,,,,,,0.041,0.042,0.041600000000000005,0.042,0.000489897948556636,2.041,2.058,2.0484,2.045,0.006183849933496094,8192,64,8,16,2,4096,1,3840,0,True,{_TAIL}",
]
SHIPPED_MLP = shipped_root() / "compute/a100/meta-llama/Llama-2-70b-hf/mlp.csv"
# vidur's ops of the token-wise part (sklearn_execution_time_predictor._train_compute_models).
OPS = [
    "attn_pre_proj",
    "attn_post_proj",
    "mlp_up_proj",
    "mlp_down_proj",
    "mlp_act",
    "input_layernorm",
    "post_attention_layernorm",
    "attn_rope",
    "add",
]
# Our own all-reduce fixture in vidur's all_reduce.csv columns (two ranks per size):
# 32 tokens = 32 x 8192 x 2 B = 524,288 B -> 0.05 ms; 40 tokens = 655,360 B -> 0.06 ms.
ALLREDUCE = (
    "time_stats.all_reduce.median,rank,num_workers,size,collective,devices_per_node,max_devices_per_node\n"
    "0.05,0,2,524288,all_reduce,2,8\n0.05,1,2,524288,all_reduce,2,8\n"
    "0.06,0,2,655360,all_reduce,2,8\n0.06,1,2,655360,all_reduce,2,8\n"
)


def _mlp_ms(tokens: int, tp: int = 2, file: Path = SHIPPED_MLP) -> float:
    """Per-layer sum of vidur's token-wise medians at one measured token count (mean
    over duplicate rows, as a fit through repeated points would be).
    """
    with file.open(encoding="utf-8") as f:
        rows = [
            r
            for r in csv.DictReader(f)
            if int(r["num_tokens"]) == tokens and int(r["num_tensor_parallel_workers"]) == tp
        ]
    assert rows, tokens
    sums = [sum(float(r[f"time_stats.{op}.median"] or 0) for op in OPS) for r in rows]
    return sum(sums) / len(sums)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    shutil.copy(SHIPPED_MLP, tmp_path / "mlp.csv")
    (tmp_path / "attention.csv").write_text(
        ATTENTION_HEADER + "\n" + "\n".join(ATTENTION_ROWS) + "\n", encoding="utf-8"
    )
    (tmp_path / "all_reduce.csv").write_text(ALLREDUCE, encoding="utf-8")
    return tmp_path


def _profile(folder: Path, tp: int = 2) -> Profile:
    return Profile(
        ProfileConfig(path=str(folder)), hardware.model("llama-2-70b"), hardware.gpu("a100"), tp
    )


def test_profile_reproduces_a_measured_decode_point(folder: Path) -> None:
    """32 decodes of KV 32 each on 2 A100s: every term at a measured point.

    per layer = token-wise ops at 32 tokens (vidur's mlp.csv)
              + decode attention 0.012 ms x 1.1 (GQA: 64 query heads over 8 KV heads)
              + 2 all-reduces x (0.05 ms + 0.02 ms launch)
    iteration = 80 layers x per layer
    """
    per_layer = _mlp_ms(32) + 0.012 * 1.1 + 2 * (0.05 + 0.02)
    got = _profile(folder).iteration_s(IterationShape(decode_count=32, decode_context_sum=32 * 32))
    assert got == pytest.approx(80 * per_layer * 1e-3, rel=1e-9)
    at_2688 = _mlp_ms(32) + 0.138 * 1.1 + 2 * (0.05 + 0.02)
    got = _profile(folder).iteration_s(
        IterationShape(decode_count=32, decode_context_sum=32 * 2688)
    )
    assert got == pytest.approx(80 * at_2688 * 1e-3, rel=1e-9)


def test_profile_reproduces_a_measured_prefill_point(folder: Path) -> None:
    """One 3712-token chunk after 32 cached tokens (vidur measured 1.996 ms of attention):
    token-wise ops at 3712 tokens + 1.996 ms (one prefill: no batching overhead) +
    2 all-reduces at 3712 tokens. The all-reduce fixture stops at 40 tokens: beyond it,
    the last segment's slope, (0.06 - 0.05) / 8 per token: 0.06 + 3672 x 0.00125 ms.
    """
    allreduce = 0.06 + (3712 - 40) * (0.06 - 0.05) / 8
    per_layer = _mlp_ms(3712) + 1.996 + 2 * (allreduce + 0.02)
    shape = IterationShape(prefill_tokens=(3712,), prefill_context=(32,))
    assert _profile(folder).iteration_s(shape) == pytest.approx(80 * per_layer * 1e-3, rel=1e-9)


def test_profile_interpolates_monotonically_between_two_measured_points(folder: Path) -> None:
    """Decode attention at batch 32 between KV 32 (0.012 ms) and KV 2688 (0.138 ms):
    every time between the two measured ones, never decreasing with the KV length.
    """
    p = _profile(folder)
    low = p.iteration_s(IterationShape(decode_count=32, decode_context_sum=32 * 32))
    high = p.iteration_s(IterationShape(decode_count=32, decode_context_sum=32 * 2688))
    times = [
        p.iteration_s(IterationShape(decode_count=32, decode_context_sum=32 * kv))
        for kv in range(32, 2689, 64)
    ]
    assert low < high
    assert all(low <= t <= high for t in times)
    assert all(a <= b for a, b in itertools.pairwise(times))


def test_token_wise_part_interpolates_between_measured_counts(folder: Path) -> None:
    """vidur measured 1024 and 1040 tokens (tp 2), not 1025-1039: those lie between,
    linearly, monotone in the direction of the two measurements.
    """
    p = _profile(folder)
    lo, hi = _mlp_ms(1024), _mlp_ms(1040)
    values = p.mlp.ms(np.arange(1024.0, 1041.0, 1.0))
    assert values[0] == pytest.approx(lo) and values[-1] == pytest.approx(hi)
    assert np.all(np.diff(values) * np.sign(hi - lo) >= 0)
    assert values[8] == pytest.approx((lo + hi) / 2)  # 1032: halfway


@settings(max_examples=40, deadline=None)
@given(count=st.integers(1, 128), kv=st.integers(1, 4000), steps=st.integers(1, 30))
def test_profile_decode_steps_equal_iteration_s_stepwise(count: int, kv: int, steps: int) -> None:
    for p in (
        Profile(ProfileConfig(), hardware.model("llama-2-7b"), hardware.gpu("a100"), 1),
        Profile(ProfileConfig(), hardware.model("llama-3-70b"), hardware.gpu("a100"), 4),
    ):
        vector = p.decode_steps_s(count, count * kv, steps)
        stepwise = [
            p.iteration_s(
                IterationShape(decode_count=count, decode_context_sum=count * kv + k * count)
            )
            for k in range(steps)
        ]
        assert np.array_equal(vector, np.array(stepwise))


def test_profile_decode_steps_with_measured_attention(folder: Path) -> None:
    p = _profile(folder)
    for count, kv in ((32, 32), (24, 1000), (40, 5000), (1, 10)):  # inside and outside
        vector = p.decode_steps_s(count, count * kv, 7)
        stepwise = [
            p.iteration_s(
                IterationShape(decode_count=count, decode_context_sum=count * kv + k * count)
            )
            for k in range(7)
        ]
        assert np.array_equal(vector, np.array(stepwise))


@settings(max_examples=60, deadline=None)
@given(
    case=st.sampled_from(
        [
            ("llama-2-7b", "a100-80gb", 1),
            ("llama-2-70b", "a100-80gb", 4),
            ("llama-2-70b", "h100-sxm", 8),
            ("llama-3-8b", "a100-80gb", 2),
            ("llama-3-70b", "a100-80gb", 8),
            ("llama-2-7b", "h100-sxm", 2),
        ]
    ),
    count=st.integers(1, 256),
    kv=st.integers(1, 8000),
)
def test_profile_decode_never_beats_the_bandwidth_bound(
    case: tuple[str, str, int], count: int, kv: int
) -> None:
    """vidur's measured timings, as we compose them, respect physics: a decode iteration
    reads every weight once, so it lasts at least weight bytes / (tp x datasheet HBM).
    """
    name, gpu, tp = case
    spec, kind = hardware.model(name), hardware.gpu(gpu)
    p = Profile(ProfileConfig(), spec, kind, tp)
    seconds = p.iteration_s(IterationShape(decode_count=count, decode_context_sum=count * kv))
    assert count / seconds <= count * tp * kind.hbm_bytes_per_s / (spec.params * spec.dtype_bytes)


def test_shipped_profiles_cover_the_brief_and_say_attention_is_roofline() -> None:
    for gpu in ("a100-80gb", "h100"):
        for model in ("llama-2-7b", "llama-2-70b"):
            p = build_latency("profile", model, gpu, 2)
            assert "no attention.csv" in p.notes[0]  # type: ignore[attr-defined]
    for model in ("llama-3-8b", "llama-3-70b"):
        build_latency("profile", model, "a100-80gb", 8)
    with pytest.raises(UsageError, match="no profile of llama-3-8b on h100-sxm"):
        build_latency("profile", "llama-3-8b", "h100", 1)
    with pytest.raises(UsageError, match="no profile of llama-2-7b on l4"):
        build_latency("profile", "llama-2-7b", "l4", 1)
    # vidur's A100 was the 80 GB part (vidur/config/device_sku_config.py, total_memory_gb
    # 80): its timings are not the 40 GB part's (1,555 GB/s, not 2,039)
    with pytest.raises(UsageError, match="no profile of llama-2-7b on a100-40gb"):
        build_latency("profile", "llama-2-7b", "a100-40gb", 1)


def test_shipped_profiles_stay_small() -> None:
    sizes = sum(f.stat().st_size for f in shipped_root().rglob("*") if f.is_file())
    assert sizes < 5_000_000
    assert (
        (shipped_root() / "LICENSE").read_text(encoding="utf-8").lstrip().startswith("MIT License")
    )
    assert "7d47513" in (shipped_root() / "PROVENANCE.md").read_text(encoding="utf-8")


def test_bad_profile_files_fail_in_one_line(tmp_path: Path, folder: Path) -> None:
    text = (folder / "mlp.csv").read_text(encoding="utf-8").splitlines()
    header = text[0].split(",")
    row = text[1].split(",")
    row[header.index("time_stats.mlp_up_proj.median")] = "fast"
    (tmp_path / "mlp.csv").write_text(
        "\n".join([text[0], ",".join(row), *text[2:]]), encoding="utf-8"
    )
    with pytest.raises(InputError) as err:
        _profile(tmp_path)
    assert "mlp.csv: line 2: time_stats.mlp_up_proj.median is 'fast', not a number" in str(
        err.value
    )
    (tmp_path / "mlp.csv").write_text("num_tokens\n1\n", encoding="utf-8")
    with pytest.raises(InputError, match="no column 'n_head'"):
        _profile(tmp_path)
    with pytest.raises(
        InputError, match=r"num_tensor_parallel_workers=3 \(widths with rows: \[1, 2, 4, 8\]\)"
    ):
        TokenTable.from_mlp_csv(
            SHIPPED_MLP, hardware.model("llama-2-70b"), 3, ("mlp_up_proj",), frozenset()
        )


# -- gpu-trace serve profile (measure.py) -----------------------------------------------


def test_measure_refuses_without_torch_and_a_gpu(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def no_torch(name: str) -> object:
        raise ImportError(name)

    monkeypatch.setattr(measure.importlib, "import_module", no_torch)
    with pytest.raises(GpuTraceError) as err:
        measure.measure_profile(hardware.model("llama-2-7b"), tmp_path)
    assert str(err.value) == "gpu-trace serve profile needs PyTorch with a CUDA GPU: none here"
    assert "\n" not in str(err.value)
    assert not any(tmp_path.iterdir())


# vidur's published mlp.csv header (data/profiling/compute/a100/meta-llama/Llama-2-7b-hf/
# mlp.csv at 7d47513), the format `serve profile` writes.
VIDUR_MLP_HEADER = ",".join(
    [
        f"time_stats.{op}.{s}"
        for op in (
            "emb",
            "input_layernorm",
            "attn_pre_proj",
            "attn_rope",
            "attn_post_proj",
            "post_attention_layernorm",
            "mlp_up_proj",
            "mlp_act",
            "mlp_down_proj",
            "add",
        )
        for s in ("min", "max", "mean", "median", "std")
    ]
    + [
        "n_head",
        "n_kv_head",
        "n_embd",
        "n_expanded_embd",
        "vocab_size",
        "use_gated_mlp",
        "num_tokens",
        "num_tensor_parallel_workers",
    ]
)


def test_measured_tables_are_written_in_vidurs_format_and_read_back(tmp_path: Path) -> None:
    """A tiny fake timing (as a GPU run would return it) written by the CSV writers and
    read by the profile model: the medians come back at the measured points.
    """
    model = hardware.model("llama-2-7b")
    ops = list(measure.MLP_OPS)
    timings = {
        8: {op: [0.010, 0.012, 0.011] for op in ops},  # median 0.011 each
        64: {op: [0.020, 0.024, 0.022, 0.021] for op in ops},  # median 0.0215 each
    }
    mlp = measure.write_mlp_csv(tmp_path / "mlp.csv", model, 1, timings)
    assert mlp.read_text(encoding="utf-8").splitlines()[0] == VIDUR_MLP_HEADER
    row = next(csv.DictReader(mlp.open(encoding="utf-8")))
    assert row["time_stats.add.median"] == "0.011" and row["use_gated_mlp"] == "True"
    assert float(row["time_stats.add.std"]) == pytest.approx(
        np.std([0.010, 0.012, 0.011])
    )  # population std, as numpy's
    points = [
        measure.AttentionTiming(batch=b, chunk=0, kv=kv, samples_ms=(0.001 * b * kv / 64,))
        for b in (1, 8)
        for kv in (64, 512)
    ] + [
        measure.AttentionTiming(batch=1, chunk=c, kv=kv, samples_ms=(0.002 * c,))
        for c in (16, 128)
        for kv in (0, 64)
    ]
    measure.write_attention_csv(tmp_path / "attention.csv", model, 1, 16, points)
    p = Profile(ProfileConfig(path=str(tmp_path)), model, hardware.gpu("a100"), 1)
    assert p.notes == []
    # 8 decodes of KV 512: token-wise ops at 8 tokens, 9 of them (vidur's list, emb not
    # counted) at 0.011 ms, plus decode attention 0.001 x 8 x 512 / 64 = 0.064 ms (no GQA).
    got = p.iteration_s(IterationShape(decode_count=8, decode_context_sum=8 * 512))
    assert got == pytest.approx(32 * (9 * 0.011 + 0.064) * 1e-3)


def test_profile_options_are_checked() -> None:
    with pytest.raises(UsageError, match="batching_overhead"):
        build_latency("profile", "llama-2-7b", "a100", 1, {"batching_overhead": "-0.5"})
    with pytest.raises(UsageError, match="unknown option"):
        build_latency("profile", "llama-2-7b", "a100", 1, {"mfu": "0.5"})
