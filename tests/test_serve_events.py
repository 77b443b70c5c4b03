"""``serve run|compare --events``: the serving replay's trace in the Chrome Trace Event
Format, through the job replay's writer.

The format rules are the format's own, as tests/test_replay_events.py cites them (the
Trace Event Format document, Google Docs 1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU;
Perfetto's JSON importer): its ``check_format`` is applied to every event that is not
an async event, and the async ones are checked here against the same documents:

- nestable async events have ``ph`` ``b`` (begin), ``e`` (end) or ``n`` (instant) and
  an ``id``; "events with the same category and id [are] events from the same event
  tree. A nested async event should have the same category and id as its parent"
  (wix-incubator/trace-event-lib, src/schema/events/AsyncEvent.ts, from the format
  document's "Async Events");
- Perfetto's parser (src/trace_processor/importers/json/json_trace_parser_impl.cc)
  counts a ``b`` / ``e`` / ``n`` without ``pid`` or without an ``id`` as a parse
  failure, puts every event of one (cat, id) on one track and ends the innermost open
  slice at an ``e`` of the same name (slice_tracker ``End`` with the name), so a
  request's phases must close in the reverse order they opened;
- counters (``C``) are process-local, named by ``name`` (Perfetto: "<name> <series>");
- events of one timestamp are read in file order (implicit in the format, as
  speedscope's importer notes in jlfwong/speedscope@a10c834: otherwise nesting at a tie
  is ambiguous), so a tree's events are sorted stably by ``ts`` before its check.

The hand case is worked out in its comments from the replica scheduler's rules (vLLM:
prefill-first iterations, the prompt's blocks allocated when it is scheduled, one slot
per decode step; docs/serving-replay.md) and the test's latency model, never read back
from a run.
"""

from __future__ import annotations

import csv
import itertools
import json
from collections import defaultdict
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from serve_engine_common import LinearLatency, config, synthetic

from gpu_trace.errors import GpuTraceError
from gpu_trace.replay.events import write_events
from gpu_trace.serve import events as sev
from gpu_trace.serve.engine import Engine, build
from gpu_trace.serve.events import ServeTrace, TracedEngine, simulate_traced
from tests.serving_common import SAMPLES, cli, ingest_ok
from tests.test_replay_events import check_format, load
from tests.test_serve_golden import Linear, requests

S = 1_000_000  # µs per second: the format's ts / dur unit
ASYNC = {"b", "e", "n"}


def check_async(doc: dict[str, Any]) -> None:
    """The nestable async events' rules (module docstring), per (pid, cat, id) tree."""
    trees: dict[tuple[int, str, int], list[dict[str, Any]]] = defaultdict(list)
    for e in doc["traceEvents"]:
        if e["ph"] in ASYNC:
            assert type(e["pid"]) is int and type(e["id"]) is int, e
            assert isinstance(e["cat"], str) and isinstance(e["name"], str), e
            assert isinstance(e["ts"], int), e
            trees[(e["pid"], e["cat"], e["id"])].append(e)
    for key, events in trees.items():
        stack: list[str] = []
        for e in sorted(events, key=lambda x: x["ts"]):  # stable: file order at a tie
            if e["ph"] == "b":
                stack.append(e["name"])
            elif e["ph"] == "e":
                assert stack and stack[-1] == e["name"], (key, e, stack)
                stack.pop()
            else:
                assert stack, f"an instant outside its tree: {e}"
        assert not stack, f"{key}: {stack} never closed"


def check(doc: dict[str, Any]) -> None:
    """Every format rule on a whole serving trace."""
    check_format({**doc, "traceEvents": [e for e in doc["traceEvents"] if e["ph"] not in ASYNC]})
    check_async(doc)


def trace(tmp_path: Path, eng: TracedEngine, run_id: str = "hand") -> dict[str, Any]:
    path = tmp_path / "trace.json"
    count = write_events(ServeTrace(eng, run_id), path)
    doc = load(path)
    assert count == len(doc["traceEvents"])
    check(doc)
    return doc


def by_phase(doc: dict[str, Any], *ph: str) -> list[dict[str, Any]]:
    return [e for e in doc["traceEvents"] if e["ph"] in ph]


def x(name: str, t0: float, t1: float, prefill: int, decode: int, kv: int, run: int) -> dict:
    """The iteration slice the writer must emit on replica 0 for [t0, t1) s."""
    return {
        "name": name,
        "cat": "iteration",
        "ph": "X",
        "ts": round(t0 * S),
        "dur": round(t1 * S) - round(t0 * S),
        "pid": 1,
        "tid": 1,
        "args": {
            "prefill_tokens": prefill,
            "decode_count": decode,
            "kv_blocks_used": kv,
            "run_iterations": run,
        },
    }


def test_two_requests_on_one_replica_hand_case(tmp_path: Path) -> None:
    # One replica, vllm, 16-token KV blocks. Iteration = 0.05 s + 0.001 s x prompt tokens
    # + 0.01 s x decoding requests (tests/test_serve_golden.py's model).
    # R0 arrives 0.0 (prompt 100, 4 tokens); R1 arrives 0.1 (prompt 50, 2 tokens).
    # 0.00-0.15 prefill R0 (0.05 + 0.100): blocks ceil(100 / 16) = 7. R0 token 1 at 0.15.
    # 0.10      R1 queues (the replica is busy).
    # 0.15-0.25 prefill R1 (0.05 + 0.050; prefill first): + ceil(50 / 16) = 4 -> 11
    #           blocks. R1 token 1 at 0.25.
    # 0.25-0.32 decode R0, R1 (0.05 + 0.02): slots 100 and 50 are inside held blocks
    #           (100 % 16, 50 % 16 != 0): 11 blocks. R1 token 2: done, frees its 4.
    # 0.32-0.38, 0.38-0.44 decode R0 alone (0.06 each; slots 101, 102): 7 blocks. The
    #           engine plans these two as one run (R0's last two tokens, nothing else):
    #           two slices, run_iterations 2. R0 done at 0.44.
    result, eng = simulate_traced(requests([0.0, 0.1], [100, 50], [4, 2]), config(), Linear())
    doc = trace(tmp_path, eng)
    assert by_phase(doc, "M") == [
        {"name": "process_name", "ph": "M", "pid": 1, "tid": 1, "args": {"name": "serve hand"}},
        {"name": "thread_name", "ph": "M", "pid": 1, "tid": 1, "args": {"name": "replica 0 mixed"}},
        {"name": "thread_sort_index", "ph": "M", "pid": 1, "tid": 1, "args": {"sort_index": 1}},
    ]
    assert by_phase(doc, "X") == [
        x("prefill", 0.0, 0.15, 100, 0, 7, 1),
        x("prefill", 0.15, 0.25, 50, 0, 11, 1),
        x("decode", 0.25, 0.32, 0, 2, 11, 1),
        x("decode", 0.32, 0.38, 0, 1, 7, 2),
        x("decode", 0.38, 0.44, 0, 1, 7, 2),
    ]
    # the slices end where the engine's own token times are: R0's first token (slice
    # 0), R1's (slice 1), R1's finish (slice 2), R0's finish (slice 4)
    ends = [e["ts"] + e["dur"] for e in by_phase(doc, "X")]
    rows = result.requests.to_dicts()
    first = [round((r["arrival_s"] + r["ttft_s"]) * S) for r in rows]
    assert first == [ends[0], ends[1]]
    assert [round(r["finish_s"] * S) for r in rows] == [ends[4], ends[2]]
    # Counters, one sample per change: 0: R0 in the batch (7 blocks); 0.1: R1 waits;
    # 0.15: both in the batch (11 blocks); 0.32: R1 gone (7); 0.44: empty.
    assert [(e["name"], e["ts"], e["args"]) for e in by_phase(doc, "C")] == [
        ("replica 0 requests", 0, {"running": 1, "waiting": 0}),
        ("replica 0 requests", 100_000, {"running": 1, "waiting": 1}),
        ("replica 0 requests", 150_000, {"running": 2, "waiting": 0}),
        ("replica 0 requests", 320_000, {"running": 1, "waiting": 0}),
        ("replica 0 requests", 440_000, {"running": 0, "waiting": 0}),
        ("replica 0 KV", 0, {"blocks used": 7}),
        ("replica 0 KV", 150_000, {"blocks used": 11}),
        ("replica 0 KV", 320_000, {"blocks used": 7}),
        ("replica 0 KV", 440_000, {"blocks used": 0}),
    ]
    # Requests: R0 is admitted at its arrival (no queue phase: zero length is left out).
    got = [(e["id"], e["ph"], e["name"], e["ts"]) for e in by_phase(doc, "b", "e", "n")]
    assert got == [
        (0, "b", "request", 0),
        (0, "b", "prefill", 0),
        (0, "e", "prefill", 150_000),
        (0, "n", "first token", 150_000),
        (0, "b", "decode", 150_000),
        (0, "e", "decode", 440_000),
        (0, "e", "request", 440_000),
        (1, "b", "request", 100_000),
        (1, "b", "queue", 100_000),
        (1, "e", "queue", 150_000),
        (1, "b", "prefill", 150_000),
        (1, "e", "prefill", 250_000),
        (1, "n", "first token", 250_000),
        (1, "b", "decode", 250_000),
        (1, "e", "decode", 320_000),
        (1, "e", "request", 320_000),
    ]
    args0 = by_phase(doc, "b")[0]["args"]
    assert args0 == {"request_id": 0, "prompt_tokens": 100, "output_tokens": 4, "preemptions": 0}
    assert doc["otherData"]["run_id"] == "hand" and doc["otherData"]["iterations"] == 5


def test_disaggregated_hand_case_shows_the_kv_transfer(tmp_path: Path) -> None:
    # tests/test_serve_engine_cluster.py's case, worked from the spec: 1 prefill + 1
    # decode replica; iteration = 1 s + 0.01 s x tokens (prompt tokens, or decoding
    # requests); the toy model's KV is 512 B per token, so a 100-token prompt is
    # 409,600 bits: 1 s over the 0.0004096 Gbit/s link. 16-token blocks.
    # A (0, prompt 100, 3 tokens): prefill on replica 0, 0 -> 2 (7 blocks); token 1 at 2;
    #   KV on the link 2 -> 3 (replica 0 holds its 7 blocks until then); queued on
    #   replica 1 at 3 and taken at once (7 blocks; slots 100, 101 need none): decode
    #   3 -> 4.01 -> 5.02 (1.01 s each), planned as one run of two.
    # B (0.5, prompt 100, 1 token): waits on replica 0 until 2, prefill 2 -> 4 (7 more
    #   blocks: 14 held while A's KV is on the link), done at its first token.
    reqs = requests([0.0, 0.5], [100, 100], [3, 1])
    cfg = config(disaggregate="1:1", link_gbps=0.0004096)
    _, eng = simulate_traced(reqs, cfg, LinearLatency(a=1.0, b=0.01))
    doc = trace(tmp_path, eng)
    names = {e["tid"]: e["args"]["name"] for e in by_phase(doc, "M") if e["name"] == "thread_name"}
    assert names == {1: "replica 0 prefill", 2: "replica 1 decode"}
    assert [
        (e["tid"], e["name"], e["ts"], e["dur"], e["args"]["kv_blocks_used"])
        for e in by_phase(doc, "X")
    ] == [
        (1, "prefill", 0, 2 * S, 7),
        (1, "prefill", 2 * S, 2 * S, 14),
        (2, "decode", 3 * S, 1_010_000, 7),
        (2, "decode", 4_010_000, 1_010_000, 7),
    ]
    a = [(e["ph"], e["name"], e["ts"], e["tid"]) for e in by_phase(doc, "b", "e", "n")]
    assert a[: a.index(("e", "request", 5_020_000, 1)) + 1] == [
        ("b", "request", 0, 1),
        ("b", "prefill", 0, 1),
        ("e", "prefill", 2 * S, 1),
        ("n", "first token", 2 * S, 1),
        ("b", "kv transfer", 2 * S, 1),
        ("e", "kv transfer", 3 * S, 1),
        ("b", "decode", 3 * S, 2),
        ("e", "decode", 5_020_000, 2),
        ("e", "request", 5_020_000, 1),
    ]
    kv0 = [
        (e["ts"], e["args"]["blocks used"])
        for e in by_phase(doc, "C")
        if e["name"] == "replica 0 KV"
    ]
    assert kv0 == [(0, 7), (2 * S, 14), (3 * S, 7), (4 * S, 0)]


CASES = [
    {"replicas": 2, "kv_preemption": "swap", "batch": "max_tokens=512,max_seqs=8"},
    {"replicas": 2, "batching": "sarathi", "batch": "chunk=256", "router": "least-tokens"},
    {"disaggregate": "1:2", "link_gbps": 10.0},
    {"disaggregate": "2:1", "batching": "sarathi", "kv_preemption": "swap", "link_gbps": 1.0},
    {"autoscale": "queue,min=1,max=3,up=2,down=0.5,interval=2", "cold_start_s": 1.0},
]


def busy(case: dict[str, object], jump: bool = True) -> tuple[Any, TracedEngine]:
    lat = LinearLatency(a=0.01, b=1e-4, c=1e-6, capacity_tokens=2400)
    cfg = config(kv_block_tokens=16, bin_s=5.0, **case)
    eng = build(synthetic(300, seed=5, rate=30.0), cfg, lat, jump=jump, engine=TracedEngine)
    assert isinstance(eng, TracedEngine)
    return eng.run(), eng


@pytest.mark.parametrize("case", CASES)
def test_busy_runs_keep_the_format_and_agree_with_the_engine(
    case: dict[str, object], tmp_path: Path
) -> None:
    """Preemptions (recompute, swap), chunked prefill, disaggregation, autoscaling: in
    format (X events of a replica never overlap, async trees close), and the trace adds
    up to the engine's own accounting; stepping one iteration at a time gives the same
    trace as the macro-steps (but for the run length in args).
    """
    result, eng = busy(case)
    doc = trace(tmp_path, eng, "busy")
    slices = [e for e in by_phase(doc, "X") if e["cat"] == "iteration"]
    lanes: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for e in by_phase(doc, "X"):
        lanes[e["tid"]].append((e["ts"], e["ts"] + e["dur"]))
    for spans in lanes.values():
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))
    per_rep = defaultdict(int)
    for e in slices:
        per_rep[e["tid"] - 1] += 1
    assert per_rep == {
        r: n
        for r, n in zip(result.replicas["replica"], result.replicas["iterations"], strict=True)
        if n
    }
    ts = result.timeseries
    assert sum(e["args"]["prefill_tokens"] for e in slices) == ts["prefill_tokens"].sum()
    assert sum(e["args"]["decode_count"] for e in slices) == ts["decode_tokens"].sum()
    assert any(e["args"]["run_iterations"] > 1 for e in slices)  # macro-steps expanded
    assert max(e["args"]["kv_blocks_used"] for e in slices) <= eng.capacity
    # every request's tree spans arrival -> finish; its phases count its preemptions
    # and its KV transfer
    rows = result.requests.to_dicts()
    spans: dict[int, list[int]] = defaultdict(list)
    phases: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for e in by_phase(doc, "b", "e"):
        if e["name"] == "request":
            spans[e["id"]].append(e["ts"])
        elif e["ph"] == "b":
            phases[e["id"]].append(e)
    for i, row in enumerate(rows):
        if row["status"] == "dropped":
            continue
        assert spans[i] == [round(row["arrival_s"] * S), round(row["finish_s"] * S)]
        again = [p for p in phases[i] if p["args"].get("preempted")]
        assert len(again) == row["preemptions"], row
        hops = [p for p in phases[i] if p["name"] == "kv transfer"]
        assert len(hops) == (1 if row["kv_transfer_s"] and row["output_tokens"] > 1 else 0)
    if "disaggregate" in case:
        names = {e["args"]["name"] for e in by_phase(doc, "M") if e["name"] == "thread_name"}
        assert {"prefill", "decode"} == {n.split()[-1] for n in names}
    if "autoscale" in case:
        assert any(e["name"] == "cold start" for e in by_phase(doc, "X"))
    if case.get("kv_preemption") == "swap" or "disaggregate" not in case:
        assert sum(r["preemptions"] for r in rows) > 0 or "autoscale" in case
    _, stepped = busy(case, jump=False)
    other = trace(tmp_path, stepped, "busy")

    def same(d: dict[str, Any]) -> list[dict[str, Any]]:
        out = []
        for e in d["traceEvents"]:
            if e["ph"] == "X" and "run_iterations" in e["args"]:
                e = {**e, "args": {k: v for k, v in e["args"].items() if k != "run_iterations"}}
            out.append(e)
        return out

    assert same(doc) == same(other)


def test_too_many_iterations_are_refused() -> None:
    reqs = requests([0.0, 0.1], [100, 50], [4, 2])
    eng = build(reqs, config(), Linear(), engine=TracedEngine)
    assert isinstance(eng, TracedEngine)
    eng.limit = 3  # the hand case runs 5
    with pytest.raises(GpuTraceError, match="more than 3 iterations"):
        eng.run()


def test_the_default_run_records_nothing() -> None:
    # The default engine is the plain class (no overridden step, no recorder), and a
    # traced run replays the same requests to the same results.
    reqs = synthetic(200, seed=2)
    lat = LinearLatency(a=0.01, b=1e-4, c=1e-6, capacity_tokens=2400)
    cfg = config(replicas=2, kv_block_tokens=16)
    plain = build(reqs, cfg, lat)
    assert type(plain) is Engine and not hasattr(plain, "it_t0")
    base = plain.run()
    traced, _ = simulate_traced(reqs, cfg, lat)
    assert base.requests.equals(traced.requests)
    assert base.timeseries.equals(traced.timeseries)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("serve-events") / "store"
    ingest_ok(root, "azure-llm", SAMPLES / "azure-llm")
    return root


def run_args(store: Path, *extra: str | Path) -> list[str | Path]:
    return [
        "serve", "run", "--source", "azure-llm", "--dataset", "conv", "--duration", "1m",
        "--replicas", "2", "--store", store, *extra,
    ]  # fmt: skip


def test_cli_run_writes_a_trace_and_refuses_a_bad_path(store: Path, tmp_path: Path) -> None:
    code, _, err = cli(*run_args(store, "--events", tmp_path / "no" / "t.json"))
    assert code == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "no folder" in lines[0]
    path = tmp_path / "t.json"
    code, out, err = cli(*run_args(store, "--events", path, "--json"))
    assert code == 0, err
    assert f"written to {path}" in err
    doc = load(path)
    check(doc)
    (row,) = json.loads(out)
    assert doc["otherData"]["run_id"] == row["run_id"]
    assert doc["otherData"]["requests_replayed"] == row["requests"]
    names = {e["args"]["name"] for e in by_phase(doc, "M") if e["name"] == "thread_name"}
    assert names == {"replica 0 mixed", "replica 1 mixed"}
    assert len({e["id"] for e in by_phase(doc, "b")}) == row["requests"]
    assert [p.name for p in tmp_path.iterdir() if p.is_file()] == ["t.json"]  # no temp left


def test_cli_compare_writes_one_trace_per_run(store: Path, tmp_path: Path) -> None:
    code, _, err = cli(
        "serve", "compare", "--source", "azure-llm", "--dataset", "conv", "--store", store,
        "--events", tmp_path,
    )  # fmt: skip
    assert code == 1 and "is a folder" in err and len(err.strip().splitlines()) == 1
    base = tmp_path / "cmp.json"
    code, out, err = cli(
        "serve", "compare", "--source", "azure-llm", "--dataset", "conv", "--duration", "1m",
        "--replicas", "2", "--disaggregate", "0,1:1", "--store", store, "--events", base,
        "--json",
    )  # fmt: skip
    assert code == 0, err
    ids = sorted(r["run_id"] for r in json.loads(out))
    files = sorted(p.name for p in tmp_path.glob("cmp.*.json"))
    assert files == [f"cmp.{i}.json" for i in ids] and len(files) == 2
    roles = []
    for i in ids:
        doc = load(tmp_path / f"cmp.{i}.json")
        check(doc)
        assert doc["otherData"]["run_id"] == i
        roles.append(
            sorted(e["args"]["name"] for e in by_phase(doc, "M") if e["name"] == "thread_name")
        )
    assert sorted(roles) == [
        ["replica 0 mixed", "replica 1 mixed"],
        ["replica 0 prefill", "replica 1 decode"],
    ]


def test_cli_refuses_a_run_too_long_for_a_trace(
    store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sev.TracedEngine, "limit", 10)
    path = tmp_path / "t.json"
    code, _, err = cli(*run_args(store, "--events", path))
    assert code == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "more than 10 iterations" in lines[0], err
    assert not path.exists()


def test_cli_trace_names_the_window_origin(store: Path, tmp_path: Path) -> None:
    # The Azure README's TIMESTAMP column (UTC, 7 fractional digits): the first row of
    # the conversation sample is the window's zero; ts are microseconds from it.
    conv = SAMPLES / "azure-llm" / "AzureLLMInferenceTrace_conv.csv"
    with conv.open(newline="") as f:
        first = min(datetime.fromisoformat(r["TIMESTAMP"][:26]) for r in csv.DictReader(f))
    path = tmp_path / "t.json"
    code, _, err = cli(*run_args(store, "--events", path))
    assert code == 0, err
    origin = datetime.fromisoformat(load(path)["otherData"]["time_origin_utc"])
    assert origin.replace(tzinfo=None) == first and origin.utcoffset() == timedelta(0)
    arrivals = [e["ts"] for e in by_phase(load(path), "b") if e["name"] == "request"]
    assert min(arrivals) == 0
