"""Cold starts drawn from GenTD26 model-load latencies (``--cold-start gentd26:FILE``).

The file format is the GenTD26 README's (alibaba/clusterdata,
``cluster-trace-v2026-GenAI/README.md``, section 3 "Model Component Loading Latency",
"Common Field Description"; a copy is
/work/shared/traces/inference/alibaba-genai-2026/README-upstream.md):

| `timestamp_anon` | float  | Anonymized timestamp |
| `value`          | float  | Loading latency (milliseconds) |
| `container_ip`   | string | MD5 hash of container IP, `"NULL"` indicates original empty value |

The upstream repository has no licence, so the real files are not bundled: the fixtures
here are written from that description, and the tests against the real base-model file
(``basemodel_update_latency_anon.csv`` from the ``.tar.gz`` at commit 7a6c496) skip
where it is absent.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from serve_engine_common import LinearLatency, config, requests

from gpu_trace.errors import InputError, UsageError
from gpu_trace.plugins import option_specs
from gpu_trace.serve import metrics
from gpu_trace.serve.cold_start import ColdStarts, latencies_s, parse_cold_start
from gpu_trace.serve.config import ServeConfig
from gpu_trace.serve.engine import simulate
from tests.serving_common import cli, ingest_ok, rows

REAL = Path("/tmp/gentd/basemodel_update_latency_anon.csv")
HEADER = "timestamp_anon,value,container_ip\n"
# three loads: 12 s, 30 s (a "NULL" container, valid per the README), 45 s
FIXTURE = (
    HEADER + "1662859290.0,12000.0,086b31f81b1cf0f15e43fe568e3fb8e4\n"
    "1662859404.0,30000.0,NULL\n"
    "1662859461.0,45000.0,03dc060838ef05053bdea6d483cde7e5\n"
)
FIXTURE_S = [12.0, 30.0, 45.0]


def write(tmp_path: Path, text: str, name: str = "latency.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_fixture_is_read_in_seconds_in_file_order(tmp_path: Path) -> None:
    path = write(tmp_path, FIXTURE)
    assert latencies_s(path).tolist() == FIXTURE_S
    # the option keeps the text (path made absolute) for config_json; a duration is seconds
    assert parse_cold_start(f"gentd26:{path}") == f"gentd26:{path}"
    assert parse_cold_start(f"gentd26:{path},stat=p90") == f"gentd26:{path},stat=p90"
    assert parse_cold_start("90s") == 90.0 and parse_cold_start("60") == 60.0


def test_stat_p50_and_p90_by_hand(tmp_path: Path) -> None:
    # sorted 12, 30, 45 s; linear interpolation between order statistics (numpy's
    # default): p50 at position 0.5 x 2 = 1 -> 30 s; p90 at 0.9 x 2 = 1.8 ->
    # 30 + 0.8 x (45 - 30) = 42 s. A stat is a fixed delay: every scale-up gets it.
    path = write(tmp_path, FIXTURE)
    p50 = ColdStarts(f"gentd26:{path},stat=p50", seed=0)
    p90 = ColdStarts(f"gentd26:{path},stat=p90", seed=0)
    assert [p50.next(), p50.next()] == [30.0, 30.0]
    assert p90.next() == pytest.approx(42.0)


def test_two_scale_ups_draw_two_rows_of_the_file(tmp_path: Path) -> None:
    # One replica, min 1 / max 3, queue metric (up above 0.5 waiting per replica, down
    # below 0.1), ticks every 10 s; a = 1 s per iteration, one request at a time. Four
    # requests at 0 of 1 prompt + 25 tokens: 25 s each on replica 0 (0-25, 25-50, 50-75,
    # 75-100): all four routed there (the only replica up at 0).
    # Tick 10: 3 waiting -> start replica 1 (cold start d1); tick 20: replica 1 still
    # loading (every row >= 12 s), 3 waiting on replica 0 -> start replica 2 (d2); ticks
    # 30-70: max reached, >= 1 waiting (signal >= 1/3) -> nothing; tick 80: none waiting
    # -> drain replica 2 (idle: down at 80); tick 90: drain replica 1 (down at 90); the
    # last request ends at 100, the run's end.
    # The draws, from numpy's documented Generator (default_rng(seed), PCG64): draw k is
    # row integers(3) of the file, rows in file order.
    seed = 2
    rng = np.random.default_rng(seed)
    d1, d2 = (FIXTURE_S[int(rng.integers(3))] for _ in range(2))
    assert d1 != d2  # this seed draws two different rows (45 s then 12 s)
    path = write(tmp_path, FIXTURE)
    cfg = config(
        autoscale="queue,min=1,max=3,up=0.5,down=0.1,interval=10",
        cold_start_s=parse_cold_start(f"gentd26:{path}"),
        batch="max_seqs=1",
        seed=seed,
    )
    result = simulate(requests([0.0] * 4, [1] * 4, [25] * 4), cfg, LinearLatency(a=1.0))
    result.check()
    reps = result.replicas.to_dicts()
    assert [(r["start_s"], r["up_s"], r["down_s"]) for r in reps] == [
        (0.0, 0.0, 100.0),
        (10.0, 10.0 + d1, 90.0),
        (20.0, 20.0 + d2, 80.0),
    ]
    # GPU time counts from the ask (the model load is paid): 100 + 80 + 60 GPU-seconds
    s = metrics.summary(result, metrics.Slo.parse("ttft=1000s,tpot=1s"))
    assert s["gpu_seconds"] == 240.0
    # the same seed replays the same delays
    again = simulate(requests([0.0] * 4, [1] * 4, [25] * 4), cfg, LinearLatency(a=1.0))
    assert again.replicas["up_s"].to_list() == [0.0, 10.0 + d1, 20.0 + d2]


def test_fixed_duration_is_unchanged() -> None:
    # the same case with --cold-start 5: replicas up at 15 and 25
    cfg = config(
        autoscale="queue,min=1,max=3,up=0.5,down=0.1,interval=10",
        cold_start_s=5.0,
        batch="max_seqs=1",
    )
    result = simulate(requests([0.0] * 4, [1] * 4, [25] * 4), cfg, LinearLatency(a=1.0))
    assert result.replicas["up_s"].to_list() == [0.0, 15.0, 25.0]


@pytest.mark.parametrize(
    ("text", "where", "reason"),
    [
        (HEADER + "1.0,2000.0,NULL\n2.0,fast,NULL\n", "row 2 (line 3)", "'fast' is not a number"),
        (HEADER + "1.0,-5.0,NULL\n", "row 1 (line 2)", "'-5.0' is a negative latency"),
        (HEADER + "1.0,,NULL\n", "row 1 (line 2)", "value is missing"),
        (HEADER + "1.0,nan,NULL\n", "row 1 (line 2)", "'nan' is not a finite number"),
        (HEADER + "1.0,2.0,NULL,extra\n", "row 1 (line 2)", "4 fields, the header has 3"),
        (HEADER, None, "no rows after the header"),
        ("", None, "empty file"),
        ("timestamp_anon,latency_ms\n1.0,2.0\n", "line 1", "no 'value' column"),
    ],
)
def test_bad_files(tmp_path: Path, text: str, where: str | None, reason: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(InputError, match=reason) as err:
        parse_cold_start(f"gentd26:{path}")
    assert str(path) in str(err.value)
    if where:
        assert where in str(err.value)


def test_bad_option_text(tmp_path: Path) -> None:
    path = write(tmp_path, FIXTURE)
    with pytest.raises(UsageError, match="unknown --cold-start stat 'p99'"):
        parse_cold_start(f"gentd26:{path},stat=p99")
    with pytest.raises(UsageError, match="unknown --cold-start model 'gentd'"):
        parse_cold_start(f"gentd:{path}")
    with pytest.raises(UsageError, match="not a duration"):
        parse_cold_start("soon")
    with pytest.raises(InputError, match="no such file"):
        parse_cold_start(f"gentd26:{tmp_path / 'missing.csv'}")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with two requests in the Azure LLM trace's format
    (TIMESTAMP,ContextTokens,GeneratedTokens; PROVENANCE.md, from the upstream README).
    """
    tmp = tmp_path_factory.mktemp("coldstart")
    trace = write(
        tmp,
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.9951690,396,109\n",
        "AzureLLMInferenceTrace_conv.csv",
    )
    ingest_ok(tmp / "store", "azure-llm", trace)
    return tmp / "store"


def test_cli_bad_file_is_one_error_line(tmp_path: Path, store: Path) -> None:
    # parsed with the other options, before anything runs: a bad file is the user's
    # input (exit 1), named with its row
    path = write(tmp_path, HEADER + "1.0,2000.0,NULL\n2.0,-1,NULL\n")
    code, _, err = cli(
        "serve", "run", "--source", "azure-llm", "--store", store, "--autoscale", "queue",
        "--cold-start", f"gentd26:{path}",
    )  # fmt: skip
    lines = err.strip().splitlines()
    assert code == 1 and len(lines) == 1, err
    assert lines[0].startswith("error: ") and str(path) in lines[0] and "row 2" in lines[0]


def test_serve_runs_records_the_cold_start_model(tmp_path: Path, store: Path) -> None:
    path = write(tmp_path, FIXTURE)
    code, _, err = cli(
        "-q", "serve", "run", "--source", "azure-llm", "--store", store, "--autoscale",
        "queue", "--cold-start", f"gentd26:{path}", "--run-id", "cold",
    )  # fmt: skip
    assert code == 0, err
    (config_json,) = rows(store, "SELECT config_json FROM serve_runs WHERE run_id = 'cold'")[0]
    assert json.loads(str(config_json))["cold_start_s"] == f"gentd26:{path}"


def test_config_records_the_model(tmp_path: Path) -> None:
    path = write(tmp_path, FIXTURE)
    spec = next(o for o in option_specs(ServeConfig) if o.name == "cold_start_s")
    assert spec.parse is not None
    value = spec.parse(f"gentd26:{path},stat=p50")
    cfg = ServeConfig(cold_start_s=value)
    assert f'"cold_start_s": "gentd26:{path},stat=p50"' in cfg.to_json()
    assert cfg.resolved_run_id() != ServeConfig(cold_start_s=30.0).resolved_run_id()


@pytest.mark.skipif(not REAL.is_file(), reason="the GenTD26 latency file is not bundled")
def test_real_base_model_file() -> None:
    # 7,531 loads; median 22.718 s, p90 41.988 s (numpy.percentile, linear, on the
    # upstream file's `value` / 1000)
    with REAL.open(newline="") as fh:
        ms = [float(r["value"]) for r in csv.DictReader(fh)]
    values = latencies_s(REAL)
    assert len(ms) == 7531 and values.tolist() == [v / 1000 for v in ms]
    assert np.percentile(ms, [50, 90]).tolist() == pytest.approx([22718.0, 41988.0])
    assert ColdStarts(f"gentd26:{REAL},stat=p50", seed=0).next() == pytest.approx(22.718)
    assert ColdStarts(f"gentd26:{REAL},stat=p90", seed=0).next() == pytest.approx(41.988)
    draws = ColdStarts(f"gentd26:{REAL}", seed=7)
    rng = np.random.default_rng(7)
    assert [draws.next() for _ in range(3)] == [ms[rng.integers(7531)] / 1000 for _ in range(3)]
