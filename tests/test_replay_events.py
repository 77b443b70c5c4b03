"""``--events``: the replay's event trace in the Chrome Trace Event Format.

The format rules checked here are the format's own, from its documents:

- the Trace Event Format document (Google Docs
  1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU, linked from catapult's trace-event-format
  page; field by field in wix-incubator/trace-event-lib's typings):
  the JSON Object Format ``{"traceEvents": [...], "displayTimeUnit": "ms" | "ns",
  "otherData": {...}}``; every event has ``name``, ``ph``, ``pid``, and ``ts`` in
  microseconds (integer or fractional); complete events (``X``) add ``dur`` (tracing clock
  duration, microseconds); instant events (``i``) have a scope ``s`` of ``g``, ``p`` or
  ``t`` (thread, the default, which needs ``tid``); counter events (``C``) carry their
  series as numeric ``args``; metadata events (``M``) are ``process_name`` /
  ``thread_name`` (``args.name``), ``process_sort_index`` / ``thread_sort_index``
  (``args.sort_index``) or ``process_labels`` (``args.labels``); duration events of one
  thread "must be nested. It is not possible to have non-nested duration events for a
  given thread" (quoted by Perfetto's maintainers in google/perfetto#928);
- Perfetto's JSON importer (perfetto.dev/docs/getting-started/other-formats, "Chrome
  JSON format"): "Perfetto's data model requires duration events (B/E pairs and X
  events) to nest, as mandated by the spec. Overlapping, non-nested events are out of
  spec" (they go to an overflow track, google/perfetto#4280). Its parser
  (src/trace_processor/json_trace_parser.cc) drops an ``X`` without ``dur``, counts a
  thread-scoped instant without ``tid`` or a non-numeric counter value as a parse
  failure, and names a counter track "<name> <series key>". JSON itself has no NaN or
  Infinity (RFC 8259), which a browser's JSON.parse refuses.

The hand cases' events are worked out by hand in the comments from the policies' own
rules (SRTF: the shortest remaining time runs first and preempts longer-remaining jobs,
stopping the worst-ranked first; ``consolidate``: the fullest node that fits, lowest index
among equals; docs/replay.md's fault and power-off models), never read back from a run.
"""

from __future__ import annotations

import itertools
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpu_trace.cli import app
from gpu_trace.replay import ReplayConfig, replay
from gpu_trace.replay.cluster import parse_spec
from gpu_trace.replay.events import write_events
from gpu_trace.store.atomic import atomic_text
from tests.replay_frames import jobs_frame

runner = CliRunner()
S = 1_000_000  # microseconds per second: the format's ts / dur unit

META = {
    "process_name": "name",
    "thread_name": "name",
    "process_sort_index": "sort_index",
    "thread_sort_index": "sort_index",
    "process_labels": "labels",
}
"""Metadata event name -> its one argument (Trace Event Format, Metadata Events)."""


def _no_constant(name: str) -> Any:
    msg = f"{name} is not JSON (RFC 8259)"
    raise AssertionError(msg)


def load(path: Path) -> dict[str, Any]:
    """The file as strict JSON (NaN / Infinity refused, as JSON.parse does)."""
    doc = json.loads(path.read_text(encoding="utf-8"), parse_constant=_no_constant)
    assert isinstance(doc, dict)
    return doc


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def check_format(doc: dict[str, Any]) -> None:
    """Every rule of the module docstring, on a whole trace."""
    assert isinstance(doc["traceEvents"], list)
    assert doc.get("displayTimeUnit", "ms") in {"ms", "ns"}
    assert isinstance(doc.get("otherData", {}), dict)
    named: set[tuple[int, int]] = set()
    spans: dict[tuple[int, int], list[tuple[float, float]]] = defaultdict(list)
    instants: set[tuple[int, int]] = set()
    for ev in doc["traceEvents"]:
        ph = ev["ph"]
        assert isinstance(ev["name"], str), ev
        assert type(ev["pid"]) is int, ev
        if ph == "M":
            assert ev["name"] in META, ev
            key = META[ev["name"]]
            want = {"name": str, "sort_index": int, "labels": str}[key]
            assert isinstance(ev["args"][key], want), ev
            if ev["name"].startswith("thread_"):
                assert type(ev["tid"]) is int, ev
                if ev["name"] == "thread_name":
                    named.add((ev["pid"], ev["tid"]))
            continue
        assert _number(ev["ts"]), ev
        if ph == "X":
            assert type(ev["tid"]) is int, ev
            assert _number(ev["dur"]) and ev["dur"] >= 0, ev
            spans[(ev["pid"], ev["tid"])].append((ev["ts"], ev["dur"]))
        elif ph == "i":
            assert ev.get("s", "t") in {"g", "p", "t"}, ev
            if ev.get("s", "t") == "t":
                assert type(ev["tid"]) is int, ev
                instants.add((ev["pid"], ev["tid"]))
        elif ph == "C":
            assert ev["args"] and all(_number(v) for v in ev["args"].values()), ev
        else:
            pytest.fail(f"phase {ph!r} is not one the writer should use: {ev}")
    assert set(spans) <= named, "an X event on a thread without a thread_name"
    assert instants <= named, "a thread-scoped instant on a thread without a thread_name"
    for track, items in spans.items():
        # nested or disjoint: in start order (longest first at a tie), each span starts
        # after the enclosing ones end or ends within the innermost one
        stack: list[float] = []
        for ts, dur in sorted(items, key=lambda x: (x[0], -x[1])):
            while stack and stack[-1] <= ts:
                stack.pop()
            assert not stack or ts + dur <= stack[-1], f"overlap on {track} at {ts}"
            stack.append(ts + dur)


def by_phase(doc: dict[str, Any], ph: str) -> list[dict[str, Any]]:
    return [e for e in doc["traceEvents"] if e["ph"] == ph]


def thread_names(doc: dict[str, Any]) -> dict[int, str]:
    return {e["tid"]: e["args"]["name"] for e in by_phase(doc, "M") if e["name"] == "thread_name"}


def run_trace(
    rows: list[tuple[float, float, float]], spec: str, tmp_path: Path, **cfg: Any
) -> tuple[Any, dict[str, Any]]:
    config = ReplayConfig(source="t", **cfg)
    result = replay(jobs_frame(rows), parse_spec(spec), config, record_events=True)
    path = tmp_path / "trace.json"
    count = write_events(result, path)
    doc = load(path)
    assert count == len(doc["traceEvents"])
    check_format(doc)
    return result, doc


def x(name: str, t0: float, t1: float, tid: int, args: dict[str, Any], cat: str = "job") -> dict:
    """The complete event the writer must emit for [t0, t1) s on ``tid``."""
    return {
        "name": name,
        "cat": cat,
        "ph": "X",
        "ts": round(t0 * S),
        "dur": round((t1 - t0) * S),
        "pid": 1,
        "tid": tid,
        "args": args,
    }


def seg(job: str, on: float, total: float, k: int, ended: str) -> dict[str, Any]:
    return {"job": job, "gpus_on_node": on, "gpus": total, "segment": k, "ended": ended}


def test_srtf_preemption_and_node_failure_hand_case(tmp_path: Path) -> None:
    # Cluster 4x2: node 0 and node 1, 2 GPUs each. SRTF with true durations, consolidate,
    # no restore cost, no checkpoint; node 1 fails at 60 s and is repaired 30 s later.
    # Jobs (arrival, run s, GPUs): j0 (0, 100, 2), j1 (0, 50, 1), j2 (0, 40, 1),
    # j3 (10, 20, 2).
    # t=0: shortest remaining first: j2 (40) -> fullest node with a free GPU: both have
    #   2, lowest index: node 0; j1 (50) -> node 0 (now 1 free: the fullest that fits);
    #   j0 (100, 2 GPUs) -> node 1. Node 0 runs j2 and j1 at once: two lanes.
    # t=10: j3 (20 s, 2 GPUs) arrives; no GPU free. It outranks all (90, 40, 30 s left);
    #   victims worst first: j0 (90 left) frees node 1's 2 GPUs, enough: only j0 stops
    #   (preempt, 90 s left) and j3 runs on node 1 from 10 to 30.
    # t=30: j3 ends; j0 restarts on node 1 (the only node with 2 free GPUs), due at 120.
    # t=40: j2 ends; t=50: j1 ends (node 0 empty).
    # t=60: node 1 fails: j0 dies after 30 s of this segment; without checkpoints it
    #   keeps the 10 s it had at its preemption, 90 s left; node 1 is out until 90. j0
    #   restarts at once on node 0 (2 free) and finishes at 150.
    result, doc = run_trace(
        [(0, 100, 2), (0, 50, 1), (0, 40, 1), (10, 20, 2)],
        "4x2",
        tmp_path,
        scheduler="srtf",
        estimator="oracle",
        faults="fail=60@1,mttr=30",
    )
    # Tracks: the queue (tid 1), node 0's two lanes (tids 2, 3), node 1 (tid 4).
    assert thread_names(doc) == {1: "queue", 2: "node 0", 3: "node 0 (2)", 4: "node 1"}
    # Lanes: node 0's intervals in start order (ties: earlier end first): j2 [0, 40) on
    # lane 0, j1 [0, 50) on lane 1, j0 [60, 150) back on lane 0 (free since 40).
    # Node 1: j0 [0, 10), j3 [10, 30), j0 [30, 60), then out of service [60, 90).
    assert by_phase(doc, "X") == [
        x("j2", 0, 40, 2, seg("j2", 1.0, 1.0, 1, "finish")),
        x("j0", 60, 150, 2, seg("j0", 2.0, 2.0, 3, "finish")),
        x("j1", 0, 50, 3, seg("j1", 1.0, 1.0, 1, "finish")),
        x("j0", 0, 10, 4, seg("j0", 2.0, 2.0, 1, "preempt")),
        x("j3", 10, 30, 4, seg("j3", 2.0, 2.0, 1, "finish")),
        x("j0", 30, 60, 4, seg("j0", 2.0, 2.0, 2, "fail")),
        x("failed", 60, 90, 4, {"node": 1, "state": "failed"}, cat="node"),
    ]
    # Arrivals on the queue track, instants of thread scope.
    assert [(e["name"], e["ts"], e["s"], e["tid"]) for e in by_phase(doc, "i")] == [
        ("arrive j0", 0, "t", 1),
        ("arrive j1", 0, "t", 1),
        ("arrive j2", 0, "t", 1),
        ("arrive j3", 10 * S, "t", 1),
    ]
    # Counters, one sample per change of the state after each instant's pass (Perfetto
    # names the tracks "waiting jobs", "GPUs used by jobs", "GPUs out of service"):
    # waiting: none at 0, j0 at 10, none from 30. Jobs' GPUs: 4 (0), 3 (j2 gone, 40),
    # 2 (50), 2 (j0 moved to node 0 at 60), 0 at 150. Out of service: 0, then node 1's
    # 2 GPUs from 60 to 90.
    counters = [(e["name"], e["ts"], e["args"]) for e in by_phase(doc, "C")]
    assert counters == [
        ("waiting", 0, {"jobs": 0}),
        ("waiting", 10 * S, {"jobs": 1}),
        ("waiting", 30 * S, {"jobs": 0}),
        ("GPUs", 0, {"used by jobs": 4, "out of service": 0}),
        ("GPUs", 40 * S, {"used by jobs": 3, "out of service": 0}),
        ("GPUs", 50 * S, {"used by jobs": 2, "out of service": 0}),
        ("GPUs", 60 * S, {"used by jobs": 2, "out of service": 2}),
        ("GPUs", 90 * S, {"used by jobs": 2, "out of service": 0}),
        ("GPUs", 150 * S, {"used by jobs": 0, "out of service": 0}),
    ]
    assert all(type(e["ts"]) is int for e in doc["traceEvents"] if "ts" in e)
    assert doc["displayTimeUnit"] == "ms"
    other = doc["otherData"]
    assert other["run_id"] == result.run_id and other["scheduler"] == "srtf"
    assert other["time_origin_utc"] == "2020-01-01T00:00:00+00:00"  # jobs_frame's T0


def test_power_off_states_hand_case(tmp_path: Path) -> None:
    # Cluster 2x1 (two nodes of one GPU), FIFO, power-off idle=10, boot=5, checks every
    # 5 s from the first arrival. j0 (0, 100 s, 1 GPU) -> node 0 (fullest that fits,
    # lowest index); j1 (50, 10 s, 1 GPU).
    # Node 1 is idle from 0; the check at 10 finds it idle for 10 s: off at 10.
    # t=50: j1 waits (node 0 busy, node 1 off): the check boots node 1 (booting 50..55).
    # t=55: node 1 back (its boot event comes before the check queued after it), j1 runs
    #   55..65. Checks at 60 (busy) and 65 (idle 5 s): on; at 70 idle 10 s: off again,
    #   until the end of the run at 100 (j0's finish; no check after: no work left).
    _, doc = run_trace(
        [(0, 100, 1), (50, 10, 1)], "2x1", tmp_path, power_off="idle=10,boot=5,check=5"
    )
    assert thread_names(doc) == {1: "queue", 2: "node 0", 3: "node 1"}
    assert by_phase(doc, "X") == [
        x("j0", 0, 100, 2, seg("j0", 1.0, 1.0, 1, "finish")),
        x("off", 10, 50, 3, {"node": 1, "state": "off"}, cat="node"),
        x("booting", 50, 55, 3, {"node": 1, "state": "booting"}, cat="node"),
        x("j1", 55, 65, 3, seg("j1", 1.0, 1.0, 1, "finish")),
        x("off", 70, 100, 3, {"node": 1, "state": "off"}, cat="node"),
    ]


def test_shared_gpus_and_many_jobs_stay_in_format(tmp_path: Path) -> None:
    """A busier run (fractional jobs sharing GPUs, multi-node jobs, preemptions, jobs
    reassigned within an instant, random failures): still in format, no two X events of
    a thread overlapping at all (lanes), and the trace agrees with the run's own per-job
    table (preemptions and failures per job: a ``reassign`` is not a preemption).
    """
    rows = [(i * 7 % 90, 30 + (i * 37) % 200, (0.5, 1, 2, 6, 0.25)[i % 5]) for i in range(80)]
    result, doc = run_trace(
        rows,
        "12x4",
        tmp_path,
        scheduler="srtf",
        estimator="oracle",
        faults="mtbf=2000,mttr=50",
        seed=3,
    )
    lanes: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for e in by_phase(doc, "X"):
        lanes[e["tid"]].append((e["ts"], e["ts"] + e["dur"]))
    for spans in lanes.values():
        spans.sort()
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))
    jobs = result.jobs.filter(result.jobs["outcome"] != "skipped")
    ends: dict[str, dict[int, str]] = defaultdict(dict)
    held: dict[tuple[str, int], float] = defaultdict(float)
    for e in by_phase(doc, "X"):
        if e["cat"] == "job":
            a = e["args"]
            ends[a["job"]][a["segment"]] = a["ended"]
            held[(a["job"], a["segment"])] += a["gpus_on_node"]
    # a segment's events over all its nodes hold exactly the job's GPUs (6-GPU jobs
    # span two 4-GPU nodes)
    gpus = dict(zip(jobs["job_id"], jobs["gpus"], strict=True))
    assert all(v == pytest.approx(gpus[j]) for (j, _), v in held.items())
    assert any(v == 6 for v in gpus.values())
    for row in jobs.iter_rows(named=True):
        got = [v for _, v in sorted(ends[row["job_id"]].items())]
        assert got.count("preempt") == row["preemptions"], row
        assert got.count("fail") == row["failures"], row
        if row["outcome"] == "finished":
            assert got[-1] == "finish"
    assert sum(e["args"]["jobs"] == 0 for e in by_phase(doc, "C") if e["name"] == "waiting")
    assert any(e["name"] == "failed" for e in by_phase(doc, "X"))


def test_no_recording_unless_asked() -> None:
    # The hot path pays for an empty watcher list only: nothing is attached by default.
    config = ReplayConfig(source="t")
    result = replay(jobs_frame([(0, 10, 1)]), parse_spec("2x1"), config)
    assert result.engine.watchers == [] and "events" not in result.extra


def test_cli_writes_a_trace_and_refuses_a_bad_path(store_copy: Path, tmp_path: Path) -> None:
    base = ["replay", "run", "--source", "openb", "--store", str(store_copy), "--gpus", "16x8"]
    bad = runner.invoke(app, [*base, "--events", str(tmp_path / "no" / "such" / "t.json")])
    assert bad.exit_code == 1
    lines = bad.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "no folder" in lines[0]
    assert "Traceback" not in bad.output
    folder = runner.invoke(app, [*base, "--events", str(tmp_path)])
    assert folder.exit_code == 1 and "is a folder" in folder.stderr
    good = tmp_path / "t.json"
    ok = runner.invoke(app, [*base, "--events", str(good)])
    assert ok.exit_code == 0, ok.stderr
    check_format(load(good))
    assert [p.name for p in tmp_path.iterdir() if p.is_file()] == ["t.json"]  # no temp left


def test_cli_compare_writes_one_trace_per_run(store_copy: Path, tmp_path: Path) -> None:
    out = tmp_path / "cmp.json"
    result = runner.invoke(
        app,
        ["replay", "compare", "--source", "openb", "--store", str(store_copy), "--gpus",
         "16x8", "--policies", "fifo,sjf", "--events", str(out)],
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    files = sorted(p.name for p in tmp_path.glob("cmp.*.json"))
    assert len(files) == 2 and files[0].startswith("cmp.fifo-") and files[1].startswith("cmp.sjf-")
    for name in files:
        doc = load(tmp_path / name)
        check_format(doc)
        assert doc["otherData"]["run_id"] == name[len("cmp.") : -len(".json")]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    # atomic_text (the writer's file handling): content replaces the file only when the
    # block ends cleanly; an exception mid-write keeps the old file, removes the temp.
    path = tmp_path / "trace.json"
    path.write_text("old", encoding="utf-8")
    with pytest.raises(RuntimeError), atomic_text(path) as fh:
        fh.write('{"traceEvents": [')
        raise RuntimeError
    assert path.read_text(encoding="utf-8") == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["trace.json"]
    with atomic_text(path) as fh:
        fh.write("new")
    assert path.read_text(encoding="utf-8") == "new"
