"""philly: unit tests (parsers, fast paths, property-based tests).

The Philly loader: a hand-written ``trace-data/`` fixture with hand-computed values,
the real machine list (checked with stdlib csv), the real marwage job rows converted
back to the raw job-log format (checked with stdlib json + zoneinfo), fuzzing of both
parsers, and the synthetic generator.
"""

from __future__ import annotations

import hashlib
import json

import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpu_trace.errors import InputError
from gpu_trace.loaders import LOADERS, ingest, philly_json
from gpu_trace.store.parquet import dataset_path

# --- fuzzing -----------------------------------------------------------------------------

TIMES = st.sampled_from(
    ["2017-10-07 01:12:09", "None", "", "2017-11-05 01:30:00", "2017-03-12 02:30:00", "x"]
)
ATTEMPT = st.fixed_dictionaries(
    {
        "start_time": TIMES,
        "end_time": TIMES,
        "detail": st.lists(
            st.fixed_dictionaries(
                {
                    "ip": st.sampled_from(["m1", "m2", ""]),
                    "gpus": st.lists(st.sampled_from(["gpu0", "gpu7", "gpu", "GPU1"]), max_size=3),
                }
            ),
            max_size=2,
        ),
    }
)
RECORD = st.fixed_dictionaries(
    {
        "status": st.sampled_from(["Pass", "Killed", "Failed", "None"]),
        "jobid": st.text(min_size=0, max_size=6),
        "attempts": st.lists(ATTEMPT, max_size=3),
        "submitted_time": TIMES,
    }
)
ELEMENT = st.one_of(
    RECORD,
    RECORD,
    st.integers(),
    st.none(),
    st.text(max_size=5),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.sampled_from(["jobid", "attempts", "user"]), st.integers(), max_size=2),
)
FUZZ = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@FUZZ
@given(
    records=st.lists(ELEMENT, max_size=8),
    indent=st.sampled_from([None, 1]),
    cut=st.one_of(st.none(), st.integers(0, 2000)),
    tail=st.binary(max_size=6),
)
def test_fuzz_job_log(
    tmp_path_factory: pytest.TempPathFactory,
    records: list[object],
    indent: int | None,
    cut: int | None,
    tail: bytes,
) -> None:
    root = tmp_path_factory.mktemp("fuzzlog")
    data = json.dumps(records, indent=indent).encode()
    if cut is not None:
        data = data[:cut] + tail
    (root / "cluster_job_log").write_bytes(data)
    try:
        is_array = isinstance(json.loads(data), list)
    except ValueError:
        is_array = False
    try:
        report = ingest(LOADERS["philly"], root, root / "store")
    except InputError as exc:
        assert str(root / "cluster_job_log") in str(exc)
        assert not is_array, "a valid JSON array must not fail as a whole"
        return
    jobs = next(r for r in report.lines if r.table == "jobs")
    assert jobs.rows_read == jobs.rows_written + jobs.rows_quarantined
    if is_array:
        assert jobs.rows_read == len(json.loads(data))
        good = sum(
            1
            for r in json.loads(data)
            if isinstance(r, dict) and r.get("jobid") and isinstance(r.get("attempts"), list)
        )
        assert jobs.rows_written <= good


@settings(max_examples=60, deadline=None)
@given(data=st.binary(max_size=200), chunk=st.integers(1, 40))
def test_fuzz_split_is_chunk_independent(
    tmp_path_factory: pytest.TempPathFactory, data: bytes, chunk: int
) -> None:
    """The same bytes split the same way whatever the chunk size: quotes, escapes and
    brackets that straddle chunk boundaries carry over correctly."""
    root = tmp_path_factory.mktemp("chunks")
    f = root / "cluster_job_log"
    payload = b'[{"a": "x\\\\", "b": "q\\"[,"}, ' + data + b', {"c": [1, {"d": ","}]}]'
    f.write_bytes(payload)

    def split(size: int) -> tuple[str, int] | str:
        work = root / f"w{size}"
        work.mkdir(exist_ok=True)
        philly_json._CHUNK = size  # type: ignore[misc]
        try:
            s = philly_json.split_array(f, work)
            return s.lines.read_text(), s.info.records
        except InputError as exc:
            return str(exc)
        finally:
            philly_json._CHUNK = 1 << 24  # type: ignore[misc]

    assert split(chunk) == split(1 << 24)
    try:
        parsed = json.loads(payload)
    except ValueError:
        return
    result = split(1 << 24)
    assert not isinstance(result, str) and result[1] == len(parsed)


@settings(max_examples=60, deadline=None)
@given(
    records=st.lists(ELEMENT, max_size=6),
    indent=st.sampled_from([None, 2]),
    cut=st.one_of(st.none(), st.integers(0, 600)),
    extra=st.sampled_from(["", ",", ", ", "]", "}", " x", ",]"]),
)
def test_fuzz_fast_path_agrees_with_numpy_split(
    tmp_path_factory: pytest.TempPathFactory,
    records: list[object],
    indent: int | None,
    cut: int | None,
    extra: str,
) -> None:
    """Whenever DuckDB's reader accepts a file, the numpy split (the reference for
    broken files) finds the same records with the same text."""
    root = tmp_path_factory.mktemp("paths")
    data = json.dumps(records, indent=indent).encode()
    data = (data if cut is None else data[:cut]) + extra.encode()
    f = root / "cluster_job_log"
    f.write_bytes(data)
    (root / "a").mkdir()
    (root / "b").mkdir()
    try:
        fast = philly_json.read_records(f, root / "a")
    except InputError:
        with pytest.raises(InputError):
            philly_json.split_array(f, root / "b")
        return
    split = philly_json.split_array(f, root / "b")
    lines = split.frame["_raw"].to_list()
    assert fast.info.records == split.info.records
    assert fast.closed == split.closed
    assert [" ".join(t.split()) for t in fast.lines["_raw"]] == [" ".join(t.split()) for t in lines]
    assert fast.info.sha256 == split.info.sha256 == hashlib.sha256(data).hexdigest()


UTIL_HEADER = "time,machineId,gpu0_util,gpu1_util"
UTIL_FIELD = st.sampled_from(
    [
        *("2017-11-05 01:30:00 PST", "2017-11-05 01:30:00 PDT", "2017-12-01 00:00:00 PDT"),
        *("m1", "NA", "", "12.5", "-1", "nan", "1e3", "abc", "0", " 3"),
    ]
)
UTIL_LINE = st.lists(UTIL_FIELD, min_size=0, max_size=6).map(",".join)


@FUZZ
@given(lines=st.lists(UTIL_LINE, max_size=10), tail=st.binary(max_size=8))
def test_fuzz_util(tmp_path_factory: pytest.TempPathFactory, lines: list[str], tail: bytes) -> None:
    root = tmp_path_factory.mktemp("fuzzutil")
    (root / "cluster_job_log").write_text("[]")
    data = (UTIL_HEADER + "\n" + "\n".join(lines)).encode() + tail
    f = root / "cluster_gpu_util"
    f.write_bytes(data)
    try:
        report = ingest(LOADERS["philly"], root, root / "store")
    except InputError as exc:
        assert str(f) in str(exc)
        return
    util = next(r for r in report.lines if r.table == "gpu_samples")
    assert util.rows_read == util.rows_written + util.rows_quarantined
    meta = pq.read_metadata(dataset_path(root / "store", "gpu_samples", "philly", "gpu_util"))
    kv = meta.metadata
    physical = data.count(b"\n") + (0 if data.endswith(b"\n") else 1) - 1
    assert int(kv[b"gpu_trace.file_rows"]) == physical
    assert (
        int(kv[b"gpu_trace.rows_with_samples"])
        + int(kv[b"gpu_trace.rows_all_na"])
        + int(kv[b"gpu_trace.rows_quarantined"])
        == physical
    )
