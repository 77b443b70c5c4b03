"""``gpu-trace serve run / compare / plan / models / profile`` end to end on the bundled
Azure LLM and Mooncake samples.

The engine and latency model are the STAND-INS of tests/serve_standin.py (parts owned
elsewhere; see there): these tests check the command line, the window it reads, the
store and the error lines. Counts are checked against the trace files themselves (the
Azure README's schema: TIMESTAMP, ContextTokens, GeneratedTokens; Mooncake's README:
timestamp in milliseconds), never against our own loader's output. A last test runs the
real engine when it is installed.
"""

from __future__ import annotations

import csv
import importlib.util
import json
from datetime import datetime
from pathlib import Path

import pytest

from gpu_trace.store.generations import snapshot_root
from tests.serve_standin import standins
from tests.serving_common import SAMPLES, cli, ingest_ok, rows

CONV = SAMPLES / "azure-llm" / "AzureLLMInferenceTrace_conv.csv"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with the bundled Azure LLM (code, conv) and Mooncake samples."""
    root = tmp_path_factory.mktemp("serve") / "store"
    ingest_ok(root, "azure-llm", SAMPLES / "azure-llm")
    ingest_ok(root, "mooncake", SAMPLES / "mooncake")
    return root


def conv_requests_within(seconds: float) -> int:
    """Rows of the Azure conversation file arriving within ``seconds`` of its first
    (read from the file: TIMESTAMP has 7 fractional digits, cut to microseconds).
    """
    with CONV.open(newline="") as f:
        times = [datetime.fromisoformat(r["TIMESTAMP"][:26]) for r in csv.DictReader(f)]
    first = min(times)
    return sum((t - first).total_seconds() < seconds for t in times)


def run_args(store: Path, *extra: str | Path) -> list[str | Path]:
    return [
        "serve",
        "run",
        "--source",
        "azure-llm",
        "--dataset",
        "conv",
        "--duration",
        "10m",
        "--latency",
        "standin",
        "--store",
        store,
        *extra,
    ]


def test_run_writes_the_window_to_the_store_and_the_run_dir(
    store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    want = conv_requests_within(600)
    with standins(monkeypatch):
        code, out, err = cli(*run_args(store, "--replicas", "4", "--out", tmp_path / "run"))
    assert code == 0, err
    assert "ttft_p90_s" in out and "slo_attainment_ratio" in out
    # the module's store holds other tests' runs too: this run's row, by its id
    run_id = json.loads((tmp_path / "run" / "config.json").read_text())["run_id"]
    ((n, fin, drop, tp, reps, gpus, source, ds, trace_ds),) = rows(
        store,
        "select requests, requests_finished, requests_dropped, tp, replicas, gpus, "
        f"source, dataset, trace_dataset from serve_runs where run_id = '{run_id}'",
    )
    assert (n, fin + drop, tp, reps, gpus) == (want, want, 1, 4, 4)
    assert (source, ds, trace_ds) == ("azure-llm", run_id, "conv")
    assert rows(store, f"select count(*) from serve_requests where run_id = '{run_id}'") == [
        (want,)
    ]
    assert rows(store, f"select count(*) from serve_timeseries where run_id = '{run_id}'")[0][0]
    assert {p.name for p in (tmp_path / "run").iterdir()} == {
        "config.json",
        "serve_runs.parquet",
        "serve_requests.parquet",
        "serve_timeseries.parquet",
    }
    assert json.loads((tmp_path / "run" / "config.json").read_text())["run_id"] == run_id


def test_json_has_every_summary_column_and_notes_are_never_hidden(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with standins(monkeypatch):
        code, out, err = cli("-q", *run_args(store, "--duration", "20s", "--json"))
    assert code == 0, err
    (row,) = json.loads(out)
    for col in ("ttft_p50_s", "tpot_p99_s", "queue_mean_s", "goodput_rps", "gpu_seconds", "notes"):
        assert col in row
    n = conv_requests_within(20)
    assert row["requests"] == n < 100
    # -q silences progress, never the sanity notes
    assert f"only {n} requests in the window" in err
    assert err.count("note:") == len(row["notes"].splitlines())


def test_compare_runs_every_combination_in_one_commit(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = snapshot_root(store).resolve().name
    args = ["--routers", "round-robin,least-tokens", "--disaggregate", "0", "--disaggregate"]
    with standins(monkeypatch) as engine:
        code, out, err = cli(
            "serve", "compare", "--source", "mooncake", "--dataset", "conversation",
            "--duration", "5m", "--latency", "standin", "--store", store, *args, "1:1",
        )  # fmt: skip
    assert code == 0, err
    assert engine.calls == 4
    got = rows(
        store,
        "select router, disaggregate, replicas from serve_runs where source = 'mooncake' "
        "order by all",
    )
    assert got == [
        ("least-tokens", "0", 1),
        ("least-tokens", "1:1", 2),
        ("round-robin", "0", 1),
        ("round-robin", "1:1", 2),
    ]
    table = [ln for ln in out.splitlines() if ln.startswith("| ") and "run_id" not in ln]
    assert len(table) == 4  # one summary row per run
    after = snapshot_root(store).resolve().name
    assert int(after.split("-")[1]) == int(before.split("-")[1]) + 1  # one generation


def test_plan_bisects_to_the_step(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Attainment is 0 below 5 replicas and 1 from 5 (the stand-in's step): doubling
    tries 1, 2, 4, 8; bisection between 4 (miss) and 8 (hit) tries 6, then 5.
    """
    with standins(monkeypatch, step_at=5) as engine:
        code, out, err = cli(
            "serve", "plan", "--source", "azure-llm", "--dataset", "code", "--duration", "2m",
            "--latency", "standin", "--slo", "ttft=1s", "--attainment", "0.9",
            "--tp", "1,2", "--store", store, "--json",
        )  # fmt: skip
    assert code == 0, err
    points = [(p["tp"], p["replicas"], p["meets"]) for p in json.loads(out)]
    tried = [1, 2, 4, 8, 6, 5]
    assert points == [(tp, r, r >= 5) for tp in (1, 2) for r in tried]
    assert engine.calls == 12
    assert "fewest GPUs: 5 (tp 1 x 5 replicas)" in err
    assert not rows(store, "select * from serve_runs where trace_dataset = 'code'")


def test_plan_says_when_no_layout_meets_it(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with standins(monkeypatch, step_at=100):
        code, out, err = cli(
            "serve", "plan", "--source", "azure-llm", "--dataset", "conv", "--duration", "1m",
            "--latency", "standin", "--max-replicas", "3", "--store", store, "--json",
        )  # fmt: skip
    assert code == 0, err
    assert [p["replicas"] for p in json.loads(out)] == [1, 2, 3]
    assert "no layout tried meets attainment 0.9 with up to 3 replicas" in err


def one_error_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--source", "azur-llm"], ["no requests for source 'azur-llm'", "azure-llm (code, conv)"]),
        (["--source", "azure-llm", "--dataset", "chat"], ["no dataset 'chat'", "code, conv"]),
        (["--source", "azure-llm"], ["several datasets (code, conv): give --dataset"]),
        (["--source", "mooncake", "--router", "least-token"], ["did you mean 'least-tokens'"]),
        (["--source", "mooncake", "--batching", "orca"], ["unknown batching policy 'orca'"]),
        (["--source", "mooncake", "--disaggregate", "2"], ["--disaggregate: '2' is not P:D"]),
        (["--source", "mooncake", "--slo", "ttft=fast"], ["--slo ttft"]),
        (["--source", "mooncake", "--slo", "p99=1s"], ["unknown target 'p99'"]),
        (["--source", "mooncake", "--tp", "0"], ["--tp"]),
        (["--source", "mooncake", "--run-id", "My Run"], ["--run-id 'My Run'"]),
    ],
)
def test_usage_errors_are_one_line_exit_2(
    store: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], words: list[str]
) -> None:
    with standins(monkeypatch):
        code, out, err = cli("serve", "run", "--latency", "standin", "--store", store, *args)
    assert code == 2, err
    line = one_error_line(err)
    for w in words:
        assert w in line
    assert not out


def test_store_without_requests_names_what_it_has(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bare = tmp_path / "store"
    ingest_ok(bare, "openb", SAMPLES / "openb")
    with standins(monkeypatch):
        code, _, err = cli("serve", "run", "--source", "openb", "--store", bare)
    assert code == 2
    assert "sources with requests: none" in one_error_line(err)


def test_a_window_without_token_counts_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GenTD26 publishes image generations (its README: no token counts), so no request
    of it can be replayed on an LLM: one error line saying so and how many rows.
    """
    synth = tmp_path / "gentd26"
    code, _, err = cli("synth", "gentd26", "--jobs", "50", "--out", synth)
    assert code == 0, err
    bare = tmp_path / "store"
    ingest_ok(bare, "gentd26", synth)
    with standins(monkeypatch) as engine:
        code, _, err = cli(
            "serve", "run", "--source", "gentd26", "--latency", "standin", "--store", bare
        )
    assert code == 1
    line = one_error_line(err)
    assert "holds no request with token counts (50 without" in line
    assert engine.calls == 0


def test_an_empty_window_names_the_trace_span(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with standins(monkeypatch):
        code, _, err = cli(*run_args(store, "--start", "2h"))
    assert code == 1
    # the conversation file spans 18:15:46.68 .. 19:14:08.40: 3502 s
    assert (
        "holds no request with token counts (0 without; the trace spans 3502 s)"
        in one_error_line(err)
    )


def test_compare_and_plan_check_their_lists(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with standins(monkeypatch):
        code, _, err = cli(
            "serve", "compare", "--source", "mooncake", "--routers", "round-robin,round-robin",
            "--store", store,
        )  # fmt: skip
        assert code == 2 and "given twice" in one_error_line(err)
        code, _, err = cli("serve", "plan", "--source", "mooncake", "--tp", "x", "--store", store)
        assert code == 2 and "--tp 'x'" in one_error_line(err)
        code, _, err = cli("serve", "plan", "--source", "mooncake", "--attainment", "0")
        assert code == 2 and "--attainment" in one_error_line(err)


def test_missing_store_is_refused(tmp_path: Path) -> None:
    code, _, err = cli("serve", "run", "--source", "azure-llm", "--store", tmp_path / "none")
    assert code == 1 and "no store at" in one_error_line(err)


@pytest.mark.skipif(
    importlib.util.find_spec("torch") is not None, reason="PyTorch is installed: may have a GPU"
)
def test_profile_is_refused_without_a_gpu(tmp_path: Path) -> None:
    code, _, err = cli("serve", "profile", "--out", tmp_path / "p")
    assert code == 1
    assert "needs a CUDA GPU" in one_error_line(err)
    assert not (tmp_path / "p").exists()


HAVE_REAL = all(
    importlib.util.find_spec(f"gpu_trace.serve.{m}") is not None
    for m in ("engine", "hardware", "energy")
)


@pytest.mark.skipif(not HAVE_REAL, reason="the real engine / hardware tables are not merged yet")
def test_real_engine_run_and_models(store: Path) -> None:
    """With the real engine and roofline: a run conserves requests (in = finished +
    dropped) and states that the latency model is not measured; ``models`` lists both
    tables; an unknown model is one usage error line.
    """
    code, out, err = cli(
        "serve", "run", "--source", "azure-llm", "--dataset", "conv", "--duration", "2m",
        "--replicas", "2", "--store", store, "--json",
    )  # fmt: skip
    assert code == 0, err
    (row,) = json.loads(out)
    assert row["requests"] == conv_requests_within(120)
    assert row["requests_finished"] + row["requests_dropped"] == row["requests"]
    assert "latency model roofline" in err
    code, out, err = cli("serve", "models", "--json")
    assert code == 0, err
    assert {r["table"] for r in json.loads(out)} == {"gpu", "model"}
    code, _, err = cli(
        "serve", "run", "--source", "azure-llm", "--dataset", "conv", "--model", "nope",
        "--store", store,
    )  # fmt: skip
    assert code == 2
    assert "nope" in one_error_line(err)
