"""``gpu-trace ingest prometheus-range``: saved query_range JSON, record-exact.

Inputs are written here by hand, so every expected row, locator and reason below is read
off the input (a record is one ``[time, value]`` element; damage above it is one record).
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from gpu_trace.cli import app
from gpu_trace.errors import InputError
from gpu_trace.loaders import LOADERS, ingest, promrange
from gpu_trace.store.parquet import read_table as read_arrow

T0 = 1767225600  # 2026-01-01T00:00:00Z
MIB = 1024 * 1024


def read_table(store: Path, table: str) -> pl.DataFrame:
    out = pl.from_arrow(read_arrow(store, table, "prometheus-range"))
    assert isinstance(out, pl.DataFrame)
    return out


def answer(*series: object, kind: str = "matrix") -> dict[str, Any]:
    return {"status": "success", "data": {"resultType": kind, "result": list(series)}}


def util(values: list[Any], **labels: str) -> dict[str, Any]:
    return {"metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", **labels}, "values": values}


def at(s: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(s, dt.UTC)


def run(path: Path, store: Path, *extra: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(
        app, ["ingest", "prometheus-range", str(path), "--store", str(store), *extra]
    )
    return r.exit_code, r.stdout, r.stderr


def test_one_answer_every_record_accounted(tmp_path: Path) -> None:
    doc = answer(
        util(
            [[T0, "10"], [T0 + 60, "NaN"], [T0 + 120, "+Inf"], [T0 + 180, "101"], ["x", "1"], [T0]],
            gpu="0",
            UUID="GPU-a",
            Hostname="n1",
            modelName="Tesla T4",
            instance="10.0.0.1:9400",
        ),
        {
            "metric": {"__name__": "DCGM_FI_DEV_FB_USED", "gpu": "1", "instance": "10.0.0.2:9400"},
            "values": [[T0 + 0.5, "1024"]],
        },
        {
            "metric": {"__name__": "DCGM_FI_DEV_XID_ERRORS", "gpu": "0", "Hostname": "n1"},
            "values": [[T0 + 60 * i, v] for i, v in enumerate(["0", "43", "43", "79", "0", "79"])],
        },
        {"metric": {"__name__": "up"}, "values": [[T0, "1"]]},
        5,
    )
    f = tmp_path / "q.json"
    f.write_text(json.dumps(doc, indent=2))  # pretty printed: one document, not JSON lines
    store = tmp_path / "store"
    code, out, err = run(f, store)
    assert code == 0, err
    # 15 records: series 1 has 6, series 2 1, series 3 6, series 4 1, series 5 (not an
    # object) 1. Samples: util 10 and NaN (null), 1 GiB used; quarantined: +Inf, 101 %,
    # time 'x', the 1-element pair, the unmapped 'up', series 5; events: 43 at minute 1,
    # 79 at minute 3, 79 again at minute 5 (after a 0); no event: 0, the repeated 43, 0.
    assert out.splitlines()[-1].split() == ["total", "12", "6", "6", "0"]
    s = read_table(store, "gpu_samples").sort("time")
    assert s.select("time", "host", "gpu_index", "metric", "value").rows() == [
        (at(T0), "n1", 0, "gpu_util_pct", 10.0),
        (at(T0 + 0.5), "10.0.0.2", 1, "mem_used_bytes", 1024.0 * MIB),
        (at(T0 + 60), "n1", 0, "gpu_util_pct", None),
    ]
    q = read_table(store, "quarantine").sort("locator")
    assert q.select("locator", "reason").rows() == [
        ("series 1, sample 3", "DCGM_FI_DEV_GPU_UTIL value '+Inf' is not finite"),
        ("series 1, sample 4", "DCGM_FI_DEV_GPU_UTIL value '101' is outside 0-100 %"),
        ("series 1, sample 5", "time 'x' is not a number (unix seconds)"),
        ("series 1, sample 6", "sample is not a [time, value] pair"),
        ("series 4, sample 1", "no canonical metric for up"),
        ("series 5", "series is not an object"),
    ]
    ev = read_table(store, "events").sort("time")
    assert ev.select("time", "kind", "code").rows() == [
        (at(T0 + 60), "xid", 43),
        (at(T0 + 180), "xid", 79),
        (at(T0 + 300), "xid", 79),
    ]
    meta = pq.read_metadata(
        store / "current" / "gpu_samples" / "source=prometheus-range" / "q.parquet"
    ).metadata
    assert meta[b"gpu_trace.no_event_cells"] == b"3"
    assert meta[b"gpu_trace.time_basis"] == b"file" and meta[b"gpu_trace.source_tz"] == b"UTC"
    assert json.loads(meta[b"gpu_trace.gpu_models"]) == {"n1/0": "Tesla T4"}


def test_json_lines_of_chunks(tmp_path: Path) -> None:
    labels = {"gpu": "0", "Hostname": "n1", "GPU_I_ID": "2"}
    xid = {"__name__": "DCGM_FI_DEV_XID_ERRORS", "gpu": "0", "Hostname": "n1"}
    lines = [
        json.dumps(answer(util([[T0, "1"], [T0 + 60, "2"]], **labels))),
        "",  # blank: not a record
        json.dumps(answer(util([[T0 + 120, "3"], [T0 + 60, "9"]], **labels))),  # overlaps
        '{"status":"error","errorType":"bad_data","error":"exceeded maximum resolution"}',
        "{not json",
        json.dumps(answer({"metric": xid, "values": [[T0, "43"]]})),
        json.dumps(answer({"metric": xid, "values": [[T0 + 60, "43"], [T0 + 120, "44"]]})),
        json.dumps({"status": "success", "data": {"resultType": "scalar", "result": [T0, "1"]}}),
        json.dumps(answer({"metric": labels, "value": [T0, "5"]}, kind="vector")),
    ]
    f = tmp_path / "chunks.jsonl"
    f.write_text("\n".join(lines) + "\n")
    store = tmp_path / "store"
    code, out, err = run(f, store, "--host", "h9")
    assert code == 0, err
    q = read_table(store, "quarantine").sort("locator")
    assert q.select("locator", "reason").rows() == [
        (
            "line 3, series 1, sample 2",
            "duplicate: the same series has an earlier sample at this time",
        ),
        ("line 4", "Prometheus error bad_data: exceeded maximum resolution"),
        (
            "line 5",
            "not JSON: Expecting property name enclosed in double quotes at line 1 column 2",
        ),
        ("line 8", "resultType scalar is not matrix (a query_range answer) or vector"),
        ("line 9, series 1, sample 1", "series has no __name__ label"),
    ]
    s = read_table(store, "gpu_samples").sort("time")
    assert s.select("time", "host", "mig_instance", "value").rows() == [
        (at(T0), "h9", "2", 1.0),
        (at(T0 + 60), "h9", "2", 2.0),
        (at(T0 + 120), "h9", "2", 3.0),
    ]
    # the XID series spans two answers: 43 (event), 43 again (no event), 44 (event)
    assert read_table(store, "events").sort("time")["code"].to_list() == [43, 44]
    # 3 samples + 5 quarantined + 2 events (+ 1 no event, not a row)
    assert out.splitlines()[-1].split() == ["total", "10", "5", "5", "0"]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "file is empty"),
        (
            '{\n  "status": \n',
            "not a Prometheus query_range JSON document: Expecting value at line 3 column 1",
        ),
        (json.dumps(answer()), "no samples in the response(s) (empty result)"),
        (
            '{"status":"error","errorType":"bad_data","error":"bad step"}',
            "Prometheus error bad_data: bad step",
        ),
        ("[1, 2]", "response is not a JSON object"),
    ],
)
def test_unusable_file_is_one_line(tmp_path: Path, text: str, reason: str) -> None:
    f = tmp_path / "bad.json"
    f.write_text(text)
    code, _, err = run(f, tmp_path / "store")
    assert (code, err.strip()) == (1, f"error: {f}: {reason}")
    assert read_table(tmp_path / "store", "ingests").height == 0  # nothing committed


def test_folder_reads_json_files(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.json").write_text(json.dumps(answer(util([[T0, "1"]], gpu="0"))))
    (tmp_path / "in" / "b.jsonl").write_text(json.dumps(answer(util([[T0, "2"]], gpu="1"))))
    (tmp_path / "in" / "notes.txt").write_text("not read")
    report = ingest(LOADERS["prometheus-range"], tmp_path / "in", tmp_path / "store")
    assert [(r.file, r.dataset, r.rows_written) for r in report.lines] == [
        ("a.json", "a", 1),
        ("b.jsonl", "b", 1),
    ]


# -- hypothesis: any structure, any values; never a crash, always read = written + quarantined

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=True),
    st.text(max_size=6),
)
values = st.one_of(
    st.sampled_from(["0", "1", "43", "99.5", "NaN", "+Inf", "-Inf", "1e400", "", "x"]),
    scalars,
)
times = st.one_of(st.integers(T0 - 10, T0 + 10).map(float), st.floats(allow_nan=True), scalars)
pairs = st.one_of(st.tuples(times, values).map(list), st.lists(scalars, max_size=3), scalars)
names = st.sampled_from(
    [
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_XID_ERRORS",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_FB_TOTAL",
        "up",
    ]
)
metrics = st.one_of(
    st.fixed_dictionaries(
        {"__name__": names},
        optional={"gpu": st.sampled_from(["0", "1", "x"]), "Hostname": st.just("n")},
    ),
    scalars,
)
series = st.one_of(
    st.fixed_dictionaries(
        {"metric": metrics, "values": st.one_of(st.lists(pairs, max_size=6), scalars)}
    ),
    scalars,
)
responses = st.one_of(
    st.lists(series, max_size=4).map(lambda s: answer(*s)),
    st.fixed_dictionaries({"status": st.sampled_from(["success", "error", 3])}),
    scalars,
)


def expected_records(doc: object) -> int:
    """The documented counting rule, written independently of the parser."""
    if not (
        isinstance(doc, dict)
        and doc.get("status") == "success"
        and isinstance(doc.get("data"), dict)
        and doc["data"].get("resultType") in ("matrix", "vector")
        and isinstance(doc["data"].get("result"), list)
    ):
        return 1
    n = 0
    for s in doc["data"]["result"]:
        ok = isinstance(s, dict) and isinstance(s.get("metric", {}), dict)
        vals = s.get("values") if isinstance(s, dict) else None
        n += len(vals) if ok and isinstance(vals, list) else 1
    return n


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(docs=st.lists(responses, min_size=1, max_size=4))
def test_fuzz_json_lines_reconcile(
    tmp_path_factory: pytest.TempPathFactory, docs: list[object]
) -> None:
    tmp = tmp_path_factory.mktemp("fz")
    f = tmp / "f.jsonl"
    # two lines at least, so the file is JSON lines; the first line is a whole document
    body = [json.dumps(d, allow_nan=True) for d in [*docs, answer()]]
    f.write_text("\n".join(body) + "\n")
    try:
        batches = list(promrange.PromRangeLoader().batches(f))
    except InputError as exc:
        assert "no samples" in str(exc)
        assert sum(expected_records(d) for d in docs) == 0
        return
    samples = next(b for b in batches if b.table == "gpu_samples")
    events = [b for b in batches if b.table == "events"]
    no_event = int(samples.metadata["no_event_cells"])
    got = samples.rows.lazy().collect().height
    q = samples.rejected.lazy().collect().height if samples.rejected is not None else 0
    ev = sum(b.rows.lazy().collect().height for b in events)
    assert samples.rows_read == got + q
    assert got + q + ev + no_event == sum(expected_records(d) for d in docs)


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.binary(max_size=300))
def test_fuzz_bytes_never_crash(tmp_path_factory: pytest.TempPathFactory, data: bytes) -> None:
    f = tmp_path_factory.mktemp("fb") / "f.json"
    f.write_bytes(data)
    try:
        batches = list(promrange.PromRangeLoader().batches(f))
    except InputError:
        return
    for b in batches:
        rows = b.rows.lazy().collect().height
        q = b.rejected.lazy().collect().height if b.rejected is not None else 0
        assert b.rows_read == rows + q


def test_lone_surrogates_are_replaced_not_a_crash(tmp_path: Path) -> None:
    # the fuzz campaign (seed 1, case 46) found raw bytes of a lone surrogate, which
    # json.loads accepts; JSON's escape form does the same: Python keeps it in a str,
    # no UTF-8 column can hold it
    f = tmp_path / "s.json"
    f.write_text(
        '{"status":"success","data":{"resultType":"matrix","result":[{"metric":'
        '{"__name__":"DCGM_FI_DEV_GPU_UTIL","Hostname":"n\\ud800"},'
        '"values":[[1767225600,"1\\udc00"],[1767225660,"2"]]}]}}'
    )
    store = tmp_path / "store"
    code, _, err = run(f, store)
    assert code == 0, err
    s = read_table(store, "gpu_samples")
    assert s.select("host", "value").rows() == [("n\ufffd\ufffd\ufffd", 2.0)]
    assert read_table(store, "quarantine")["locator"].to_list() == ["series 1, sample 1"]


def test_pull_window_and_chunks_by_hand() -> None:
    from gpu_trace.errors import GpuTraceError
    from gpu_trace.telemetry.promclient import Window, parse_when, unix

    now = 1767225600_000
    assert parse_when("now", now) == now
    assert parse_when("now-6h", now) == now - 6 * 3600_000
    assert parse_when("2026-01-01T01:00:00", now) == now + 3600_000  # naive = UTC
    assert parse_when("2026-01-01T02:00:00+01:00", now) == now + 3600_000
    assert parse_when("1767225600.25", now) == now + 250
    with pytest.raises(GpuTraceError, match="is not a time"):
        parse_when("yesterday", now)
    # 0..100 s every 10 s = 11 points; 4 per request: 0-30, 40-70, 80-100
    w = Window(0, 100_000, 10_000)
    assert w.points == 11
    assert w.chunks(4) == [(0, 30_000), (40_000, 70_000), (80_000, 100_000)]
    assert w.chunks(11) == [(0, 100_000)]
    # an end between two steps: the last evaluation time is 90 s
    assert Window(0, 95_000, 10_000).chunks(5) == [(0, 40_000), (50_000, 90_000)]
    assert unix(1767225600_250) == "1767225600.250"
    with pytest.raises(GpuTraceError, match="before --start"):
        Window(10, 0, 1)
    with pytest.raises(GpuTraceError, match=r"--max-points must be 1\.\.11000"):
        w.chunks(11_001)
