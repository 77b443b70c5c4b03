"""The serving replay's hardware tables, the roofline latency model and the energy / cost
helpers (issue 30: "Latency model, pluggable", "Metrics").

Expected numbers are worked by hand from the published figures the tables cite (NVIDIA
datasheets, the models' Hugging Face config.json), written out in the comments, never
from our own code's output.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_trace.errors import InputError, UsageError
from gpu_trace.serve import hardware
from gpu_trace.serve.energy import energy_cost, served_tokens
from gpu_trace.serve.latency.base import IterationShape
from gpu_trace.serve.latency.roofline import Roofline, RooflineConfig
from gpu_trace.serve.latency.select import build_latency
from gpu_trace.serve.result import REPLICA_COLUMNS, REQUEST_COLUMNS

GIB = 1024**3


def test_tables_hold_the_published_numbers() -> None:
    """Datasheet and config.json figures, as published (not as our code derives them)."""
    a100 = hardware.gpu("a100-80gb")
    # NVIDIA A100 datasheet, A100 80GB SXM: 312 TFLOPS BF16 dense, 2,039 GB/s, 400 W,
    # NVLink 600 GB/s both directions.
    assert (a100.peak_flops, a100.hbm_bytes_per_s, a100.tdp_w) == (312e12, 2039e9, 400.0)
    assert a100.link_bytes_per_s == 600e9 / 2
    assert a100.memory_bytes == 80 * GIB
    h100 = hardware.gpu("h100")  # the alias selects the SXM part
    # H100 SXM datasheet: 1,979 TFLOPS BF16 "with sparsity" -> half dense; 3.35 TB/s; 700 W.
    assert h100.name == "h100-sxm"
    assert math.isclose(h100.peak_flops, 1979e12 / 2, rel_tol=1e-3)
    assert (h100.hbm_bytes_per_s, h100.tdp_w) == (3350e9, 700.0)
    # nvidia-smi memory.total of an H100 80GB HBM3 (data/samples/telemetry/
    # nvidia-smi-query-gpu-h100.csv): 81559 MiB.
    assert math.isclose(h100.memory_bytes, 81559 * 1024**2, rel_tol=1e-5)
    l4 = hardware.gpu("L4")
    assert (l4.peak_flops, l4.hbm_bytes_per_s, l4.tdp_w) == (121e12, 300e9, 72.0)
    # meta-llama/Llama-2-70b-hf config.json: 80 layers, hidden 8192, 64 heads, 8 KV heads,
    # intermediate 28672, vocab 32000.
    m = hardware.model("meta-llama/Llama-2-70b-hf")
    assert (m.name, m.layers, m.hidden, m.heads, m.kv_heads, m.ffn, m.vocab) == (
        "llama-2-70b",
        80,
        8192,
        64,
        8,
        28672,
        32000,
    )
    # Published parameter counts: Llama-2-7b 6,738,415,616; phi-2 2,779,683,840 (HF page).
    assert hardware.model("llama-2-7b").params == 6_738_415_616
    assert hardware.model("microsoft/phi-2").params == 2_779_683_840
    # GQA: Llama-3-8B config.json num_key_value_heads 8; Mistral-7B-v0.1 too.
    assert hardware.model("llama-3-8b").kv_heads == 8
    assert hardware.model("mistral-7b").kv_heads == 8


@pytest.mark.parametrize(
    "name", ["llama-2-13b", "llama-3-70b", "codellama-34b", "internlm-20b", "qwen-72b"]
)
def test_table_params_are_close_to_the_model_cards(name: str) -> None:
    """The params column against each model card's headline size (13B, 70B, 34B, 20B, 72B):
    within 6 %, enough to catch a wrong layer count or hidden size.
    """
    headline = {
        "llama-2-13b": 13e9,
        "llama-3-70b": 70e9,
        "codellama-34b": 34e9,
        "internlm-20b": 20e9,
        "qwen-72b": 72e9,
    }
    assert abs(hardware.model(name).params / headline[name] - 1) < 0.06


def test_unknown_names_list_the_known_ones() -> None:
    with pytest.raises(UsageError) as err:
        hardware.gpu("b300")
    assert "a100-80gb" in str(err.value) and "h200" in str(err.value) and "l4" in str(err.value)
    with pytest.raises(UsageError) as err:
        hardware.model("llama-2-7")
    assert "did you mean 'llama-2-7b'" in str(err.value) and "phi-2" in str(err.value)
    assert hardware.gpu_names() == ["a100-40gb", "a100-80gb", "a40", "h100-sxm", "h200", "l4"]
    assert len(hardware.model_names()) == 10


def test_every_table_entry_cites_a_source() -> None:
    for name in hardware.gpu_names():
        entry = hardware._gpus().entries[name]
        assert entry["source"] and entry["idle_source"], name
    for name in hardware.model_names():
        assert hardware._models().entries[name]["source"], name


def test_price_table_default_and_user_override(tmp_path: Path) -> None:
    assert hardware.price("h100") == 4.76  # prices.toml: RunPod H100 SXM, March 2026
    mine = tmp_path / "prices.toml"
    mine.write_text("[price]\nh100 = 2.0\n", encoding="utf-8")
    assert hardware.price("h100-sxm", mine) == 2.0
    assert hardware.price("a100-80gb", mine) == 2.45  # the others keep the default
    mine.write_text("[price]\nh1000 = 2.0\n", encoding="utf-8")
    with pytest.raises(UsageError, match="unknown GPU 'h1000'"):
        hardware.prices(mine)
    mine.write_text("[price]\nh100 = 'cheap'\n", encoding="utf-8")
    with pytest.raises(InputError, match="not a number"):
        hardware.prices(mine)
    mine.write_text("price = [", encoding="utf-8")
    with pytest.raises(InputError, match="not TOML"):
        hardware.prices(mine)


def _roofline(model: str = "llama-2-7b", gpu: str = "a100-80gb", tp: int = 1) -> Roofline:
    return Roofline(RooflineConfig(), hardware.model(model), hardware.gpu(gpu), tp)


def test_roofline_decode_iteration_by_hand() -> None:
    """One Llama-2-7b request with 1000 tokens cached, on one A100 80GB, defaults
    (mfu 0.7, bw_efficiency 0.75, layer_overhead 20 us).

    weights: 6,738,415,616 params x 2 B                  = 13,476,831,232 B
    KV per token: 2 (K,V) x 32 layers x 32 heads x 128 x 2 B = 524,288 B; read 1000 + write 1
    bytes = 13,476,831,232 + 524,288 x 1001             = 14,001,643,520 B
    bandwidth time = 14,001,643,520 / (2,039e9 x 0.75)  = 9.1559 ms
    FLOPs = 2 x (6,738,415,616 - 32000 x 4096) + 4 x 32 x 4096 x 1001 = 1.374e10
    compute time = 1.374e10 / (312e12 x 0.7)            = 0.063 ms  -> bandwidth-bound
    time = 9.1559 ms + 32 x 0.02 ms                     = 9.7959 ms
    """
    expected = (6_738_415_616 * 2 + 524_288 * 1001) / (2039e9 * 0.75) + 32 * 2e-5
    got = _roofline().iteration_s(IterationShape(decode_count=1, decode_context_sum=1000))
    assert got == pytest.approx(expected, rel=1e-12)
    assert got == pytest.approx(9.7959e-3, rel=1e-4)


def test_roofline_prefill_iteration_by_hand() -> None:
    """A 1024-token Llama-2-7b prompt, nothing cached, one A100 80GB.

    linear FLOPs = 2 x (6,738,415,616 - 131,072,000) x 1024 = 1.35318e13
    attention: 1024 x 1025 / 2 = 524,800 (query, key) pairs x 4 x 32 x 4096 = 2.7515e11
    compute time = (1.35318e13 + 2.7515e11) / (312e12 x 0.7) = 63.219 ms
    bytes = 13,476,831,232 + 524,288 x 1024 -> 9.16 ms: compute-bound
    time = 63.219 ms + 0.64 ms = 63.859 ms
    """
    flops = 2 * (6_738_415_616 - 32000 * 4096) * 1024 + 4 * 32 * 4096 * (1024 * 1025 // 2)
    expected = flops / (312e12 * 0.7) + 32 * 2e-5
    shape = IterationShape(prefill_tokens=(1024,), prefill_context=(0,))
    got = _roofline().iteration_s(shape)
    assert got == pytest.approx(expected, rel=1e-12)
    assert got == pytest.approx(63.859e-3, rel=1e-4)


def test_roofline_tensor_parallel_all_reduce_by_hand() -> None:
    """Llama-2-70b on 4 H100s, one decode at 1000 cached tokens: the all-reduces.

    two per layer x 80 layers = 160, each of 1 token x 8192 x 2 B over a ring of 4:
    2 x 3/4 x 16,384 B / (450e9 x 0.6) = 91.0 ns; plus 30 us each.
    weights 68,976,648,192 x 2 B; KV per token 2 x 80 x 8 x 128 x 2 = 327,680 B.
    """
    r = _roofline("llama-2-70b", "h100", 4)
    got = r.iteration_s(IterationShape(decode_count=1, decode_context_sum=1000))
    bandwidth = (68_976_648_192 * 2 + 327_680 * 1001) / (4 * 3350e9 * 0.75)
    allreduce = 160 * (2 * 3 / 4 * 8192 * 2 / (450e9 * 0.6) + 3e-5)
    assert got == pytest.approx(bandwidth + allreduce + 80 * 2e-5, rel=1e-9)


def test_kv_capacity_llama_2_7b_on_a100_80gb_by_hand() -> None:
    """80 GiB x 0.9 = 77,309,411,328 B; minus weights 13,476,831,232 B; minus the 1.5 GiB
    reserve (1,610,612,736 B) = 62,221,967,360 B; / 524,288 B per token = 118,678.6 -> 118,678.
    """
    assert _roofline().kv_capacity_tokens(0.9) == 118_678
    assert (
        _roofline("llama-2-70b", "a100-80gb", 1).kv_capacity_tokens(0.9) == 0
    )  # 138 GB of weights
    with pytest.raises(UsageError):
        _roofline().kv_capacity_tokens(1.5)


def test_tp_must_divide_the_heads() -> None:
    with pytest.raises(UsageError, match="does not divide"):
        _roofline("llama-2-7b", "a100-80gb", 3)


def test_empty_iteration_takes_no_time() -> None:
    assert _roofline().iteration_s(IterationShape()) == 0.0
    assert _roofline().decode_steps_s(0, 0, 3).tolist() == [0.0, 0.0, 0.0]


@settings(max_examples=60, deadline=None)
@given(
    model=st.sampled_from(
        ["llama-2-7b", "llama-2-70b", "llama-3-8b", "mistral-7b", "phi-2", "qwen-72b"]
    ),
    gpu=st.sampled_from(["a100-40gb", "a100-80gb", "h100-sxm", "h200", "a40", "l4"]),
    tp=st.sampled_from([1, 2, 4, 8]),
    count=st.integers(1, 512),
    context=st.integers(1, 32_000),
    steps=st.integers(1, 40),
)
def test_decode_steps_equal_iteration_s_stepwise(
    model: str, gpu: str, tp: int, count: int, context: int, steps: int
) -> None:
    r = _roofline(model, gpu, tp)
    start = count * context
    vector = r.decode_steps_s(count, start, steps)
    one_by_one = [
        r.iteration_s(IterationShape(decode_count=count, decode_context_sum=start + k * count))
        for k in range(steps)
    ]
    assert np.array_equal(vector, np.array(one_by_one))


@settings(max_examples=120, deadline=None)
@given(
    model=st.sampled_from(["llama-2-7b", "llama-2-70b", "phi-2"]),
    gpu=st.sampled_from(["a100-80gb", "h100-sxm"]),
    tp=st.sampled_from([1, 4]),
    chunks=st.lists(st.tuples(st.integers(1, 8192), st.integers(0, 16_000)), max_size=6),
    count=st.integers(0, 256),
    context=st.integers(0, 64),
)
def test_iteration_of_equals_iteration_s(
    model: str,
    gpu: str,
    tp: int,
    chunks: list[tuple[int, int]],
    count: int,
    context: int,
) -> None:
    # the engine's fast path for one iteration (issue 30, serving replay speed): the
    # same seconds as iteration_s on the IterationShape it stands for, bit for bit
    r = _roofline(model, gpu, tp)
    computed = [c for _, c in chunks]
    shape = IterationShape(
        prefill_tokens=tuple(t for t, _ in chunks),
        prefill_context=tuple(computed),
        decode_count=count,
        decode_context_sum=count * context,
    )
    prefills = [(i, t) for i, (t, _) in enumerate(chunks)]
    assert r.iteration_of(prefills, computed, count, count * context) == r.iteration_s(shape)


@settings(max_examples=120, deadline=None)
@given(
    model=st.sampled_from(["llama-2-7b", "llama-2-70b", "llama-3-8b", "phi-2", "qwen-72b"]),
    gpu=st.sampled_from(["a100-80gb", "h100-sxm", "l4"]),
    tp=st.sampled_from([1, 2, 8]),
    count=st.integers(1, 2048),
    context=st.integers(1, 32_000),
    steps=st.integers(1, 300),
    t0=st.floats(0.0, 1e7),
)
def test_decode_ends_equal_stepping_bit_for_bit(
    model: str, gpu: str, tp: int, count: int, context: int, steps: int, t0: float
) -> None:
    # the engine's fast path (issue 30, serving replay speed): a run's end times must be
    # what stepping one iteration at a time gives, t0 + d1, (t0 + d1) + d2, ..., with
    # each d iteration_s's; counts up to 2048 cross the roofline's ridge, so runs that
    # are memory-bound, compute-bound and both (the crossing inside the run) all occur
    r = _roofline(model, gpu, tp)
    start = count * context
    t = t0
    stepped = []
    for k in range(steps):
        t += r.iteration_s(IterationShape(decode_count=count, decode_context_sum=start + k * count))
        stepped.append(t)
    assert r.decode_ends(count, start, steps, t0) == stepped


@settings(max_examples=80, deadline=None)
@given(
    model=st.sampled_from(["llama-2-7b", "llama-2-70b", "llama-3-70b", "codellama-34b", "phi-2"]),
    gpu=st.sampled_from(["a100-80gb", "h100-sxm", "h200", "l4"]),
    tp=st.sampled_from([1, 2, 4, 8]),
    count=st.integers(1, 1024),
    context=st.integers(0, 16_000),
    mfu=st.floats(0.05, 1.0),
    bw=st.floats(0.05, 1.0),
)
def test_decode_tokens_per_second_never_above_the_bandwidth_bound(
    model: str, gpu: str, tp: int, count: int, context: int, mfu: float, bw: float
) -> None:
    """Each decode iteration reads every weight at least once from HBM: at the datasheet
    bandwidth of the replica's GPUs, tokens/s <= count x tp x HBM / weight bytes, whatever
    the efficiency options.
    """
    spec, kind = hardware.model(model), hardware.gpu(gpu)
    r = Roofline(RooflineConfig(mfu=mfu, bw_efficiency=bw), spec, kind, tp)
    seconds = r.iteration_s(IterationShape(decode_count=count, decode_context_sum=count * context))
    bound = count * tp * kind.hbm_bytes_per_s / (spec.params * spec.dtype_bytes)
    assert count / seconds <= bound


def test_build_latency_by_name_and_options() -> None:
    model = build_latency("roofline", "llama-2-7b", "a100", 1, {"mfu": "0.35"})
    assert isinstance(model, Roofline) and model.config.mfu == 0.35
    with pytest.raises(UsageError, match="latency model"):
        build_latency("rooflin", "llama-2-7b", "a100")
    with pytest.raises(UsageError, match="--profile is for --latency profile"):
        build_latency("roofline", "llama-2-7b", "a100", profile="somewhere")
    with pytest.raises(UsageError, match="mfu"):
        build_latency("roofline", "llama-2-7b", "a100", 1, {"mfu": "0"})


# -- energy and cost (serve_spec.md, Metrics) ------------------------------------------


def _replicas(rows: list[tuple[int, float, float, float, float]]) -> pl.DataFrame:
    """(gpus, start_s, up_s, down_s, busy_s) rows with the contract's other columns filled."""
    return pl.DataFrame(
        {
            "replica": list(range(len(rows))),
            "role": ["mixed"] * len(rows),
            "gpus": [r[0] for r in rows],
            "start_s": [r[1] for r in rows],
            "up_s": [r[2] for r in rows],
            "down_s": [r[3] for r in rows],
            "busy_s": [r[4] for r in rows],
            "iterations": [0] * len(rows),
            "requests": [0] * len(rows),
            "kv_capacity_blocks": [0] * len(rows),
        },
        schema=REPLICA_COLUMNS,
    )


def test_energy_and_cost_by_hand() -> None:
    """Two H100 replicas (700 W busy, 70 W idle by the table), a 60 s cold start:

    replica 0: 2 GPUs up from 0 to 3600 s, busy 1800 s
      GPU-s 7200; J = 2 x (1800 x 700 + 1800 x 70) = 2,772,000
    replica 1: 1 GPU asked for at 1000 s, up at 1060 s, down at 2000 s, busy 500 s
      alive 1000 s; GPU-s 1000; J = 500 x 700 + 500 x 70 = 385,000
    total 8200 GPU-s = 2.2778 GPU-h; 3,157,000 J; 1,000,000 tokens -> 3.157 J/token;
    at $4 per GPU-hour: 9.1111 USD, 9.1111 USD per million tokens.
    """
    result = energy_cost(
        _replicas([(2, 0.0, 0.0, 3600.0, 1800.0), (1, 1000.0, 1060.0, 2000.0, 500.0)]),
        hardware.gpu("h100"),
        tokens=1_000_000,
        price_usd_per_gpu_hour=4.0,
    )
    assert result.gpu_seconds == 8200.0
    assert result.energy_j == 3_157_000.0
    assert result.j_per_token == pytest.approx(3.157)
    assert result.gpu_hours == pytest.approx(8200 / 3600)
    assert result.usd_per_million_tokens == pytest.approx(8200 / 3600 * 4.0)
    assert result.as_dict()["energy_kwh"] == pytest.approx(3_157_000 / 3.6e6)


def test_energy_without_tokens_or_replicas() -> None:
    none = energy_cost(_replicas([]), hardware.gpu("l4"), tokens=0, price_usd_per_gpu_hour=1.0)
    assert (none.gpu_seconds, none.energy_j, none.j_per_token, none.usd_per_million_tokens) == (
        0.0,
        0.0,
        None,
        None,
    )


def test_served_tokens_count_finished_requests_only() -> None:
    rows = {name: [None, None] for name in REQUEST_COLUMNS}
    rows.update(
        {
            "request_id": [1, 2],
            "input_tokens": [100, 5000],
            "output_tokens": [20, 10],
            "status": ["finished", "dropped"],
        }
    )
    frame = pl.DataFrame(rows, schema=REQUEST_COLUMNS)
    assert served_tokens(frame) == 120


def test_table_rows_for_listing() -> None:
    gpus = {r["gpu"]: r for r in hardware.gpu_rows()}
    assert gpus["h100-sxm"]["hbm_gb_s"] == 3350.0 and "h100" in gpus["h100-sxm"]["aliases"]
    models = {r["model"]: r for r in hardware.model_rows()}
    # Llama-2-7b: 2 (K, V) x 32 layers x 32 KV heads x 128 (4096 / 32) x 2 bytes
    assert models["llama-2-7b"]["kv_bytes_per_token"] == 2 * 32 * 32 * 128 * 2
    # Llama-3-70B: GQA with 8 KV heads: 2 x 80 x 8 x 128 x 2
    assert models["llama-3-70b"]["kv_bytes_per_token"] == 327_680
