"""The serving tables in the store: the schemas agree with the engine's column contract,
a run round-trips through the one writer, and a failure half-way leaves the previous
generation (readers keep their snapshot).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from gpu_trace.errors import SchemaMismatch
from gpu_trace.schemas import TABLES
from gpu_trace.serve import metrics
from gpu_trace.serve.config import ServeConfig
from gpu_trace.serve.result import REQUEST_COLUMNS, TIMESERIES_COLUMNS, ServeResult
from gpu_trace.serve.runs import ServeRun, stage
from gpu_trace.store.generations import snapshot_root
from gpu_trace.store.parquet import StoreTransaction, polars_schema
from gpu_trace.store.scan import scan
from tests.serve_standin import standins
from tests.serving_common import SAMPLES, cli, ingest_ok, rows
from tests.test_serve_cli_metrics import five

KEYS = ["source", "dataset", "cluster", "run_id"]


@pytest.mark.parametrize(
    ("table", "contract", "extra"),
    [
        ("serve_requests", REQUEST_COLUMNS, ["trace_dataset"]),
        ("serve_timeseries", TIMESERIES_COLUMNS, []),
    ],
)
def test_tables_hold_the_engine_contract(
    table: str, contract: dict[str, object], extra: list[str]
) -> None:
    schema = polars_schema(TABLES[table])
    assert list(schema) == [*KEYS, *extra, *contract]
    for name, dtype in contract.items():
        assert schema[name] == dtype, name


def a_run(run_id: str, result: ServeResult | None = None) -> ServeRun:
    result = result or five()
    config = ServeConfig(source="azure-llm", dataset="conv", run_id=run_id)
    summary = metrics.summary(result, metrics.Slo.parse(config.slo))
    return ServeRun(config, run_id, result, summary, ["only 5 requests"], "conv")


def test_round_trip(tmp_path: Path) -> None:
    store = tmp_path / "store"
    run = a_run("run-a")
    with StoreTransaction(store) as tx:
        stage(tx, run, "azure-llm")
    back = scan(store, "serve_requests", ["azure-llm"]).collect()
    assert back.select(KEYS).unique().rows() == [("azure-llm", "run-a", "azure-llm", "run-a")]
    assert back["trace_dataset"].unique().to_list() == ["conv"]
    assert back.select(list(REQUEST_COLUMNS)).equals(run.result.requests)
    got = rows(
        store,
        "select run_id, model, requests, requests_dropped, slo_attainment_ratio, notes "
        "from serve_runs",
    )
    assert got == [("run-a", "llama-2-7b", 5, 1, 0.4, "only 5 requests")]


def test_failure_half_way_keeps_the_previous_generation(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with StoreTransaction(store) as tx:
        stage(tx, a_run("run-a"), "azure-llm")
    before = snapshot_root(store).resolve()
    good = five()
    # a timeseries frame off the contract: the third table's write raises, after the
    # first two were staged
    bad = ServeResult(
        good.requests,
        good.timeseries.with_columns(pl.lit(1).alias("bogus")),
        good.replicas,
        good.horizon_s,
    )
    with pytest.raises(SchemaMismatch), StoreTransaction(store) as tx:
        stage(tx, a_run("run-b", bad), "azure-llm")
    assert snapshot_root(store).resolve() == before
    assert rows(store, "select run_id from serve_runs") == [("run-a",)]
    assert rows(store, "select distinct run_id from serve_requests") == [("run-a",)]
    assert not list(store.glob(".tx-*"))  # the staged files went with the transaction
    # a later commit: a reader holding the old snapshot still reads run-a alone
    with StoreTransaction(store) as tx:
        stage(tx, a_run("run-b"), "azure-llm")
    assert scan(before, "serve_runs").select("run_id").collect()["run_id"].to_list() == ["run-a"]
    now = scan(store, "serve_runs").select("run_id").collect().sort("run_id")
    assert now["run_id"].to_list() == ["run-a", "run-b"]


def test_a_failed_run_of_a_comparison_publishes_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "store"
    ingest_ok(store, "azure-llm", SAMPLES / "azure-llm")
    before = snapshot_root(store).resolve()
    with standins(monkeypatch) as engine:
        engine.fail_router = "least-tokens"
        code, _, err = cli(
            "serve", "compare", "--source", "azure-llm", "--dataset", "code", "--duration",
            "1m", "--latency", "standin", "--routers", "round-robin,least-tokens", "--store", store,
        )  # fmt: skip
    assert code == 1
    assert err.strip().splitlines()[-1] == "error: stand-in failure for router least-tokens"
    assert engine.calls == 2
    assert snapshot_root(store).resolve() == before
    assert rows(store, "select count(*) from serve_runs") == [(0,)]
